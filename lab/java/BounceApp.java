import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

/**
 * "Streams may die, a lot" (from "Tales from running Kafka Streams in Production"): a stateless pass-through Kafka Streams app (no state store, so no
 * RocksDB native library: it runs at 2.7 on a recent JVM too) while brokers go down and come back.
 *
 * One source for every version: what only 2.8+ has is reached by reflection, so it compiles against 2.7.
 *   lab.handler  shutdown_client | replace_thread: the KIP-671 StreamsUncaughtExceptionHandler (2.8+), whose
 *                decisions it reports as LAB {"kind":"uncaught",...}. Before 2.8 there is no choice: the old
 *                Thread.UncaughtExceptionHandler only watches the thread die (LAB {"kind":"thread_died"}).
 * Every 500 ms LAB {"kind":"progress"}: records processed, the client's state, its stream threads' states.
 * Client state changes are LAB {"kind":"state"} lines (LabStreams.runUntilSigterm).
 * args[0]: a properties file; lab.* keys are for this program (lab.input.topic, lab.output.topic, lab.app).
 */
public class BounceApp {
    private static final AtomicLong processed = new AtomicLong();
    private static final String NEW_HANDLER = "org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler";

    public static void main(String[] args) throws Exception {
        Properties props = Lab.load(args[0]);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(Lab.setting("input.topic"), Consumed.with(Serdes.String(), Serdes.String()))
                .peek((key, value) -> processed.incrementAndGet())
                .to(Lab.setting("output.topic"), Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        installHandler(streams, Lab.setting("handler", ""));
        Thread reporter = new Thread(() -> {
            while (true) {
                Lab.emit("progress", "processed", processed.get(), "state", streams.state().name(),
                        "threads", threadStates(streams));
                Lab.sleep(500);
            }
        });
        reporter.setDaemon(true);
        reporter.start();
        LabStreams.runUntilSigterm(streams);
    }

    /** The KIP-671 handler when asked for (2.8+), else the pre-2.8 thread handler that only watches. */
    static void installHandler(KafkaStreams streams, String handler) throws Exception {
        if (handler.isEmpty()) {
            try {
                streams.getClass().getMethod("setUncaughtExceptionHandler", Thread.UncaughtExceptionHandler.class)
                        .invoke(streams, (Thread.UncaughtExceptionHandler) (thread, error) ->
                                Lab.emit("thread_died", "thread", thread.getName(), "exception", describe(error)));
            } catch (NoSuchMethodException removedIn4) {   // 4.0 dropped it: the KIP-671 default applies
            }
            return;
        }
        Class<?> iface = Class.forName(NEW_HANDLER);
        Class<?> responses = Class.forName(NEW_HANDLER + "$StreamThreadExceptionResponse");
        Object response = null;
        for (Object r : responses.getEnumConstants())
            if (((Enum<?>) r).name().equalsIgnoreCase(handler)) response = r;
        if (response == null) throw new IllegalArgumentException("no such handler response: " + handler);
        final Object decision = response;
        Object proxy = Proxy.newProxyInstance(iface.getClassLoader(), new Class<?>[]{iface}, (self, method, a) -> {
            if (method.getName().equals("handle")) {
                Throwable error = null;
                for (Object arg : a) if (arg instanceof Throwable) error = (Throwable) arg;
                Lab.emit("uncaught", "thread", Thread.currentThread().getName(), "exception", describe(error),
                        "response", decision.toString());
                return decision;
            }
            if (method.getName().equals("toString")) return "BounceApp handler " + handler;
            if (method.getName().equals("hashCode")) return System.identityHashCode(self);
            if (method.getName().equals("equals")) return self == a[0];
            throw new UnsupportedOperationException(method.getName());
        });
        streams.getClass().getMethod("setUncaughtExceptionHandler", iface).invoke(streams, proxy);
    }

    /** "name:STATE" of each local stream thread: metadataForLocalThreads() from 2.8, localThreadsMetadata() before. */
    static List<String> threadStates(KafkaStreams streams) {
        List<String> out = new ArrayList<>();
        try {
            Method m;
            try {
                m = streams.getClass().getMethod("metadataForLocalThreads");
            } catch (NoSuchMethodException old) {
                m = streams.getClass().getMethod("localThreadsMetadata");
            }
            for (Object t : (Collection<?>) m.invoke(streams)) {
                Method name = t.getClass().getMethod("threadName"), state = t.getClass().getMethod("threadState");
                name.setAccessible(true);
                state.setAccessible(true);
                String n = String.valueOf(name.invoke(t));
                out.add(n.substring(n.lastIndexOf('-', n.lastIndexOf('-') - 1) + 1) + ":" + state.invoke(t));
            }
        } catch (Exception notAvailable) {   // between states (e.g. not running): no thread to report
        }
        return out;
    }

    /** The exception and its causes, one line: what the handler saw. */
    static String describe(Throwable error) {
        StringBuilder b = new StringBuilder();
        for (Throwable e = error; e != null && b.length() < 600; e = e.getCause() == e ? null : e.getCause())
            b.append(b.length() > 0 ? " <- " : "").append(e.getClass().getSimpleName()).append(": ")
                    .append(String.valueOf(e.getMessage()).replace('\n', ' '));
        return b.length() > 600 ? b.substring(0, 600) : b.toString();
    }
}
