"""What bench_06 and bench_07 share: a lessons scenario (lab.experiment.lessons) run N times on one cluster with
its notebook test's parameters (or the defaults), each run timed, with its peak memory.

    results = repeat(streams_stop, nb07, "bench-07", __doc__)   # parses --runs, --default, --lessons
"""
from __future__ import annotations

import argparse
import os
import time


def repeat(scenario, expectations, name: str, doc: str) -> tuple[argparse.Namespace, list]:
    """Run `scenario` --runs times; print a line per run and then the runs' table; return (args, results)."""
    from lab.cluster import kafka_cluster
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--default", action="store_true", help="the notebook's default parameters, not the test's")
    ap.add_argument("--lessons", nargs="*", help="only these lessons")
    args = ap.parse_args()
    values = {} if args.default else {k.lower(): v for k, v in expectations.PARAMETERS.items()
                                      if k != "INTERACTIVE"}
    if args.lessons:
        values["lessons"] = args.lessons
    params = scenario.SPEC.validate(**values)
    results, seconds = [], []
    with kafka_cluster(**scenario.needs(params), name=name) as cluster:
        for n in range(args.runs):
            t = time.perf_counter()
            results.append(scenario.run(cluster=cluster, progress=False, **params))
            seconds.append(round(time.perf_counter() - t, 1))
            print(f"run {n + 1}: {seconds[-1]} s, peak RSS {results[-1].peak_rss_mb}", flush=True)
    print(f"\n{args.runs} run(s), {'default' if args.default else 'test'} parameters, load "
          f"{os.getloadavg()[0]:.1f} at the end\n")
    print("| run | seconds | peak RSS apps (MB) | peak RSS broker (MB) |\n|---|---|---|---|")
    for i, (s, r) in enumerate(zip(seconds, results), 1):
        print(f"| {i} | {s} | {r.peak_rss_mb.get('apps')} | {r.peak_rss_mb.get('brokers')} |")
    return args, results
