"""Notebook 07 (when streams stop moving): how often each lesson's failure and each fix's clean verdict
reproduce, what a run costs, and its peak memory.

    python benchmarks/bench_07.py [--runs 5] [--default] [--lessons bounce]

N runs of the test's parameters (tests/expectations/nb07.py PARAMETERS; --default: the notebook's defaults) on one
broker: per run its duration and peak RSS (apps, brokers); per variant in how many runs it looped / kept up, with
the measured figures. Prints markdown to paste into benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--default", action="store_true", help="the notebook's default parameters, not the test's")
    ap.add_argument("--lessons", nargs="*", help="only these lessons")
    args = ap.parse_args()
    from lab.cluster import kafka_cluster
    from lab.scenarios import streams_stop as scenario
    from tests.expectations import nb07

    values = {} if args.default else {k.lower(): v for k, v in nb07.PARAMETERS.items() if k != "INTERACTIVE"}
    if args.lessons:
        values["lessons"] = args.lessons
    params = scenario.SPEC.validate(**values)
    loops, keeps, idle, runs = collections.Counter(), collections.Counter(), collections.Counter(), []
    died, lost = collections.Counter(), collections.defaultdict(list)
    with kafka_cluster(**scenario.needs(params), name="bench-07") as cluster:
        for n in range(args.runs):
            t = time.perf_counter()
            r = scenario.run(cluster=cluster, progress=False, **params)
            runs.append((round(time.perf_counter() - t, 1), r.peak_rss_mb))
            print(f"run {n + 1}: {runs[-1][0]} s, peak RSS {r.peak_rss_mb}", flush=True)
            for name, row in (r.lesson("poll_loop").by_variant() if "poll_loop" in r.outcomes else {}).items():
                loops[name] += row["looped"]
            for row in r.lesson("partitions").rows if "partitions" in r.outcomes else []:
                idle[f"P={row['partitions']} N={row['instances']}"] += row["idle_instances"] > 0
            for row in r.lesson("lookups").rows if "lookups" in r.outcomes else []:
                keeps[row["mode"]] += row["keeps_up"]
            for row in r.lesson("bounce").rows if "bounce" in r.outcomes else []:
                died[row["app"]] += row["died"]
                lost[row["app"]].append(row["audit_lost"])
    load = os.getloadavg()[0]
    print(f"\n{args.runs} run(s), {'default' if args.default else 'test'} parameters, load {load:.1f} at the end\n")
    print("| run | seconds | peak RSS apps (MB) | peak RSS broker (MB) |\n|---|---|---|---|")
    for i, (s, rss) in enumerate(runs, 1):
        print(f"| {i} | {s} | {rss.get('apps')} | {rss.get('brokers')} |")
    tables = [("poll variant", "looped in", loops), ("parallelism", "an idle instance in", idle),
              ("lookup mode", "kept up in", keeps)]
    for what, how, counts in tables:
        if counts:   # a lesson left out of --lessons has no table
            print(f"\n| {what} | {how} |\n|---|---|")
            for name, k in counts.items():
                print(f"| {name} | {k}/{args.runs} |")
    if died:
        print("\n| bounce app | died in | records lost (audit), per run |\n|---|---|---|")
        for name, k in died.items():
            print(f"| {name} | {k}/{args.runs} | {', '.join(map(str, lost[name]))} |")


if __name__ == "__main__":
    main()
