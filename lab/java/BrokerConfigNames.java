import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.TreeSet;

/** Prints every broker config name this Kafka version knows, one per line. */
public class BrokerConfigNames {
    public static void main(String[] args) throws Exception {
        Object configDef = null;
        try {  // 3.7+: the ConfigDef lives in the server module
            Field f = Class.forName("org.apache.kafka.server.config.AbstractKafkaConfig").getField("CONFIG_DEF");
            configDef = f.get(null);
        } catch (ReflectiveOperationException e) {  // older: Scala object kafka.server.KafkaConfig
            Method m = Class.forName("kafka.server.KafkaConfig").getMethod("configDef");
            configDef = m.invoke(null);
        }
        @SuppressWarnings("unchecked")
        Set<String> names = (Set<String>) configDef.getClass().getMethod("names").invoke(configDef);
        for (String name : new TreeSet<>(names)) System.out.println(name);
    }
}
