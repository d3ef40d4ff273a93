import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

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
import java.util.concurrent.atomic.AtomicLong;

/**
 * "Plan the # of partitions in advance" and "It's ok to do external lookups" (from "Tales from running Kafka Streams in Production"): a pass-through
 * Kafka Streams app whose work per record is either lab.work.ms of sleep, or a call to lab.lookup.url
 * (an HTTP service with a latency) made as lab.lookup.mode says:
 *   plain   one call per record
 *   cache   one call per key not seen before (an in-memory map: keys repeat)
 *   batch   one call for up to lab.batch.size records of a task (or what it has after a second: its linger)
 * Every 500 ms a "LAB {json}" line (Lab.emit) says how many records this instance processed and which tasks it
 * has; each state change is one too (LabStreams.runUntilSigterm).
 * args[0]: a properties file; lab.* keys are for this program, the rest are Streams configs.
 */
public class ThroughputApp {
    private static final AtomicLong processed = new AtomicLong(), calls = new AtomicLong();
    private static String lookupUrl, mode;
    private static long workMs;
    private static int batchSize;

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        workMs = Lab.longSetting("work.ms");
        lookupUrl = Lab.setting("lookup.url");
        mode = Lab.setting("lookup.mode");
        batchSize = Lab.intSetting("batch.size");

        KafkaStreams streams = new KafkaStreams(LabStreams.passThrough("work", Work::new), props);
        LabStreams.runUntilSigterm(streams, () -> streams.close(Duration.ofSeconds(10)),   // SIGTERM: close cleanly
            () -> startReporter(streams));
    }

    /** Every 500 ms a "progress" LAB line: records processed, calls made, the client's state and active tasks. */
    static void startReporter(KafkaStreams streams) {
        Thread reporter = new Thread(() -> {
            while (true) {
                TreeSet<String> tasks = new TreeSet<>();
                try {
                    for (ThreadMetadata t : streams.metadataForLocalThreads())
                        for (TaskMetadata task : t.activeTasks()) tasks.add(task.taskId().toString());
                } catch (RuntimeException notRunning) {
                    // between states: report no task
                }
                Lab.emit("progress", "processed", processed.get(), "calls", calls.get(),
                        "state", streams.state().name(), "tasks", tasks);
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        reporter.setDaemon(true);
        reporter.start();
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
                Lab.sleep(workMs);
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
}
