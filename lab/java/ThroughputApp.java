import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

import java.io.FileInputStream;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Seed 002's "Plan the # of partitions in advance" and "It's ok to do external lookups": a pass-through
 * Kafka Streams app whose work per record is either lab.work.ms of sleep, or a call to lab.lookup.url
 * (an HTTP service with a latency) made as lab.lookup.mode says:
 *   plain   one call per record
 *   cache   one call per key not seen before (an in-memory map: keys repeat)
 *   batch   one call for up to lab.batch.size records of a task (or what it has after a second: its linger)
 * Every 500 ms a "LAB {json}" line says how many records this instance processed and which tasks it has.
 * args[0]: a properties file; lab.* keys are for this program, the rest are Streams configs.
 */
public class ThroughputApp {
    private static final AtomicLong processed = new AtomicLong(), calls = new AtomicLong();
    private static String app, lookupUrl, mode;
    private static long workMs;
    private static int batchSize;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String input = (String) props.remove("lab.input.topic");
        String output = (String) props.remove("lab.output.topic");
        app = (String) props.remove("lab.app");
        workMs = Long.parseLong((String) props.remove("lab.work.ms"));
        lookupUrl = (String) props.remove("lab.lookup.url");
        mode = (String) props.remove("lab.lookup.mode");
        batchSize = Integer.parseInt((String) props.remove("lab.batch.size"));

        Topology topology = new Topology();
        topology.addSource("input", Serdes.String().deserializer(), Serdes.String().deserializer(), input);
        topology.addProcessor("work", Work::new, "input");
        topology.addSink("output", output, Serdes.String().serializer(), Serdes.String().serializer(), "work");
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {   // SIGTERM: close cleanly
            streams.close(Duration.ofSeconds(10));
            closed.countDown();
        }));
        streams.setStateListener((now, before) -> lab("state", "\"to\":" + str(now.name())));
        streams.start();
        Thread reporter = new Thread(() -> {
            while (true) {
                TreeSet<String> tasks = new TreeSet<>();
                try {
                    for (ThreadMetadata t : streams.metadataForLocalThreads())
                        for (TaskMetadata task : t.activeTasks()) tasks.add(task.taskId().toString());
                } catch (RuntimeException notRunning) {
                    // between states: report no task
                }
                lab("progress", "\"processed\":" + processed.get() + ",\"calls\":" + calls.get()
                        + ",\"state\":" + str(streams.state().name()) + ",\"tasks\":" + json(tasks));
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        reporter.setDaemon(true);
        reporter.start();
        closed.await();
    }

    static class Work implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;
        private final Map<String, String> cache = new LinkedHashMap<>();
        private final List<Record<String, String>> pending = new ArrayList<>();

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            if ("batch".equals(mode))
                context.schedule(Duration.ofSeconds(1), PunctuationType.WALL_CLOCK_TIME, now -> flush());
        }

        @Override
        public void process(Record<String, String> record) {
            if (lookupUrl.isEmpty()) {
                sleep(workMs);
                done(record);
            } else if ("batch".equals(mode)) {
                pending.add(record);
                if (pending.size() >= batchSize) flush();
            } else if ("cache".equals(mode)) {
                if (!cache.containsKey(record.key())) cache.put(record.key(), lookup(List.of(String.valueOf(record.key()))));
                done(record);
            } else {
                lookup(List.of(String.valueOf(record.key())));
                done(record);
            }
        }

        private void flush() {
            if (pending.isEmpty()) return;
            List<String> keys = new ArrayList<>();
            for (Record<String, String> r : pending) keys.add(String.valueOf(r.key()));
            lookup(keys);
            for (Record<String, String> r : pending) done(r);
            pending.clear();
        }

        private void done(Record<String, String> record) {
            context.forward(record);
            processed.incrementAndGet();
        }
    }

    /** One GET to the lookup service for these keys; its latency is the point. */
    static String lookup(List<String> keys) {
        calls.incrementAndGet();
        try {
            URL url = new URL(lookupUrl + "?keys=" + URLEncoder.encode(String.join(",", keys), StandardCharsets.UTF_8));
            HttpURLConnection c = (HttpURLConnection) url.openConnection();
            c.setConnectTimeout(5000);
            c.setReadTimeout(30000);
            try (InputStream in = c.getInputStream()) {
                return new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
        } catch (Exception e) {
            throw new RuntimeException("lookup failed: " + e, e);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static String json(TreeSet<String> items) {
        StringBuilder b = new StringBuilder("[");
        for (String s : items) b.append(b.length() > 1 ? "," : "").append(str(s));
        return b.append("]").toString();
    }

    static void lab(String kind, String fields) {
        System.out.println("LAB {\"kind\":" + str(kind) + ",\"app\":" + str(app) + ",\"ts\":"
                + System.currentTimeMillis() / 1000.0 + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }

    static String str(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
