import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka Streams groups of the streams group protocol (KIP-1071, group.protocol=streams) for lab.doctor: each one's
 * members with the active and standby tasks the broker assigned them, its state changelog topics, and its group
 * config streams.num.standby.replicas (on this protocol the app's own num.standby.replicas is ignored). Read-only.
 */
class StreamsGroups {
    static final String STANDBYS = "streams.num.standby.replicas";

    /** Adds what it reads to each group's entry of `groups` (ClusterFacts.groups); a failure goes in "error". */
    @SuppressWarnings("unchecked")
    static void describe(Admin admin, List<String> ids, Map<String, Object> groups) throws Exception {
        Map<String, KafkaFuture<StreamsGroupDescription>> described =
                admin.describeStreamsGroups(ids).describedGroups();
        List<ConfigResource> resources = new ArrayList<>();
        for (String id : ids) resources.add(new ConfigResource(ConfigResource.Type.GROUP, id));
        Map<ConfigResource, KafkaFuture<Config>> configs = admin.describeConfigs(resources).values();
        for (String id : ids) {
            Map<String, Object> g = (Map<String, Object>) groups.get(id);
            try {
                StreamsGroupDescription d = described.get(id).get();
                g.put("state", d.groupState().toString());
                List<Map<String, Object>> members = new ArrayList<>();
                for (StreamsGroupMemberDescription m : d.members())
                    members.add(ClusterFacts.map("client_id", m.clientId(), "host", m.clientHost(),
                            "process_id", m.processId(), "active", tasks(m.assignment().activeTasks()),
                            "standby", tasks(m.assignment().standbyTasks())));
                g.put("members", members);
                TreeSet<String> changelogs = new TreeSet<>();
                for (StreamsGroupSubtopologyDescription s : d.subtopologies())
                    changelogs.addAll(s.stateChangelogTopics().keySet());
                g.put("changelogs", new ArrayList<>(changelogs));
            } catch (ExecutionException e) {
                g.put("error", ClusterFacts.describe(e));
            }
            try {
                ConfigEntry standbys = configs.get(new ConfigResource(ConfigResource.Type.GROUP, id)).get().get(STANDBYS);
                if (standbys != null)
                    g.put("standby_replicas", ClusterFacts.map("value", standbys.value(),
                            "source", String.valueOf(standbys.source())));
            } catch (ExecutionException e) {
                g.put("config_error", ClusterFacts.describe(e));
            }
        }
    }

    static int tasks(List<StreamsGroupMemberAssignment.TaskIds> ids) {
        int n = 0;
        for (StreamsGroupMemberAssignment.TaskIds t : ids) n += t.partitions().size();
        return n;
    }
}
