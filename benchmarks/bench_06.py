"""Chapter 06 (what state costs in production): how often each lesson's failure reproduces, what a run costs, its
peak memory, and the restore-time and RocksDB memory tables, lesson by lesson (06a to 06e).

    python benchmarks/bench_06.py [--runs 5] [--default] [--lessons 06b 06c]

N runs of each lesson at its notebook test's parameters (tests/expectations/nb06a.py ... PARAMETERS; --default: the
notebook's defaults) on one broker per lesson: per run its duration and peak RSS (apps, broker); per variant in how
many runs it failed; then the last run's restore and memory rows. Prints markdown to paste into
benchmarks/RESULTS.md.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LESSONS = ("06a", "06b", "06c", "06d", "06e")


def main() -> None:
    from benchmarks.lessons_bench import each_lesson, lesson_args
    args = lesson_args(__doc__, LESSONS)
    failed, last = collections.Counter(), {}
    for number, lesson, runs in each_lesson(args):
        for r in runs:
            for variant, did in variants(lesson.key, r).items():
                failed[variant] += did
            last[lesson.key] = r
    print("\n| variant | failed in |\n|---|---|")
    for variant, k in failed.items():
        print(f"| {variant} | {k}/{args.runs} |")
    if "restore" in last:
        print("\n| mode | changelog MB | records restored | restore s | MB/s | back to processing s |\n|---|---|---|---|---|---|")
        for r in last["restore"].outcome.rows:
            print(f"| {r['mode']} | {r['changelog_mb']} | {r['restored_records']:,} from offset {r['restore_from']:,} | "
                  f"{r['restore_s']} | {r['restore_mb_s']} | {r['down_s']} |")
    if "memory" in last:
        print("\n| config | partitions x stores | RocksDB (metrics) MB | RSS MB | heap used MB | native growth MB |"
              "\n|---|---|---|---|---|---|")
        for r in last["memory"].outcome.rows:
            print(f"| {r['config']} | {r['partitions']} x {r['stores']} | {r['rocksdb_mb']} | {r['rss_mb']} | "
                  f"{r['heap_used_mb']} | {r['native_growth_mb']} |")


def variants(key: str, result) -> dict[str, bool]:
    """Per variant of a lesson's run: did it show its lesson's failure?"""
    rows = result.outcome.rows if hasattr(result.outcome, "rows") else []
    if key == "growth":
        return {f"growth/{r['kind']} grows": r["grows"] for r in rows}
    if key == "restore":
        return {f"restore/{r['mode']} {r['size_mb']} MB full restore": r["full_restore"] for r in rows}
    if key == "memory":
        cache = result.params["memory_budget_mb"]
        return {f"memory/{r['config']}-p{r['partitions']} over the shared cache's size":
                r["rocksdb_mb"] > cache if r["config"] == "default" else not r["within_cap"] for r in rows}
    if key == "changelog":
        return {f"changelog/{r['variant']} downstream missed updates": r["missed"] for r in rows}
    return {"disk/full": result.failed}


if __name__ == "__main__":
    main()
