import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.FileReader;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.management.Attribute;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import java.rmi.registry.LocateRegistry;
import javax.management.remote.JMXConnector;
import javax.management.remote.rmi.RMIConnector;
import javax.management.remote.rmi.RMIServer;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
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
import org.apache.kafka.common.utils.Sanitizer;

/**
 * Reads a cluster's raw facts for lab.doctor and prints ONE JSON document. Read-only: Admin describe/list
 * calls and an assign()-only consumer without group.id that never commits. Each section is read on its own:
 * a failure (missing ACL, timeout) becomes {"error": ...} for that section and the rest goes on. A failure to
 * reach the cluster at all prints {"fatal": {"step", "error"}} and exits 2. Stdout holds that one document only:
 * progress goes to stderr as `LAB {"kind": "progress", ...}` lines.
 *
 * args[0]: its settings (Lab.load): bootstrap.servers, and lab.command.config (FILE), lab.jmx (host:port,...),
 * lab.timeout.ms and lab.max.read.bytes (the internal topics' reads, and the count of what empty groups would
 * re-read, stop at N bytes or after the timeout, and say how far they got: "log_reads", "group_records")
 */
public class ClusterFacts {
    static final List<String> BROKER_CONFIGS = List.of("offsets.retention.minutes",
            "offsets.retention.check.interval.ms", "transactional.id.expiration.ms", "producer.id.expiration.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms");
    static final Map<String, Object> out = new LinkedHashMap<>();
    static final ObjectMapper JSON = new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
    static long timeoutMs = 20000;

    interface Section { Object read() throws Exception; }
    interface MBeanRows { List<Map<String, Object>> read(String hostPort, MBeanServerConnection mbeans) throws Exception; }

    public static void main(String[] argv) throws Exception {
        String bootstrap = Lab.load(argv[0]).getProperty("bootstrap.servers");
        String commandConfig = Lab.setting("command.config", "");
        timeoutMs = Lab.longSetting("timeout.ms", 20000);
        long maxReadBytes = Lab.longSetting("max.read.bytes", 268435456L);
        Properties props = new Properties();
        if (!commandConfig.isEmpty()) {
            try (FileReader r = new FileReader(commandConfig)) { props.load(r); }
            Set<String> known = new HashSet<>(AdminClientConfig.configNames());
            known.addAll(ConsumerConfig.configNames());
            List<String> unknown = new ArrayList<>();
            for (String k : props.stringPropertyNames()) if (!known.contains(k)) unknown.add(k);
            if (!unknown.isEmpty()) fatal("config", "the client does not know the properties key(s) " + unknown
                    + " in " + commandConfig);
        }
        props.put("bootstrap.servers", bootstrap);
        props.put("client.id", "lab-doctor");
        props.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        props.put("request.timeout.ms", String.valueOf(Math.min(timeoutMs, 15000)));
        long started = System.currentTimeMillis();
        out.put("read_at_ms", started);
        try (Admin admin = Admin.create(adminProps(props))) {
            progress("section", "cluster");
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
            Map<String, Object> groups = section("groups", () -> groups(admin));
            Map<String, Object> transactions = section("transactions", () -> transactions(admin));
            section("producers", () -> producers(admin, topics));
            section("quotas", () -> quotas(admin));
            try (KafkaConsumer<ByteBuffer, ByteBuffer> consumer = new KafkaConsumer<>(consumerProps(props))) {
                Map<String, Object> offsets = section("topic_offsets", () -> topicOffsets(consumer, topics));
                // only the partitions of the groups and transactional ids found; all of them if those are unknown
                CoordinatorLogs logs = new CoordinatorLogs(consumer, timeoutMs, maxReadBytes);
                section("commit_log", () -> logs.commitLog(groups == null ? null : groupsWithOffsets(groups)));
                section("group_log", () -> {   // read with commit_log: each classic group's latest metadata record
                    if (logs.groupLog == null) throw new IllegalStateException("__consumer_offsets could not be read");
                    return logs.groupLog;
                });
                section("transaction_log", () -> logs.transactionLog(transactions == null ? null : transactions.keySet()));
                section("group_records", () -> GroupRecords.count(logs, groups, offsets));   // records, not offsets
                out.put("log_reads", logs.reads);
            }
        }
        String jmx = Lab.setting("jmx", null);
        section("clients", () -> jmx == null ? null : overJmx(jmx, ClusterFacts::clientVersions));
        section("produce_rates", () -> jmx == null ? null : overJmx(jmx, ClusterFacts::produceRates));
        out.put("seconds", (System.currentTimeMillis() - started) / 1000.0);
        System.out.println(JSON.writeValueAsString(out));
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
        List<String> consumerGroups = new ArrayList<>(), streamsGroups = new ArrayList<>();
        for (GroupListing g : listings) {
            String type = g.type().map(GroupType::toString).orElse("unknown");
            groups.put(g.groupId(), new LinkedHashMap<>(map("type", type, "protocol", g.protocol(),
                    "state", g.groupState().map(Object::toString).orElse("Unknown"))));
            if (g.type().map(t -> t == GroupType.CLASSIC || t == GroupType.CONSUMER).orElse(true)) consumerGroups.add(g.groupId());
            else if (g.type().get() == GroupType.STREAMS) streamsGroups.add(g.groupId());   // KIP-1071
        }
        if (!streamsGroups.isEmpty()) StreamsGroups.describe(admin, streamsGroups, groups);
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

    /** The groups with committed offsets: the ones whose commit times matter. */
    static List<String> groupsWithOffsets(Map<String, Object> groups) {
        List<String> ids = new ArrayList<>();
        for (Map.Entry<String, Object> e : groups.entrySet())
            if (((Map<?, ?>) e.getValue()).get("offsets") instanceof Map<?, ?> offsets && !offsets.isEmpty())
                ids.add(e.getKey());
        return ids;
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

    /** KIP-511: the broker keeps a connection count per client software name and version, per listener. */
    static List<Map<String, Object>> clientVersions(String hostPort, MBeanServerConnection mbeans) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (ObjectName name : mbeans.queryNames(new ObjectName("kafka.server:type=socket-server-metrics,*"), null)) {
            String software = name.getKeyProperty("clientSoftwareName");
            if (software == null) continue;
            rows.add(map("jmx", hostPort, "listener", name.getKeyProperty("listener"),
                    "name", software, "version", name.getKeyProperty("clientSoftwareVersion"),
                    "connections", ((Number) mbeans.getAttribute(name, "connections")).intValue()));
        }
        return rows;
    }

    /** Each client's produce byte rate and throttle time as the broker's quota manager measures them (its sensors
     *  exist once a quota is set), by client id and, with user quotas, user. */
    static List<Map<String, Object>> produceRates(String hostPort, MBeanServerConnection mbeans) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (ObjectName name : mbeans.queryNames(new ObjectName("kafka.server:type=Produce,*"), null)) {
            String clientId = name.getKeyProperty("client-id");
            if (clientId == null) continue;
            Map<String, Object> values = new HashMap<>();
            for (Attribute a : mbeans.getAttributes(name, new String[] {"byte-rate", "throttle-time"}).asList())
                values.put(a.getName(), a.getValue());
            if (!(values.get("byte-rate") instanceof Number rate && values.get("throttle-time") instanceof Number throttle))
                continue;
            String user = name.getKeyProperty("user");   // the quota manager's tag is the sanitized principal name
            // throttle-time averages the throttled requests only: none in the window reads NaN
            double throttleMs = Double.isNaN(throttle.doubleValue()) ? 0.0 : throttle.doubleValue();
            rows.add(map("jmx", hostPort, "client_id", jmxValue(clientId),
                    "user", user == null ? null : Sanitizer.desanitize(jmxValue(user)),
                    "byte_rate", rate.doubleValue(), "throttle_time_ms", throttleMs));
        }
        return rows;
    }

    /** A key property's value: Kafka quotes one with characters an ObjectName does not allow bare. */
    static String jmxValue(String value) {
        return value.startsWith("\"") ? ObjectName.unquote(value) : value;
    }

    /** `reader`'s rows from each broker's JMX in `jmx` (host:port,...). */
    static List<Map<String, Object>> overJmx(String jmx, MBeanRows reader) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (String entry : jmx.split(",")) {
            String hostPort = entry.trim();
            // The RMI registry asked directly, not through a JNDI URL (service:jmx:rmi:///jndi/rmi://...): JNDI's
            // RMI provider is the jdk.naming.rmi module, which a runtime such as the lab's own Java leaves out.
            String host = hostPort.substring(0, hostPort.lastIndexOf(':'));
            int port = Integer.parseInt(hostPort.substring(hostPort.lastIndexOf(':') + 1));
            RMIServer server = (RMIServer) LocateRegistry.getRegistry(host, port).lookup("jmxrmi");
            try (JMXConnector connector = new RMIConnector(server, null)) {
                connector.connect();
                rows.addAll(reader.read(hostPort, connector.getMBeanServerConnection()));
            }
        }
        return rows;
    }

    // ------------------------------------------------------------------ plumbing

    @SuppressWarnings("unchecked")
    static <T> T section(String name, Section s) {
        progress("section", name);
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
        System.out.println(JSON.writeValueAsString(Map.of("fatal", map("step", step, "error", error))));
        System.out.flush();
        Runtime.getRuntime().halt(2);   // no lingering admin threads retrying an unreachable cluster
    }

    /** One `LAB {"kind": "progress", ...}` line on stderr, for whoever runs this to show. */
    static void progress(Object... kv) {
        Map<String, Object> line = map("kind", "progress");
        line.putAll(map(kv));
        try {
            System.err.println("LAB " + JSON.writeValueAsString(line));
            System.err.flush();
        } catch (Exception e) {   // names and numbers only: never
            throw new IllegalStateException(e);
        }
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }
}
