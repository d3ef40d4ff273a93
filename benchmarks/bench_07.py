"""Notebook 07 (when streams stop moving): how often each lesson's failure and each fix's clean verdict
reproduce, what a run costs, and its peak memory.

    python benchmarks/bench_07.py [--runs 5] [--default] [--lessons bounce]

N runs of the test's parameters (tests/expectations/nb07.py PARAMETERS; --default: the notebook's defaults) on one
broker: per run its duration and peak RSS (apps, brokers); per variant in how many runs it looped / kept up, with
the measured figures. Prints markdown to paste into benchmarks/RESULTS.md.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from benchmarks.lessons_bench import repeat
    from lab.scenarios.nb07_when_streams_stop import streams_stop
    from tests.expectations import nb07

    args, results = repeat(streams_stop, nb07, "bench-07", __doc__)
    loops, keeps, idle = collections.Counter(), collections.Counter(), collections.Counter()
    died, listener, lost = collections.Counter(), collections.Counter(), collections.defaultdict(list)
    for r in results:
        for name, row in (r.lesson("poll_loop").by_variant() if "poll_loop" in r.outcomes else {}).items():
            loops[name] += row["looped"]
        for row in r.lesson("partitions").rows if "partitions" in r.outcomes else []:
            idle[f"P={row['partitions']} N={row['instances']}"] += row["idle_instances"] > 0
        for row in r.lesson("lookups").rows if "lookups" in r.outcomes else []:
            keeps[row["mode"]] += row["keeps_up"]
        for row in r.lesson("bounce").rows if "bounce" in r.outcomes else []:
            died[row["app"]] += row["died"]
            listener[row["app"]] += row["listener_not_found_lines"] > 0
            lost[row["app"]].append(row["audit_lost"])
    tables = [("poll variant", "looped in", loops), ("parallelism", "an idle instance in", idle),
              ("lookup mode", "kept up in", keeps)]
    for what, how, counts in tables:
        if counts:   # a lesson left out of --lessons has no table
            print(f"\n| {what} | {how} |\n|---|---|")
            for name, k in counts.items():
                print(f"| {name} | {k}/{args.runs} |")
    if died:
        print("\n| bounce app | died in | logged LISTENER_NOT_FOUND in | records lost (audit), per run |\n"
              "|---|---|---|---|")
        for name, k in died.items():
            print(f"| {name} | {k}/{args.runs} | {listener[name]}/{args.runs} | {', '.join(map(str, lost[name]))} |")

if __name__ == "__main__":
    main()
