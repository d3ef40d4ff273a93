"""A failing app, run and watched as a deployment would (lessons 05b to 05d: the handler, production-error and schema
runs): _failing_run runs the app's phases while the generator feeds the input, then drains and measures its
topics (a Failing); _watch restarts an app that died until it has failed for WATCH_SECONDS.
"""
from __future__ import annotations

import threading
import time

from ...toolbox import Run, Timeline
from ...toolbox.consume import TopicReader
from ...record.generator import generate
from ...record.history import History
from ...runtime.programs import JavaProgram
from .analysis import app_events, loop_rate, measure
from .report import Failing
from .streams_app import _app, _fail, _slug, _start
from .topic_io import _produce_raw, drain


def _watch(lab: Run, prog: JavaProgram, label: str, done, p: dict, timeout: float) -> dict:
    """Run `prog` until done(), or until it has been failing for WATCH_SECONDS: a dead app is restarted
    from outside (the deployment); a thread that REPLACE_THREAD replaces keeps failing inside. An app restarted
    within the watch gets WATCH_SECONDS of its own to die again or get the inputs out: on a busy machine its start
    alone can outlast what was left of the watch. `done`: whether the watch ended because done() came true (every
    input out, but for what a handler dropped)."""
    first_failure, deaths, incarnation, end = None, [], prog.properties["lab.incarnation"], time.time() + timeout
    finished, restarted_at = False, None
    while time.time() < end:
        lab.check()
        if done():
            finished = True
            break
        if not prog.alive():
            deaths.append(time.time())
            lab.event(prog.name, "app died", deaths[-1], tone="failure")
            first_failure = first_failure or deaths[-1]
            if time.time() - first_failure >= p["watch_seconds"]:
                break
            prog.stop()
            incarnation += 1
            lab.say(f"{label}: the app died; the deployment restarts it (#{incarnation})")
            _start(lab, prog, incarnation, label)
            restarted_at = time.time()
            continue
        uncaught = prog.lab_lines(kind="uncaught")
        if uncaught and first_failure is None:
            first_failure = uncaught[0]["ts"]
        if first_failure and time.time() - max(first_failure, restarted_at or 0) >= p["watch_seconds"]:
            break
        time.sleep(0.3)
    return {"deaths": deaths, "first_failure": first_failure, "incarnations": incarnation, "done": finished}


def _failing_run(lab: Run, label: str, app_id: str, version: str, p: dict, phases: list,
                 drops_inputs: bool = True, guarantee: str = "exactly_once_v2",
                 output_config: dict | None = None) -> "Failing":
    """Shared by handler, production-error and schema runs: the generator feeds all records while `phases` run in
    turn: (name, lab properties, until) where until is a fraction of the records processed, or None (the last).
    `output_config`: the output topic's own configuration (its max.message.bytes, for the production errors)."""
    history = History(lab.folder / app_id / "history", app_id)
    topics = [f"{app_id}-input", f"{app_id}-output", f"{app_id}-counts"]
    lab.topics(topics[0], topics[2], partitions=p["partitions"])
    lab.topics(topics[1], partitions=p["partitions"], config=output_config)
    output = TopicReader(lab.bootstrap, topics[1])
    gen = None
    progs, watched = [], {}
    # A clean first phase gets its share of the input and no more: the rest is held until it has stopped, so the
    # next phase meets its state however fast or slow each app starts (its stop takes a second or two)
    first_share = int(p["records"] * phases[0][2]) if phases[0][2] is not None else None
    released = threading.Event()
    try:
        for k, (name, props, until) in enumerate(phases):
            prog = _app(lab, f"{_slug(label)}-{name}", props.pop("version", version), app_id, topics,
                        guarantee, p, **props)
            progs.append(prog)
            if _start(lab, prog, 1, f"{label} ({name})") < 0:
                watched = {"deaths": [time.time()], "first_failure": time.time(), "incarnations": 1}
            if gen is None:
                gen = lab.background(generate, lab.bootstrap, topics[0], p["records"], history, keys=p["keys"],
                                     rate=p["rate"], id_prefix=f"{app_id}-",
                                     hold=(first_share, released.is_set) if first_share is not None else None)
                if props.get("lab_strict_input") == "true":
                    lab.countdown("half the input, then a malformed record", p["records"] / p["rate"] / 2)
                    _produce_raw(lab.bootstrap, topics[0], b"\x00not json")
                    lab.event(prog.name, "malformed input record", tone="fault")
            feed = p["records"] / p["rate"]
            if until is not None:   # a clean phase: run until it has processed its share of the input, then stop
                share = int(p["records"] * until)
                lab.wait(lambda: len(output.ids()) >= share or not prog.alive(), feed * until + 60,
                         f"{name} to process {until:.0%} of the input", evidence=lambda: len(output.ids()))
                if not prog.alive():
                    raise _fail(prog, f"{name} died")
                prog.stop()
                released.set()
                lab.event(prog.name, f"{name} stopped (clean)", tone="info")
                continue
            ids = lambda: set(history.frame("produced")["id"]) if gen.done else None  # noqa: E731

            def done():
                # a handler that drops inputs: what it dropped never comes out
                want, dropped = ids(), app_events(prog.log_path)["dropped_records"] if drops_inputs else 0
                return want is not None and len(want - output.ids()) <= dropped
            if not watched:
                watched = _watch(lab, prog, label, done, p, feed + 60 + p["watch_seconds"])
        gen.result(p["records"] / p["rate"] + 60)
    finally:
        released.set()   # a phase that died leaves no generator waiting on it
        output.close()
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
    restarts = max(watched.get("incarnations", 1) - 1, 0)
    m.update({"version": last.version, "guarantee": guarantee, "uncaught": len(ev["uncaught"]),
              "deaths": len(deaths), "restarts": restarts,
              # restarted after a stop, the app got every input out and its last incarnation never failed
              "carried_on": bool(restarts and watched.get("done") and not any(
                  r.get("incarnation") == watched.get("incarnations") for r in ev["uncaught"])),
              "failures_per_min": loop_rate(failures), "dropped_records": ev["dropped_records"],
              "migrated": len(ev["migrated"]), "errors": sorted({r.get("error", "")[:160] for r in ev["uncaught"]}),
              "responses": sorted({r.get("response") for r in ev["uncaught"]}),
              "wrappers": sorted({r["wrapper"] for r in ev["uncaught"] if r.get("wrapper")}),
              # a production-error run: the refused output's size as the app made it, what the handler was told
              "output_bytes": max((r.get("bytes", 0) for r in ev["padded"]), default=None),
              "refused": [{k: r.get(k) for k in ("id", "bytes", "error", "response")} for r in ev["refused"]],
              "watched_s": round(time.time() - watched["first_failure"], 1) if watched.get("first_failure") else None})
    for r in ev["uncaught"]:
        lab.event(last.name, f"uncaught → {r.get('response')}", r["ts"], tone="failure", detail=r.get("error", ""))
    if ev["dropped_records"]:
        lab.event(last.name, f"dropped-records = {ev['dropped_records']}", tone="fault")
    tl = Timeline(lab.t0)
    tl.events.extend(e for e in lab.timeline.events if e.lane in {pr.name for pr in progs})
    return Failing(label, app_id, last.version, history, topics, m, {pr.name: pr.log_path for pr in progs}, tl)
