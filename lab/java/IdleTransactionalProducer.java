import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.File;
import java.util.Properties;
import java.util.concurrent.Future;

/**
 * A transactional Java producer that goes idle between two transactions, then reports
 * what the client did: args[0] is a properties file with producer configs plus
 *   lab.topic     where to write
 *   lab.idle.file until this file exists: one transaction every lab.busy.ms (traffic); then idle
 *   lab.go.file   the idle phase ends when this file exists (the lab decides when)
 *   lab.id.prefix ids of the records written ({"id": "<prefix>-<n>"})
 * Every step is one log line "LAB {json}" (Lab.emit through this class's logger, without "app") so the lab can
 * parse it.
 * On an error: abort the transaction; if even that fails (a fatal error), close the
 * producer and create a new one, then run the transaction again once.
 * Compiles against kafka-clients 2.0 to 4.x (only APIs all of them have; Lab.java is JDK-only).
 */
public class IdleTransactionalProducer {
    private static final Logger LOG = LoggerFactory.getLogger(IdleTransactionalProducer.class);
    private static Properties config;
    private static KafkaProducer<String, String> producer;
    private static String topic;
    private static String prefix;
    private static int records = 0;

    public static void main(String[] args) throws Exception {
        config = Lab.load(args[0]);
        Lab.app = null;
        Lab.printTo(LOG::info);
        topic = Lab.setting("topic");
        prefix = Lab.setting("id.prefix", "java");
        File go = new File(Lab.setting("go.file"));
        File idle = Lab.settings.containsKey("idle.file") ? new File(Lab.setting("idle.file")) : null;
        long busyMs = Lab.longSetting("busy.ms", 1000);

        open();
        while (true) {  // traffic: one transaction every busyMs until the lab says "idle"
            transaction("before-idle", true);
            long next = System.currentTimeMillis() + busyMs;
            while (idle != null && !idle.exists() && System.currentTimeMillis() < next) Thread.sleep(50);
            if (idle == null || idle.exists()) break;
        }
        Lab.emit("idle", "until", go.getPath());
        while (!go.exists()) Thread.sleep(50);
        transaction("after-idle", true);
        producer.close();
        Lab.emit("exit", "ok", true);
    }

    static void open() {
        producer = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        Lab.emit("ready");
    }

    /** One transaction with one record; on failure: recover as the client allows, then retry once. */
    static void transaction(String phase, boolean retry) {
        String id = prefix + "-" + (++records);
        String call = "beginTransaction";
        Future<RecordMetadata> sent = null;
        try {
            producer.beginTransaction();
            call = "send";
            sent = producer.send(new ProducerRecord<>(topic, id, "{\"id\":" + Lab.json(id) + "}"));
            call = "commitTransaction";
            producer.commitTransaction();
            Lab.emit("committed", "phase", phase, "id", id);
            return;
        } catch (KafkaException e) {
            error(phase, call, e);
            if (sent != null && sent.isDone()) {
                try {
                    sent.get();
                } catch (Exception se) {
                    error(phase, "send (callback)", se.getCause() != null ? se.getCause() : se);
                }
            }
        }
        try {
            producer.abortTransaction();
            Lab.emit("aborted", "phase", phase, "abortable", true);
        } catch (KafkaException e) {
            error(phase, "abortTransaction", e);
            // A fatal error: this producer instance is unusable. Start over with a new one.
            try {
                producer.close();
            } catch (KafkaException ignored) {
                // closing a failed producer may throw again; nothing to do
            }
            open();
            Lab.emit("recreated", "phase", phase);
        }
        if (retry) transaction(phase + "-retry", false);
    }

    static void error(String phase, String call, Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        Lab.emit("error", "phase", phase, "call", call, "exception", e.getClass().getName(),
                "message", String.valueOf(e.getMessage()), "root", root.getClass().getName(),
                "root_message", String.valueOf(root.getMessage()));
    }
}
