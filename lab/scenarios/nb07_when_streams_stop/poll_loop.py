"""Notebook 07 section 1 ("The poll-interval loop": observed, audited by Spark, explained in the clients' words), one
lesson of streams_stop (PARAMS, RULES, needs, run_lesson -> Outcome): consumers of one topic, each in its own group,
per client (lab/java/PollLoopConsumer.java, lab/apps/consumer_app.py, lab/java/SlowRecordApp.java) and fix; what
each read and committed is a lab.history History, and the Spark audit's non_monotonic check counts the
re-reads. Whether a variant should loop follows from its numbers (expected_to_loop), not from its name;
pause_resume does not apply to Kafka Streams.
"""
from __future__ import annotations

import collections
import uuid
from dataclasses import dataclass, field

from ...config import KAFKA_VERSION
from ...experiment import Param, grep, lab_lines
from ...experiment.apps import stop_together
from ...generator import generate
from ...history import History
from ...programs import JavaProgram

CLIENTS = ("java", "librdkafka", "streams")
FIXES = ("none", "max_poll_records_1", "longer_interval", "pause_resume")
# The clients' own words, quoted as evidence.
JAVA_TIMEOUT = r"consumer poll timeout has expired"
RDKAFKA_MAXPOLL = r"MAXPOLL\|.*maximum poll interval"
STREAMS_FENCED = r"Detected that the thread is being fenced"
DROPPED_LINE = {"java": JAVA_TIMEOUT, "librdkafka": RDKAFKA_MAXPOLL, "streams": STREAMS_FENCED}
MIN_SESSION_MS = 6000   # the broker's group.min.session.timeout.ms: librdkafka needs session <= interval

SPARK_AUDIT = True   # its outcome is audited by Spark (lab.experiment.lessons warms Spark up)

PARAMS = [
    Param("poll_clients", list(CLIENTS), "the consumers the lesson compares: the Java client, librdkafka "
          "(confluent-kafka), a Kafka Streams app with one slow record", choices=CLIENTS),
    Param("poll_fixes", list(FIXES), "none: the slow batch as is; the others: a fix each, side by side",
          choices=FIXES),
    Param("poll_interval_ms", 6000, "max.poll.interval.ms", lo=MIN_SESSION_MS, hi=600_000, unit="ms",
          why="librdkafka needs session.timeout.ms <= max.poll.interval.ms, and the broker's minimum session is 6 s"),
    Param("poll_batch", 500, "max.poll.records: records handed over per poll", lo=1, hi=10_000),
    Param("poll_work_ms", 20, "processing time per record", lo=0, hi=10_000, unit="ms"),
    Param("poll_records", 600, "records in the topic", lo=1, hi=100_000),
    Param("poll_slow_record_ms", 9000, "Kafka Streams: the time its one slow record takes", lo=0, hi=600_000,
          unit="ms"),
    Param("poll_slow_offset", 100, "Kafka Streams: the offset of the slow record", lo=0, hi=100_000),
    Param("poll_longer_interval_ms", 30_000, "max.poll.interval.ms of the longer_interval fix", lo=MIN_SESSION_MS,
          hi=600_000, unit="ms"),
    Param("poll_watch_s", 30.0, "how long the consumers are watched (ends early once every one has settled)",
          lo=5, hi=600, unit="s"),
    Param("poll_loops", 2, "a looping consumer has settled once it has read the same records this many times "
          "again, and said it was dropped", lo=1, hi=10),
]


def _slow_record_exists(p: dict) -> str | None:
    if "streams" in p["poll_clients"] and p["poll_slow_offset"] >= p["poll_records"]:
        return (f"POLL_SLOW_OFFSET={p['poll_slow_offset']} is past the topic's last offset "
                f"({p['poll_records'] - 1}): the Streams app would never meet its slow record.")
    return None


RULES = [_slow_record_exists]
LOOP_ANSWERS = ("yes, it keeps reading the same batch", "no, it moves on")


def asked_variant(p: dict) -> str:
    """The variant the Predict question is about: the Java consumer, without a fix if it runs."""
    return "java/" + ("none" if "none" in p["poll_fixes"] else p["poll_fixes"][0])


def question(p: dict) -> tuple:
    fix = asked_variant(p).split("/")[1]
    interval = p["poll_longer_interval_ms"] if fix == "longer_interval" else p["poll_interval_ms"]
    return (f"The Java consumer (fix: {fix}) gets up to {p['poll_batch']} records per poll, {p['poll_work_ms']} ms of "
            f"work each, with max.poll.interval.ms = {interval:,}. Does it keep reading the same batch again?",
            LOOP_ANSWERS)


def measured_answer(record: dict, p: dict):
    row = record["poll_loop"].get(asked_variant(p))
    return None if row is None else LOOP_ANSWERS[0] if row["looped"] else LOOP_ANSWERS[1]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def applies(client: str, fix: str) -> bool:
    return not (client == "streams" and fix == "pause_resume")   # Streams polls for you: no pause while working


def batch_ms(p: dict, fix: str, client: str = "java") -> float:
    """How long the work between two polls takes under `fix` (Streams: its one slow record)."""
    if client == "streams":
        return p["poll_slow_record_ms"]
    return (1 if fix == "max_poll_records_1" else p["poll_batch"]) * p["poll_work_ms"]


def interval_ms(p: dict, fix: str) -> int:
    return p["poll_longer_interval_ms"] if fix == "longer_interval" else p["poll_interval_ms"]


def expected_to_loop(p: dict, fix: str, client: str = "java") -> bool:
    """The arithmetic of the lesson: a poll's work beyond the interval, unless poll() goes on meanwhile."""
    return fix != "pause_resume" and batch_ms(p, fix, client) > interval_ms(p, fix)


# ------------------------------------------------------------------ the consumers

@dataclass
class Variant:
    client: str
    fix: str
    group: str
    history: History
    child: object = None          # lab.processes.Child
    log: object = None            # its log path

    @property
    def name(self) -> str:
        return f"{self.client}/{self.fix}"


def _start_java(lab, v: Variant, topic: str, p: dict) -> None:
    program = lab.program(JavaProgram(
        f"poll-{v.client}-{v.fix}", KAFKA_VERSION, "PollLoopConsumer", ["PollLoopConsumer.java", "Lab.java"],
        streams=False,
        properties={"bootstrap.servers": lab.bootstrap, "group.id": v.group, "auto.offset.reset": "earliest",
                    "enable.auto.commit": "false", "group.protocol": "classic",
                    "max.poll.interval.ms": interval_ms(p, v.fix),
                    "max.poll.records": 1 if v.fix == "max_poll_records_1" else p["poll_batch"],
                    "lab.topic": topic, "lab.app": v.name, "lab.history": v.history.folder,
                    "lab.run.id": v.history.run_id, "lab.work.ms": p["poll_work_ms"],
                    "lab.pause": str(v.fix == "pause_resume").lower()},
        heap="128m"))
    v.child, v.log = program.start(), program.log_path


def _start_librdkafka(lab, v: Variant, topic: str, p: dict) -> None:
    args = ["--bootstrap", lab.bootstrap, "--topic", topic, "--group", v.group, "--app", v.name,
            "--history", v.history.folder, "--run-id", v.history.run_id, "--work-ms", p["poll_work_ms"],
            "--batch", 1 if v.fix == "max_poll_records_1" else p["poll_batch"],
            "--max-poll-interval-ms", interval_ms(p, v.fix)]
    v.child = lab.spawn_python(f"poll-{v.client}-{v.fix}", "lab.apps.consumer_app",
                               args + (["--pause"] if v.fix == "pause_resume" else []))
    v.log = v.child.log_path


def _start_streams(lab, v: Variant, topic: str, p: dict) -> None:
    output = lab.topics(f"{topic}-out-{v.fix}", partitions=1)[0]
    program = lab.program(JavaProgram(
        f"poll-{v.client}-{v.fix}", KAFKA_VERSION, "SlowRecordApp", ["SlowRecordApp.java", "Lab.java", "LabStreams.java"],
        heap="192m",
        properties={"bootstrap.servers": lab.bootstrap, "application.id": v.group,
                    "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                    "num.stream.threads": 1, "state.dir": lab.folder / v.group,
                    "consumer.auto.offset.reset": "earliest", "producer.linger.ms": 5,
                    "consumer.max.poll.interval.ms": interval_ms(p, v.fix),
                    "consumer.max.poll.records": 1 if v.fix == "max_poll_records_1" else p["poll_batch"],
                    "lab.input.topic": topic, "lab.output.topic": output, "lab.app": v.name,
                    "lab.history": v.history.folder, "lab.run.id": v.history.run_id, "lab.work.ms": 0,
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


def run_lesson(lab, p: dict) -> "Outcome":
    topic = f"poll-input-{uuid.uuid4().hex[:6]}"
    lab.topics(topic, partitions=1)
    with lab.step(f"writing {p['poll_records']} records to {topic}", lane="input"):
        generate(lab.bootstrap, topic, p["poll_records"], History(lab.folder / "poll-input", lab.id))
    variants = [Variant(c, f, f"poll-{c}-{f}-{uuid.uuid4().hex[:4]}",
                        History(lab.folder / "poll-history" / f"{c}-{f}", lab.id))
                for c in p["poll_clients"] for f in p["poll_fixes"] if applies(c, f)]
    for v in variants:
        START[v.client](lab, v, topic, p)
        lab.event(v.name, "start", detail=f"{batch_ms(p, v.fix, v.client) / 1000:.1f} s of work per poll, interval "
                                          f"{interval_ms(p, v.fix) / 1000:.0f} s")
    try:
        lab.countdown(f"consumers at work (ends once each has read everything or looped {p['poll_loops']} time(s))",
                      seconds=p["poll_watch_s"],
                      done=lambda: all(_settled(v, p["poll_records"], p["poll_loops"]) for v in variants))
    finally:
        stop_together([v.child for v in variants])
    return Outcome.measure(lab, p, variants, topic)


# ------------------------------------------------------------------ what was measured

@dataclass
class Outcome:
    rows: list[dict]                     # one per variant
    reads: dict                          # variant -> [(t_s, offset)] for the figure
    evidence: dict = field(default_factory=dict)   # variant -> the client's own first line about it
    audits: dict = field(default_factory=dict)     # variant -> the Spark audit's Verdict (lab.audit)

    @classmethod
    def measure(cls, lab, p: dict, variants: list[Variant], topic: str) -> "Outcome":
        from ...experiment.admin import group_offsets
        from ...experiment.streaming import audit_many
        committed = group_offsets(lab.cluster.admin(), {v.name: v.group for v in variants}, topic)
        audits = audit_many({v.name: dict(history=v.history, kinds=["non_monotonic"], allow_empty=True,
                                          expect="anomalies" if v.fix == "none" else "clean")
                             for v in variants if _reads(v)})
        rows, reads, evidence = [], {}, {}
        for v in variants:
            read = _reads(v)
            per_offset = collections.Counter(r["offset"] for r in read)
            failures = _commit_failures(v)
            said = _dropped(v)
            if said:
                evidence[v.name] = said[0][1].strip()[:400]
            for f in failures:
                lab.event(v.name, "commit failed", at=f["ts"], tone="failure",
                          detail=f.get("exception") or f.get("code") or "")
            audit = audits.get(v.name)
            rows.append({
                "client": v.client, "fix": v.fix, "batch_ms": batch_ms(p, v.fix, v.client),
                "interval_ms": interval_ms(p, v.fix), "expected_to_loop": expected_to_loop(p, v.fix, v.client),
                "records": p["poll_records"],
                "reads": len(read), "distinct_offsets": len(per_offset),
                "max_reads_per_offset": max(per_offset.values(), default=0),
                # the group's committed offset, from the broker once the consumer stopped
                "committed_offset": (committed.get(v.name) or {}).get(0) or 0,
                "commit_failures": len(failures), "dropped_lines": len(said),
                "audit_jumps_back": None if audit is None else audit.counts.get("non_monotonic"),
                "looped": bool(failures or said) or max(per_offset.values(), default=0) > 1})
            reads[v.name] = [(r["ts"] - lab.t0, r["offset"]) for r in read]
        return cls(rows, reads, evidence, audits)

    @property
    def failed(self) -> bool:
        return any(r["looped"] for r in self.rows)

    def by_variant(self) -> dict:
        return {f"{r['client']}/{r['fix']}": r for r in self.rows}

    def as_record(self) -> dict:
        return {"poll_loop": self.by_variant(), "poll_loop_evidence": self.evidence}

    def verdict(self) -> str:
        looped = [k for k, r in self.by_variant().items() if r["looped"]]
        clean = [k for k, r in self.by_variant().items() if not r["looped"]]
        text = []
        if looped:
            text.append(f"looping (dropped from the group, the same offsets read again, commits failing): "
                        f"{', '.join(looped)}")
        if clean:
            text.append(f"clean: {', '.join(clean)}")
        return "; ".join(text)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows)

    def explain(self) -> str:
        lines = []
        for k, r in self.by_variant().items():
            arithmetic = (f"{r['batch_ms'] / 1000:.1f} s of work per poll against max.poll.interval.ms "
                          f"{r['interval_ms'] / 1000:.0f} s")
            if r["looped"]:
                lines.append(f"- **{k}**: {arithmetic}. Dropped from the group; {r['commit_failures']} commit(s) "
                             f"failed; {r['reads']} reads of {r['distinct_offsets']} offsets (one offset up to "
                             f"{r['max_reads_per_offset']} times; the Spark audit counts {r['audit_jumps_back']} "
                             f"jump(s) back to an offset already read); committed offset {r['committed_offset']} "
                             f"of {r['records']}.")
                if k in self.evidence:
                    lines.append(f"  The client said: `{self.evidence[k][:300]}`")
            else:
                how = ("poll() went on while a worker thread processed the paused partitions"
                       if r["fix"] == "pause_resume" else "each poll's work fits the interval")
                lines.append(f"- **{k}**: {arithmetic}: {how}. {r['reads']} reads of {r['distinct_offsets']} "
                             f"offsets, committed {r['committed_offset']} of {r['records']}, "
                             f"{r['commit_failures']} failed commit(s).")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for name, points in self.reads.items():
            if points:
                fig.add_scatter(x=[t for t, _ in points], y=[o for _, o in points], mode="markers", name=name,
                                marker={"size": 3})
        fig.update_layout(title="Offsets read over time: a saw-tooth is the same batch read again",
                          xaxis_title="seconds since the run began", yaxis_title="offset read",
                          template="plotly_white", height=420)
        return fig
