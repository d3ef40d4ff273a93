"""Lesson 07d, a broker bounce under Kafka Streams: on 3 embedded brokers, one pass-through lab/java/BounceApp.java
per BOUNCE_APPS variant writes to output partitions led by the broker BOUNCE_BROKERS takes down (or restarts without
the apps' own listener, APPS); the input stays on the others. Measured on 4.3.1: an expired send makes the task
TaskCorrupted and revives it from its last commit, so task.timeout.ms is never reached. broker_bounce_apps runs and
measures the apps, broker_bounce_analysis holds the arithmetic and makes the rows, broker_bounce_report presents them."""
from __future__ import annotations

import threading
import time
import uuid

from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param
from ...toolbox.apps import check_jvms
from ...toolbox.checks import build_streams_program, check_version
from ...toolbox.lesson import Lesson
from ...toolbox.result import Exercise, judge_rule, setting
from ...toolbox.streams_app import stop_all, wait_running
from ...record.generator import generate
from ...record.history import History
from .broker_bounce_analysis import (APPS_LISTENER, HANDLERS, Variant, _windows, acks_of, expected_to_die,
                                     parse_variant)
from .broker_bounce_apps import MAIN, REQUEST_TIMEOUT_MS, SOURCES, App, drain, measure, settled, topic_on
from .broker_bounce_report import Outcome

# the lesson, and what its tests read here
__all__ = ["lesson", "PARAMS", "RULES", "needs", "run_lesson", "Outcome", "Variant", "parse_variant", "variants",
           "acks_of", "expected_to_die", "build", "FAST_REREGISTRATION", "_windows", "_versions_exist", "dies"]

OLDEST = (2, 1, 0)         # Kafka 4 brokers refuse clients older than 2.1 (KIP-896)
RECOVERY_S = 15            # watched after the brokers come back: their restart (~8 s here) and the apps' recovery
RESTART_S = 10             # "listener": the extra restart that puts the listener back

PARAMS = [
    Param("bounce_apps", ["2.7.2", KAFKA_VERSION],
          "the Kafka Streams apps, side by side: one release each, 2.1.0 or later (the lesson's Mitigate step "
          f"explains the 'release/handler' form, handler {' or '.join(HANDLERS)}, for releases from 2.8 on)"),
    Param("bounce_brokers", "listener", "the bounce: leader: the broker leading the apps' output partitions stops, "
          "then starts; all: the whole cluster stops, then starts; listener: that broker restarts at once without "
          "the apps' listener, then again with it",
          choices=("leader", "all", "listener")),
    Param("bounce_down_s", 30.0, "how long the bounce lasts: the broker(s) down, or without the apps' listener "
          "(0: no bounce)", lo=0,
          hi=300, unit="s"),
    Param("bounce_replication", 1, "replication factor of the apps' output topics", lo=1, hi=3,
          why="the embedded cluster has 3 brokers"),
    Param("bounce_acks", "default", "the apps' producer acks: default (the client release's own default), all, "
          "or 1", choices=("default", "all", "1")),
    Param("bounce_delivery_timeout_ms", 10_000, "the apps' producer delivery.timeout.ms", lo=REQUEST_TIMEOUT_MS,
          hi=600_000, unit="ms", why=f"the producer needs delivery.timeout.ms >= request.timeout.ms "
          f"({REQUEST_TIMEOUT_MS} here) + linger.ms (0)"),
    Param("bounce_task_timeout_ms", 20_000, "the apps' task.timeout.ms", lo=0, hi=600_000, unit="ms"),
    Param("bounce_rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("bounce_partitions", 2, "partitions of the input and of each output topic", lo=1, hi=12),
    Param("bounce_threads", 1, "stream threads per app", lo=1, hi=4),
    Param("bounce_watch_s", 60.0, "how long the apps are watched from the bounce on (ends early once every app "
          "has either stopped processing for good or processed again after the bounce)", lo=5, hi=600, unit="s"),
]


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

# What happens to each app: "stops for good" is its stream threads stopped (the client ends in ERROR, its process
# still up); "loses records" is the Spark audit's `lost`, records of the input up to its committed offsets missing
# from its output, under at-least-once.
FATES = ("stops for good", "rides it out and loses nothing", "rides it out but loses records")
WHAT_GOES_DOWN = {"leader": "the broker leading the output partitions is down",
                  "all": "the whole cluster is down",
                  "listener": "the broker leading the output partitions restarts without the apps' listener"}


def fate(row: dict) -> str:
    return FATES[0] if row["died"] else FATES[2] if (row.get("audit_lost") or 0) > 0 else FATES[1]


def _plural(fate_: str) -> str:
    return {FATES[0]: "stop for good", FATES[1]: "ride it out and lose nothing",
            FATES[2]: "ride it out but lose records"}[fate_]


def _said(fates: dict) -> str:
    """The answer for these apps' fates (app -> fate), as the choices word it: one clause per fate, in the order
    of the apps."""
    apps = list(fates)
    if len(set(fates.values())) == 1:
        one = next(iter(fates.values()))
        return f"it {one}" if len(apps) == 1 else f"{'both' if len(apps) == 2 else 'all'} {_plural(one)}"
    clauses = []
    for one in dict.fromkeys(fates.values()):
        named = [a for a in apps if fates[a] == one]
        clauses.append(f"{' and '.join(named)} {_plural(one) if len(named) > 1 else one}")
    return "; ".join(clauses)


def question(p: dict) -> tuple:
    """Predict: what happens to each app of BOUNCE_APPS. The choices: every app rides it out whole; the first
    stops and the others ride it out, whole or not; the first rides it out whole and the others stop (their
    task.timeout.ms read as a deadline); every app stops."""
    apps = list(p["bounce_apps"])
    first, rest = apps[:1], apps[1:]
    outcomes = [dict.fromkeys(apps, FATES[1])]
    if rest:
        outcomes += [{**dict.fromkeys(first, FATES[0]), **dict.fromkeys(rest, f)} for f in FATES[1:]]
        outcomes.append({**dict.fromkeys(first, FATES[1]), **dict.fromkeys(rest, FATES[0])})
    else:
        outcomes += [dict.fromkeys(apps, FATES[2])]
    outcomes.append(dict.fromkeys(apps, FATES[0]))
    count = {1: "A", 2: "Two", 3: "Three", 4: "Four"}.get(len(apps), str(len(apps)))
    who = f"A Kafka Streams {apps[0]} app, at-least-once, writes its" if len(apps) == 1 else \
        f"{count} Kafka Streams apps, {' and '.join([', '.join(apps[:-1]), apps[-1]])}, at-least-once, write their"
    return (f"{who} output with delivery.timeout.ms = {p['bounce_delivery_timeout_ms']:,} ms (output replication "
            f"factor {p['bounce_replication']}), and {WHAT_GOES_DOWN[p['bounce_brokers']]} for "
            f"{p['bounce_down_s']:g} s. What happens to {'it' if len(apps) == 1 else 'them'}?",
            tuple(_said(o) for o in outcomes))


def measured_answer(record: dict, p: dict):
    rows = {a: record["bounce"].get(parse_variant(a).name) for a in p["bounce_apps"]}
    return None if None in rows.values() else _said({a: fate(row) for a, row in rows.items()})


def build(version: str):
    return build_streams_program(version, MAIN, SOURCES, stores=False)   # stateless: no RocksDB


# A restarted node registers again only once the controller has expired its last session (before that:
# DUPLICATE_BROKER_REGISTRATION, retried): 6 s instead of 9 s shortens each restart by about 3 s here.
FAST_REREGISTRATION = {"broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000}


def needs(p: dict) -> dict:
    return dict(nodes=3, broker_config=FAST_REREGISTRATION, extra_listener=APPS_LISTENER)



def run_lesson(lab, p: dict) -> Outcome:
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
    topic = topic_on(lab, f"bounce-input-{suffix}", partitions, [n for n in nodes if n != victim])
    followers = [n for n in nodes if n != victim][:p["bounce_replication"] - 1]
    chosen = variants(p)
    outputs = {v.name: topic_on(lab, f"bounce-out-{v.slug}-{suffix}", partitions, [victim, *followers])
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
            app = App(lab, v, p, topic, outputs[v.name])
            app.start()
            apps.append(app)
            lab.event(v.name, "start", detail=f"Kafka Streams {v.version}" + (f", {v.handler}" if v.handler else ""))
        wait_running(lab, apps, 120, "the bounce apps to run and process",
                     ready=lambda a, prog: a.last(prog)["processed"] > 0,
                     evidence=lambda: {a.name: a.last(a.program) for a in apps})
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
                      until=bounce_at + p["bounce_watch_s"], done=lambda: settled(apps, up_at))
        stopped_input = time.time()
    finally:
        stop_input.set()
    feeding.result(timeout=60)
    drain(lab, apps, topic, partitions)
    stop_at = time.time()
    stop_all(apps)
    return measure(lab, p, apps, topic, history, dict(
        nodes=down_nodes, leaders_before=leaders, bounce_at=bounce_at, down_at=down_at,
        listener_lost_at=listener_lost_at, restart_at=restart_at, up_at=up_at, input_stopped_at=stopped_input,
        apps_stopped_at=stop_at))


# ------------------------------------------------------------------ the exercise

def dies(app, p):
    # no reachable leader: a send expires after delivery.timeout.ms; before 2.8 that kills the thread, from 2.8 on
    # the task is revived from its last commit (or a replace_thread handler replaces the thread)
    if p["bounce_replication"] > 1 or p["bounce_brokers"] == "all":
        return False   # a follower takes over, or the input is down too and nothing is sent
    major, minor = (int(x) for x in app.split("/")[0].split(".")[:2])
    return (major, minor) < (2, 8) and p["bounce_down_s"] * 1000 > p["bounce_delivery_timeout_ms"]


def _every_expired_send_kills(app, p):
    """A tempting wrong answer: any app dies once a send expires, as if 2.8 had changed nothing."""
    return p["bounce_replication"] == 1 and p["bounce_brokers"] != "all" \
        and p["bounce_down_s"] * 1000 > p["bounce_delivery_timeout_ms"]


def _other_bounces(p: dict) -> list[tuple[dict, tuple]]:
    """The exercise's other settings, each with the apps whose outcome there is certain, with a wide margin (a bounce
    also keeps the leader away while it restarts, about 10 s here): a delivery timeout four times the down time,
    three replicas, and three times the timeout down (where a 2.8+ app with shutdown_client is left out: KIP-572
    says it dies after task.timeout.ms more, but this lab's runs on 4.3.1 saw its expired sends revive the task
    instead, and never reach that timeout)."""
    timeout_s, down_s = p["bounce_delivery_timeout_ms"] / 1000, max(p["bounce_down_s"], 1)
    every = ("2.7.2", "2.8.2/replace_thread", f"{KAFKA_VERSION}/shutdown_client")
    return [({"bounce_delivery_timeout_ms": int(4000 * down_s)}, every),
            ({"bounce_replication": 3}, every),
            ({"bounce_down_s": 3 * timeout_s}, ("2.7.2", "2.8.2/replace_thread"))]


def _check_dies(result, fn) -> None:
    p = result.params
    cases = [(f"{r['app']!r}, p", (r["app"], dict(p)), r["died"], None) for r in result.outcome.rows]
    for change, apps in _other_bounces(p):
        q = {**p, **change}
        cases += [(f"{app!r}, p", (app, q), expected_to_die(q, parse_variant(app)), setting(change)) for app in apps]
    judge_rule(fn, "dies", cases, (("died", "lived"), ("dies", "lives")),
               "how long was the output without a leader it could reach, against which timeout, and what does that "
               "version do when a send expires?")


def _dies_printed(result) -> list:
    """Look-ups of the run's table (`died` by app, or by its release), False for the rest (the Mitigate cell's
    verdict: no app died); and True, and False, whatever they are given."""
    seen = {r["app"]: r["died"] for r in result.outcome.rows}
    release = {app.split("/")[0]: died for app, died in seen.items()}
    return [lambda app, p: seen.get(app, False), lambda app, p: release.get(app.split("/")[0], False),
            lambda *_: True, lambda *_: False]


EXERCISES = {
    1: Exercise(
        check=_check_dies,
        solution=lambda result: dies,
        why="An app dies when its output has no leader it can reach for longer than a send may wait: its producer "
            "gives up `delivery.timeout.ms` after the send (the leader stays away for `BOUNCE_DOWN_S` and its "
            "restart). Before 2.8 that expired send kills the stream thread, "
            "and with one thread the instance (`ERROR`). From 2.8 on the task is marked corrupted and revived from "
            "its last commit (KIP-572), so the app lives; with `replace_thread` (KIP-671) even a thread that dies is "
            "replaced. Measured here on 4.3.1, not documented: `task.timeout.ms` was never reached that way. With "
            "three replicas a follower takes over the leadership; with the whole cluster down the input is down "
            "too, nothing is sent and nothing expires (measured here with 15 s down). The table's `died` "
            "and `died_after_s` show each app.",
        wrong=lambda result: _every_expired_send_kills,
        closer="Two things decide. First, whether the app's sends find a leader they can reach during the bounce "
               "(think of replicas, and of what the app has to send when every broker is down). Second, what that "
               "release's stream thread does when a send gives up after delivery.timeout.ms: releases before 2.8 "
               "and from 2.8 on differ there.",
        printed=_dies_printed,
    ),
}


def apps_side_by_side(p: dict) -> int:
    # one app per BOUNCE_APPS release, all riding the same bounce
    return len(p["bounce_apps"])


lesson = Lesson("bounce", "A broker bounce under Kafka Streams", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("BounceApp",), spark_audit=True, apps_at_once=apps_side_by_side)
