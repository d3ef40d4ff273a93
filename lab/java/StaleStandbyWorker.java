import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A per-key counter in a (optionally cached) key-value store: the smallest topology that shows
 * KAFKA-14624. Per input {"id", "key", ...} it reads the key's count, adds 1, writes it back and
 * forwards {"id","key","value","prev","instance","task","at"}. It reports in the lab's evidence
 * protocol (`LAB {json}` lines, Lab.emit through this class's logger, without "app" and stamped with the
 * "instance"): "started", then an "assignment" (state, active and standby tasks) whenever it changes, so the
 * lab can wait for RUNNING and draw task movements.
 *
 * args[0]: a properties file. lab.* keys are for this program, everything else goes to Kafka Streams.
 */
public class StaleStandbyWorker {
    static final Logger LOG = LoggerFactory.getLogger(StaleStandbyWorker.class);
    static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");
    static final Pattern INC = Pattern.compile("\"increment\"\\s*:\\s*(-?\\d+)");
    static final String STORE = "counts";

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        String instance = Lab.setting("instance");
        Lab.app = null;
        Lab.stamp("instance", Long.parseLong(instance));   // a number: the lab's instance 1, 2, 3...
        Lab.printTo(LOG::info);
        String input = Lab.setting("input.topic");
        String output = Lab.setting("output.topic");
        boolean caching = Lab.flag("caching");

        StoreBuilder<KeyValueStore<String, Long>> store =
            Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long());
        store = caching ? store.withCachingEnabled() : store.withCachingDisabled();

        Topology topology = new Topology();
        topology.addSource("input", Serdes.String().deserializer(), Serdes.String().deserializer(), input);
        topology.addProcessor("count", () -> new Counter(instance), "input");
        topology.addStateStore(store, "count");
        topology.addSink("output", output, Serdes.String().serializer(), Serdes.String().serializer(), "count");

        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch stopped = Lab.onSigterm(() -> streams.close(Duration.ofSeconds(30)));
        streams.start();
        Lab.emit("started", "caching", caching);

        // Poll the local assignment: Streams' own logs spread it over several lines and versions.
        List<Object> last = null;
        while (stopped.getCount() > 0) {
            KafkaStreams.State state = streams.state();
            TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
            try {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata t : thread.activeTasks()) active.add(t.taskId().toString());
                    for (TaskMetadata t : thread.standbyTasks()) standby.add(t.taskId().toString());
                }
            } catch (RuntimeException e) {  // not running (yet / any more)
                active.clear();
                standby.clear();
            }
            List<Object> now = Arrays.asList(state.name(), active, standby);
            if (!now.equals(last)) {  // the lab waits for state RUNNING and draws the roles
                Lab.emit("assignment", "state", state.name(), "active", active, "standby", standby);
                last = now;
            }
            Thread.sleep(100);
        }
    }

    static class Counter implements Processor<String, String, String, String> {
        final String instance;
        ProcessorContext<String, String> context;
        KeyValueStore<String, Long> counts;

        Counter(String instance) { this.instance = instance; }

        @Override
        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.counts = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> record) {
            Matcher id = ID.matcher(record.value());
            Matcher inc = INC.matcher(record.value());
            String key = record.key();
            Long prev = counts.get(key);  // with caching, this may be served by the thread cache
            long value = (prev == null ? 0 : prev) + (inc.find() ? Long.parseLong(inc.group(1)) : 1);
            counts.put(key, value);
            context.forward(record.withValue(String.format(
                "{\"id\":\"%s\",\"key\":\"%s\",\"value\":%d,\"prev\":%s,\"instance\":\"%s\",\"task\":\"%s\",\"at\":%d}",
                id.find() ? id.group(1) : "", key, value, prev == null ? "null" : prev.toString(), instance,
                context.taskId(), System.currentTimeMillis())));
        }
    }
}
