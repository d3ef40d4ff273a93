import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.LegacyOffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;
import org.apache.kafka.coordinator.transaction.TransactionCoordinatorRecordSerde;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;

/**
 * The coordinators' compacted logs for ClusterFacts: the latest record per key, read_committed, of only the
 * partitions holding the ids asked about, each read bounded in time and in bytes. A bound hit stops the read and
 * keeps what it got; the ids of a partition not read to its end may be stale, so they are left out of the result
 * (the rules then treat them as unknown) and listed in {@link #reads}.
 */
class CoordinatorLogs {
    static final int MAX_UNKNOWN_IDS = 1000;

    final KafkaConsumer<ByteBuffer, ByteBuffer> consumer;
    final long timeoutMs;
    final long maxBytes;
    /** topic -> how far its read got: the "log_reads" section. */
    final Map<String, Object> reads = new LinkedHashMap<>();
    /** group -> its latest GroupMetadata record (classic groups): when it entered its current state (KIP-211's
     *  currentStateTimestamp, value version 2+, written since 2.1), its protocol type and member count. Read with
     *  the commits; null until they were. */
    Map<String, Object> groupLog;

    CoordinatorLogs(KafkaConsumer<ByteBuffer, ByteBuffer> consumer, long timeoutMs, long maxBytes) {
        this.consumer = consumer;
        this.timeoutMs = timeoutMs;
        this.maxBytes = maxBytes;
    }

    /** group -> "topic-partition" -> {offset, commit_ms}, from the partitions of `groupIds` (null: all). */
    Object commitLog(Collection<String> groupIds) {
        Map<String, Map<String, Object>> commits = new TreeMap<>();
        Map<String, Object> groups = new TreeMap<>();
        LogRead read = read("__consumer_offsets", groupIds, new GroupCoordinatorRecordSerde(), rec -> {
            Object value = rec.value() == null ? null : rec.value().message();
            if (rec.key() instanceof GroupMetadataKey k) {
                if (value instanceof GroupMetadataValue v)
                    groups.put(k.group(), ClusterFacts.map("current_state_ms",
                            v.currentStateTimestamp() < 0 ? null : v.currentStateTimestamp(),
                            "protocol_type", v.protocolType(), "members", v.members().size()));
                else groups.remove(k.group());
            } else if (rec.key() instanceof OffsetCommitKey k) {
                commit(commits, k.group(), k.topic() + "-" + k.partition(), value);
            } else if (rec.key() instanceof LegacyOffsetCommitKey k) {
                commit(commits, k.group(), k.topic() + "-" + k.partition(), value);
            }
        });
        Set<String> unknown = read.unknown(groupIds, commits.keySet(), groups.keySet());
        commits.keySet().removeAll(unknown);
        groups.keySet().removeAll(unknown);
        reads.put(read.topic, read.summary(unknown));
        groupLog = groups;
        return commits;
    }

    /** transactional id -> its latest TransactionLog record, from the partitions of `transactionalIds` (null: all). */
    Object transactionLog(Collection<String> transactionalIds) {
        Map<String, Object> latest = new TreeMap<>();
        LogRead read = read("__transaction_state", transactionalIds, new TransactionCoordinatorRecordSerde(), rec -> {
            if (!(rec.key() instanceof TransactionLogKey k)) return;
            if (rec.value() != null && rec.value().message() instanceof TransactionLogValue v)
                latest.put(k.transactionalId(), ClusterFacts.map("producer_id", v.producerId(),
                        "epoch", v.producerEpoch(), "status", v.transactionStatus(),
                        "last_update_ms", v.transactionLastUpdateTimestampMs(),
                        "start_ms", v.transactionStartTimestampMs()));
            else latest.remove(k.transactionalId());   // a tombstone removes
        });
        Set<String> unknown = read.unknown(transactionalIds, latest.keySet());
        latest.keySet().removeAll(unknown);
        reads.put(read.topic, read.summary(unknown));
        return latest;
    }

    static void commit(Map<String, Map<String, Object>> commits, String group, String partition, Object value) {
        if (value instanceof OffsetCommitValue v) {
            commits.computeIfAbsent(group, g -> new TreeMap<>())
                    .put(partition, ClusterFacts.map("offset", v.offset(), "commit_ms", v.commitTimestamp()));
        } else {   // a tombstone removes
            Map<String, Object> byPartition = commits.get(group);
            if (byPartition != null && byPartition.remove(partition) != null && byPartition.isEmpty())
                commits.remove(group);
        }
    }

    /** What one read of a coordinator log covered. */
    class LogRead {
        final String topic;
        final int partitionCount;
        final SortedSet<Integer> asked = new TreeSet<>();
        final SortedSet<Integer> complete = new TreeSet<>();
        final long started = System.nanoTime();
        long records, bytes;
        String stopped;   // null, "time" or "bytes"

        LogRead(String topic, int partitionCount) {
            this.topic = topic;
            this.partitionCount = partitionCount;
        }

        /** The coordinator's own mapping of a group or transactional id to its partition. */
        int partitionOf(String id) {
            return Utils.abs(id.hashCode()) % partitionCount;
        }

        /** The ids among these whose partition was not read to its end. */
        @SafeVarargs
        final Set<String> unknown(Collection<String>... ids) {
            Set<String> unknown = new TreeSet<>();
            for (Collection<String> some : ids)
                if (some != null)
                    for (String id : some) if (!complete.contains(partitionOf(id))) unknown.add(id);
            return unknown;
        }

        double seconds() {
            return (System.nanoTime() - started) / 1e9;
        }

        void progress(int partitionsComplete, int partitions) {
            ClusterFacts.progress("topic", topic, "records", records, "bytes", bytes,
                    "partitions_complete", partitionsComplete, "partitions", partitions, "seconds", seconds());
        }

        Map<String, Object> summary(Set<String> unknown) {
            return ClusterFacts.map("partitions", asked, "complete", complete, "records", records, "bytes", bytes,
                    "seconds", seconds(), "stopped", stopped, "bound_ms", timeoutMs, "bound_bytes", maxBytes,
                    "unknown_ids", unknown.stream().limit(MAX_UNKNOWN_IDS).toList(), "unknown_count", unknown.size());
        }
    }

    /** Read the partitions of `ids` (null: every partition) from the start, all at once, until each is read to its
     *  end offset or a bound is hit; `apply` gets each record, oldest first. */
    LogRead read(String topic, Collection<String> ids, CoordinatorRecordSerde serde, Consumer<CoordinatorRecord> apply) {
        // also what fails (e.g. TopicAuthorizationException) when the log may not be read at all
        int partitionCount = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs)).size();
        LogRead read = new LogRead(topic, partitionCount);
        if (partitionCount == 0) return read;   // no such log yet: nothing was ever written to it
        if (ids == null) for (int p = 0; p < partitionCount; p++) read.asked.add(p);
        else for (String id : ids) read.asked.add(read.partitionOf(id));
        if (read.asked.isEmpty()) return read;
        List<TopicPartition> tps = new ArrayList<>();
        for (int p : read.asked) tps.add(new TopicPartition(topic, p));
        Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
        consumer.assign(tps);
        consumer.seekToBeginning(tps);
        Set<TopicPartition> done = readRanges(read, end, r -> {
            if (r.key() == null) return;
            CoordinatorRecord rec;
            try {
                rec = serde.deserialize(r.key(), r.value());
            } catch (RuntimeException unknownType) {   // record types this reading does not need
                return;
            }
            apply.accept(rec);
        });
        for (TopicPartition tp : done) read.complete.add(tp.partition());
        return read;
    }

    /** Read the assigned partitions from their positions, all at once, until each reaches its `end` offset or a
     *  bound of `read` is hit; `apply` gets each record, oldest first (one past an end may come in the batch that
     *  reached it). Returns the partitions read to their end. */
    Set<TopicPartition> readRanges(LogRead read, Map<TopicPartition, Long> end,
                                   Consumer<ConsumerRecord<ByteBuffer, ByteBuffer>> apply) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        long nextProgress = System.currentTimeMillis() + 1000;
        Set<TopicPartition> cut = new HashSet<>();   // partitions with records left unread in the last batch
        Set<TopicPartition> done;
        while ((done = readToEnd(end, cut)).size() < end.size() && read.stopped == null) {
            consumer.pause(done);   // what is written from now on is not part of this snapshot
            if (System.currentTimeMillis() > deadline) {
                read.stopped = "time";
                break;
            }
            ConsumerRecords<ByteBuffer, ByteBuffer> batch = consumer.poll(Duration.ofMillis(200));
            for (TopicPartition tp : batch.partitions()) {
                if (read.stopped != null) {
                    cut.add(tp);
                    continue;
                }
                for (ConsumerRecord<ByteBuffer, ByteBuffer> r : batch.records(tp)) {
                    long size = Math.max(0, r.serializedKeySize()) + Math.max(0, r.serializedValueSize());
                    if (read.bytes + size > maxBytes) {
                        read.stopped = "bytes";
                        cut.add(tp);
                        break;
                    }
                    read.records++;
                    read.bytes += size;
                    apply.accept(r);
                }
            }
            if (System.currentTimeMillis() >= nextProgress) {
                nextProgress = System.currentTimeMillis() + 1000;
                read.progress(done.size(), end.size());
            }
        }
        read.progress(done.size(), end.size());   // and once at the end: where it got, however short the read
        consumer.unsubscribe();
        return done;
    }

    /** The partitions whose position reached their end offset, all records before it read. */
    Set<TopicPartition> readToEnd(Map<TopicPartition, Long> end, Set<TopicPartition> cut) {
        Set<TopicPartition> done = new HashSet<>();
        for (Map.Entry<TopicPartition, Long> e : end.entrySet())
            if (!cut.contains(e.getKey()) && consumer.position(e.getKey(), Duration.ofMillis(timeoutMs)) >= e.getValue())
                done.add(e.getKey());
        return done;
    }
}
