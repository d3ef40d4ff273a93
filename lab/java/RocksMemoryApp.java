import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.apache.kafka.streams.state.Stores;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.WriteBufferManager;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * "Oh, the memory overhead" (from "Tales from running Kafka Streams in Production"): lab.stores key-value stores (RocksDB, no changelog, no record cache) in
 * one processor over an input topic of N partitions, so the app holds N x stores RocksDB instances. Once the
 * client is RUNNING (a "memory" line with phase "baseline"), every task writes lab.mb.per.store MB of random
 * values into each of its stores, then get()s every key once (reads fill the block cache), in slices of at
 * most 100 ms of a wall-clock punctuator so the thread keeps polling. Every second a "memory" line gives the
 * JVM's heap (Lab.memory; the lab measures its RSS) and the KIP-607 RocksDB metrics of every store instance
 * (LabStreams.metrics).
 *
 * lab.config: "default" (Kafka Streams' RocksDB options: per store instance its own 50 MB block cache and
 * 3 x 16 MB write buffers) or "bounded" (BoundedConfig below: one LRUCache of lab.bound.mb shared by every
 * store of the JVM, memtables charged to it by one WriteBufferManager: the docs' BoundedMemoryRocksDBConfig).
 */
public class RocksMemoryApp {
    static final AtomicBoolean go = new AtomicBoolean(false);
    static final AtomicInteger filled = new AtomicInteger(), storeInstances = new AtomicInteger();
    static final String[] METRICS = {"size-all-mem-tables", "block-cache-usage", "block-cache-capacity",
            "block-cache-pinned-usage", "estimate-table-readers-mem", "total-sst-files-size", "estimate-num-keys"};
    static int stores, valueBytes;
    static long bytesPerStore;

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        stores = Integer.parseInt(Lab.setting("stores"));
        bytesPerStore = Long.parseLong(Lab.setting("mb.per.store")) << 20;
        valueBytes = Integer.parseInt(Lab.setting("value.bytes", "1024"));
        String config = Lab.setting("config");
        if (config.equals("bounded")) {
            BoundedConfig.size(Long.parseLong(Lab.setting("bound.mb")) << 20);
            props.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, BoundedConfig.class);
        } else if (!config.equals("default")) {
            throw new IllegalArgumentException("lab.config must be default or bounded, not " + config);
        }
        Topology topology = new Topology();
        topology.addSource("input", Serdes.ByteArray().deserializer(), Serdes.ByteArray().deserializer(),
                Lab.setting("input.topic"));
        List<String> names = new ArrayList<>();
        for (int i = 0; i < stores; i++) names.add("store-" + i);
        topology.addProcessor("fill", Fill::new, "input");
        for (String name : names)
            // no changelog: the writes stay local (the lesson is the memory, not the broker); no record cache
            topology.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(name),
                    Serdes.ByteArray(), Serdes.ByteArray()).withLoggingDisabled().withCachingDisabled(), "fill");
        KafkaStreams streams = new KafkaStreams(topology, props);

        Thread reporter = new Thread(() -> {
            while (true) {
                boolean running = streams.state() == KafkaStreams.State.RUNNING;
                String phase = !go.get() ? "starting" : filled.get() < storeInstances.get() ? "filling" : "filled";
                if (running && !go.get()) phase = "baseline";   // stores open and empty: the fill starts after this
                Lab.emit("memory", "phase", phase, "config", config, "filled", filled.get(),
                        "store_instances", storeInstances.get(), "memory", Lab.memory(),
                        "rocksdb", LabStreams.metrics(streams, "stream-state-metrics", METRICS));
                if (running) go.set(true);
                Lab.sleep(1000);
            }
        });
        reporter.setDaemon(true);
        reporter.start();
        LabStreams.runUntilSigterm(streams);
    }

    /** Per task: fill each of its stores to lab.mb.per.store, then read every key once. */
    static final class Fill implements Processor<byte[], byte[], Void, Void> {
        private final List<KeyValueStore<byte[], byte[]>> mine = new ArrayList<>();
        private long keysPerStore, next;     // `next` runs over stores x keys, writes then reads
        private boolean done;
        private String task;
        private long startedMs;

        @Override
        public void init(ProcessorContext<Void, Void> context) {
            for (int i = 0; i < stores; i++) mine.add(context.getStateStore("store-" + i));
            storeInstances.addAndGet(stores);
            keysPerStore = Math.max(1, bytesPerStore / valueBytes);
            task = context.taskId().toString();
            context.schedule(Duration.ofMillis(10), PunctuationType.WALL_CLOCK_TIME, now -> step());
        }

        private void step() {
            if (done || !go.get()) return;
            if (startedMs == 0) startedMs = System.currentTimeMillis();
            long until = System.nanoTime() + 100_000_000L;   // a slice, then back to the poll loop
            long total = keysPerStore * mine.size();
            byte[] value = new byte[valueBytes];
            while (next < 2 * total && System.nanoTime() < until) {
                for (int n = 0; n < 256 && next < 2 * total; n++, next++) {
                    long i = next % total;
                    KeyValueStore<byte[], byte[]> store = mine.get((int) (i / keysPerStore));
                    byte[] key = String.format("k%012d", i % keysPerStore).getBytes(StandardCharsets.UTF_8);
                    if (next < total) {
                        ThreadLocalRandom.current().nextBytes(value);   // incompressible, like real payloads
                        store.put(key, value);
                    } else if (store.get(key) == null) {
                        throw new IllegalStateException("key " + (i % keysPerStore) + " missing in " + task);
                    }
                }
            }
            if (next >= 2 * total) {
                done = true;
                filled.addAndGet(mine.size());
                Lab.emit("filled", "task", task, "stores", mine.size(), "mb_per_store", bytesPerStore >> 20,
                        "seconds", (System.currentTimeMillis() - startedMs) / 1000.0);
            }
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            // the input only gives the app its partitions (tasks); the stores are filled by the punctuator
        }
    }

    /**
     * The docs' BoundedMemoryRocksDBConfig: ONE block cache for every store instance of the JVM, the memtables
     * charged to that cache through ONE WriteBufferManager (half of it at most), index and filter blocks in the
     * cache too. So RocksDB's memory has one cap, whatever the number of partitions and stores.
     */
    public static class BoundedConfig implements RocksDBConfigSetter {
        private static Cache cache;
        private static WriteBufferManager writeBufferManager;

        static synchronized void size(long totalBytes) {
            RocksDB.loadLibrary();   // made before Kafka Streams opens a store, which would load it otherwise
            // strict_capacity_limit=false (inserts never fail; the cache may overshoot briefly), 10% for
            // index and filter blocks at high priority
            cache = new LRUCache(totalBytes, -1, false, 0.1);
            writeBufferManager = new WriteBufferManager(totalBytes / 2, cache);
        }

        @Override
        public void setConfig(String storeName, Options options, Map<String, Object> configs) {
            BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
            table.setBlockCache(cache);
            table.setCacheIndexAndFilterBlocks(true);
            table.setCacheIndexAndFilterBlocksWithHighPriority(true);
            table.setPinTopLevelIndexAndFilter(true);
            options.setWriteBufferManager(writeBufferManager);
            options.setTableFormatConfig(table);
        }

        @Override
        public void close(String storeName, Options options) {
            // the cache and the WriteBufferManager are shared by every store instance: never closed here
        }
    }
}
