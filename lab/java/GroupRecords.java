import java.util.*;
import org.apache.kafka.common.TopicPartition;

/**
 * What an empty group would re-read or skip on restart, in records, for ClusterFacts' "group_records" section. The
 * partitions holding the empty groups' committed offsets are read read_committed (ClusterFacts' consumer, never a
 * group) from log start to the end that consumer sees (the last stable offset), counting the records before each
 * committed offset. Offsets also number the transaction markers and the aborted records, which a read_committed
 * consumer is not given (the clients' CompletedFetch skips control batches, and aborted batches when read_committed):
 * the records are what such a restart reads again; a read_uncommitted one also gets the aborted records. The read is bounded in time and bytes as the
 * coordinator logs' reads are; only a partition read to its end gets a count.
 */
class GroupRecords {
    /** {"partitions": {"topic-partition": {"records": from log start to the end, "before": {committed offset:
     *  records before it}}}, "uncounted": partitions not read to their end, and how far the read got}. */
    static Map<String, Object> count(CoordinatorLogs logs, Map<String, Object> groups,
                                     Map<String, Object> topicOffsets) {
        if (groups.containsKey("error") || topicOffsets.containsKey("error"))
            throw new IllegalStateException("the groups or the topics' offsets could not be read");
        Map<TopicPartition, TreeMap<Long, long[]>> before = new HashMap<>();   // committed offset -> records before it
        for (Object value : groups.values()) {
            Map<?, ?> g = (Map<?, ?>) value;
            boolean empty = "Empty".equals(g.get("state")) || g.get("members") instanceof List<?> m && m.isEmpty();
            if (!empty || !(g.get("offsets") instanceof Map<?, ?> offsets)) continue;
            for (Map.Entry<?, ?> e : offsets.entrySet())
                before.computeIfAbsent(partition((String) e.getKey()), tp -> new TreeMap<>())
                        .put(((Number) e.getValue()).longValue(), new long[1]);
        }
        Map<TopicPartition, Long> end = new HashMap<>();
        Map<TopicPartition, long[]> total = new HashMap<>();
        for (TopicPartition tp : before.keySet()) {
            total.put(tp, new long[1]);
            if (topicOffsets.get(tp.toString()) instanceof Map<?, ?> log
                    && ((Number) log.get("latest")).longValue() > ((Number) log.get("earliest")).longValue())
                end.put(tp, ((Number) log.get("latest")).longValue());   // an empty log has no record to count
        }
        CoordinatorLogs.LogRead read = logs.new LogRead("the empty groups' partitions", 0);
        Set<TopicPartition> done = new HashSet<>(before.keySet());
        done.removeAll(end.keySet());
        if (!end.isEmpty()) {
            logs.consumer.assign(end.keySet());
            logs.consumer.seekToBeginning(end.keySet());
            done.addAll(logs.readRanges(read, end, r -> {
                TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                if (r.offset() >= end.get(tp)) return;   // written after the snapshot of the ends
                total.get(tp)[0]++;
                for (long[] n : before.get(tp).tailMap(r.offset(), false).values()) n[0]++;
            }));
        }
        Map<String, Object> partitions = new TreeMap<>();
        List<String> uncounted = new ArrayList<>();
        for (TopicPartition tp : before.keySet()) {
            if (!done.contains(tp) || !topicOffsets.containsKey(tp.toString())) {
                uncounted.add(tp.toString());
                continue;
            }
            Map<String, Object> counts = new TreeMap<>();
            before.get(tp).forEach((offset, n) -> counts.put(String.valueOf(offset), n[0]));
            partitions.put(tp.toString(), ClusterFacts.map("records", total.get(tp)[0], "before", counts));
        }
        Collections.sort(uncounted);
        return ClusterFacts.map("partitions", partitions, "uncounted", uncounted, "records", read.records,
                "bytes", read.bytes, "seconds", read.seconds(), "stopped", read.stopped,
                "bound_ms", logs.timeoutMs, "bound_bytes", logs.maxBytes);
    }

    /** "topic-partition" (TopicPartition.toString()) back to a TopicPartition: a topic name may hold '-' too. */
    static TopicPartition partition(String name) {
        int dash = name.lastIndexOf('-');
        return new TopicPartition(name.substring(0, dash), Integer.parseInt(name.substring(dash + 1)));
    }
}
