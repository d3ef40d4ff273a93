"""Lesson 06e, how much disk a store takes (its `lesson`): a plain count
(StateGrowthApp, kind kv) fed DISK_RECORDS keys it never saw, its RocksDB allowed DISK_LIMIT_KB of SST files per
store instance (RocksDB's SstFileManager.setMaxAllowedSpaceUsage, set in the app's RocksDBConfigSetter): the
limit applies to the store, never to the machine's disk. Up to three phases on one state directory, as a deployment
would run them:

    full      the app until its thread dies or its store holds every key fed (then the run ends there)
    restart   the same app restarted with the same limit
    more      restarted with DISK_MORE_KB: the bigger volume

Measured: the SST bytes per key while the store filled, the keys it held when the thread died, the thread's
error, and whether every key fed was in the store at the end.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ...toolbox.checks import half_the_free_disk
from ...toolbox import Param
from ...toolbox.lesson import Lesson
from ...errors import LabError
from ...toolbox.result import Exercise, expect, number, shown
from ...toolbox.streams_app import ERROR_STATES, stop_all
from .. import written_fix
from .state_app import feed, state_app

# RocksDB's word once a flush took the SST files past the limit: it keeps the file and sets a background
# Status::SpaceLimit error, which fails the store's next writes
FULL = "Max allowed space was reached"
# What the app does once its SST files reach the limit, each a distinct belief (the comments in
# lab/commands/misconceptions.py say where each is held); measured_answer() tells them apart from the run.
STOPS = "its writes fail and the stream thread dies: the app stops"
ANSWERS = ("RocksDB's compaction shrinks the files to make room, and it takes every key",
           "the oldest keys are evicted to make room, as in a cache, and it goes on",
           STOPS,
           "nothing: the limit is only a warning, and the files grow past it",
           "its writes wait for compaction to free room: it falls behind, but runs on")
REACHED = 0.95   # SST files at this share of the limit have reached it (a flush adds a memtable's worth at once)

PARAMS = [
    Param("disk_limit_kb", 1024, "RocksDB's space limit on the store's SST files (its SstFileManager)",
          lo=64, hi=1_048_576, unit="KB"),
    Param("disk_records", 60_000, "input records, each with a key never seen before", lo=1_000, hi=2_000_000),
    Param("disk_rate", 2000.0, "input records per second", lo=10, hi=20_000, unit="records/s"),
    Param("disk_more_kb", 8192, "the limit of the lab's last restart of the app, more than DISK_LIMIT_KB (the "
          "Run step says when one runs)", lo=64, hi=1_048_576, unit="KB"),
    Param("disk_memtable_kb", 128, "RocksDB's write buffer (memtable) for the store: a flush to an SST file each "
          "time it fills (Kafka Streams' default: 16384 KB)", lo=64, hi=65_536, unit="KB"),
]


def _more_is_more(p: dict) -> str | None:
    if p["disk_more_kb"] <= p["disk_limit_kb"]:
        return (f"DISK_MORE_KB={p['disk_more_kb']} is not more than DISK_LIMIT_KB={p['disk_limit_kb']}: the restart "
                "on a bigger volume needs a bigger limit.")
    return None


def _fits_on_disk(p: dict) -> str | None:
    # the limit bounds the store; the input and the changelog on the broker take about 100 bytes a record
    return half_the_free_disk(p["disk_more_kb"] * 1024 + p["disk_records"] * 100, "DISK_MORE_KB and DISK_RECORDS")


RULES = [_more_is_more, _fits_on_disk]


def question(p: dict) -> tuple:
    return (f"A key-value store gets {p['disk_records']:,} keys it never saw, and RocksDB's space limit on its SST "
            f"files is {p['disk_limit_kb']:,} KB. What does the app do once its SST files reach that limit?", ANSWERS)


def measured_answer(record: dict, p: dict):
    """From the first run of the app: its thread died of the space limit; or, alive to the end, its files went past
    the limit, its store lost keys it had held, or its files reached the limit with every key in (compaction made
    room) or with keys still to come (its writes waited). None: the
    files never reached the limit (every key fitted), or the thread died of something else."""
    disk = record.get("disk")
    if disk is None:
        return None
    if disk["full"]:
        return STOPS
    if disk.get("died") or disk.get("sst_max_bytes") is None:
        return None
    limit = disk["limit_kb"] * 1024
    if disk["sst_max_bytes"] > limit:
        return ANSWERS[3]
    if (disk.get("keys_max_first") or 0) > (disk.get("keys_end_first") or 0):
        return ANSWERS[1]
    if disk["sst_max_bytes"] >= REACHED * limit:
        return ANSWERS[0] if disk["keys_end"] == disk["fed"] else ANSWERS[4]
    return None


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def run_lesson(lab, p: dict) -> "Outcome":
    records, limit = p["disk_records"], p["disk_limit_kb"] * 1024
    topic = lab.topics(f"disk-input-{lab.id[-6:]}", partitions=1)[0]
    app_id = f"disk-kv-{lab.id[-4:]}"
    # a thread that died leaves the group only when its session times out: 6 s, not 45, before a restart joins
    config = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1500}
    # a kv store: its window, retention and TTL settings are not read
    apps = {phase: state_app(lab, "kv", topic, window_ms=60_000, retention_ms=300_000, ttl_ms=300_000,
                             sweep_ms=60_000, memtable_kb=p["disk_memtable_kb"], app_id=app_id, name=f"disk-{phase}",
                             state=lab.folder / app_id, config=config, disk_limit_bytes=kb * 1024)
            for phase, kb in (("full", p["disk_limit_kb"]), ("restart", p["disk_limit_kb"]),
                              ("more", p["disk_more_kb"]))}
    phases = {}
    fed_progress: list = []
    first_ms = int(time.time() * 1000) - records * 100
    feeding = None
    try:
        for phase in ("full", "restart", "more"):
            app = apps[phase]
            app.start()
            started = time.time()
            # running, or already dead of a full store (a restart can fail before it ever runs)
            prog = app.programs[0]
            lab.wait(lambda: app.running(prog) or app.state(prog) in ERROR_STATES or app.check_alive(), 120,
                     f"the {phase} app to run", evidence=lambda: app.last(prog))
            if feeding is None:
                feeding = lab.background(feed, lab.bootstrap, topic, records, p["disk_rate"], 100, first_ms,
                                         lab.stopping, fed_progress, name="disk-input")
            phases[phase] = _watch(lab, app, phase, records, p, started)
            app.stop(timeout=20)
            if not phases[phase]["died"]:
                break   # every key is in: nothing to recover from
        fed = feeding.result(timeout=records / p["disk_rate"] + 60)
    finally:
        stop_all(apps.values(), timeout=20)
    return Outcome(phases, dict(p), fed, fed_progress, lab.t0, limit)


def _watch(lab, app, phase: str, records: int, p: dict, started: float) -> dict:
    """Until the app's thread dies (the store full) or its store holds every key fed; its reports and error."""
    prog = app.programs[0]

    def ended():
        last = app.last(prog)
        return app.state(prog) in ERROR_STATES or (last.get("keys") or 0) >= records
    lab.wait(ended, records / p["disk_rate"] + 90, f"the {phase} app to fill its store or take every key",
             evidence=lambda: app.last(prog), interval=0.5)
    time.sleep(1.2)   # one more report after the end
    reports = [r for r in app.reports(prog) if r.get("ts", 0) >= started]
    uncaught = app.reports(prog, kind="uncaught")
    died = app.state(prog) in ERROR_STATES
    keys = [r["keys"] for r in reports if r.get("keys") is not None]
    restores = [r for r in app.reports(prog, kind="restore") if r.get("phase") == "end"]
    if died:
        lab.event(prog.name, "store full: the thread died", tone="failure",
                  detail=(uncaught[-1]["root"] if uncaught else ""))
    return {"phase": phase, "died": died, "died_after_s": round(uncaught[-1]["ts"] - started, 1) if uncaught else None,
            "error": uncaught[-1]["root"] if uncaught else None, "keys_end": keys[-1] if keys else None,
            "keys_max": max(keys, default=None), "restored": sum(r.get("total_restored", 0) for r in restores),
            "reports": reports}


def bytes_per_key(reports: list, limit: int) -> tuple[float, int] | None:
    """SST bytes per key flushed to them, from the report nearest half the limit: (bytes per key, keys in the SST
    files then). The keys still in the memtables (RocksDB's num-entries metrics) are not on disk yet: counting them
    would make a key look cheaper by up to a memtable's worth. Measured early, so that it can predict the full
    store."""
    rows = [r for r in reports if r.get("keys") and r.get("total_sst_bytes")
            and r.get("memtable_keys") is not None and r["keys"] > r["memtable_keys"]]
    if not rows:
        return None
    r = min(rows, key=lambda r: abs(r["total_sst_bytes"] - limit / 2))
    flushed = int(r["keys"] - r["memtable_keys"])
    return r["total_sst_bytes"] / flushed, flushed


@dataclass
class Outcome:
    phases: dict                 # phase -> what _watch measured
    params: dict
    fed: int
    fed_progress: list           # [(epoch s, records sent)]
    t0: float
    limit: int                   # bytes

    @property
    def failed(self) -> bool:
        """The store filled up: the thread died of RocksDB's space limit (a death of anything else is not it)."""
        full = self.phases["full"]
        return full["died"] and FULL in (full["error"] or "")

    def measured(self) -> dict:
        full = self.phases["full"]
        per_key = bytes_per_key(full["reports"], self.limit)
        last = self.phases[list(self.phases)[-1]]
        sst = [r["total_sst_bytes"] for r in full["reports"] if r.get("total_sst_bytes") is not None]
        return {"full": self.failed, "error": full["error"], "died_after_s": full["died_after_s"],
                "died": full["died"], "sst_max_bytes": max(sst, default=None),
                "keys_max_first": full["keys_max"], "keys_end_first": full["keys_end"],
                "keys_at_full": full["keys_end"] if self.failed else None,
                "sst_bytes_per_key": None if per_key is None else round(per_key[0], 1),
                "measured_at_keys": None if per_key is None else per_key[1],
                "predicted_keys_at_full": None if per_key is None else int(self.limit / per_key[0]),
                "restart_died": self.phases.get("restart", {}).get("died"),
                "restart_error": self.phases.get("restart", {}).get("error"),
                "more_keys_end": self.phases.get("more", {}).get("keys_end"),
                "keys_end": last["keys_end"], "fed": self.fed,
                "lost": None if last["keys_end"] is None else max(self.fed - last["keys_end"], 0),
                "limit_kb": self.params["disk_limit_kb"], "more_kb": self.params["disk_more_kb"]}

    def as_record(self) -> dict:
        return {"disk": self.measured(), "disk_failed": self.failed}

    def died_otherwise(self) -> str | None:
        """The first run's thread died, of something other than the space limit: what it said (else None)."""
        full = self.phases["full"]
        return None if self.failed or not full["died"] else (full["error"] or "no error line in its log")

    def verdict(self) -> str:
        m = self.measured()
        if self.died_otherwise():
            return (f"the thread died of something other than RocksDB's space limit ({self.died_otherwise()}): "
                    "this run says nothing about a full store; see the app's log")
        if not m["full"]:
            return (f"the store took all {m['keys_end']:,} keys within {m['limit_kb']:,} KB of SST files "
                    f"({m['sst_bytes_per_key']} bytes a key): never full, nothing to recover")
        more = (f"on {m['more_kb']:,} KB it went on: {m['keys_end']:,} of {m['fed']:,} keys in the store, "
                f"{m['lost']} lost" if "more" in self.phases else "no restart with more space ran")
        return (f"the store was full at {m['keys_at_full']:,} keys ({m['sst_bytes_per_key']} bytes a key "
                f"predicted {m['predicted_keys_at_full']:,}); the thread died ({m['error']}); restarted with the "
                f"same limit it {'died again' if m['restart_died'] else 'went on'}; {more}")

    def explain(self) -> str:
        m = self.measured()
        if m["sst_bytes_per_key"] is None:
            return "The store never reported its SST files: nothing to explain from."
        seconds = m["predicted_keys_at_full"] / self.params["disk_rate"]
        lines = [f"- **While it filled**: {m['sst_bytes_per_key']} bytes of SST files per key, measured when "
                 f"{m['measured_at_keys']:,} keys had been flushed to them; at that rate {m['limit_kb']:,} KB hold "
                 f"about {m['predicted_keys_at_full']:,} keys, {seconds:,.0f} s of input at "
                 f"{self.params['disk_rate']:,.0f} records/s (and the memtables hold some more, in memory)."]
        if self.died_otherwise():
            lines.append(f"- **Died otherwise**: {self.died_otherwise()}.")
            return "\n".join(lines)
        if not m["full"]:
            lines.append(f"- **Never full**: {m['keys_end']:,} keys fit the limit.")
            return "\n".join(lines)
        lines.append(f"- **Full** at {m['keys_at_full']:,} keys, {m['died_after_s']} s after the start: a flush "
                     "took the SST files past the limit. RocksDB finished that flush and kept its file, then set a "
                     f"background `SpaceLimit` error (`{m['error']}`) that fails the store's next writes: the next "
                     "write of the store failed with it, and the stream thread died; the app's uncaught exception "
                     "handler answered SHUTDOWN_CLIENT and the client went to ERROR.")
        if "restart" in self.phases:
            r = self.phases["restart"]
            lines.append("- **Restarted with the same limit**: "
                         + (f"full again after {r['died_after_s']} s (`{r['error']}`): the state directory still "
                            "holds the full store, so a restart alone is a crash loop"
                            if r["died"] else "it went on"))
        if "more" in self.phases:
            lines.append(f"- **Restarted with {m['more_kb']:,} KB**: it reopened the same store and went on from "
                         f"its last commit: {m['keys_end']:,} of {m['fed']:,} keys in the store, {m['lost']} lost. "
                         "Under at-least-once nothing is lost: the input offsets were committed only for what the "
                         "store had taken.")
        return "\n".join(lines)

    def table(self):
        import pandas as pd
        rows = [{k: v for k, v in ph.items() if k != "reports"} for ph in self.phases.values()]
        return pd.DataFrame(rows)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for phase, ph in self.phases.items():
            rows = [r for r in ph["reports"] if r.get("total_sst_bytes") is not None]
            fig.add_scatter(x=[r["ts"] - self.t0 for r in rows], y=[r["total_sst_bytes"] for r in rows],
                            mode="lines+markers", name=f"{phase}: SST bytes")
        fig.add_hline(y=self.limit, line_dash="dash", annotation_text="DISK_LIMIT_KB")
        if "more" in self.phases:
            fig.add_hline(y=self.params["disk_more_kb"] * 1024, line_dash="dot", annotation_text="DISK_MORE_KB")
        fig.update_layout(title="The store's SST files against RocksDB's space limit", template="plotly_white",
                          xaxis_title="seconds since the run began", yaxis_title="bytes", height=420)
        return fig


# ------------------------------------------------------------------ the exercise

def _disk(result) -> dict:
    disk = result.outcome.measured()
    if disk["sst_bytes_per_key"] is None:
        raise LabError("the disk lesson's store never reported its SST files: run the lesson again")
    return disk


def _needed_kb(result) -> float:
    """The SST files that every key fed needs, in KB, at the bytes per key the lesson measured."""
    return result.params["disk_records"] * _disk(result)["sst_bytes_per_key"] / 1024


def _headroom_limit_kb(result) -> int:
    """The exercise: a limit that holds every key fed with half as much again to spare."""
    return math.ceil(1.5 * _needed_kb(result))


def _check_limit_kb(result, answer) -> None:
    """An experiment: the disk lesson runs again with the learner's limit, fed the same keys; whether the store
    filled decides."""
    need, p, per_key = _needed_kb(result), result.params, _disk(result)["sst_bytes_per_key"]
    value = number(answer, "the limit in KB")
    expect(math.isfinite(value), "give the limit in KB as a finite number")
    given = math.ceil(value)   # a computed 2,592.77 KB is 2,593: the limit that holds it
    expect(given >= need, f"{given:,} KB of SST files hold about {int(given * 1024 / per_key):,} keys at the {per_key} "
           f"bytes a key this run measured: fewer than the {p['disk_records']:,} keys fed (and a limit is in KB: "
           "1,024 bytes)")
    expect(given <= 2 * need, f"{given:,} KB would do, but it is more than twice the {need:,.0f} KB that the keys "
           "need: the question is a limit with room to spare, not a disk that sits mostly empty")
    cluster = result.running_cluster()
    print(f"Exercise 1: running the lesson with DISK_LIMIT_KB = {given:,}, {p['disk_records']:,} new keys, "
          + ("on the notebook's cluster ..." if cluster else "on a broker of its own ..."))
    again = result.lesson.run(cluster=cluster, remember=False, disk_limit_kb=given,
                              disk_more_kb=max(p["disk_more_kb"], 2 * given), disk_records=p["disk_records"],
                              disk_rate=p["disk_rate"], disk_memtable_kb=p["disk_memtable_kb"])
    m = again.outcome.measured()
    if m["full"]:
        expect(False, f"with {given:,} KB the store was full at {m['keys_at_full']:,} keys ({m['sst_bytes_per_key']} "
               "bytes a key in this run): leave more room than the bytes a key measured once, they vary from run "
               "to run")
    expect((m["keys_end"] or 0) >= m["fed"], f"the store never filled, yet it held {m['keys_end']} of {m['fed']} "
           f"keys at the end: {again.outcome.verdict()}")
    print(f"Measured: never full, {m['keys_end']:,} of {m['fed']:,} keys in the store, {m['sst_bytes_per_key']} "
          "bytes a key.")


def _limit_printed(result) -> list:
    """What the notebook shows above the exercise: the limits (the parameter's, the bigger volume's, the Mitigate
    cell's), the memtable, the keys fed, and the bytes a key and key counts of the verdict and explanation."""
    p, m = result.params, result.outcome.measured()
    return shown(*(p[k] for k in ("disk_limit_kb", "disk_more_kb", "disk_memtable_kb", "disk_records")),
                 written_fix("06e").get("disk_limit_kb"),
                 *(m[k] for k in ("sst_bytes_per_key", "measured_at_keys", "predicted_keys_at_full", "keys_at_full",
                                  "keys_end")))


EXERCISES = {
    1: Exercise(
        check=_check_limit_kb,
        solution=_headroom_limit_kb,
        why="A store without a TTL keeps every key it ever saw, so its SST files grow by about the same number of "
            "bytes with every new key: the bytes of SST files per key the lesson measured while the store filled "
            "(its verdict and explanation give them: the key, its value and RocksDB's own framing). Every key fed "
            "needs `DISK_RECORDS` times those bytes, divided by 1,024 for KB, rounded up. This solution keeps half as much again to spare: the bytes per key vary a "
            "little from run to run, and the keys still in the memtable reach the files at the next flush. The "
            "same arithmetic sizes a production volume: its bytes divided by the bytes a key and by the new keys "
            "a second is how long it lasts. The changelog on the brokers grows beside it, and compaction keeps "
            "every key too. Watch the state directory's size, or give the store a TTL (lesson 06a).",
        wrong=lambda r: min(r.params["disk_limit_kb"], math.floor(_needed_kb(r)) - 1),   # the limit that filled
        closer="Every key fed stays in the store, and each takes about the same bytes of SST files (the bytes a "
               "key in the run's verdict and explanation): the limit must hold all of them, in KB of 1,024 bytes, "
               "with room for the bytes a key to vary from run to run.",
        printed=_limit_printed,
    ),
}

lesson = Lesson("disk", "How much disk does a store take?", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("StateGrowthApp",))
