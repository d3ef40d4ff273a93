"""Lesson 06c's report: the RocksDB memory each config took, as a table, a figure and an explanation from the
run's own numbers; and the figures the lesson measures against."""
from __future__ import annotations

from dataclasses import dataclass

CONFIGS = ("default", "shared")
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
# The shared cache is an LRUCache without a strict limit (the docs' choice: a full cache never fails a read):
# it may hold a little more than its capacity while blocks are in use. Within 2% counts as under the cap.
CAP_SLACK = 0.02


@dataclass
class Outcome:
    rows: list[dict]
    budget_mb: float             # MEMORY_BUDGET_MB: the line the Predict question draws, the shared cache's size
    stores: int
    mb_per_store: float

    def _of(self, config: str) -> list[dict]:
        return sorted((r for r in self.rows if r["config"] == config), key=lambda r: r["store_instances"])

    @property
    def default_over_budget(self) -> list[dict]:
        """Default apps whose RocksDB memory, by the metrics AND by RSS growth, went past the budget."""
        return [r for r in self._of("default") if r["rocksdb_mb"] > self.budget_mb
                and (r["native_growth_mb"] or 0) > self.budget_mb]

    @property
    def default_grows(self) -> bool | None:
        """RocksDB memory of the default apps, largest partition count against smallest (None: one count)."""
        rows = self._of("default")
        if len({r["store_instances"] for r in rows}) < 2:
            return None
        return rows[-1]["rocksdb_mb"] > rows[0]["rocksdb_mb"] * 1.5

    @property
    def shared_over_cap(self) -> list[dict]:
        return [r for r in self._of("shared") if not r["within_cap"]]

    @property
    def failed(self) -> bool:
        """The default config's RocksDB memory went past the budget and grew with partitions x
        stores (growth needs two partition counts to be seen), or a shared app broke its own cap."""
        return bool(self.default_over_budget and self.default_grows is not False) or bool(self.shared_over_cap)

    def verdict(self) -> str:
        parts = []
        default, shared = self._of("default"), self._of("shared")
        if default:
            span = ", ".join(f"{r['store_instances']} stores {r['rocksdb_mb']:.0f} MB" for r in default)
            over = "past" if self.default_over_budget else "within"
            parts.append(f"default: RocksDB memory {span} ({over} {self.budget_mb:g} MB"
                         + ("" if self.default_grows is None else
                            ", growing with partitions x stores" if self.default_grows else ", not growing") + ")")
        if shared:
            span = ", ".join(f"{r['store_instances']} stores {r['rocksdb_mb']:.0f} MB" for r in shared)
            parts.append(f"shared: {span} ("
                         + ("every app under" if not self.shared_over_cap else "OVER")
                         + f" its {self.budget_mb:g} MB cache)")
        return "; ".join(parts)

    def as_record(self) -> dict:
        return {"memory_rows": {f"{r['config']}-p{r['partitions']}": r for r in self.rows},
                "memory_budget_mb": self.budget_mb,
                "memory_default_over_budget": [r["partitions"] for r in self.default_over_budget],
                "memory_default_grows": self.default_grows,
                "memory_shared_over_cap": [r["partitions"] for r in self.shared_over_cap],
                "memory_failed": self.failed}

    def table(self):
        import pandas as pd
        columns = ["config", "partitions", "store_instances", "memtables_mb", "block_cache_mb", "table_readers_mb",
                   "rocksdb_mb", "cap_mb", "guide_estimate_mb", "sst_mb", "rss_mb", "peak_rss_mb", "heap_used_mb",
                   "heap_committed_mb", "native_mb", "native_growth_mb", "within_cap"]
        return pd.DataFrame(self.rows)[columns]

    def explain(self) -> str:
        """What this run's apps held, against the caps (the mechanism is in the notebook's section)."""
        lines = [f"Each app held partitions x {self.stores} store instances (one copy of each store per partition), "
                 f"each written with {self.mb_per_store:g} MB of 1 KB values and read back; the budget: "
                 f"{self.budget_mb:g} MB" + (", the size of the shared config's one cache." if self._of("shared")
                                             else "."), ""]
        for r in sorted(self.rows, key=lambda r: (r["config"], r["store_instances"])):
            lines.append(
                f"- **{r['config']}, {r['partitions']} partition(s), {r['store_instances']} store instances**: "
                f"memtables {r['memtables_mb']:.0f} MB, block cache {r['block_cache_mb']:.0f} MB "
                f"(capacity {r['block_cache_capacity_mb']:.0f} MB), index/filter outside the cache "
                f"{r['table_readers_mb']:.1f} MB: RocksDB {r['rocksdb_mb']:.0f} MB against "
                f"{'a shared cache of' if r['config'] == 'shared' else 'block caches and write buffers of'} "
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
            if not self.default_over_budget:
                lines.append(f"In this run no default app went past {self.budget_mb:g} MB, by the metrics "
                             "and by RSS together: more partitions, stores or MB per store would.")
        shared = self._of("shared")
        if shared:
            lines += ["", f"The shared apps' {shared[-1]['stores_reporting']} stores all report the same "
                      "block-cache-usage, the one shared cache, so it is counted once."]
            if self.shared_over_cap:
                lines.append("Some shared app went past its cache: "
                             + ", ".join(f"{r['partitions']} partition(s) {r['rocksdb_mb']:.0f} MB"
                                         for r in self.shared_over_cap)
                             + " (the LRUCache is not strict: inserts are never refused, the cache may overshoot).")
            else:
                lines.append(f"Every shared app stayed under its {self.budget_mb:g} MB (within {CAP_SLACK:.0%}: the "
                             "LRUCache's limit is not strict), whatever its partitions.")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        colours = {"default": "#d62728", "shared": "#2ca02c"}
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
        fig.add_hline(y=self.budget_mb, line_dash="dash", line_color=colours["shared"],
                      annotation_text=f"budget {self.budget_mb:g} MB")
        fig.update_layout(title="RocksDB memory against store instances (partitions x stores)",
                          xaxis_title="store instances in the app", yaxis_title="MB", template="plotly_white",
                          height=400)
        return fig
