import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.FileReader;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import java.rmi.registry.LocateRegistry;
import javax.management.remote.JMXConnector;
import javax.management.remote.rmi.RMIConnector;
import javax.management.remote.rmi.RMIServer;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.serialization.ByteBufferDeserializer;
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
 * Reads a cluster's raw facts for lab.doctor and prints ONE JSON document. Read-only: Admin describe/list
 * calls and an assign()-only consumer without group.id that never commits. Each section is read on its own:
 * a failure (missing ACL, timeout) becomes {"error": ...} for that section and the rest goes on. A failure to
 * reach the cluster at all prints {"fatal": {"step", "error"}} and exits 2.
 *
 * Args: --bootstrap B [--command-config FILE] [--jmx host:port,...] [--timeout-ms N]
 */
public class ClusterFacts {
    static final List<String> BROKER_CONFIGS = List.of("offsets.retention.minutes",
            "offsets.retention.check.interval.ms", "transactional.id.expiration.ms", "producer.id.expiration.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms");
    static final Map<String, Object> out = new LinkedHashMap<>();
    static long timeoutMs = 20000;

    interface Section { Object read() throws Exception; }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        timeoutMs = Long.parseLong(args.getOrDefault("timeout-ms", "20000"));
        Properties props = new Properties();
        if (args.containsKey("command-config")) {
            try (FileReader r = new FileReader(args.get("command-config"))) { props.load(r); }
            Set<String> known = new HashSet<>(AdminClientConfig.configNames());
            known.addAll(ConsumerConfig.configNames());
            List<String> unknown = new ArrayList<>();
            for (String k : props.stringPropertyNames()) if (!known.contains(k)) unknown.add(k);
            if (!unknown.isEmpty()) fatal("config", "the client does not know the properties key(s) " + unknown
                    + " in " + args.get("command-config"));
        }
        props.put("bootstrap.servers", args.get("bootstrap"));
        props.put("client.id", "lab-doctor");
        props.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        props.put("request.timeout.ms", String.valueOf(Math.min(timeoutMs, 15000)));
        long started = System.currentTimeMillis();
        out.put("read_at_ms", started);
        try (Admin admin = Admin.create(adminProps(props))) {
            Map<String, Object> cluster = new LinkedHashMap<>();
            try {
                DescribeClusterResult dc = admin.describeCluster();
                cluster.put("id", dc.clusterId().get(timeoutMs, TimeUnit.MILLISECONDS));
                List<Map<String, Object>> brokers = new ArrayList<>();
                for (Node n : dc.nodes().get(timeoutMs, TimeUnit.MILLISECONDS))
                    brokers.add(map("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
                cluster.put("brokers", brokers);
            } catch (Exception e) {
                fatal("connect", describe(e));
            }
            out.put("cluster", cluster);
            @SuppressWarnings("unchecked")
            List<Map<String, Object>> brokers = (List<Map<String, Object>>) cluster.get("brokers");
            section("broker_configs", () -> brokerConfigs(admin, brokers));
            Map<String, Object> topics = section("topics", () -> topics(admin));
            section("groups", () -> groups(admin));
            section("transactions", () -> transactions(admin));
            section("producers", () -> producers(admin, topics));
            section("quotas", () -> quotas(admin));
            try (KafkaConsumer<ByteBuffer, ByteBuffer> consumer = new KafkaConsumer<>(consumerProps(props))) {
                section("topic_offsets", () -> topicOffsets(consumer, topics));
                section("commit_log", () -> readLog(consumer, "__consumer_offsets", new GroupCoordinatorRecordSerde()));
                section("group_log", () -> {   // read with commit_log: each classic group's latest metadata record
                    if (groupLog == null) throw new IllegalStateException("__consumer_offsets could not be read");
                    return groupLog;
                });
                section("transaction_log", () -> readLog(consumer, "__transaction_state",
                        new TransactionCoordinatorRecordSerde()));
            }
        }
        section("clients", () -> args.containsKey("jmx") ? clients(args.get("jmx")) : null);
        out.put("seconds", (System.currentTimeMillis() - started) / 1000.0);
        System.out.println(json().writeValueAsString(out));
    }

    // ------------------------------------------------------------------ sections

    static Object brokerConfigs(Admin admin, List<Map<String, Object>> brokers) throws Exception {
        List<ConfigResource> resources = new ArrayList<>();
        for (Map<String, Object> b : brokers) resources.add(new ConfigResource(ConfigResource.Type.BROKER, b.get("id").toString()));
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get();
        Map<String, Object> byBroker = new LinkedHashMap<>();
        for (Map.Entry<ConfigResource, Config> e : configs.entrySet()) {
            Map<String, Object> values = new LinkedHashMap<>();
            for (String name : BROKER_CONFIGS) {
                ConfigEntry entry = e.getValue().get(name);
                if (entry != null) values.put(name, map("value", entry.value(), "source", entry.source().name()));
            }
            byBroker.put(e.getKey().name(), values);
        }
        return byBroker;
    }

    static Map<String, Object> topics(Admin admin) throws Exception {
        Set<String> names = admin.listTopics(new ListTopicsOptions().listInternal(false)).names().get();
        Map<String, TopicDescription> descriptions = admin.describeTopics(names).allTopicNames().get();
        List<ConfigResource> resources = new ArrayList<>();
        for (String n : names) resources.add(new ConfigResource(ConfigResource.Type.TOPIC, n));
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get();
        Map<String, Object> topics = new TreeMap<>();
        for (String n : names) {
            Config c = configs.get(new ConfigResource(ConfigResource.Type.TOPIC, n));
            topics.put(n, map("partitions", descriptions.get(n).partitions().size(),
                    "retention_ms", Long.parseLong(c.get("retention.ms").value()),
                    "cleanup_policy", c.get("cleanup.policy").value()));
        }
        return topics;
    }

    static Object topicOffsets(KafkaConsumer<ByteBuffer, ByteBuffer> consumer, Map<String, Object> topics) {
        List<TopicPartition> tps = partitions(topics);
        Map<TopicPartition, Long> start = consumer.beginningOffsets(tps, Duration.ofMillis(timeoutMs));
        Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
        Map<String, Object> offsets = new TreeMap<>();
        for (TopicPartition tp : tps) offsets.put(tp.toString(), map("earliest", start.get(tp), "latest", end.get(tp)));
        return offsets;
    }

    static Object groups(Admin admin) throws Exception {
        Collection<GroupListing> listings = admin.listGroups().all().get();
        Map<String, Object> groups = new TreeMap<>();
        List<String> consumerGroups = new ArrayList<>();
        for (GroupListing g : listings) {
            String type = g.type().map(GroupType::toString).orElse("unknown");
            groups.put(g.groupId(), new LinkedHashMap<>(map("type", type, "protocol", g.protocol(),
                    "state", g.groupState().map(Object::toString).orElse("Unknown"))));
            if (g.type().map(t -> t == GroupType.CLASSIC || t == GroupType.CONSUMER).orElse(true))
                consumerGroups.add(g.groupId());
        }
        if (consumerGroups.isEmpty()) return groups;
        Map<String, KafkaFuture<ConsumerGroupDescription>> described =
                admin.describeConsumerGroups(consumerGroups).describedGroups();
        Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
        for (String g : consumerGroups) specs.put(g, new ListConsumerGroupOffsetsSpec());
        ListConsumerGroupOffsetsResult offsets = admin.listConsumerGroupOffsets(specs);
        for (String id : consumerGroups) {
            @SuppressWarnings("unchecked")
            Map<String, Object> g = (Map<String, Object>) groups.get(id);
            try {
                ConsumerGroupDescription d = described.get(id).get();
                g.put("state", d.groupState().toString());
                List<Map<String, Object>> members = new ArrayList<>();
                for (MemberDescription m : d.members())
                    members.add(map("client_id", m.clientId(), "host", m.host(), "partitions", m.assignment().topicPartitions().size()));
                g.put("members", members);
            } catch (ExecutionException e) {
                g.put("error", describe(e));
            }
            try {
                Map<String, Object> committed = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.partitionsToOffsetAndMetadata(id).get().entrySet())
                    if (e.getValue() != null) committed.put(e.getKey().toString(), e.getValue().offset());
                g.put("offsets", committed);
            } catch (ExecutionException e) {
                g.put("offsets_error", describe(e));
            }
        }
        return groups;
    }

    static Object transactions(Admin admin) throws Exception {
        Collection<TransactionListing> listings = admin.listTransactions().all().get();
        List<String> ids = new ArrayList<>();
        for (TransactionListing t : listings) ids.add(t.transactionalId());
        Map<String, Object> txns = new TreeMap<>();
        if (ids.isEmpty()) return txns;
        Map<String, TransactionDescription> described = admin.describeTransactions(ids).all().get();
        for (Map.Entry<String, TransactionDescription> e : described.entrySet()) {
            TransactionDescription d = e.getValue();
            txns.put(e.getKey(), map("state", d.state().toString(), "producer_id", d.producerId(),
                    "producer_epoch", d.producerEpoch(), "timeout_ms", d.transactionTimeoutMs(),
                    "start_ms", d.transactionStartTimeMs().isPresent() ? d.transactionStartTimeMs().getAsLong() : null,
                    "partitions", d.topicPartitions().size()));
        }
        return txns;
    }

    static Object producers(Admin admin, Map<String, Object> topics) throws Exception {
        if (topics == null) throw new IllegalStateException("the topic list could not be read");
        List<TopicPartition> tps = partitions(topics);
        Map<String, Object> producers = new TreeMap<>();
        if (tps.isEmpty()) return producers;
        // One batched call: the admin client groups the partitions by leader.
        DescribeProducersResult result = admin.describeProducers(tps);
        for (TopicPartition tp : tps) {
            try {
                List<Map<String, Object>> active = new ArrayList<>();
                for (ProducerState p : result.partitionResult(tp).get().activeProducers())
                    active.add(map("producer_id", p.producerId(), "epoch", p.producerEpoch(),
                            "last_sequence", p.lastSequence(), "last_timestamp", p.lastTimestamp(),
                            "txn_start_offset", p.currentTransactionStartOffset().isPresent()
                                    ? p.currentTransactionStartOffset().getAsLong() : null));
                if (!active.isEmpty()) producers.put(tp.toString(), active);
            } catch (ExecutionException e) {
                producers.put(tp.toString(), map("error", describe(e)));
            }
        }
        return producers;
    }

    static Object quotas(Admin admin) throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> all = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get();
        List<Map<String, Object>> quotas = new ArrayList<>();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
            Map<String, Object> entity = new TreeMap<>();
            // A null name is the entity type's <default>.
            e.getKey().entries().forEach((type, name) -> entity.put(type, name == null ? "<default>" : name));
            quotas.add(map("entity", entity, "quotas", new TreeMap<>(e.getValue())));
        }
        return quotas;
    }

    /** group -> its latest GroupMetadata record (classic groups): when it entered its current state (KIP-211's
     *  currentStateTimestamp, value version 2+, written since 2.1), its protocol type and member count. */
    static Map<String, Object> groupLog;

    /** Latest record per key of a compacted coordinator log, read_committed, from the start to the end. */
    static Object readLog(KafkaConsumer<ByteBuffer, ByteBuffer> consumer, String topic, CoordinatorRecordSerde serde) {
        List<TopicPartition> tps = new ArrayList<>();
        consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs)).forEach(p -> tps.add(new TopicPartition(topic, p.partition())));
        Map<String, Object> latest = new TreeMap<>();
        Map<String, Object> groups = topic.equals("__consumer_offsets") ? new TreeMap<>() : null;
        if (tps.isEmpty()) {
            if (groups != null) groupLog = groups;
            return latest;
        }
        Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofMillis(timeoutMs));
        consumer.assign(tps);
        consumer.seekToBeginning(tps);
        long deadline = System.currentTimeMillis() + timeoutMs;
        int skipped = 0;
        while (!caughtUp(consumer, end)) {
            if (System.currentTimeMillis() > deadline)
                throw new IllegalStateException("reading " + topic + " took longer than " + timeoutMs + " ms");
            for (ConsumerRecord<ByteBuffer, ByteBuffer> r : consumer.poll(Duration.ofMillis(200))) {
                if (r.key() == null) continue;
                CoordinatorRecord rec;
                try {
                    rec = serde.deserialize(r.key(), r.value());
                } catch (RuntimeException unknownType) {   // group metadata and other record types we do not need
                    skipped++;
                    continue;
                }
                Object key = rec.key();
                String id;
                Map<String, Object> value = null;
                if (key instanceof GroupMetadataKey k) {
                    if (groups == null) continue;
                    if (rec.value() != null && rec.value().message() instanceof GroupMetadataValue v)
                        groups.put(k.group(), map("current_state_ms",
                                v.currentStateTimestamp() < 0 ? null : v.currentStateTimestamp(),
                                "protocol_type", v.protocolType(), "members", v.members().size()));
                    else groups.remove(k.group());
                    continue;
                }
                if (key instanceof OffsetCommitKey k) id = k.group() + "\u0000" + k.topic() + "-" + k.partition();
                else if (key instanceof LegacyOffsetCommitKey k) id = k.group() + "\u0000" + k.topic() + "-" + k.partition();
                else if (key instanceof TransactionLogKey k) id = k.transactionalId();
                else continue;
                if (rec.value() != null && rec.value().message() instanceof OffsetCommitValue v)
                    value = map("offset", v.offset(), "commit_ms", v.commitTimestamp());
                else if (rec.value() != null && rec.value().message() instanceof TransactionLogValue v)
                    value = map("producer_id", v.producerId(), "epoch", v.producerEpoch(), "status", v.transactionStatus(),
                            "last_update_ms", v.transactionLastUpdateTimestampMs(), "start_ms", v.transactionStartTimestampMs());
                if (value == null) latest.remove(id);   // a tombstone removes
                else latest.put(id, value);
            }
        }
        consumer.unsubscribe();
        if (groups == null) return latest;
        groupLog = groups;
        Map<String, Object> byGroup = new TreeMap<>();   // group -> partition -> {offset, commit_ms}
        for (Map.Entry<String, Object> e : latest.entrySet()) {
            String[] parts = e.getKey().split("\u0000", 2);
            @SuppressWarnings("unchecked")
            Map<String, Object> g = (Map<String, Object>) byGroup.computeIfAbsent(parts[0], x -> new TreeMap<>());
            g.put(parts[1], e.getValue());
        }
        return byGroup;
    }

    static boolean caughtUp(KafkaConsumer<ByteBuffer, ByteBuffer> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet())
            if (consumer.position(e.getKey(), Duration.ofMillis(timeoutMs)) < e.getValue()) return false;
        return true;
    }

    /** KIP-511: the broker keeps a connection count per client software name and version, per listener. */
    static Object clients(String jmx) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (String hostPort : jmx.split(",")) {
            // The RMI registry asked directly, not through a JNDI URL (service:jmx:rmi:///jndi/rmi://...): JNDI's
            // RMI provider is the jdk.naming.rmi module, which a runtime such as the lab's own Java leaves out.
            String host = hostPort.trim().substring(0, hostPort.trim().lastIndexOf(':'));
            int port = Integer.parseInt(hostPort.trim().substring(hostPort.trim().lastIndexOf(':') + 1));
            RMIServer server = (RMIServer) LocateRegistry.getRegistry(host, port).lookup("jmxrmi");
            try (JMXConnector connector = new RMIConnector(server, null)) {
                connector.connect();
                MBeanServerConnection mbeans = connector.getMBeanServerConnection();
                for (ObjectName name : mbeans.queryNames(new ObjectName("kafka.server:type=socket-server-metrics,*"), null)) {
                    String software = name.getKeyProperty("clientSoftwareName");
                    if (software == null) continue;
                    rows.add(map("jmx", hostPort.trim(), "listener", name.getKeyProperty("listener"),
                            "name", software, "version", name.getKeyProperty("clientSoftwareVersion"),
                            "connections", ((Number) mbeans.getAttribute(name, "connections")).intValue()));
                }
            }
        }
        return rows;
    }

    // ------------------------------------------------------------------ plumbing

    @SuppressWarnings("unchecked")
    static <T> T section(String name, Section s) {
        long t0 = System.nanoTime();
        Object value;
        try {
            value = s.read();
        } catch (Exception e) {
            value = map("error", describe(e));
        }
        out.put(name, value);
        ((Map<String, Object>) out.computeIfAbsent("section_seconds", k -> new LinkedHashMap<>()))
                .put(name, (System.nanoTime() - t0) / 1e9);
        // when the section was read: how long a client has been idle is measured then, not at the end of the reading
        ((Map<String, Object>) out.computeIfAbsent("section_read_ms", k -> new LinkedHashMap<>()))
                .put(name, System.currentTimeMillis());
        return value instanceof Map && ((Map<String, Object>) value).containsKey("error") ? null : (T) value;
    }

    static List<TopicPartition> partitions(Map<String, Object> topics) {
        List<TopicPartition> tps = new ArrayList<>();
        if (topics == null) return tps;
        for (Map.Entry<String, Object> e : topics.entrySet()) {
            int n = (Integer) ((Map<?, ?>) e.getValue()).get("partitions");
            for (int p = 0; p < n; p++) tps.add(new TopicPartition(e.getKey(), p));
        }
        return tps;
    }

    static Map<String, Object> adminProps(Properties props) {
        Map<String, Object> m = new HashMap<>();
        for (String k : props.stringPropertyNames()) if (AdminClientConfig.configNames().contains(k)) m.put(k, props.getProperty(k));
        return m;
    }

    static Properties consumerProps(Properties base) {
        Properties p = new Properties();
        for (String k : base.stringPropertyNames()) if (ConsumerConfig.configNames().contains(k)) p.put(k, base.getProperty(k));
        // No group.id: assign() only, never a group join, never a commit; never creates a topic.
        p.put("enable.auto.commit", "false");
        p.put("allow.auto.create.topics", "false");
        p.put("isolation.level", "read_committed");   // aborted transactional offset commits never counted
        p.put("max.poll.records", "10000");
        p.put("key.deserializer", ByteBufferDeserializer.class.getName());
        p.put("value.deserializer", ByteBufferDeserializer.class.getName());
        return p;
    }

    static String describe(Throwable e) {
        while ((e instanceof ExecutionException || e.getCause() != null && e.getMessage() == null) && e.getCause() != null)
            e = e.getCause();
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    static void fatal(String step, String error) throws Exception {
        System.out.println(json().writeValueAsString(Map.of("fatal", map("step", step, "error", error))));
        System.out.flush();
        Runtime.getRuntime().halt(2);   // no lingering admin threads retrying an unreachable cluster
    }

    static ObjectMapper json() {
        return new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }
}
