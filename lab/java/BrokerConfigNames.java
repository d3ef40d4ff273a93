import java.lang.reflect.Field;
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
            Class<?> kafkaConfig = Class.forName("kafka.server.KafkaConfig");
            try {
                configDef = kafkaConfig.getMethod("configDef").invoke(null);
            } catch (NoSuchMethodException hidden) {  // 3.3: configDef is private, configNames() a scala Seq
                Object names = kafkaConfig.getMethod("configNames").invoke(null);
                System.out.println(names.getClass().getMethod("mkString", String.class).invoke(names, "\n"));
                return;
            }
        }
        @SuppressWarnings("unchecked")
        Set<String> names = (Set<String>) configDef.getClass().getMethod("names").invoke(configDef);
        for (String name : new TreeSet<>(names)) System.out.println(name);
    }
}
