"""Notebook 06 (what state costs in production): how often each lesson's failure and each mitigation's clean
verdict reproduce, what a run costs, its peak memory, and the restore-time and RocksDB memory tables.

    python benchmarks/bench_06.py [--runs 5] [--default] [--lessons growth restore]

N runs of the test's parameters (tests/expectations/nb06.py PARAMETERS; --default: the notebook's defaults) on one
broker: per run its duration and peak RSS (apps, broker); per variant in how many runs it failed; then the last
run's restore and memory rows. Prints markdown to paste into benchmarks/RESULTS.md.
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from benchmarks.lessons_bench import repeat
    from lab.scenarios.nb06_state_in_production import state_in_production
    from tests.expectations import nb06

    args, results = repeat(state_in_production, nb06, "bench-06", __doc__)
    failed = collections.Counter()
    for r in results:
        for variant, did in variants(r).items():
            failed[variant] += did
    print("\n| variant | failed in |\n|---|---|")
    for variant, k in failed.items():
        print(f"| {variant} | {k}/{args.runs} |")
    last = results[-1]
    if "restore" in last.outcomes:
        print("\n| mode | changelog MB | records restored | restore s | MB/s | back to processing s |\n|---|---|---|---|---|---|")
        for r in last.lesson("restore").rows:
            print(f"| {r['mode']} | {r['changelog_mb']} | {r['restored_records']:,} from offset {r['restore_from']:,} | "
                  f"{r['restore_s']} | {r['restore_mb_s']} | {r['down_s']} |")
    if "memory" in last.outcomes:
        print("\n| config | partitions x stores | RocksDB (metrics) MB | RSS MB | heap used MB | native growth MB |"
              "\n|---|---|---|---|---|---|")
        for r in last.lesson("memory").rows:
            print(f"| {r['config']} | {r['partitions']} x {r['stores']} | {r['rocksdb_mb']} | {r['rss_mb']} | "
                  f"{r['heap_used_mb']} | {r['native_growth_mb']} |")

def variants(result) -> dict[str, bool]:
    """Per lesson variant: did it show its lesson's failure in this run?"""
    out = {}
    if "growth" in result.outcomes:
        out.update({f"growth/{r['kind']} grows": r["grows"] for r in result.lesson("growth").rows})
    if "restore" in result.outcomes:
        for r in result.lesson("restore").rows:
            out[f"restore/{r['mode']} {r['size_mb']} MB full restore"] = r["full_restore"]
    if "memory" in result.outcomes:
        bound = result.params["memory_bound_mb"]
        for r in result.lesson("memory").rows:
            over = r["rocksdb_mb"] > bound if r["config"] == "default" else not r["within_cap"]
            out[f"memory/{r['config']}-p{r['partitions']} over the bound"] = over
    if "changelog" in result.outcomes:
        for r in result.lesson("changelog").rows:
            out[f"changelog/{r['variant']} downstream missed updates"] = r["missed"]
    return out


if __name__ == "__main__":
    main()
