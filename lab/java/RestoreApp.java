import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.LagInfo;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * "The restore process" (from "Tales from running Kafka Streams in Production"): a Kafka Streams app that puts every input record into one persistent
 * (RocksDB) key-value store, logged to its changelog, so the changelog grows with the input. Run, killed
 * (kill -9) or stopped (SIGTERM), and restarted by lab/scenarios/nb06_state_in_production/state_restore_apps.py, which times the restore.
 *
 * Evidence (LAB lines): LabStreams.restoreLogger()'s restore start / batch / end; "probe" when a record whose key
 * starts with "probe-" is processed (the moment this instance processes again); "progress" every second:
 * records processed by this JVM, state, active and standby tasks, the store's lag (KIP-535), the store's
 * bytes on disk and the changelog's bytes on the brokers (Admin#describeLogDirs).
 * args[0]: a properties file; lab.input.topic names the input, the other lab.* keys are for Lab.
 */
public final class RestoreApp {
    static final String STORE = "restore-store";
    private static final AtomicLong processed = new AtomicLong();

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        String input = Lab.setting("input.topic");
        String changelog = props.getProperty("application.id") + "-" + STORE + "-changelog";

        Topology topology = new Topology();
        topology.addSource("input", new ByteArrayDeserializer(), new ByteArrayDeserializer(), input);
        topology.addProcessor("put", Put::new, "input");
        // no cache: every put goes to RocksDB and the changelog, so the changelog is the input's size
        topology.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE),
                Serdes.Bytes(), Serdes.ByteArray()).withCachingDisabled(), "put");

        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setGlobalStateRestoreListener(LabStreams.restoreLogger());   // before start, or it is refused
        Thread reporter = new Thread(() -> report(streams, props, changelog), "lab-reporter");
        reporter.setDaemon(true);
        reporter.start();
        LabStreams.runUntilSigterm(streams);
    }

    static final class Put implements Processor<byte[], byte[], Void, Void> {
        private KeyValueStore<Bytes, byte[]> store;

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            store = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            store.put(Bytes.wrap(record.key()), record.value());
            processed.incrementAndGet();
            String key = new String(record.key(), StandardCharsets.UTF_8);
            if (key.startsWith("probe-")) Lab.emit("probe", "key", key);
        }
    }

    /** Every second: what this instance holds and how far it is, as a "progress" LAB line. */
    private static void report(KafkaStreams streams, Properties props, String changelog) {
        String stateDir = props.getProperty("state.dir");
        try (Admin admin = Admin.create(Lab.connection(props))) {   // only what a client needs: no Streams settings
            while (true) {
                TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
                Map<String, Object> lags = new LinkedHashMap<>();
                try {
                    for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : t.activeTasks()) active.add(task.taskId().toString());
                        for (TaskMetadata task : t.standbyTasks()) standby.add(task.taskId().toString());
                    }
                    for (Map.Entry<String, Map<Integer, LagInfo>> store : streams.allLocalStorePartitionLags().entrySet())
                        for (Map.Entry<Integer, LagInfo> part : store.getValue().entrySet())
                            lags.put(String.valueOf(part.getKey()), part.getValue().offsetLag());
                } catch (RuntimeException notRunning) {
                    // between states: report what we have
                }
                Lab.emit("progress", "processed", processed.get(), "state", streams.state().name(),
                        "active", new ArrayList<>(active), "standby", new ArrayList<>(standby), "lag", lags,
                        "store_bytes", Lab.bytesUnder(stateDir), "changelog_bytes", changelogBytes(admin, changelog));
                Lab.sleep(1000);
            }
        }
    }

    /** The changelog's bytes on the brokers (each partition counted once, its largest replica); null if unknown. */
    private static Long changelogBytes(Admin admin, String changelog) {
        try {
            List<Integer> brokers = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get(5, TimeUnit.SECONDS)) brokers.add(n.id());
            Map<Integer, Long> partitions = new LinkedHashMap<>();
            for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(brokers).allDescriptions()
                    .get(5, TimeUnit.SECONDS).values())
                for (LogDirDescription dir : dirs.values())
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.replicaInfos().entrySet())
                        if (r.getKey().topic().equals(changelog))
                            partitions.merge(r.getKey().partition(), r.getValue().size(), Math::max);
            return partitions.isEmpty() ? null : partitions.values().stream().mapToLong(Long::longValue).sum();
        } catch (Exception unknown) {   // not allowed to describe log dirs, or a broker is away
            return null;
        }
    }
}
