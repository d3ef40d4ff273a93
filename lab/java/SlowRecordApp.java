import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.api.RecordMetadata;

import java.util.Properties;

/**
 * The Kafka Streams variant of "Timeouts and rebalances" (from "Tales from running Kafka Streams in Production"): a pass-through app (at-least-once)
 * whose processor takes lab.work.ms per record and lab.slow.ms on the record at offset lab.slow.offset.
 * If that is longer than consumer.max.poll.interval.ms the member is dropped while it works; the next
 * commit or poll finds it fenced ("Detected that the thread is being fenced…"), its tasks are closed and
 * re-assigned, and it starts again from the last commit: the slow record again.
 * Each record processed is a "read" row of a lab.history.History (lab.history, lab.run.id, lab.app), so the
 * audit checks it like the plain consumers; each slow record processed is a "LAB {json}" line (Lab.emit), and
 * each state change (LabStreams.runUntilSigterm).
 * args[0]: a properties file; lab.* keys are for this program, the rest are Streams configs.
 * SIGTERM stops at once: a record still at work throws, so its task closes without a commit (a redeploy
 * that does not wait 9 s for it), and the record is neither recorded nor forwarded.
 */
public class SlowRecordApp {
    private static String group;
    private static long workMs, slowMs, slowOffset;
    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        workMs = Lab.longSetting("work.ms");
        slowMs = Lab.longSetting("slow.ms");
        slowOffset = Lab.longSetting("slow.offset");
        group = props.getProperty("application.id");

        KafkaStreams streams = new KafkaStreams(LabStreams.passThrough("slow-work", Work::new), props);
        LabStreams.runUntilSigterm(streams, () -> {   // SIGTERM: close cleanly (no "closed" line)
            stopping = true;
            streams.close();
        });
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
            if (slow) Lab.emit("slow_start", "offset", at.offset());
            work(slow ? slowMs : workMs);   // the work: an external call, a slow computation
            if (slow) Lab.emit("slow_end", "offset", at.offset());
            Lab.appendHistory("read", Lab.historyRow("read", group, at.topic(), at.partition(), at.offset()));
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
}
