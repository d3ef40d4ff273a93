import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.processor.StateRestoreListener;

import java.io.FileInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Stream;

/**
 * What every newer program under test shares (compile it beside the program: JavaProgram sources
 * ["MyApp.java", "Lab.java"]). Only APIs present since Kafka 2.x, so programs at old versions compile too.
 *
 *   Properties props = Lab.load(args[0]);          // lab.* keys move to Lab.settings, the rest stay for Kafka
 *   Lab.emit("state", "to", "RUNNING");            // LAB {"kind":"state","app":..,"ts":..,"to":"RUNNING"}
 *   Lab.runUntilSigterm(streams);                  // start, close cleanly on SIGTERM
 */
public final class Lab {
    public static final Map<String, String> settings = new LinkedHashMap<>();
    public static String app = "app";

    private Lab() {
    }

    /** The properties file of args[0]; its lab.* keys go to `settings` (without the prefix). */
    public static Properties load(String path) throws IOException {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        for (String key : new ArrayList<>(props.stringPropertyNames()))
            if (key.startsWith("lab.")) settings.put(key.substring(4), (String) props.remove(key));
        app = settings.getOrDefault("app", app);
        return props;
    }

    public static String setting(String name) {
        String value = settings.get(name);
        if (value == null) throw new IllegalArgumentException("missing setting lab." + name);
        return value;
    }

    public static String setting(String name, String fallback) {
        return settings.getOrDefault(name, fallback);
    }

    public static long longSetting(String name) {
        return Long.parseLong(setting(name));
    }

    public static long longSetting(String name, long fallback) {
        return settings.containsKey(name) ? Long.parseLong(settings.get(name)) : fallback;
    }

    /** One evidence line: LAB {"kind":..,"app":..,"ts":..,<fields as name, value pairs>}. */
    public static void emit(String kind, Object... fields) {
        Map<String, Object> row = new LinkedHashMap<>();
        for (int i = 0; i + 1 < fields.length; i += 2) row.put(String.valueOf(fields[i]), fields[i + 1]);
        emitMap(kind, row);
    }

    public static void emitMap(String kind, Map<String, ?> fields) {
        StringBuilder b = new StringBuilder("LAB {\"kind\":").append(json(kind)).append(",\"app\":")
                .append(json(app)).append(",\"ts\":").append(System.currentTimeMillis() / 1000.0);
        for (Map.Entry<String, ?> e : fields.entrySet())
            b.append(',').append(json(e.getKey())).append(':').append(json(e.getValue()));
        synchronized (System.out) {
            System.out.println(b.append('}'));
            System.out.flush();
        }
    }

    /** JSON for strings, numbers, booleans, null, maps and collections. */
    public static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            return Double.isFinite(d) ? v.toString() : "null";
        }
        if (v instanceof Boolean) return v.toString();
        if (v instanceof Map) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet())
                b.append(b.length() > 1 ? "," : "").append(json(String.valueOf(e.getKey()))).append(':')
                        .append(json(e.getValue()));
            return b.append('}').toString();
        }
        if (v instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Iterator<?> it = ((Collection<?>) v).iterator(); it.hasNext(); )
                b.append(json(it.next())).append(it.hasNext() ? "," : "");
            return b.append(']').toString();
        }
        String s = v.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** Log state changes, start, and close cleanly on SIGTERM (kill -9 is the unclean case); blocks. */
    public static void runUntilSigterm(KafkaStreams streams) throws InterruptedException {
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            emit("closed");
            closed.countDown();
        }));
        streams.setStateListener((now, before) -> emit("state", "from", before.name(), "to", now.name()));
        streams.start();
        closed.await();
    }

    /** A restore listener that says each restore's start, batches and end as LAB lines (kind restore). */
    public static StateRestoreListener restoreLogger() {
        return new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                emit("restore", "phase", "start", "store", store, "topic", tp.topic(), "partition", tp.partition(),
                        "start_offset", start, "end_offset", end);
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) {
                emit("restore", "phase", "batch", "store", store, "partition", tp.partition(),
                        "batch_end_offset", batchEnd, "restored", restored);
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                emit("restore", "phase", "end", "store", store, "topic", tp.topic(), "partition", tp.partition(),
                        "total_restored", total);
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

    /** Bytes of the files under a folder (a state directory); 0 when it is missing. */
    public static long bytesUnder(String folder) {
        Path root = Paths.get(folder);
        if (!Files.exists(root)) return 0;
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(Files::isRegularFile).mapToLong(p -> {
                try {
                    return Files.size(p);
                } catch (IOException gone) {   // RocksDB compaction deletes files while we walk
                    return 0;
                }
            }).sum();
        } catch (IOException | java.io.UncheckedIOException gone) {
            return 0;
        }
    }

    /**
     * This JVM's heap (used, committed, max), in MB. Not its resident memory: Java has no portable way to read
     * it, so the lab measures RSS from outside, with psutil (lab/scenarios/rocksdb_memory.py).
     */
    public static Map<String, Object> memory() {
        Map<String, Object> m = new LinkedHashMap<>();
        Runtime rt = Runtime.getRuntime();
        m.put("heap_used_mb", (rt.totalMemory() - rt.freeMemory()) / 1048576.0);
        m.put("heap_committed_mb", rt.totalMemory() / 1048576.0);
        m.put("heap_max_mb", rt.maxMemory() / 1048576.0);
        return m;
    }

    public static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
