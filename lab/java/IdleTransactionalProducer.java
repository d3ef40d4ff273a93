import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.File;
import java.io.FileInputStream;
import java.util.Properties;
import java.util.concurrent.Future;

/**
 * A transactional Java producer that goes idle between two transactions, then reports
 * what the client did: args[0] is a properties file with producer configs plus
 *   lab.topic     where to write
 *   lab.idle.file until this file exists: one transaction every lab.busy.ms (traffic); then idle
 *   lab.go.file   the idle phase ends when this file exists (the lab decides when)
 *   lab.id.prefix ids of the records written ({"id": "<prefix>-<n>"})
 * Every step is one log line "LAB {json}" so the lab can parse it.
 * On an error: abort the transaction; if even that fails (a fatal error), close the
 * producer and create a new one, then run the transaction again once.
 * Compiles against kafka-clients 2.0 to 4.x (only APIs all of them have).
 */
public class IdleTransactionalProducer {
    private static final Logger LOG = LoggerFactory.getLogger(IdleTransactionalProducer.class);
    private static Properties config;
    private static KafkaProducer<String, String> producer;
    private static String topic;
    private static String prefix;
    private static int records = 0;

    public static void main(String[] args) throws Exception {
        Properties all = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            all.load(in);
        }
        config = new Properties();
        for (String key : all.stringPropertyNames()) {
            if (!key.startsWith("lab.")) config.setProperty(key, all.getProperty(key));
        }
        topic = all.getProperty("lab.topic");
        prefix = all.getProperty("lab.id.prefix", "java");
        File go = new File(all.getProperty("lab.go.file"));
        File idle = all.containsKey("lab.idle.file") ? new File(all.getProperty("lab.idle.file")) : null;
        long busyMs = Long.parseLong(all.getProperty("lab.busy.ms", "1000"));

        open();
        while (true) {  // traffic: one transaction every busyMs until the lab says "idle"
            transaction("before-idle", true);
            long next = System.currentTimeMillis() + busyMs;
            while (idle != null && !idle.exists() && System.currentTimeMillis() < next) Thread.sleep(50);
            if (idle == null || idle.exists()) break;
        }
        lab("idle", "\"until\":" + str(go.getPath()));
        while (!go.exists()) Thread.sleep(50);
        transaction("after-idle", true);
        producer.close();
        lab("exit", "\"ok\":true");
    }

    static void open() {
        producer = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        lab("ready", "");
    }

    /** One transaction with one record; on failure: recover as the client allows, then retry once. */
    static void transaction(String phase, boolean retry) {
        String id = prefix + "-" + (++records);
        String call = "beginTransaction";
        Future<RecordMetadata> sent = null;
        try {
            producer.beginTransaction();
            call = "send";
            sent = producer.send(new ProducerRecord<>(topic, id, "{\"id\":" + str(id) + "}"));
            call = "commitTransaction";
            producer.commitTransaction();
            lab("committed", "\"phase\":" + str(phase) + ",\"id\":" + str(id));
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
            lab("aborted", "\"phase\":" + str(phase) + ",\"abortable\":true");
        } catch (KafkaException e) {
            error(phase, "abortTransaction", e);
            // A fatal error: this producer instance is unusable. Start over with a new one.
            try {
                producer.close();
            } catch (KafkaException ignored) {
                // closing a failed producer may throw again; nothing to do
            }
            open();
            lab("recreated", "\"phase\":" + str(phase));
        }
        if (retry) transaction(phase + "-retry", false);
    }

    static void error(String phase, String call, Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        lab("error", "\"phase\":" + str(phase) + ",\"call\":" + str(call)
                + ",\"exception\":" + str(e.getClass().getName()) + ",\"message\":" + str(String.valueOf(e.getMessage()))
                + ",\"root\":" + str(root.getClass().getName()) + ",\"root_message\":" + str(String.valueOf(root.getMessage())));
    }

    static void lab(String event, String fields) {
        LOG.info("LAB {\"kind\":" + str(event) + ",\"ts\":" + System.currentTimeMillis() / 1000.0
                + (fields.isEmpty() ? "" : "," + fields) + "}");
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
