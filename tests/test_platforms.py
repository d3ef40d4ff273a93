"""The platform rules (lab.runtime.platforms): native Windows refused, the RocksDB an old Kafka Streams gets on arm64; and,
live, an old Kafka Streams app whose stores run on the pinned RocksDB (on this machine's native library)."""
import re

import pytest

from lab.errors import LabError
from lab.runtime.platforms import platform_problem, rocksdb_for
from lab.runtime.processes import spawn_java, wait_until
from lab.runtime.programs import compile_sources, streams_classpath


@pytest.mark.parametrize("system", ["win32", "cygwin"])
def test_native_windows_is_refused_with_the_way_that_works(system):
    problem = platform_problem(system)
    assert "WSL2" in problem and "KAFKA-1194" in problem and "winutils" in problem and "\n" not in problem


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_linux_and_macos_are_accepted(system):
    assert platform_problem(system) is None


@pytest.mark.parametrize("version, machine, system, pin", [
    ("2.7.2", "x86_64", "darwin", None),       # librocksdbjni-osx.jnilib is x86_64
    ("2.7.2", "aarch64", "linux", None),       # 5.18.4 has librocksdbjni-linux-aarch64.so
    ("2.5.1", "aarch64", "linux", "5.18.4"),   # 5.18.3 has none
    ("2.1.1", "aarch64", "linux", "5.18.4"),
    ("2.5.1", "x86_64", "linux", None),
    ("3.0.0", "arm64", "darwin", "6.29.4.1"),  # 6.19.3 has no osx-arm64 library
    ("3.1.2", "arm64", "darwin", "6.29.4.1"),
    ("3.2.0", "arm64", "darwin", None),        # brings 6.29.4.1
    ("3.3.1", "arm64", "darwin", None),
    ("4.3.1", "arm64", "darwin", None),
    ("3.1.2", "arm64", "linux", None),
])
def test_the_rocksdb_an_old_kafka_streams_gets(version, machine, system, pin):
    assert rocksdb_for(version, machine, system) == pin


@pytest.mark.parametrize("version", ["2.7.2", "2.8.2", "2.1.1"])
def test_streams_before_3_0_are_refused_on_apple_silicon(version):
    """No rocksdbjni both has an osx-arm64 library and opens their stores (rocksdb_for's docstring)."""
    with pytest.raises(LabError, match=rf"Kafka Streams {version} .*macOS arm64.*3\.0\.0 or later") as refused:
        rocksdb_for(version, "arm64", "darwin")
    assert "\n" not in str(refused.value)


# ---------------------------------------------------------------- live: the pin on this machine

ROCKS_CHECK = """
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

import java.time.Duration;
import java.time.Instant;
import java.util.Properties;

/** A DSL table (RocksDB key-value store) and a windowed count (RocksDB segments) written, then read back. */
public class RocksCheck {
    public static void main(String[] args) throws Exception {
        StreamsBuilder b = new StreamsBuilder();
        b.table("in", Consumed.with(Serdes.String(), Serdes.String()),
                Materialized.<String, String>as(Stores.persistentKeyValueStore("kv"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
        b.stream("clicks", Consumed.with(Serdes.String(), Serdes.String())).groupByKey()
                .windowedBy(TimeWindows.of(Duration.ofMinutes(1)))
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("win"));
        Properties props = new Properties();
        props.put("application.id", "rocks-check");
        props.put("bootstrap.servers", "localhost:1");
        props.put("state.dir", args[0]);
        props.put("metrics.recording.level", "DEBUG");
        long base = 1_700_000_000_000L, all = 0, rows = 0, metrics = 0, failed = 0;
        System.out.println("rocksdbjni " + org.rocksdb.RocksDB.class.getProtectionDomain().getCodeSource().getLocation());
        try (TopologyTestDriver d = new TopologyTestDriver(b.build(), props)) {
            TestInputTopic<String, String> in = d.createInputTopic("in", new StringSerializer(), new StringSerializer());
            TestInputTopic<String, String> clicks = d.createInputTopic("clicks", new StringSerializer(), new StringSerializer());
            for (int i = 0; i < 1000; i++) {
                in.pipeInput("k" + i, "v" + i, Instant.ofEpochMilli(base + i * 1000L));
                clicks.pipeInput("k" + (i % 10), "c", Instant.ofEpochMilli(base + i * 1000L));
            }
            KeyValueStore<String, String> kv = d.getKeyValueStore("kv");
            WindowStore<String, Long> win = d.getWindowStore("win");
            try (KeyValueIterator<String, String> it = kv.all()) {
                while (it.hasNext()) { it.next(); all++; }
            }
            try (WindowStoreIterator<Long> it = win.fetch("k3", Instant.ofEpochMilli(base), Instant.ofEpochMilli(base + 3_600_000L))) {
                while (it.hasNext()) { it.next(); rows++; }
            }
            for (Object m : d.metrics().values()) {   // KIP-607's RocksDB properties among them
                KafkaMetric metric = (KafkaMetric) m;
                if (!metric.metricName().group().contains("state")) continue;
                try { metric.metricValue(); metrics++; } catch (Throwable t) { failed++; System.out.println(metric.metricName() + ": " + t); }
            }
            System.out.println("kv.get(k500)=" + kv.get("k500") + " kv.all=" + all + " win.fetch(k3)=" + rows
                    + " state metrics read=" + metrics + " failed=" + failed);
        }
        System.out.println("RocksCheck OK");
    }
}
"""


@pytest.mark.timeout(180)   # about 10 s each once the jars are cached
@pytest.mark.parametrize("version, machine, system, pin", [
    ("3.1.2", "arm64", "darwin", "6.29.4.1"),   # Apple Silicon's pin, in place of 6.22.1.1
    ("2.5.1", "aarch64", "linux", "5.18.4"),    # Linux arm64's pin, in place of 5.18.3
])
def test_an_old_kafka_streams_stores_work_on_the_pinned_rocksdb(tmp_path, version, machine, system, pin):
    """The platform is only pretended: the pinned jar's library for this machine runs, against the old Streams code
    (the API is the same on every architecture; 2.7.2 with 6.29.4.1 fails here, which is why it is refused)."""
    cp = streams_classpath(version, extra=[f"org.apache.kafka:kafka-streams-test-utils:{version}"],
                           machine=machine, system=system)
    assert [j.name for j in cp if j.name.startswith("rocksdbjni-")] == [f"rocksdbjni-{pin}.jar"]
    source = tmp_path / "RocksCheck.java"
    source.write_text(ROCKS_CHECK)
    classes = compile_sources([source], cp, label=f"RocksCheck-{version}")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "log4j.properties").write_text("log4j.rootLogger=WARN, out\n"
                                               "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
                                               "log4j.appender.out.layout=org.apache.log4j.SimpleLayout\n")
    app = spawn_java("rocks-check", [classes, *cp], "RocksCheck", [str(tmp_path / "state")], tmp_path / "app.log",
                     heap="256m", jvm_options=[f"-Djava.io.tmpdir={tmp_path / 'tmp'}",   # RocksDB unpacks there
                                               f"-Dlog4j.configuration=file:{tmp_path / 'log4j.properties'}"])
    try:
        wait_until(lambda: not app.alive(), 60, f"RocksCheck on Kafka Streams {version} to finish")
    finally:
        app.stop()
    log = app.log()
    assert app.returncode() == 0, log[-3000:]
    assert f"rocksdbjni-{pin}.jar" in re.search(r"^rocksdbjni (.*)$", log, re.M).group(1)
    assert "kv.get(k500)=v500 kv.all=1000 win.fetch(k3)=16 " in log and "failed=0" in log, log[-3000:]
    assert "RocksCheck OK" in log


def test_a_stateless_old_streams_app_runs_on_apple_silicon_and_one_with_stores_is_refused():
    """Notebook 07's bounce app (2.7.2, no state store) never loads RocksDB: nothing to pin or refuse."""
    from lab.runtime.programs import streams_classpath
    jars = {p.name for p in streams_classpath("2.7.2", stores=False, machine="arm64", system="darwin")}
    assert "kafka-streams-2.7.2.jar" in jars and "rocksdbjni-5.18.4.jar" in jars
    with pytest.raises(LabError, match="macOS arm64"):
        streams_classpath("2.7.2", machine="arm64", system="darwin")
