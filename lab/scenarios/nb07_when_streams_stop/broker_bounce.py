"""Seed 002, "Streams may die, a lot": a broker goes down for a while, and a Kafka Streams app at an old version
dies ("All stream threads have died. The instance will be in error state and should be closed.") where a newer
one rides it out: on 4.3.1, measured, at a price (records lost under at-least-once, see below).

One lesson of notebook 07 (the part interface: PARAMS, RULES, needs, run_lesson -> Outcome). On 3 embedded
brokers, one pass-through app (lab/java/BounceApp.java, at-least-once, no state store) per BOUNCE_APPS variant
reads an input topic that stays available and writes its own output topic, whose partitions all lead on the
broker that goes down (BOUNCE_BROKERS "leader"; "all": the whole cluster goes down; "listener": the leader comes
back at once but without the apps' listener, a rolling restart whose server.properties lost it, and is restarted
with it after BOUNCE_DOWN_S). The apps reach the brokers through a listener of their own, APPS, so a leader without
it answers nothing to them: their metadata says LISTENER_NOT_FOUND ("partitions have leader brokers without a
matching listener"), deterministically. With BOUNCE_REPLICATION 1 those partitions have no reachable leader for
BOUNCE_DOWN_S; with 3 their leadership moves to a follower.
    2.7 and before  a send that outlives delivery.timeout.ms kills the stream thread: the client ends in ERROR
    2.8+            KIP-572: the task is retried until task.timeout.ms passes; then the KIP-671 handler decides:
                    shutdown_client (the default: the client ends in ERROR) or replace_thread (a new thread).
                    Measured on 4.3.1: an expired send makes the task TaskCorrupted, closed dirty and revived from
                    its last commit, again and again, so task.timeout.ms is never reached; and with two tasks on
                    one thread, records of the task whose failed send went unreported were lost (the audit: the
                    thread's tasks share one send error since KAFKA-16903, read in RecordCollectorImpl).
The apps' own LAB lines give their states over time (client and threads), their log lines are quoted, and the
Spark audit compares each app's output with what the generator produced, up to the offsets the app committed:
`lost` (committed past but never written) and `duplicate` (written twice, at-least-once's redo).
"""
from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, field

from ...cluster.versions import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import Param, grep
from ...experiment.apps import check_jvms, stop_together
from ...experiment.checks import build_streams_program, check_version
from ...generator import generate
from ...history import History
from ...programs import JavaProgram

MAIN, SOURCES = "BounceApp", ["BounceApp.java", "Lab.java"]
HANDLERS = ("shutdown_client", "replace_thread")
KIP_671 = (2, 8, 0)        # StreamsUncaughtExceptionHandler, and KIP-572's retries of a timed-out task
KIP_679 = (3, 0, 0)        # the producer's default acks went from 1 to all
OLDEST = (2, 1, 0)         # Kafka 4 brokers refuse clients older than 2.1 (KIP-896)
VARIANT = re.compile(r"^(\d+\.\d+\.\d+)(?:/(\w+))?$")
APPS_LISTENER = "APPS"     # the apps' own listener on every broker (lab.cluster.kraft: extra_listener)
REQUEST_TIMEOUT_MS = 5000  # the producer's request.timeout.ms: a request to a broker that went away fails fast
RECOVERY_S = 15            # watched after the brokers come back: their restart (~8 s here) and the apps' recovery
RESTART_S = 10             # "listener": the extra restart that puts the listener back
DEAD_STATES = ("ERROR", "PENDING_ERROR", "NOT_RUNNING", "PENDING_SHUTDOWN")
# The apps' own words, quoted as evidence (first match of each, per app).
LOG_LINES = {
    "all_threads_died": r"All stream threads have died",
    "handler": r"registered exception handler opted to \w+|Replacing thread in the streams uncaught exception",
    "task_timeout": r"task\.timeout\.ms|Task timed out|timed out .* task",
    "expired": r"Expiring \d+ record\(s\)",
    "no_leader": r"LEADER_NOT_AVAILABLE|NOT_LEADER_OR_FOLLOWER",
    "listener_not_found": r"partitions have leader brokers without a matching listener",
    "error": r"\] ERROR ",
    "send_error": r"Error encountered sending record to topic",   # Streams' own report of a failed send
    "task_corrupted": r"TaskCorruptedException: Tasks \[",        # 2.8+: the task closed dirty and revived
}

SPARK_AUDIT = True   # its outcome is audited by Spark (lab.experiment.lessons warms Spark up)

PARAMS = [
    Param("bounce_apps", ["2.7.2", f"{KAFKA_VERSION}/shutdown_client", f"{KAFKA_VERSION}/replace_thread"],
          "Kafka Streams apps side by side: a version, and from 2.8 on the KIP-671 handler after a '/' "
          f"({' or '.join(HANDLERS)}; none given: shutdown_client, Kafka's default)"),
    Param("bounce_brokers", "listener", "leader: the broker leading the apps' output partitions goes down; "
          "all: the whole cluster; listener: the leader restarts without the apps' listener (LISTENER_NOT_FOUND)",
          choices=("leader", "all", "listener")),
    Param("bounce_down_s", 30.0, "how long the broker(s) stay down, or without the listener (0: no bounce)", lo=0,
          hi=300, unit="s"),
    Param("bounce_replication", 1, "replication factor of the apps' output topics (1: no leader while it is "
          "down; 3: leadership moves to a follower)", lo=1, hi=3, why="the embedded cluster has 3 brokers"),
    Param("bounce_acks", "default", "the apps' producer acks: default is the client's own (1 before 3.0, all since, "
          "KIP-679); all waits for every in-sync replica", choices=("default", "all", "1")),
    Param("bounce_delivery_timeout_ms", 10_000, "the apps' producer delivery.timeout.ms", lo=REQUEST_TIMEOUT_MS,
          hi=600_000, unit="ms", why=f"the producer needs delivery.timeout.ms >= request.timeout.ms "
          f"({REQUEST_TIMEOUT_MS} here) + linger.ms (0)"),
    Param("bounce_task_timeout_ms", 20_000, "task.timeout.ms (2.8+: how long a task may keep timing out)",
          lo=0, hi=600_000, unit="ms"),
    Param("bounce_rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("bounce_partitions", 2, "partitions of the input and of each output topic", lo=1, hi=12),
    Param("bounce_threads", 1, "stream threads per app", lo=1, hi=4),
    Param("bounce_watch_s", 60.0, "how long the apps are watched from the broker stop on (ends early once "
          "every app has died or recovered)", lo=5, hi=600, unit="s"),
]


@dataclass(frozen=True)
class Variant:
    version: str
    handler: str     # "" before 2.8: there is no handler to choose

    @property
    def name(self) -> str:
        return f"{self.version}/{self.handler}" if self.handler else self.version

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower())


def has_kip_671(version: str) -> bool:
    return parse_version(version) >= KIP_671


def acks_of(version: str, acks: str) -> str:
    """The acks an app's producer runs with: BOUNCE_ACKS, or its client's default."""
    if acks != "default":
        return acks
    return "all" if parse_version(version) >= KIP_679 else "1"


def parse_variant(text: str) -> Variant:
    """"2.7.2" or "4.3.1/replace_thread"; a 2.8+ version alone gets Kafka's default, shutdown_client."""
    m = VARIANT.match(str(text).strip())
    if not m:
        raise LabError(f"BOUNCE_APPS: {text!r} is not a version like '2.7.2' or '{KAFKA_VERSION}/replace_thread'.")
    version, handler = m.group(1), m.group(2) or ""
    if handler and handler not in HANDLERS:
        raise LabError(f"BOUNCE_APPS: {text!r}: the handler is one of {list(HANDLERS)}, not {handler!r}.")
    if handler and not has_kip_671(version):
        raise LabError(f"BOUNCE_APPS: {text!r}: Kafka Streams {version} has no uncaught exception handler to "
                       "choose (KafkaStreams.setUncaughtExceptionHandler(StreamsUncaughtExceptionHandler), "
                       "KIP-671, arrived in 2.8.0): name the version alone.")
    return Variant(version, handler or ("shutdown_client" if has_kip_671(version) else ""))


def variants(p: dict) -> list[Variant]:
    return [parse_variant(v) for v in p["bounce_apps"]]


def _apps_are_valid(p: dict) -> str | None:
    if not p["bounce_apps"]:
        return "BOUNCE_APPS is empty: name at least one Kafka Streams version."
    try:
        names = [v.name for v in variants(p)]
    except LabError as exc:
        return str(exc)
    if len(set(names)) != len(names):
        return f"BOUNCE_APPS={p['bounce_apps']!r} names the same app twice ({names})."
    return check_jvms(len(names), f"BOUNCE_APPS={p['bounce_apps']}")


def _bounce_fits_the_watch(p: dict) -> str | None:
    extra = RESTART_S if p["bounce_brokers"] == "listener" else 0
    if p["bounce_down_s"] > 0 and p["bounce_watch_s"] < p["bounce_down_s"] + RECOVERY_S + extra:
        return (f"BOUNCE_WATCH_S={p['bounce_watch_s']:g} s ends before the bounce is over: the broker(s) stay down "
                f"{p['bounce_down_s']:g} s (BOUNCE_DOWN_S) and need about {RECOVERY_S + extra} s more to restart "
                f"and show who recovers; watch at least {p['bounce_down_s'] + RECOVERY_S + extra:g} s.")
    return None


def _versions_exist(p: dict) -> str | None:
    """Each version resolved and the app compiled against it now, not minutes later."""
    try:
        for version in dict.fromkeys(v.version for v in variants(p)):
            check_version(version, "BOUNCE_APPS", build, oldest=OLDEST, why="Kafka 4 brokers refuse older "
                          "clients (KIP-896)")
    except LabError as exc:
        return str(exc)
    return None


RULES = [_apps_are_valid, _bounce_fits_the_watch, _versions_exist]


def build(version: str):
    return build_streams_program(version, MAIN, SOURCES, stores=False)   # stateless: no RocksDB


# A restarted node registers again only once the controller has expired its last session (before that:
# DUPLICATE_BROKER_REGISTRATION, retried): 6 s instead of 9 s shortens each restart by about 3 s here.
FAST_REREGISTRATION = {"broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000}


def needs(p: dict) -> dict:
    return dict(nodes=3, broker_config=FAST_REREGISTRATION, extra_listener=APPS_LISTENER)


def expected_to_die(p: dict, v: Variant) -> bool:
    """The arithmetic of the lesson (what the run measures against): the client ends in ERROR when its output
    partitions have no leader it can reach (none, or one without its listener) for longer than it tolerates. Before 2.8 one expired send kills the thread
    (delivery.timeout.ms); 2.8+ retries the task for task.timeout.ms more, then shutdown_client closes the client
    and replace_thread starts a new thread instead (the client lives). With the whole cluster down the input is
    down too: nothing new is read, so nothing is sent, and nothing expires (measured: 15 s, nobody died)."""
    if p["bounce_down_s"] <= 0 or p["bounce_brokers"] == "all" or p["bounce_replication"] > 1:
        return False
    down_ms = p["bounce_down_s"] * 1000
    if not has_kip_671(v.version):
        return down_ms > p["bounce_delivery_timeout_ms"]
    return v.handler == "shutdown_client" and down_ms > p["bounce_delivery_timeout_ms"] + p["bounce_task_timeout_ms"]


# ------------------------------------------------------------------ the run

@dataclass
class App:
    variant: Variant
    program: JavaProgram
    output: str
    group: str

    @property
    def name(self) -> str:
        return self.variant.name

    def progress(self) -> list[dict]:
        return self.program.lab_lines(kind="progress")

    def states(self) -> list[dict]:
        return self.program.lab_lines(kind="state")

    def running(self) -> bool:
        rows = self.progress()
        return bool(rows) and rows[-1]["state"] == "RUNNING" and rows[-1]["processed"] > 0

    def dead_at(self, before: float | None = None) -> float | None:
        """When the client reached a dead state (not one we asked for: a stop comes after `before`)."""
        for row in self.states():
            if row["to"] in DEAD_STATES and (before is None or row["ts"] < before):
                return row["ts"]
        return None

    def processed(self, at: float) -> int:
        rows = [r for r in self.progress() if r["ts"] <= at]
        return rows[-1]["processed"] if rows else 0


def _topic_on(lab, name: str, partitions: int, replicas: list[int]) -> str:
    """A topic whose every partition has these replicas, the first one leading (Run.topics then waits for
    the leaders): the lesson chooses which broker the apps depend on."""
    from confluent_kafka.admin import NewTopic
    admin = lab.cluster.admin()   # kept alive until the future resolves
    futures = admin.create_topics(
        [NewTopic(name, partitions, -1, replica_assignment=[list(replicas)] * partitions)], operation_timeout=30)
    futures[name].result()
    return lab.topics(name, partitions=partitions)[0]


def _start(lab, v: Variant, p: dict, topic: str, output: str) -> App:
    group = f"bounce-{v.slug}-{uuid.uuid4().hex[:4]}"
    program = lab.program(JavaProgram(
        f"bounce-{v.slug}", v.version, MAIN, SOURCES, heap="160m", stores=False,   # stateless: no RocksDB
        properties={"bootstrap.servers": lab.cluster.listener_bootstrap(APPS_LISTENER), "application.id": group,
                    "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                    "num.stream.threads": p["bounce_threads"], "state.dir": lab.folder / group,
                    "consumer.auto.offset.reset": "earliest",
                    "producer.delivery.timeout.ms": p["bounce_delivery_timeout_ms"],
                    "producer.request.timeout.ms": REQUEST_TIMEOUT_MS, "producer.linger.ms": 0,
                    "task.timeout.ms": p["bounce_task_timeout_ms"],
                    "lab.input.topic": topic, "lab.output.topic": output, "lab.app": v.name,
                    "lab.handler": v.handler,
                    **({"producer.acks": p["bounce_acks"]} if p["bounce_acks"] != "default" else {})}))
    program.start()
    return App(v, program, output, group)


def _settled(apps: list[App], up_at: float | None) -> bool:
    """Once the brokers are back: every app dead, or running with all its threads and processing again."""
    if up_at is None or time.time() < up_at + 5:
        return False
    for app in apps:
        if app.dead_at() is not None:
            continue
        last = (app.progress() or [{}])[-1]
        if last.get("state") != "RUNNING" or app.processed(time.time()) <= app.processed(up_at) or \
                any(not t.endswith(":RUNNING") for t in last.get("threads", [])):
            return False
    return True


def run_lesson(lab, p: dict) -> "Outcome":
    cluster = lab.cluster
    if not getattr(cluster, "owns_broker", False) or len(cluster.node_ids) < 3 or \
            getattr(cluster, "extra_listener", None) != APPS_LISTENER:
        raise LabError(f"The bounce lesson stops brokers: it needs the lab's own 3-node cluster with the apps' "
                       f"listener {APPS_LISTENER} (needs() asks for it), not an external one.")
    nodes = cluster.node_ids
    victim = nodes[-1]
    down_nodes = list(nodes) if p["bounce_brokers"] == "all" else [victim]
    suffix = uuid.uuid4().hex[:6]
    partitions = p["bounce_partitions"]
    # The input lives on the brokers that stay up (records keep coming); the outputs lead on the victim.
    topic = _topic_on(lab, f"bounce-input-{suffix}", partitions, [n for n in nodes if n != victim])
    followers = [n for n in nodes if n != victim][:p["bounce_replication"] - 1]
    chosen = variants(p)
    outputs = {v.name: _topic_on(lab, f"bounce-out-{v.slug}-{suffix}", partitions, [victim, *followers])
               for v in chosen}
    leaders = {v.name: sorted({cluster.leader_of(outputs[v.name], q) for q in range(partitions)}) for v in chosen}
    history = History(lab.folder / "bounce-input", lab.id)
    stop_input = threading.Event()
    feeding = lab.background(generate, lab.bootstrap, topic, None, history, keys=20, rate=p["bounce_rate"],
                             until=stop_input, name="bounce-input")
    apps: list[App] = []
    down_at = up_at = restart_at = listener_lost_at = None
    try:
        for v in chosen:
            apps.append(_start(lab, v, p, topic, outputs[v.name]))
            lab.event(v.name, "start", detail=f"Kafka Streams {v.version}" + (f", {v.handler}" if v.handler else ""))
        lab.wait(lambda: all(a.running() for a in apps), 120, "the bounce apps to run and process",
                 evidence=lambda: {a.name: (a.progress() or [{}])[-1] for a in apps})
        lab.countdown("the apps at work before the bounce", 3)
        bounce_at = time.time()
        if p["bounce_down_s"] > 0:
            lab.event("brokers", f"node(s) {down_nodes} stopping", tone="fault")
            cluster.stop_nodes(*down_nodes)
            down_at = time.time()
            lab.event("brokers", f"node(s) {down_nodes} down", tone="fault")
            if p["bounce_brokers"] == "listener":
                cluster.start_nodes(*down_nodes, timeout=90, without_extra_listener=True)
                listener_lost_at = time.time()
                lab.event("brokers", f"node(s) {down_nodes} back without listener {APPS_LISTENER}", tone="fault")
            lab.countdown(f"broker(s) {down_nodes} " + ("without the apps' listener" if listener_lost_at else "down"),
                          until=down_at + p["bounce_down_s"])
            if listener_lost_at:
                cluster.stop_nodes(*down_nodes)   # the fix: a restart with the listener back
            restart_at = time.time()
            cluster.start_nodes(*down_nodes, timeout=90)
            up_at = time.time()
            for label, start, end, unreachable in _windows(bounce_at, listener_lost_at, restart_at, up_at):
                lab.timeline.band(label, start, end, tone="failure" if unreachable else "wait")
            lab.event("brokers", f"node(s) {down_nodes} up", tone="info",
                      detail=f"restart took {up_at - restart_at:.1f} s")
        else:
            up_at = bounce_at
        lab.countdown("watching the apps (ends once each has died or recovered)",
                      until=bounce_at + p["bounce_watch_s"], done=lambda: _settled(apps, up_at))
        stopped_input = time.time()
    finally:
        stop_input.set()
    feeding.result(timeout=60)
    _drain(lab, apps, topic, partitions, p)
    stop_at = time.time()
    stop_together([a.program.process for a in apps])
    return Outcome.measure(lab, p, apps, topic, history, dict(
        nodes=down_nodes, leaders_before=leaders, bounce_at=bounce_at, down_at=down_at,
        listener_lost_at=listener_lost_at, restart_at=restart_at, up_at=up_at, input_stopped_at=stopped_input, apps_stopped_at=stop_at))


def _windows(bounce_at, listener_lost_at, restart_at, up_at) -> list[tuple[str, float, float, bool]]:
    """The bounce as (label, start, end, up but unreachable by the apps): down, or down / up without the apps'
    listener / down again."""
    if listener_lost_at is None:
        return [("broker(s) down", bounce_at, up_at, False)]
    return [("broker down", bounce_at, listener_lost_at, False),
            (f"up without listener {APPS_LISTENER}", listener_lost_at, restart_at, True),
            ("restart with it", restart_at, up_at, False)]


def _drain(lab, apps: list[App], topic: str, partitions: int, p: dict) -> None:
    """The living apps finish the input (their commits reach its end), so the audit sees all they will do."""
    from ...experiment.admin import group_offsets, topic_offsets
    admin = lab.cluster.admin()
    ends = topic_offsets(admin, topic, partitions)
    living = {a.name: a.group for a in apps if a.dead_at() is None and a.program.alive()}

    def caught_up():
        committed = group_offsets(admin, living, topic)
        return all(all((committed.get(n) or {}).get(q) == ends[q] for q in range(partitions)) for n in living)
    if living:
        try:
            lab.wait(caught_up, 20, "the living apps to commit the whole input")
        except LabError as exc:   # measured below as lag; not a reason to lose the run
            lab.say(f"not every app caught up: {exc}")


# ------------------------------------------------------------------ what was measured

def _first_lines(log, since: float) -> dict:
    found = {}
    for what, rx in LOG_LINES.items():
        lines = grep(log, rx, since=since)
        if lines:
            found[what] = {"count": len(lines), "first": lines[0][1].strip()[:400]}
    return found


def _audit_history(app: App, history: History, committed: dict, folder) -> History:
    """The generator's "produced" rows below the offsets this app committed: what it claims done. A dead app's
    unprocessed tail is lag, not loss."""
    mine = History(folder, history.run_id)
    mine.log_many("produced", [r for r in history.rows("produced")
                               if r["offset"] < (committed.get(r["partition"]) or 0)])
    return mine


@dataclass
class Outcome:
    rows: list[dict]                   # one per app
    series: dict                       # app -> [(t_s, processed, state, threads)]
    bounce: dict                       # what the lab did to the brokers, seconds since the run began
    evidence: dict = field(default_factory=dict)   # app -> {what: {"count", "first"}} from its log
    audits: dict = field(default_factory=dict)     # app -> the Spark audit's Verdict

    @classmethod
    def measure(cls, lab, p: dict, apps: list[App], topic: str, history: History, marks: dict) -> "Outcome":
        from ...experiment.admin import group_offsets, topic_offsets
        from ...experiment.streaming import audit_many
        admin = lab.cluster.admin()
        partitions = p["bounce_partitions"]
        ends = topic_offsets(admin, topic, partitions)
        committed = group_offsets(admin, {a.name: a.group for a in apps}, topic)
        since = marks["bounce_at"]
        audits = audit_many({a.name: dict(history=_audit_history(a, history, committed.get(a.name) or {},
                                                                 lab.folder / "bounce-audit" / a.variant.slug),
                                          bootstrap=lab.bootstrap, output_topic=a.output,
                                          kinds=["lost", "duplicate"], allow_empty=True,
                                          expect="anomalies" if expected_to_die(p, a.variant) else "clean")
                             for a in apps})
        # a replica cutting its log back to the new leader's: records only it had are gone (read once, counted per app)
        truncated = lab.cluster.grep_log(r"\] Truncating to offset \d+ \(UnifiedLog\)")
        rows, series, evidence = [], {}, {}
        for a in apps:
            dead = a.dead_at(before=marks["apps_stopped_at"])
            uncaught = a.program.lab_lines(kind="uncaught")
            thread_deaths = a.program.lab_lines(kind="thread_died")
            replaced = [u for u in uncaught if u.get("response") == "REPLACE_THREAD"]
            mine = committed.get(a.name) or {}
            audit = audits.get(a.name)
            states = [r["to"] for r in a.states() if r["ts"] < marks["apps_stopped_at"]]
            evidence[a.name] = _first_lines(a.program.log_path, since)
            first_error = (thread_deaths or uncaught or [{}])[0]
            rows.append({
                "app": a.name, "version": a.variant.version, "handler": a.variant.handler or "(none before 2.8)",
                "acks": acks_of(a.variant.version, p["bounce_acks"]),
                "truncations": sum(re.search(rf"partition={re.escape(a.output)}-\d+,", line) is not None
                                   for line in truncated),
                "expected_to_die": expected_to_die(p, a.variant),
                "died": dead is not None,
                "died_after_s": None if dead is None else round(dead - since, 1),
                "final_state": states[-1] if states else "?",
                "states": states,
                "thread_deaths": len(thread_deaths) + len(uncaught),
                "threads_replaced": len(replaced),
                "exception": first_error.get("exception", ""),
                "expired_sends": evidence[a.name].get("expired", {}).get("count", 0),
                "task_timeout_lines": evidence[a.name].get("task_timeout", {}).get("count", 0),
                "send_errors_reported": evidence[a.name].get("send_error", {}).get("count", 0),
                "tasks_corrupted": evidence[a.name].get("task_corrupted", {}).get("count", 0),
                "listener_not_found_lines": evidence[a.name].get("listener_not_found", {}).get("count", 0),
                "processed_before": a.processed(since),
                "processed": a.processed(marks["apps_stopped_at"]),
                "lag_end": sum(ends[q] - (mine.get(q) or 0) for q in range(partitions)),
                "audit_lost": None if audit is None else audit.counts.get("lost"),
                "audit_duplicate": None if audit is None else audit.counts.get("duplicate"),
            })
            if dead is not None:
                lab.event(a.name, "client dead", at=dead, tone="failure", detail=first_error.get("exception", "")[:200])
            for u in replaced:
                lab.event(a.name, "thread replaced", at=u["ts"], tone="mitigation", detail=u.get("exception", "")[:200])
            series[a.name] = [(r["ts"] - lab.t0, r["processed"], r["state"], r.get("threads", []))
                              for r in a.progress() if r["ts"] <= marks["apps_stopped_at"]]
        bounce = {k: (round(v - lab.t0, 1) if isinstance(v, float) else v) for k, v in marks.items()}
        bounce.update(brokers=p["bounce_brokers"], down_s=p["bounce_down_s"], replication=p["bounce_replication"],
                      outage_s=None if marks["down_at"] is None else round(marks["up_at"] - marks["bounce_at"], 1))
        return cls(rows, series, bounce, evidence, audits)

    @property
    def failed(self) -> bool:
        return any(r["died"] or (r["audit_lost"] or 0) > 0 for r in self.rows)

    def by_app(self) -> dict:
        return {r["app"]: r for r in self.rows}

    def as_record(self) -> dict:
        return {"bounce": self.by_app(), "bounce_brokers": self.bounce,
                "bounce_evidence": {app: {k: v["first"] for k, v in found.items()}
                                    for app, found in self.evidence.items()}}

    def verdict(self) -> str:
        died = [f"{r['app']} ({r['final_state']} {r['died_after_s']:g} s after the bounce began)"
                for r in self.rows if r["died"]]
        rode = [r["app"] + (f" ({r['threads_replaced']} thread(s) replaced)" if r["threads_replaced"] else "")
                for r in self.rows if not r["died"]]
        lost = [f"{r['app']}: {r['audit_lost']}" for r in self.rows if r["audit_lost"]]
        return "; ".join(filter(None, [f"died: {', '.join(died)}" if died else "",
                                       f"rode it out: {', '.join(rode)}" if rode else "",
                                       f"records lost: {', '.join(lost)}" if lost else ""]))

    def table(self):
        import pandas as pd
        return pd.DataFrame([{k: v for k, v in r.items() if k != "states"} for r in self.rows])

    def explain(self) -> str:
        b = self.bounce
        if b["down_at"] is None:
            lines = ["No bounce (BOUNCE_DOWN_S = 0): the apps ran undisturbed, the control."]
        else:
            kept = ("the whole cluster was down, the input with it: nothing new to read, so nothing to send"
                    if b["brokers"] == "all"
                    else f"replication {b['replication']}: their leadership moved to a follower" if b["replication"] > 1
                    else f"no leader while it was down; back at {b['listener_lost_at']:g} s without the listener "
                         f"{APPS_LISTENER}, it led them again but answered nothing to the apps: their metadata said "
                         "LISTENER_NOT_FOUND until its restart with the listener" if b["listener_lost_at"] is not None
                    else "no leader while it was down")
            lines = [f"Broker node(s) {b['nodes']} went down at {b['bounce_at']:g} s and were back at {b['up_at']:g} s "
                     f"({b['outage_s']:g} s without them, restart included). The apps' output partitions led there "
                     f"({kept})."]
        for r in self.rows:
            ev = self.evidence.get(r["app"], {})
            head = (f"- **{r['app']}**: {r['processed_before']} records before the bounce, {r['processed']} at the "
                    f"end; lag at the end {r['lag_end']}; audit: lost {r['audit_lost']}, duplicate "
                    f"{r['audit_duplicate']}.")
            if r["died"]:
                head += (f" **Died** {r['died_after_s']:g} s after the bounce began (states "
                         f"{' -> '.join(r['states'])}); it stays dead although the broker came back.")
            elif r["threads_replaced"]:
                head += f" Its handler replaced {r['threads_replaced']} dead thread(s): the client stayed up."
            else:
                head += " It rode the bounce out."
            if r["expired_sends"]:
                head += f" {r['expired_sends']} expired send(s) (delivery.timeout.ms)."
            lines.append(head)
            if r["exception"]:
                lines.append(f"  The thread died of: `{r['exception'][:300]}`")
            if r["audit_lost"] and has_kip_671(r["version"]):
                lines.append(
                    f"  At-least-once did not hold: it committed input offsets whose output was never written. Its "
                    f"log reports {r['send_errors_reported']} failed send(s) and {r['tasks_corrupted']} "
                    "TaskCorruptedException(s), one task at a time, each revived from its last commit (KIP-572's "
                    "retry, which never reached task.timeout.ms); the expired batches of the other task on the same "
                    "thread were not reported, and that task committed past them. Why, read in 4.3.1's source "
                    "(RecordCollectorImpl): since KAFKA-16903 (3.8) a thread's tasks share one send error, kept by "
                    "their one StreamsProducer; the send callback returns at once while an error is kept, and the "
                    "TaskCorruptedException names only the task whose error came first.")
            if r["audit_lost"] and r["acks"] == "1" and self.bounce["replication"] > 1:
                lines.append(
                    f"  With acks=1 (its default before 3.0, KIP-679) the leader acknowledged records its followers "
                    f"had not copied yet; the follower that took over never had them, and the old leader truncated "
                    f"them when it came back ({r['truncations']} truncation(s) of its output partitions in the brokers' "
                    f"logs): acknowledged, committed past, and gone. Replicas protect a write only with acks=all.")
            for what in ("listener_not_found", "all_threads_died", "handler", "task_timeout", "expired"):
                if what in ev:
                    lines.append(f"  Its log: `{ev[what]['first'][:300]}`")
            if r["died"] != r["expected_to_die"]:
                lines.append(f"  (The arithmetic of down time against its timeouts expected it to "
                             f"{'die' if r['expected_to_die'] else 'survive'}; this run measured otherwise.)")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        b = self.bounce
        if b["down_at"] is not None:
            for label, start, end, unreachable in _windows(b["bounce_at"], b["listener_lost_at"], b["restart_at"],
                                                           b["up_at"]):
                fig.add_vrect(x0=start, x1=end, fillcolor="#d62728" if unreachable else "#bdbdbd",
                              opacity=0.15 if unreachable else 0.3, line_width=0, annotation_text=label,
                              annotation_position="top left")
        for name, points in self.series.items():
            fig.add_scatter(x=[t for t, *_ in points], y=[n for _, n, *_ in points], mode="lines", name=name,
                            text=[f"{s} {' '.join(th)}" for _, _, s, th in points], hoverinfo="x+y+text+name")
        for r in self.rows:
            if r["died"]:
                t = b["bounce_at"] + r["died_after_s"]
                y = max((n for tt, n, *_ in self.series[r["app"]] if tt <= t), default=0)
                fig.add_scatter(x=[t], y=[y], mode="markers", marker={"symbol": "x", "size": 14, "color": "#d62728"},
                                name=f"{r['app']} dead ({r['final_state']})")
        fig.update_layout(title="Records processed while a broker bounces: a flat line that never resumes is a "
                          "dead client", xaxis_title="seconds since the run began", yaxis_title="records processed",
                          template="plotly_white", height=420)
        return fig
