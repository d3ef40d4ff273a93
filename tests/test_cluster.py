"""The embedded cluster against the real broker: lifecycle, faults, quotas, Spark, bad input."""
import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from lab.cluster import ExternalCluster, KafkaCluster, ZooKeeperKafkaCluster, kafka_cluster
from lab.cluster.kraft import BASE_BROKER_CONFIG, known_broker_configs
from lab.runtime.ports import free_port
from lab.runtime.versions import is_zookeeper_version, parse_version
from lab.config import BOOTSTRAP_ENV, COMPOSE_CLUSTER_ID, KAFKA_VERSION, WRITABLE_CLUSTER_ENV
from lab.errors import LabError
from lab.runtime.processes import wait_until

ROOT = Path(__file__).resolve().parent.parent


def produce(bootstrap, topic, n, **conf):
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    for i in range(n):
        p.produce(topic, key=str(i), value=f"v{i}")
    assert p.flush(30) == 0
    return p


def consume_all(bootstrap, topic, expected, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    values, deadline = [], time.monotonic() + timeout
    while len(values) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            values.append(m.value().decode())
    c.close()
    return values


@pytest.fixture(scope="module")
def one_node():
    with KafkaCluster(name="test-1node") as c:
        yield c


def test_single_node_produces_consumes_and_survives_kill_9(one_node):
    produce(one_node.bootstrap, "lifecycle", 10)
    pid = one_node._node(1).process.pid
    one_node.kill_node(1)
    assert not one_node._node(1).process.alive()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    one_node.start_node(1)
    produce(one_node.bootstrap, "lifecycle", 10)
    assert len(consume_all(one_node.bootstrap, "lifecycle", 20)) == 20
    # the log is captured and searchable, with one marker per start
    assert len(one_node.grep_log(r"lab: start #")) == 2
    assert one_node.grep_log(r"Kafka Server started|KafkaRaftServer.*started|started \(kafka")


def test_clean_restart_keeps_data(one_node):
    produce(one_node.bootstrap, "restart", 5)
    one_node.restart_node(1)
    assert len(consume_all(one_node.bootstrap, "restart", 5)) == 5


def test_quota_produces_a_nonzero_throttle_time(one_node):
    one_node.set_quota("throttled-producer", producer_byte_rate=2048)
    assert one_node.quotas("throttled-producer") == {"producer_byte_rate": 2048.0}
    throttles = []
    p = Producer({"bootstrap.servers": one_node.bootstrap, "client.id": "throttled-producer",
                  "linger.ms": 5, "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    # 40 kB at once is twice what the broker's 10 s rate window allows at 2 kB/s, so it must throttle;
    # delivering it at the quota takes about 20 s (300 kB took 146 s and could not flush in 60 s)
    payload = b"x" * 1000
    for i in range(40):
        p.produce("quota", value=payload)
        p.poll(0)
    assert p.flush(60) == 0
    p.poll(1)
    assert max(throttles, default=0) > 0, "the broker never throttled a producer twice over its quota"
    one_node.remove_quota("throttled-producer")
    assert one_node.quotas("throttled-producer") == {}


def test_three_nodes_elect_a_new_leader_after_kill_9():
    with KafkaCluster(nodes=3, name="test-3node") as c:
        admin = c.admin()
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
        # the leader as one reading saw it: a second reading may find the partition between leaders (-1)
        old = wait_until(lambda: (lambda l: l if l in c.node_ids else None)(c.leader_of("replicated")), 30,
                         "a leader for 'replicated'")
        c.kill_node(old)
        new = wait_until(lambda: (lambda l: l if l not in (old, -1) else None)(c.leader_of("replicated")),
                         60, "a new leader")
        assert new != old and new in c.alive_nodes()
        produce(c.bootstrap, "replicated", 5, acks="all")


def test_spark_reads_committed_and_uncommitted(one_node):
    from lab.audit.spark import read_topic
    p = Producer({"bootstrap.servers": one_node.bootstrap, "transactional.id": "spark-test"})
    p.init_transactions()
    p.begin_transaction()
    p.produce("txn", key="a", value="committed")
    p.commit_transaction()
    p.begin_transaction()
    p.produce("txn", key="b", value="aborted")
    p.flush()
    p.abort_transaction()
    committed = [r.value for r in read_topic(one_node.bootstrap, "txn", "read_committed").collect()]
    uncommitted = [r.value for r in read_topic(one_node.bootstrap, "txn", "read_uncommitted").collect()]
    assert committed == ["committed"]
    assert sorted(uncommitted) == ["aborted", "committed"]


def test_the_topic_reader_reads_committed_or_not_to_the_end_or_until_done(one_node):
    import json
    from types import SimpleNamespace
    from lab.toolbox.consume import TopicReader, read_committed, read_to_end
    p = Producer({"bootstrap.servers": one_node.bootstrap, "transactional.id": "reader-test"})
    p.init_transactions()
    for ids, commit in (([1, 2], True), ([3], False), ([4], True)):
        p.begin_transaction()
        for i in ids:
            p.produce("read-me", key=str(i), value=json.dumps({"id": i}))
        p.flush()
        p.commit_transaction() if commit else p.abort_transaction()
    raw = read_to_end(one_node.bootstrap, "read-me")            # every record, aborted included, as tuples
    assert sorted(json.loads(value)["id"] for _, value, _ in raw) == [1, 2, 3, 4]
    assert all(isinstance(ts, float) for *_, ts in raw)
    run = SimpleNamespace(bootstrap=one_node.bootstrap,
                          wait=lambda ok, timeout, what, **kw: wait_until(ok, timeout, what))
    rows = read_committed(run, "read-me", lambda rows: {1, 2, 4} <= {r["id"] for r in rows})
    assert sorted(r["id"] for r in rows) == [1, 2, 4] and {"partition", "offset", "kafka_ts"} <= set(rows[0])
    with TopicReader(one_node.bootstrap, "read-me") as kept_open:
        assert kept_open.ids() == {1, 2, 4}
        produce(one_node.bootstrap, "read-me", 1)                  # a plain record, not JSON, arrives later
        wait_until(lambda: len(kept_open.drain()) == 4, 30, "the new record")
        assert "raw" in kept_open.rows[-1]


def test_jvms_die_when_their_python_parent_is_killed(tmp_path):
    """kill -9 the process that started the brokers: the brokers must not survive it."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from lab.cluster import KafkaCluster
        c = KafkaCluster(name="orphan-test").start()
        print("PIDS", c._node(1).process.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    line = ""
    while not line.startswith("PIDS"):
        line = parent.stdout.readline()
        assert line or parent.poll() is None, "the parent process died before starting the broker"
    jvm = int(line.split()[1])
    assert psutil.pid_exists(jvm)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    wait_until(lambda: not psutil.pid_exists(jvm), 20, f"broker JVM {jvm} to die with its parent")


# ---------------------------------------------------------------- capabilities (no broker needed)

@pytest.mark.parametrize("version, era", [("4.3.1", KafkaCluster), ("3.3.0", KafkaCluster), ("3.9.1", KafkaCluster),
                                          ("3.2.3", ZooKeeperKafkaCluster), ("2.0.1", ZooKeeperKafkaCluster)])
def test_kafka_cluster_chooses_the_era_by_version(version, era, monkeypatch):
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    cluster = kafka_cluster(version=version, name="era")
    assert type(cluster) is era and cluster.version == version and not cluster.running
    assert is_zookeeper_version(version) == (era is ZooKeeperKafkaCluster)
    with pytest.raises(LabError, match="not of the form"):
        parse_version("3.9")


def test_embedded_clusters_own_their_broker_and_say_what_fits():
    cluster = KafkaCluster(nodes=3, version="3.9.1", broker_config={"offsets.retention.minutes": 1}, name="fits")
    assert cluster.owns_broker and not cluster.running       # not started yet
    assert cluster.fits(3, "3.9.1", {})
    assert cluster.fits(3, "3.9.1", {"offsets.retention.minutes": "1"})
    assert cluster.fits(3, "3.9.1", {"group.initial.rebalance.delay.ms": 0})   # a base setting it runs with
    assert not cluster.fits(1, "3.9.1", {})
    assert not cluster.fits(3, KAFKA_VERSION, {})
    assert not cluster.fits(3, "3.9.1", {"offsets.retention.minutes": 2})
    assert not cluster.fits(3, "3.9.1", {"transactional.id.expiration.ms": 10000})
    assert BASE_BROKER_CONFIG["group.initial.rebalance.delay.ms"] == "0"
    assert ZooKeeperKafkaCluster(version="2.4.1", name="zk").owns_broker


def test_an_extra_listener_is_written_fitted_and_refused_where_it_cannot_be(tmp_path):
    from lab.cluster.kraft import Node
    cluster = KafkaCluster(nodes=3, name="extra", extra_listener="APPS")
    assert cluster.fits(3, KAFKA_VERSION, {}) and cluster.fits(3, KAFKA_VERSION, {}, extra_listener="APPS")
    assert not KafkaCluster(nodes=3, name="plain").fits(3, KAFKA_VERSION, {}, extra_listener="APPS")
    cluster._nodes = [Node(1, 9001, 9002, tmp_path / "n1", extra_port=9003)]
    config = lambda: dict(line.split("=", 1) for line in  # noqa: E731
                          (tmp_path / "n1" / "server.properties").read_text().splitlines())
    cluster._write_config(cluster._nodes[0])
    assert config()["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001,APPS://127.0.0.1:9003"
    assert config()["listener.security.protocol.map"].endswith(",APPS:PLAINTEXT")
    cluster._write_config(cluster._nodes[0], extra=False)    # a restart that lost it from server.properties
    assert config()["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001"
    assert "APPS" not in config()["listeners"]
    assert cluster.listener_bootstrap("APPS") == "127.0.0.1:9003"
    with pytest.raises(LabError, match="no listener 'OTHER'"):
        cluster.listener_bootstrap("OTHER")
    for bad in ("apps", "PLAINTEXT"):
        with pytest.raises(LabError, match="extra_listener"):
            KafkaCluster(name="bad", extra_listener=bad)
    with pytest.raises(LabError, match="extra_listener"):
        KafkaCluster(name="bad", extra_listener="APPS", sasl_users={"alice": "secret"})
    with pytest.raises(LabError, match="KRaft"):
        ZooKeeperKafkaCluster(version="2.4.1", name="zk", extra_listener="APPS")


def test_an_external_cluster_is_borrowed_not_owned():
    external = object.__new__(ExternalCluster)   # no broker to contact: only its capabilities
    assert ExternalCluster.owns_broker is False and external.running is True
    assert external.fits(3, "2.0.1", {"anything": 1})   # its configs are checked by require_broker_config


# ---------------------------------------------------------------- bad input: clear errors, nothing started

def test_unknown_broker_config_is_refused_before_start():
    c = KafkaCluster(name="bad-config", broker_config={"offsets.retention.minute": 1})
    with pytest.raises(LabError, match=r"no broker config 'offsets.retention.minute'.*offsets.retention.minutes"):
        c.start()
    assert c.alive_nodes() == [] and not c.folder.exists()


def test_unknown_kafka_version_is_refused():
    with pytest.raises(LabError, match="not of the form"):
        KafkaCluster(version="latest")
    with pytest.raises(LabError, match="Maven Central has no artifact .*kafka_2.13:3.99.1"):
        KafkaCluster(version="3.99.1", name="bad-version").start()


def test_busy_port_is_refused(one_node):
    busy = one_node._node(1).port
    with pytest.raises(LabError, match=rf"Port\(s\) \[{busy}\] on 127.0.0.1 are in use"):
        KafkaCluster(name="busy", ports=[busy]).start()


def test_silent_bootstrap_server_is_refused(monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv(BOOTSTRAP_ENV, f"127.0.0.1:{port}")
    with pytest.raises(LabError, match="does not answer"):
        kafka_cluster()


def test_lessons_never_write_to_a_cluster_nobody_named_writable(one_node, monkeypatch):
    """KAFKA_LAB_BOOTSTRAP alone (set for a diagnosis, say) sends no lesson to someone's cluster: only the Compose
    broker's id, or the id the user names, is taken."""
    monkeypatch.setenv(BOOTSTRAP_ENV, one_node.bootstrap)
    monkeypatch.delenv(WRITABLE_CLUSTER_ENV, raising=False)
    with pytest.raises(LabError) as refused:
        kafka_cluster()
    message = str(refused.value)
    assert one_node.cluster_id in message and "make doctor BOOTSTRAP=" in message and "\n" not in message
    monkeypatch.setenv(WRITABLE_CLUSTER_ENV, "another-clusters-id")
    with pytest.raises(LabError, match=one_node.cluster_id):
        kafka_cluster()
    monkeypatch.setenv(WRITABLE_CLUSTER_ENV, one_node.cluster_id)
    assert kafka_cluster().cluster_id == one_node.cluster_id


def test_the_compose_broker_is_known_by_its_cluster_id(monkeypatch):
    from lab.cluster.external import writable
    monkeypatch.delenv(WRITABLE_CLUSTER_ENV, raising=False)
    assert writable(COMPOSE_CLUSTER_ID) and not writable("5L6g3nShT-eMCtK--X86sw") and not writable(None)
    assert f"CLUSTER_ID: {COMPOSE_CLUSTER_ID}" in (Path(__file__).parent.parent / "docker-compose.yml").read_text()
    assert base64.urlsafe_b64decode(COMPOSE_CLUSTER_ID + "==") == b"kafka-failure-la"   # 16 bytes: a valid Uuid


def test_external_cluster_says_what_it_cannot_do(one_node, monkeypatch):
    monkeypatch.setenv(BOOTSTRAP_ENV, one_node.bootstrap)
    monkeypatch.setenv(WRITABLE_CLUSTER_ENV, one_node.cluster_id)
    external = kafka_cluster()
    assert isinstance(external, ExternalCluster)
    with pytest.raises(LabError, match="kill a broker"):
        external.kill_node(1)
    with pytest.raises(LabError, match="set client quotas"):
        external.set_quota("x", producer_byte_rate=1)
    with pytest.raises(LabError, match=r"offsets.retention.minutes=1 \(cluster has 10080\)"):
        kafka_cluster(broker_config={"offsets.retention.minutes": 1})
    for asked, said in (({"nodes": 3}, "3 brokers"), ({"version": "2.0.1"}, "a Kafka 2.0.1 broker"),
                        ({"extra_listener": "APPS"}, "a second listener")):
        with pytest.raises(LabError, match=f"This needs {said}, which only the lab's own cluster gives"):
            kafka_cluster(**asked)


# ---------------------------------------------------------------- docker-compose.yml

@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed (make tools)")
def test_compose_file_is_valid_and_matches_the_lab():
    compose = ROOT / "docker-compose.yml"
    run = subprocess.run(["docker-compose", "-f", str(compose), "config"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert f"image: apache/kafka:{KAFKA_VERSION}" in text
    assert "127.0.0.1:9092" in text and "0.0.0.0" not in text
    assert "healthcheck" in text
    # every KAFKA_* setting is a real broker config of that version
    # ('listeners' is defined outside the ConfigDef that BrokerConfigNames lists)
    known = known_broker_configs(KAFKA_VERSION) | {"listeners"}
    keys = [k.lower().replace("_", ".") for k in re.findall(r"KAFKA_([A-Z_]+):", text)]
    assert keys and all(k in known for k in keys), [k for k in keys if k not in known]


def test_kafka_3_9_broker_runs_too():
    """The launcher's other supported line: 3.9.x (log4j 1 / reload4j logging)."""
    with KafkaCluster(version="3.9.1", name="test-391") as c:
        produce(c.bootstrap, "on-391", 3)
        assert len(consume_all(c.bootstrap, "on-391", 3)) == 3
        assert c.grep_log(r"Kafka version: 3\.9\.1")
