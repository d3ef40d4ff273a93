"""Lesson 02a's numbers: time to INVALID_PRODUCER_ID_MAPPING and how reliably it reproduces.

    python benchmarks/bench_02.py [--runs 5] [--expiration-ms 10000] [--idle-s 12]
                                  [--python-modes crash] [--java-clients 4.3.1]

One modern broker (the fast recipe, txn_expiry.needs) serves every run; its start time is reported.
Each run is lesson 02a's run, one round of its clients (no mitigation):
the clients commit, idle `--idle-s` seconds, then get input. Per run and client: seconds from the
run's start and from the start of the idle period to the first error, and whether it was
INVALID_PRODUCER_ID_MAPPING (code 49). Prints markdown rows.
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
    p.add_argument("--python-modes", nargs="*", default=["crash"])
    p.add_argument("--java-clients", nargs="*", default=["4.3.1"])
    args = p.parse_args(argv)

    from lab.cluster import kafka_cluster
    from lab.scenarios.nb02_transactional_id_expiry import txn_expiry as tx
    from lab.scenarios.nb02_transactional_id_expiry.idle_clients import lesson

    # parameters are checked before the broker starts
    params = lesson.spec.validate(expiration_ms=args.expiration_ms, cleanup_interval_ms=args.cleanup_interval_ms,
                                  idle_s=args.idle_s, observe_s=40, python_modes=args.python_modes,
                                  java_clients=args.java_clients)
    started = time.perf_counter()
    cluster = kafka_cluster(name="bench02", **lesson.needs(params)).start()
    broker_s = time.perf_counter() - started
    rows = []
    try:
        for i in range(args.runs):
            t = time.perf_counter()
            result = lesson.run(cluster=cluster, progress=False, **params)
            wall = time.perf_counter() - t
            for name, c in result.clients.items():
                rows.append({"run": i + 1, "client": name, "wall_s": wall, "reproduced": c["code"] == tx.ERROR_CODE,
                             "from_start_s": None if c["first_error"] is None else c["first_error"] - result.timeline.t0,
                             "from_idle_s": c["error_after_idle_s"], "recovered": c["recovered"]})
                print(f"run {i + 1} {name}: {c['error']} ({c['code']}) {c['error_after_idle_s']} s after the idle "
                      f"began; recovered={c['recovered']} ({result.verdict()})", flush=True)
    finally:
        cluster.stop()

    print(f"\n## Lesson 02a benchmark ({args.runs} runs, expiration {args.expiration_ms} ms, idle {args.idle_s} s)\n")
    print(f"Broker {params['broker_version']} ready in {broker_s:.1f} s.\n")
    print("| client | reproduced | time to error from run start (median, max) | from idle start (median) | recovered |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(r["client"] for r in rows):
        mine = [r for r in rows if r["client"] == name]
        hits = [r for r in mine if r["reproduced"]]
        start, idle = [r["from_start_s"] for r in hits], [r["from_idle_s"] for r in hits]
        fmt = (lambda xs: f"{statistics.median(xs):.1f} s, {max(xs):.1f} s" if xs else "n/a")
        print(f"| {name} | {len(hits)}/{len(mine)} | {fmt(start)} | "
              f"{f'{statistics.median(idle):.1f} s' if idle else 'n/a'} | {sum(r['recovered'] for r in mine)}/{len(mine)} |")
    walls = sorted({(r["run"], round(r["wall_s"], 1)) for r in rows})
    print(f"\nWall time per run: {', '.join(f'{w:.1f} s' for _, w in walls)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
