"""Benchmark for notebook 01: time to first reprocessing and reproduction rate over N runs.

    python benchmarks/bench_01.py [N]        (default N=5)

One broker with offsets.retention.minutes=1 serves every run (each run has its own topic and groups).
Each run: the earliest, latest and early variants (no Spark queries, so a run is one window).
A run reproduces when earliest re-read what it had committed, latest skipped what arrived while it was
down, and the early group saw neither. Prints a Markdown table for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.cluster import kafka_cluster  # noqa: E402
from lab.scenarios.nb01_offset_expiry_reprocessing.offset_expiry import lesson  # noqa: E402

PARAMS = lesson.spec.validate(retention_minutes=1, check_interval_ms=2000, downtime_s=None, messages_before=200,
                            messages_while_down=100, variants=["earliest", "latest", "early"], spark=False)


def one_run(cluster) -> dict:
    started = time.monotonic()
    r = lesson.run(cluster=cluster, progress=False, **PARAMS).as_record()
    return {
        "reproduced": bool(r["earliest_reprocessed"] > 0 and r["latest_skipped"] > 0
                           and r["early_reprocessed"] == 0 and r["early_skipped"] == 0),
        "reprocessed": r["earliest_reprocessed"], "skipped": r["latest_skipped"],
        "first_reprocessing_after_stop_s": r.get("first_reprocessing_after_stop_s"),
        "expired_after_stop_s": r["earliest_expired_after_stop_s"],
        "run_s": time.monotonic() - started,
    }


def main(n: int = 5) -> list[dict]:
    runs = []
    with kafka_cluster(**lesson.needs(PARAMS), name="bench01") as cluster:
        for i in range(n):
            runs.append(one_run(cluster))
            print(f"run {i + 1}/{n}: {runs[-1]}", flush=True)
    firsts = [r["first_reprocessing_after_stop_s"] for r in runs if r["first_reprocessing_after_stop_s"] is not None]
    print("\n## 01 offset expiry (offsets.retention.minutes=1, check interval 2 s)\n")
    print("| runs | reproduced | first reprocessing after stop (s) median [min-max] | offsets gone after stop (s) median | run (s) median |")
    print("|---|---|---|---|---|")
    print(f"| {n} | {sum(r['reproduced'] for r in runs)}/{n} | "
          + (f"{statistics.median(firsts):.1f} [{min(firsts):.1f}-{max(firsts):.1f}]" if firsts else "n/a")
          + f" | {statistics.median(r['expired_after_stop_s'] for r in runs):.1f}"
          f" | {statistics.median(r['run_s'] for r in runs):.0f} |")
    return runs


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
