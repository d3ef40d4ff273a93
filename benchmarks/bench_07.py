"""Chapter 07 (when streams stop moving): how often each lesson's failure reproduces, what a run costs, and its
peak memory, lesson by lesson (07a to 07d).

    python benchmarks/bench_07.py [--runs 5] [--default] [--lessons 07a 07d]

N runs of each lesson at its notebook test's parameters (tests/expectations/nb07a.py ... PARAMETERS; --default: the
notebook's defaults) on one cluster per lesson: per run its duration and peak RSS (apps, brokers); per variant in
how many runs it looped / kept up / died, with the measured figures. Prints markdown to paste into
benchmarks/RESULTS.md.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LESSONS = ("07a", "07b", "07c", "07d")


def main() -> None:
    from benchmarks.lessons_bench import each_lesson, lesson_args
    args = lesson_args(__doc__, LESSONS)
    counts = collections.defaultdict(collections.Counter)
    lost = collections.defaultdict(list)
    for number, lesson, runs in each_lesson(args):
        for r in runs:
            for row in r.outcome.rows:
                if number == "07a":
                    counts["poll variant|looped in"][f"{row['client']}/{row['variant']}"] += row["looped"]
                elif number == "07b":
                    counts["parallelism|an idle instance in"][f"P={row['partitions']} N={row['instances']}"] += \
                        row["idle_instances"] > 0
                elif number == "07c":
                    counts["lookup mode|kept up in"][row["mode"]] += row["keeps_up"]
                else:
                    counts["bounce app|died in"][row["app"]] += row["died"]
                    counts["bounce app|logged LISTENER_NOT_FOUND in"][row["app"]] += row["listener_not_found_lines"] > 0
                    lost[row["app"]].append(row["audit_lost"])
    for key, by in counts.items():
        what, how = key.split("|")
        print(f"\n| {what} | {how} |\n|---|---|")
        for name, k in by.items():
            print(f"| {name} | {k}/{args.runs} |")
    if lost:
        print("\n| bounce app | records lost (audit), per run |\n|---|---|")
        for name, per_run in lost.items():
            print(f"| {name} | {', '.join(map(str, per_run))} |")


if __name__ == "__main__":
    main()
