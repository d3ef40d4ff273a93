"""Lesson 07d, a broker bounce under Kafka Streams: what the lesson runs. One Kafka Streams app per
BOUNCE_APPS variant (lab/java/BounceApp.java, lab.toolbox.streams_app) on topics placed on chosen brokers; when the
apps have ridden the bounce out (or died), the living ones finish the input, and what they did is measured: their
LAB lines and logs, their committed offsets, and a Spark audit of their output against the generator's record.
"""
from __future__ import annotations

import time
import uuid

from ...errors import LabError
from ...toolbox.admin import topic_offsets
from ...toolbox.streams_app import StreamsApp
from ...record.history import History
from .broker_bounce_analysis import (APPS_LISTENER, LOG_LINES, Variant, app_row, bounce_of, dead_at, expected_to_die,
                                     first_error, processed, replaced_threads, series_of)
from .broker_bounce_report import Outcome

MAIN, SOURCES = "BounceApp", ["BounceApp.java", "Lab.java", "LabStreams.java"]
REQUEST_TIMEOUT_MS = 5000  # the producer's request.timeout.ms: a request to a broker that went away fails fast


class App(StreamsApp):
    """One variant's app: one JVM of BounceApp, its application.id (`group`) and output topic its own."""

    def __init__(self, lab, v: Variant, p: dict, topic: str, output: str):
        group = f"bounce-{v.slug}-{uuid.uuid4().hex[:4]}"
        super().__init__(lab, group, [f"bounce-{v.slug}"], v.version, MAIN, SOURCES, {
            "bootstrap.servers": lab.cluster.listener_bootstrap(APPS_LISTENER),
            "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
            "num.stream.threads": p["bounce_threads"], "state.dir": lab.folder / group,
            "consumer.auto.offset.reset": "earliest",
            "producer.delivery.timeout.ms": p["bounce_delivery_timeout_ms"],
            "producer.request.timeout.ms": REQUEST_TIMEOUT_MS, "producer.linger.ms": 0,
            "task.timeout.ms": p["bounce_task_timeout_ms"],
            "lab.input.topic": topic, "lab.output.topic": output, "lab.app": v.name,
            "lab.handler": v.handler,
            **({"producer.acks": p["bounce_acks"]} if p["bounce_acks"] != "default" else {})},
            heap="160m", stores=False)   # stateless: no RocksDB
        self.variant, self.output, self.group = v, output, group

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def program(self):
        return self.programs[0]

    def progress(self) -> list[dict]:
        return self.reports(self.program)

    def states(self) -> list[dict]:
        return self.program.lab_lines(kind="state")

    def dead_at(self, before: float | None = None) -> float | None:
        return dead_at(self.states(), before)

    def processed(self, at: float) -> int:
        return processed(self.progress(), at)


def topic_on(lab, name: str, partitions: int, replicas: list[int]) -> str:
    """A topic whose every partition has these replicas, the first one leading (Run.topics then waits for
    the leaders): the lesson chooses which broker the apps depend on."""
    from confluent_kafka.admin import NewTopic
    admin = lab.cluster.admin()   # kept alive until the future resolves
    futures = admin.create_topics(
        [NewTopic(name, partitions, -1, replica_assignment=[list(replicas)] * partitions)], operation_timeout=30)
    futures[name].result()
    return lab.topics(name, partitions=partitions)[0]


def settled(apps: list[App], up_at: float | None) -> bool:
    """Once the brokers are back: every app dead, or running with all its threads and processing again."""
    if up_at is None or time.time() < up_at + 5:
        return False
    for app in apps:
        if app.dead_at() is not None:
            continue
        last = app.last(app.program)
        if last.get("state") != "RUNNING" or app.processed(time.time()) <= app.processed(up_at) or \
                any(not t.endswith(":RUNNING") for t in last.get("threads", [])):
            return False
    return True


def drain(lab, apps: list[App], topic: str, partitions: int) -> None:
    """The living apps finish the input (their commits reach its end), so the audit sees all they will do."""
    admin = lab.cluster.admin()
    ends = topic_offsets(admin, topic, partitions)
    living = [a for a in apps if a.dead_at() is None and a.program.alive()]

    def caught_up():
        return all(all(a.committed(admin, topic).get(q) == ends[q] for q in range(partitions)) for a in living)
    if living:
        try:
            lab.wait(caught_up, 20, "the living apps to commit the whole input")
        except LabError as exc:   # measured below as lag; not a reason to lose the run
            lab.say(f"not every app caught up: {exc}")


def _audit_history(history: History, committed: dict, folder) -> History:
    """The generator's "produced" rows below the offsets this app committed: what it claims done. A dead app's
    unprocessed tail is lag, not loss."""
    mine = History(folder, history.run_id)
    mine.log_many("produced", [r for r in history.rows("produced")
                               if r["offset"] < (committed.get(r["partition"]) or 0)])
    return mine


def measure(lab, p: dict, apps: list[App], topic: str, history: History, marks: dict) -> Outcome:
    """Once the apps are stopped: each one's row (broker_bounce_analysis.app_row), its log evidence, its
    progress over time, the Spark audit of its output; its death and replaced threads on the timeline."""
    from ...toolbox.streaming import audit_many
    admin = lab.cluster.admin()
    partitions = p["bounce_partitions"]
    ends = topic_offsets(admin, topic, partitions)
    committed = {a.name: a.committed(admin, topic) for a in apps}
    since, stopped_at = marks["bounce_at"], marks["apps_stopped_at"]
    audits = audit_many({a.name: dict(history=_audit_history(history, committed[a.name],
                                                             lab.folder / "bounce-audit" / a.variant.slug),
                                      bootstrap=lab.bootstrap, output_topic=a.output,
                                      kinds=["lost", "duplicate"], allow_empty=True,
                                      expect="anomalies" if expected_to_die(p, a.variant) else "clean")
                         for a in apps})
    # a replica cutting its log back to the new leader's: records only it had are gone (read once, counted per app)
    truncated = lab.cluster.grep_log(r"\] Truncating to offset \d+ \(UnifiedLog\)")
    rows, series, evidence = [], {}, {}
    for a in apps:
        states, progress = a.states(), a.progress()
        uncaught = a.program.lab_lines(kind="uncaught")
        thread_deaths = a.program.lab_lines(kind="thread_died")
        evidence[a.name] = a.first_lines(LOG_LINES, since)
        rows.append(app_row(p, a.variant, output=a.output, states=states, progress=progress, uncaught=uncaught,
                            thread_deaths=thread_deaths, evidence=evidence[a.name], committed=committed[a.name],
                            ends=ends, audit=audits.get(a.name), truncated=truncated, since=since,
                            stopped_at=stopped_at))
        dead = dead_at(states, before=stopped_at)
        if dead is not None:
            lab.event(a.name, "client dead", at=dead, tone="failure",
                      detail=first_error(thread_deaths, uncaught).get("exception", "")[:200])
        for u in replaced_threads(uncaught):
            lab.event(a.name, "thread replaced", at=u["ts"], tone="mitigation", detail=u.get("exception", "")[:200])
        series[a.name] = series_of(progress, lab.t0, stopped_at)
    return Outcome(rows, series, bounce_of(p, marks, lab.t0), evidence, audits)
