"""One verdict for every failure notebook, computed on Spark from what actually landed in Kafka.

The checks follow Jepsen's Kafka checker, adapted to what a single laptop run records:

    duplicate                one input id reflected more than once in committed output
    lost                     an input id never reflected in committed output
    reprocessed_after_reset  a group re-read an offset it had already committed
    skipped_after_reset      an offset a group never read although it went on past it
    aborted_read             records of aborted transactions visible to read_uncommitted
                             (or, worse, to read_committed)
    stale_value              a per-key aggregate that goes backwards or differs from the truth
    non_monotonic            a consumer's offsets not increasing within one partition, same incarnation

Inputs: a History (lab.history) plus, optionally, the output and input topics (read
through the official Spark connector, read_committed and read_uncommitted). Every
check is a Spark DataFrame of anomaly rows with a `time` column (epoch seconds);
only counts, per-second counts and the first few rows come back to pandas.
A check whose inputs are missing is not run and reports None, never 0.
"""
from __future__ import annotations

import math
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .connection import kafka_config
from .errors import LabError
from .history import History

KINDS = ("duplicate", "lost", "reprocessed_after_reset", "skipped_after_reset", "aborted_read",
         "stale_value", "non_monotonic")
# what a restart after a reset of the committed offsets can do (notebooks 01 and 08)
RESET_KINDS = ["reprocessed_after_reset", "skipped_after_reset"]

MEANING = {
    "duplicate": "input id reflected more than once in committed output",
    "lost": "input id never reflected in committed output",
    "reprocessed_after_reset": "group re-read an offset it had already committed",
    "skipped_after_reset": "offset never read by a group that went on past it",
    "aborted_read": "aborted-transaction record visible to a reader",
    "stale_value": "aggregate went backwards or differs from the truth",
    "non_monotonic": "offsets not increasing within one consumer incarnation",
}

NEEDS = {
    "duplicate": "an output topic",
    "lost": "an output topic and 'produced' history",
    "reprocessed_after_reset": "'read' and 'committed' history",
    "skipped_after_reset": "'read' history and 'produced' history (or an input topic)",
    "aborted_read": "an output or input topic",
    "stale_value": "an output topic whose values carry {'key', 'value'}",
    "non_monotonic": "'read' history",
}

# One explicit schema for every kind: ids stay strings, numbers stay numbers, missing fields are null.
HISTORY_SCHEMA = ("run_id STRING, kind STRING, ts DOUBLE, id STRING, key STRING, seq LONG, topic STRING, "
                  "`partition` INT, `offset` LONG, true_value DOUBLE, aborted BOOLEAN, app STRING, "
                  "incarnation LONG, `group` STRING")
HISTORY_KINDS = ("produced", "read", "committed", "restart")
OUTPUT_VALUE_SCHEMA = "id STRING, key STRING, value DOUBLE"


# ------------------------------------------------------------------ verdict

@dataclass
class Verdict:
    counts: dict                      # kind -> int, or None when not checked
    examples: dict                    # kind -> pandas DataFrame (first few, by time)
    expect: str                       # "anomalies" or "clean"
    run_id: str = ""
    timeline: object = None           # pandas DataFrame: kind, second (epoch), count
    start: float | None = None        # epoch seconds the run began (t_s = 0)
    notes: list = field(default_factory=list)
    seconds: float = 0.0              # how long the audit took

    @property
    def checked(self) -> dict:
        return {k: v for k, v in self.counts.items() if v is not None}

    @property
    def total(self) -> int:
        return sum(self.checked.values())

    @property
    def passed(self) -> bool:
        """Anomalies found when the run expects them; none (and something checked) when it expects clean."""
        if not self.checked:
            return False
        return self.total > 0 if self.expect == "anomalies" else self.total == 0

    def summary(self) -> str:
        found = ", ".join(f"{k}={v}" for k, v in self.checked.items() if v) or "no anomalies"
        skipped = [k for k, v in self.counts.items() if v is None]
        tail = f" (not checked: {', '.join(skipped)})" if skipped else ""
        return f"{'PASS' if self.passed else 'FAIL'}: expected {self.expect}, found {found}{tail}"

    def table(self):
        """One compact row per anomaly kind."""
        import pandas as pd
        rows = []
        for kind in KINDS:
            if kind not in self.counts:
                continue
            count = self.counts[kind]
            ex = self.examples.get(kind)
            first = ex.iloc[0] if ex is not None and len(ex) else None
            rows.append({
                "anomaly": kind,
                "count": "not checked" if count is None else count,
                "first at (s)": None if first is None else first.get("t_s"),
                "first example": "" if first is None else _describe(first),
                "meaning": MEANING[kind] if count is not None else f"needs {NEEDS[kind]}",
            })
        return pd.DataFrame(rows)

    def figure(self, bucket: float | None = None):
        """Plotly: anomalies over time (seconds since the run began), one colour per kind."""
        import plotly.graph_objects as go
        fig = go.Figure()
        tl = self.timeline
        if tl is None or not len(tl):
            fig.add_annotation(text="no anomalies" if self.checked else "nothing checked",
                               showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font_size=18)
        else:
            start = self.start if self.start is not None else float(tl["second"].min())
            t = tl["second"] - math.floor(start)  # counted per whole second: align the buckets
            span = max(float(t.max() - t.min()), 1.0)
            bucket = bucket or _nice_bucket(span / 60)
            tl = tl.assign(t=(t // bucket) * bucket).groupby(["kind", "t"], as_index=False)["count"].sum()
            for kind in KINDS:
                part = tl[tl["kind"] == kind]
                if len(part):
                    fig.add_bar(x=part["t"], y=part["count"], name=f"{kind} ({self.counts[kind]})",
                                width=bucket * 0.9, offset=0)
            fig.update_layout(barmode="stack")
        fig.update_layout(title=self.summary(), xaxis_title="seconds since the run began",
                          yaxis_title="anomalies", legend_title="kind", height=380,
                          margin=dict(l=60, r=20, t=60, b=50), title_font_size=13)
        return fig

    def as_dict(self) -> dict:
        """JSON-safe, for lab.recorded.record()."""
        return {"expect": self.expect, "passed": self.passed, "counts": dict(self.counts),
                "total": self.total, "not_checked": [k for k, v in self.counts.items() if v is None],
                "notes": list(self.notes)}

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{n}</li>" for n in self.notes)
        return (f"<b>{self.summary()}</b>" + self.table().to_html(index=False, na_rep="")
                + (f"<ul>{notes}</ul>" if notes else ""))


def _describe(row) -> str:
    """A short human line for one example row."""
    skip = {"time", "t_s", "kind"}
    parts = [f"{k}={v}" for k, v in row.items() if k not in skip and v is not None and str(v) != "nan"]
    return ", ".join(parts)[:120]


def _nice_bucket(x: float) -> float:
    for b in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600):  # the timeline is counted per second
        if b >= x:
            return b
    return 3600


# ------------------------------------------------------------------ audit

def audit(history: History, *, bootstrap: str | None = None, output_topic: str | None = None,
          input_topic: str | None = None, expect: str = "anomalies", kinds=None, spark=None,
          examples: int = 5, output_df=None, output_uncommitted_df=None,
          allow_empty: bool = False, aborted_reader: str = "read_uncommitted") -> Verdict:
    """Run every applicable check (or just `kinds`) and return a Verdict.

    aborted_reader: "read_uncommitted" counts every aborted record a read_uncommitted reader
    would see (the issue's definition); "read_committed" counts only aborted records that reached
    committed data, which is what an exactly-once mitigation run must keep at 0 even though
    its producers legitimately abort transactions.

    output_df / output_uncommitted_df: DataFrames shaped like lab.spark.read_topic's
    (key, value, partition, offset, timestamp) to audit instead of reading output_topic
    (benchmarks, tests). allow_empty: audit an empty topic instead of refusing.
    """
    started = time.monotonic()
    if expect not in ("anomalies", "clean"):
        raise LabError(f"expect must be 'anomalies' (a failure run) or 'clean' (a mitigation run), not {expect!r}.")
    wanted = _wanted_kinds(kinds)
    if aborted_reader not in ("read_uncommitted", "read_committed"):
        raise LabError(f"aborted_reader must be 'read_uncommitted' or 'read_committed', not {aborted_reader!r}.")
    if not isinstance(history, History):
        raise LabError(f"audit needs a lab.history.History, not {type(history).__name__}.")
    if (output_topic or input_topic) and not bootstrap:
        raise LabError("Reading topics needs bootstrap= (the cluster's .bootstrap).")

    # Topic facts first (cheap, no Spark): a missing or empty topic is a clear message.
    offsets = {}
    for topic in dict.fromkeys(t for t in (output_topic, input_topic) if t):
        offsets[topic] = _topic_offsets(bootstrap, topic)
    if output_topic and output_df is None and not allow_empty and _is_empty(offsets[output_topic]):
        raise LabError(f"The output topic {output_topic!r} is empty: the app under test wrote nothing there "
                       "(did it run, and does it write to this topic?). Pass allow_empty=True to audit it anyway.")
    if input_topic and not allow_empty and _is_empty(offsets[input_topic]):
        raise LabError(f"The input topic {input_topic!r} is empty: nothing was produced to it (did the "
                       "generator run, against this cluster?). Pass allow_empty=True to audit it anyway.")

    from .spark import spark_session
    spark = spark or spark_session()
    cached: list = []  # every frame this audit caches, released whatever happens
    try:
        verdict = _run(spark, history, cached, bootstrap=bootstrap, output_topic=output_topic,
                       input_topic=input_topic, expect=expect, wanted=wanted, examples=examples,
                       output_df=output_df, output_uncommitted_df=output_uncommitted_df, offsets=offsets,
                       aborted_reader=aborted_reader)
    finally:
        for df in cached:
            df.unpersist()
    verdict.seconds = time.monotonic() - started
    return verdict


def warm_up() -> None:
    """Start Spark in a background thread and audit a tiny history there, so that a run's first audit finds
    the session up and Spark's classes loaded and its code generated: cold, the 11 audits of notebook 07's
    poll lesson took 12.5 s, and 5.3 s the next time. A failure here is dropped: the real audit meets it."""
    import pyspark.sql  # noqa: F401  here: two threads' first imports of pyspark trip on its circular imports

    def exercise():
        try:
            with tempfile.TemporaryDirectory(prefix="audit-warm-up-") as folder:
                history = History(folder, "warm-up")
                history.log_many("read", [{"app": "a", "incarnation": 0, "topic": "t", "partition": 0,
                                           "offset": offset, "id": str(offset)} for offset in (0, 1, 1)])
                history.close()
                audit(history, kinds=["non_monotonic"])
        except Exception:
            pass
    threading.Thread(target=exercise, name="audit-warm-up", daemon=True).start()


def _run(spark, history, cached, *, bootstrap, output_topic, input_topic, expect, wanted, examples,
         output_df, output_uncommitted_df, offsets, aborted_reader) -> Verdict:
    from pyspark.sql import functions as F
    notes: list[str] = []
    h = _load_history(spark, history, cached)
    if not any(df is not None for df in h.values()) and not output_topic and output_df is None:
        raise LabError(f"Nothing to audit: the history folder {history.folder} has no records and no "
                       "output topic was given.")

    produced = h["produced"]
    if produced is not None and input_topic:
        produced = produced.filter(F.col("topic") == input_topic)
    intended = produced.filter(~F.coalesce(F.col("aborted"), F.lit(False))) if produced is not None else None

    # Each topic is read once, both isolation levels in one job, and frozen: every check sees the same data.
    # The committed view is parsed (JSON value -> id, key, value) and cached; the uncommitted one stays raw.
    out = out_u = None
    if output_df is not None:
        out, out_u = output_df, output_uncommitted_df
    elif output_topic:
        out, out_u = _read_both(spark, bootstrap, output_topic)
    if out is not None:
        out = _parse_output(out).cache()
        cached.append(out)
        total, with_id, with_value = out.agg(F.count("*"), F.count("id"), F.count("value")).first()
        if total and not with_id:
            first = out.select("raw").first()
            raise LabError(f"The output records carry no JSON 'id' field, so they cannot be matched to inputs "
                           f"(first value: {first['raw']!r}). Apps under test must write JSON values with "
                           "at least {\"id\": <input id>}.")
        if total > with_id:
            notes.append(f"{total - with_id} output record(s) carry no 'id' and were ignored.")
        out = out.filter(F.col("id").isNotNull())
        # Every output record next to the input it reflects: duplicate, lost and stale_value read this.
        matched = _match(out, intended).persist()
        cached.append(matched)
    inputs = None
    if input_topic and input_topic != output_topic:
        committed_in, uncommitted_in = _read_both(spark, bootstrap, input_topic)
        inputs = (_parse_output(committed_in), uncommitted_in)

    checks = {}
    if out is not None:
        checks["duplicate"] = lambda: _duplicates(matched)
        if intended is not None:
            checks["lost"] = lambda: _lost(matched)
        if with_value:
            checks["stale_value"] = lambda: _stale(matched)
    if h["read"] is not None and h["committed"] is not None:
        checks["reprocessed_after_reset"] = lambda: _reprocessed(h["read"], h["committed"], h["restart"])
    if h["read"] is not None:
        checks["non_monotonic"] = lambda: _non_monotonic(h["read"])
        existing = intended
        if existing is None and inputs is not None:  # no ground truth: the records the topic holds
            existing = inputs[0].select("id", "partition", "offset", F.col("time").alias("ts"),
                                        F.lit(input_topic).alias("topic"))
        if existing is not None:
            checks["skipped_after_reset"] = lambda: _skipped(h["read"], existing)
    sources = []
    if out_u is not None:
        sources.append((output_topic or "output", out, out_u, offsets.get(output_topic)))
    if inputs is not None:
        sources.append((input_topic, *inputs, offsets[input_topic]))
    if sources:
        checks["aborted_read"] = lambda: _aborted(spark, sources, h["produced"])

    for kind in wanted or ():
        if kind not in checks:
            raise LabError(f"The {kind} check needs {NEEDS[kind]}, which this audit was not given.")
    run = [k for k in KINDS if k in checks and (not wanted or k in wanted)]
    counts = {k: None for k in KINDS} if not wanted else {}
    counts.update({k: 0 for k in run})

    # All anomalies as one frame (kind, time, detail as JSON): two jobs answer everything.
    frames = []
    for kind in run:
        rows = checks[kind]()
        if kind == "aborted_read":  # records of transactions still open are reported, not judged
            frames.append(_as_anomalies("_pending", rows.filter(F.col("seen_by") == "_pending")))
            rows = rows.filter(F.col("seen_by") != "_pending")
            if aborted_reader == "read_committed":
                rows = rows.filter(F.col("seen_by") == "read_committed")
        frames.append(_as_anomalies(kind, rows))
    if out is not None and intended is not None:  # not an anomaly, but a sign of a reused topic
        frames.append(_as_anomalies("_foreign", matched.filter(F.col("produced_ts").isNull())  # no input
                                    .select("id", "time")))
    timeline, found = _collect(frames, examples)
    for kind, n in timeline.groupby("kind")["count"].sum().items():
        if kind in counts:
            counts[kind] = int(n)
    _add_notes(notes, timeline, found)
    timeline = timeline[timeline["kind"].isin(run)].reset_index(drop=True)

    start = history.start_time()
    if start is None and len(timeline):
        start = float(timeline["second"].min())
    found = {k: _with_times(found.get(k), start) for k in run}
    return Verdict(counts=counts, examples=found, expect=expect, run_id=history.run_id, timeline=timeline,
                   start=start, notes=notes)


def _as_anomalies(kind: str, rows):
    from pyspark.sql import functions as F
    details = [c for c in rows.columns if c != "time"]
    return rows.select(F.lit(kind).alias("kind"), F.col("time").cast("double").alias("time"),
                       F.to_json(F.struct(*details)).alias("detail"))


def _collect(frames, examples: int):
    """-> (timeline pandas: kind, second, count;  {kind: [first rows by time]})."""
    import json as _json
    from functools import reduce

    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    if not frames:
        return pd.DataFrame(columns=["kind", "second", "count"]), {}
    rows = reduce(lambda a, b: a.unionByName(b), frames).persist()
    try:
        timeline = rows.groupBy("kind", F.floor("time").alias("second")).count().toPandas()
        first = Window.partitionBy("kind").orderBy(F.col("time").asc_nulls_last())
        picked = (rows.withColumn("n", F.row_number().over(first)).filter(F.col("n") <= examples)
                  .orderBy("kind", "n").collect())
    finally:
        rows.unpersist()
    found: dict = {}
    for r in picked:
        found.setdefault(r["kind"], []).append({"time": r["time"], **_json.loads(r["detail"])})
    return timeline, found


def _add_notes(notes: list, timeline, found: dict) -> None:
    def total(kind):
        return int(timeline.loc[timeline["kind"] == kind, "count"].sum())
    if total("_foreign"):
        notes.append(f"{total('_foreign')} output record(s) carry ids that are not among this run's produced "
                     "(committed) ids: output left from another run in the same topic, or of aborted inputs?")
    if total("_pending"):
        topics = sorted({r["topic"] for r in found.get("_pending", [])})
        notes.append(f"{total('_pending')} record(s) of {', '.join(topics)} were in transactions still open "
                     "at audit time (at or past the last stable offset) and were not judged.")


def _wanted_kinds(kinds):
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = [kinds]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise LabError(f"Unknown anomaly kind(s) {unknown}; the kinds are {list(KINDS)}.")
    return list(kinds)


def _with_times(rows, start):
    """First example rows -> pandas, with `t_s` (seconds since the run began) and a UTC `time`."""
    import pandas as pd
    df = pd.DataFrame(rows or [])
    if not len(df):
        return df
    df.insert(0, "t_s", (df["time"] - start).round(3) if start is not None else None)
    for col in [c for c in df.columns if c.endswith("_ts")]:  # other moments, also relative
        df[col] = (df[col] - start).round(3) if start is not None else df[col]
    df["time"] = pd.to_datetime(df["time"], unit="s", utc=True).dt.round("ms")
    return df


# ------------------------------------------------------------------ inputs

def _topic_offsets(bootstrap: str, topic: str) -> dict:
    """partition -> (earliest, last stable offset, high watermark), from the broker itself."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({**kafka_config(bootstrap), "log_level": 0})
    try:
        md = admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise LabError(f"The Kafka cluster at {bootstrap} does not answer ({exc.args[0]}): is it running?") from None
    if topic not in md.topics:
        names = sorted(t for t in md.topics if not t.startswith("__"))
        raise LabError(f"Topic {topic!r} does not exist on {bootstrap}. Topics there: {names or 'none'}.")
    parts = [TopicPartition(topic, p) for p in sorted(md.topics[topic].partitions)]

    def query(spec, isolation):
        futures = admin.list_offsets({tp: spec for tp in parts}, isolation_level=isolation, request_timeout=15)
        return {tp.partition: f.result().offset for tp, f in futures.items()}

    earliest = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    stable = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return {p: (earliest[p], stable[p], high[p]) for p in earliest}


def _is_empty(offsets: dict) -> bool:
    return all(high <= earliest for earliest, _, high in offsets.values())


def _load_history(spark, history: History, cached: list) -> dict:
    """{kind: DataFrame or None}: every file read in one pass and cached; mixed runs are refused."""
    from pyspark.sql import functions as F
    files = [str(history.path(k)) for k in HISTORY_KINDS if k in history.kinds()]
    if not files:
        return {k: None for k in HISTORY_KINDS}
    rows = (spark.read.schema(HISTORY_SCHEMA).option("mode", "DROPMALFORMED").json(files)
            .withColumn("line", F.monotonically_increasing_id())  # file order: the O_APPEND order of writes
            .cache())
    cached.append(rows)
    per_run = rows.groupBy("run_id", "kind").count().collect()  # also fills the cache
    others: dict = {}
    for r in per_run:
        if r["run_id"] != history.run_id:
            others[r["run_id"]] = others.get(r["run_id"], 0) + r["count"]
    if others:
        listed = ", ".join(f"{k!r} ({v} lines)" for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:5])
        raise LabError(f"The history in {history.folder} mixes runs: besides {history.run_id!r} it holds {listed}. "
                       "Give every run its own folder, or call History.clear() before the run starts.")
    present = {r["kind"] for r in per_run}
    return {k: rows.filter(F.col("kind") == k) if k in present else None for k in HISTORY_KINDS}


def _read_both(spark, bootstrap: str, topic: str):
    """(read_committed, read_uncommitted) raw views of a topic, read in one job and frozen."""
    from pyspark.sql import functions as F
    from .spark import read_topic
    both = (read_topic(bootstrap, topic, "read_committed", spark=spark).withColumn("committed", F.lit(True))
            .unionByName(read_topic(bootstrap, topic, "read_uncommitted", spark=spark)
                         .withColumn("committed", F.lit(False)))
            .localCheckpoint())
    return (both.filter("committed").drop("committed"), both.filter(~F.col("committed")).drop("committed"))


def _parse_output(df):
    """read_topic's frame -> partition, offset, time (epoch s), id, key, value, raw."""
    from pyspark.sql import functions as F
    parsed = F.from_json("value", OUTPUT_VALUE_SCHEMA)
    return (df.select("partition", "offset", F.col("timestamp").cast("double").alias("time"),
                      F.col("key").alias("kafka_key"), F.col("value").alias("raw"), parsed.alias("j"))
            .select("partition", "offset", "time", F.col("j.id").alias("id"),
                    F.coalesce("j.key", "kafka_key").alias("key"), F.col("j.value").alias("value"), "raw"))


# ------------------------------------------------------------------ checks
# Each returns a DataFrame of anomaly rows with a `time` column (epoch seconds).

def _match(out, intended):
    """Output records (in_output) full-outer-joined on id with the inputs that should be reflected."""
    from pyspark.sql import functions as F
    records = out.select("id", "key", "value", "partition", "offset", "time", F.lit(True).alias("in_output"))
    if intended is None:
        return records.select("*", *[F.lit(None).cast(t).alias(c) for c, t in
                                     [("input_key", "string"), ("input_topic", "string"), ("input_partition", "int"),
                                      ("input_offset", "long"), ("true_value", "double"), ("produced_ts", "double")]])
    inputs = intended.select("id", F.col("key").alias("input_key"), F.col("topic").alias("input_topic"),
                             F.col("partition").alias("input_partition"), F.col("offset").alias("input_offset"),
                             "true_value", F.col("ts").alias("produced_ts"))
    return records.join(inputs, "id", "full_outer")


def _duplicates(matched):
    from pyspark.sql import functions as F
    copies = F.sort_array(F.collect_list(F.struct("time", "partition", "offset")))
    return (matched.filter(F.col("in_output")).groupBy("id").agg(F.count("*").alias("copies"), copies.alias("c"))
            .filter(F.col("copies") > 1)
            .select("id", "copies",
                    F.expr("transform(c, x -> concat(x.partition, '@', x.offset))").alias("at"),
                    F.col("c")[1]["time"].alias("time")))      # when the second copy landed


def _lost(matched):
    from pyspark.sql import functions as F
    return (matched.filter(F.col("in_output").isNull())
            .select("id", F.col("input_key").alias("key"), F.col("input_topic").alias("topic"),
                    F.col("input_partition").alias("partition"), F.col("input_offset").alias("offset"),
                    F.col("produced_ts").alias("time")))


def _reprocessed(read, committed, restart):
    """A read of an offset below what the same group had already committed (by ts)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    cols = ["group", "topic", "partition", "offset", "ts", "app", "incarnation"]
    events = (read.select(*cols, "id", F.lit(0).alias("is_commit"))
              .unionByName(committed.select(*cols, F.lit(None).cast("string").alias("id"),
                                            F.lit(1).alias("is_commit"))))
    # At equal ts the read counts as before the commit: only earlier commits matter.
    w = (Window.partitionBy("group", "topic", "partition").orderBy("ts", "is_commit")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    rows = (events.withColumn("committed_before", F.max(F.when(F.col("is_commit") == 1, F.col("offset"))).over(w))
            .filter((F.col("is_commit") == 0) & (F.col("offset") < F.col("committed_before")))
            .select("app", "incarnation", "group", "topic", "partition", "offset", "committed_before", "id",
                    F.col("ts").alias("time")))
    if restart is not None:  # when the incarnation that re-read began
        starts = restart.groupBy("app", "incarnation").agg(F.min("ts").alias("restart_ts"))
        rows = rows.join(starts, ["app", "incarnation"], "left")
    return rows


def _skipped(read, existing):
    """Records sitting in a hole of a group's read offsets (the group read offsets on both sides)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    key = ["group", "topic", "partition"]
    # Holes: consecutive read offsets more than 1 apart. Ordered by (offset, ts), the row after a hole
    # is the earliest read past it: when the group went past. Holes left by transaction markers hold
    # no produced record, so they find nothing below.
    w = Window.partitionBy(*key).orderBy("offset", "ts")
    holes = (read.select(*key, "offset", "ts")
             .withColumn("next_offset", F.lead("offset").over(w)).withColumn("time", F.lead("ts").over(w))
             .filter(F.col("next_offset") > F.col("offset") + 1)
             .select(*key, F.col("offset").alias("read_before"), F.col("next_offset").alias("read_after"), "time"))
    return (existing.select("topic", "partition", "offset", "id", F.col("ts").alias("produced_ts"))
            .join(holes, ["topic", "partition"])
            .filter((F.col("offset") > F.col("read_before")) & (F.col("offset") < F.col("read_after")))
            .select(*key, "offset", "id", "read_before", "read_after", "produced_ts", "time"))


def _aborted(spark, sources, produced):
    """Records seen by read_uncommitted but not read_committed, below the last stable offset;
    plus ids the generator aborted that a read_committed reader nevertheless saw.
    Records at or past the last stable offset belong to transactions still open: seen_by "_pending"."""
    from functools import reduce
    from pyspark.sql import functions as F
    frames = []
    for topic, committed, uncommitted, offsets in sources:  # committed parsed, uncommitted raw
        only_u = _parse_output(uncommitted.join(committed.select("partition", "offset"),
                                                ["partition", "offset"], "left_anti"))
        only_u = only_u.withColumn("seen_by", F.lit("read_uncommitted"))
        if offsets:
            lso = spark.createDataFrame([(p, s) for p, (_, s, _) in offsets.items()], "partition INT, lso LONG")
            only_u = (only_u.join(F.broadcast(lso), "partition")
                      .withColumn("seen_by", F.when(F.col("offset") >= F.col("lso"), F.lit("_pending"))
                                  .otherwise(F.col("seen_by"))))
        frames.append(only_u.select(F.lit(topic).alias("topic"), "partition", "offset", "id", "time", "seen_by"))
        if produced is not None:
            # an id the generator aborted, in committed data: a read_committed reader saw it
            # (on the output topic: an app read the aborted input and its result was committed)
            aborted_ids = produced.filter(F.coalesce("aborted", F.lit(False))).select("id")
            frames.append(committed.join(aborted_ids, "id", "left_semi")
                          .select(F.lit(topic).alias("topic"), "partition", "offset", "id", "time",
                                  F.lit("read_committed").alias("seen_by")))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _stale(matched):
    """Per key, in output order: a value below the previous one, or unlike the true value for its id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("key").orderBy("partition", "offset")
    rows = (matched.filter(F.col("in_output") & F.col("value").isNotNull())
            .withColumn("previous", F.lag("value").over(w)))
    backwards = F.col("previous").isNotNull() & (F.col("value") < F.col("previous"))
    differs = F.col("true_value").isNotNull() & (F.col("value") != F.col("true_value"))
    return (rows.withColumn("reason", F.concat_ws("+", F.when(backwards, F.lit("went_backwards")),
                                                  F.when(differs, F.lit("differs_from_truth"))))
            .filter(F.col("reason") != "")
            .select("key", "id", "value", "previous", "true_value", "reason", "partition", "offset", "time"))


def _non_monotonic(read):
    """Within one app incarnation and partition, in the order the reads were logged."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("app", "incarnation", "topic", "partition").orderBy("ts", "line")
    return (read.withColumn("previous_offset", F.lag("offset").over(w))
            .filter(F.col("offset") <= F.col("previous_offset"))
            .select("app", "incarnation", "topic", "partition", "offset", "previous_offset", "id",
                    F.col("ts").alias("time")))
