"""Notebook 04 (stale standby cache): how often and how fast it reproduces, and what it costs.

    python benchmarks/bench_04.py [--runs 5] [--config 3.3.1:cache --config 4.3.1:cache ...]
                                  [--program "1 2 3"] [--step 15]

For each config, N runs of the scenario on one broker: whether a stale value appeared, how long
after the program started the first one came, the task round trips, and the peak RSS of the
Kafka Streams JVMs with all instances up (plus the broker's). Prints markdown to paste into
benchmarks/RESULTS.md. The defaults are the seed's: program "1 2 3", 15 s steps, Kafka Streams 3.3.1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--config", action="append", help="VERSION:cache or VERSION:nocache (repeatable)")
    ap.add_argument("--program", default="1 2 3")
    ap.add_argument("--step", type=float, default=15)
    args = ap.parse_args()
    from lab.cluster import kafka_cluster
    from lab.scenarios.nb04_stale_standby_cache.stale_standby import lesson

    configs = []
    for c in args.config or ["3.3.1:cache"]:
        version, _, mode = c.partition(":")
        # one variant per run (no mitigations); the spec checks every value, and the version, before anything starts
        configs.append(lesson.spec.validate(streams_version=version, caching=mode != "nocache", compare=False,
                                              compare_versions=[], program=args.program, step_seconds=args.step,
                                              settle_seconds=args.step))

    rows = []
    with kafka_cluster(**lesson.needs(configs[0]), name="bench-04") as cluster:
        for params in configs:
            for n in range(args.runs):
                t = time.perf_counter()
                r = lesson.run(cluster=cluster, progress=False, **params).main
                rows.append({"version": r.version, "caching": r.caching, "run": n + 1,
                             "stale": r.counts["stale_reads"] > 0, "stale_reads": r.counts["stale_reads"],
                             "wrong_values": r.counts["wrong_values"], "round_trips": r.counts["round_trips"],
                             "first_stale_s": (r.first_stale or {}).get("t_s"),
                             "rss_all_up_mb": r.peak_rss_mb.get("all_up"), "broker_mb": r.peak_rss_mb.get("brokers"),
                             "seconds": round(time.perf_counter() - t, 1)})
                print(rows[-1], flush=True)

    print(f"\n### Notebook 04 benchmark (program '{args.program}', {args.step:g} s steps, "
          f"{time.strftime('%Y-%m-%d')})\n")
    print("| Kafka Streams | caching | runs | stale in | first stale (median / max s) | round trips (median) "
          "| RSS 3 instances all up (median MB) | broker (MB) | run (median s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for params in configs:
        version, caching = params["streams_version"], params["caching"]
        mine = [r for r in rows if r["version"] == version and r["caching"] == caching]
        firsts = [r["first_stale_s"] for r in mine if r["first_stale_s"] is not None]
        med = lambda xs: round(statistics.median(xs), 1) if xs else "-"  # noqa: E731
        print(f"| {version} | {'on' if caching else 'off'} | {len(mine)} | {sum(r['stale'] for r in mine)}/{len(mine)} "
              f"| {med(firsts)} / {max(firsts) if firsts else '-'} | {med([r['round_trips'] for r in mine])} "
              f"| {med([r['rss_all_up_mb'] for r in mine if r['rss_all_up_mb']])} "
              f"| {med([r['broker_mb'] for r in mine if r['broker_mb']])} | {med([r['seconds'] for r in mine])} |")


if __name__ == "__main__":
    main()
