import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

/**
 * The Kafka Streams variant of seed 002's "Timeouts and rebalances": a pass-through app (at-least-once)
 * whose processor takes lab.work.ms per record and lab.slow.ms on the record at offset lab.slow.offset.
 * If that is longer than consumer.max.poll.interval.ms the member is dropped while it works; the next
 * commit or poll finds it fenced ("Detected that the thread is being fenced…"), its tasks are closed and
 * re-assigned, and it starts again from the last commit: the slow record again.
 * Each record processed is a "read" row of a lab.history.History (lab.history, lab.run.id, lab.app), so the
 * audit checks it like the plain consumers; each slow record processed is a "LAB {json}" line.
 * args[0]: a properties file; lab.* keys are for this program, the rest are Streams configs.
 * SIGTERM stops at once: a record still at work throws, so its task closes without a commit (a redeploy
 * that does not wait 9 s for it), and the record is neither recorded nor forwarded.
 */
public class SlowRecordApp {
    private static String app, runId, historyDir, group;
    private static long workMs, slowMs, slowOffset;
    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String input = (String) props.remove("lab.input.topic");
        String output = (String) props.remove("lab.output.topic");
        app = (String) props.remove("lab.app");
        runId = (String) props.remove("lab.run.id");
        historyDir = (String) props.remove("lab.history");
        workMs = Long.parseLong((String) props.remove("lab.work.ms"));
        slowMs = Long.parseLong((String) props.remove("lab.slow.ms"));
        slowOffset = Long.parseLong((String) props.remove("lab.slow.offset"));
        group = props.getProperty("application.id");

        Topology topology = new Topology();
        topology.addSource("input", Serdes.String().deserializer(), Serdes.String().deserializer(), input);
        topology.addProcessor("slow-work", Work::new, "input");
        topology.addSink("output", output, Serdes.String().serializer(), Serdes.String().serializer(), "slow-work");
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {   // SIGTERM: close cleanly
            stopping = true;
            streams.close();
            closed.countDown();
        }));
        streams.setStateListener((now, before) -> lab("state", "\"from\":" + str(before.name()) + ",\"to\":"
                + str(now.name())));
        streams.start();
        closed.await();
    }

    static class Work implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> context;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
        }

        @Override
        public void process(Record<String, String> record) {
            RecordMetadata at = context.recordMetadata().orElseThrow();
            boolean slow = at.offset() == slowOffset;
            if (slow) lab("slow_start", "\"offset\":" + at.offset());
            work(slow ? slowMs : workMs);   // the work: an external call, a slow computation
            if (slow) lab("slow_end", "\"offset\":" + at.offset());
            history("{\"run_id\":" + str(runId) + ",\"kind\":\"read\",\"ts\":" + System.currentTimeMillis() / 1000.0
                    + ",\"app\":" + str(app) + ",\"incarnation\":0,\"group\":" + str(group) + ",\"topic\":"
                    + str(at.topic()) + ",\"partition\":" + at.partition() + ",\"offset\":" + at.offset() + "}\n");
            context.forward(record);
        }
    }

    /** Sleeps `ms`, in slices: SIGTERM ends it with an exception (the task closes dirty, nothing committed). */
    static void work(long ms) {
        long until = System.currentTimeMillis() + ms;
        try {
            for (long left = ms; left > 0; left = until - System.currentTimeMillis()) {
                if (stopping) throw new IllegalStateException("stopped by SIGTERM while at work");
                Thread.sleep(Math.min(left, 100));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while at work", e);
        }
    }

    /** One append of a whole line: lab.history.History's contract (O_APPEND, one write). */
    static synchronized void history(String line) {
        try (FileOutputStream out = new FileOutputStream(historyDir + "/read.jsonl", true)) {
            out.write(line.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
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
