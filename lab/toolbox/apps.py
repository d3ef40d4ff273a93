"""Programs under test, handled together: stopped the way a redeploy stops them, watched until ready.

    stop_together(apps.values(), timeout=30)        # SIGTERM to all at once, then wait for each
    run.wait(lambda: streams_running(log), 180, "app to be running")
"""
from __future__ import annotations

from ..record.evidence import grep

MAX_JVMS = 8   # at once on 2 cores: more and the lesson measures the machine, not Kafka


def check_jvms(count: int, what: str) -> str | None:
    if count > MAX_JVMS:
        return (f"{what} asks for {count} Kafka Streams JVMs at once; this machine (2 cores) runs at most "
                f"{MAX_JVMS} without measuring its own load instead of Kafka's.")
    return None


# KafkaStreams#setState at the client level (threads never pass through REBALANCING)
STREAMS_RUNNING = r"State transition from REBALANCING to RUNNING"


def stop_together(children, timeout: float = 20.0) -> None:
    """SIGTERM every child (lab.runtime.processes.Child) at once, then wait up to `timeout` for each, SIGKILL after:
    all of them close their clients in parallel, like a redeploy, instead of one after the other."""
    children = list(children)
    for child in children:
        child.terminate()
    for child in children:
        child.stop(timeout)


def streams_running(log, since: float | None = None) -> bool:
    """Whether a Kafka Streams client's log shows it reached RUNNING (at or after epoch time `since`)."""
    return bool(grep(log, STREAMS_RUNNING, since=since))
