"""Notebook 02's numbers: time to INVALID_PRODUCER_ID_MAPPING and how reliably it reproduces.

    python benchmarks/bench_02.py [--runs 5] [--expiration-ms 10000] [--idle-s 12]
                                  [--clients python-crash java-4.3.1]

One modern broker (fast recipe) serves every run; its start time is reported. Each run is
txn_expiry.expiry_run: the clients commit, idle `--idle-s` seconds, then get input. Per run and
client: seconds from the run's start and from the start of the idle period to the first error,
and whether the error was INVALID_PRODUCER_ID_MAPPING (code 49). Prints markdown rows.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--expiration-ms", type=int, default=10000)
    p.add_argument("--cleanup-interval-ms", type=int, default=1000)
    p.add_argument("--idle-s", type=float, default=12)
    p.add_argument("--clients", nargs="+", default=["python-crash", "java-4.3.1"])
    args = p.parse_args(argv)

    from lab.config import KAFKA_VERSION
    from lab.scenarios import txn_expiry as tx

    # parameters are checked before the broker starts
    tx.validate_expiry(expiration_ms=args.expiration_ms, cleanup_interval_ms=args.cleanup_interval_ms,
                       idle_s=args.idle_s, observe_s=40, clients=args.clients)
    config = {**tx.broker_config(args.expiration_ms, args.cleanup_interval_ms), **tx.modern_extra_config(KAFKA_VERSION)}
    started = time.perf_counter()
    cluster = tx.open_cluster(KAFKA_VERSION, config, name="bench02").start()
    broker_s = time.perf_counter() - started
    rows = []
    try:
        for i in range(args.runs):
            t = time.perf_counter()
            run = tx.expiry_run(cluster, expiration_ms=args.expiration_ms, cleanup_interval_ms=args.cleanup_interval_ms,
                                idle_s=args.idle_s, observe_s=40, clients=args.clients, audit=False, progress=False)
            wall = time.perf_counter() - t
            for name, c in run.clients.items():
                error_at = None if c["error_after_idle_s"] is None else run.idle_start + c["error_after_idle_s"]
                rows.append({"run": i + 1, "client": name, "wall_s": wall,
                             "reproduced": c["code"] == tx.ERROR_CODE,
                             "from_start_s": None if error_at is None else error_at - run.t0,
                             "from_idle_s": c["error_after_idle_s"], "recovered": c["recovered"]})
                print(f"run {i + 1} {name}: {c['error']} ({c['code']}) after {rows[-1]['from_start_s'] or float('nan'):.1f} s "
                      f"from start, {c['error_after_idle_s']} s after the idle began; recovered={c['recovered']}",
                      flush=True)
    finally:
        cluster.stop()

    print(f"\n## Notebook 02 benchmark ({args.runs} runs, expiration {args.expiration_ms} ms, idle {args.idle_s} s)\n")
    print(f"Broker {KAFKA_VERSION} ready in {broker_s:.1f} s.\n")
    print("| client | reproduced | time to error from run start (median, max) | from idle start (median) | recovered |")
    print("|---|---|---|---|---|")
    for name in args.clients:
        mine = [r for r in rows if r["client"] == name]
        hits = [r for r in mine if r["reproduced"]]
        start = [r["from_start_s"] for r in hits]
        idle = [r["from_idle_s"] for r in hits]
        fmt = (lambda xs: f"{statistics.median(xs):.1f} s, {max(xs):.1f} s" if xs else "n/a")
        print(f"| {name} | {len(hits)}/{len(mine)} | {fmt(start)} | "
              f"{statistics.median(idle):.1f} s | {sum(r['recovered'] for r in mine)}/{len(mine)} |"
              if idle else f"| {name} | 0/{len(mine)} | n/a | n/a | {sum(r['recovered'] for r in mine)}/{len(mine)} |")
    walls = sorted({(r["run"], round(r["wall_s"], 1)) for r in rows})
    print(f"\nWall time per run: {', '.join(f'{w:.1f} s' for _, w in walls)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
