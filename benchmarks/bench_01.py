"""Benchmark for notebook 01: time to first reprocessing and reproduction rate over N runs.

    python benchmarks/bench_01.py [N]        (default N=5)

One broker with offsets.retention.minutes=1 serves every run (each run has its own topic and groups).
Each run: the earliest, latest and control variants (no Spark queries, so a run is one window).
A run reproduces when earliest re-read what it had committed, latest skipped what arrived while it was
down, and the control saw neither. Prints a Markdown table for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.cluster import kafka_cluster  # noqa: E402
from lab.scenarios import offset_expiry  # noqa: E402

PARAMS = dict(retention_minutes=1, check_interval_ms=2000, downtime_s=None, messages_before=200,
              messages_while_down=100, variants=["earliest", "latest", "control"], spark=False, progress=False)


def one_run(cluster) -> dict:
    started = time.monotonic()
    result = offset_expiry.run_offset_expiry(cluster=cluster, **PARAMS)
    earliest, latest, control = (result.row(v) for v in ("earliest", "latest", "control"))
    return {
        "reproduced": bool(earliest["reprocessed"] > 0 and latest["skipped"] > 0
                           and control["reprocessed"] == 0 and control["skipped"] == 0),
        "reprocessed": int(earliest["reprocessed"]), "skipped": int(latest["skipped"]),
        "first_reprocessing_after_stop_s": result.first_reprocessing(),
        "expired_after_stop_s": float(result.expiry.set_index("variant").loc["earliest", "expired_after_stop_s"]),
        "run_s": time.monotonic() - started,
    }


def main(n: int = 5) -> list[dict]:
    runs = []
    with kafka_cluster(broker_config=offset_expiry.broker_config(1, 2000), name="bench01") as cluster:
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
