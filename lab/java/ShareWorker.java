import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

/**
 * A worker of a share group (KIP-932): it takes records from the topic, works on each, writes {"id": ...} to the
 * output topic when the work is done (the work's effect), then acknowledges the record. args[0] is a properties
 * file with share-consumer configs (group.id, max.poll.records, ...) plus
 *   lab.topic, lab.output.topic, lab.app, lab.history (a lab.record.history History folder), lab.run.id
 *   lab.work.ms      the work on each record
 *   lab.slow.ids     ids whose work takes lab.slow.ms instead
 *   lab.fail.ids     ids whose work fails every time
 *   lab.on.failure   what the worker answers for a failed record: release (try it again later) or reject
 *   lab.dead.letter.topic  where a rejected record goes (the app's own dead-letter topic; none: dropped)
 * Each delivery is a "read" row of the History (with the delivery count the broker gave it), each record written
 * a "written" row, each acknowledgement the broker took an "acknowledged" row; each one it refused is a
 * "LAB {json}" line (Lab.emit). Acknowledgements go out one record at a time (commitSync after each), so each
 * refusal names its record.
 */
public class ShareWorker {
    private static volatile boolean stopping;

    public static void main(String[] args) throws Exception {
        Properties config = Lab.load(args[0]);
        String topic = Lab.setting("topic");
        String output = Lab.setting("output.topic");
        String worker = Lab.app;
        long workMs = Lab.longSetting("work.ms");
        long slowMs = Lab.longSetting("slow.ms", workMs);
        Set<String> slow = ids(Lab.setting("slow.ids", ""));
        Set<String> fail = ids(Lab.setting("fail.ids", ""));
        AcknowledgeType onFailure = AcknowledgeType.valueOf(Lab.setting("on.failure", "release").toUpperCase());
        String deadLetters = Lab.setting("dead.letter.topic", "");
        config.put("share.acknowledgement.mode", "explicit");

        Properties producerConfig = new Properties();
        producerConfig.put("bootstrap.servers", config.getProperty("bootstrap.servers"));
        producerConfig.put("acks", "all");
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(producerConfig, new StringSerializer(), new StringSerializer());
        KafkaShareConsumer<String, String> consumer =
                new KafkaShareConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {   // SIGTERM: stop at the next record, then exit
            stopping = true;
            consumer.wakeup();
            try {
                main.join(20_000);
            } catch (InterruptedException ignored) {
            }
        }));
        consumer.subscribe(Collections.singletonList(topic));
        Lab.emit("start", "work_ms", workMs, "slow_ms", slowMs, "lock_ms", consumer.acquisitionLockTimeoutMs()
                .map(Object::toString).orElse("?"));
        try {
            while (!stopping) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                Lab.emit("batch", "records", records.count(), "lock_ms",
                        consumer.acquisitionLockTimeoutMs().map(Object::toString).orElse("?"));
                for (ConsumerRecord<String, String> r : records) {
                    if (stopping) break;
                    String id = idOf(r.value());
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(0);
                    Lab.appendHistory("read", Lab.historyRow("read", worker, r.topic(), r.partition(), r.offset(),
                            "id", id, "delivery", delivery));
                    long took = slow.contains(id) ? slowMs : workMs;
                    if (!work(took)) break;
                    AcknowledgeType answer = AcknowledgeType.ACCEPT;
                    if (fail.contains(id)) {
                        answer = onFailure;
                        Lab.emit("failed", "id", id, "offset", r.offset(), "delivery", delivery,
                                "answer", answer.toString());
                        if (answer == AcknowledgeType.REJECT && !deadLetters.isEmpty())
                            producer.send(new ProducerRecord<>(deadLetters, r.key(), r.value())).get();
                    } else {
                        producer.send(new ProducerRecord<>(output, r.key(),
                                "{\"id\":\"" + id + "\",\"worker\":\"" + worker + "\",\"delivery\":" + delivery
                                        + "}")).get();
                        Lab.appendHistory("written", Lab.historyRow("written", worker, r.topic(), r.partition(),
                                r.offset(), "id", id, "delivery", delivery));
                    }
                    consumer.acknowledge(r, answer);
                    if (acknowledged(consumer.commitSync(), id, r.offset(), answer))
                        Lab.appendHistory("acknowledged", Lab.historyRow("acknowledged", worker, r.topic(),
                                r.partition(), r.offset(), "id", id, "delivery", delivery, "answer",
                                answer.toString()));
                }
            }
        } catch (WakeupException woken) {
            // SIGTERM
        } finally {
            consumer.close(Duration.ofSeconds(5));
            producer.close(Duration.ofSeconds(5));
            Lab.emit("stopped");
        }
    }

    /** The work on one record (a sleep: an external call, a slow computation). False: SIGTERM cut it short. */
    static boolean work(long ms) {
        long end = System.currentTimeMillis() + ms;
        while (!stopping) {
            long left = end - System.currentTimeMillis();
            if (left <= 0) return true;
            try {
                Thread.sleep(Math.min(left, 200));
            } catch (InterruptedException e) {
                return false;
            }
        }
        return false;
    }

    /** False, with a line saying so, when the broker refused an acknowledgement (the record's lock had expired: it
     *  is no longer this worker's). */
    static boolean acknowledged(Map<TopicIdPartition, Optional<KafkaException>> result, String id, long offset,
                             AcknowledgeType answer) {
        boolean taken = true;
        for (Optional<KafkaException> error : result.values()) {
            taken &= error.isEmpty();
            error.ifPresent(e -> Lab.emit("ack_refused", "id", id, "offset", offset, "answer", answer.toString(),
                    "exception", e.getClass().getSimpleName(),
                    "message", String.valueOf(e.getMessage()).replace("\n", " ")));
        }
        return taken;
    }

    static Set<String> ids(String list) {
        Set<String> ids = new HashSet<>(Arrays.asList(list.split(",")));
        ids.remove("");
        return ids;
    }

    static String idOf(String value) {   // the generator's {"id": "...", ...}
        int at = value == null ? -1 : value.indexOf("\"id\"");
        if (at < 0) return "";
        int open = value.indexOf('"', value.indexOf(':', at) + 1);
        return value.substring(open + 1, value.indexOf('"', open + 1));
    }
}
