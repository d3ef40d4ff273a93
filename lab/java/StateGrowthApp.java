import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.TimestampedKeyValueStore;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.WindowStore;
import org.rocksdb.Env;
import org.rocksdb.Options;
import org.rocksdb.RocksDBException;
import org.rocksdb.SstFileManager;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * "State Stores don't have TTL" (from "Tales from running Kafka Streams in Production"): one store per app, fed keys it has never seen.
 * lab.kind says which store:
 *   kv      DSL groupByKey().count(): a key-value store, no retention: one entry per key, for ever
 *   window  DSL windowed count with Materialized.withRetention(lab.retention.ms): segments are dropped as
 *           stream time passes the retention
 *   ttl     processor API: a timestamped key-value store, and a STREAM_TIME punctuator every lab.sweep.ms
 *           that deletes the keys not updated for lab.ttl.ms (each delete is a changelog tombstone)
 * Every lab.report.ms a LAB line "growth" says the store's exact entry count (interactive queries), the
 * KIP-607 RocksDB metrics, the bytes of the state directory, and the changelog's bytes (Admin describeLogDirs).
 * Each RocksDB instance gets a write buffer (memtable) of lab.write.buffer.bytes (SmallMemtables): with Streams'
 * 16 MB the entries would stay in memory, and off the disk, for the whole lesson. With lab.disk.limit.bytes, each
 * RocksDB instance also gets an SstFileManager that allows its SST files that many bytes
 * (setMaxAllowedSpaceUsage): RocksDB's own limit, so that the disk-space lesson fills a store, not the disk.
 * args[0]: a properties file; lab.* keys are for this program, the rest are Streams configs.
 */
public class StateGrowthApp {
    private static final AtomicLong processed = new AtomicLong(), tombstones = new AtomicLong(),
            sweeps = new AtomicLong();
    private static String store;
    private static long ttlMs, writeBufferBytes, diskLimitBytes;

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        String kind = Lab.setting("kind");
        store = kind + "-store";
        String changelog = props.getProperty("application.id") + "-" + store + "-changelog";
        String stateDir = props.getProperty("state.dir");
        writeBufferBytes = Lab.longSetting("write.buffer.bytes");
        diskLimitBytes = Lab.longSetting("disk.limit.bytes", 0);
        props.put("rocksdb.config.setter", SmallMemtables.class);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> input = builder.stream(Lab.setting("input.topic"),
                Consumed.with(Serdes.String(), Serdes.String()));
        if (kind.equals("kv")) {
            input.peek((k, v) -> processed.incrementAndGet()).groupByKey()
                    .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(store).withCachingDisabled());
        } else if (kind.equals("window")) {
            input.peek((k, v) -> processed.incrementAndGet()).groupByKey()
                    .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(Lab.longSetting("window.ms"))))
                    .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as(store)
                            .withRetention(Duration.ofMillis(Lab.longSetting("retention.ms"))).withCachingDisabled());
        } else if (kind.equals("ttl")) {
            ttlMs = Lab.longSetting("ttl.ms");
            builder.addStateStore(Stores.timestampedKeyValueStoreBuilder(
                    Stores.persistentTimestampedKeyValueStore(store), Serdes.String(), Serdes.Long())
                    .withCachingDisabled());
            input.process(() -> new Expire(Lab.longSetting("sweep.ms")), store);
        } else {
            throw new IllegalArgumentException("unknown lab.kind " + kind);
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setGlobalStateRestoreListener(LabStreams.restoreLogger());
        streams.setUncaughtExceptionHandler(e -> {   // what the thread died of; then the client stops (ERROR)
            Throwable root = e;
            while (root.getCause() != null) root = root.getCause();
            Lab.emit("uncaught", "error", String.valueOf(e.getMessage()).replace('"', '\''),
                    "root", (root.getClass().getSimpleName() + ": " + root.getMessage()).replace('"', '\''));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
        });

        Admin admin = Admin.create(Lab.connection(props));   // the connection only: bootstrap and security
        long every = Lab.longSetting("report.ms", 1000);
        Thread reporter = new Thread(() -> {
            while (true) {
                Lab.sleep(every);
                Map<String, Map<String, Double>> m = LabStreams.metrics(streams, "stream-state-metrics",
                        "estimate-num-keys", "total-sst-files-size", "live-sst-files-size", "size-all-mem-tables",
                        "num-entries-active-mem-table", "num-entries-imm-mem-tables");
                Lab.emit("growth", "store", kind, "state", streams.state().name(), "processed", processed.get(),
                        "keys", entries(streams, kind), "estimate_num_keys", sum(m, "estimate-num-keys"),
                        "total_sst_bytes", sum(m, "total-sst-files-size"),
                        "live_sst_bytes", sum(m, "live-sst-files-size"),
                        "memtable_bytes", sum(m, "size-all-mem-tables"),
                        "memtable_keys", add(sum(m, "num-entries-active-mem-table"),
                                             sum(m, "num-entries-imm-mem-tables")),
                        "state_dir_bytes", Lab.bytesUnder(stateDir),
                        "changelog_bytes", logBytes(admin, changelog), "tombstones", tombstones.get(),
                        "sweeps", sweeps.get());
            }
        }, "growth-reporter");
        reporter.setDaemon(true);
        reporter.start();
        LabStreams.runUntilSigterm(streams);
    }

    /** The store's entries counted one by one through interactive queries; null while it is not queryable. */
    static Long entries(KafkaStreams streams, String kind) {
        if (streams.state() != KafkaStreams.State.RUNNING) return null;
        long n = 0;
        try {
            if (kind.equals("window")) {
                try (KeyValueIterator<Windowed<String>, Long> it = streams.store(StoreQueryParameters.fromNameAndType(
                        store, QueryableStoreTypes.<String, Long>windowStore())).all()) {
                    for (; it.hasNext(); it.next()) n++;
                }
            } else {
                try (KeyValueIterator<String, Long> it = streams.store(StoreQueryParameters.fromNameAndType(
                        store, QueryableStoreTypes.<String, Long>keyValueStore())).all()) {
                    for (; it.hasNext(); it.next()) n++;
                }
            }
        } catch (RuntimeException notQueryable) {   // a rebalance or restore under way
            return null;
        }
        return n;
    }

    /** KIP-607 values summed over the store's instances (tasks; segments are already summed per store). */
    static Double sum(Map<String, Map<String, Double>> metrics, String name) {
        Map<String, Double> values = metrics.get(name);
        if (values == null) return null;
        double total = 0;
        for (double v : values.values()) total += v;
        return total;
    }

    static Double add(Double a, Double b) {
        return a == null || b == null ? null : a + b;
    }

    /** Bytes of the topic's log on the brokers (describeLogDirs), the largest replica of each partition. */
    static Long logBytes(Admin admin, String topic) {
        try {
            List<Integer> brokers = new ArrayList<>();
            for (Node node : admin.describeCluster().nodes().get(10, TimeUnit.SECONDS)) brokers.add(node.id());
            Map<TopicPartition, Long> largest = new java.util.HashMap<>();
            for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(brokers).allDescriptions()
                    .get(10, TimeUnit.SECONDS).values())
                for (LogDirDescription dir : dirs.values())
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.replicaInfos().entrySet())
                        if (r.getKey().topic().equals(topic))
                            largest.merge(r.getKey(), r.getValue().size(), Math::max);
            long total = 0;
            for (long size : largest.values()) total += size;
            return largest.isEmpty() ? null : total;
        } catch (Exception notAllowed) {   // no DESCRIBE on the cluster, or the topic not created yet
            return null;
        }
    }

    /** Count per key in a timestamped store; every lab.sweep.ms of stream time, delete what is older than the TTL. */
    static class Expire implements Processor<String, String, Void, Void> {
        private final long sweepMs;
        private TimestampedKeyValueStore<String, Long> counts;

        Expire(long sweepMs) {
            this.sweepMs = sweepMs;
        }

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            counts = context.getStateStore(store);
            context.schedule(Duration.ofMillis(sweepMs), PunctuationType.STREAM_TIME, this::sweep);
        }

        @Override
        public void process(Record<String, String> record) {
            ValueAndTimestamp<Long> old = counts.get(record.key());
            long count = old == null ? 1 : old.value() + 1;
            counts.put(record.key(), ValueAndTimestamp.make(count, record.timestamp()));
            processed.incrementAndGet();
        }

        private void sweep(long streamTime) {
            List<String> expired = new ArrayList<>();
            long kept = 0;
            try (KeyValueIterator<String, ValueAndTimestamp<Long>> it = counts.all()) {
                while (it.hasNext()) {
                    KeyValue<String, ValueAndTimestamp<Long>> entry = it.next();
                    if (entry.value.timestamp() <= streamTime - ttlMs) expired.add(entry.key);
                    else kept++;
                }
            }
            for (String key : expired) counts.delete(key);   // a tombstone in the changelog each
            tombstones.addAndGet(expired.size());
            sweeps.incrementAndGet();
            Lab.emit("sweep", "stream_time", streamTime, "deleted", expired.size(), "kept", kept);
        }
    }

    /** rocksdb.config.setter: the memtable size the lesson asks for (and a space limit), the rest as Kafka
     * Streams sets it. */
    public static class SmallMemtables implements RocksDBConfigSetter {
        private SstFileManager files;

        @Override
        public void setConfig(String storeName, Options options, Map<String, Object> configs) {
            options.setWriteBufferSize(writeBufferBytes);
            if (diskLimitBytes > 0) {
                try {
                    files = new SstFileManager(Env.getDefault());
                } catch (RocksDBException e) {
                    throw new IllegalStateException("no SstFileManager: " + e.getMessage(), e);
                }
                files.setMaxAllowedSpaceUsage(diskLimitBytes);
                options.setSstFileManager(files);
            }
        }

        @Override
        public void close(String storeName, Options options) {
            if (files != null) files.close();
        }
    }
}
