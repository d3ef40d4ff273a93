"""Notebook 06 section 1 ("State stores don't have TTL"), one lesson of state_in_production (PARAMS, RULES, needs,
run_lesson -> Outcome): GROWTH_RECORDS ever-new keys, their timestamps GROWTH_STEP_MS apart (minutes of stream time
in seconds), read by one lab/java/StateGrowthApp.java per kind (kv, window, ttl); each store is sampled every second
and each changelog read to its end. The write buffer is GROWTH_MEMTABLE_KB, not Streams' 16 MB, so entries reach
the disk; a store is unbounded when it gained more than GROWING entries per record fed over the feed's second half.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

from ...config import KAFKA_VERSION
from ...connection import kafka_config
from ...errors import LabError
from ...experiment.checks import half_the_free_disk
from ...experiment import Param
from ...experiment.admin import topic_offsets
from ...experiment.consume import read_to_end
from ...experiment.streams_app import StreamsApp, stop_all, wait_running
from ...logs import client_config

KINDS = ("kv", "window", "ttl")
COLORS = {"kv": "#d62728", "window": "#1f77b4", "ttl": "#2ca02c"}
SWEEPS_PER_TTL = 5            # the ttl app's punctuator runs every TTL / 5 of stream time
MIN_SEGMENT_MS = 60_000       # Stores.persistentWindowStore: segment interval = max(retention / 2, 60 s)
INPUT_RETENTION_DAYS = 7      # the input topic's retention.ms (broker default), against record timestamps
# Bytes on disk per record, generously: the input record, then per kind a store entry and a changelog record
# (twice for ttl: the put and its tombstone).
BYTES_PER_RECORD_INPUT, BYTES_PER_RECORD_KIND = 120, 400
GROWING = 0.5                 # entries gained per record fed over the feed's second half: above = unbounded

PARAMS = [
    Param("growth_kinds", list(KINDS), "kv: a plain count (no TTL); window: a windowed count with a retention; "
          "ttl: a timestamped store whose punctuator deletes old keys; side by side", choices=KINDS),
    Param("growth_records", 40_000, "input records, each with a key never seen before", lo=1_000, hi=500_000),
    Param("growth_rate", 800.0, "input records per second (wall time)", lo=10, hi=20_000, unit="records/s"),
    Param("growth_step_ms", 100, "event time between two input records (their timestamps)", lo=1, hi=60_000,
          unit="ms"),
    Param("growth_window_s", 60, "the windowed count's window size (tumbling)", lo=1, hi=86_400, unit="s"),
    Param("growth_retention_s", 300, "the windowed store's retention (Materialized.withRetention), event time",
          lo=1, hi=7 * 86_400, unit="s"),
    Param("growth_memtable_kb", 128, "RocksDB write buffer (memtable) per store instance: entries reach the disk "
          "each time one fills (Kafka Streams' default: 16384 KB)", lo=64, hi=65_536, unit="KB",
          why="RocksDB rounds smaller buffers up; 64 MB x 3 per instance is already more than the apps' memory"),
    Param("growth_ttl_s", 300, "the ttl store deletes keys not updated for this long (stream time)", lo=1,
          hi=7 * 86_400, unit="s", why="the punctuator runs every TTL / 5, and Kafka's minimum interval is 1 ms"),
]


def _kinds(p: dict) -> str | None:
    kinds = p["growth_kinds"]
    if not kinds:
        return f"GROWTH_KINDS is empty: choose some of {list(KINDS)}."
    return None


def _retention_covers_window(p: dict) -> str | None:
    if "window" in p["growth_kinds"] and p["growth_retention_s"] < p["growth_window_s"]:
        return (f"GROWTH_RETENTION_S={p['growth_retention_s']} is shorter than GROWTH_WINDOW_S="
                f"{p['growth_window_s']}: Kafka Streams refuses a window store whose retention is smaller than "
                "its window size plus grace.")
    return None


def _span_within_input_retention(p: dict) -> str | None:
    span_days = p["growth_records"] * p["growth_step_ms"] / 86_400_000
    if span_days > INPUT_RETENTION_DAYS - 1:
        return (f"GROWTH_RECORDS x GROWTH_STEP_MS is {span_days:.1f} days of event time: the input's timestamps "
                f"start that far back, and the broker deletes records older than its {INPUT_RETENTION_DAYS}-day "
                "retention as they land. Fewer records or a smaller step.")
    return None


def _fits_on_disk(p: dict) -> str | None:
    need = p["growth_records"] * (BYTES_PER_RECORD_INPUT + BYTES_PER_RECORD_KIND * len(p["growth_kinds"]))
    return half_the_free_disk(need, f"GROWTH_RECORDS={p['growth_records']} (the input, stores and changelogs)")


RULES = [_kinds, _retention_covers_window, _span_within_input_retention, _fits_on_disk]


def asked_kind(p: dict) -> str:
    """The store the Predict question is about: the plain count (no TTL) if it runs."""
    return "kv" if "kv" in p["growth_kinds"] else p["growth_kinds"][0]


def question(p: dict) -> tuple:
    return (f"The `{asked_kind(p)}` store gets a key it never saw before with every record, {p['growth_records']:,} "
            f"records {p['growth_step_ms']} ms apart in event time. How many keys does it hold at the end?", None)


def measured_answer(record: dict, p: dict):
    row = record["growth"].get(asked_kind(p))
    return None if row is None else row["keys_end"]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def segment_interval_ms(retention_ms: int) -> int:
    """The segment interval Kafka Streams gives a DSL window store (Stores.persistentWindowStore)."""
    return max(retention_ms // 2, MIN_SEGMENT_MS)


def sweep_ms(p: dict) -> int:
    return max(1, p["growth_ttl_s"] * 1000 // SWEEPS_PER_TTL)


def expected_bound(p: dict, kind: str) -> int:
    """At most how many entries the store should hold once it is full: what arrives in its lifetime.

    window: RocksDB keeps an entry until its whole segment is older than the retention: up to retention + one
            segment (interactive queries show only the entries younger than the retention)
    ttl:    up to the TTL + one sweep interval
    kv:     every key: the records fed
    """
    step = p["growth_step_ms"]
    if kind == "window":
        retention = p["growth_retention_s"] * 1000
        life = retention + segment_interval_ms(retention)
    elif kind == "ttl":
        life = p["growth_ttl_s"] * 1000 + sweep_ms(p)
    else:
        return p["growth_records"]
    return min(p["growth_records"], life // step + 1)


def feed(bootstrap: str, topic: str, records: int, rate: float, step_ms: int, first_ms: int, stopping,
         progress: list) -> int:
    """Produce `records` records with new keys s0000000, s0000001, ... and timestamps first_ms + i * step_ms
    at `rate` per second; returns how many Kafka acknowledged. lab.generator.generate sets no timestamp, hence
    this small producer. `progress` gets (epoch s, records sent so far)."""
    producer = Producer(client_config({**kafka_config(bootstrap), "linger.ms": 5, "enable.idempotence": True}))
    acked, errors = [0], []

    def delivered(err, msg):
        if err is None and msg.offset() is not None and msg.offset() >= 0:
            acked[0] += 1
        else:
            errors.append(str(err))

    start = time.monotonic()
    try:
        for i in range(records):
            if stopping.is_set():
                break
            while True:
                try:
                    producer.produce(topic, key=f"s{i:07d}", value=b"1", timestamp=first_ms + i * step_ms,
                                     on_delivery=delivered)
                    break
                except BufferError:   # local queue full: let deliveries drain
                    producer.poll(0.1)
            producer.poll(0)
            if i % 100 == 0:
                progress.append((time.time(), i))
            ahead = (i + 1) / rate - (time.monotonic() - start)
            if ahead > 0:
                stopping.wait(ahead)
        if producer.flush(60):
            raise LabError(f"records to {topic} were still undelivered after 60 s: is the broker up?")
    except KafkaException as exc:
        raise LabError(f"Producing to {topic} failed: {exc.args[0]}") from None
    progress.append((time.time(), acked[0]))
    if errors:
        raise LabError(f"{len(errors)} records to {topic} failed, e.g. {errors[0]}")
    return acked[0]


def _app(lab, kind: str, topic: str, p: dict, app_id: str | None = None, name: str | None = None,
         state=None, config: dict | None = None, **lab_props) -> StreamsApp:
    """One kind's app: one JVM of StateGrowthApp (its "growth" LAB lines report the store every second).
    `config`: more Streams configs; `lab_props`: more of its lab.* settings, named without the prefix
    (disk_limit_bytes=...)."""
    app_id = app_id or f"growth-{kind}-{uuid.uuid4().hex[:4]}"
    name = name or f"growth-{kind}"
    return StreamsApp(lab, app_id, [name], KAFKA_VERSION, "StateGrowthApp",
                      ["StateGrowthApp.java", "Lab.java", "LabStreams.java"], {
                          "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                          "num.stream.threads": 1,
                          "state.dir": state or lab.folder / app_id, "consumer.auto.offset.reset": "earliest",
                          # no record cache: every update reaches RocksDB and the changelog as it happens
                          "statestore.cache.max.bytes": 0,
                          "lab.kind": kind, "lab.app": name, "lab.input.topic": topic,
                          "lab.window.ms": p["growth_window_s"] * 1000,
                          "lab.retention.ms": p["growth_retention_s"] * 1000,
                          "lab.ttl.ms": p["growth_ttl_s"] * 1000, "lab.sweep.ms": sweep_ms(p), "lab.report.ms": 1000,
                          "lab.write.buffer.bytes": p["growth_memtable_kb"] * 1024,
                          **(config or {}), **{"lab." + k.replace("_", "."): v for k, v in lab_props.items()}},
                      report="growth", heap="192m")


def _reports(app: StreamsApp) -> list[dict]:
    return app.reports(app.programs[0])


def changelog(app: StreamsApp, kind: str) -> str:
    return f"{app.app_id}-{kind}-store-changelog"


def read_changelog(lab, topic: str, records: int) -> dict:
    """What is in a changelog: records, tombstones, and the keys whose last record is a value (what
    compaction keeps: it removes overwritten values, and tombstones after delete.retention.ms)."""
    rows = read_to_end(lab.bootstrap, topic, timeout=20 + records / 20_000)
    live: set = set()
    tombstones = 0
    for key, value, _ in rows:
        if value is None:
            tombstones += 1
            live.discard(key)
        else:
            live.add(key)
    return {"records_read": len(rows), "tombstones": tombstones, "live_keys": len(live)}


def run_lesson(lab, p: dict) -> "Outcome":
    records, step = p["growth_records"], p["growth_step_ms"]
    topic = lab.topics(f"growth-input-{lab.id[-6:]}", partitions=1)[0]
    # Timestamps end about now: backdated, never in the future (the broker may refuse those).
    first_ms = int(time.time() * 1000) - records * step
    apps = {kind: _app(lab, kind, topic, p) for kind in p["growth_kinds"]}
    for app in apps.values():
        app.start()
    wait_running(lab, apps.values(), 120, "the store apps to run",
                 ready=lambda a, prog: a.last(prog)["keys"] is not None,
                 evidence=lambda: {k: a.last(a.programs[0]) for k, a in apps.items()})
    admin = lab.cluster.admin()
    offsets: dict = {kind: [] for kind in apps}   # kind -> [(epoch s, changelog records = end - start)]

    def sample_changelogs():
        for kind, app in apps.items():
            try:
                ends = topic_offsets(admin, changelog(app, kind))
                starts = topic_offsets(admin, changelog(app, kind), spec="earliest")
            except Exception:   # not created yet
                continue
            offsets[kind].append((time.time(), ends[0] - starts[0]))

    fed_progress: list = []
    feed_start = time.time()
    feeding = lab.background(feed, lab.bootstrap, topic, records, p["growth_rate"], step, first_ms,
                             lab.stopping, fed_progress, name="growth-input")
    last_sample = [0.0]

    def caught_up():
        if time.time() - last_sample[0] >= 2:
            last_sample[0] = time.time()
            sample_changelogs()
        for app in apps.values():
            app.check_alive()
        return feeding.done and all((r := _reports(a)) and r[-1]["processed"] >= records for a in apps.values())

    with lab.step(f"feeding {records:,} new keys, {records * step / 1000:,.0f} s of event time", lane="input"):
        lab.wait(caught_up, records / p["growth_rate"] + 120, "the store apps to process every record",
                 evidence=lambda: {k: (_reports(a) or [{}])[-1].get("processed") for k, a in apps.items()},
                 interval=0.5)
    fed = feeding.result(timeout=10)
    feed_end = time.time()
    # one more report each, taken after the last record
    lab.wait(lambda: all(_reports(a)[-1]["ts"] > feed_end + 0.5 for a in apps.values()), 15,
             "a last report from each app")
    sample_changelogs()
    stop_all(apps.values(), timeout=30)
    contents = {kind: read_changelog(lab, changelog(app, kind), 2 * records) for kind, app in apps.items()}
    series = {kind: [r for r in _reports(a) if r.get("keys") is not None] for kind, a in apps.items()}
    sweeps = {kind: a.reports(a.programs[0], kind="sweep") for kind, a in apps.items()}
    rows = [summarise(kind, series[kind], fed, p, offsets[kind], contents[kind]) for kind in apps]
    for row in rows:
        lab.event("stores", row["kind"], detail=f"{row['keys_end']:,} entries for {row['processed']:,} keys fed",
                  tone="failure" if row["grows"] else "control")
    return Outcome(rows, series, fed_progress, dict(p), feed_start, feed_end, lab.t0, first_ms, sweeps)


def summarise(kind: str, reports: list[dict], fed: int, p: dict, offsets: list, contents: dict) -> dict:
    """One kind's row: entries at the feed's middle and end, and how many it gained per record in between."""
    if not reports:
        raise LabError(f"the {kind} app never reported its store")
    last = reports[-1]
    middle = next((r for r in reports if r["processed"] >= last["processed"] / 2), last)
    gained = last["keys"] - middle["keys"]
    per_record = gained / (last["processed"] - middle["processed"]) if last["processed"] > middle["processed"] \
        else None
    return {"kind": kind, "fed": fed, "processed": last["processed"],
            "keys_middle": middle["keys"], "keys_end": last["keys"], "keys_max": max(r["keys"] for r in reports),
            "gained_per_record": None if per_record is None else round(per_record, 3),
            "grows": per_record is not None and per_record > GROWING,
            "expected_bound": expected_bound(p, kind),
            "estimate_num_keys": last.get("estimate_num_keys"),
            "total_sst_bytes": last.get("total_sst_bytes"), "memtable_bytes": last.get("memtable_bytes"),
            "state_dir_bytes": last.get("state_dir_bytes"), "state_dir_bytes_max": max(
                r.get("state_dir_bytes") or 0 for r in reports),
            "changelog_records": offsets[-1][1] if offsets else None,
            "changelog_bytes": last.get("changelog_bytes"),
            "changelog_tombstones": contents["tombstones"], "changelog_live_keys": contents["live_keys"],
            "changelog_read_complete": bool(offsets) and contents["records_read"] == offsets[-1][1],
            "tombstones_written": last.get("tombstones"), "sweeps": last.get("sweeps")}


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
                + (f", e.g. {(example['stream_time'] - self.first_ms) / 1000:,.0f} s into the event time: "
                   f"`deleted {example['deleted']}, kept {example['kept']}`" if example else "")
                + f". Its changelog holds {_n(r['changelog_records'])} records ({_mb(r['changelog_bytes'])}), a put "
                "and a tombstone per expired key"
                + (f" (the kv one: {_n(rows['kv']['changelog_records'])})" if "kv" in rows else "")
                + f", but only {r['changelog_live_keys']:,} "
                "keys are live: compaction removes the deleted keys' values, and their tombstones after "
                "delete.retention.ms (1 day by default).")
        lines.append("KIP-258 gave stores record timestamps, but no TTL: the changelog is the source of truth, so an "
                     "expiry has to be a delete (a tombstone) that the changelog sees too, as the ttl app does.")
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
        fig.update_layout(title="New keys, three stores: which ones forget", template="plotly_white", height=560)
        return fig


def _n(value) -> str:
    return "?" if value is None else f"{value:,.0f}"


def _mb(value) -> str:
    return "?" if value is None else f"{value / 2**20:.1f} MB"
