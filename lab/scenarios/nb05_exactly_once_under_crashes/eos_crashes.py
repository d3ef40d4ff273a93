"""Seed 001 (part 3) and seed 002: does exactly-once survive a crash at every point? Exception handlers,
crash loops and a changed state schema.

A real Kafka Streams app (lab/java/EosCrashApp.java: transform + per-key count, one output record and one
count update per input) halts its JVM once (Runtime.halt: no close, no flush) at a named point, at its
CRASH_AT-th record or, when no commit has settled by then, at the first record after one (so the killed
app always committed something first), and the scenario restarts it as a deployment would:
    before_read               a consumer interceptor, when poll() hands over the record
    during_processing         inside the processor: state written and output forwarded, count update not
    after_send_before_commit  a producer interceptor's onAcknowledgement (a long commit interval)
    after_commit              the first record after a commit that covered the CRASH_AT-th record
    none                      no crash: the control
Under exactly_once_v2 the open transaction of the killed app is aborted when the restarted app (same
process id in its state directory, same transactional.id) fences it, and the output a read_committed
reader sees is exact; under at_least_once the records processed since the last commit are processed
again. Part 2: a poison record and the handlers (SHUTDOWN_CLIENT, REPLACE_THREAD, KIP-1033 CONTINUE,
and the DeserializationExceptionHandler for a malformed input). Part 3: version 2 of the app cannot read
the JSON version 1 left in its store.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field

from ...cluster import parse_version
from ...config import KAFKA_VERSION
from ...connection import kafka_config
from ...errors import LabError
from ...experiment import Param, Result, Run, Spec, Timeline, grep, lab_lines
from ...experiment.checks import check_streams_program
from ...experiment.markers import around, describe, draw, producer_ids
from ...experiment.memory import child_pids, peak_rss
from ...generator import generate
from ...history import History
from ...programs import JavaProgram

MAIN, SOURCES = "EosCrashApp", ["EosCrashApp.java"]
CRASH_POINTS = ("none", "before_read", "during_processing", "after_send_before_commit", "after_commit")
GUARANTEES = ("exactly_once_v2", "at_least_once")
HANDLERS = ("shutdown_client", "replace_thread", "continue", "deserialization")
SCHEMA_MODES = ("shutdown_client", "replace_thread", "continue", "tolerant")
OLDEST_SUPPORTED = (3, 0, 0)   # exactly_once_v2, the uncaught exception handler, the processor API
KIP_1033 = (3, 9, 0)           # ProcessingExceptionHandler (processing.exception.handler)
CONTINUE_HANDLER = "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler"
DESER_CONTINUE = "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"
# What the broker's transaction markers say about a crash run (lab.experiment.markers.around).
MARKER_COUNTS = ("markers", "commit_markers", "abort_markers", "commits_before", "aborts_after", "aborted_by_markers",
                 "first_abort_after_s")
KINDS = ["duplicate", "lost", "aborted_read", "stale_value"]   # what the Spark audit checks
SHORT = {"exactly_once_v2": "EOS v2", "at_least_once": "ALOS"}
# Crash points where records processed since the last commit are in flight, so at-least-once redoes them.
IN_FLIGHT = ("before_read", "during_processing", "after_send_before_commit")
WIPE_LINE = r"did not find checkpoint offsets while stores are not empty|TaskCorruptedException"
# Streams' producer on (re)start: a new epoch for the same transactional.id fences the killed one.
EPOCH_LINE = r"ProducerId set to \d+ with epoch \d+"


def check_streams_version(version: str, name: str = "STREAMS_VERSION") -> None:
    """Resolve (and compile against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="exactly_once_v2 and the uncaught exception handler")


def has_kip_1033(version: str) -> bool:
    return parse_version(version) >= KIP_1033


def _kip_1033_needs_3_9(p: dict) -> str | None:
    wanted = [f"{what}" for what, modes in (("HANDLERS", p["handlers"]), ("SCHEMA_MODES", p["schema_modes"]))
              if "continue" in modes]
    if wanted and not has_kip_1033(p["handler_version"]):
        return (f"{' and '.join(wanted)} ask for 'continue', the KIP-1033 ProcessingExceptionHandler, which Kafka "
                f"Streams {p['handler_version']} (HANDLER_VERSION) does not have: it arrived in 3.9.0. Choose "
                "HANDLER_VERSION 3.9.0 or later, or drop 'continue'.")
    return None


def _something_to_run(p: dict) -> str | None:
    if not (p["crash_points"] and p["guarantees"]) and not p["handlers"] and not p["schema_modes"]:
        return "Nothing to run: give CRASH_POINTS and GUARANTEES, HANDLERS or SCHEMA_MODES."
    return None


SPEC = Spec(
    Param("crash_points", ["before_read", "during_processing", "after_send_before_commit", "after_commit"],
          "where the app halts once (none: no crash, the control)", choices=CRASH_POINTS),
    Param("guarantees", ["exactly_once_v2", "at_least_once"], "processing.guarantee of each crash run",
          choices=GUARANTEES),
    Param("streams_version", KAFKA_VERSION, "Kafka Streams version of the crash runs", check=check_streams_version),
    Param("records", 200, "input records per run", lo=10, hi=100_000),
    Param("crash_at", 80, "the app halts at its N-th record (read, processed or acknowledged), once it committed", lo=1, hi=100_000),
    Param("rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("keys", 10, "distinct keys counted", lo=1, hi=10_000),
    Param("partitions", 2, "partitions of every topic (one task each)", lo=1, hi=12),
    Param("commit_interval_ms", 1500, "commit.interval.ms: how much work a commit covers", lo=100, hi=9000,
          unit="ms", why="below Streams' exactly-once transaction.timeout.ms (10 s)"),
    Param("handlers", ["shutdown_client", "replace_thread", "continue", "deserialization"],
          "exception-handler runs: a poison record (or a malformed input for deserialization)", choices=HANDLERS),
    Param("handler_version", KAFKA_VERSION, "Kafka Streams version of the handler runs and of schema 'continue'",
          check=lambda v: check_streams_version(v, "HANDLER_VERSION")),
    Param("old_version", "3.8.1", "Kafka Streams version (before 3.9) of the other schema-change runs",
          check=lambda v: check_streams_version(v, "OLD_VERSION")),
    Param("schema_modes", ["shutdown_client", "replace_thread", "continue", "tolerant"],
          "schema-change runs: how version 2 meets version 1's state", choices=SCHEMA_MODES),
    Param("loop_seconds", 10.0, "how long a failing app is watched (and restarted) once it fails", lo=5, hi=300,
          unit="s"),
    rules=(_kip_1033_needs_3_9, _something_to_run),
)


def needs(p: dict) -> dict:
    """One broker at the lab's version; aborted-by-timeout transactions are swept every second."""
    return dict(nodes=1, version=KAFKA_VERSION,
                broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})


def schema_version(mode: str, p: dict) -> str:
    """'continue' needs KIP-1033 (HANDLER_VERSION); the others show the pre-3.9 behaviour (OLD_VERSION)."""
    return p["handler_version"] if mode == "continue" else p["old_version"]


# ------------------------------------------------------------------ reading what landed

def drain(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list[dict]:
    """Every record of `topic` a reader at `isolation` sees, from offset 0 to each partition's end (the high
    watermark; the last stable offset for read_committed), which the reader's end-of-partition event marks."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({**kafka_config(bootstrap), "group.id": f"lab-drain-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True,
                  # the end shows as an empty fetch: do not let the broker hold it for new data (500 ms)
                  "fetch.wait.max.ms": 10, "log_level": 0})
    rows, at_end, end = [], set(), time.time() + timeout
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        while len(at_end) < len(parts):
            if time.time() > end:
                raise LabError(f"Reading {topic} ({isolation}) did not reach the end of partitions "
                               f"{sorted(set(parts) - at_end)} within {timeout:.0f} s ({len(rows)} records read).")
            for m in c.consume(1000, timeout=0.3):
                if not m.error():
                    rows.append(_row(m))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        c.close()
    return rows


def _row(m) -> dict:
    try:
        value = json.loads(m.value())
    except (TypeError, ValueError):
        value = {"raw": repr(m.value())[:80]}
    return {**(value if isinstance(value, dict) else {"raw": str(value)}), "partition": m.partition(),
            "offset": m.offset(), "kafka_ts": m.timestamp()[1] / 1000}


class Tail:
    """A read_committed reader kept open: poll() adds what is new; ids() is what committed output holds."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({**kafka_config(bootstrap), "group.id": f"lab-tail-{uuid.uuid4().hex[:8]}",
                           "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
        parts = self.c.list_topics(topic, timeout=10).topics[topic].partitions
        self.c.assign([TopicPartition(topic, p, 0) for p in parts])
        self.rows: list[dict] = []

    def poll(self) -> list[dict]:
        while True:
            batch = [m for m in self.c.consume(1000, timeout=0.2) if not m.error()]
            self.rows.extend(_row(m) for m in batch)
            if not batch:
                return self.rows

    def ids(self) -> set:
        return {r.get("id") for r in self.poll()}

    def close(self) -> None:
        self.c.close()


# ------------------------------------------------------------------ pure analysis

def measure(produced, committed: list, uncommitted: list, counts: list) -> dict:
    """What a read_committed reader got against the truth, and what read_uncommitted saw besides.

    produced: the generator's rows (id, key, true_value); committed / uncommitted: output rows (id, key,
    value, partition, offset); counts: committed count updates (key, count, partition, offset).
    """
    truth = {r["id"]: r for r in produced}
    ids = [r.get("id") for r in committed]
    seen, dup = set(), 0
    for i in ids:
        dup += i in seen
        seen.add(i)
    wrong = sum(1 for r in committed if r.get("id") in truth and truth[r["id"]].get("true_value") is not None
                and r.get("value") != truth[r["id"]]["true_value"])
    final_true: dict = {}
    for r in produced:
        if r.get("true_value") is not None:
            final_true[r["key"]] = max(final_true.get(r["key"], 0), int(r["true_value"]))
    final: dict = {}
    for r in sorted(counts, key=lambda r: (r["partition"], r["offset"])):   # one key lives in one partition
        final[r.get("key")] = r.get("count")
    over = sum(max(0, (final.get(k) or 0) - v) for k, v in final_true.items())
    under = sum(max(0, v - (final.get(k) or 0)) for k, v in final_true.items())
    committed_at = {(r["partition"], r["offset"]) for r in committed}
    aborted = [r for r in uncommitted if (r["partition"], r["offset"]) not in committed_at]
    return {"produced": len(truth), "outputs": len(committed), "duplicates": dup,
            "lost": len(set(truth) - seen), "lost_ids": sorted(set(truth) - seen, key=_id_order)[:20],
            "lost_all": set(truth) - seen,
            "wrong_values": wrong, "overcount": over, "undercount": under,
            "aborted_visible": len(aborted), "aborted_ids": sorted({r.get("id") for r in aborted}, key=_id_order),
            "aborted_first_ts": min((r["kafka_ts"] for r in aborted), default=None),
            "aborted_last_ts": max((r["kafka_ts"] for r in aborted), default=None)}


def _id_order(i):
    tail = str(i).rsplit("-", 1)[-1]
    return (0, int(tail)) if tail.isdigit() else (1, str(i))


def app_events(source) -> dict:
    """The app's evidence lines, by kind and incarnation: crash, states, restores, commits, handler calls."""
    rows = lab_lines(source)
    by = lambda kind: [r for r in rows if r.get("kind") == kind]  # noqa: E731
    running = {}
    for r in by("state"):
        if r.get("to") == "RUNNING":
            running.setdefault(r["incarnation"], r["ts"])
    restores: dict = {}
    for r in by("restore_start") + by("restore_end"):
        inc = restores.setdefault(r["incarnation"], {"start": None, "end": None, "restored": 0})
        if r["kind"] == "restore_start":
            inc["start"] = r["ts"] if inc["start"] is None else min(inc["start"], r["ts"])
        else:
            inc["end"] = r["ts"] if inc["end"] is None else max(inc["end"], r["ts"])
            inc["restored"] += int(r.get("restored", 0))
    dropped = [r.get("dropped_records", 0) for r in by("metrics")]
    return {"crash": (by("crash") or [None])[0], "running": running, "restores": restores,
            "commits": by("commit"), "uncaught": by("uncaught"), "exits": by("exit"), "migrated": by("migrated"),
            "dropped_records": max(dropped, default=0), "started": by("started")}


def loop_rate(times: list, seconds: float | None = None) -> float | None:
    """Failures per minute over the span they cover (None for fewer than two)."""
    if len(times) < 2:
        return None
    span = seconds or (max(times) - min(times))
    return round(60 * (len(times) - 1) / span, 1) if span > 0 else None


# ------------------------------------------------------------------ the scenario

def run(cluster=None, progress: bool = True, **params) -> "EosCrashResult":
    """Every crash run, handler run and schema run on one broker; returns what each measured."""
    p = SPEC.validate(**params)
    with Run("eos-crashes", cluster=cluster, progress=progress, **needs(p)) as lab:
        stop = threading.Event()
        rss = lab.background(peak_rss, stop, lambda: {"apps": child_pids(MAIN), "brokers": child_pids("kafka.Kafka")})
        crashes = {}
        for g in p["guarantees"]:
            for point in p["crash_points"]:
                crashes[f"{point} · {SHORT[g]}"] = _crash_run(lab, point, g, p)
        _markers(lab, crashes)
        handlers = {h: _handler_run(lab, h, p) for h in p["handlers"]}
        schema = {m: _schema_run(lab, m, p) for m in p["schema_modes"]}
        bootstrap, broker_log = lab.bootstrap, _broker_log(lab)
        stop.set()
        peak = rss.result(10)
    return EosCrashResult("eos_crashes", p, lab.id, lab.timeline, crashes=crashes, handlers=handlers,
                          schema=schema, bootstrap=bootstrap, broker_log=broker_log, peak_rss_mb=peak)


def _markers(lab: Run, crashes: dict) -> None:
    """The broker's COMMIT / ABORT markers on each crash run's output topic (one DumpLogSegments for all):
    counted around the halt for the killed producer, and marked on the run's timeline. An external cluster
    has no log segments to read: the counts stay None."""
    if not crashes or not lab.cluster.owns_broker:
        return
    found = lab.cluster.transaction_markers(*[c.topics[1] for c in crashes.values()])
    for c in crashes.values():
        c.markers = [mk for mk in found if mk["topic"] == c.topics[1]]
        c.m.update(around(c.markers, set(c.m["producer_ids"]), c.m["crash"]["ts"] if c.m["crashed"] else None))
        c.timeline.events.extend(draw(lab.timeline, f"{_slug(c.label)} markers", c.markers))


def _broker_log(lab: Run):
    try:
        return lab.cluster.log_path()
    except Exception:  # an external cluster: no broker log to quote
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _app(lab: Run, name: str, version: str, app_id: str, topics: list, guarantee: str, p: dict, **lab_props):
    """One Streams JVM of this scenario (not started)."""
    state = lab.folder / app_id / "state"
    props = {"application.id": app_id, "bootstrap.servers": lab.bootstrap, "processing.guarantee": guarantee,
             "commit.interval.ms": p["commit_interval_ms"], "num.stream.threads": 1, "state.dir": state,
             "session.timeout.ms": 6000, "heartbeat.interval.ms": 1500,
             # Streams' producer lingers 100 ms: send at once, so what is processed is on the broker
             "producer.linger.ms": 5,
             "lab.input.topic": topics[0], "lab.output.topic": topics[1], "lab.counts.topic": topics[2],
             "lab.crash.point": "none", "lab.crash.at": 0, "lab.crash.marker": lab.folder / app_id / "crashed",
             "lab.mode": "crash", "lab.handler": "shutdown_client", "lab.strict.input": "false",
             "lab.incarnation": 1}
    props.update({k.replace("_", ".") if k.startswith("lab_") else k: v for k, v in lab_props.items()})
    return lab.program(JavaProgram(name, version, MAIN, SOURCES, heap="192m", properties=props))


def _start(lab: Run, prog: JavaProgram, incarnation: int, what: str, timeout: float = 90) -> float:
    """Start an incarnation and wait for Kafka Streams RUNNING (or its death); returns when it ran."""
    prog.properties["lab.incarnation"] = incarnation
    since = time.time()
    prog.start()
    lab.event(prog.name, f"start #{incarnation}", since, tone="info")

    def running():
        # RUNNING, or already failing: a thread that dies on its first record never lets the client reach RUNNING
        rows = [r for r in prog.lab_lines() if r.get("incarnation") == incarnation
                and (r.get("kind") == "state" and r.get("to") == "RUNNING" or r.get("kind") == "uncaught")]
        return rows[0]["ts"] if rows else (None if prog.alive() else -1.0)
    at = lab.wait(running, timeout, f"{what} (incarnation {incarnation}) to reach RUNNING")
    return at


def _fail(prog: JavaProgram, why: str) -> LabError:
    tail = "\n".join(prog.process.log().splitlines()[-15:]) if prog.process else ""
    return LabError(f"{prog.name}: {why}; last lines of {prog.log_path}:\n{tail}")


def _crash_run(lab: Run, point: str, guarantee: str, p: dict) -> "Crash":
    label = f"{point} · {SHORT[guarantee]}"
    app_id = f"{lab.id}-{_slug(point)}-{_slug(SHORT[guarantee])}"
    lab.phase(f"{label}: Kafka Streams {p['streams_version']}, {guarantee}, halt at {point} "
              f"(record {p['crash_at']} of {p['records']})" if point != "none" else f"{label}: no crash (control)")
    history = History(lab.folder / app_id / "history", app_id)
    topics = lab.topics(f"{app_id}-input", f"{app_id}-output", f"{app_id}-counts", partitions=p["partitions"])
    # Static membership: the restarted app takes its place in the group at once (no session timeout to wait).
    prog = _app(lab, _slug(label), p["streams_version"], app_id, topics, guarantee, p,
                **{"group.instance.id": f"{app_id}-pod"}, lab_crash_point=point, lab_crash_at=p["crash_at"])
    tail, t0 = Tail(lab.bootstrap, topics[1]), time.time()
    try:
        up1 = _start(lab, prog, 1, label)
        if up1 < 0:
            raise _fail(prog, "exited before RUNNING")
        gen = lab.background(generate, lab.bootstrap, topics[0], p["records"], history, keys=p["keys"],
                             rate=p["rate"], id_prefix=f"{app_id}-")
        feed = p["records"] / p["rate"]
        processed = lambda: max([r.get("processed", 0) for r in prog.lab_lines(kind="commit")] or [0])  # noqa: E731
        lab.wait(lambda: not prog.alive() or (gen.done and processed() >= p["records"]), feed + 60,
                 f"{label}: the crash at record {p['crash_at']}" if point != "none" else f"{label}: all records")
        crashed_at, restarted = None, None
        if not prog.alive():
            ev = app_events(prog.log_path)
            if ev["crash"] is None:
                raise _fail(prog, "exited without crashing")
            crashed_at = ev["crash"]["ts"]
            lab.event(prog.name, f"halt: {point}", crashed_at, tone="fault",
                      detail=json.dumps({k: v for k, v in ev["crash"].items() if k not in ("kind", "ts")}))
            lab.say(f"{label}: halted at {point} ({time.time() - t0:.1f} s in); restarting it")
            prog.stop()   # reap the halted JVM
            restarted = time.time()
            if _start(lab, prog, 2, label) < 0:
                raise _fail(prog, "the restarted app died")
        gen.result(feed + 60)
        ids = set(history.frame("produced")["id"])
        lab.wait(lambda: ids <= tail.ids(), 90, f"{label}: all {len(ids)} inputs in the committed output",
                 evidence=lambda: f"{len(tail.rows)} committed output records", child=prog.process)
    finally:
        tail.close()
        prog.stop()
    stopped = time.time()
    produced = history.frame("produced").to_dict("records")
    committed, uncommitted = drain(lab.bootstrap, topics[1], "read_committed"), drain(lab.bootstrap, topics[1],
                                                                                      "read_uncommitted")
    counts = drain(lab.bootstrap, topics[2], "read_committed")
    m = measure(produced, committed, uncommitted, counts)
    ev = app_events(prog.log_path)
    r2 = ev["restores"].get(2, {})
    run2 = ev["running"].get(2)
    m.update({"crashed": crashed_at is not None, "crash_t_s": None if crashed_at is None else round(crashed_at - lab.t0, 2),
              "crash": ev["crash"], "restored": r2.get("restored", 0) if r2 else 0,
              "restore_s": round(r2["end"] - r2["start"], 2) if r2 and r2.get("start") and r2.get("end") else None,
              "downtime_s": round(run2 - crashed_at, 2) if run2 and crashed_at else None,
              "state_wiped": bool(crashed_at and grep(prog.log_path, WIPE_LINE, since=restarted)),
              "commits": len(ev["commits"]),
              # the killed producer: what Streams' producer got from InitProducerId before the halt
              "producer_ids": sorted(producer_ids(prog.log_path, until=crashed_at))})
    _draw_crash(lab, prog, label, ev, m, t0, stopped)
    return Crash(label, point, guarantee, p["streams_version"], app_id, history, topics, m, prog.log_path,
                 _timeline(lab, prog, ev, m))


def _draw_crash(lab, prog, label, ev, m, t0, stopped):
    for r in ev["commits"]:
        lab.event(prog.name, "commit", r["ts"], tone="mitigation", detail=f"{r.get('processed')} processed")
    for inc, r in ev["restores"].items():
        if r.get("start") and r.get("end"):
            lab.event(prog.name, f"restore #{inc}", r["start"], end=max(r["end"], r["start"] + 0.05), tone="wait",
                      detail=f"{r['restored']} records restored")
    if m["aborted_visible"]:
        lab.event(prog.name, "aborted (read_uncommitted)", m["aborted_first_ts"],
                  end=max(m["aborted_last_ts"], m["aborted_first_ts"] + 0.05), tone="failure",
                  detail=f"{m['aborted_visible']} records of aborted transactions")


def _timeline(lab: Run, prog: JavaProgram, ev: dict, m: dict) -> Timeline:
    """This run's own timeline: incarnations, crash, restore, commits, aborted records, duplicates."""
    tl, lane = Timeline(lab.t0), prog.name
    own = [e for e in lab.timeline.events if e.lane == lane]
    tl.events.extend(own)
    if m["duplicates"]:
        tl.add(lane, f"{m['duplicates']} duplicate(s) committed", ev["running"].get(2) or time.time(), tone="failure")
    return tl


# ------------------------------------------------------------------ handlers and schema: failing apps

def _watch(lab: Run, prog: JavaProgram, label: str, done, p: dict, timeout: float) -> dict:
    """Run `prog` until done(), or until it has been failing for LOOP_SECONDS: a dead app is restarted
    from outside (the deployment); a thread that REPLACE_THREAD replaces keeps failing inside."""
    first_failure, deaths, incarnation, end = None, [], prog.properties["lab.incarnation"], time.time() + timeout
    while time.time() < end:
        lab.check()
        if done():
            break
        if not prog.alive():
            deaths.append(time.time())
            lab.event(prog.name, "app died", deaths[-1], tone="failure")
            first_failure = first_failure or deaths[-1]
            if time.time() - first_failure >= p["loop_seconds"]:
                break
            prog.stop()
            incarnation += 1
            lab.say(f"{label}: the app died; the deployment restarts it (#{incarnation})")
            _start(lab, prog, incarnation, label)
            continue
        uncaught = prog.lab_lines(kind="uncaught")
        if uncaught and first_failure is None:
            first_failure = uncaught[0]["ts"]
        if first_failure and time.time() - first_failure >= p["loop_seconds"]:
            break
        time.sleep(0.3)
    return {"deaths": deaths, "first_failure": first_failure, "incarnations": incarnation}


def _failing_run(lab: Run, label: str, app_id: str, version: str, p: dict, phases: list,
                 drops_inputs: bool = True) -> "Failing":
    """Shared by handler and schema runs: the generator feeds all records while `phases` run in turn:
    (name, lab properties, until) where until is a fraction of the records processed, or None (the last)."""
    history = History(lab.folder / app_id / "history", app_id)
    topics = lab.topics(f"{app_id}-input", f"{app_id}-output", f"{app_id}-counts", partitions=p["partitions"])
    tail = Tail(lab.bootstrap, topics[1])
    gen = None
    progs, watched = [], {}
    try:
        for k, (name, props, until) in enumerate(phases):
            prog = _app(lab, f"{_slug(label)}-{name}", props.pop("version", version), app_id, topics,
                        "exactly_once_v2", p, **props)
            progs.append(prog)
            if _start(lab, prog, 1, f"{label} ({name})") < 0:
                watched = {"deaths": [time.time()], "first_failure": time.time(), "incarnations": 1}
            if gen is None:
                gen = lab.background(generate, lab.bootstrap, topics[0], p["records"], history, keys=p["keys"],
                                     rate=p["rate"], id_prefix=f"{app_id}-")
                if props.get("lab_strict_input") == "true":
                    lab.countdown("half the input, then a malformed record", p["records"] / p["rate"] / 2)
                    _produce_raw(lab.bootstrap, topics[0], b"\x00not json")
                    lab.event(prog.name, "malformed input record", tone="fault")
            feed = p["records"] / p["rate"]
            if until is not None:   # a clean phase: run while that share of the input arrives, then stop cleanly
                lab.countdown(f"{label}: {name} runs while {until:.0%} of the input arrives", feed * until,
                              done=lambda: not prog.alive())
                if not prog.alive():
                    raise _fail(prog, f"{name} died")
                prog.stop()
                lab.event(prog.name, f"{name} stopped (clean)", tone="info")
                continue
            ids = lambda: set(history.frame("produced")["id"]) if gen.done else None  # noqa: E731

            def done():
                # a handler that drops inputs: what it dropped never comes out
                want, dropped = ids(), app_events(prog.log_path)["dropped_records"] if drops_inputs else 0
                return want is not None and len(want - tail.ids()) <= dropped
            if not watched:
                watched = _watch(lab, prog, label, done, p, feed + 60 + p["loop_seconds"])
        gen.result(p["records"] / p["rate"] + 60)
    finally:
        tail.close()
        for prog in progs:
            prog.stop()
    produced = history.frame("produced").to_dict("records")
    m = measure(produced, drain(lab.bootstrap, topics[1], "read_committed"),
                drain(lab.bootstrap, topics[1], "read_uncommitted"), drain(lab.bootstrap, topics[2], "read_committed"))
    last = progs[-1]
    ev = app_events(last.log_path)
    uncaught = [r["ts"] for r in ev["uncaught"]]
    deaths = watched.get("deaths", [])
    failures = sorted(uncaught + [d for d in deaths if not any(abs(d - u) < 5 for u in uncaught)])
    m.update({"version": last.version, "uncaught": len(ev["uncaught"]), "deaths": len(deaths),
              "restarts": max(watched.get("incarnations", 1) - 1, 0),
              "failures_per_min": loop_rate(failures), "dropped_records": ev["dropped_records"],
              "migrated": len(ev["migrated"]), "errors": sorted({r.get("error", "")[:160] for r in ev["uncaught"]}),
              "responses": sorted({r.get("response") for r in ev["uncaught"]}),
              "watched_s": round(time.time() - watched["first_failure"], 1) if watched.get("first_failure") else None})
    for r in ev["uncaught"]:
        lab.event(last.name, f"uncaught → {r.get('response')}", r["ts"], tone="failure", detail=r.get("error", ""))
    if ev["dropped_records"]:
        lab.event(last.name, f"dropped-records = {ev['dropped_records']}", tone="fault")
    tl = Timeline(lab.t0)
    tl.events.extend(e for e in lab.timeline.events if e.lane in {pr.name for pr in progs})
    return Failing(label, app_id, last.version, history, topics, m, {pr.name: pr.log_path for pr in progs}, tl)


def _produce_raw(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer
    producer = Producer({**kafka_config(bootstrap), "log_level": 0})
    producer.produce(topic, key=b"k0", value=value)
    if producer.flush(30):
        raise LabError(f"The malformed record to {topic} was not delivered.")


def _deser_key(version: str) -> str:
    return ("deserialization.exception.handler" if parse_version(version) >= (4, 0, 0)
            else "default.deserialization.exception.handler")


def handler_props(handler: str, version: str, poison: str) -> dict:
    """The app's configuration for one handler run."""
    props = {"lab_handler": "replace_thread" if handler == "replace_thread" else "shutdown_client"}
    if handler == "deserialization":
        props.update({"lab_strict_input": "true", _deser_key(version): DESER_CONTINUE})
    else:
        props["lab_poison_id"] = poison
    if handler == "continue":
        props["processing.exception.handler"] = CONTINUE_HANDLER
    return props


def _handler_run(lab: Run, handler: str, p: dict) -> "Failing":
    label, version = f"handler {handler}", p["handler_version"]
    app_id = f"{lab.id}-h-{_slug(handler)}"
    poison = f"{app_id}-{p['records'] // 2}"
    lab.phase(f"{label}: Kafka Streams {version}, exactly_once_v2, "
              + ("a malformed input record" if handler == "deserialization" else f"poison record {poison}"))
    result = _failing_run(lab, label, app_id, version, p, [("app", handler_props(handler, version, poison), None)],
                          drops_inputs=handler != "deserialization")
    result.poison = None if handler == "deserialization" else poison
    return result


def _schema_run(lab: Run, mode: str, p: dict) -> "Failing":
    label, version = f"schema {mode}", schema_version(mode, p)
    app_id = f"{lab.id}-s-{_slug(mode)}"
    lab.phase(f"{label}: version 1 writes {{\"count\": n}}, version 2 (Kafka Streams {version}, same application.id) "
              + ("reads both schemas (tolerant reader, migrates on read)" if mode == "tolerant"
                 else "expects {\"schema\": 2, \"total\": n}"))
    v2 = {"lab_mode": "v2-tolerant" if mode == "tolerant" else "v2",
          "lab_handler": "replace_thread" if mode == "replace_thread" else "shutdown_client"}
    if mode == "continue":
        v2["processing.exception.handler"] = CONTINUE_HANDLER
    result = _failing_run(lab, label, app_id, version, p, [("v1", {"lab_mode": "v1"}, 0.4), ("v2", v2, None)])
    result.poison = None
    return result


# ------------------------------------------------------------------ the result

@dataclass
class Crash:
    """One crash point x guarantee run."""
    label: str
    point: str
    guarantee: str
    version: str
    app_id: str
    history: History
    topics: list
    m: dict
    log: object
    timeline: Timeline
    audit: object = None
    markers: list = field(default_factory=list)   # the broker's COMMIT / ABORT markers on the output topic

    @property
    def anomalies(self) -> int:
        return self.m["duplicates"] + self.m["lost"] + self.m["overcount"] + self.m["undercount"]

    def summary(self) -> dict:
        m = self.m
        keep = ("crashed", "crash_t_s", "produced", "outputs", "duplicates", "lost", "wrong_values", "overcount",
                "undercount", "aborted_visible", "restored", "restore_s", "downtime_s", "state_wiped", "commits",
                "producer_ids", *MARKER_COUNTS)
        return {"crash_point": self.point, "guarantee": self.guarantee, "version": self.version,
                **{k: m.get(k) for k in keep},
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}

    def why(self) -> str:
        m, g = self.m, self.guarantee
        if not m["crashed"]:
            if self.point == "none":
                return (f"no crash (the control): {m['outputs']} outputs for {m['produced']} inputs, "
                        f"{m['duplicates']} duplicate(s), {m['lost']} lost, counts off by {m['overcount'] + m['undercount']}.")
            return (f"the app never reached its crash point ({self.point} at record N): "
                    + ("no commit covered record N while input still flowed (the next commit came with the last "
                       "records): give more RECORDS or a shorter COMMIT_INTERVAL_MS. " if self.point == "after_commit"
                       else "fewer records than CRASH_AT, or no commit before the input ended? ")
                    + f"{m['duplicates']} duplicate(s), {m['lost']} lost.")
        c = m["crash"] or {}
        at = f"halted at {self.point} ({c.get('processed', '?')} processed, {c.get('acked', '?')} acked)"
        if g == "exactly_once_v2":
            base = (f"{at}; the restart fenced the killed producer and its open transaction was aborted: "
                    f"read_uncommitted saw {m['aborted_visible']} aborted record(s), read_committed "
                    f"{m['duplicates']} duplicate(s), {m['lost']} lost, counts off by {m['overcount'] + m['undercount']}")
            if m.get("aborts_after") is not None:
                base += (f"; the broker wrote {m['aborts_after']} ABORT marker(s) for producer "
                         f"{', '.join(map(str, m['producer_ids']))} {m['first_abort_after_s']} s after the halt, "
                         f"closing {m['aborted_by_markers']} record(s)")
            return base + (" (the state was wiped and restored from the changelog: "
                           f"{m['restored']} records in {m['restore_s']} s)." if m["state_wiped"] else ".")
        if m["duplicates"]:
            return (f"{at}; the offsets of the records processed since the last commit were not committed, so the "
                    f"restart processed them again: {m['duplicates']} duplicate output(s), and their increments "
                    f"were already in the changelog, so counts over-count by {m['overcount']}.")
        return (f"{at}; nothing was in flight since the last commit, so nothing was redone: 0 duplicates"
                + (", counts exact." if not m["overcount"] else f", yet counts over-count by {m['overcount']}."))


@dataclass
class Failing:
    """One handler or schema-change run."""
    label: str
    app_id: str
    version: str
    history: History
    topics: list
    m: dict
    logs: dict
    timeline: Timeline
    poison: str | None = None
    audit: object = None

    @property
    def outcome(self) -> str:
        m = self.m
        if m["uncaught"] >= 2 and "REPLACE_THREAD" in m["responses"]:
            return "crash loop (threads replaced)"
        if m["deaths"]:
            return "app stopped" + (" (restarted, died again)" if m["deaths"] > 1 else "")
        if m["lost"]:
            return "records dropped"
        return "clean"

    def summary(self) -> dict:
        keep = ("version", "produced", "outputs", "duplicates", "lost", "lost_ids", "wrong_values", "overcount",
                "aborted_visible", "uncaught", "deaths", "restarts", "failures_per_min", "dropped_records",
                "migrated", "errors", "watched_s")
        return {"outcome": self.outcome, "poison": self.poison,
                "poison_lost": self.poison is not None and self.poison in self.m.get("lost_all", ()),
                **{k: self.m[k] for k in keep},
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}


@dataclass
class EosCrashResult(Result):
    crashes: dict = field(default_factory=dict)     # "point · EOS v2" -> Crash
    handlers: dict = field(default_factory=dict)    # handler -> Failing
    schema: dict = field(default_factory=dict)      # mode -> Failing
    bootstrap: str = ""
    broker_log: object = None
    peak_rss_mb: dict = field(default_factory=dict)   # "apps" (the Streams JVMs, at one instant), "brokers"
    solved: dict = field(default_factory=dict)
    title = "Crashes, restarts, commits, aborted transactions"

    @property
    def failed(self) -> bool:
        """Something went wrong that a user would notice: a duplicate, a lost record, a wrong count, an app
        that stopped or loops."""
        return (any(c.anomalies for c in self.crashes.values())
                or any(f.outcome != "clean" for f in [*self.handlers.values(), *self.schema.values()]))

    def eos(self) -> dict:
        return {k: c for k, c in self.crashes.items() if c.guarantee == "exactly_once_v2"}

    def verdict(self) -> str:
        parts = []
        for g in GUARANTEES:
            runs = [c for c in self.crashes.values() if c.guarantee == g]
            if runs:
                crashed = sum(c.m["crashed"] for c in runs)
                parts.append(f"{SHORT[g]}: {crashed} crash(es) in {len(runs)} run(s), "
                             f"{sum(c.m['duplicates'] for c in runs)} duplicate(s), {sum(c.m['lost'] for c in runs)} lost, "
                             f"counts off by {sum(c.m['overcount'] + c.m['undercount'] for c in runs)}, "
                             f"{sum(c.m['aborted_visible'] for c in runs)} aborted record(s) seen by read_uncommitted")
        parts += [f"{f.label}: {f.outcome}" for f in [*self.handlers.values(), *self.schema.values()]]
        return "; ".join(parts) or "nothing ran"

    def explain(self) -> str:
        return "\n".join(f"- **{k}**: {c.why()}" for k, c in self.crashes.items())

    def closing(self) -> str:
        """The notebook's closing note: the figures this run measured, one line per part."""
        lines = []
        for g in GUARANTEES:
            runs = [c for c in self.crashes.values() if c.guarantee == g and c.m["crashed"]]
            if not runs:
                continue
            points = ", ".join(f"{c.point} ({c.m['duplicates']} dup, {c.m['aborted_visible']} aborted)" for c in runs)
            lines.append(f"- **{g}**, {len(runs)} crash(es): {sum(c.m['duplicates'] for c in runs)} duplicate(s), "
                         f"{sum(c.m['lost'] for c in runs)} lost, counts off by "
                         f"{sum(c.m['overcount'] + c.m['undercount'] for c in runs)}; per point: {points}.")
        restores = [c.m["restore_s"] for c in self.crashes.values() if c.m["crashed"] and c.m["restore_s"] is not None]
        downs = [c.m["downtime_s"] for c in self.crashes.values() if c.m["downtime_s"] is not None]
        if downs:
            lines.append(f"- A restart took {min(downs)}-{max(downs)} s to run again, of which the store restore "
                         f"{min(restores, default=0)}-{max(restores, default=0)} s.")
        for f in [*self.handlers.values(), *self.schema.values()]:
            m = f.m
            rate = f", {m['failures_per_min']} failures/min" if m["failures_per_min"] else ""
            lines.append(f"- **{f.label}** (Kafka Streams {f.version}): {f.outcome}; {m['outputs']} of {m['produced']} "
                         f"inputs out, {m['lost']} lost, {m['uncaught']} uncaught exception(s), {m['deaths']} app "
                         f"death(s){rate}, dropped-records {m['dropped_records']}"
                         + (f", {m['migrated']} key(s) migrated on read" if m["migrated"] else "") + ".")
        return "\n".join(lines) or "Nothing ran."

    def table(self):
        """Crash point x guarantee: duplicates, lost, wrong counts, aborted records, restore."""
        import pandas as pd
        rows = [{"crash point": c.point, "guarantee": c.guarantee, "crashed": c.m["crashed"],
                 "duplicates": c.m["duplicates"], "lost": c.m["lost"], "overcount": c.m["overcount"],
                 "aborted seen by read_uncommitted": c.m["aborted_visible"],
                 "COMMIT markers": c.m.get("commit_markers"), "ABORT markers after crash": c.m.get("aborts_after"),
                 "audit (dup/lost/stale)": _audit_cell(c.audit), "restored records": c.m["restored"],
                 "restore (s)": c.m["restore_s"], "down (s)": c.m["downtime_s"], "state wiped": c.m["state_wiped"]}
                for c in self.crashes.values()]
        return pd.DataFrame(rows)

    def handler_table(self, which: str = "handlers"):
        import pandas as pd
        runs = self.handlers if which == "handlers" else self.schema
        rows = [{"run": k, "Kafka Streams": f.version, "outcome": f.outcome, "outputs": f.m["outputs"],
                 "of inputs": f.m["produced"], "lost (not in output)": f.m["lost"],
                 "dropped-records": f.m["dropped_records"], "uncaught": f.m["uncaught"], "app deaths": f.m["deaths"],
                 "failures / min": f.m["failures_per_min"], "migrated on read": f.m["migrated"],
                 "audit (dup/lost)": _audit_cell(f.audit)} for k, f in runs.items()]
        return pd.DataFrame(rows)

    def figure(self, label: str | None = None):
        if label is None:
            label = next((k for k, c in self.crashes.items() if c.m["crashed"]), next(iter(self.crashes), None))
        runs = {r.label: r for r in [*self.crashes.values(), *self.handlers.values(), *self.schema.values()]}
        run = runs.get(label) or self.handlers.get(label) or self.schema.get(label)
        if run is None:
            return self.timeline.figure(self.title)
        return run.timeline.figure(f"{run.label}: {getattr(run, 'outcome', None) or run.why()[:90]}")

    def broker_lines(self, label: str | None = None, limit: int = 6) -> list[str]:
        """The broker's transaction coordinator lines about a run's transactional ids (aborts, epochs)."""
        if self.broker_log is None:
            return []
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return []
        return [_short(line) for _, line in grep(self.broker_log, re.escape(run.app_id))
                if re.search(r"TransactionCoordinator|[Rr]ollback", line)][-limit:]

    def marker_lines(self, label: str, before: int = 2) -> list[str]:
        """The killed producer's last COMMIT markers before the halt and every marker after it."""
        run = self.crashes[label]
        if not run.markers:
            return ["(no markers read: an external cluster, or no transaction)"]
        at = run.m["crash"]["ts"] if run.m["crashed"] else float("inf")
        mine = sorted((mk for mk in run.markers if mk["producer_id"] in run.m["producer_ids"]),
                      key=lambda mk: mk["timestamp"])
        shown = [mk for mk in mine if mk["timestamp"] < at][-before:] + [mk for mk in mine if mk["timestamp"] >= at]
        return [f"{mk['timestamp'] - at:+.2f} s {describe(mk)}" if at != float("inf") else describe(mk)
                for mk in shown]

    def streams_lines(self, label: str | None = None, limit: int = 8) -> list[str]:
        """Kafka Streams' own lines of the restart: the fencing epoch and the wiped state."""
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return []
        return [_short(line) for _, line in grep(run.log, f"{EPOCH_LINE}|{WIPE_LINE}|lab: start")][:limit]

    def evidence(self, label: str | None = None) -> str:
        """The broker's and the restarted app's own lines about the first crashed exactly-once run."""
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return "No exactly-once run crashed in this run (the control): no fencing, no aborted transaction to show."
        broker = self.broker_lines(run.label) or ["(no broker log: an external cluster)"]
        return (f"{run.label}, the broker's transaction coordinator:\n" + "\n".join(broker)
                + "\n\nthe transaction markers it wrote on the output topic, around the halt:\n"
                + "\n".join(self.marker_lines(run.label))
                + "\n\nthe app, first start and restart:\n" + "\n".join(self.streams_lines(run.label)))

    def audit(self) -> dict:
        """The Spark audit of every run's committed (and uncommitted) output against the generator's truth."""
        from concurrent.futures import ThreadPoolExecutor

        from ...audit import audit
        from ...spark import spark_session
        jobs = {}
        for c in self.crashes.values():
            clean = c.guarantee == "exactly_once_v2" or c.point not in IN_FLIGHT   # the mechanism's prediction
            jobs[c.label] = (c, dict(expect="clean" if clean else "anomalies", kinds=KINDS,
                                     aborted_reader="read_committed"))
        for f in [*self.handlers.values(), *self.schema.values()]:
            jobs[f.label] = (f, dict(expect="clean" if f.outcome == "clean" else "anomalies",
                                     kinds=["duplicate", "lost"], allow_empty=True))
        spark = spark_session()   # one session, several small audits at once: each is mostly waiting on Kafka
        with ThreadPoolExecutor(4) as pool:
            futures = {k: pool.submit(audit, run.history, bootstrap=self.bootstrap, output_topic=run.topics[1],
                                      spark=spark, **kw) for k, (run, kw) in jobs.items()}
            for k, future in futures.items():
                jobs[k][0].audit = future.result()
        return {k: run.audit for k, (run, _) in jobs.items()}

    def check(self, number: int, answer) -> bool:
        self.solved[number] = super().check(number, answer)
        return self.solved[number]

    def record_fields(self) -> dict:
        eos = list(self.eos().values())
        alos = [c for c in self.crashes.values() if c.guarantee == "at_least_once"]
        return {"streams_version": self.params["streams_version"],
                "crashes": {k: c.summary() for k, c in self.crashes.items()},
                "eos_runs": len(eos), "eos_crashed": sum(c.m["crashed"] for c in eos),
                "eos_duplicates": sum(c.m["duplicates"] for c in eos), "eos_lost": sum(c.m["lost"] for c in eos),
                "eos_count_errors": sum(c.m["overcount"] + c.m["undercount"] for c in eos),
                "eos_aborted_visible": sum(c.m["aborted_visible"] for c in eos),
                "eos_aborts_after": _total(c.m.get("aborts_after") for c in eos if c.m["crashed"]),
                "alos_markers": _total(c.m.get("markers") for c in alos),
                "alos_duplicates": {c.point: c.m["duplicates"] for c in alos},
                "alos_overcount": {c.point: c.m["overcount"] for c in alos},
                "handlers": {k: f.summary() for k, f in self.handlers.items()},
                "schema": {k: f.summary() for k, f in self.schema.items()},
                "peak_rss_mb": self.peak_rss_mb, "exercises_ok": [self.solved.get(n, False) for n in (1, 2)]}


def _total(values):
    """A sum over runs, None when the markers were not read (an external cluster)."""
    values = list(values)
    return None if None in values else sum(values)


def _short(line: str, width: int = 240) -> str:
    """A log4j line without its thread name: stamp, level, message."""
    m = re.match(r"^\[([^\]]+)\] (\w+) \[[^\]]*\] (.*)$", line)
    return (f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else line)[:width]


def _audit_cell(verdict) -> str:
    if verdict is None:
        return "not audited"
    c = verdict.counts
    return "/".join(str(c.get(k)) for k in ("duplicate", "lost", "stale_value") if k in c)


def _exercise_1(result: EosCrashResult, answer) -> None:
    """Which crash points gave duplicates under at-least-once?"""
    expected = sorted(c.point for c in result.crashes.values() if c.guarantee == "at_least_once" and c.m["duplicates"])
    assert sorted(answer) == expected, f"you said {sorted(answer)}; the runs measured duplicates at {expected}"


def _exercise_2(result: EosCrashResult, answer) -> None:
    """How many records did read_uncommitted see in aborted transactions, over all exactly-once runs?"""
    expected = sum(c.m["aborted_visible"] for c in result.eos().values())
    assert answer == expected, f"you said {answer}; the exactly-once runs left {expected} aborted record(s)"


EosCrashResult.exercises = {1: _exercise_1, 2: _exercise_2}
