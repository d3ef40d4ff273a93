"""Lesson 01, a quiet service comes back: every consumer-group variant (lab/apps/consumer_app.py, one process and
one group each) and the Spark queries (offset_expiry_spark) go through one shared downtime; the committed offsets
are snapshot with AdminClient and each variant is audited on Spark. What it measured is in offset_expiry_report;
its exercises in exercises.
"""
from __future__ import annotations

import re
import time

from ...audit import RESET_KINDS
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param, Run, lab_lines
from ...toolbox.admin import committed_offsets, group_offsets, set_group_offsets, topic_offsets
from ...toolbox.apps import stop_together
from ...toolbox.lesson import Lesson
from ...toolbox.memory import PYTHON_APP_MB
from ...toolbox.streaming import audit_many
from ...record.generator import generate
from ...record.history import History
from .exercises import EXERCISES
from .offset_expiry_report import (RESTART_ANSWERS, VARIANTS, OffsetExpiryResult, Variant, asks_clocks,
                                   clock_answers, measured_answer)
from .offset_expiry_spark import SPARK_VARIANTS, SparkQueries

APP_MODULE = "lab.apps.consumer_app"
TRICKLE = 10          # records per batch after the restart (one per key)

PARAMS = [
    Param("retention_minutes", 1, "offsets.retention.minutes (the source's cluster: 1440 = 24 h)", lo=1, hi=60,
          unit="min",
          why="Kafka's minimum is 1; every minute is a minute of waiting"),
    Param("check_interval_ms", 1000, "offsets.retention.check.interval.ms: how often the coordinator sweeps",
          lo=500, hi=600000, unit="ms", why="a sweep more often than twice a second only loads the broker"),
    Param("downtime_s", None, "how long the groups stay down", lo=1, hi=7200, unit="s",
          none="a little longer than the retention (at most the retention, three sweeps and 45 s)"),
    Param("early_downtime_s", 15, "how long the `early` group stays down", lo=1, hi=7200, unit="s"),
    Param("idle_s", 10, "how long the idle-* groups sit quiet, still members, before the stop", lo=0, hi=600,
          unit="s"),
    Param("messages_before", 200, "records consumed and committed before the stop", lo=1, hi=200000),
    Param("messages_while_down", 100, "records produced while the groups are down", lo=0, hi=200000),
    Param("partitions", 2, "partitions of the input topic", lo=1, hi=3,
          why="the ten keys k0..k9 must land on every partition"),
    Param("group_protocol", "classic", "group.protocol of the main groups: classic (the original protocol) or consumer (the newer one, KIP-848)",
          choices=("classic", "consumer")),
    Param("variants", list(VARIANTS), "the consumer groups to run", choices=tuple(VARIANTS)),
    Param("spark", True, "also run the Spark Structured Streaming queries"),
]


def _something_to_run(p: dict) -> str | None:
    return None if p["variants"] or p["spark"] else "Nothing to run: choose a variant or SPARK=True."




def needs(p: dict) -> dict:
    """A one-minute version of the source's day; topic retention acts within a second (failOnDataLoss)."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={
        "offsets.retention.minutes": str(p["retention_minutes"]),
        "offsets.retention.check.interval.ms": str(p["check_interval_ms"]),
        "log.retention.check.interval.ms": "1000", "log.initial.task.delay.ms": "1000"})




def question(p: dict) -> tuple:
    """The Predict step: when each idle probe's committed offsets are gone after the stop (both probes run); else,
    where the `earliest` group starts reading when it comes back."""
    if asks_clocks(p):
        down = "a little longer than the retention" if p["downtime_s"] is None else f"{p['downtime_s']:g} s"
        return (f"Two groups read and commit, then sit quiet {p['idle_s']:g} s, still members with nothing new to "
                f"read, then stop and stay down {down}: `idle-classic` on the classic group protocol, "
                f"`idle-consumer` on the consumer protocol (KIP-848). offsets.retention.minutes is "
                f"{p['retention_minutes']} min, and the broker checks every {p['check_interval_ms']:,} ms. How "
                "long after the stop does each group lose its committed offsets?",
                tuple(dict.fromkeys(clock_answers(p).values())))
    down = (f"a little longer than offsets.retention.minutes ({p['retention_minutes']} min)"
            if p["downtime_s"] is None else f"{p['downtime_s']:g} s, with offsets.retention.minutes = "
            f"{p['retention_minutes']} min")
    return ("The groups commit what they read, then stop together. The `earliest` group (auto.offset.reset="
            f"earliest) stays down {down}, while the topic keeps its records for days. When it comes back, where "
            "does it start reading?", RESTART_ANSWERS)


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
        self.stopped = {}   # variant -> when it stopped (the idle probes on their own clock, the rest together)
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
        self.start(self.variants)   # every group at once, beside the Spark queries' first run
        self.snapshot(self.variants, "before the stop")
        if idle := [v for v in self.variants if v.idle]:
            # the idle probes stop on their own clock: from their last commit they sit quiet IDLE_S, as the
            # question says, however long Spark's first run takes
            last = max(max(r["ts"] for r in self.commits(v.name)) for v in idle)
            run.countdown("idle groups sit quiet (members, nothing to commit)", until=last + p["idle_s"])
            self.stop(idle)
        if ready:
            run.wait(lambda: ready.done, 600, "the Spark queries' first run")
            ready.result()
        run.phase("stop every app at once (a redeploy); the topic keeps receiving data")
        self.stop([v for v in self.variants if not v.idle])
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

    def stop(self, variants) -> None:
        stop_together(self.apps[v.name] for v in variants)
        for v in variants:
            self.stopped[v.name] = time.time()
            self.run.event(v.name, "stop", tone="fault", detail="SIGTERM: leave the group, exit")

    def start(self, variants) -> None:
        for v in variants:
            self.spawn(v, 0)
        self.wait_caught_up([v.name for v in variants], "consume and commit the first batch")

    def spawn(self, v: Variant, inc: int) -> None:
        if inc == 0:  # a position at the start of the topic, like a service that has read it since it was created
            set_group_offsets(self.run, self.admin, self.group[v.name], self.topic,
                              {part: 0 for part in range(self.p["partitions"])})
        self.inc[v.name] = inc
        settings = {"bootstrap.servers": self.run.bootstrap, "lab.topic": self.topic,
                    "lab.group": self.group[v.name], "lab.app": v.name, "lab.history": self.hist[v.name].folder, "lab.run.id": self.run.id,
                    "lab.incarnation": inc, "lab.reset": v.reset, "lab.protocol": v.protocol or self.p["group_protocol"]}
        if v.sink:
            settings["lab.output.topic"] = self.out[v.name]
        if v.sink == "idempotent":
            settings["lab.dedupe.db"] = self.run.folder / v.name / "ids.sqlite"
        self.apps[v.name] = self.run.spawn_python(f"{v.name}-{inc}", APP_MODULE, settings)
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
        p, stopped, retention = self.p, self.stopped, self.p["retention_minutes"] * 60
        give_up = retention + 3 * p["check_interval_ms"] / 1000 + 45   # DOWNTIME_S None: offsets should be gone
        due = {v.name: stopped[v.name] + (p["early_downtime_s"] if v.restart == "early" else p["downtime_s"] or give_up)
               for v in self.variants}
        waiting, restarts = {v.name: v for v in self.variants}, []
        self.run.phase("down: " + (f"{p['downtime_s']:g} s" if p["downtime_s"] else "until the offsets are gone")
                       + f" (retention {retention} s)")

        def poll() -> bool:
            now = time.time()
            for name, parts in self.group_offsets(list(waiting.values())).items():
                if name not in self.expired and not any(o is not None for o in parts.values()):
                    self.expired[name] = now
                    self.run.say(f"{name}: committed offsets gone {now - stopped[name]:.1f} s after the stop")
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
        first = min(stopped.values())
        self.run.timeline.band("apps down", first, restarts[0], tone="fault")
        self.run.timeline.band(f"offsets.retention.minutes={p['retention_minutes']}", first, first + retention)

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
            stopped = self.stopped[v.name]
            facts[v.name] = {
                "protocol": v.protocol or self.p["group_protocol"], "reset": v.reset,
                "idle_before_stop_s": round(stopped - max(r["ts"] for r in self.commits(v.name, 0)), 1),
                "expired_after_stop_s": round(self.expired[v.name] - stopped, 1) if v.name in self.expired else None,
                "downtime_s": round(self.run.timeline.first(v.name, "restart").t - (stopped - self.run.t0), 1),
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




def every_variant(lab: Run, p: dict) -> OffsetExpiryResult:
    """Every chosen variant through one shared downtime; each audited on Spark from what it read."""
    return _Experiment(lab, p).go()


def groups_at_once(p: dict) -> int:
    # one consumer process per variant: all run until the one shared stop, and come back beside each other
    return len(p["variants"])


# The Mitigate step: the source's two groups (earliest, latest) again, with the learner's fix: a downtime within the
# retention, or a retention longer than the downtime.
lesson = Lesson("offset_expiry", "A quiet service comes back", params=PARAMS, rules=[_something_to_run],
                needs=needs, body=every_variant, question=question, measured_answer=measured_answer,
                exercises=EXERCISES, apps=(APP_MODULE,), spark_audit=True, apps_at_once=groups_at_once,
                app_mb=PYTHON_APP_MB,
                mitigate_base={"variants": ["earliest", "latest"], "spark": False})
