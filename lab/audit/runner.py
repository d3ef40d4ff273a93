"""Running an audit: audit() checks a run's inputs, reads its history and topics once, runs every applicable
check (lab.audit.checks) on Spark and returns a Verdict, with only counts, per-second counts and the first rows
brought back to pandas; warm_up() starts Spark beforehand. Every failure notebook's audit step.
"""
from __future__ import annotations

import tempfile
import threading
import time

from ..errors import LabError
from ..record.history import History
from .checks import _aborted, _duplicates, _lost, _match, _non_monotonic, _reprocessed, _skipped, _stale
from .inputs import _is_empty, _load_history, _parse_output, _read_both, _topic_offsets
from .kinds import KINDS, NEEDS
from .verdict import Verdict, _with_times


def audit(history: History, *, bootstrap: str | None = None, output_topic: str | None = None,
          input_topic: str | None = None, expect: str = "anomalies", kinds=None, spark=None,
          examples: int = 5, output_df=None, output_uncommitted_df=None,
          allow_empty: bool = False, aborted_reader: str = "read_uncommitted") -> Verdict:
    """Run every applicable check (or just `kinds`) and return a Verdict.

    aborted_reader: "read_uncommitted" counts every aborted record a read_uncommitted reader
    would see (the issue's definition); "read_committed" counts only aborted records that reached
    committed data, which is what an exactly-once mitigation run must keep at 0 even though
    its producers legitimately abort transactions.

    output_df / output_uncommitted_df: DataFrames shaped like lab.audit.spark.read_topic's
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
        raise LabError(f"audit needs a lab.record.history.History, not {type(history).__name__}.")
    if (output_topic or input_topic) and not bootstrap:
        raise LabError("Reading topics needs bootstrap= (the cluster's .bootstrap).")

    # Topic facts first (cheap, no Spark): a missing or empty topic is a clear message.
    offsets = {}
    for topic in dict.fromkeys(t for t in (output_topic, input_topic) if t):
        offsets[topic] = _topic_offsets(bootstrap, topic)
    if output_topic and output_df is None and not allow_empty and _is_empty(offsets[output_topic]):
        raise LabError(f"The output topic {output_topic!r} is empty: the app wrote nothing there "
                       "(did it run, and does it write to this topic?). Pass allow_empty=True to audit it anyway.")
    if input_topic and not allow_empty and _is_empty(offsets[input_topic]):
        raise LabError(f"The input topic {input_topic!r} is empty: nothing was produced to it (did the "
                       "generator run, against this cluster?). Pass allow_empty=True to audit it anyway.")

    from .spark import connector_loaded_twice, sized_session, spark_session
    spark = spark or spark_session()
    if output_df is None and output_uncommitted_df is None:   # (given frames stay on their own session)
        spark = sized_session(spark, _rows(offsets, history))
    cached: list = []  # every frame this audit caches, released whatever happens
    try:
        verdict = _run(spark, history, cached, bootstrap=bootstrap, output_topic=output_topic,
                       input_topic=input_topic, expect=expect, wanted=wanted, examples=examples,
                       output_df=output_df, output_uncommitted_df=output_uncommitted_df, offsets=offsets,
                       aborted_reader=aborted_reader)
    except Exception as exc:
        raise connector_loaded_twice(spark, exc) or exc
    finally:
        for df in cached:
            df.unpersist()
    verdict.seconds = time.monotonic() - started
    return verdict


def _rows(offsets: dict, history: History) -> int:
    """About how many rows the audit reads: the topics' records, and the history's lines (about 200 bytes each)."""
    records = sum(high - earliest for topic in offsets.values() for earliest, _, high in topic.values())
    return records + sum(f.stat().st_size for f in history.folder.glob("*.jsonl")) // 200


_warmed = None   # the Spark session a warm-up has run an audit on: while it runs, no warm-up is needed


def warm_up() -> None:
    """Start Spark in a background thread and audit a tiny history there, so that a run's first audit finds
    the session up and Spark's classes loaded and its code generated: cold, the 11 audits of notebook 07's
    poll lesson took 12.5 s, and 5.3 s the next time. A failure here is dropped: the real audit meets it."""
    from .spark import current_session
    if _warmed is not None and _warmed is current_session():
        return
    __import__("pyspark.sql")  # here: two threads' first imports of pyspark trip on its circular imports

    def exercise():
        global _warmed
        try:
            with tempfile.TemporaryDirectory(prefix="audit-warm-up-") as folder:
                history = History(folder, "warm-up")
                history.log_many("read", [{"app": "a", "incarnation": 0, "topic": "t", "partition": 0,
                                           "offset": offset, "id": str(offset)} for offset in (0, 1, 1)])
                history.close()
                audit(history, kinds=["non_monotonic"])
            _warmed = current_session()
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
                           f"(first value: {first['raw']!r}). Apps must write JSON values with "
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

