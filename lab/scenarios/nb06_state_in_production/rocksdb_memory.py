"""Notebook 06 section 3 ("Oh, the memory overhead"), one lesson of state_in_production (PARAMS, RULES, needs,
run_lesson -> Outcome): lab/java/RocksMemoryApp.java (MEMORY_STORES key-value stores, each filled and read back)
runs once per partition count of MEMORY_PARTITIONS, its MEMORY_CONFIGS (Kafka's default RocksDB options, or one
bounded shared cache) side by side, one JVM each; measure() turns each app's KIP-607 metrics, heap and psutil RSS
into RocksDB's and native memory. The bounded stores all report one shared cache that already holds the memtables:
it is counted once.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ...config import KAFKA_VERSION
from ...experiment import Param
from ...experiment.apps import MAX_JVMS
from ...experiment.memory import peak_rss, rss_mb
from ...experiment.streams_app import StreamsApp, stop_all

CONFIGS = ("default", "bounded")
# Kafka Streams 4.3.1's RocksDBStore (javap -constants): what one store instance may take by default.
BLOCK_CACHE_MB, WRITE_BUFFER_MB, WRITE_BUFFERS = 50, 16, 3
DEFAULT_CAP_MB = BLOCK_CACHE_MB + WRITE_BUFFERS * WRITE_BUFFER_MB           # 98 MB per store instance
# The sizing guide the production post quotes: 3 x 32 MB write buffers + a 16 MB block cache (not Kafka 2.7.2's
# nor 4.3.1's).
GUIDE_ESTIMATE_MB = 3 * 32 + 16                                              # 112 MB per store instance
TABLE_READERS_SHARE = 0.02   # index + bloom filter of 1 KB values in 4 KB blocks: ~1% of the data; 2% to be safe
HEAP_MB = 256
JVM_OVERHEAD_MB = 250        # metaspace, code cache, thread stacks, Kafka clients' buffers: measured ~200
MEMORY_BUDGET_MB = 12 * 1024  # of this machine's 24 GiB: the broker, the kernel and other runs need the rest
DISK_BUDGET_MB = 8 * 1024
VALUE_BYTES = 1024
# The bounded cache is an LRUCache without a strict limit (the docs' choice: a full cache never fails a read):
# it may hold a little more than its capacity while blocks are in use. Within 2% counts as under the cap.
CAP_SLACK = 0.02

PARAMS = [
    Param("memory_configs", list(CONFIGS), "default: Kafka's RocksDB options; bounded: one shared cache and "
          "write buffer manager for every store", choices=CONFIGS),
    Param("memory_partitions", [1, 4, 8], "input partitions, one run of each config per count: one store "
          "instance per partition per store", lo=1, hi=64, unit="partitions"),
    Param("memory_stores", 2, "key-value stores in the topology", lo=1, hi=16),
    Param("memory_mb_per_store", 40, "MB written to (and read back from) each store instance", lo=1, hi=1024,
          unit="MB"),
    Param("memory_bound_mb", 128, "the bounded config's cap: its shared block cache, half of it for memtables",
          lo=32, hi=8192, unit="MB",
          why="half of it goes to the memtables, which must hold at least one 16 MB write buffer, or every "
              "write waits for a flush"),
    Param("memory_settle_s", 3.0, "wait after the last store is filled, before the measurement (flushes end)",
          lo=0, hi=60, unit="s"),
]


def store_instances(p: dict, partitions: int) -> int:
    return partitions * p["memory_stores"]


def worst_case_mb(p: dict, config: str, partitions: int) -> float:
    """What one app may take at most: heap + JVM + RocksDB's caps (table readers are not capped by default)."""
    readers = TABLE_READERS_SHARE * p["memory_mb_per_store"] * store_instances(p, partitions)
    rocksdb = DEFAULT_CAP_MB * store_instances(p, partitions) if config == "default" else p["memory_bound_mb"]
    return HEAP_MB + JVM_OVERHEAD_MB + rocksdb + readers


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
                              else f"{p['memory_bound_mb']}") + " MB" for c, n in at_once)
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

ASKED_CONFIG = {"default": "Kafka's default RocksDB options", "bounded": "one shared, bounded RocksDB cache"}


def asked_config(p: dict) -> str:
    """The config the Predict question is about: Kafka's default if it runs."""
    return "default" if "default" in p["memory_configs"] else p["memory_configs"][0]


def within_answers(p: dict) -> tuple:
    return (f"yes, within {p['memory_bound_mb']:g} MB", f"no, it grows past {p['memory_bound_mb']:g} MB")


def question(p: dict) -> tuple:
    high = max(p["memory_partitions"])
    return (f"An app with {p['memory_stores']} key-value stores runs with {ASKED_CONFIG[asked_config(p)]} on "
            f"{high} input partitions, each store instance filled with {p['memory_mb_per_store']} MB. Does its "
            f"RocksDB memory stay within {p['memory_bound_mb']:g} MB?", within_answers(p))


def measured_answer(record: dict, p: dict):
    """At the most partitions, by RocksDB's own metrics (the bounded cache may overshoot by CAP_SLACK)."""
    row = record["memory_rows"].get(f"{asked_config(p)}-p{max(p['memory_partitions'])}")
    if row is None:
        return None
    return within_answers(p)[row["rocksdb_mb"] > p["memory_bound_mb"] * (1 + CAP_SLACK)]


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
        "lab.app": name, "lab.input.topic": topic, "lab.config": config,
        "lab.stores": p["memory_stores"], "lab.mb.per.store": p["memory_mb_per_store"],
        "lab.value.bytes": VALUE_BYTES, "lab.bound.mb": p["memory_bound_mb"]},
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
                  tone="failure" if r["config"] == "default" and r["rocksdb_mb"] > p["memory_bound_mb"]
                  else "control")
    return Outcome(rows, p["memory_bound_mb"], p["memory_stores"], p["memory_mb_per_store"])


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
    # bounded: every store reports the one shared cache; default: each store its own
    cache = (max(caches, default=0) if config == "bounded" else sum(caches)) / mb
    capacity = (max(values("block-cache-capacity"), default=0) if config == "bounded"
                else sum(values("block-cache-capacity"))) / mb
    readers = sum(values("estimate-table-readers-mem")) / mb
    # bounded: the WriteBufferManager charges the memtables to the shared cache, so they are in `cache` already
    rocksdb = cache + readers + (memtables if config == "default" else 0)
    memory = report["memory"]
    native = rss_python_mb - memory["heap_committed_mb"]
    base_native = baseline["memory"]["rss_mb"] - baseline["memory"]["heap_committed_mb"] if baseline else None
    instances = store_instances(p, partitions)
    cap = DEFAULT_CAP_MB * instances if config == "default" else p["memory_bound_mb"]
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


@dataclass
class Outcome:
    rows: list[dict]
    bound_mb: float
    stores: int
    mb_per_store: float

    def _of(self, config: str) -> list[dict]:
        return sorted((r for r in self.rows if r["config"] == config), key=lambda r: r["store_instances"])

    @property
    def default_over_bound(self) -> list[dict]:
        """Default apps whose RocksDB memory, by the metrics AND by RSS growth, went past the bounded cap."""
        return [r for r in self._of("default") if r["rocksdb_mb"] > self.bound_mb
                and (r["native_growth_mb"] or 0) > self.bound_mb]

    @property
    def default_grows(self) -> bool | None:
        """RocksDB memory of the default apps, largest partition count against smallest (None: one count)."""
        rows = self._of("default")
        if len({r["store_instances"] for r in rows}) < 2:
            return None
        return rows[-1]["rocksdb_mb"] > rows[0]["rocksdb_mb"] * 1.5

    @property
    def bounded_over_cap(self) -> list[dict]:
        return [r for r in self._of("bounded") if not r["within_cap"]]

    @property
    def failed(self) -> bool:
        """The default config's RocksDB memory went past the bounded cap and grew with partitions x stores
        (growth needs two partition counts to be seen), or a bounded app broke its own cap."""
        return bool(self.default_over_bound and self.default_grows is not False) or bool(self.bounded_over_cap)

    def verdict(self) -> str:
        parts = []
        default, bounded = self._of("default"), self._of("bounded")
        if default:
            span = ", ".join(f"{r['store_instances']} stores {r['rocksdb_mb']:.0f} MB" for r in default)
            over = "past" if self.default_over_bound else "within"
            parts.append(f"default: RocksDB memory {span} ({over} the {self.bound_mb:g} MB bound"
                         + ("" if self.default_grows is None else
                            ", growing with partitions x stores" if self.default_grows else ", not growing") + ")")
        if bounded:
            span = ", ".join(f"{r['store_instances']} stores {r['rocksdb_mb']:.0f} MB" for r in bounded)
            parts.append(f"bounded: {span} ("
                         + ("every app under" if not self.bounded_over_cap else "OVER")
                         + f" its {self.bound_mb:g} MB cap)")
        return "; ".join(parts)

    def as_record(self) -> dict:
        return {"memory_rows": {f"{r['config']}-p{r['partitions']}": r for r in self.rows},
                "memory_bound_mb": self.bound_mb,
                "memory_default_over_bound": [r["partitions"] for r in self.default_over_bound],
                "memory_default_grows": self.default_grows,
                "memory_bounded_over_cap": [r["partitions"] for r in self.bounded_over_cap],
                "memory_failed": self.failed}

    def table(self):
        import pandas as pd
        columns = ["config", "partitions", "store_instances", "memtables_mb", "block_cache_mb", "table_readers_mb",
                   "rocksdb_mb", "cap_mb", "guide_estimate_mb", "sst_mb", "rss_mb", "peak_rss_mb", "heap_used_mb",
                   "heap_committed_mb", "native_mb", "native_growth_mb", "within_cap"]
        return pd.DataFrame(self.rows)[columns]

    def explain(self) -> str:
        """What this run's apps held, against the caps (the mechanism is in the notebook's section)."""
        lines = [f"Each app held partitions x {self.stores} store instances, each written with "
                 f"{self.mb_per_store:g} MB of 1 KB values and read back; the bounded config shared "
                 f"{self.bound_mb:g} MB.", ""]
        for r in sorted(self.rows, key=lambda r: (r["config"], r["store_instances"])):
            lines.append(
                f"- **{r['config']}, {r['partitions']} partition(s), {r['store_instances']} store instances**: "
                f"memtables {r['memtables_mb']:.0f} MB, block cache {r['block_cache_mb']:.0f} MB "
                f"(capacity {r['block_cache_capacity_mb']:.0f} MB), index/filter outside the cache "
                f"{r['table_readers_mb']:.1f} MB: RocksDB {r['rocksdb_mb']:.0f} MB against "
                f"{'a bound of' if r['config'] == 'bounded' else 'block caches and write buffers of'} "
                f"{r['cap_mb']:.0f} MB; RSS {r['rss_mb']:.0f} MB (peak {r['peak_rss_mb']} MB) with a heap of "
                f"{r['heap_used_mb']:.0f} used / {r['heap_committed_mb']:.0f} MB committed; native memory (RSS - "
                f"committed heap) {r['native_mb']:.0f} MB, {r['native_growth_mb']} MB more than with the stores "
                "open and empty.")
        default = self._of("default")
        if default:
            top = default[-1]
            per_instance = top["rocksdb_mb"] / max(top["store_instances"], 1)
            lines += ["", f"The default used {top['rocksdb_mb']:.0f} MB for {top['store_instances']} instances, "
                      f"against {top['kafka_cap_mb']} MB allowed by Kafka's caps and {top['guide_estimate_mb']} MB "
                      f"by the sizing guide's arithmetic; its SST files held "
                      f"{top['sst_mb'] / max(top['store_instances'], 1):.0f} MB per instance. The post's example, "
                      f"40 partitions x 3 segments of a windowed store, is {40 * 3 * DEFAULT_CAP_MB:,} MB by Kafka's "
                      f"caps, and {40 * 3 * per_instance:,.0f} MB already at the {per_instance:.0f} MB per instance "
                      "measured here."]
            if self.default_grows is not None:
                lines.append(f"From {default[0]['store_instances']} to {top['store_instances']} store instances it "
                             f"went from {default[0]['rocksdb_mb']:.0f} to {top['rocksdb_mb']:.0f} MB"
                             + (": it grows with partitions x stores." if self.default_grows else
                                ": it did NOT grow in this run (less data per store than a memtable?)."))
            if not self.default_over_bound:
                lines.append(f"In this run no default app went past the {self.bound_mb:g} MB bound, by the metrics "
                             "and by RSS together: more partitions, stores or MB per store would.")
        bounded = self._of("bounded")
        if bounded:
            lines += ["", f"The bounded apps' {bounded[-1]['stores_reporting']} stores all report the same "
                      "block-cache-usage, the one shared cache, so it is counted once."]
            if self.bounded_over_cap:
                lines.append("Some bounded app went past its cap: "
                             + ", ".join(f"{r['partitions']} partition(s) {r['rocksdb_mb']:.0f} MB"
                                         for r in self.bounded_over_cap)
                             + " (the LRUCache is not strict: inserts are never refused, the cache may overshoot).")
            else:
                lines.append(f"Every bounded app stayed under its {self.bound_mb:g} MB (within {CAP_SLACK:.0%}: the "
                             "LRUCache's limit is not strict), whatever its partitions.")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        colours = {"default": "#d62728", "bounded": "#2ca02c"}
        for config in CONFIGS:
            rows = self._of(config)
            if not rows:
                continue
            x = [r["store_instances"] for r in rows]
            fig.add_scatter(x=x, y=[r["rocksdb_mb"] for r in rows], mode="lines+markers",
                            name=f"{config}: RocksDB (metrics)", line=dict(color=colours[config]))
            fig.add_scatter(x=x, y=[r["native_growth_mb"] for r in rows], mode="lines+markers",
                            name=f"{config}: native growth (RSS)", line=dict(color=colours[config], dash="dot"))
        x = sorted({r["store_instances"] for r in self.rows})
        fig.add_scatter(x=x, y=[DEFAULT_CAP_MB * n for n in x], mode="lines",
                        name=f"default: cache + write buffers ({DEFAULT_CAP_MB} MB each)",
                        line=dict(color="grey", dash="dash"))
        fig.add_hline(y=self.bound_mb, line_dash="dash", line_color=colours["bounded"],
                      annotation_text=f"bound {self.bound_mb:g} MB")
        fig.update_layout(title="RocksDB memory against store instances (partitions x stores)",
                          xaxis_title="store instances in the app", yaxis_title="MB", template="plotly_white",
                          height=400)
        return fig
