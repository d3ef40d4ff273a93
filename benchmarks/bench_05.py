"""Chapter 05 (exactly-once under crashes, lessons 05a to 05c): how often each claimed anomaly reproduces, and what it
costs.

    python benchmarks/bench_05.py [--runs 5] [--points during_processing,after_send_before_commit,...]
                                  [--handlers replace_thread,continue] [--schema-modes replace_thread,continue]
                                  [--records 200] [--crash-at 80]

N runs of lesson 05a's crash points under both guarantees (then 05b's handler and 05c's schema-change runs, if any) on
one broker: for each
crash point x guarantee, in how many runs the app crashed, had duplicates, lost records, wrong counts, and
aborted records a read_uncommitted reader sees; the run's duration, the restart's downtime and restore, and
the peak RSS of the Kafka Streams JVMs. Prints markdown to paste into benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--points", default="before_read,during_processing,after_send_before_commit,after_commit")
    ap.add_argument("--handlers", default="replace_thread,continue")
    ap.add_argument("--schema-modes", default="replace_thread,continue")
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--crash-at", type=int, default=80)
    ap.add_argument("--rows", type=Path, help="append each run's rows to this JSON-lines file and report every row in "
                    "it: the runs can then be split over several invocations (each holds the machine for less time)")
    args = ap.parse_args()
    from lab.cluster import kafka_cluster
    from lab.toolbox.memory import largest
    from lab.scenarios.nb05_exactly_once_under_crashes import crash_points, exception_handlers, schema_change

    # each lesson's spec checks every value, and the versions, before anything starts
    params = crash_points.lesson.spec.validate(crash_points=args.points.split(","), records=args.records,
                                               crash_at=args.crash_at)
    handlers = [h for h in args.handlers.split(",") if h]
    modes = [m for m in args.schema_modes.split(",") if m]
    others = [(lesson, lesson.spec.validate(records=args.records, **{key: chosen}))
              for lesson, key, chosen in ((exception_handlers.lesson, "handlers", handlers),
                                          (schema_change.lesson, "schema_modes", modes)) if chosen]
    rows, handler_rows = [], []

    def keep(row: dict, into: list) -> None:
        into.append(row)
        print(row, flush=True)
        if args.rows:
            with args.rows.open("a") as f:
                f.write(json.dumps(row) + "\n")

    with kafka_cluster(**crash_points.lesson.needs(params), name="bench-05") as cluster:
        for n in range(args.runs):
            t = time.perf_counter()
            r = crash_points.lesson.run(cluster=cluster, progress=False, **params)
            more = [lesson.run(cluster=cluster, progress=False, **p) for lesson, p in others]
            seconds, rss = round(time.perf_counter() - t, 1), largest(r.peak_rss_mb, *(m.peak_rss_mb for m in more))
            failing = {k: f for m in more for k, f in (*m.handlers.items(),
                                                     *((f"schema {x}", f) for x, f in m.schema.items()))}
            per_run = seconds / max(len(r.crashes) + len(failing), 1)
            for c in r.crashes.values():
                m = c.m
                keep({"point": c.point, "guarantee": c.guarantee, "run": n + 1, "crashed": m["crashed"],
                      "duplicates": m["duplicates"], "lost": m["lost"],
                      "count_errors": m["overcount"] + m["undercount"], "aborted": m["aborted_visible"],
                      "downtime_s": m["downtime_s"], "restore_s": m["restore_s"], "run_s": per_run,
                      "rss_apps_mb": rss.get("apps"), "rss_broker_mb": rss.get("brokers")}, rows)
            for h, f in failing.items():
                keep({"handler": h, "run": n + 1, "outcome": f.outcome, "lost": f.m["lost"],
                      "uncaught": f.m["uncaught"], "failures_per_min": f.m["failures_per_min"]}, handler_rows)

    if args.rows:   # every run on record, this invocation's and earlier ones
        kept = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
        rows = [r for r in kept if "point" in r]
        handler_rows = [r for r in kept if "handler" in r]
    med = lambda xs: round(statistics.median(xs), 1) if xs else "-"  # noqa: E731
    print(f"\n### Chapter 05 benchmark ({args.records} records, crash at {args.crash_at}, "
          f"{time.strftime('%Y-%m-%d')})\n")
    print("| crash point | guarantee | runs | crashed | duplicates in | lost in | counts wrong in | aborted seen in "
          "| down (median s) | restore (median s) | run (median s) | RSS apps (median MB) | broker (MB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for point in params["crash_points"]:
        for g in params["guarantees"]:
            mine = [r for r in rows if r["point"] == point and r["guarantee"] == g]
            k = len(mine)
            print(f"| {point} | {g} | {k} | {sum(r['crashed'] for r in mine)}/{k} "
                  f"| {sum(r['duplicates'] > 0 for r in mine)}/{k} | {sum(r['lost'] > 0 for r in mine)}/{k} "
                  f"| {sum(r['count_errors'] > 0 for r in mine)}/{k} | {sum(r['aborted'] > 0 for r in mine)}/{k} "
                  f"| {med([r['downtime_s'] for r in mine if r['downtime_s'] is not None])} "
                  f"| {med([r['restore_s'] for r in mine if r['restore_s'] is not None])} "
                  f"| {med([r['run_s'] for r in mine])} | {med([r['rss_apps_mb'] for r in mine if r['rss_apps_mb']])} "
                  f"| {med([r['rss_broker_mb'] for r in mine if r['rss_broker_mb']])} |")
    if handler_rows:
        print("\n| handler | runs | outcomes | lost (median) | uncaught (median) | failures / min (median) |")
        print("|---|---|---|---|---|---|")
        for h in [*handlers, *(f"schema {m}" for m in modes)]:
            mine = [r for r in handler_rows if r["handler"] == h]
            outcomes = ", ".join(sorted({r["outcome"] for r in mine}))
            print(f"| {h} | {len(mine)} | {outcomes} | {med([r['lost'] for r in mine])} "
                  f"| {med([r['uncaught'] for r in mine])} "
                  f"| {med([r['failures_per_min'] for r in mine if r['failures_per_min']])} |")


if __name__ == "__main__":
    main()
