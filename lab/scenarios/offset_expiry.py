"""Seed 001, first problem: committed offsets expire long before the data does.

The seed: topic retention two weeks, `offsets.retention.minutes` 24 hours. A service that was
quiet for more than a day was redeployed, found no committed offset for its group, and
`auto.offset.reset=earliest` sent it back to the start of the topic.

Mechanism (Kafka 4.x group coordinator): every `offsets.retention.check.interval.ms` the
coordinator deletes committed offsets older than `offsets.retention.minutes`. For a classic
group the clock starts when the group becomes Empty (KIP-211); for a KIP-848 group
(`group.protocol=consumer`) it is the time of the last commit, checked once the group has
no member subscribed to the topic. On restart OffsetFetch finds nothing and the reset policy
decides: earliest re-reads everything retained, latest skips what arrived while the app was
down, error fails loudly.

This scenario shrinks a day to a minute: a real broker with `offsets.retention.minutes=1`
and a sweep every few seconds. Several consumer groups (one per variant, each a real Python
app in its own process, lab/apps/consumer_app.py) consume, commit and stop together; the
topic keeps receiving data; they restart after the offsets expired (one wait for all).
Beside them a Spark Structured Streaming query keeps its offsets in its checkpoint, and two
more show what `failOnDataLoss` does when topic retention deletes data they have not read.

`run_offset_expiry(**params)` is the one function the notebook, its widgets, the test and the
benchmark call. It validates every parameter (LabError) before anything starts.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster import KafkaCluster, kafka_cluster
from ..config import WORK_DIR
from ..errors import LabError
from ..generator import generate
from ..history import History
from ..processes import java_executable, spawn_python, wait_until

RESETS = ("earliest", "latest", "error")
PROTOCOLS = ("classic", "consumer")
APP_MODULE = "lab.apps.consumer_app"
EXPIRY_LOGGER = "org.apache.kafka.coordinator.group.OffsetMetadataManager"  # logs each expired offset at DEBUG


@dataclass(frozen=True)
class Variant:
    """One consumer group under test: its reset policy, protocol and when it comes back."""
    name: str
    reset: str                    # auto.offset.reset
    protocol: str | None          # None: the run's group_protocol
    restart: str                  # "window": after the offsets expired; "early": the control
    idle: bool = False            # quiet for idle_s before the stop (the expiry-clock probes)
    sink: str | None = None       # None, "plain" or "idempotent" output topic
    expect: str = "anomalies"     # what the audit should find: "anomalies" or "clean"
    claim: str = ""


VARIANTS = {v.name: v for v in [
    Variant("earliest", "earliest", None, "window", sink="plain",
            claim="re-reads everything still retained (the seed) and writes it again"),
    Variant("latest", "latest", None, "window",
            claim="silently skips what arrived while it was down"),
    Variant("error", "error", None, "window", expect="clean",
            claim="fails loudly; an operator resets the offsets; then nothing lost or repeated"),
    Variant("control", "earliest", None, "early", expect="clean",
            claim="downtime shorter than the retention: nothing happens"),
    Variant("idempotent", "earliest", None, "window", sink="idempotent", expect="clean",
            claim="re-reads, but the dedupe-by-id sink writes nothing twice"),
    Variant("idle-classic", "earliest", "classic", "window", idle=True,
            claim="expiry clock of a classic group that was quiet before it stopped"),
    Variant("idle-consumer", "earliest", "consumer", "window", idle=True,
            claim="expiry clock of a KIP-848 group that was quiet before it stopped"),
]}
SPARK_VARIANTS = {
    "spark-checkpoint": "offsets in the checkpoint: resumes exactly after the same window",
    "spark-strict": "failOnDataLoss=true: fails when retention deleted data it had not read",
    "spark-lenient": "failOnDataLoss=false: carries on past the deleted data (skips it)",
}
TRICKLE = 10          # records per batch after the restart (one per key)
DATA_LOSS_BATCH = 10  # records per step of the failOnDataLoss demo (read / deleted unread / new)


# ------------------------------------------------------------------ parameters

def broker_config(retention_minutes: int = 1, check_interval_ms: int = 2000) -> dict:
    """What the broker needs for a one-minute version of the seed's day."""
    return {"offsets.retention.minutes": str(retention_minutes),
            "offsets.retention.check.interval.ms": str(check_interval_ms),
            # the failOnDataLoss demo: topic retention acts within a second or two
            "log.retention.check.interval.ms": "1000",
            "log.initial.task.delay.ms": "1000"}


def validate(*, retention_minutes=1, check_interval_ms=2000, downtime_s=None, control_downtime_s=15,
             idle_s=20, messages_before=200, messages_while_down=100, partitions=2,
             group_protocol="classic", variants=None, spark=True, audit=True, progress=True, **unknown) -> dict:
    """Every parameter checked before anything starts; returns them normalised."""
    if unknown:
        raise LabError(f"Unknown parameter(s) {sorted(unknown)}; run_offset_expiry takes cluster plus "
                       "retention_minutes, check_interval_ms, downtime_s, control_downtime_s, idle_s, messages_before, "
                       "messages_while_down, partitions, group_protocol, variants, spark, audit, progress.")
    def integer(name, value, lo, hi, why=""):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) \
                or not lo <= value <= hi:
            raise LabError(f"{name} must be a whole number from {lo} to {hi}{why}; got {value!r}.")
        return int(value)

    retention_minutes = integer("retention_minutes", retention_minutes, 1, 60,
                                " (Kafka's minimum is 1; every minute is a minute of waiting)")
    check_interval_ms = integer("check_interval_ms", check_interval_ms, 500, 600000)
    retention_s = retention_minutes * 60
    if downtime_s is not None:
        if isinstance(downtime_s, bool) or not isinstance(downtime_s, (int, float)) or not 1 <= downtime_s <= 7200:
            raise LabError(f"downtime_s must be None (come back as soon as the offsets are gone) or "
                           f"1..7200 seconds; got {downtime_s!r}.")
        downtime_s = float(downtime_s)
    if isinstance(control_downtime_s, bool) or not isinstance(control_downtime_s, (int, float)) \
            or not 1 <= control_downtime_s < retention_s:
        raise LabError(f"control_downtime_s must be at least 1 s and shorter than the offset retention "
                       f"({retention_s} s), or it is no control; got {control_downtime_s!r}.")
    idle_s = integer("idle_s", idle_s, 0, 600)
    messages_before = integer("messages_before", messages_before, 1, 200000)
    messages_while_down = integer("messages_while_down", messages_while_down, 0, 200000)
    partitions = integer("partitions", partitions, 1, 3, " (the ten keys k0..k9 land on every partition of 1-3)")
    if group_protocol not in PROTOCOLS:
        raise LabError(f"group_protocol must be one of {PROTOCOLS} (KIP-848 is 'consumer'); got {group_protocol!r}.")
    names = list(VARIANTS) if variants is None else [variants] if isinstance(variants, str) else list(variants)
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise LabError(f"Unknown variant(s) {unknown}; choose from {list(VARIANTS)}.")
    if not names and not spark:
        raise LabError("Nothing to run: give at least one variant or spark=True.")
    return dict(retention_minutes=retention_minutes, check_interval_ms=check_interval_ms, downtime_s=downtime_s,
                control_downtime_s=float(control_downtime_s), idle_s=idle_s, messages_before=messages_before,
                messages_while_down=messages_while_down, partitions=partitions, group_protocol=group_protocol,
                variants=list(dict.fromkeys(names)), spark=bool(spark), audit=bool(audit), progress=bool(progress))


def check_cluster(cluster, retention_minutes: int, check_interval_ms: int) -> None:
    """A cluster passed in must already have the broker settings this run needs."""
    from confluent_kafka.admin import ConfigResource
    wanted = broker_config(retention_minutes, check_interval_ms)
    admin = cluster.admin()
    node = str(sorted(admin.list_topics(timeout=10).brokers)[0])
    resource = ConfigResource(ConfigResource.Type.BROKER, node)
    actual = admin.describe_configs([resource])[resource].result(timeout=15)
    wrong = {k: actual[k].value if k in actual else None for k, v in wanted.items()
             if k != "log.initial.task.delay.ms" and (k not in actual or actual[k].value != v)}
    if wrong:
        have = ", ".join(f"{k}={v}" for k, v in wrong.items())
        raise LabError(f"This cluster has {have}, but the run needs {', '.join(f'{k}={wanted[k]}' for k in wrong)}. "
                       "Start it with broker_config=offset_expiry.broker_config(...) for these values, "
                       "or pass cluster=None and the scenario starts its own broker.")


# ------------------------------------------------------------------ result

@dataclass
class OffsetExpiryResult:
    params: dict
    run_id: str
    t0: float                                   # epoch seconds: t = 0 in every table and figure
    events: object                              # pandas: t, variant, event, detail
    summary: object                             # pandas: one row per variant, the measured outcome
    offsets_before: object                      # pandas: group offsets just before the stop (AdminClient)
    offsets_after: object                       # pandas: the same groups just before the restart
    expiry: object                              # pandas: when each group's offsets vanished, per clock
    broker_log: list                            # coordinator lines about these groups' offsets
    errors: dict                                # variant -> the error it reported
    operator_action: dict                       # the reset an operator applied after the loud failure
    verdicts: dict = field(default_factory=dict)    # variant (or "a + b" audited together) -> Verdict
    audited_together: tuple | None = None          # (verdict key, variants) of the joint clean audit
    histories: dict = field(default_factory=dict)   # variant -> lab.history.History
    topic: str = ""
    notes: list = field(default_factory=list)
    seconds: float = 0.0

    def row(self, variant: str) -> dict:
        rows = self.summary[self.summary["variant"] == variant]
        if not len(rows):
            raise LabError(f"Variant {variant!r} was not part of this run ({list(self.summary['variant'])}).")
        return rows.iloc[0].to_dict()

    def figure(self):
        return timeline_figure(self)

    def counts(self, variant: str) -> dict:
        """The audit's counts for one variant (from its own audit or the joint clean one)."""
        if variant in self.verdicts:
            return dict(self.verdicts[variant].counts)
        if self.audited_together and variant in self.audited_together[1]:
            return dict(self.verdicts[self.audited_together[0]].counts)  # total 0: 0 for each member
        return {}

    def clock(self):
        return clock_observation(self)

    def as_record(self) -> dict:
        """JSON-safe measured results for lab.results.record()."""
        out = {"run_seconds": round(self.seconds, 1)}
        for r in self.summary.to_dict("records"):
            key = r["variant"].replace("-", "_")
            for col in ("reprocessed", "skipped", "duplicates", "lost"):
                if _known(r.get(col)):
                    out[f"{key}_{col}"] = int(r[col])
            out[f"{key}_error_seen"] = bool(r["error"])
            out[f"{key}_claim_holds"] = bool(r["claim_holds"])
        for r in self.clock().to_dict("records"):
            key = r["variant"].replace("-", "_")
            out[f"{key}_idle_before_stop_s"] = r["idle_before_stop_s"]
            out[f"{key}_expired_after_stop_s"] = r["expired_after_stop_s"]
            out[f"{key}_clock"] = r["clock"]
        first = self.first_reprocessing()
        if first is not None:
            out["first_reprocessing_after_stop_s"] = first
        return out

    def first_reprocessing(self) -> float | None:
        """Seconds from the stop to the first re-read of an already committed offset (any variant)."""
        stop = self.events[self.events["event"] == "stop"]["t"]
        times = [float(v.examples["reprocessed_after_reset"]["time"].min().timestamp())
                 for v in self.verdicts.values()
                 if v.counts.get("reprocessed_after_reset") and len(v.examples.get("reprocessed_after_reset", []))]
        if not times or not len(stop):
            return None
        return round(min(times) - self.t0 - float(stop.min()), 1)


# ------------------------------------------------------------------ the scenario

def run_offset_expiry(*, cluster=None, **params) -> OffsetExpiryResult:
    """Run every variant through one offset-expiry window and audit each.

    cluster             a running cluster with broker_config(retention_minutes, check_interval_ms),
                        or None to start one for this run
    retention_minutes   offsets.retention.minutes (the seed: 1440; Kafka's minimum: 1)
    check_interval_ms   offsets.retention.check.interval.ms (how often the coordinator sweeps)
    downtime_s          how long the apps stay down; None = until every group's offsets are gone
    control_downtime_s  downtime of the control group (shorter than the retention)
    idle_s              how long the two "idle-*" groups sit quiet before the common stop
    messages_before     records consumed and committed before the stop
    messages_while_down records produced while the apps are down
    partitions          partitions of the input topic
    group_protocol      "classic" or "consumer" (KIP-848) for the non-probe variants
    variants            names from VARIANTS (default: all)
    spark               also run the Spark Structured Streaming queries
    audit               run the Spark audit per variant (lab.audit)
    progress            live status line while waiting
    """
    p = validate(**params)
    own = cluster is None
    context = kafka_cluster(broker_config=broker_config(p["retention_minutes"], p["check_interval_ms"]),
                            name="offset-expiry") if own else nullcontext(cluster)
    with context as running:
        if not own:
            check_cluster(running, p["retention_minutes"], p["check_interval_ms"])
        return _Run(running, p).go()


class _Run:
    def __init__(self, cluster, p: dict):
        self.cluster, self.p = cluster, p
        self.tag = time.strftime("%H%M%S") + uuid.uuid4().hex[:4]
        self.run_id = f"offset-expiry-{self.tag}"
        self.folder = WORK_DIR / self.run_id
        self.topic = f"events-{self.tag}"
        self.aged_topic = f"aged-{self.tag}"
        self.variants = [VARIANTS[n] for n in p["variants"]]
        self.input = History(self.folder / "input", self.run_id)
        self.hist = {v.name: History(self.folder / v.name, self.run_id) for v in self.variants}
        if p["spark"]:
            self.hist.update({n: History(self.folder / n, self.run_id) for n in SPARK_VARIANTS})
        self.children, self.incarnation = {}, {}
        self.events, self.errors, self.notes, self.operator = [], {}, [], {}
        self.expired_at: dict[str, float] = {}
        self.show = _Progress(p["progress"])
        self.clean_together = None  # (verdict key, variants) when the clean variants were audited as one
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        self.t0 = time.time()

    # -------------------------------------------------------------- helpers
    def ev(self, variant: str, event: str, detail: str = "", at: float | None = None) -> None:
        self.events.append({"t": round((at or time.time()) - self.t0, 3), "variant": variant,
                            "event": event, "detail": detail})

    def group(self, v: Variant) -> str:
        return f"{v.name}-{self.tag}"

    def protocol(self, v: Variant) -> str:
        return v.protocol or self.p["group_protocol"]

    def output_topic(self, v: Variant) -> str | None:
        return f"out-{v.name}-{self.tag}" if v.sink else None

    def spawn(self, v: Variant, incarnation: int):
        if incarnation == 0:
            self.provision(v)
        self.incarnation[v.name] = incarnation
        args = ["--bootstrap", self.cluster.bootstrap, "--topic", self.topic, "--group", self.group(v),
                "--app", v.name, "--history", str(self.hist[v.name].folder), "--run-id", self.run_id,
                "--incarnation", str(incarnation), "--reset", v.reset, "--protocol", self.protocol(v)]
        if v.sink:
            args += ["--output-topic", self.output_topic(v)]
        if v.sink == "idempotent":
            args += ["--dedupe-db", str(self.folder / v.name / "processed-ids.sqlite")]
        root = str(Path(__file__).resolve().parents[2])  # the repo, so the child imports this lab
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        child = spawn_python(f"{v.name}#{incarnation}", APP_MODULE, args,
                             self.folder / v.name / f"app-{incarnation}.log", env=env)
        self.children[v.name] = child
        self.ev(v.name, "start" if incarnation == 0 else "restart", f"incarnation {incarnation}")
        return child

    def end_offsets(self, topic: str | None = None) -> dict[int, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec
        topic = topic or self.topic
        tps = [TopicPartition(topic, i) for i in range(self.p["partitions"] if topic == self.topic else 1)]
        futures = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=15)
        return {tp.partition: f.result().offset for tp, f in futures.items()}

    def committed(self, name: str, incarnation: int | None = None) -> dict[int, int]:
        """Highest committed offset per partition an app logged (in one incarnation, or all)."""
        df = self.hist[name].frame("committed")
        if not len(df):
            return {}
        if incarnation is not None:
            df = df[df["incarnation"] == incarnation]
        return {int(k): int(v) for k, v in df.groupby("partition")["offset"].max().items()}

    def caught_up(self, name: str) -> bool:
        have = self.committed(name, self.incarnation[name])
        return all(have.get(part, 0) >= end for part, end in self.end_offsets().items() if end > 0)

    def wait_caught_up(self, names, what: str, timeout: float = 120) -> None:
        for name in names:
            wait_until(lambda: self.caught_up(name), timeout, f"{name} to {what}", interval=0.3,
                       child=self.children[name])
            self.ev(name, "caught_up", f"committed {self.committed(name, self.incarnation[name])}")

    def group_offsets(self, variants) -> dict[str, dict[int, int | None]]:
        """Committed offsets per group, straight from the group coordinator (AdminClient)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
        futures = {v.name: self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group(v))],
                                                                  request_timeout=10)[self.group(v)]
                   for v in variants}
        out = {}
        for name, f in futures.items():
            try:
                tps = f.result().topic_partitions or []
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    continue  # a transient coordinator error: no answer for this group this time
                tps = []      # the group itself is gone, offsets and all
            if any(tp.error is not None for tp in tps):
                continue
            out[name] = {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in tps if tp.topic == self.topic}
        return out

    def offsets_frame(self, variants, moment: str):
        import pandas as pd
        rows = []
        def complete():
            seen = self.group_offsets(variants)
            return seen if len(seen) == len(variants) else None
        for name, parts in wait_until(complete, 30, "the group coordinator to list every group's offsets").items():
            v = VARIANTS[name]
            for part in range(self.p["partitions"]):
                rows.append({"moment": moment, "variant": name, "group": self.group(v), "partition": part,
                             "committed_offset": parts.get(part)})
        return pd.DataFrame(rows)

    # -------------------------------------------------------------- phases
    def go(self) -> OffsetExpiryResult:
        self.spark_side = None
        try:
            return self._go()
        finally:
            for child in self.children.values():
                child.kill()
            if self.spark_side is not None and self.spark_side.is_alive():
                self.spark_side.abort()
                self.spark_side.join(120)

    def _go(self) -> OffsetExpiryResult:
        import pandas as pd
        from confluent_kafka.admin import NewTopic
        p = self.p
        started = time.monotonic()
        debug_log = _enable_expiry_log(self.cluster)  # runs in the background (a JVM tool)
        topics = [NewTopic(self.topic, p["partitions"], 1)]
        topics += [NewTopic(self.output_topic(v), 1, 1) for v in self.variants if v.sink]
        if p["spark"]:
            topics.append(NewTopic(self.aged_topic, 1, 1))
        for f in self.admin.create_topics(topics, request_timeout=30).values():
            f.result()
        self.show.step(f"Run {self.run_id}: topic {self.topic}, {len(self.variants)} consumer group(s)"
                       + (" + Spark queries" if p["spark"] else ""))

        self.produce("before", p["messages_before"])
        spark_side = self.spark_side = _SparkSide(self) if p["spark"] else None
        if spark_side:
            spark_side.start()

        # 1. Everyone consumes and commits. The idle probes go first and then sit quiet.
        idle = [v for v in self.variants if v.idle]
        busy = [v for v in self.variants if not v.idle]
        for v in idle:
            self.spawn(v, 0)
        self.wait_caught_up([v.name for v in idle], "consume and commit the first batch")
        if idle:
            last = max(self.hist[v.name].frame("committed")["ts"].max() for v in idle)
            self.countdown(last + p["idle_s"], "idle groups sit quiet (members, nothing to commit)")
        if spark_side:  # before the others start, so their last commit stays close to the stop
            self.show.step("Waiting for the Spark queries' first run ...")
            spark_side.wait("ready")
        for v in busy:
            self.spawn(v, 0)
        self.wait_caught_up([v.name for v in busy], "consume and commit the first batch")

        # 2. Stop them all at once (a redeploy), then the topic keeps receiving data.
        offsets_before = self.offsets_frame(self.variants, "before the stop")
        for child in self.children.values():
            child.terminate()
        for v in self.variants:
            self.children[v.name].stop()
            self.ev(v.name, "stop", "SIGTERM: commit, leave the group, exit")
        stop_at = time.time()
        self.stop_at = stop_at
        self.produce("while down", p["messages_while_down"])
        if spark_side:
            spark_side.go("down")

        # 3. The one wait: restart the control early, the rest when their offsets are gone.
        offsets_after = self.wait_window(stop_at)

        # 4. Back up: the loud failure and the operator's action, then new data for everyone.
        window = [v for v in self.variants if v.restart == "window"]
        if any(v.name == "error" for v in window):
            self.handle_error_variant()
        running = [v.name for v in self.variants if self.children[v.name].alive()]
        self.trickle_until_read(running)
        self.wait_caught_up(running, "catch up with the end of the topic")
        if spark_side:
            spark_side.go("final")
            self.show.step("Spark: restarting the checkpointed query ...")
            spark_side.wait("done")
            self.errors.update(spark_side.errors)
        for name in running:
            self.children[name].stop()
            self.ev(name, "end", "stopped after catching up")
        self.show.done(f"All apps stopped; {time.monotonic() - started:.0f} s so far.")

        expiry = self.expiry_table()
        broker_log = self.broker_log(debug_log)
        self.fan_out_produced()
        verdicts = self.audit_all() if p["audit"] else {}
        result = OffsetExpiryResult(
            params=dict(p), run_id=self.run_id, t0=self.t0,
            events=pd.DataFrame(self.events).sort_values("t", kind="stable").reset_index(drop=True),
            summary=None, offsets_before=offsets_before, offsets_after=offsets_after, expiry=expiry,
            broker_log=broker_log, errors=self.errors, operator_action=self.operator, verdicts=verdicts,
            histories=self.hist, topic=self.topic, notes=self.notes, audited_together=self.clean_together,
            seconds=time.monotonic() - started)
        result.summary = summarize(result, self.variants, p["spark"])
        return result

    def produce(self, phase: str, n: int) -> None:
        """n records to the input topic, each logged as "produced" (the ground truth) once acknowledged."""
        if n <= 0:
            return
        gen = generate(self.cluster.bootstrap, self.topic, n, self.input, keys=10,
                       id_prefix=f"{self.run_id}-{phase.replace(' ', '')}-")
        if gen.produced != n:
            raise LabError(f"Only {gen.produced} of {n} records reached {self.topic} ({gen.failed} failed).")
        self.ev("input", "produce", f"{n} records ({phase})")

    def provision(self, v: Variant) -> None:
        """A group starts with a committed position at the beginning of the topic, like a service that
        has consumed it since it was created (so even reset=latest/error read the first batch). Done just
        before its first start: these offsets expire like any others (after retention, from this commit)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

        def provision() -> bool:
            request = ConsumerGroupTopicPartitions(self.group(v), [TopicPartition(self.topic, part, 0)
                                                                   for part in range(self.p["partitions"])])
            try:
                done = self.admin.alter_consumer_group_offsets([request], request_timeout=5)[self.group(v)].result()
            except KafkaException:  # a fresh broker creates __consumer_offsets on the first group request
                return False
            return all(tp.error is None for tp in done.topic_partitions)  # errors come per partition too

        wait_until(provision, 60, f"the group coordinator to accept offsets for {self.group(v)}", interval=1)

    def countdown(self, until: float, what: str) -> None:
        total = max(until - time.time(), 0)
        while time.time() < until:
            left = until - time.time()
            self.show.live(f"{_bar(total - left, total)} {what}: {left:4.0f} s left")
            time.sleep(min(1.0, max(left, 0)))
        self.show.done(f"{what}: done ({total:.0f} s)")

    def wait_window(self, stop_at: float):
        """Poll every group's committed offsets each second; restart each variant when due."""
        p = self.p
        retention_s = p["retention_minutes"] * 60
        # None: come back as soon as the offsets are gone; give up well after they should be.
        give_up = stop_at + retention_s + 3 * p["check_interval_ms"] / 1000 + 45
        due = {v.name: stop_at + (p["control_downtime_s"] if v.restart == "early" else p["downtime_s"] or 0)
               for v in self.variants}
        waiting = {v.name: v for v in self.variants}
        expected = retention_s + p["check_interval_ms"] / 1000 if p["downtime_s"] is None else p["downtime_s"]
        offsets_after = None
        while waiting:
            now = time.time()
            seen = self.group_offsets(list(waiting.values()))
            for name, parts in seen.items():
                if name not in self.expired_at and not any(o is not None for o in parts.values()):
                    self.expired_at[name] = now
                    self.ev(name, "offsets_expired", "no committed offset left for the group", at=now)
            window = [n for n, v in waiting.items() if v.restart == "window"]
            ready_window = window and (
                (p["downtime_s"] is None and (all(n in self.expired_at for n in window) or now >= give_up))
                or (p["downtime_s"] is not None and now >= stop_at + p["downtime_s"]))
            for name in list(waiting):
                v = waiting[name]
                if (v.restart == "early" and now >= due[name]) or (v.restart == "window" and ready_window):
                    if v.restart == "window" and offsets_after is None:
                        offsets_after = self.offsets_frame([w for w in self.variants if w.restart == "window"],
                                                           "before the restart")
                        missing = [n for n in window if n not in self.expired_at]
                        if missing and p["downtime_s"] is None:
                            self.notes.append(f"Offsets of {missing} were still there {now - stop_at:.0f} s after "
                                              "the stop; restarted anyway.")
                    self.spawn(v, 1)
                    del waiting[name]
            gone = ", ".join(f"{n} +{self.expired_at[n] - stop_at:.0f}s" for n in self.expired_at) or "none yet"
            self.show.live(f"{_bar(now - stop_at, expected)} down for {now - stop_at:3.0f} s of ~{expected:.0f} s; "
                           f"offsets gone: {gone}")
            time.sleep(max(0.0, 1.0 - (time.time() - now)))
        self.show.done(f"Wait over after {time.time() - stop_at:.0f} s; offsets gone: "
                       + (", ".join(f"{n} (+{t - stop_at:.1f} s)" for n, t in self.expired_at.items()) or "none"))
        if offsets_after is None:
            import pandas as pd
            offsets_after = pd.DataFrame(columns=["moment", "variant", "group", "partition", "committed_offset"])
        return offsets_after

    def handle_error_variant(self) -> None:
        """reset=error: wait for the loud exit, then do what an operator would: reset the group to
        the last offsets the app itself recorded as processed, and start it again."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        v = VARIANTS["error"]
        child = self.children["error"]
        if "error" not in self.expired_at:
            self.notes.append("The reset=error group still had its offsets at the restart: no failure to handle.")
            return
        try:
            wait_until(lambda: not child.alive(), 60, "the reset=error app to fail")
        except LabError:
            self.notes.append("The reset=error app did not fail within 60 s: its offsets had not expired.")
            return
        lines = child.grep(r"FATAL")
        if child.returncode() != 3 or not lines:
            raise LabError(f"The reset=error app exited with {child.returncode()} but not for a missing offset; "
                           f"log {child.log_path}:\n" + "\n".join(child.log().splitlines()[-10:]))
        self.errors["error"] = lines[0]
        self.ev("error", "error", lines[0][:120])
        # The app's own records of what it processed (here: its history) tell where to resume.
        target = self.committed("error", 0)
        request = ConsumerGroupTopicPartitions(self.group(v), [TopicPartition(self.topic, part, off)
                                                               for part, off in sorted(target.items())])
        done = self.admin.alter_consumer_group_offsets([request], request_timeout=15)[self.group(v)].result()
        failed = [f"{tp.partition}: {tp.error}" for tp in done.topic_partitions if tp.error is not None]
        if failed:
            raise LabError(f"The operator's offset reset for {self.group(v)} failed: {failed}")
        self.operator = {"group": self.group(v), "offsets": target,
                         "how": "AdminClient.alter_consumer_group_offsets to the last offsets the app committed"}
        self.ev("error", "operator_reset", f"offsets set to {target}")
        self.spawn(v, 2)

    def trickle_until_read(self, running: list[str], timeout: float = 120) -> None:
        """New records keep arriving after the restart until every app has read some in every
        partition: a group that skipped data only shows a gap once it reads past it."""
        start = self.end_offsets()
        deadline = time.monotonic() + timeout
        sent = 0
        while True:
            grown = {part for part, end in self.end_offsets().items() if end > start[part]}
            pending = [n for n in running if not grown or not self._read_since(n, start, grown)]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise LabError(f"{pending} read nothing new within {timeout:.0f} s after the restart; logs in "
                               f"{self.folder}.")
            self.produce(f"after{sent}", TRICKLE)
            sent += 1
            self.show.live(f"after the restart: {sent * TRICKLE} new records; waiting for {pending}")
            time.sleep(0.3)
        self.show.done(f"After the restart: {sent * TRICKLE} new records, read by every running app.")

    def _read_since(self, name: str, start: dict[int, int], grown: set[int]) -> bool:
        df = self.hist[name].frame("read")
        if not len(df):
            return False
        df = df[df["incarnation"] == self.incarnation[name]]
        parts = {int(part) for part, off in zip(df["partition"], df["offset"]) if off >= start.get(int(part), 0)}
        return parts >= grown

    def expiry_table(self):
        """When each group's offsets vanished, against both candidate clocks."""
        import pandas as pd
        rows = []
        stop = self.stop_at
        for v in self.variants:
            commits = self.hist[v.name].frame("committed")
            last_commit = commits[commits["incarnation"] == 0]["ts"].max() if len(commits) else None
            gone = self.expired_at.get(v.name)
            rows.append({
                "variant": v.name, "protocol": self.protocol(v), "idle_before_stop_s": round(stop - last_commit, 1),
                "last_commit_t": round(last_commit - self.t0, 1), "stop_t": round(stop - self.t0, 1),
                "expired_t": None if gone is None else round(gone - self.t0, 1),
                "expired_after_stop_s": None if gone is None else round(gone - stop, 1),
                "expired_after_last_commit_s": None if gone is None else round(gone - last_commit, 1)})
        return pd.DataFrame(rows)

    def broker_log(self, debug_log) -> list[str]:
        if not isinstance(self.cluster, KafkaCluster):
            self.notes.append("External cluster: the broker log is not readable from the lab.")
            return []
        ok = debug_log is not None and debug_log.wait(60) == 0
        if not ok:
            self.notes.append("Could not raise the broker's offset-expiry logger to DEBUG; only INFO lines shown.")
        pattern = (rf"(Expired offset for partition={re.escape(self.topic)}"
                   rf"|tombstone records while cleaning up group metadata"
                   rf"|\[Group(Id)? [a-z-]+-{self.tag}\].*(left|empty))")
        return [line for line in self.cluster.grep_log(pattern)
                if self.tag in line or "tombstone" in line][:200]

    def fan_out_produced(self) -> None:
        """Each variant's history gets the ground truth of the topic it read (the audit needs it)."""
        def truth(folder: Path) -> bytes:
            path = folder / "produced.jsonl"
            return path.read_bytes() if path.exists() else b""
        events, aged = truth(self.input.folder), truth(self.folder / "aged")
        for name, h in self.hist.items():
            if name in ("spark-strict", "spark-lenient"):
                if h.path("produced").exists():
                    continue  # written by the Spark side before its audit
                data = aged
            else:
                data = events
            if data:
                with open(h.path("produced"), "ab") as f:
                    f.write(data)

    def audit_all(self) -> dict:
        """The Spark audit (lab.audit) per variant that should show anomalies, and one audit over all
        the variants that should be clean together: counts are per group and never negative, so a
        total of 0 means 0 for each of them (if not, each is audited on its own to say which)."""
        from ..audit import audit
        verdicts = dict(self.spark_side.verdicts) if self.spark_side is not None else {}
        reset = ["reprocessed_after_reset", "skipped_after_reset"]
        clean = [v.name for v in self.variants if v.expect == "clean" and not v.sink]
        if self.p["spark"]:
            clean.append("spark-checkpoint")
        jobs = {}  # verdict key -> audit arguments
        for v in self.variants:
            if v.idle or v.name in clean:
                continue  # idle probes measure the expiry clock; the clean ones are audited together
            out = dict(history=self.hist[v.name], bootstrap=self.cluster.bootstrap, output_topic=self.output_topic(v))
            jobs[v.name] = dict(out, kinds=reset + (["duplicate", "lost"] if v.sink else []), expect="anomalies")
            if v.sink == "idempotent":  # its clean verdict is about harm: it re-reads, but writes nothing twice
                jobs[f"{v.name}: harm"] = dict(out, kinds=["duplicate", "lost"], expect="clean")
        if clean:
            key = " + ".join(clean)
            jobs[key] = dict(history=self.combined_history(clean, "audit-clean"), kinds=reset, expect="clean")
        self.show.step(f"Auditing on Spark: {', '.join(jobs)} ...")
        with ThreadPoolExecutor(2) as pool:  # small Spark jobs: two at a time keep both cores busy
            futures = {k: pool.submit(lambda a: audit(a.pop("history"), **a), dict(args)) for k, args in jobs.items()}
            verdicts.update({k: f.result() for k, f in futures.items()})
        if clean and verdicts[key].total:  # say which of them was not clean
            for name in clean:
                verdicts[name] = audit(self.hist[name], kinds=reset, expect="clean")
        elif clean:
            self.clean_together = (key, clean)
        order = [n for n in [*self.hist, *jobs] if n in verdicts]
        return {k: verdicts[k] for k in dict.fromkeys(order + list(verdicts))}

    def combined_history(self, names: list[str], folder: str) -> History:
        """One history holding several variants' rows (distinct groups) and one copy of the truth."""
        together = History(self.folder / folder, self.run_id)
        together.clear()
        for kind in ("read", "committed", "restart"):
            with open(together.path(kind), "ab") as out:
                for name in names:
                    if self.hist[name].path(kind).exists():
                        out.write(self.hist[name].path(kind).read_bytes())
        together.path("produced").write_bytes(self.input.path("produced").read_bytes())
        return together


# ------------------------------------------------------------------ Spark side

class _SparkSide(threading.Thread):
    """Spark queries over the same window, in a thread so the wait is shared.

    spark-checkpoint: a Structured Streaming query over the input topic whose offsets live in
    its checkpoint; stopped with the apps, restarted after their offsets expired.
    spark-strict / spark-lenient: the same kind of query over a second topic, once with
    failOnDataLoss=true and once false; while they are stopped, topic retention deletes
    records they have not read yet.
    """

    def __init__(self, run: _Run):
        super().__init__(name="offset-expiry-spark", daemon=True)
        self.run_ = run
        self.flags = {k: threading.Event() for k in ("ready", "down", "final", "done")}
        self.failure: BaseException | None = None
        self.errors: dict[str, str] = {}
        self.incarnation: dict[str, int] = {}
        self.verdicts: dict = {}
        self.aborted = False

    def abort(self) -> None:
        """The main run failed: let the thread finish without starting anything new."""
        self.aborted = True
        for flag in self.flags.values():
            flag.set()

    def go(self, flag: str) -> None:
        self.flags[flag].set()

    def wait(self, flag: str, timeout: float = 600) -> None:
        if not self.flags[flag].wait(timeout):
            raise LabError(f"The Spark side did not reach '{flag}' within {timeout:.0f} s.")
        if self.failure is not None:
            raise LabError(f"The Spark side failed: {self.failure}") from self.failure

    def run(self) -> None:
        try:
            self.body()
        except BaseException as exc:  # surfaced in the main thread by wait()
            self.failure = exc
        finally:
            for flag in self.flags.values():
                flag.set()

    def body(self) -> None:
        from ..spark import spark_session
        r = self.run_
        self.spark = spark_session()
        self.query("spark-checkpoint", r.topic)
        self.flags["ready"].set()

        self.flags["down"].wait()
        if self.aborted:
            return
        # The failOnDataLoss pair fits in the shared wait: read A, stop; B arrives and topic
        # retention deletes it unread; C arrives; restart.
        self.produce_aged("A")
        for name, strict in (("spark-strict", True), ("spark-lenient", False)):
            self.query(name, r.aged_topic, fail_on_data_loss=strict)
        self.produce_aged("B")
        end = r.end_offsets(r.aged_topic)[0]
        _set_retention(r.admin, r.aged_topic, "1000")
        wait_until(lambda: _earliest(r.admin, r.aged_topic) >= end, 60,
                   f"topic retention to delete the unread records of {r.aged_topic}")
        r.ev("spark-lenient", "retention_deleted", f"{r.aged_topic}: offsets below {end} deleted")
        r.ev("spark-strict", "retention_deleted", f"{r.aged_topic}: offsets below {end} deleted")
        _set_retention(r.admin, r.aged_topic, str(7 * 24 * 3600 * 1000))
        self.produce_aged("C")
        for name, strict in (("spark-strict", True), ("spark-lenient", False)):
            self.query(name, r.aged_topic, fail_on_data_loss=strict)
        if r.p["audit"]:  # done with these two: audit them now, while the consumers are still down
            from ..audit import audit
            for name in ("spark-strict", "spark-lenient"):
                h = r.hist[name]
                h.path("produced").write_bytes((r.folder / "aged" / "produced.jsonl").read_bytes())
                self.verdicts[name] = audit(h, kinds=["reprocessed_after_reset", "skipped_after_reset"],
                                            expect="anomalies" if name == "spark-lenient" else "clean")

        self.flags["final"].wait()
        if self.aborted:
            return
        self.query("spark-checkpoint", r.topic)

    def produce_aged(self, phase: str) -> None:
        r = self.run_
        gen = generate(r.cluster.bootstrap, r.aged_topic, DATA_LOSS_BATCH, History(r.folder / "aged", r.run_id),
                       keys=10, id_prefix=f"{r.run_id}-aged{phase}-")
        if gen.produced != DATA_LOSS_BATCH:
            raise LabError(f"Producing to {r.aged_topic} failed ({gen.failed} failures).")

    def query(self, name: str, topic: str, fail_on_data_loss: bool = True) -> None:
        """One availableNow run of a checkpointed streaming query: reads what is new, stops.

        Records land in a parquet sink (with the batch time); the offsets each batch ends at come
        from the query's progress, i.e. what Spark wrote to its checkpoint.
        """
        from pyspark.sql import functions as F
        r = self.run_
        inc = self.incarnation[name] = self.incarnation.get(name, -1) + 1
        h = r.hist[name]
        h.log("restart", app=name, incarnation=inc)
        r.ev(name, "start" if inc == 0 else "restart", f"incarnation {inc}")
        sink = r.folder / name / "sink"
        stream = (self.spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", r.cluster.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("failOnDataLoss", str(fail_on_data_loss).lower()).load()
                  .select(F.get_json_object(F.col("value").cast("string"), "$.id").alias("id"),
                          "partition", "offset", F.current_timestamp().cast("double").alias("ts"),
                          F.lit(inc).alias("incarnation")))
        query = (stream.writeStream.format("parquet").option("path", str(sink))
                 .option("checkpointLocation", str(r.folder / name / "checkpoint"))
                 .trigger(availableNow=True).start())
        if fail_on_data_loss and inc > 0:  # the expected failure: keep Spark's stack traces out of the output
            self.spark.sparkContext.setLogLevel("OFF")
        try:
            query.awaitTermination()
        except Exception as exc:  # StreamingQueryException: the query stopped on an error
            message = _spark_error(exc)
            self.errors[name] = message
            r.ev(name, "error", message[:120])
        finally:
            self.spark.sparkContext.setLogLevel("ERROR")
        progress = [_as_dict(pr) for pr in query.recentProgress]
        rows = []
        if sink.exists() and any(sink.glob("*.parquet")):
            rows = self.spark.read.parquet(str(sink)).filter(F.col("incarnation") == inc).collect()
        h.log_many("read", [{"app": name, "incarnation": inc, "group": f"checkpoint:{name}", "topic": topic,
                             "partition": row["partition"], "offset": row["offset"], "id": row["id"],
                             "ts": row["ts"]} for row in rows])
        for pr in progress:  # the offsets the checkpoint recorded after each batch
            if not pr.get("numInputRows"):
                continue
            done = _epoch(pr["timestamp"]) + pr.get("batchDuration", 0) / 1000
            ends = json.loads(pr["sources"][0]["endOffset"]) if isinstance(pr["sources"][0]["endOffset"], str) \
                else pr["sources"][0]["endOffset"]
            h.log_many("committed", [{"app": name, "incarnation": inc, "group": f"checkpoint:{name}",
                                      "topic": topic, "partition": int(part), "offset": int(off), "ts": done}
                                     for part, off in ends.get(topic, {}).items()])
        r.ev(name, "end", f"read {len(rows)} record(s)")


def _as_dict(progress) -> dict:
    if isinstance(progress, dict):
        return progress
    return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)


def _epoch(iso: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _spark_error(exc) -> str:
    text = str(exc)
    found = [m.group(0).strip() for m in re.finditer(r"(Some data may have been lost[^\n]*|Reason: [^\n]*)", text)]
    return " ".join(found) if found else text.splitlines()[0][:300]


def _set_retention(admin, topic: str, ms: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", ms, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res], request_timeout=15)[res].result()


def _earliest(admin, topic: str) -> int:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=10)[tp].result().offset


def _enable_expiry_log(cluster):
    """Raise the coordinator's expiry logger to DEBUG on every node (dynamic broker-loggers config),
    so the broker log names each offset it expires. Returns the running tool process, or None."""
    if not isinstance(cluster, KafkaCluster):
        return None
    cp = os.pathsep.join(map(str, cluster.classpath))
    procs = []
    for node in cluster.alive_nodes():
        argv = [java_executable(), "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", cp, "kafka.admin.ConfigCommand",
                "--bootstrap-server", cluster.bootstrap, "--entity-type", "broker-loggers",
                "--entity-name", str(node), "--alter", "--add-config", f"{EXPIRY_LOGGER}=DEBUG"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return _AllOf(procs)


class _AllOf:
    def __init__(self, procs):
        self.procs = procs

    def wait(self, timeout):
        try:
            return max([p.wait(timeout) for p in self.procs] or [0])
        except subprocess.TimeoutExpired:
            for p in self.procs:
                p.kill()
            return None


# ------------------------------------------------------------------ summary and figures

def _known(value) -> bool:
    import pandas as pd
    return value is not None and not pd.isna(value)  # not None, NaN or <NA>


def clock_observation(result: OffsetExpiryResult):
    """For each group whose offsets vanished: which clock explains when, given how long it sat idle.

    If the clock starts when the group empties (classic, KIP-211), offsets go `retention` after
    the stop. If it is the last commit (KIP-848 groups), they go at the first sweep after both
    the stop and last commit + retention. The sweep adds up to check_interval_ms either way.
    """
    import pandas as pd
    retention = result.params["retention_minutes"] * 60
    slack = result.params["check_interval_ms"] / 1000 + 2
    rows = []
    for r in result.expiry.to_dict("records"):
        if not _known(r["expired_after_stop_s"]):
            continue
        if_empty = float(retention)
        if_commit = max(0.0, retention - r["idle_before_stop_s"])
        seen = r["expired_after_stop_s"]
        if abs(if_empty - if_commit) < slack:
            clock = "either (idle too short to tell)"
        elif abs(seen - if_commit) < abs(seen - if_empty):
            clock = "last commit" if abs(seen - if_commit) <= slack else "neither (closer to last commit)"
        else:
            clock = "group empty" if abs(seen - if_empty) <= slack else "neither (closer to group empty)"
        rows.append({"variant": r["variant"], "protocol": r["protocol"], "idle_before_stop_s": r["idle_before_stop_s"],
                     "expired_after_stop_s": seen, "predicted_if_clock_is_group_empty_s": round(if_empty, 1),
                     "predicted_if_clock_is_last_commit_s": round(if_commit, 1), "clock": clock})
    return pd.DataFrame(rows)


def summarize(result: OffsetExpiryResult, variants, spark: bool):
    """One row per variant: what it measured, and whether that is what the variant claims."""
    import pandas as pd
    rows = []
    stop = result.events[result.events["event"] == "stop"]["t"]
    stop_t = float(stop.min()) if len(stop) else None
    for v in variants:
        restarts = result.events[(result.events["variant"] == v.name) & (result.events["event"] == "restart")]["t"]
        counts = result.counts(v.name)
        row = {"variant": v.name, "group.protocol": result.expiry.set_index("variant").loc[v.name, "protocol"],
               "auto.offset.reset": v.reset,
               "downtime_s": round(float(restarts.min()) - stop_t, 1) if len(restarts) and stop_t is not None else None,
               "offsets_expired": v.name in set(result.expiry.dropna(subset=["expired_t"])["variant"]),
               "reprocessed": counts.get("reprocessed_after_reset"), "skipped": counts.get("skipped_after_reset"),
               "duplicates": counts.get("duplicate"), "lost": counts.get("lost"),
               "error": result.errors.get(v.name, ""), "claim": v.claim}
        row["claim_holds"] = _claim_holds(v.name, row)
        rows.append(row)
    if spark:
        for name, claim in SPARK_VARIANTS.items():
            counts = result.counts(name)
            row = {"variant": name, "group.protocol": "(none: checkpoint)", "auto.offset.reset": "(checkpoint)",
                   "downtime_s": None, "offsets_expired": None,
                   "reprocessed": counts.get("reprocessed_after_reset"), "skipped": counts.get("skipped_after_reset"),
                   "duplicates": None, "lost": None, "error": result.errors.get(name, ""), "claim": claim}
            row["claim_holds"] = _claim_holds(name, row)
            rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("reprocessed", "skipped", "duplicates", "lost"):  # whole numbers, or <NA> when not audited
        df[col] = df[col].astype("Int64")
    return df


def _claim_holds(name: str, r: dict) -> bool:
    """Whether the measured numbers show what the variant is there to show."""
    rep, skip, dup = r["reprocessed"], r["skipped"], r["duplicates"]
    if name.startswith("idle-"):  # clock probes: the claim is that their offsets did vanish
        return bool(r["offsets_expired"])
    if not _known(rep) or not _known(skip):
        return False
    return {
        "earliest": lambda: rep > 0 and skip == 0 and (dup or 0) > 0,
        "latest": lambda: skip > 0 and rep == 0,
        "error": lambda: bool(r["error"]) and rep == 0 and skip == 0,
        "control": lambda: rep == 0 and skip == 0 and not r["offsets_expired"],
        "idempotent": lambda: rep > 0 and dup == 0 and r["lost"] == 0,
        "spark-checkpoint": lambda: rep == 0 and skip == 0,
        "spark-strict": lambda: bool(r["error"]) and not skip,
        "spark-lenient": lambda: skip > 0 and not r["error"],
    }[name]()


def timeline_figure(result: OffsetExpiryResult):
    """Plotly: one row per variant; reads coloured by incarnation, commits, stop, expiry, restart, errors."""
    import plotly.graph_objects as go
    fig = go.Figure()
    names = list(result.summary["variant"])[::-1]
    colors = {0: "#4c78a8", 1: "#f58518", 2: "#54a24b"}
    for name in names:
        h = result.histories[name]
        reads = h.frame("read")
        if len(reads):
            for inc, part in reads.groupby("incarnation"):
                label = {0: "read (first run)", 1: "read (after restart)", 2: "read (after operator reset)"}[int(inc) if inc < 3 else 2]
                fig.add_scatter(x=part["ts"] - result.t0, y=[name] * len(part), mode="markers",
                                marker=dict(size=5, color=colors.get(int(inc), "#54a24b"), opacity=0.5,
                                            symbol="line-ns-open"),
                                name=label, legendgroup=label, showlegend=False,
                                customdata=part[["partition", "offset"]],
                                hovertemplate=f"{name}: read p%{{customdata[0]}} @%{{customdata[1]}}<extra></extra>")
        commits = h.frame("committed")
        if len(commits):
            fig.add_scatter(x=commits["ts"] - result.t0, y=[name] * len(commits), mode="markers",
                            marker=dict(size=7, color="black", symbol="line-ns"), name="commit",
                            legendgroup="commit", showlegend=False, hoverinfo="skip")
    marks = {"stop": ("square", "#888"), "offsets_expired": ("star", "#e45756"), "restart": ("triangle-right", "#f58518"),
             "error": ("x", "#b00"), "operator_reset": ("diamond", "#54a24b"), "retention_deleted": ("star", "#9d755d")}
    for event, (symbol, color) in marks.items():
        ev = result.events[(result.events["event"] == event) & result.events["variant"].isin(names)]
        if len(ev):
            fig.add_scatter(x=ev["t"], y=ev["variant"], mode="markers", name=event.replace("_", " "),
                            marker=dict(size=13, symbol=symbol, color=color, line=dict(width=1, color="black")),
                            text=ev["detail"], hovertemplate="%{y}: %{text} at %{x:.1f} s<extra></extra>")
    for label, color in (("read (first run)", colors[0]), ("read (after restart)", colors[1]),
                         ("read (after operator reset)", colors[2]), ("commit", "black")):
        fig.add_scatter(x=[None], y=[None], mode="markers", name=label,
                        marker=dict(size=9, color=color, symbol="line-ns-open" if "read" in label else "line-ns",
                                    line=dict(width=2, color=color)))
    stop = result.events[result.events["event"] == "stop"]["t"]
    if len(stop):
        retention = result.params["retention_minutes"] * 60
        fig.add_vrect(x0=float(stop.min()), x1=float(stop.min()) + retention, fillcolor="#e45756", opacity=0.06,
                      line_width=0, annotation_text=f"offsets.retention.minutes={result.params['retention_minutes']}",
                      annotation_position="top left")
    fig.update_layout(title="Offset expiry: every variant through the same window", height=140 + 42 * len(names),
                      xaxis_title="seconds since the run began", yaxis=dict(categoryorder="array", categoryarray=names),
                      margin=dict(l=120, r=20, t=60, b=50), legend=dict(orientation="h", y=-0.2))
    return fig


def clock_figure(result: OffsetExpiryResult):
    """Plotly: for the idle probes, when the offsets vanished against the two candidate clocks."""
    import plotly.graph_objects as go
    df = result.expiry.dropna(subset=["expired_t"])
    fig = go.Figure()
    fig.add_bar(y=df["variant"], x=df["expired_after_stop_s"], orientation="h", name="after the group emptied (stop)")
    fig.add_bar(y=df["variant"], x=df["expired_after_last_commit_s"], orientation="h", name="after the last commit")
    retention = result.params["retention_minutes"] * 60
    fig.add_vline(x=retention, line_dash="dash", annotation_text=f"retention {retention} s")
    fig.update_layout(barmode="group", title="Offsets vanished ... seconds after each candidate clock start",
                      xaxis_title="seconds", height=120 + 45 * len(df), margin=dict(l=120, r=20, t=60, b=50))
    return fig


# ------------------------------------------------------------------ progress and panel

def _bar(done: float, total: float, width: int = 24) -> str:
    frac = 1.0 if total <= 0 else min(max(done / total, 0.0), 1.0)
    filled = int(round(frac * width))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


class _Progress:
    """A live status line: updated in place in a notebook, printed every few seconds elsewhere."""

    def __init__(self, enabled: bool):
        self.enabled, self.handle, self.last = enabled, None, 0.0
        try:
            from IPython import get_ipython
            self.notebook = getattr(get_ipython(), "kernel", None) is not None
        except ImportError:
            self.notebook = False

    def step(self, text: str) -> None:
        if self.enabled:
            self.handle = None
            print(text, flush=True)

    def live(self, text: str) -> None:
        if not self.enabled:
            return
        if self.notebook:
            from IPython.display import display
            if self.handle is None:
                self.handle = display({"text/plain": text}, raw=True, display_id=True)
            else:
                self.handle.update({"text/plain": text}, raw=True)
        elif time.monotonic() - self.last > 5:
            self.last = time.monotonic()
            print(text, flush=True)

    def done(self, text: str) -> None:
        if not self.enabled:
            return
        if self.notebook and self.handle is not None:
            self.handle.update({"text/plain": text}, raw=True)
            self.handle = None
        else:
            print(text, flush=True)


def panel(cluster=None, **defaults):
    """ipywidgets (lab.widgets.panel): retention, downtime, reset policy, protocol, records while down;
    Run re-runs one variant plus the control (no Spark) and redraws. Reuses `cluster` when its retention
    matches the chosen one (pass cluster_retention_minutes); otherwise the run starts its own broker."""
    import ipywidgets as w
    from IPython.display import display
    from ..widgets import panel as widget_panel
    base = dict(retention_minutes=1, downtime_s=75, group_protocol="classic", messages_while_down=100)
    base.update(defaults)
    on_cluster = base.get("cluster_retention_minutes", base["retention_minutes"])
    controls = {
        "retention_minutes": w.IntSlider(value=base["retention_minutes"], min=1, max=5, description="retention min"),
        "downtime_s": w.IntSlider(value=int(base["downtime_s"]), min=5, max=400, step=5, description="downtime s"),
        "reset": w.Dropdown(options=list(RESETS), value="earliest", description="reset policy"),
        "group_protocol": w.Dropdown(options=list(PROTOCOLS), value=base["group_protocol"], description="protocol"),
        "messages_while_down": w.IntSlider(value=base["messages_while_down"], min=0, max=2000, step=50,
                                           description="msgs while down"),
    }

    def run(retention_minutes, downtime_s, reset, group_protocol, messages_while_down):
        same = cluster is not None and retention_minutes == on_cluster
        if not same:
            print(f"Starting a broker with offsets.retention.minutes={retention_minutes} for this run ...")
        return run_offset_expiry(cluster=cluster if same else None, retention_minutes=retention_minutes,
                                 downtime_s=downtime_s, group_protocol=group_protocol,
                                 messages_while_down=messages_while_down, variants=[reset, "control"],
                                 messages_before=100, spark=False)

    def show(result):
        display(result.summary[["variant", "group.protocol", "auto.offset.reset", "downtime_s", "offsets_expired",
                                "reprocessed", "skipped", "error"]])
        result.figure().show()

    return widget_panel(controls, run, show, title="Offset expiry: tune and re-run")
