"""Lesson 07a's consumers and their arithmetic: the Java client (lab/java/PollLoopConsumer.java), librdkafka
(lab/apps/consumer_app.py) and Kafka Streams (lab/java/SlowRecordApp.java), each started for one variant (client x
way of running it), and what it read, committed and said about being dropped. Whether a variant should loop follows
from its numbers (expected_to_loop), not from its name, but for consumer_protocol (measured: it reads on); pause_resume
does not apply to Kafka Streams, consumer_protocol to the Java client only.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from ...config import KAFKA_VERSION
from ...toolbox import grep, lab_lines
from ...record.history import History
from ...runtime.programs import JavaProgram

CLIENTS = ("java", "librdkafka", "streams")
# How each consumer runs: as the parameters set it (baseline), one record per poll, a longer max.poll.interval.ms,
# or its partitions paused while a worker thread processes (pause_resume); consumer_protocol is the Java baseline on
# the consumer group protocol (KIP-848, group.protocol=consumer) instead of the classic one, for comparison.
VARIANTS = ("baseline", "max_poll_records_1", "longer_interval", "pause_resume", "consumer_protocol")
# The clients' own words, quoted as evidence.
JAVA_TIMEOUT = r"[Cc]onsumer poll timeout has expired"   # lower case: classic protocol; upper: consumer protocol
RDKAFKA_MAXPOLL = r"MAXPOLL\|.*maximum poll interval"
STREAMS_FENCED = r"Detected that the thread is being fenced"
DROPPED_LINE = {"java": JAVA_TIMEOUT, "librdkafka": RDKAFKA_MAXPOLL, "streams": STREAMS_FENCED}
MIN_SESSION_MS = 6000   # the broker's group.min.session.timeout.ms: librdkafka needs session <= interval

def applies(client: str, variant: str) -> bool:
    if variant == "consumer_protocol":
        return client == "java"   # the comparison is the Java client's
    return not (client == "streams" and variant == "pause_resume")   # Streams polls for you: no pause while working


def batch_ms(p: dict, variant: str, client: str = "java") -> float:
    """How long the work between two polls takes in `variant`. Kafka Streams polls again between two records once
    half the interval has passed (StreamThread.runOnce in Kafka's source): its longest record, whatever its batch."""
    if client == "streams":
        return max(p["poll_slow_record_ms"], p["poll_work_ms"])
    return (1 if variant == "max_poll_records_1" else p["poll_batch"]) * p["poll_work_ms"]


def interval_ms(p: dict, variant: str) -> int:
    return p["poll_longer_interval_ms"] if variant == "longer_interval" else p["poll_interval_ms"]


def expected_to_loop(p: dict, variant: str, client: str = "java") -> bool:
    """The arithmetic of the lesson: a poll's work beyond the interval, unless poll() goes on meanwhile. On the
    consumer protocol the member is still dropped, but its late commit, sent without a member epoch, is accepted
    while its group has no member (measured on Kafka 4.3.1, alone in its group): it reads on."""
    return (variant not in ("pause_resume", "consumer_protocol")
            and batch_ms(p, variant, client) > interval_ms(p, variant))


@dataclass
class Variant:
    client: str
    variant: str
    group: str
    history: History
    child: object = None          # lab.runtime.processes.Child
    log: object = None            # its log path

    @property
    def name(self) -> str:
        return f"{self.client}/{self.variant}"


def _poll_loop(lab, v: Variant, topic: str, p: dict) -> dict:
    """What both poll-loop consumers are told, in the one shape (lab.runtime.programs.settings_file) the Java one
    (Lab.load) and the librdkafka one (lab.apps.settings) read; each adds its own names for group, batch, interval."""
    return {"bootstrap.servers": lab.bootstrap, "lab.topic": topic, "lab.app": v.name,
            "lab.history": v.history.folder, "lab.run.id": v.history.run_id, "lab.work.ms": p["poll_work_ms"],
            "lab.pause": str(v.variant == "pause_resume").lower()}


def _start_java(lab, v: Variant, topic: str, p: dict) -> None:
    program = lab.program(JavaProgram(
        f"poll-{v.client}-{v.variant}", KAFKA_VERSION, "PollLoopConsumer", ["PollLoopConsumer.java", "Lab.java"],
        streams=False,
        properties={**_poll_loop(lab, v, topic, p), "group.id": v.group, "auto.offset.reset": "earliest",
                    "enable.auto.commit": "false",
                    "group.protocol": "consumer" if v.variant == "consumer_protocol" else "classic",
                    "max.poll.interval.ms": interval_ms(p, v.variant),
                    "max.poll.records": 1 if v.variant == "max_poll_records_1" else p["poll_batch"]},
        heap="128m"))
    v.child, v.log = program.start(), program.log_path


def _start_librdkafka(lab, v: Variant, topic: str, p: dict) -> None:
    settings = {**_poll_loop(lab, v, topic, p), "lab.group": v.group,
                "lab.batch": 1 if v.variant == "max_poll_records_1" else p["poll_batch"],
                "lab.max.poll.interval.ms": interval_ms(p, v.variant)}
    v.child = lab.spawn_python(f"poll-{v.client}-{v.variant}", "lab.apps.consumer_app", settings)
    v.log = v.child.log_path


def _start_streams(lab, v: Variant, topic: str, p: dict) -> None:
    output = lab.topics(f"{topic}-out-{v.variant}", partitions=1)[0]
    program = lab.program(JavaProgram(
        f"poll-{v.client}-{v.variant}", KAFKA_VERSION, "SlowRecordApp",
        ["SlowRecordApp.java", "Lab.java", "LabStreams.java"], heap="192m",
        properties={"bootstrap.servers": lab.bootstrap, "application.id": v.group,
                    "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                    "num.stream.threads": 1, "state.dir": lab.folder / v.group,
                    "consumer.auto.offset.reset": "earliest", "producer.linger.ms": 5,
                    "consumer.max.poll.interval.ms": interval_ms(p, v.variant),
                    "consumer.max.poll.records": 1 if v.variant == "max_poll_records_1" else p["poll_batch"],
                    "lab.input.topic": topic, "lab.output.topic": output, "lab.app": v.name,
                    "lab.history": v.history.folder, "lab.run.id": v.history.run_id, "lab.work.ms": p["poll_work_ms"],
                    "lab.slow.ms": p["poll_slow_record_ms"], "lab.slow.offset": p["poll_slow_offset"]}))
    v.child, v.log = program.start(), program.log_path


START = {"java": _start_java, "librdkafka": _start_librdkafka, "streams": _start_streams}


def _reads(v: Variant) -> list[dict]:
    return v.history.rows("read")


def _commit_failures(v: Variant) -> list[dict]:
    return lab_lines(v.log, kind="commit_failed")


def _dropped(v: Variant) -> list:
    """The client's own lines saying it was dropped from the group (or found itself fenced)."""
    return grep(v.log, DROPPED_LINE[v.client])


def _settled(v: Variant, records: int, loops: int) -> bool:
    """Read (and committed) everything, or looped `loops` times (an offset read again that often) and said it
    was dropped: watching longer shows nothing new."""
    per_offset = collections.Counter(r["offset"] for r in _reads(v))
    if max(per_offset.values(), default=1) - 1 >= loops and _dropped(v):
        return True
    done = len(per_offset) >= records
    return done and (v.client == "streams" or max((r["offset"] for r in v.history.rows("committed")),
                                                  default=0) >= records)
