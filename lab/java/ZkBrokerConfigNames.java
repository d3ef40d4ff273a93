import java.lang.reflect.Method;

/** Prints every broker config name of a ZooKeeper-era Kafka (2.x): kafka.server.KafkaConfig.configNames(). */
public class ZkBrokerConfigNames {
    public static void main(String[] args) throws Exception {
        Object names = Class.forName("kafka.server.KafkaConfig").getMethod("configNames").invoke(null);
        // a scala List or a java List depending on the version: both have mkString / toString forms
        try {
            Method mk = names.getClass().getMethod("mkString", String.class);
            System.out.println(mk.invoke(names, "\n"));
        } catch (NoSuchMethodException e) {
            for (Object n : (Iterable<?>) names) System.out.println(n);
        }
    }
}
