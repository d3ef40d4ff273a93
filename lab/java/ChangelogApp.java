import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * "Don't rely on internal changelogs for downstream processing" (from "Tales from running Kafka Streams in Production"): a running count per key whose
 * state store a downstream consumer might read through its changelog topic.
 *
 *   lab.variant  internal  the store's name is left to Kafka Streams (KSTREAM-AGGREGATE-STATE-STORE-<n>);
 *                          the app has no output topic: the changelog is all a downstream reader has
 *                explicit  Materialized.as(lab.store.name), and every update also goes to lab.output.topic
 *   lab.version  1: input -> groupByKey -> aggregate;  2: the same with lab.change (filter | mapValues, both
 *                harmless: they pass every record unchanged) inserted before groupByKey
 *   lab.changelog.<config>  topic configs of the store's changelog (Materialized.withLoggingEnabled)
 *
 * Caching is off, so every input record writes one update: {"id": <input id>, "key": k, "value": count}.
 * LAB lines: "topology" (the store names topology.describe() gives, and the whole description), "progress"
 * every second (records aggregated by this incarnation), plus LabStreams' state lines.
 */
public class ChangelogApp {
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]*)\"");
    private static final Pattern COUNT = Pattern.compile("\"value\"\\s*:\\s*(\\d+)");
    private static final AtomicLong aggregated = new AtomicLong();

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        String variant = Lab.setting("variant");
        long version = Lab.longSetting("version");
        String change = Lab.setting("change");
        Map<String, String> changelogConfig = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : Lab.settings.entrySet())
            if (e.getKey().startsWith("changelog.")) changelogConfig.put(e.getKey().substring(10), e.getValue());

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> input = builder.stream(Lab.setting("input.topic"),
                Consumed.with(Serdes.String(), Serdes.String()));
        if (version >= 2)   // the harmless change: every record passes, unchanged
            input = change.equals("filter") ? input.filter((k, v) -> v != null) : input.mapValues(v -> v);
        Materialized<String, String, KeyValueStore<Bytes, byte[]>> store = variant.equals("explicit")
                ? Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(Lab.setting("store.name"))
                : Materialized.<String, String, KeyValueStore<Bytes, byte[]>>with(Serdes.String(), Serdes.String());
        store = store.withKeySerde(Serdes.String()).withValueSerde(Serdes.String())
                .withCachingDisabled()                       // one update per input record
                .withLoggingEnabled(changelogConfig);
        KTable<String, String> counts = input.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .aggregate(() -> "", ChangelogApp::update, store);
        if (variant.equals("explicit"))
            counts.toStream().to(Lab.setting("output.topic"), Produced.with(Serdes.String(), Serdes.String()));

        Topology topology = builder.build();
        TopologyDescription description = topology.describe();
        List<String> stores = new ArrayList<>(), nodes = new ArrayList<>();
        for (TopologyDescription.Subtopology sub : description.subtopologies())
            for (TopologyDescription.Node node : sub.nodes()) {
                nodes.add(node.name());
                if (node instanceof TopologyDescription.Processor)
                    stores.addAll(((TopologyDescription.Processor) node).stores());
            }
        Lab.emit("topology", "variant", variant, "version", version, "stores", stores, "nodes", nodes,
                "description", description.toString());

        KafkaStreams streams = new KafkaStreams(topology, props);
        Thread reporter = new Thread(() -> {
            while (true) {
                Lab.sleep(1000);
                Lab.emit("progress", "version", version, "aggregated", aggregated.get(),
                        "state", streams.state().name());
            }
        }, "lab-progress");
        reporter.setDaemon(true);
        reporter.start();
        // The close leaves the group (KafkaStreams closes without leaving by default). A static member that
        // merely rejoins is told "Skipped assignment for returning static leader…": no rebalance, so version 2's
        // new changelog would never be created. Leaving, version 2 joins as a new member and its rebalance
        // creates its internal topics.
        LabStreams.runUntilSigterm(streams, () -> {
            streams.close(new KafkaStreams.CloseOptions().timeout(Duration.ofSeconds(20)).leaveGroup(true));
            Lab.emit("closed", "left_group", true);
        });
    }

    /** The next running count of a key, carrying the id of the input record that made it. */
    static String update(String key, String value, String previous) {
        Matcher id = ID.matcher(value), count = COUNT.matcher(previous);
        long next = (count.find() ? Long.parseLong(count.group(1)) : 0) + 1;
        aggregated.incrementAndGet();
        return "{\"id\":" + Lab.json(id.find() ? id.group(1) : null) + ",\"key\":" + Lab.json(key)
                + ",\"value\":" + next + "}";
    }
}
