"""Lesson 07c, a lookup per record: a local HTTP service (lab/apps/lookup_service.py) answers after LOOKUP_LATENCY_MS;
input arrives at LOOKUP_RATE on LOOKUP_THREADS partitions and one lab/java/ThroughputApp.java per mode (direct,
cache, batch, threads) reads it while its lag is sampled. A mode keeps up when its lag grows by no more than a quarter of the
window's input."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ...apps.lookup_service import LookupService
from ...toolbox import Param
from ...toolbox.admin import group_offsets, topic_offsets
from ...record.generator import generate
from ...record.history import History
from ...toolbox.apps import check_jvms
from ...toolbox.lesson import Lesson
from ...toolbox.result import Exercise, judge_rule, setting
from .throughput import StreamsApp, start_and_settle, stop_apps
from .. import written_fix

MODES = ("direct", "cache", "batch", "threads")   # direct: one call per record, on one thread (the app's "plain")

PARAMS = [
    Param("lookup_modes", ["direct"], "how the app calls the service, one app per mode, side by side: direct (one "
          "call per record, one thread), cache (one call per new key), batch (one call per LOOKUP_BATCH records), "
          "threads (one call per record, on LOOKUP_THREADS threads). The lesson's Run step runs direct, its Mitigate "
          "step the others", choices=MODES),
    Param("lookup_latency_ms", 50, "the service's latency per call", lo=1, hi=5000, unit="ms"),
    Param("lookup_rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("lookup_keys", 20, "distinct keys in the input", lo=1, hi=100_000),
    Param("lookup_batch", 50, "records per call in batch mode", lo=2, hi=10_000),
    Param("lookup_threads", 4, "the input's partitions, and the threads of the threads mode (one per partition)",
          lo=1, hi=8),
    Param("lookup_window_s", 15.0, "the measured window, once every app is running", lo=5, hi=300, unit="s"),
]


def _fits(p: dict) -> str | None:
    return check_jvms(len(p["lookup_modes"]), f"LOOKUP_MODES={p['lookup_modes']}")


RULES = [_fits]

# ThroughputApp's own name for each mode: threads is one call per record on each of its threads
APP_MODE = {"direct": "plain", "threads": "plain"}
# The question leaves out the direct app's threads: that its partitions' tasks share one default stream thread is
# what it asks (the beliefs: lab/commands/misconceptions.py)
HOW = {"direct": "runs one instance and calls the service once for every record in its processor",
       "cache": "calls the service once for every key it has not seen yet, on one stream thread",
       "batch": "calls the service once for every {lookup_batch} records, on one stream thread",
       "threads": "calls the service once for every record, on each of {lookup_threads} stream threads"}
TOLERANCE = 0.35   # of the measured rate: the input rate (no lag) and no records at all (a stall) are refused


def asked_mode(p: dict) -> str:
    """The mode the Predict question is about: one call per record if it runs."""
    return "direct" if "direct" in p["lookup_modes"] else p["lookup_modes"][0]


def question(p: dict) -> tuple:
    """A number: the records a second the asked app processes over the window (right within a quarter of it)."""
    mode = asked_mode(p)
    return (f"Records arrive at {p['lookup_rate']:g} a second on {p['lookup_threads']} partitions. The app "
            f"(`{mode}`) {HOW[mode].format(**p)}, and every call takes {p['lookup_latency_ms']} ms. How many records "
            f"a second does it process over the {p['lookup_window_s']:g} s window?", None, TOLERANCE)


def measured_answer(record: dict, p: dict):
    row = record["lookups"].get(asked_mode(p))
    return None if row is None else row["records_per_s"]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def capacity(p: dict, mode: str) -> float | None:
    """Records per second the arithmetic allows a mode; None for the cache (once warm, no call at all)."""
    per_thread = 1000 / p["lookup_latency_ms"]
    return {"direct": per_thread, "threads": per_thread * p["lookup_threads"],
            "batch": per_thread * p["lookup_batch"]}.get(mode)


def run_lesson(lab, p: dict) -> "Outcome":
    partitions = p["lookup_threads"]
    topic = lab.topics(f"lookup-input-{lab.id[-6:]}", partitions=partitions)[0]
    stop_input = threading.Event()
    with LookupService(p["lookup_latency_ms"]) as service:
        feeding = lab.background(generate, lab.bootstrap, topic, None, History(lab.folder / "lookup-input", lab.id),
                                 keys=p["lookup_keys"], rate=p["lookup_rate"], until=stop_input, name="input")
        try:
            apps = {mode: StreamsApp(lab, f"lookup-{mode}", topic, instances=1,
                                     threads=partitions if mode == "threads" else 1, lookup_url=service.url,
                                     lookup_mode=APP_MODE.get(mode, mode),
                                     batch_size=p["lookup_batch"], lookup_latency_ms=p["lookup_latency_ms"])
                    for mode in p["lookup_modes"]}
            start_and_settle(lab, apps.values(), partitions, "the lookup apps to settle")
            groups = {mode: a.app_id for mode, a in apps.items()}
            lags: dict = {mode: [] for mode in apps}
            admin = lab.cluster.admin()

            def sample():
                ends = topic_offsets(admin, topic, partitions)
                committed = group_offsets(admin, groups, topic)
                now = time.time() - lab.t0
                for mode in apps:
                    mine = committed.get(mode) or {}
                    lags[mode].append((now, sum(ends[q] - (mine.get(q) or 0) for q in range(partitions))))

            start = time.time()
            sample()
            lab.countdown("measuring the lookup apps", p["lookup_window_s"], done=lambda: sample() and False)
            end = time.time()
        finally:
            stop_input.set()
        feeding.result(timeout=30)
        stop_apps(apps.values())
    rows = []
    for mode, app in apps.items():
        rate = sum(app.rates(start, end).values())
        series = lags[mode]
        growth = series[-1][1] - series[0][1]
        rows.append({"mode": mode, "records_per_s": round(rate, 1), "input_per_s": p["lookup_rate"],
                     "capacity_per_s": None if capacity(p, mode) is None else round(capacity(p, mode), 1),
                     "calls_per_s": round(app.calls(start, end) / (end - start), 1),
                     "lag_start": series[0][1], "lag_end": series[-1][1], "lag_growth": growth,
                     "keeps_up": growth <= 0.25 * p["lookup_rate"] * (end - start)})
        lab.event("lookups", mode, detail=f"{rate:.0f} records/s, lag {series[0][1]} -> {series[-1][1]}",
                  tone="control" if rows[-1]["keeps_up"] else "failure")
    return Outcome(rows, lags, p["lookup_latency_ms"], service.calls)


@dataclass
class Outcome:
    rows: list[dict]
    lags: dict          # mode -> [(t_s, lag)]
    latency_ms: float
    calls: int          # the service's own count

    @property
    def failed(self) -> bool:
        return any(not r["keeps_up"] for r in self.rows)

    def as_record(self) -> dict:
        return {"lookups": {r["mode"]: r for r in self.rows}, "lookup_service_calls": self.calls}

    def verdict(self) -> str:
        behind = [r["mode"] for r in self.rows if not r["keeps_up"]]
        ahead = [r["mode"] for r in self.rows if r["keeps_up"]]
        return "; ".join(filter(None, [f"falling behind (lag grows): {', '.join(behind)}" if behind else "",
                                       f"keeping up: {', '.join(ahead)}" if ahead else ""]))

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows)

    def explain(self) -> str:
        lines = [f"Each call waits {self.latency_ms:g} ms: one thread makes at most {1000 / self.latency_ms:.0f} "
                 "calls per second."]
        direct = next((r for r in self.rows if r["mode"] == "direct"), None)
        if direct:
            busy = direct["input_per_s"] * self.latency_ms / 1000   # seconds of waiting per second of input
            lines.append(f"With one call per record at {direct['input_per_s']:g} records/s, the thread waits "
                         f"{busy:.2f} s per second of input: "
                         + ("within its second, so the lookups are fine here." if busy <= 1 else
                            "more than it has, so the lag can only grow."))
        for r in self.rows:
            lines.append(f"- **{r['mode']}**: {r['records_per_s']:.0f} records/s for {r['input_per_s']:g} in, "
                         f"{r['calls_per_s']:.0f} calls/s; lag {r['lag_start']} -> {r['lag_end']} "
                         f"({'keeps up' if r['keeps_up'] else 'falls behind'}).")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for mode, series in self.lags.items():
            fig.add_scatter(x=[t for t, _ in series], y=[lag for _, lag in series], mode="lines+markers", name=mode)
        fig.update_layout(title="Lag while the app calls a slow service", xaxis_title="seconds since the run began",
                          yaxis_title="lag (records)", template="plotly_white", height=380)
        return fig


# ------------------------------------------------------------------ the exercise

def keeps_up(mode, p):
    # one call at a time per thread: 1000 / latency records a second, times the threads, or times a batch per call
    per_thread = 1000 / p["lookup_latency_ms"]
    capacity = per_thread * {"direct": 1, "threads": p["lookup_threads"], "batch": p["lookup_batch"]}[mode]
    return p["lookup_rate"] <= capacity


def _one_call_bounds_all(mode, p):
    """A tempting wrong answer: every mode is bound by one call's latency, as if threads and batches changed
    nothing."""
    return p["lookup_rate"] <= 1000 / p["lookup_latency_ms"]


JUDGED_MODES = ("direct", "threads", "batch")   # the cache's budget is its keys' first calls: not this arithmetic


def _clear(p: dict, mode: str) -> bool | None:
    """The budget's verdict where it is clear: True at half the capacity or less, False a quarter above it or more;
    None in between, where the threads' uneven share of the keys, or a slow moment of the machine, decides."""
    ratio = p["lookup_rate"] / capacity(p, mode)
    return True if ratio <= 0.5 else False if ratio >= 1.25 else None


def _other_lookups(p: dict) -> list[dict]:
    """The exercise's other settings: a quarter and three times one thread's budget, one thread for twice it,
    batches of two for four times it."""
    per = 1000 / p["lookup_latency_ms"]
    return [{"lookup_rate": per / 4}, {"lookup_rate": 3 * per}, {"lookup_threads": 1, "lookup_rate": 2 * per},
            {"lookup_batch": 2, "lookup_rate": 4 * per}]


def _check_keeps_up(result, fn) -> None:
    p = result.params
    cases = [(f"{r['mode']!r}, p", (r["mode"], dict(p)), r["keeps_up"], None) for r in result.outcome.rows
             if r["mode"] in JUDGED_MODES and _clear(p, r["mode"]) is not None]   # where the budget is clear
    for change in _other_lookups(p):
        q = {**p, **change}
        cases += [(f"{mode!r}, p", (mode, q), _clear(q, mode), f"{setting(change)}, by the budget,")
                  for mode in JUDGED_MODES if _clear(q, mode) is not None]
    judge_rule(fn, "keeps_up", cases, (("kept up", "fell behind"), ("keeps up", "falls behind")),
               "how many calls can that mode have waiting at once, and how many records does one call answer for?")


def _keeps_up_printed(result) -> list:
    """Look-ups of the run's table (`keeps_up`), the Mitigate cell's modes taken as kept up, else False; the rate
    against the table's `capacity_per_s` whatever the mode; and True, and False, whatever they are given."""
    seen = {r["mode"]: r["keeps_up"] for r in result.outcome.rows}
    shown = {**dict.fromkeys(written_fix("07c").get("lookup_modes", []), True), **seen}
    budget = next((r["capacity_per_s"] for r in result.outcome.rows if r.get("capacity_per_s")), None)
    return [lambda mode, p: seen.get(mode, False), lambda mode, p: shown.get(mode, False),
            *([lambda mode, p: p["lookup_rate"] <= budget] if budget else []), lambda *_: True, lambda *_: False]


EXERCISES = {
    1: Exercise(
        check=_check_keeps_up,
        solution=lambda result: keeps_up,
        why="With one call per record, a thread waits `LOOKUP_LATENCY_MS` for each record and does nothing else "
            "meanwhile: in a second, 1000 ms, it finishes `1000 / LOOKUP_LATENCY_MS` records. That is one thread's "
            "budget. `threads` has `LOOKUP_THREADS` calls waiting at once, so its budget is that many times larger "
            "(when the keys spread evenly over its partitions: the busiest one decides); `batch` answers "
            "`LOOKUP_BATCH` records with one call. A mode keeps up when `LOOKUP_RATE` is within its budget; past "
            "it, the lag grows for ever. The lookup table's `capacity_per_s` is that budget, and `keeps_up` what "
            "the run measured. Near the budget a run can go either way, so the check leaves that zone out.",
        wrong=lambda result: _one_call_bounds_all,
        closer="Count what one thread can finish in a second when every call makes it wait LOOKUP_LATENCY_MS. Then "
               "ask what each mode multiplies that by (calls waiting at once, records answered per call), and "
               "compare with the records arriving each second.",
        printed=_keeps_up_printed,
    ),
}


def modes_side_by_side(p: dict) -> int:
    # one app per mode, all reading the same input at once (the lookup service is a thread of the kernel)
    return len(p["lookup_modes"])


# The Run step runs the direct app (lookup_modes' default); the Mitigate step runs the learner's modes instead.
lesson = Lesson("lookups", "A lookup per record", params=PARAMS, rules=RULES, needs=needs, body=run_lesson,
                question=question, measured_answer=measured_answer, exercises=EXERCISES, apps=("ThroughputApp",),
                apps_at_once=modes_side_by_side)
