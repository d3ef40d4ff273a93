import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * What every program under test shares (compile it beside the program: JavaProgram sources
 * ["MyApp.java", "Lab.java"], plus "LabStreams.java" for a Kafka Streams app using its helpers). Only the JDK, so
 * a plain client program compiles with it at any kafka-clients version (IdleTransactionalProducer at 2.0.1 too).
 *
 *   Properties props = Lab.load(args[0]);          // lab.* keys move to Lab.settings, the rest stay for Kafka
 *   Lab.emit("state", "to", "RUNNING");            // LAB {"kind":"state","app":..,"ts":..,"to":"RUNNING"}
 *   LabStreams.runUntilSigterm(streams);           // start, close cleanly on SIGTERM
 *
 * An evidence line (lab.experiment.evidence.lab_lines) is LAB {"kind":..,"app":..,"ts":..,<stamp>,<fields>} on
 * stdout. A program may print it through its logger instead (printTo(LOG::info): the line gets log4j's stamp and
 * the logger's name), leave "app" out (app = null) and stamp every line with fields of its own (stamp(..)).
 */
public final class Lab {
    public static final Map<String, String> settings = new LinkedHashMap<>();
    /** The "app" of every evidence line (lab.app); null: lines without it. */
    public static String app = "app";
    private static final Map<String, Object> stamp = new LinkedHashMap<>();
    private static volatile Consumer<String> out = Lab::println;

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

    public static int intSetting(String name) {
        return Integer.parseInt(setting(name));
    }

    public static int intSetting(String name, int fallback) {
        return settings.containsKey(name) ? Integer.parseInt(settings.get(name)) : fallback;
    }

    /** "true" (any case) is true; absent or anything else is false, as Boolean.parseBoolean. */
    public static boolean flag(String name) {
        return Boolean.parseBoolean(settings.get(name));
    }

    /** What a client needs to reach the cluster (bootstrap.servers and the security settings) out of all configs. */
    public static Properties connection(Properties props) {
        Properties client = new Properties();
        for (String key : props.stringPropertyNames())
            if (key.equals("bootstrap.servers") || key.startsWith("security.") || key.startsWith("sasl.")
                    || key.startsWith("ssl."))
                client.put(key, props.getProperty(key));
        return client;
    }

    /** Print evidence lines through `sink` (e.g. a logger's info: LOG::info) instead of stdout. */
    public static void printTo(Consumer<String> sink) {
        out = sink;
    }

    /** A field every later evidence line carries right after "ts" (e.g. the incarnation of the program). */
    public static void stamp(String name, Object value) {
        stamp.put(name, value);
    }

    /** One evidence line: LAB {"kind":..,"app":..,"ts":..,<stamp>,<fields as name, value pairs>}. */
    public static void emit(String kind, Object... fields) {
        Map<String, Object> row = new LinkedHashMap<>();
        for (int i = 0; i + 1 < fields.length; i += 2) row.put(String.valueOf(fields[i]), fields[i + 1]);
        emitMap(kind, row);
    }

    public static void emitMap(String kind, Map<String, ?> fields) {
        StringBuilder b = new StringBuilder("LAB {\"kind\":").append(json(kind));
        if (app != null) b.append(",\"app\":").append(json(app));
        b.append(",\"ts\":").append(System.currentTimeMillis() / 1000.0);
        append(b, stamp);
        append(b, fields);
        out.accept(b.append('}').toString());
    }

    private static void append(StringBuilder b, Map<String, ?> fields) {
        for (Map.Entry<String, ?> e : fields.entrySet())
            b.append(',').append(json(e.getKey())).append(':').append(json(e.getValue()));
    }

    private static void println(String line) {
        synchronized (System.out) {
            System.out.println(line);
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

    /**
     * One row of the lab.history.History in folder lab.history, as a line: {"run_id": lab.run.id, "kind", "ts",
     * "app", "incarnation": 0, "group", "topic", "partition", "offset", <fields as name, value pairs>}.
     */
    public static String historyRow(String kind, String group, String topic, int partition, long offset,
                                    Object... fields) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("run_id", setting("run.id"));
        row.put("kind", kind);
        row.put("ts", System.currentTimeMillis() / 1000.0);
        row.put("app", app);
        row.put("incarnation", 0);
        row.put("group", group);
        row.put("topic", topic);
        row.put("partition", partition);
        row.put("offset", offset);
        for (int i = 0; i + 1 < fields.length; i += 2) row.put(String.valueOf(fields[i]), fields[i + 1]);
        return json(row) + "\n";
    }

    /** Whole lines appended to <lab.history>/<kind>.jsonl in one write: lab.history.History's contract (O_APPEND). */
    public static synchronized void appendHistory(String kind, String lines) {
        if (lines.isEmpty()) return;
        try (FileOutputStream file = new FileOutputStream(setting("history") + "/" + kind + ".jsonl", true)) {
            file.write(lines.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    /**
     * On SIGTERM (a JVM shutdown: kill -9 is the unclean case) run `close`, then count down the latch returned:
     * the main thread waits on it (or polls it) to end with the program.
     */
    public static CountDownLatch onSigterm(Runnable close) {
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            close.run();
            closed.countDown();
        }));
        return closed;
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
     * it, so the lab measures RSS from outside, with psutil (lab/scenarios/nb06_state_in_production/
     * rocksdb_memory.py).
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
