import java.util.Map;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.ProductionExceptionHandler;

/**
 * EosCrashApp's production exception handlers in the form Kafka Streams 4.2 brought with its dead-letter queue
 * (KIP-1034): handleError() answers with a ProductionExceptionHandler.Response (Response.resume(), Response.fail(),
 * Response.retry(), each optionally with dead-letter records), and the ProductionExceptionHandlerResponse enum that
 * handle() returns is deprecated. This file needs those types: the lab compiles it only against Kafka Streams 4.2 and
 * later (lab/scenarios/nb05_exactly_once_under_crashes/streams_app.py, sources()), and configures these classes
 * there; older versions run EosCrashHandlers.ContinueTooLarge and RouteTooLarge. Both forms make one decision with the
 * same evidence line (EosCrashHandlers.ContinueTooLarge.drops), which names the answer RESUME here.
 */
public class EosCrashResponses {
    /** Response.resume() for an output record the broker refuses as too large, Response.fail() for anything else. */
    public static class ContinueTooLarge implements ProductionExceptionHandler {
        final EosCrashHandlers.ContinueTooLarge decision;

        public ContinueTooLarge() {
            this(new EosCrashHandlers.ContinueTooLarge());
        }

        ContinueTooLarge(EosCrashHandlers.ContinueTooLarge decision) {
            this.decision = decision;
        }

        @Override
        public Response handleError(ErrorHandlerContext context, ProducerRecord<byte[], byte[]> record,
                                    Exception exception) {
            return decision.drops(record, exception, "RESUME") ? Response.resume() : Response.fail();
        }

        @Override
        public void configure(Map<String, ?> configs) {
            decision.configure(configs);
        }
    }

    /** The same, after a note of the refused record goes to a topic of its own (EosCrashHandlers.RouteTooLarge). */
    public static class RouteTooLarge extends ContinueTooLarge {
        public RouteTooLarge() {
            super(new EosCrashHandlers.RouteTooLarge());
        }
    }
}
