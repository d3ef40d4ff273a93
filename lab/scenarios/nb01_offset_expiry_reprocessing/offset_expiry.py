"""Notebook 01's scenario ("01 · Offset expiry"): SPEC, needs() and run(), which takes every consumer-group variant
(lab/apps/consumer_app.py, one process and one group each) and the Spark queries (offset_expiry_spark) through one
shared downtime, snapshots the committed offsets with AdminClient and audits each variant on Spark.
OffsetExpiryResult shows sections 1-8 (from "Every variant through one window" to "Mitigations, each with a clean
verdict") and checks the exercises; expires_after_stop() and clock_for() are the pure, unit-tested parts.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import ClassVar

from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import Param, Result, Run, Spec, lab_lines
from ...experiment.result import Exercise, called, count, expect, is_number
from ...experiment.admin import committed_offsets, group_offsets, set_group_offsets, topic_offsets
from ...experiment.apps import stop_together
from ...experiment.mitigate import Mitigate
from ...experiment.streaming import audit_many
from ...generator import generate
from ...history import History
from ...audit import RESET_KINDS
from .offset_expiry_spark import SPARK_VARIANTS, SparkQueries

APP_MODULE = "lab.apps.consumer_app"
TRICKLE = 10          # records per batch after the restart (one per key)


@dataclass(frozen=True)
class Variant:
    """One consumer group under test."""
    name: str
    reset: str                    # auto.offset.reset
    protocol: str | None          # None: the run's group_protocol
    restart: str                  # "window": after DOWNTIME_S (or the expiry); "early": after CONTROL_DOWNTIME_S
    claim: str                    # what it shows when its offsets expired
    idle: bool = False            # quiet for idle_s before the stop (the expiry-clock probes)
    sink: str | None = None       # None, "plain" or "idempotent" output topic


VARIANTS = {v.name: v for v in [
    Variant("earliest", "earliest", None, "window", "re-reads everything still retained, writes it again", sink="plain"),
    Variant("latest", "latest", None, "window", "silently skips what arrived while it was down"),
    Variant("error", "error", None, "window", "fails loudly; an operator resets the offsets"),
    Variant("control", "earliest", None, "early", "back after CONTROL_DOWNTIME_S: nothing re-read if < retention"),
    Variant("idempotent", "earliest", None, "window", "re-reads, but the dedupe-by-id sink writes nothing twice",
            sink="idempotent"),
    Variant("idle-classic", "earliest", "classic", "window", "expiry clock of a quiet classic group", idle=True),
    Variant("idle-consumer", "earliest", "consumer", "window", "expiry clock of a quiet KIP-848 group", idle=True),
]}

SPEC = Spec(
    Param("retention_minutes", 1, "offsets.retention.minutes (the source's cluster: 1440 = 24 h)", lo=1, hi=60,
          unit="min",
          why="Kafka's minimum is 1; every minute is a minute of waiting"),
    Param("check_interval_ms", 1000, "offsets.retention.check.interval.ms: how often the coordinator sweeps",
          lo=500, hi=600000, unit="ms", why="a sweep more often than twice a second only loads the broker"),
    Param("downtime_s", None, "how long the apps stay down", lo=1, hi=7200, unit="s",
          none="until every group's offsets are gone"),
    Param("control_downtime_s", 15, "how long the control group stays down", lo=1, hi=7200, unit="s"),
    Param("idle_s", 10, "how long the idle-* groups sit quiet (still members) before the stop", lo=0, hi=600,
          unit="s"),
    Param("messages_before", 200, "records consumed and committed before the stop", lo=1, hi=200000),
    Param("messages_while_down", 100, "records produced while the apps are down", lo=0, hi=200000),
    Param("partitions", 2, "partitions of the input topic", lo=1, hi=3,
          why="the ten keys k0..k9 must land on every partition"),
    Param("group_protocol", "classic", "group.protocol of the main variants (consumer: KIP-848)",
          choices=("classic", "consumer")),
    Param("variants", list(VARIANTS), "the consumer groups to run", choices=tuple(VARIANTS)),
    Param("spark", True, "also run the Spark Structured Streaming queries"),
    rules=(lambda p: None if p["variants"] or p["spark"] else "Nothing to run: choose a variant or SPARK=True.",),
)


def needs(p: dict) -> dict:
    """A one-minute version of the source's day; topic retention acts within a second (failOnDataLoss)."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={
        "offsets.retention.minutes": str(p["retention_minutes"]),
        "offsets.retention.check.interval.ms": str(p["check_interval_ms"]),
        "log.retention.check.interval.ms": "1000", "log.initial.task.delay.ms": "1000"})


RESTART_ANSWERS = ("it resumes where it stopped", "it re-reads what it had already processed",
                   "it skips what arrived while it was down", "it stops with an error")


def question(p: dict) -> tuple:
    """The Predict step: what the `earliest` group does when it comes back."""
    down = ("until the coordinator has deleted its committed offsets" if p["downtime_s"] is None else
            f"for {p['downtime_s']:g} s")
    return (f"The `earliest` group (auto.offset.reset=earliest) stays down {down}, with offsets.retention.minutes"
            f" = {p['retention_minutes']}. What does it do when it comes back?", RESTART_ANSWERS)


def run(cluster=None, progress: bool = True, **params) -> "OffsetExpiryResult":
    """Every chosen variant through one shared downtime; each audited on Spark from what it read."""
    p = SPEC.validate(**params)
    with Run("offset-expiry", cluster=cluster, progress=progress, spark_audit=True, **needs(p)) as r:
        return _Experiment(r, p).go()


# The Mitigate step: the source's two groups (earliest, latest) again, with the learner's fix: a downtime within the
# retention, or a retention longer than the downtime.
mitigate = Mitigate(run, SPEC, base={"variants": ["earliest", "latest"], "spark": False})


class _Experiment:
    def __init__(self, run: Run, p: dict):
        self.run, self.p, tag = run, p, run.id.rsplit("-", 1)[-1]
        self.tag, self.topic, self.aged = tag, f"events-{tag}", f"aged-{tag}"
        self.variants = [VARIANTS[n] for n in p["variants"]]
        self.group = {v.name: f"{v.name}-{tag}" for v in self.variants}
        self.out = {v.name: f"out-{v.name}-{tag}" for v in self.variants if v.sink}
        self.hist = {n: History(run.folder / n, run.id) for n in p["variants"] + list(SPARK_VARIANTS) * p["spark"]}
        self.input = History(run.folder / "input", run.id)
        self.apps, self.inc, self.expired, self.errors, self.operator, self.snapshots = {}, {}, {}, {}, {}, []
        self.admin = run.cluster.admin()

    def go(self) -> "OffsetExpiryResult":
        run, p = self.run, self.p
        run.topics(self.topic, partitions=p["partitions"])
        if others := list(self.out.values()) + [self.aged] * p["spark"]:
            run.topics(*others)
        run.phase(f"topic {self.topic}: {len(self.variants)} consumer group(s)" + " + Spark" * p["spark"])
        self.produce("before", p["messages_before"])
        spark = SparkQueries(self) if p["spark"] else None
        ready = run.background(spark.first_run, name="spark first run") if spark else None
        idle = [v for v in self.variants if v.idle]
        self.start(idle)
        if idle:
            last = max(max(r["ts"] for r in self.commits(v.name)) for v in idle)
            run.countdown("idle groups sit quiet (members, nothing to commit)", until=last + p["idle_s"])
        if ready:  # before the others start, so their last commit stays close to the stop
            run.wait(lambda: ready.done, 600, "the Spark queries' first run")
            ready.result()
        self.start([v for v in self.variants if not v.idle])

        run.phase("stop every app at once (a redeploy); the topic keeps receiving data")
        self.snapshot(self.variants, "before the stop")
        stop_together(self.apps[v.name] for v in self.variants)
        for v in self.variants:
            run.event(v.name, "stop", tone="fault", detail="SIGTERM: commit, leave the group, exit")
        self.stop_at = time.time()
        self.produce("while down", p["messages_while_down"])
        loss = run.background(spark.data_loss, name="spark failOnDataLoss") if spark else None
        self.window()
        resumed = None
        if spark:  # the data-loss pair is done within the window; the checkpointed query resumes beside the apps
            loss.result(600)
            resumed = run.background(spark.queries["spark-checkpoint"].once, name="spark-checkpoint restart")
        names = [v.name for v in self.variants]
        self.trickle(names)
        self.wait_caught_up(names, "catch up with the end of the topic")
        stop_together(self.apps[name] for name in names)
        for name in names:
            run.event(name, "end", detail="stopped after catching up")
        return self.result(spark, resumed)

    def start(self, variants) -> None:
        for v in variants:
            self.spawn(v, 0)
        self.wait_caught_up([v.name for v in variants], "consume and commit the first batch")

    def spawn(self, v: Variant, inc: int) -> None:
        if inc == 0:  # a position at the start of the topic, like a service that has read it since it was created
            set_group_offsets(self.run, self.admin, self.group[v.name], self.topic,
                              {part: 0 for part in range(self.p["partitions"])})
        self.inc[v.name] = inc
        args = ["--bootstrap", self.run.bootstrap, "--topic", self.topic, "--group", self.group[v.name],
                "--app", v.name, "--history", self.hist[v.name].folder, "--run-id", self.run.id, "--incarnation",
                inc, "--reset", v.reset, "--protocol", v.protocol or self.p["group_protocol"]]
        args += ["--output-topic", self.out[v.name]] if v.sink else []
        args += ["--dedupe-db", self.run.folder / v.name / "ids.sqlite"] if v.sink == "idempotent" else []
        self.apps[v.name] = self.run.spawn_python(f"{v.name}-{inc}", APP_MODULE, args)
        self.run.event(v.name, "start" if inc == 0 else "restart", detail=f"incarnation {inc}")

    def commits(self, name: str, inc: int | None = None) -> list[dict]:
        return lab_lines(self.run.folder / f"{name}-{self.inc[name] if inc is None else inc}.log", kind="commit")

    def wait_caught_up(self, names, what: str) -> None:
        for name in names:
            def caught_up():
                have = committed_offsets(self.commits(name))
                return all(have.get(part, 0) >= end for part, end in self.end_offsets().items() if end > 0)
            self.run.wait(caught_up, 120, f"{name} to {what}", child=self.apps[name],
                          evidence=lambda: f"committed {committed_offsets(self.commits(name))}")
            self.run.event(name, "caught up", detail=f"committed {committed_offsets(self.commits(name))}")

    def produce(self, phase: str, n: int, topic: str | None = None, history: History | None = None) -> None:
        """n records, each logged as "produced" (the ground truth) once acknowledged."""
        topic = topic or self.topic
        gen = generate(self.run.bootstrap, topic, n, history or self.input, keys=10,
                       id_prefix=f"{self.run.id}-{phase.replace(' ', '')}-{time.monotonic_ns()}-") if n > 0 else None
        if gen and gen.produced != n:
            raise LabError(f"Only {gen.produced} of {n} records reached {topic} ({gen.failed} failed).")
        self.run.event("input" if topic == self.topic else "aged topic", f"produce {n}", detail=phase)

    def end_offsets(self) -> dict[int, int]:
        return topic_offsets(self.admin, self.topic, self.p["partitions"])

    def group_offsets(self, variants) -> dict[str, dict[int, int | None]]:
        """Committed offsets per variant's group, from the group coordinator (None: none for that partition)."""
        return group_offsets(self.admin, {v.name: self.group[v.name] for v in variants}, self.topic)

    def snapshot(self, variants, moment: str) -> None:
        seen = self.run.wait(lambda: (s := self.group_offsets(variants)) and len(s) == len(variants) and s, 30,
                             f"the group coordinator to list the offsets of {[v.name for v in variants]}")
        self.snapshots += [{"moment": moment, "variant": n, "partition": part, "committed_offset": parts.get(part)}
                           for n, parts in seen.items() for part in range(self.p["partitions"])]

    def window(self) -> None:
        """The one shared wait: poll every group's offsets twice a second, restart each variant when due."""
        p, stop, retention = self.p, self.stop_at, self.p["retention_minutes"] * 60
        give_up = retention + 3 * p["check_interval_ms"] / 1000 + 45   # DOWNTIME_S None: offsets should be gone
        due = {v.name: stop + (p["control_downtime_s"] if v.restart == "early" else p["downtime_s"] or give_up)
               for v in self.variants}
        waiting, restarts = {v.name: v for v in self.variants}, []
        self.run.phase("down: " + (f"{p['downtime_s']:g} s" if p["downtime_s"] else "until the offsets are gone")
                       + f" (retention {retention} s)")

        def poll() -> bool:
            now = time.time()
            for name, parts in self.group_offsets(list(waiting.values())).items():
                if name not in self.expired and not any(o is not None for o in parts.values()):
                    self.expired[name] = now
                    self.run.say(f"{name}: committed offsets gone {now - stop:.1f} s after the stop")
                    self.run.event(name, "offsets expired", at=now, tone="failure", detail="no committed offset left")
            gone = p["downtime_s"] is None and all(n in self.expired for n, v in waiting.items() if v.restart == "window")
            if now_due := [v for n, v in waiting.items() if now >= due[n] or (v.restart == "window" and gone)]:
                restarts.append(now)
                self.snapshot(now_due, "before the restart")
                for v in now_due:
                    self.spawn(v, 1)
                    del waiting[v.name]
            return not waiting
        self.run.wait(poll, max(due.values()) - time.time() + 60, "every group's restart", interval=0.5)
        self.run.timeline.band("apps down", stop, restarts[0], tone="fault")
        self.run.timeline.band(f"offsets.retention.minutes={p['retention_minutes']}", stop, stop + retention)

    def trickle(self, names: list[str]) -> None:
        """New records until every app read some in every partition (a skip only shows once read past)."""
        start = self.end_offsets()

        def everyone_read() -> bool:
            for name in names:
                if not self.apps[name].alive():
                    self.operator_reset(name)
            grown = {part for part, end in self.end_offsets().items() if end > start[part]}
            have = {n: committed_offsets(self.commits(n)) for n in names}
            pending = [n for n in names if not grown or any(have[n].get(part, -1) <= start[part] for part in grown)]
            if pending:
                self.produce("after the restart", TRICKLE)
            return not pending
        self.run.wait(everyone_read, 120, "every app to read new records after the restart", interval=0.3)

    def operator_reset(self, name: str) -> None:
        """An app that exited must be reset=error's loud failure: an operator restores its last commit."""
        app, fatal = self.apps[name], lab_lines(self.apps[name].log_path, kind="no_offset")
        if name in self.operator or not fatal:
            raise LabError(f"{app.name} exited ({app.returncode()}); log {app.log_path}:\n" + app.log()[-1500:])
        self.errors[name] = fatal[0]["error"]
        self.run.event(name, "no committed offset: exit", at=fatal[0]["ts"], tone="failure", detail=fatal[0]["error"])
        self.operator[name] = committed_offsets(self.commits(name, 0))
        set_group_offsets(self.run, self.admin, self.group[name], self.topic, self.operator[name])
        self.run.event(name, "operator reset", tone="mitigation", detail=f"offsets set to {self.operator[name]}")
        self.spawn(VARIANTS[name], 2)

    def result(self, spark, resumed=None) -> "OffsetExpiryResult":
        owns = self.run.cluster.owns_broker
        notes = [] if owns else ["External cluster: the broker log is not readable from the lab."]
        broker_log = [] if not owns else [l for l in self.run.cluster.grep_log(
            rf"Expired offset for partition={re.escape(self.topic)}|tombstone records while cleaning up group "
            rf"metadata|\[Group(Id)? [a-z-]+-{self.tag}\].*(left|empty)") if self.tag in l or "tombstone" in l][:200]
        for name, h in self.hist.items():  # every history gets the ground truth of the topic it read
            if name not in ("spark-strict", "spark-lenient"):
                h.path("produced").write_bytes(self.input.path("produced").read_bytes())
        verdicts = {**(spark.verdicts if spark else {}), **self.audit(resumed)}
        self.errors.update(spark.errors if spark else {})
        facts, t_stop = {}, self.stop_at - self.run.t0
        for v in self.variants:
            for i in range(self.inc[v.name] + 1):
                if rows := self.commits(v.name, i):
                    self.run.event(v.name, f"read {sum(r['records'] for r in rows)}", at=rows[0]["ts"],
                                   end=rows[-1]["ts"], tone="info" if i == 0 else "failure"
                                   if v.name in self.expired and i == 1 else "mitigation")
            facts[v.name] = {
                "protocol": v.protocol or self.p["group_protocol"], "reset": v.reset,
                "idle_before_stop_s": round(self.stop_at - max(r["ts"] for r in self.commits(v.name, 0)), 1),
                "expired_after_stop_s": round(self.expired[v.name] - self.stop_at, 1) if v.name in self.expired else None,
                "downtime_s": round(self.run.timeline.first(v.name, "restart").t - t_stop, 1),
                "read_after_restart": sum(r["records"] for i in range(1, self.inc[v.name] + 1)
                                          for r in self.commits(v.name, i)),
                "committed_before_restart": all(r["committed_offset"] is not None for r in self.snapshots
                                                if r["variant"] == v.name and r["moment"] == "before the restart")}
        return OffsetExpiryResult(
            scenario="offset-expiry", params=self.p, run_id=self.run.id, timeline=self.run.timeline, notes=notes,
            topic=self.topic, stop_t=round(t_stop, 3), facts=facts, verdicts=verdicts, errors=self.errors,
            operator=self.operator, snapshots=self.snapshots, broker_log=broker_log, histories=self.hist)

    def audit(self, resumed=None) -> dict:
        """The Spark audit (lab.audit) of each group from its history; the idle probes measure clocks only. The
        groups' audits start while the checkpointed query (`resumed`, a background task) may still be reading."""
        jobs = {v.name: dict(history=self.hist[v.name], bootstrap=self.run.bootstrap, output_topic=self.out.get(v.name),
                             kinds=RESET_KINDS + ["duplicate", "lost"] * bool(v.sink),
                             expect="anomalies" if v.name in self.expired and v.reset != "error" else "clean")
                for v in self.variants if not v.idle}
        self.run.phase(f"auditing on Spark: {', '.join(jobs)}" + ", spark-checkpoint" * bool(resumed))
        groups = self.run.background(audit_many, jobs, name="audit of the groups")
        checkpoint = {}
        if resumed:
            self.run.wait(lambda: resumed.done, 600, "spark-checkpoint to resume from its checkpoint")
            resumed.result()
            checkpoint = audit_many({"spark-checkpoint": dict(history=self.hist["spark-checkpoint"],
                                                              kinds=RESET_KINDS, expect="clean")})
        self.run.wait(lambda: groups.done, 600, "the groups' audits")
        return {**groups.result(), **checkpoint}


# ------------------------------------------------------------------ pure parts (unit-tested)

def expires_after_stop(protocol: str, idle_s: float, retention_s: float) -> float:
    """Seconds from the stop to the expiry (no sweep): classic from the stop, KIP-848 from the last commit."""
    return retention_s if protocol == "classic" else max(0.0, retention_s - idle_s)


def clock_for(idle_before_stop_s: float, expired_after_stop_s: float, retention_s: float, sweep_s: float) -> str:
    """Which clock explains when a group's offsets vanished, given how long it sat idle before the stop."""
    slack, seen = sweep_s + 2, expired_after_stop_s
    if_empty, if_commit = float(retention_s), max(0.0, retention_s - idle_before_stop_s)
    if abs(if_empty - if_commit) < slack:
        return "either (idle too short to tell)"
    if abs(seen - if_commit) < abs(seen - if_empty):
        return "last commit" if abs(seen - if_commit) <= slack else "neither (closer to last commit)"
    return "group empty" if abs(seen - if_empty) <= slack else "neither (closer to group empty)"


# ------------------------------------------------------------------ the result

@dataclass
class OffsetExpiryResult(Result):
    topic: str = ""
    stop_t: float = 0.0                                   # seconds since t0: every app stopped
    facts: dict = field(default_factory=dict)             # consumer variant -> what was measured
    verdicts: dict = field(default_factory=dict)          # variant -> lab.audit Verdict
    errors: dict = field(default_factory=dict)            # variant -> the error it reported
    operator: dict = field(default_factory=dict)          # variant -> offsets an operator set after its failure
    snapshots: list = field(default_factory=list)         # committed offsets before the stop / the restart
    broker_log: list = field(default_factory=list)        # coordinator lines about these groups' offsets
    histories: dict = field(default_factory=dict)         # variant -> lab.history.History
    title: ClassVar[str] = "Offset expiry: every variant through the same window"
    exercises: ClassVar[dict] = {}                        # filled in below, once the exercises' functions are defined

    retention_s = property(lambda self: self.params["retention_minutes"] * 60)

    @property
    def expired(self) -> dict:
        return {n: f for n, f in self.facts.items() if f["expired_after_stop_s"] is not None}

    failed = property(lambda self: bool(self.expired), doc="A group came back after its offsets were gone.")

    def counts(self, name: str) -> dict:
        c = self.verdicts[name].counts if name in self.verdicts else {}
        return {"reprocessed": c.get("reprocessed_after_reset"), "skipped": c.get("skipped_after_reset"),
                "duplicates": c.get("duplicate"), "lost": c.get("lost")}

    def downtime(self) -> float:
        """The main variants' downtime (the control's if it ran alone)."""
        main = [f["downtime_s"] for n, f in self.facts.items() if VARIANTS[n].restart == "window"]
        return min(main or [f["downtime_s"] for f in self.facts.values()] or [0])

    def measured_answer(self) -> str | None:
        """What the `earliest` group did when it came back (None: it did not run)."""
        if "earliest" not in self.facts:
            return None
        c = self.counts("earliest")
        if "earliest" in self.errors:
            return RESTART_ANSWERS[3]
        if c["reprocessed"]:
            return RESTART_ANSWERS[1]
        return RESTART_ANSWERS[2] if c["skipped"] else RESTART_ANSWERS[0]

    def _did(self, n: str) -> str:
        c = self.counts(n)
        return ("failed loudly" if n in self.errors else f"re-read {c['reprocessed']}, skipped {c['skipped']}"
                + (f", duplicates {c['duplicates']}" if c["duplicates"] is not None else "")
                if c["reprocessed"] is not None else "not audited (a clock probe)")

    def verdict(self) -> str:
        if not self.facts:
            return "no consumer group ran; Spark: " + (", ".join(f"{k}: {v}" for k, v in self.errors.items()) or "clean")
        d, R, control = self.downtime(), self.retention_s, self.facts.get("control")
        tail = (f"; control back after {control['downtime_s']:.0f} s: offsets "
                + ("expired too" if "control" in self.expired else "still there")) if control and len(self.facts) > 1 else ""
        if self.expired:
            return (f"downtime {d:.0f} s vs retention {R} s: the committed offsets of {len(self.expired)} group(s) "
                    "expired before the restart: " + "; ".join(f"{n} {self._did(n)}" for n in self.expired) + tail)
        odd = [f"{n} {self._did(n)}" for n in self.facts if any(self.counts(n)[k] for k in ("reprocessed", "skipped"))]
        return (f"downtime {d:.0f} s < retention {R} s: the offsets were still there" if d < R else
                f"downtime {d:.0f} s >= retention {R} s, but no sweep had removed the offsets yet") + (
            "; yet the audit found " + "; ".join(odd) if odd else ", nothing re-read") + tail

    def explain(self) -> str:
        R, d = self.retention_s, self.downtime()
        lines = [f"In this run the coordinator swept every {self.params['check_interval_ms'] / 1000:g} s, with "
                 f"`offsets.retention.minutes` = {R} s."]
        for n, f in self.facts.items():
            reset = f"`auto.offset.reset={VARIANTS[n].reset}`"
            lines.append(f"- **{n}**: " + (
                f"offsets gone {f['expired_after_stop_s']:.1f} s after the stop; at the restart OffsetFetch found "
                f"nothing and {reset} decided: {self._did(n)}" + (
                    f" (`{self.errors[n][:120]}`), then an operator set the group to {self.operator.get(n)}"
                    if n in self.errors else "") if n in self.expired else
                f"down {f['downtime_s']:.0f} s; at the restart OffsetFetch still found its offsets, so it resumed "
                f"where it stopped ({reset} never applied): read {f['read_after_restart']} record(s) after the "
                f"restart, re-read {self.counts(n)['reprocessed']}") + ".")
        if not self.expired:
            lines.append(f"\nDown {d:.0f} s {'<' if d < R else '>='} {R} s: no sweep removed the offsets before the "
                         "restart, so no reset policy was consulted; nothing re-read, nothing skipped.")
        return "\n".join(lines)

    def table(self, names=None):
        """One row per variant: what it measured (names: only these, if they ran)."""
        import pandas as pd
        rows = [{"variant": n, "group.protocol": f.get("protocol", "(checkpoint)"),
                 "auto.offset.reset": f.get("reset", "(checkpoint)"), "downtime_s": f.get("downtime_s"),
                 "offsets_expired": n in self.expired if f else None, **self.counts(n),
                 "read_after_restart": f.get("read_after_restart"), "error": self.errors.get(n, ""),
                 "claim": VARIANTS[n].claim if n in VARIANTS else SPARK_VARIANTS[n]}
                for n in [*self.facts, *[s for s in SPARK_VARIANTS if s in self.verdicts]]
                for f in [self.facts.get(n, {})]]
        df = pd.DataFrame(rows).convert_dtypes()
        return df[df["variant"].isin(names)] if names is not None and len(df) else df

    def offsets_table(self):
        import pandas as pd
        df = pd.DataFrame(self.snapshots, columns=["moment", "variant", "partition", "committed_offset"])
        return df.pivot_table(index=["variant", "partition"], columns="moment", values="committed_offset",
                              aggfunc="first", dropna=False)

    def broker_lines(self, limit: int = 40) -> str:
        lines = [l[:230] for l in self.broker_log if re.search(r"Expired offset|tombstone|left|now empty", l)]
        return "\n".join(lines[:limit]) or "(no broker log lines: " + (
            "; ".join(self.notes) or "no offset of these groups expired") + ")"

    def clock(self):
        """For each group whose offsets vanished: which clock explains when, given how long it sat idle."""
        import pandas as pd
        R, sweep = self.retention_s, self.params["check_interval_ms"] / 1000
        return pd.DataFrame([{
            "variant": n, "protocol": f["protocol"], "idle_before_stop_s": f["idle_before_stop_s"],
            "expired_after_stop_s": f["expired_after_stop_s"],
            "predicted_if_clock_is_group_empty_s": expires_after_stop("classic", f["idle_before_stop_s"], R),
            "predicted_if_clock_is_last_commit_s": expires_after_stop("consumer", f["idle_before_stop_s"], R),
            "clock": clock_for(f["idle_before_stop_s"], f["expired_after_stop_s"], R, sweep)}
            for n, f in self.expired.items()])

    def explain_clock(self) -> str:
        probes = {n: f for n, f in self.facts.items() if VARIANTS[n].idle}
        clocks = {r["variant"]: r["clock"] for r in self.clock().to_dict("records")}
        return "\n".join(
            f"- **{n}** ({f['protocol']}): idle {f['idle_before_stop_s']:.0f} s before the stop, offsets gone "
            f"{f['expired_after_stop_s']:.1f} s after it: clock = **{clocks[n]}**" if n in clocks else
            f"- **{n}** ({f['protocol']}): idle {f['idle_before_stop_s']:.0f} s, back after {f['downtime_s']:.0f} s "
            f"with its offsets still there: a classic clock would have needed {self.retention_s} s down, a "
            f"last-commit clock {expires_after_stop('consumer', f['idle_before_stop_s'], self.retention_s):.0f} s "
            "(plus a sweep)" for n, f in probes.items()) or "No idle-* probe ran (VARIANTS): no clock to compare."

    def audit_table(self):
        import pandas as pd
        return pd.DataFrame([{"audited": k, "verdict": v.summary()} for k, v in self.verdicts.items()])

    def first_reprocessing(self) -> float | None:
        """Seconds from the stop to the first re-read of an already committed offset (any variant)."""
        times = [float(v.examples["reprocessed_after_reset"]["time"].min().timestamp()) for v in self.verdicts.values()
                 if v.counts.get("reprocessed_after_reset") and len(v.examples.get("reprocessed_after_reset", []))]
        return round(min(times) - self.timeline.t0 - self.stop_t, 1) if times else None

    def frames(self, name: str):
        """(read, produced to the input topic) of one variant's history; empty if it did not run."""
        import pandas as pd
        if name not in self.histories:
            return pd.DataFrame(columns=["partition", "offset"]), pd.DataFrame(columns=["partition", "offset"])
        produced = self.histories[name].frame("produced")
        return self.histories[name].frame("read"), produced[produced["topic"] == self.topic] if len(produced) else produced

    def record_fields(self) -> dict:
        out = {"downtime_s": self.downtime(), "retention_s": self.retention_s}
        for n in [*self.facts, *[s for s in SPARK_VARIANTS if s in self.verdicts or s in self.errors]]:
            key = n.replace("-", "_")
            out.update({f"{key}_{k}": int(v) for k, v in self.counts(n).items() if v is not None})
            out[f"{key}_error"] = self.errors.get(n, "")
        out.update({f"{n.replace('-', '_')}_{k}": v for n, f in self.facts.items() for k, v in
                    {**f, "offsets_expired": n in self.expired}.items() if k not in ("protocol", "reset")})
        out.update({f"{r['variant'].replace('-', '_')}_clock": r["clock"] for r in self.clock().to_dict("records")})
        if (first := self.first_reprocessing()) is not None:
            out["first_reprocessing_after_stop_s"] = first
        return out


# ------------------------------------------------------------------ the exercises

def _skipped(result: OffsetExpiryResult) -> int:
    """Exercise 1, from the `latest` group's history: offsets it never read, with reads on both sides of them."""
    reads, produced = result.frames("latest")
    if not len(reads) or not len(produced):
        return 0
    seen = set(zip(reads["partition"], reads["offset"]))
    lo, hi = reads.groupby("partition")["offset"].min(), reads.groupby("partition")["offset"].max()
    return sum(1 for p, o in zip(produced["partition"], produced["offset"])
               if p in lo and lo[p] < o < hi[p] and (p, o) not in seen)


def _audited_skips(result: OffsetExpiryResult) -> int:
    """What the Spark audit counted as skipped_after_reset for `latest` (0 when it did not run)."""
    return result.counts("latest")["skipped"] or 0


def _check_skipped(result: OffsetExpiryResult, answer) -> None:
    expected = _audited_skips(result)
    whole = count(answer)
    expect(whole == expected, f"{whole} records; count the produced offsets of each partition that lie between "
                              "two offsets the `latest` group read, and that it never read itself")


def _fence_post(result: OffsetExpiryResult) -> int:
    """One too many: the first offset read after the gap counted as skipped."""
    return _audited_skips(result) + 1


def _check_expires_after_stop(result: OffsetExpiryResult, fn) -> None:
    def predicted(protocol, idle_s, retention_s) -> float:
        seconds = called(fn, f"expires_after_stop({protocol!r}, {idle_s}, {retention_s})", protocol, idle_s,
                         retention_s)
        expect(is_number(seconds),
               f"expires_after_stop({protocol!r}, {idle_s}, {retention_s}) returned {seconds!r}, not a number of "
               "seconds")
        return float(seconds)

    slack, week, day = result.params["check_interval_ms"] / 1000 + 2, 7 * 86400, 86400
    for r in result.clock().to_dict("records"):   # this run's measurements
        seconds = predicted(r["protocol"], r["idle_before_stop_s"], result.retention_s)
        expect(abs(seconds - r["expired_after_stop_s"]) <= slack,
               f"{r['variant']} ({r['protocol']}, idle {r['idle_before_stop_s']:.0f} s before the stop): predicted "
               f"{seconds:g} s, its offsets went {r['expired_after_stop_s']:.1f} s after the stop")
    expect(predicted("consumer", 3 * day, week) == 4 * day,
           "a KIP-848 group idle 3 days before the stop, with a 7-day retention: its clock started at its last commit")
    expect(predicted("consumer", 8 * day, week) == 0,
           "a KIP-848 group idle 8 days before the stop: its retention has run out before the stop")
    expect(predicted("classic", 8 * day, week) == week,
           "a classic group idle 8 days before the stop: its clock starts when the group empties")


def _classic_clock_for_all(protocol, idle_s, retention_s):
    return retention_s


OffsetExpiryResult.exercises = {
    1: Exercise(
        check=_check_skipped, solution=_skipped, wrong=_fence_post,
        why="With its offsets gone, `latest` restarts at the end of each partition: everything produced while it "
            "was down lies between the last offset it read before the stop and the first it read after the restart. "
            "In each partition, every produced offset strictly between the lowest and the highest offset it read, "
            "and never read itself, was skipped (count `(partition, offset)` pairs, so the partitions do not mix). "
            "Back before its offsets expired, it resumes where it stopped and skips nothing."),
    2: Exercise(
        check=_check_expires_after_stop, solution=lambda result: expires_after_stop,
        wrong=lambda result: _classic_clock_for_all,
        why="A classic group's offsets wait one retention from the moment the group becomes empty, however long it "
            "sat idle before (KIP-211). A KIP-848 group's clock, as this lab measured it on Kafka 4.3.1 (section 5), "
            "is its last commit: the offsets go one retention after it, at once if that has passed when the group "
            "empties. So a KIP-848 service idle 3 days before a redeploy, with the 7-day default, has 4 days left; "
            "idle 8 days, none."),
}
