"""Lesson 06c, RocksDB's memory as the partitions grow (its `lesson`; run_lesson -> Outcome):
lab/java/RocksMemoryApp.java (MEMORY_STORES key-value stores, each filled and read back) runs once per partition count
of MEMORY_PARTITIONS, its MEMORY_CONFIGS (Kafka's default RocksDB options, the question's run; or one cache of
MEMORY_BUDGET_MB shared by every store, its Mitigate step's) side by side, one JVM each; measure() turns each app's KIP-607 metrics, heap and psutil RSS into RocksDB's and native memory. The
shared config's stores all report one cache that already holds the memtables: it is counted once."""
from __future__ import annotations

import threading
import time

from ...config import KAFKA_VERSION
from ...toolbox import Param
from ...toolbox.lesson import Lesson
from ...errors import LabError
from ...toolbox.result import Exercise, besides, count, expect, shown
from ...toolbox.apps import MAX_JVMS
from ...toolbox.memory import peak_rss, rss_mb
from ...toolbox.streams_app import StreamsApp, stop_all
from .. import written_fix
from .rocksdb_memory_report import (BLOCK_CACHE_MB, CAP_SLACK, CONFIGS, DEFAULT_CAP_MB, DISK_BUDGET_MB, GUIDE_ESTIMATE_MB, HEAP_MB,
                                    JVM_OVERHEAD_MB, MEMORY_BUDGET_MB, TABLE_READERS_SHARE, VALUE_BYTES,
                                    WRITE_BUFFER_MB, WRITE_BUFFERS, Outcome)


PARAMS = [
    Param("memory_configs", ["default"], "the RocksDB configs, side by side: default, Kafka Streams' own options; "
          "shared, one cache of MEMORY_BUDGET_MB and one write buffer manager for every store of the JVM",
          choices=CONFIGS),
    Param("memory_partitions", [1, 4, 8], "input partitions, one run of each config per count", lo=1, hi=64, unit="partitions"),
    Param("memory_stores", 2, "key-value stores in the topology", lo=1, hi=16),
    Param("memory_mb_per_store", 40, "MB each input partition writes to (and reads back from) each store", lo=1,
          hi=1024, unit="MB"),
    Param("memory_budget_mb", 128, "the size of the one cache the shared config gives every store of the app, half "
          "of it for memtables", lo=32, hi=8192, unit="MB",
          why="the shared config gives half of it to the memtables, which must hold at least one 16 MB write "
              "buffer, or every write waits for a flush"),
    Param("memory_settle_s", 3.0, "wait after the last store is filled, before the measurement (flushes end)",
          lo=0, hi=60, unit="s"),
]


def store_instances(p: dict, partitions: int) -> int:
    return partitions * p["memory_stores"]


def worst_case_mb(p: dict, config: str, partitions: int) -> float:
    """What one app may take at most: heap + JVM + RocksDB's caps (table readers are not capped by default)."""
    readers = TABLE_READERS_SHARE * p["memory_mb_per_store"] * store_instances(p, partitions)
    rocksdb = DEFAULT_CAP_MB * store_instances(p, partitions) if config == "default" else p["memory_budget_mb"]
    return HEAP_MB + JVM_OVERHEAD_MB + rocksdb + readers


def largest_app_mb(p: dict) -> float:
    """The memory check's size of one app: the most one may take (its RocksDB is what the lesson measures)."""
    return max(worst_case_mb(p, config, partitions) for config, partitions in apps(p))


def apps(p: dict) -> list[tuple[str, int]]:
    return [(config, partitions) for partitions in p["memory_partitions"] for config in p["memory_configs"]]


def _lists(p: dict) -> str | None:
    for name in ("memory_configs", "memory_partitions"):
        if not p[name]:
            return f"{name.upper()} is empty: give at least one value."
    return None


def _fits(p: dict) -> str | None:
    """Only one partition count's apps run at once (run_lesson): its worst case must fit."""
    if len(p["memory_configs"]) > MAX_JVMS:
        return (f"MEMORY_CONFIGS asks for {len(p['memory_configs'])} Kafka Streams JVMs at once; this machine "
                f"(2 cores) runs at most {MAX_JVMS}.")
    partitions = max(p["memory_partitions"])
    at_once = [(c, partitions) for c in p["memory_configs"]]
    total = sum(worst_case_mb(p, c, n) for c, n in at_once)
    if total > MEMORY_BUDGET_MB:
        parts = " + ".join(f"{c} {n}x{p['memory_stores']}: "
                           + (f"{store_instances(p, n)} x {DEFAULT_CAP_MB}" if c == "default"
                              else f"{p['memory_budget_mb']}") + " MB" for c, n in at_once)
        return (f"At {partitions} partitions the {len(at_once)} apps running at once may take {total:,.0f} MB "
                f"({parts} of RocksDB, {DEFAULT_CAP_MB} MB = {BLOCK_CACHE_MB} MB block cache + {WRITE_BUFFERS} x "
                f"{WRITE_BUFFER_MB} MB write buffers per default store instance, plus {HEAP_MB} MB heap + "
                f"~{JVM_OVERHEAD_MB} MB JVM and {TABLE_READERS_SHARE:.0%} of the data in index and filter blocks "
                f"per app), more than the {MEMORY_BUDGET_MB:,} MB this lesson may use of the machine's 24 GiB: "
                "fewer partitions, stores or MB per store.")
    disk = sum(store_instances(p, n) * p["memory_mb_per_store"] for _, n in apps(p))
    if disk > DISK_BUDGET_MB:
        return (f"The apps would write {disk:,} MB of state (store instances x MEMORY_MB_PER_STORE, every app), "
                f"more than the {DISK_BUDGET_MB:,} MB this lesson may put on disk.")
    return None


RULES = [_lists, _fits]

ASKED_CONFIG = {"default": "Kafka Streams' default RocksDB options", "shared": "one RocksDB cache shared by every store"}
# RocksMemoryApp's name of each config (lab.config): the shared one is its BoundedConfig
JAVA_CONFIG = {"default": "default", "shared": "bounded"}


def asked_config(p: dict) -> str:
    """The config the Predict question is about: Kafka's default if it runs."""
    return "default" if "default" in p["memory_configs"] else p["memory_configs"][0]


# What the options set, as the question states it (facts, not how many copies an app holds)
SETS = {"default": f"Kafka Streams' default RocksDB options set a {BLOCK_CACHE_MB} MB block cache and up to "
                   f"{WRITE_BUFFERS} x {WRITE_BUFFER_MB} MB write buffers (memtables), {DEFAULT_CAP_MB} MB in all.",
        "shared": "A rocksdb.config.setter gives RocksDB one block cache of {budget:g} MB, the write buffers "
                  "counted in it, for every store of the app."}


def unit_mb(p: dict) -> float:
    """What the asked config's options set once: one default store's cache and write buffers, or the shared cache."""
    return DEFAULT_CAP_MB if asked_config(p) == "default" else p["memory_budget_mb"]


def memory_answers(p: dict) -> tuple:
    """Ranges of RocksDB's memory in the app, each what one belief gives: the options' memory once for the app,
    once per store, once per store per partition (with one store, the second is the first). The ranges alone: a
    choice that named its copies would do the counting the question asks for (the beliefs:
    lab/commands/misconceptions.py)."""
    unit, stores = unit_mb(p), p["memory_stores"]
    answers = [f"at most {unit:g} MB"]
    if stores > 1:
        answers.append(f"{unit:g} to {stores * unit:g} MB")
    answers.append(f"more than {stores * unit:g} MB")
    return tuple(answers)


def question(p: dict) -> tuple:
    high = max(p["memory_partitions"])
    sets = SETS[asked_config(p)].format(budget=p["memory_budget_mb"])
    return (f"{sets} An app with {p['memory_stores']} key-value stores runs with them on {high} input partitions; "
            f"each partition writes {p['memory_mb_per_store']} MB to each store and reads it back. How much memory "
            "does RocksDB take in the app, by its own metrics?", memory_answers(p))


def measured_answer(record: dict, p: dict):
    """At the most partitions, by RocksDB's own metrics (the shared cache may overshoot by CAP_SLACK)."""
    row = record["memory_rows"].get(f"{asked_config(p)}-p{max(p['memory_partitions'])}")
    if row is None:
        return None
    answers, unit, slack = memory_answers(p), unit_mb(p), 1 + CAP_SLACK
    if row["rocksdb_mb"] <= unit * slack:
        return answers[0]
    return answers[-1] if row["rocksdb_mb"] > p["memory_stores"] * unit * slack else answers[1]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def _app(lab, config: str, partitions: int, topic: str, p: dict) -> StreamsApp:
    """One config's app at one partition count: one JVM of RocksMemoryApp ("memory" LAB lines every second)."""
    name = f"memory-{config}-p{partitions}"
    app_id = f"{name}-{lab.id[-6:]}"
    return StreamsApp(lab, app_id, [name], KAFKA_VERSION, "RocksMemoryApp",
                      ["RocksMemoryApp.java", "Lab.java", "LabStreams.java"], {
        "state.dir": lab.folder / app_id, "num.stream.threads": 1,
        "statestore.cache.max.bytes": 0, "poll.ms": 10,
        "lab.app": name, "lab.input.topic": topic, "lab.config": JAVA_CONFIG[config],
        "lab.stores": p["memory_stores"], "lab.mb.per.store": p["memory_mb_per_store"],
        "lab.value.bytes": VALUE_BYTES, "lab.bound.mb": p["memory_budget_mb"]},
        report="memory", heap=f"{HEAP_MB}m",
        # the whole heap committed and touched from the start: RSS - heap is then the native memory
        jvm_options=[f"-Xms{HEAP_MB}m", "-XX:+AlwaysPreTouch"])


def run_lesson(lab, p: dict) -> "Outcome":
    """One round per partition count, its configs side by side: the apps of a round share the machine's load
    alike, and only one round's JVMs are ever up at once (the notebook's peak memory stays that of one round)."""
    rows = []
    for partitions in p["memory_partitions"]:
        rows += _round(lab, p, partitions)
    for r in rows:
        lab.event(f"memory-{r['config']}-p{r['partitions']}", "measured",
                  detail=f"RocksDB {r['rocksdb_mb']:.0f} MB, RSS {r['rss_mb']:.0f} MB",
                  tone="failure" if r["config"] == "default" and r["rocksdb_mb"] > p["memory_budget_mb"]
                  else "control")
    return Outcome(rows, p["memory_budget_mb"], p["memory_stores"], p["memory_mb_per_store"])


def _round(lab, p: dict, partitions: int) -> list[dict]:
    """Every config at one partition count: fill, settle, measure, stop."""
    topic = lab.topics(f"memory-input-p{partitions}-{lab.id[-6:]}", partitions=partitions)[0]
    round_apps = {config: _app(lab, config, partitions, topic, p) for config in p["memory_configs"]}
    programs = {config: app.programs[0] for config, app in round_apps.items()}
    stop = threading.Event()
    for app in round_apps.values():
        app.start()
    peaks = lab.background(peak_rss, stop, lambda: {c: [prog.process.pid] for c, prog in programs.items()},
                           name=f"rss-p{partitions}")
    filling = threading.Event()
    rss_seen = lab.background(_rss_samples, filling, {c: prog.process.pid for c, prog in programs.items()},
                              name=f"rss-baseline-p{partitions}")
    try:
        def filled():
            for app in round_apps.values():
                app.check_alive(errors=True)
            return all(_last(prog, "filled") for prog in programs.values())

        with lab.step(f"filling the stores ({partitions} partition(s))", lane="apps"):
            lab.wait(filled, 240, "every app to fill its stores",
                     evidence=lambda: {prog.name: (_last(prog) or {}).get("filled") for prog in programs.values()})
        filling.set()
        for prog in programs.values():
            done = prog.lab_lines(kind="filled")
            lab.event(prog.name, "filled", at=max(r["ts"] for r in done),
                      detail=f"{store_instances(p, partitions)} store instances x {p['memory_mb_per_store']} MB")
        lab.countdown("flushes to settle", p["memory_settle_s"])
        measured_at = time.time()
        lab.wait(lambda: all((_last(prog) or {}).get("ts", 0) >= measured_at for prog in programs.values()), 15,
                 "a memory report from every app")
        rss_now = {config: rss_mb([prog.process.pid]) for config, prog in programs.items()}
        reports = {config: _last(prog) for config, prog in programs.items()}
        samples = rss_seen.result(10)
        baselines = {config: _with_rss((prog.lab_lines(kind="memory", phase="baseline") or [None])[-1],
                                       samples[config])
                     for config, prog in programs.items()}
    finally:
        stop.set()
        filling.set()
        stop_all(round_apps.values(), timeout=30)
    peak = peaks.result(10)
    return [measure(p, config, partitions, reports[config], baselines[config], rss_now[config], peak.get(config))
            for config in programs]


def _last(prog, phase: str | None = None) -> dict | None:
    rows = prog.lab_lines(kind="memory", **({"phase": phase} if phase else {}))
    return rows[-1] if rows else None


def _rss_samples(stop: threading.Event, pids: dict, every: float = 0.05) -> dict:
    """{name: [(time, RSS MB)]} of each app's JVM every 50 ms until `stop` (a run.background task): the fill
    starts right after an app's baseline report, so the baseline's RSS is the last sample taken before it."""
    samples = {name: [] for name in pids}
    while not stop.is_set():
        for name, pid in pids.items():
            mb = rss_mb([pid])
            samples[name].append((time.time(), mb))   # stamped after the reading: "before" stays before
        stop.wait(every)
    return samples


def _with_rss(baseline: dict | None, samples: list) -> dict | None:
    """The baseline report with `rss_mb` in its "memory": the last sample at or before its timestamp
    (Lab.memory reports no RSS; Lab.emit stamps the line after measuring, and the fill starts after it)."""
    before = [mb for t, mb in samples if baseline and t <= baseline["ts"]]
    if not before:
        return None
    return {**baseline, "memory": {**baseline["memory"], "rss_mb": before[-1]}}


def measure(p: dict, config: str, partitions: int, report: dict, baseline: dict | None,
            rss_python_mb: float, peak_rss_mb: float | None) -> dict:
    """One app's row: its memory report (Lab.memory, LabStreams.metrics) as MB, RocksDB's total counted right.

    `rss_python_mb` is the app's RSS by psutil when `report` was read (Lab.memory gives the heap only);
    `baseline` its report with the stores open and empty, with the RSS psutil saw then (_with_rss).
    """
    metrics = report.get("rocksdb") or {}

    def values(name):
        return list((metrics.get(name) or {}).values())

    mb = 2 ** 20
    memtables = sum(values("size-all-mem-tables")) / mb
    caches = values("block-cache-usage")
    # shared: every store reports the one shared cache; default: each store its own
    cache = (max(caches, default=0) if config == "shared" else sum(caches)) / mb
    capacity = (max(values("block-cache-capacity"), default=0) if config == "shared"
                else sum(values("block-cache-capacity"))) / mb
    readers = sum(values("estimate-table-readers-mem")) / mb
    # shared: the WriteBufferManager charges the memtables to the shared cache, so they are in `cache` already
    rocksdb = cache + readers + (memtables if config == "default" else 0)
    memory = report["memory"]
    native = rss_python_mb - memory["heap_committed_mb"]
    base_native = baseline["memory"]["rss_mb"] - baseline["memory"]["heap_committed_mb"] if baseline else None
    instances = store_instances(p, partitions)
    cap = DEFAULT_CAP_MB * instances if config == "default" else p["memory_budget_mb"]
    return {"config": config, "partitions": partitions, "stores": p["memory_stores"], "store_instances": instances,
            "mb_per_store": p["memory_mb_per_store"],
            "stores_reporting": len(caches), "keys": int(sum(values("estimate-num-keys"))),
            "sst_mb": round(sum(values("total-sst-files-size")) / mb, 1),
            "memtables_mb": round(memtables, 1), "block_cache_mb": round(cache, 1),
            "block_cache_capacity_mb": round(capacity, 1), "table_readers_mb": round(readers, 1),
            "rocksdb_mb": round(rocksdb, 1), "cap_mb": cap,
            "kafka_cap_mb": DEFAULT_CAP_MB * instances, "guide_estimate_mb": GUIDE_ESTIMATE_MB * instances,
            "rss_mb": round(rss_python_mb, 1), "rss_python_mb": round(rss_python_mb, 1),
            "peak_rss_mb": peak_rss_mb,
            "heap_used_mb": round(memory["heap_used_mb"], 1),
            "heap_committed_mb": round(memory["heap_committed_mb"], 1),
            "native_mb": round(native, 1),
            "native_growth_mb": None if base_native is None else round(native - base_native, 1),
            "baseline_rss_mb": round(baseline["memory"]["rss_mb"], 1) if baseline else None,
            "within_cap": rocksdb <= cap * (1 + CAP_SLACK)}


# ------------------------------------------------------------------ the exercise

BUDGET_MB = 2048   # the exercise: the RocksDB memory a container leaves to the app


def _default_per_instance_mb(result) -> float:
    """RocksDB memory per store instance of the default config at its most partitions (the memory table's
    `rocksdb_mb / store_instances`)."""
    rows = [r for r in result.outcome.rows if r["config"] == "default"]
    if not rows:
        raise LabError(f"Kafka's default RocksDB options were not run in this run (MEMORY_CONFIGS="
                       f"{result.params['memory_configs']}): add 'default' and run the lesson again")
    top = max(rows, key=lambda r: r["store_instances"])
    return top["rocksdb_mb"] / top["store_instances"]


def _partitions_in_budget(result) -> int:
    """The exercise: the most partitions whose store instances fit BUDGET_MB at the measured memory per instance."""
    return int(BUDGET_MB // (result.params["memory_stores"] * _default_per_instance_mb(result)))


def _check_partitions_in_budget(result, answer) -> None:
    given, right = count(answer, "partitions"), _partitions_in_budget(result)
    expect(given >= 1, "an app takes on at least one partition: how many fit the budget?")
    if right < 1:
        raise LabError(f"at this run's memory per store instance not even one partition's "
                       f"{result.params['memory_stores']} store instances fit {BUDGET_MB:,} MB: run the lesson with a "
                       "smaller MEMORY_MB_PER_STORE")
    if abs(given - right) <= max(1, 0.1 * right):
        return
    per_instance, stores = _default_per_instance_mb(result), result.params["memory_stores"]
    expect(abs(given - BUDGET_MB // per_instance) > max(1, 0.1 * right),
           f"each partition opens one instance of every store: {stores} of them, each about {per_instance:.0f} MB")
    expect(False, f"{given} partitions x {stores} stores x {per_instance:.1f} MB is "
           f"{given * stores * per_instance:,.0f} MB, not about {BUDGET_MB:,} MB")


def _partitions_printed(result) -> list:
    """What the notebook shows above the exercise: the table's partitions, store instances and RocksDB memory, the MB
    per instance and the post's 40 partitions in its evidence, the parameters and the Mitigate cell's config."""
    p, rows = result.params, result.outcome.rows
    top = max((r for r in rows if r["config"] == "default"), key=lambda r: r["store_instances"], default=None)
    values = shown(*(r[k] for r in rows for k in ("partitions", "store_instances", "rocksdb_mb")),
                   round(top["rocksdb_mb"] / max(top["store_instances"], 1)) if top else None, 40,
                   *(p[k] for k in ("memory_partitions", "memory_stores", "memory_mb_per_store", "memory_budget_mb")),
                   *written_fix("06c").values())
    return besides(values, _partitions_in_budget(result) if top else None)


EXERCISES = {
    1: Exercise(
        check=_check_partitions_in_budget,
        solution=_partitions_in_budget,
        why="With Kafka's default options every store instance has its own block cache and write buffers, and "
            "there is one instance per store per partition (per task). The memory table gives the default "
            f"config's RocksDB memory and its `store_instances`: divided, the memory of one instance. {BUDGET_MB:,} MB "
            "divided by (`MEMORY_STORES` x that) is the most partitions the app can take on; one more and it goes "
            "past. Measured at this lesson's fill (`MEMORY_MB_PER_STORE`): more data per store, or reads that keep "
            "coming, move each instance towards the 98 MB of cache and write buffers Kafka gives it, and index and "
            "filter blocks come on top of that. The shared config puts every instance in one cache "
            "instead, so its memory stays near `MEMORY_BUDGET_MB` however many partitions.",
        wrong=lambda r: int(BUDGET_MB // _default_per_instance_mb(r)),   # one store per partition, not MEMORY_STORES
        closer="A partition is a task, and each task opens its own instance of every store of the topology; with "
               "Kafka's default options each instance has its own cache and write buffers, so the memory adds up "
               "per instance, not per partition.",
        printed=_partitions_printed,
    ),
}


def configs_per_round(p: dict) -> int:
    # one round per partition count, one after the other: a round runs one app per config side by side
    return len(p["memory_configs"])


lesson = Lesson("memory", "RocksDB's memory and the partitions", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("RocksMemoryApp",), apps_at_once=configs_per_round, app_mb=largest_app_mb)
