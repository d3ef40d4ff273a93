"""Lesson 05a, a crash at every point: per crash point x guarantee, one EosCrashApp halted once at its point and
restarted, its topics drained and measured (a Crash each); then the broker's transaction markers on every crash
run's output topic (_markers).
"""
from __future__ import annotations

import json
import time

from ...toolbox import Run, Timeline, grep
from ...toolbox.consume import TopicReader
from ...record.evidence import STATE_WIPE
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from ...toolbox.markers import around, draw, producer_ids, transaction_versions
from ...record.generator import HOLD_S, generate
from ...record.history import History
from ...runtime.programs import JavaProgram
from . import eos_crashes as chapter
from .analysis import app_events, measure
from .exercises import EXERCISES
from .answers import output_answer
from .report import Crash, EosCrashResult
from .streams_app import SHORT, _app, _fail, _slug, _start
from .topic_io import drain


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
    output, t0 = TopicReader(lab.bootstrap, topics[1]), time.time()
    try:
        up1 = _start(lab, prog, 1, label)
        if up1 < 0:
            raise _fail(prog, "exited before RUNNING")
        # The records from the crash-at-th on come only after the app's first commit: the halt waits for a settled
        # commit, and an app slow to commit (a loaded machine) must still have records to halt on after it.
        first_commit = (p["crash_at"], lambda: bool(prog.lab_lines(kind="commit"))) if point != "none" else None
        gen = lab.background(generate, lab.bootstrap, topics[0], p["records"], history, keys=p["keys"],
                             rate=p["rate"], id_prefix=f"{app_id}-", hold=first_commit)
        feed = p["records"] / p["rate"] + (HOLD_S if first_commit else 0)   # at most: the rate, and the hold
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
        lab.wait(lambda: ids <= output.ids(), 90, f"{label}: all {len(ids)} inputs in the committed output",
                 evidence=lambda: f"{len(output.rows)} committed output records", child=prog.process)
    finally:
        output.close()
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
              "state_wiped": bool(crashed_at and grep(prog.log_path, STATE_WIPE, since=restarted)),   # why, said
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


def run_lesson(lab: Run, p: dict) -> EosCrashResult:
    """Every crash point under every guarantee, one run each, then the broker's markers around each crash."""
    crashes = {f"{point} · {SHORT[g]}": _crash_run(lab, point, g, p) for g in p["guarantees"]
               for point in p["crash_points"]}
    _markers(lab, crashes)
    return EosCrashResult("crashes", p, lab.id, lab.timeline, crashes=crashes, bootstrap=lab.bootstrap,
                          broker_log=chapter._broker_log(lab), transaction_version=_transaction_version(lab, crashes))


def _transaction_version(lab: Run, crashes: dict) -> dict | None:
    """Which transaction version (KIP-890) each exactly-once run's commits ran on (Kafka Streams' transactional ids
    start with the application id)."""
    return transaction_versions(lab, lambda txn_id: next(
        (label for label, c in crashes.items() if txn_id.startswith(f"{c.app_id}-")), None))


lesson = Lesson("crashes", "A crash at every point", needs=chapter.needs, body=run_lesson,
                params=chapter.params("crash_points", "guarantees", "streams_version", "crash_at"),
                rules=[something_to_run("crash_points", "guarantees", every=True)], question=chapter.question,
                measured_answer=output_answer,
                exercises={1: EXERCISES["crashes"]}, apps=(chapter.MAIN,), spark_audit=True)
