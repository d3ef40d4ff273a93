"""How long the Spark audit takes on 1,000,000 input records plus their output (issue 3: target <= 60 s).

Builds a synthetic run once (history JSON-lines written with lab.record.history, output as parquet shaped
like lab.audit.spark.read_topic's frame, with a few anomalies of every kind injected), starts the Spark
session, then times audit() alone: median of --repeats runs. Prints one markdown row for
benchmarks/RESULTS.md.

    python benchmarks/audit_bench.py [--records 1000000] [--repeats 3] [--c1]
        [--master spark://host:7077 | --standalone CORES]   # on a cluster instead of local[2]

--standalone starts a master and one worker with CORES cores on 127.0.0.1 (lab.audit.spark_standalone).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.audit import audit  # noqa: E402
from lab.config import SPARK_FULL_JIT_ENV, SPARK_MASTER_ENV, WORK_DIR  # noqa: E402
from lab.record.history import History  # noqa: E402

KEYS, PARTITIONS, T0 = 1000, 4, 1_700_000_000.0
DUPLICATES, LOST, ABORTED, REREAD = 100, 100, 1000, 500


def write_history(folder: Path, n: int) -> History:
    """Record i: key k<i % KEYS>, partition i % PARTITIONS, offset i // PARTITIONS, true count i // KEYS + 1.
    One app reads everything in order and commits every 1000 records of a partition; then a second
    incarnation re-reads the last REREAD records of partition 0 (reprocessed) and the first one
    skipped 10 records of partition 1 (skipped)."""
    h = History(folder, "bench")
    h.clear()
    skipped = set(range(PARTITIONS * 200 + 1, PARTITIONS * 210 + 1, PARTITIONS))  # partition 1, offsets 200..209
    for lo in range(0, n, 100_000):
        rng = range(lo, min(n, lo + 100_000))
        h.log_many("produced", (dict(id=f"b-{i}", key=f"k{i % KEYS}", seq=i // KEYS + 1, topic="in",
                                     partition=i % PARTITIONS, offset=i // PARTITIONS,
                                     true_value=i // KEYS + 1, ts=T0 + i * 1e-4) for i in rng))
        h.log_many("read", (dict(app="bench", incarnation=0, group="g", topic="in", partition=i % PARTITIONS,
                                 offset=i // PARTITIONS, id=f"b-{i}", ts=T0 + 1 + i * 1e-4)
                            for i in rng if i not in skipped))
        h.log_many("committed", (dict(app="bench", incarnation=0, group="g", topic="in",
                                      partition=i % PARTITIONS, offset=i // PARTITIONS + 1, ts=T0 + 1.00005 + i * 1e-4)
                                 for i in rng if (i // PARTITIONS) % 1000 == 999))
    t = T0 + 2 + n * 1e-4
    h.log("restart", app="bench", incarnation=0, ts=T0)
    h.log("restart", app="bench", incarnation=1, ts=t)
    last = [i for i in range(n - PARTITIONS * REREAD, n) if i % PARTITIONS == 0]
    h.log_many("read", (dict(app="bench", incarnation=1, group="g", topic="in", partition=0,
                             offset=i // PARTITIONS, id=f"b-{i}", ts=t + k * 1e-3) for k, i in enumerate(last)))
    return h


def write_output(spark, folder: Path, n: int):
    """(committed, uncommitted) output frames as parquet: one record per input (minus LOST), DUPLICATES
    re-sent at the end of their partition, ABORTED records only the uncommitted view sees."""
    value = ("to_json(named_struct('id', concat('b-', i), 'key', concat('k', i % {k}), 'value', "
             "cast(i div {k} + 1 as double)))").format(k=KEYS)
    base = (spark.range(n).withColumnRenamed("id", "i")
            .where(f"i % 9973 != 5 or i div 9973 >= {LOST}")                 # LOST inputs never reflected
            .selectExpr(f"concat('k', i % {KEYS}) AS key", f"{value} AS value", f"CAST(i % {PARTITIONS} AS INT) AS partition",
                        f"i div {PARTITIONS} AS offset", f"timestamp_seconds({T0} + 2 + i * 1e-4) AS timestamp"))
    tail = n // PARTITIONS
    dups = (spark.range(DUPLICATES).withColumnRenamed("id", "j").selectExpr("j * 7919 % " + str(n) + " AS i", "j")
            .selectExpr(f"concat('k', i % {KEYS}) AS key", f"{value} AS value", f"CAST(i % {PARTITIONS} AS INT) AS partition",
                        f"{tail} + j AS offset", f"timestamp_seconds({T0} + 2 + {n} * 1e-4 + j) AS timestamp"))
    aborted = (spark.range(ABORTED).withColumnRenamed("id", "j")
               .selectExpr("concat('k', j % 10) AS key", "to_json(named_struct('id', concat('x-', j))) AS value",
                           "CAST(3 AS INT) AS partition", f"{tail} + {DUPLICATES} + j AS offset",
                           f"timestamp_seconds({T0} + 2 + j * 1e-2) AS timestamp"))
    committed = base.unionByName(dups)
    committed.write.mode("overwrite").parquet(str(folder / "committed.parquet"))
    committed.unionByName(aborted).write.mode("overwrite").parquet(str(folder / "uncommitted.parquet"))
    return (spark.read.parquet(str(folder / "committed.parquet")),
            spark.read.parquet(str(folder / "uncommitted.parquet")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", help="a Spark master URL to run on (sets KAFKA_LAB_SPARK_MASTER)")
    where.add_argument("--standalone", type=int, metavar="CORES",
                       help="start a standalone master + one worker with CORES cores on 127.0.0.1 and run there")
    parser.add_argument("--c1", action="store_true", help="the lab's default driver (C1 alone) instead of the "
                        "full JIT that an audit of millions of records wants (KAFKA_LAB_SPARK_FULL_JIT=1)")
    args = parser.parse_args()
    if not args.c1:
        os.environ[SPARK_FULL_JIT_ENV] = "1"

    folder = WORK_DIR / "bench-audit"
    t = time.monotonic()
    history = write_history(folder / "history", args.records)
    size = sum(f.stat().st_size for f in history.folder.glob("*.jsonl"))
    print(f"history written in {time.monotonic() - t:.1f} s ({size / 1e6:.0f} MB)", flush=True)

    from lab.audit.spark import spark_session, stop_spark
    from lab.audit.spark_standalone import StandaloneSpark
    cluster = None
    if args.standalone:
        cluster = StandaloneSpark(folder / "spark", cores=args.standalone, memory="2g").start()
        os.environ[SPARK_MASTER_ENV] = cluster.master_url
    elif args.master:
        os.environ[SPARK_MASTER_ENV] = args.master
    t = time.monotonic()
    try:
        spark = spark_session()
        where = spark.sparkContext.master
        print(f"spark session on {where} started in {time.monotonic() - t:.1f} s", flush=True)
        committed, uncommitted = write_output(spark, folder, args.records)
        # The driver JVM, plus the executors when the cluster is ours (an external one's CPU is not visible).
        pids = [spark.sparkContext._gateway.proc.pid] + (cluster.pids() if cluster else [])
        jvms = [psutil.Process(pid) for pid in pids]
        times, cpus, verdict = [], [], None
        for run in range(args.repeats):
            cpu, t = sum(sum(j.cpu_times()[:2]) for j in jvms), time.monotonic()
            verdict = audit(history, output_df=committed, output_uncommitted_df=uncommitted, spark=spark)
            times.append(time.monotonic() - t)
            cpus.append(sum(sum(j.cpu_times()[:2]) for j in jvms) - cpu)
            print(f"run {run + 1}: {times[-1]:.1f} s wall, {cpus[-1]:.1f} s JVM CPU  {verdict.summary()}", flush=True)
    finally:
        stop_spark()
        if cluster:
            cluster.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    counts = ", ".join(f"{k}={v}" for k, v in verdict.counts.items())
    load = os.getloadavg()[0]
    # JVM CPU seconds are printed too: on a shared machine wall time mostly measures the neighbours.
    print(f"| audit: {args.records:,} inputs + output, all 7 checks, {where}"
          f"{f' (standalone, 1 worker x {args.standalone} cores)' if cluster else ''}, after session start "
          f"| {statistics.median(times):.1f} s (median of {len(times)}; {min(times):.1f}-{max(times):.1f}) "
          f"| {statistics.median(cpus):.1f} s JVM CPU | {counts} | load avg {load:.1f} on {os.cpu_count()} cores |")


if __name__ == "__main__":
    main()
