import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Transform + per-key count, the app of notebook 05. Per input {"id","key",...} it reads the key's state
 * from a persistent key-value store, adds 1, writes it back, and sends two records: the transformed
 * record {"id","key","value": count,"text","incarnation","at"} to the output topic and the count update
 * {"id","key","count"} to the counts topic (one transaction per commit under exactly_once_v2).
 *
 * It can halt the JVM (Runtime.halt: no close, no flush, like kill -9) once, at a named point, when it
 * reaches its crash-at-th record (a marker file keeps the restarted app from crashing again). The halt
 * waits for a settled commit: one commit of processed records, and one output record acknowledged after
 * it (so the broker has written that commit's markers). A run whose first batch arrives late then halts
 * at the first record after that commit, never before any commit. before_read and during_processing
 * also wait until the broker holds an output sent since the last commit (else a halt right after a commit
 * would leave nothing in flight to abort or redo): at the crash-at-th record, or the first after it. They
 * run on the stream thread, which also commits: when such an output is sent but not yet acknowledged, they
 * wait for its ack (no commit can come in between), so a loaded machine whose acks lag still halts.
 * The points:
 *   before_read               a consumer interceptor, when poll() hands over the record (before processing)
 *   during_processing         inside the processor: state written and output forwarded, count not yet
 *   after_send_before_commit  a producer interceptor, when the broker acknowledged the record's output
 *   after_commit              the first record after a commit that covered the crash-at-th record
 * A poison record (lab.poison.id) makes the processor throw; lab.handler picks the uncaught exception
 * handler (shutdown_client / replace_thread). The output of the record lab.refuse.id carries lab.refuse.bytes of
 * padding, for an output topic whose max.message.bytes is smaller: the broker refuses it, and the production
 * exception handler decides (Kafka's default, or EosCrashHandlers' ContinueTooLarge / RouteTooLarge; from Kafka Streams 4.2 on,
 * their Response form in EosCrashResponses).
 * lab.mode v1 / v2 / v2-tolerant store the state as JSON in
 * two schemas ({"count":n} then {"schema":2,"total":n}) for the schema-change experiment.
 *
 * Evidence: `LAB {json}` lines (started, state, restore_start, restore_end, commit, crash, uncaught,
 * metrics, migrated, exit): Lab.emit through this class's logger, without "app" and stamped with the
 * "incarnation". args[0]: a properties file; lab.* keys are for this program.
 */
public class EosCrashApp {
    static final Logger LOG = LoggerFactory.getLogger(EosCrashApp.class);
    static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");
    static final Pattern COUNT = Pattern.compile("\"count\"\\s*:\\s*(\\d+)");
    static final Pattern TOTAL = Pattern.compile("\"total\"\\s*:\\s*(\\d+)");
    static final String STORE = "counts";

    static String crashPoint = "none", marker = "", input = "", output = "", poison = "", mode = "crash";
    static String refuseId = "", padding = "";
    static int crashAt = 0, incarnation = 1;
    static volatile boolean armed = false, settled = false;
    static final AtomicInteger read = new AtomicInteger(), processed = new AtomicInteger(), acked = new AtomicInteger();
    // The commits when the crash-at-th record was processed: shared by every task's processor, so that after_commit
    // halts at the first record any task meets after that commit, before a record of another task goes out.
    static volatile double commitsAtCrashRecord = -1;
    static volatile KafkaStreams streams;

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        input = Lab.setting("input.topic");
        output = Lab.setting("output.topic");
        String counts = Lab.setting("counts.topic");
        crashPoint = Lab.setting("crash.point");
        crashAt = Lab.intSetting("crash.at");
        marker = Lab.setting("crash.marker");
        poison = Lab.setting("poison.id", "");
        refuseId = Lab.setting("refuse.id", "");
        padding = "x".repeat(Lab.intSetting("refuse.bytes", 0));
        mode = Lab.setting("mode");
        String handler = Lab.setting("handler");
        boolean strictInput = Lab.flag("strict.input");
        incarnation = Lab.intSetting("incarnation");
        Lab.app = null;
        Lab.stamp("incarnation", incarnation);
        Lab.printTo(LOG::info);
        armed = !"none".equals(crashPoint) && !new File(marker).exists();
        if (crashPoint.equals("before_read")) props.put("main.consumer.interceptor.classes", ReadHook.class.getName());
        if (armed) props.put("producer.interceptor.classes", AckHook.class.getName());

        Topology topology = new Topology();
        Deserializer<String> values = strictInput ? new EosCrashHandlers.JsonOnly() : Serdes.String().deserializer();
        topology.addSource("input", Serdes.String().deserializer(), values, input);
        topology.addProcessor("transform-count", Counter::new, "input");
        topology.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.String(),
            Serdes.String()), "transform-count");
        topology.addSink("output", output, Serdes.String().serializer(), Serdes.String().serializer(),
            "transform-count");
        topology.addSink("counts", counts, Serdes.String().serializer(), Serdes.String().serializer(),
            "transform-count");

        KafkaStreams app = new KafkaStreams(topology, props);
        streams = app;
        app.setStateListener(LabStreams.stateLogger());
        app.setGlobalStateRestoreListener(new Restores());
        AtomicInteger uncaught = new AtomicInteger();
        app.setUncaughtExceptionHandler(e -> {
            StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse response =
                "replace_thread".equals(handler) ? StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD
                    : StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            Throwable root = e;
            String wrapper = "";   // the producer's own word in between, e.g. a transaction in an error state
            for (Throwable t = e; t != null; t = t.getCause()) {
                root = t;
                if (t.getClass() == org.apache.kafka.common.KafkaException.class) wrapper = t.getMessage();
            }
            Lab.emit("uncaught", "n", uncaught.incrementAndGet(), "response", response.name(),
                "error", oneLine(root.getClass().getSimpleName() + ": " + root.getMessage()),
                "wrapper", oneLine(wrapper));
            return response;
        });
        CountDownLatch stopped = Lab.onSigterm(() -> app.close(Duration.ofSeconds(30)));
        app.start();
        Lab.emit("started", "crash_point", crashPoint, "crash_at", crashAt, "armed", armed, "mode", mode,
            "handler", handler);

        // Commits and dropped records, from the client's own metrics, as they change.
        double commits = 0, dropped = 0;
        while (stopped.getCount() > 0) {
            double c = metric(app, "commit-total", "stream-thread-metrics");
            double d = metric(app, "dropped-records-total", "stream-task-metrics");
            if (c != commits) Lab.emit("commit", "total", (long) c, "processed", processed.get());
            if (d != dropped) Lab.emit("metrics", "dropped_records", (long) d);
            commits = c;
            dropped = d;
            KafkaStreams.State state = app.state();
            if (state == KafkaStreams.State.ERROR) {  // SHUTDOWN_CLIENT: the app is done, the deployment restarts it
                Lab.emit("exit", "state", state.name());
                System.exit(3);
            }
            Thread.sleep(100);
        }
    }

    /** Sum of one metric over its instances (threads, tasks), NaN-safe. */
    static double metric(KafkaStreams app, String name, String group) {
        double sum = 0;
        try {
            for (Map.Entry<MetricName, ? extends Metric> e : app.metrics().entrySet()) {
                if (e.getKey().name().equals(name) && e.getKey().group().equals(group)) {
                    Object v = e.getValue().metricValue();
                    if (v instanceof Number && !Double.isNaN(((Number) v).doubleValue())) sum += ((Number) v).doubleValue();
                }
            }
        } catch (RuntimeException e) {
            return 0;
        }
        return sum;
    }

    /** A message on one line, its double quotes made single (as the notebook has always shown it). */
    static String oneLine(String s) {
        return String.valueOf(s).replace("\"", "'").replace("\n", " ");
    }

    /** Halt once: no close, no flush, no commit. The marker file keeps the restart from crashing again. */
    static synchronized void crash(String where, Object... detail) {
        if (!armed) return;
        armed = false;
        try { new File(marker).createNewFile(); } catch (Exception ignored) { }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("point", where);
        row.put("read", read.get());
        row.put("processed", processed.get());
        row.put("acked", acked.get());
        for (int i = 0; i + 1 < detail.length; i += 2) row.put(String.valueOf(detail[i]), detail[i + 1]);
        Lab.emitMap("crash", row);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }

    /** The broker acknowledged an output sent since the last commit: a halt now leaves it uncommitted. */
    static boolean inFlight() {
        return AckHook.sinceCommit > 0 && AckHook.commitsAtAck == metric(streams, "commit-total", "stream-thread-metrics");
    }

    /**
     * On the stream thread: after a commit of processed records, an output sent since the last commit is on the
     * broker, acknowledged (which also settles that commit). An output sent but not yet acknowledged is waited
     * for (at most 10 s): the stream thread is here, so no commit can come before its ack.
     */
    static boolean readyToHalt() {
        if (metric(streams, "commit-total", "stream-thread-metrics") <= 0) return false;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!inFlight()) {
            if (!AckHook.sentSinceCommit() || System.nanoTime() > deadline) return false;
            try { Thread.sleep(2); } catch (InterruptedException e) { Thread.currentThread().interrupt(); return false; }
        }
        return true;
    }

    /** before_read: poll() handed over the crash-at-th record; nothing of this batch is processed yet. */
    public static class ReadHook implements ConsumerInterceptor<Object, Object> {
        @Override
        public ConsumerRecords<Object, Object> onConsume(ConsumerRecords<Object, Object> records) {
            int n = 0;
            for (TopicPartition tp : records.partitions()) if (tp.topic().equals(input)) n += records.records(tp).size();
            int before = read.getAndAdd(n);
            if (armed && before + n >= crashAt && readyToHalt()) crash("before_read", "batch", n);
            return records;
        }
        @Override public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) { }
        @Override public void close() { }
        @Override public void configure(Map<String, ?> configs) { }
    }

    /**
     * Settles the first commit, and after_send_before_commit: the broker acknowledged the crash-at-th output
     * record; no commit yet. A commit flushes every send before the commit-total metric moves, so an ack
     * seen after it is of a record sent after the commit, which the broker accepts only once the commit's
     * markers are written.
     */
    public static class AckHook implements ProducerInterceptor<Object, Object> {
        static volatile double commitsAtAck = -1;   // commit-total when the last output was acknowledged
        static volatile int sinceCommit = 0;        // outputs acknowledged since that commit
        static volatile double commitsAtSend = -1;  // commit-total when the last output was sent
        static volatile int sent = 0;               // outputs sent since that commit

        @Override
        public ProducerRecord<Object, Object> onSend(ProducerRecord<Object, Object> record) {
            if (output.equals(record.topic()) && streams != null) {
                double commits = metric(streams, "commit-total", "stream-thread-metrics");
                sent = commits == commitsAtSend ? sent + 1 : 1;
                commitsAtSend = commits;
            }
            return record;
        }

        /** An output was sent since the last commit (acknowledged or not). */
        static boolean sentSinceCommit() {
            return sent > 0 && commitsAtSend == metric(streams, "commit-total", "stream-thread-metrics");
        }
        @Override
        public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
            if (exception != null || metadata == null || !output.equals(metadata.topic()) || streams == null) return;
            int n = acked.incrementAndGet();
            double commits = metric(streams, "commit-total", "stream-thread-metrics");
            sinceCommit = commits == commitsAtAck ? sinceCommit + 1 : 1;
            commitsAtAck = commits;
            if (!settled && commits > 0) settled = true;
            if (armed && settled && crashPoint.equals("after_send_before_commit") && n >= crashAt) {
                crash("after_send_before_commit", "partition", metadata.partition(), "offset", metadata.offset());
            }
        }
        @Override public void close() { }
        @Override public void configure(Map<String, ?> configs) { }
    }

    static class Restores implements StateRestoreListener {
        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            Lab.emit("restore_start", "partition", tp.partition(), "start", start, "end", end);
        }
        @Override public void onBatchRestored(TopicPartition tp, String store, long end, long n) { }
        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            Lab.emit("restore_end", "partition", tp.partition(), "restored", total);
        }
    }

    static class Counter implements Processor<String, String, String, String> {
        ProcessorContext<String, String> context;
        KeyValueStore<String, String> store;

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> record) {
            if (armed && crashPoint.equals("after_commit") && commitsAtCrashRecord >= 0
                    && metric(streams, "commit-total", "stream-thread-metrics") > commitsAtCrashRecord) {
                crash("after_commit", "commits", (long) commitsAtCrashRecord);
            }
            Matcher m = ID.matcher(record.value());
            String id = m.find() ? m.group(1) : "";
            if (!poison.isEmpty() && poison.equals(id)) {
                throw new IllegalStateException("poison record " + id + " (offset " + context.recordMetadata()
                    .map(r -> r.partition() + "@" + r.offset()).orElse("?") + ")");
            }
            String key = record.key();
            long count = read(key, store.get(key)) + 1;
            store.put(key, mode.equals("v1") || mode.equals("crash") ? "{\"count\":" + count + "}"
                : "{\"schema\":2,\"total\":" + count + "}");
            int n = processed.incrementAndGet();
            String pad = refuseId.equals(id) ? ",\"pad\":\"" + padding + "\"" : "";
            String out = String.format(Locale.ROOT, "{\"id\":\"%s\",\"key\":\"%s\",\"value\":%d,\"text\":\"%s\","
                + "\"incarnation\":%d,\"task\":\"%s\",\"at\":%d%s}", id, key, count, id.toUpperCase(Locale.ROOT),
                incarnation, context.taskId(), System.currentTimeMillis(), pad);
            if (!pad.isEmpty()) Lab.emit("padded", "id", id, "bytes", out.getBytes(StandardCharsets.UTF_8).length);
            context.forward(record.withValue(out), "output");
            if (armed && crashPoint.equals("during_processing") && n >= crashAt && readyToHalt()) {
                crash("during_processing", "id", id);  // the count update is never forwarded
            }
            context.forward(record.withValue("{\"id\":\"" + id + "\",\"key\":\"" + key + "\",\"count\":" + count + "}"),
                "counts");
            if (armed && crashPoint.equals("after_commit") && n == crashAt) {
                commitsAtCrashRecord = metric(streams, "commit-total", "stream-thread-metrics");
            }
        }

        /** The stored count, by schema: v1 {"count":n}; v2 {"schema":2,"total":n}, strict or tolerant. */
        long read(String key, String json) {
            if (json == null) return 0;
            Matcher total = TOTAL.matcher(json), count = COUNT.matcher(json);
            if (mode.equals("v1") || mode.equals("crash")) {
                if (!count.find()) throw new IllegalStateException("state of key " + key + " is not v1: " + json);
                return Long.parseLong(count.group(1));
            }
            if (total.find()) return Long.parseLong(total.group(1));
            if (mode.equals("v2-tolerant") && count.find()) {  // migrate on read: the next put writes v2
                Lab.emit("migrated", "key", key, "from", oneLine(json));
                return Long.parseLong(count.group(1));
            }
            throw new IllegalStateException("state of key " + key + " has no field 'total' (schema 2): " + json);
        }
    }
}
