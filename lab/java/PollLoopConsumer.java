import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The consumer of "Timeouts and rebalances" (from "Tales from running Kafka Streams in Production"): each record takes lab.work.ms to process, and a
 * batch of max.poll.records may take longer than max.poll.interval.ms. args[0] is a properties file with
 * consumer configs plus
 *   lab.topic, lab.app, lab.history (a lab.history.History folder), lab.run.id
 *   lab.work.ms   processing time per record
 *   lab.pause     true: pause the partitions, process in a worker thread and keep calling poll() (the fix
 *                 that keeps the member alive without changing the batch)
 * Each record read is a "read" row and each commit a "committed" row of the History (what the audit
 * checks); each batch, commit and failed commit is one "LAB {json}" line (Lab.emit). SIGTERM leaves the group at
 * once: a batch still at work stops at its next record, what it did is recorded, and nothing of it is committed.
 */
public class PollLoopConsumer {
    private static String group;
    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        Properties config = Lab.load(args[0]);
        String topic = Lab.setting("topic");
        group = config.getProperty("group.id");
        long workMs = Lab.longSetting("work.ms");
        boolean pause = Lab.flag("pause");

        KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {   // SIGTERM: leave the group, then exit
            stopping = true;
            consumer.wakeup();
            try {
                main.join(20_000);
            } catch (InterruptedException ignored) {
            }
        }));
        ExecutorService worker = Executors.newSingleThreadExecutor();
        consumer.subscribe(Collections.singletonList(topic));
        Lab.emit("start", "pause", pause, "work_ms", workMs);
        try {
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                Lab.emit("batch", "records", records.count());
                if (pause) {   // poll() keeps the member alive; paused partitions return nothing
                    consumer.pause(records.partitions());
                    Future<Boolean> done = worker.submit(() -> process(records, workMs));
                    while (!done.isDone()) consumer.poll(Duration.ofMillis(100));
                    if (!done.get()) break;
                    consumer.resume(consumer.paused());
                } else if (!process(records, workMs)) {
                    break;   // SIGTERM: the batch was not finished, so none of it is committed
                }
                commit(consumer, records);
            }
        } catch (WakeupException woken) {
            // SIGTERM
        } finally {
            worker.shutdownNow();
            consumer.close();
            Lab.emit("stopped");
        }
    }

    /** The batch's work, record by record; false when SIGTERM (or an interrupt) cut it short. */
    static boolean process(ConsumerRecords<String, String> records, long workMs) {
        StringBuilder rows = new StringBuilder();
        boolean finished = true;
        for (ConsumerRecord<String, String> r : records) {
            if (stopping) {
                finished = false;
                break;
            }
            try {
                Thread.sleep(workMs);   // the work: an external call, a slow computation
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                finished = false;
                break;
            }
            rows.append(Lab.historyRow("read", group, r.topic(), r.partition(), r.offset(), "id", idOf(r.value())));
        }
        Lab.appendHistory("read", rows.toString());
        return finished;
    }

    static void commit(KafkaConsumer<String, String> consumer, ConsumerRecords<String, String> records) {
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (TopicPartition tp : records.partitions()) {
            java.util.List<ConsumerRecord<String, String>> part = records.records(tp);
            next.put(tp, new OffsetAndMetadata(part.get(part.size() - 1).offset() + 1));
        }
        try {
            consumer.commitSync(next);
        } catch (KafkaException e) {   // CommitFailedException, RebalanceInProgressException, …
            if (e instanceof WakeupException) throw (WakeupException) e;
            Lab.emit("commit_failed", "exception", e.getClass().getSimpleName(),
                    "message", String.valueOf(e.getMessage()).replace("\n", " "));
            return;
        }
        StringBuilder rows = new StringBuilder();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : next.entrySet()) {
            rows.append(Lab.historyRow("committed", group, e.getKey().topic(), e.getKey().partition(),
                    e.getValue().offset()));
        }
        Lab.appendHistory("committed", rows.toString());
        Lab.emit("commit", "records", records.count());
    }

    static String idOf(String value) {   // the generator's {"id": "...", ...}
        int at = value == null ? -1 : value.indexOf("\"id\"");
        if (at < 0) return "";
        int open = value.indexOf('"', value.indexOf(':', at) + 1);
        return value.substring(open + 1, value.indexOf('"', open + 1));
    }
}
