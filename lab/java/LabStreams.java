import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * Lab's helpers that need Kafka Streams (compile it beside the program and Lab.java: JavaProgram sources
 * ["MyApp.java", "Lab.java", "LabStreams.java"]). Only APIs present since Kafka Streams 2.x, so programs at old
 * versions (BounceApp at 2.7) compile too. Its LAB lines are Lab.emit's.
 */
public final class LabStreams {
    private LabStreams() {
    }

    /**
     * lab.input.topic -> the processor `name` -> lab.output.topic, String keys and values: the topology of the
     * pass-through apps (source "input", sink "output").
     */
    public static Topology passThrough(String name, ProcessorSupplier<String, String, String, String> work) {
        Topology topology = new Topology();
        topology.addSource("input", Serdes.String().deserializer(), Serdes.String().deserializer(),
                Lab.setting("input.topic"));
        topology.addProcessor(name, work, "input");
        topology.addSink("output", Lab.setting("output.topic"), Serdes.String().serializer(),
                Serdes.String().serializer(), name);
        return topology;
    }

    /** Log state changes, start, and close cleanly on SIGTERM (kill -9 is the unclean case); blocks. */
    public static void runUntilSigterm(KafkaStreams streams) throws InterruptedException {
        runUntilSigterm(streams, () -> {
            streams.close(Duration.ofSeconds(20));
            Lab.emit("closed");
        });
    }

    /** The same with a close of the program's own (what it closes with, what it says once closed). */
    public static void runUntilSigterm(KafkaStreams streams, Runnable close) throws InterruptedException {
        runUntilSigterm(streams, close, () -> { });
    }

    /** The same, with what the program does once its client started (a reporter thread, say). */
    public static void runUntilSigterm(KafkaStreams streams, Runnable close, Runnable started)
            throws InterruptedException {
        CountDownLatch closed = Lab.onSigterm(close);
        streams.setStateListener(stateLogger());
        streams.start();
        started.run();
        closed.await();
    }

    /** The client's state changes as LAB lines: {"kind":"state","from":..,"to":..}. */
    public static KafkaStreams.StateListener stateLogger() {
        return (now, before) -> Lab.emit("state", "from", before.name(), "to", now.name());
    }

    /** A restore listener that says each restore's start, batches and end as LAB lines (kind restore). */
    public static StateRestoreListener restoreLogger() {
        return new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                Lab.emit("restore", "phase", "start", "store", store, "topic", tp.topic(), "partition",
                        tp.partition(), "start_offset", start, "end_offset", end);
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) {
                Lab.emit("restore", "phase", "batch", "store", store, "partition", tp.partition(),
                        "batch_end_offset", batchEnd, "restored", restored);
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                Lab.emit("restore", "phase", "end", "store", store, "topic", tp.topic(), "partition",
                        tp.partition(), "total_restored", total);
            }
        };
    }

    /**
     * Numeric metrics of one group ("stream-state-metrics": KIP-607's RocksDB properties), as
     * {"name": {"<store>/<task>": value}}, for the names asked (all of the group when none).
     */
    public static Map<String, Map<String, Double>> metrics(KafkaStreams streams, String group, String... names) {
        List<String> wanted = List.of(names);
        Map<String, Map<String, Double>> out = new LinkedHashMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().equals(group) || !wanted.isEmpty() && !wanted.contains(n.name())) continue;
            Object value = e.getValue().metricValue();
            if (!(value instanceof Number)) continue;
            Map<String, String> tags = n.tags();
            String store = tags.getOrDefault("rocksdb-state-id", tags.getOrDefault("rocksdb-window-state-id",
                    tags.getOrDefault("rocksdb-session-state-id", "?")));
            out.computeIfAbsent(n.name(), k -> new LinkedHashMap<>())
                    .put(store + "/" + tags.getOrDefault("task-id", "?"), ((Number) value).doubleValue());
        }
        return out;
    }
}
