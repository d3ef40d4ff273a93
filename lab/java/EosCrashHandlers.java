import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.streams.errors.ProductionExceptionHandler;

/**
 * EosCrashApp's error handlers for Kafka Streams 3.0 to 4.1: the strict input deserializer (for the
 * DeserializationExceptionHandler) and the production exception handlers in the handle() form, answering the
 * ProductionExceptionHandlerResponse enum. From 4.2 on the lab configures EosCrashResponses' handlers, which make
 * the same decision (ContinueTooLarge.drops) and answer with a Response.
 */
public class EosCrashHandlers {
    /** A value deserializer that refuses anything but a JSON object: for the DeserializationExceptionHandler. */
    public static class JsonOnly implements Deserializer<String> {
        @Override
        public String deserialize(String topic, byte[] data) {
            String s = data == null ? null : new String(data, StandardCharsets.UTF_8);
            if (s == null || !s.trim().startsWith("{")) throw new SerializationException("not a JSON object: " + s);
            return s;
        }
    }

    /**
     * A production exception handler that drops an output record the broker refuses as too large (CONTINUE) and
     * fails on anything else, as Kafka's default does. The handle() signature every version has, answering the
     * ProductionExceptionHandlerResponse enum: the lab configures it for Kafka Streams 3.0 to 4.1. From 4.2 on,
     * where that enum is deprecated, it configures EosCrashResponses' handlers, which answer with a Response and
     * share this decision (drops). Evidence: a `refused` line per record it is asked about.
     */
    @SuppressWarnings("deprecation")
    public static class ContinueTooLarge implements ProductionExceptionHandler {
        @Override
        public ProductionExceptionHandlerResponse handle(ProducerRecord<byte[], byte[]> record, Exception exception) {
            return drops(record, exception, "CONTINUE") ? ProductionExceptionHandlerResponse.CONTINUE
                : ProductionExceptionHandlerResponse.FAIL;
        }

        /**
         * The decision of both forms: drop a record too large (after aside()), fail on anything else. The evidence
         * line names the answer as the form in use spells it: `drop` (CONTINUE here, RESUME from 4.2 on) or FAIL.
         */
        boolean drops(ProducerRecord<byte[], byte[]> record, Exception exception, String drop) {
            boolean tooLarge = exception instanceof RecordTooLargeException;
            String value = record.value() == null ? "" : new String(record.value(), StandardCharsets.UTF_8);
            Matcher m = EosCrashApp.ID.matcher(value);
            String id = m.find() ? m.group(1) : "";
            Lab.emit("refused", "id", id, "topic", record.topic(),
                "bytes", record.value() == null ? 0 : record.value().length,
                "error", EosCrashApp.oneLine(exception.getClass().getSimpleName() + ": " + exception.getMessage()),
                "response", tooLarge ? drop : "FAIL");
            if (tooLarge) aside(id, record, exception);
            return tooLarge;
        }

        /** What a dropped record leaves behind: nothing here; RouteTooLarge keeps a note of it. */
        void aside(String id, ProducerRecord<byte[], byte[]> record, Exception exception) { }

        @Override public void configure(Map<String, ?> configs) { }
    }

    /**
     * ContinueTooLarge that first writes a note of the refused record (its id, topic and size, and the error) to
     * lab.refused.topic with a producer of its own: the output is still dropped, but nothing is lost unseen.
     */
    public static class RouteTooLarge extends ContinueTooLarge {
        KafkaProducer<byte[], byte[]> notes;
        String topic;

        @Override
        public void configure(Map<String, ?> configs) {
            topic = Lab.setting("refused.topic");
            Map<String, Object> props = new LinkedHashMap<>();
            props.put("bootstrap.servers", configs.get("bootstrap.servers"));
            props.put("client.id", Lab.setting("refused.topic") + "-notes");
            notes = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        }

        @Override
        void aside(String id, ProducerRecord<byte[], byte[]> record, Exception exception) {
            String note = String.format(Locale.ROOT, "{\"id\":\"%s\",\"topic\":\"%s\",\"bytes\":%d,\"error\":\"%s\"}",
                id, record.topic(), record.value() == null ? 0 : record.value().length,
                EosCrashApp.oneLine(exception.getClass().getName() + ": " + exception.getMessage()));
            notes.send(new ProducerRecord<>(topic, record.key(), note.getBytes(StandardCharsets.UTF_8)));
            notes.flush();   // on the Streams producer's network thread: a few ms, for a rare record
        }
    }
}
