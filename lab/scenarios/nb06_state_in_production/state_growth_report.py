"""Lesson 06a's report: what the stores held, as a table, a figure and an explanation from the run's own numbers."""
from __future__ import annotations

from dataclasses import dataclass, field

COLORS = {"kv": "#d62728", "window": "#1f77b4", "ttl": "#2ca02c"}
GROWING = 0.5                 # entries gained per record fed over the feed's second half: above = unbounded
SWEEPS_PER_TTL = 5            # the ttl app's punctuator runs every TTL / 5 of stream time
MIN_SEGMENT_MS = 60_000       # Stores.persistentWindowStore: segment interval = max(retention / 2, 60 s)


def segment_interval_ms(retention_ms: int) -> int:
    """The segment interval Kafka Streams gives a DSL window store (Stores.persistentWindowStore)."""
    return max(retention_ms // 2, MIN_SEGMENT_MS)


def sweep_ms(p: dict) -> int:
    return max(1, p["growth_ttl_s"] * 1000 // SWEEPS_PER_TTL)


@dataclass
class Outcome:
    rows: list[dict]
    series: dict                 # kind -> its "growth" reports (epoch ts, keys, bytes, ...)
    fed_progress: list           # [(epoch s, records sent)]
    params: dict
    feed_start: float
    feed_end: float
    t0: float
    first_ms: int                # the first input record's timestamp
    sweeps: dict = field(default_factory=dict)   # kind -> the ttl punctuator's "sweep" lines

    def by_kind(self) -> dict:
        return {r["kind"]: r for r in self.rows}

    def ttl_peak(self) -> int | None:
        """The most keys the ttl store held: just before a sweep (its keys then, deleted and kept), or in a
        report; None when no ttl store ran."""
        row = self.by_kind().get("ttl")
        if row is None:
            return None
        before_sweeps = [s["deleted"] + s["kept"] for s in self.sweeps.get("ttl", [])]
        return max([row["keys_max"], *before_sweeps])

    @property
    def failed(self) -> bool:
        """The key-value store grew without bound: still gaining about an entry per record at the end, and
        holding (nearly) every key fed."""
        kv = self.by_kind().get("kv")
        return bool(kv and kv["grows"] and kv["keys_end"] >= 0.95 * kv["processed"])

    def as_record(self) -> dict:
        p = self.params
        return {"growth": self.by_kind(), "growth_failed": self.failed,
                "growth_records_fed": self.rows[0]["fed"] if self.rows else 0,
                "growth_event_span_s": p["growth_records"] * p["growth_step_ms"] / 1000,
                "growth_segment_interval_s": segment_interval_ms(p["growth_retention_s"] * 1000) / 1000,
                "growth_sweep_interval_s": sweep_ms(p) / 1000,
                "growth_feed_s": round(self.feed_end - self.feed_start, 1)}

    def verdict(self) -> str:
        parts = []
        for r in self.rows:
            how = "grows without bound" if r["grows"] else "bounded"
            parts.append(f"{r['kind']}: {how} ({r['keys_end']:,} entries for {r['processed']:,} new keys)")
        return "; ".join(parts)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows)

    def explain(self) -> str:
        p, rows = self.params, self.by_kind()
        span = p["growth_records"] * p["growth_step_ms"] / 1000
        lines = [f"{self.rows[0]['fed']:,} records, each with a new key, stamped {p['growth_step_ms']} ms apart: "
                 f"{span:,.0f} s of event time fed in {self.feed_end - self.feed_start:.0f} s. Over the second "
                 f"half of the feed, a store that gains more than {GROWING} entry per record grows without bound."]
        if "kv" in rows:
            r = rows["kv"]
            lines.append(
                f"- **kv** (`groupByKey().count()`): {r['keys_end']:,} entries for {r['processed']:,} keys fed "
                f"({r['keys_middle']:,} halfway, {r['gained_per_record']} gained per record since): "
                f"{'it never forgets a key' if r['grows'] else 'it did not grow in this run'}. RocksDB's own "
                f"estimate (KIP-607 `estimate-num-keys`) says {_n(r['estimate_num_keys'])}; SST files "
                f"{_mb(r['total_sst_bytes'])}, memtables {_mb(r['memtable_bytes'])}, state directory "
                f"{_mb(r['state_dir_bytes'])}. Its changelog holds {_n(r['changelog_records'])} records "
                f"({_mb(r['changelog_bytes'])} on the broker), and {r['changelog_live_keys']:,} live keys: "
                "compaction only drops a value overwritten by a newer one, so none of these would go.")
        if "window" in rows:
            r = rows["window"]
            seg = segment_interval_ms(p["growth_retention_s"] * 1000) / 1000
            lines.append(
                f"- **window** (windowed count, retention {p['growth_retention_s']} s, segments of {seg:g} s = "
                f"max(retention / 2, 60 s)): at most {r['keys_max']:,} entries, {r['keys_end']:,} at the end "
                f"(bound from the arithmetic: about {r['expected_bound']:,}), "
                + ("still growing: the retention is longer than what half the feed covers" if r["grows"]
                   else "flat once stream time passed the retention")
                + f". Interactive queries return only windows younger than the retention (at most "
                f"{p['growth_retention_s'] * 1000 // p['growth_step_ms']:,} here); RocksDB holds the oldest segment "
                f"until stream time has passed all of it: `estimate-num-keys` {_n(r['estimate_num_keys'])}. "
                f"State directory {_mb(r['state_dir_bytes'])} at the end (at most {_mb(r['state_dir_bytes_max'])}). "
                f"Its changelog: {_n(r['changelog_records'])} records, {_mb(r['changelog_bytes'])}, "
                f"{r['changelog_live_keys']:,} live (window, key) pairs: each window is its own key, so compaction "
                "removes nothing; the broker deletes them by time (retention.ms = store retention + "
                "windowstore.changelog.additional.retention.ms, 1 day by default), against its wall clock and "
                f"whole log segments only: {_n(r['changelog_records'])} of {r['fed']:,} records were still there.")
        if "ttl" in rows:
            r = rows["ttl"]
            sweeps = self.sweeps.get("ttl", [])
            example = next((s for s in sweeps if s.get("deleted")), None)
            lines.append(
                f"- **ttl** (timestamped store + STREAM_TIME punctuator every {sweep_ms(p) / 1000:g} s deleting keys "
                f"older than {p['growth_ttl_s']} s): at most {r['keys_max']:,} entries, {r['keys_end']:,} at the "
                f"end (bound about {r['expected_bound']:,}); {r['sweeps']} sweeps deleted "
                f"{_n(r['tombstones_written'])} keys"
                + (f", for one {(example['stream_time'] - self.first_ms) / 1000:,.0f} s into the event time: "
                   f"`deleted {example['deleted']}, kept {example['kept']}`" if example else "")
                + f". Its changelog holds {_n(r['changelog_records'])} records ({_mb(r['changelog_bytes'])}), a put "
                "and a tombstone per expired key"
                + (f" (the kv one: {_n(rows['kv']['changelog_records'])})" if "kv" in rows else "")
                + f", but only {r['changelog_live_keys']:,} "
                "keys are live: compaction removes the deleted keys' values, and their tombstones after "
                "delete.retention.ms (1 day by default).")
        lines.append("KIP-258 gave stores record timestamps, but no TTL: the changelog is the source of truth, so an "
                     "expiry has to be a delete (a tombstone) that the changelog sees too"
                     + (", as the ttl app does." if "ttl" in rows else "."))
        return "\n".join(lines)

    def figure(self):
        from plotly.subplots import make_subplots
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                            subplot_titles=("entries in the store: exact (solid), RocksDB's estimate-num-keys (dotted)",
                                            "bytes: state directory (solid), changelog on the broker (dotted)"))
        fed = self.fed_progress
        fig.add_scatter(x=[t - self.t0 for t, _ in fed], y=[n for _, n in fed], name="keys fed", mode="lines",
                        line=dict(color="#7f7f7f", dash="dash"), row=1, col=1)
        for kind, reports in self.series.items():
            t = [r["ts"] - self.t0 for r in reports]
            color = COLORS[kind]
            fig.add_scatter(x=t, y=[r["keys"] for r in reports], name=kind, mode="lines+markers",
                            line=dict(color=color), legendgroup=kind, row=1, col=1)
            fig.add_scatter(x=t, y=[r.get("estimate_num_keys") for r in reports], name=f"{kind} estimate-num-keys",
                            mode="lines", line=dict(color=color, dash="dot"), legendgroup=kind, showlegend=False,
                            row=1, col=1)
            fig.add_scatter(x=t, y=[r.get("state_dir_bytes") for r in reports], name=f"{kind} state dir",
                            mode="lines", line=dict(color=color), legendgroup=kind, showlegend=False, row=2, col=1)
            fig.add_scatter(x=t, y=[r.get("changelog_bytes") for r in reports], name=f"{kind} changelog",
                            mode="lines", line=dict(color=color, dash="dot"), legendgroup=kind, showlegend=False,
                            row=2, col=1)
        fig.update_xaxes(title_text="seconds since the run began", row=2, col=1)
        fig.update_yaxes(title_text="entries", row=1, col=1)
        fig.update_yaxes(title_text="bytes", row=2, col=1)
        fig.update_layout(title="New keys: what each store holds", template="plotly_white", height=560)
        return fig


def _n(value) -> str:
    return "?" if value is None else f"{value:,.0f}"


def _mb(value) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MB"
