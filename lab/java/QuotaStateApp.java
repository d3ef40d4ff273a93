import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The topology of "Quotas and Kafka Streams EOS": one input partition, one processor that writes `lab.state.bytes`
 * random bytes to a state store per input record (so the changelog producer carries about
 * that much per record), and one output record {"id": <input id>} per input for the audit.
 *
 * args[0]: a properties file. Keys starting with "lab." are ours; the rest go to Kafka Streams.
 * Every second it logs one evidence line "LAB {json}" of kind "metrics" (lab.experiment.evidence; Lab.emit
 * through the logger lab.QuotaStateApp, without "app")
 * with the producer and thread metrics the notebook uses (throttle time, commit latency, records
 * processed and commits, so the size of the open transaction), keyed by the clients' real ids.
 */
public class QuotaStateApp {
    private static final Logger LOG = LoggerFactory.getLogger("lab.QuotaStateApp");
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");

    static class StateWriter implements Processor<String, String, String, String> {
        private final int stateBytes;
        private final Random random = new Random();
        private ProcessorContext<String, String> context;
        private KeyValueStore<String, String> store;

        StateWriter(int stateBytes) {
            this.stateBytes = stateBytes;
        }

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore("state");
        }

        @Override
        public void process(Record<String, String> record) {
            Matcher m = ID.matcher(record.value() == null ? "" : record.value());
            String id = m.find() ? m.group(1) : String.valueOf(record.key());
            // Random letters: nothing for compression to shrink, like the report's random string.
            char[] payload = new char[stateBytes];
            for (int i = 0; i < stateBytes; i++) payload[i] = (char) ('a' + random.nextInt(26));
            store.put(id, new String(payload));
            context.forward(record.withValue("{\"id\":\"" + id + "\"}"));
        }
    }

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        Lab.app = null;
        Lab.printTo(LOG::info);
        String input = Lab.setting("input.topic");
        String output = Lab.setting("output.topic");
        int stateBytes = Lab.intSetting("state.bytes", 1024);
        long metricsEveryMs = Lab.longSetting("metrics.interval.ms", 1000);
        // Optional DEBUG loggers (comma-separated names), e.g. the producer's Sender: evidence of the stall.
        for (String name : Lab.setting("debug.loggers", "").split(",")) {
            if (!name.isBlank()) org.apache.log4j.Logger.getLogger(name.trim()).setLevel(org.apache.log4j.Level.DEBUG);
        }

        StreamsBuilder builder = new StreamsBuilder();
        // In-memory and uncached: every put goes straight to the changelog, as in the report.
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.inMemoryKeyValueStore("state"), Serdes.String(), Serdes.String()).withCachingDisabled());
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .process(() -> new StateWriter(stateBytes), "state")
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        // Keep the app alive like a supervised production app would: a dead thread is replaced.
        streams.setUncaughtExceptionHandler(e -> {
            LOG.error("Stream thread died, replacing it", e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        CountDownLatch done = Lab.onSigterm(() -> streams.close(Duration.ofSeconds(10)));
        streams.start();

        Thread reporter = new Thread(() -> {
            while (done.getCount() > 0) {
                try {
                    Thread.sleep(metricsEveryMs);
                } catch (InterruptedException e) {
                    return;
                }
                report(streams);
            }
        }, "lab-metrics");
        reporter.setDaemon(true);
        reporter.start();
        done.await();
    }

    /**
     * The few metrics the notebook plots, grouped by the client or thread id that owns them: numbers only, as
     * doubles (Lab.json: NaN/Infinity, "no sample yet", become null).
     */
    static void report(KafkaStreams streams) {
        Map<String, Map<String, Double>> producers = new TreeMap<>();
        Map<String, Map<String, Double>> threads = new TreeMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName n = e.getKey();
            String name = n.name();
            Map<String, Double> owner;
            if (n.group().equals("producer-metrics") && (name.startsWith("produce-throttle-time")
                    || name.startsWith("txn-") || name.equals("record-send-total")
                    || name.equals("outgoing-byte-total"))) {
                owner = producers.computeIfAbsent(n.tags().get("client-id"), k -> new TreeMap<>());
            } else if (n.group().equals("stream-thread-metrics") && (name.startsWith("commit-latency")
                    || name.equals("process-total") || name.equals("commit-total"))) {
                owner = threads.computeIfAbsent(n.tags().get("thread-id"), k -> new TreeMap<>());
            } else {
                continue;
            }
            Object v = e.getValue().metricValue();
            if (v instanceof Number) owner.put(name, ((Number) v).doubleValue());
        }
        Lab.emit("metrics", "state", streams.state().name(), "producers", producers, "threads", threads);
    }
}
