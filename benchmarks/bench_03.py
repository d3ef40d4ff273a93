"""Notebook 03 (quota-driven fencing): time to the first crash, reproduction rate, peak RSS.

    python benchmarks/bench_03.py [--runs 5] [--seconds 90] [--notebook]

Each run puts the seed's load (33 records/s x 1 KB against a 35000 B/s quota) on Kafka Streams at
the affected and the fixed version side by side (lesson 03a, lab.scenarios.nb03_quota_driven_fencing.fencing, with its Spark audit),
on one embedded broker shared by all runs (every run has its own topics, client ids and quotas). A run
reproduces the failure when the affected app has at least one fencing/corruption incident; the fixed app
should have none; the table names the mechanism of each app's incidents. RSS is the sum
over this process and all its descendants (broker, Streams JVMs), sampled every 0.25 s.
--notebook also times the whole notebook under papermill with its default parameters.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from run import PeakRSS, notebook  # noqa: E402  (the shared benchmark helpers)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=90, help="seconds of load per run")
    parser.add_argument("--affected", default="3.8.1")
    parser.add_argument("--fixed", default="4.3.1")
    parser.add_argument("--notebook", action="store_true", help="also time the notebook (default parameters)")
    args = parser.parse_args()

    from lab.cluster import kafka_cluster
    from lab.scenarios.nb03_quota_driven_fencing.fencing import lesson

    params = lesson.spec.validate(streams_version=args.affected, other_version=args.fixed, duration_s=args.seconds,
                                  compare=["other_version"], variants=[])
    rows = []
    with PeakRSS() as rss, kafka_cluster(**lesson.needs(params), name="bench03") as cluster:
        for i in range(args.runs):
            t = time.perf_counter()
            result = lesson.run(cluster=cluster, progress=False, **params)
            a, f = result.row("app"), result.row("other_version")
            rows.append({"run": i + 1, "wall_s": time.perf_counter() - t, "affected_crashes": a["crashes"],
                         "affected_first_crash_s": a["first_crash_s"], "affected_longest_wait_s": a["longest_txn_wait_s"],
                         "affected_mechanism": a["mechanism"], "fixed_crashes": f["crashes"],
                         "fixed_longest_wait_s": f["longest_txn_wait_s"], "fixed_mechanism": f["mechanism"]})
            print(rows[-1], flush=True)
    firsts = [r["affected_first_crash_s"] for r in rows if r["affected_first_crash_s"] is not None]
    reproduced = sum(1 for r in rows if r["affected_crashes"] > 0)
    fixed_clean = sum(1 for r in rows if r["fixed_crashes"] == 0)

    print(f"\n### 03 quota-driven fencing ({args.runs} runs x {args.seconds:.0f} s of load, "
          f"{args.affected} vs {args.fixed}, 35000 B/s quota, 33 rec/s x 1 KB)\n")
    print("| run | affected incidents | first crash (s after load start) | longest txn wait (s) | mechanism "
          "| fixed incidents | fixed longest wait (s) | fixed mechanism | wall (s) |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['affected_crashes']} | {r['affected_first_crash_s']} | {r['affected_longest_wait_s']} "
              f"| {r['affected_mechanism']} | {r['fixed_crashes']} | {r['fixed_longest_wait_s']} "
              f"| {r['fixed_mechanism']} | {r['wall_s']:.0f} |")
    print(f"\n- reproduction rate ({args.affected} fenced at least once): {reproduced}/{args.runs}")
    print(f"- {args.fixed} never fenced: {fixed_clean}/{args.runs}")
    if firsts:
        print(f"- first crash after load start: median {statistics.median(firsts):.1f} s, "
              f"max {max(firsts):.1f} s (target <= 90 s)")
    print(f"- peak RSS (this process + broker + both Streams JVMs): {rss.peak / 2**30:.2f} GiB")

    if args.notebook:
        path = ROOT / "notebooks" / "03a_over_quota.ipynb"
        took, peak = notebook(path)
        print(f"- notebook under papermill (default parameters): {took:.0f} s (target <= 300 s), "
              f"peak RSS {peak / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
