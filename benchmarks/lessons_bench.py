"""What bench_06 and bench_07 share: a lesson (lab.toolbox.lesson) run N times on one cluster with its
notebook test's parameters (or the defaults), each run timed, with its peak memory.

    results = run_times(poll_loop.lesson, lesson_values(nb07a), "bench-07a", runs=5, which="test")
"""
from __future__ import annotations

import argparse
import importlib
import os
import time

# A notebook's parameters that are not the lesson's own: its fix, its prediction, its panel's switch.
NOT_THE_LESSONS = ("interactive", "fix", "prediction", "predictions")


def lesson_values(expectations) -> dict:
    """The lesson's own parameters of a notebook's test (tests/expectations/nbNN.py PARAMETERS)."""
    return {k.lower(): v for k, v in expectations.PARAMETERS.items() if k.lower() not in NOT_THE_LESSONS
            and not k.startswith("FIX_")}


def run_times(lesson, values: dict, name: str, runs: int, which: str) -> list:
    """`lesson` (lab.toolbox.lesson.Lesson) run `runs` times at `values` on one cluster; prints a line per run,
    then the runs' table."""
    from lab.cluster import kafka_cluster
    params = lesson.spec.validate(**values)
    results, seconds = [], []
    with kafka_cluster(**lesson.needs(params), name=name) as cluster:
        for n in range(runs):
            t = time.perf_counter()
            results.append(lesson.run(cluster=cluster, progress=False, **params))
            seconds.append(round(time.perf_counter() - t, 1))
            print(f"run {n + 1}: {seconds[-1]} s, peak RSS {results[-1].peak_rss_mb}", flush=True)
    print(f"\n{runs} run(s), {which} parameters, load {os.getloadavg()[0]:.1f} at the end\n")
    print("| run | seconds | peak RSS apps (MB) | peak RSS broker (MB) |\n|---|---|---|---|")
    for i, (s, r) in enumerate(zip(seconds, results), 1):
        print(f"| {i} | {s} | {r.peak_rss_mb.get('apps')} | {r.peak_rss_mb.get('brokers')} |")
    return results


def lesson_args(doc: str, lessons: tuple) -> argparse.Namespace:
    """A chapter benchmark's command line: --runs, --default, --lessons (of `lessons`)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--default", action="store_true", help="the notebooks' default parameters, not the tests'")
    ap.add_argument("--lessons", nargs="*", default=list(lessons), choices=lessons)
    return ap.parse_args()


def each_lesson(args):
    """(number, lesson, its runs) for each lesson of --lessons: --runs runs at its test's parameters (or defaults)."""
    from lab.scenarios import notebook
    for number in args.lessons:
        lesson = notebook(number).lesson
        values = {} if args.default else lesson_values(importlib.import_module(f"tests.expectations.nb{number}"))
        print(f"\n### {number} · {lesson.title}\n")
        yield number, lesson, run_times(lesson, values, f"bench-{number}", args.runs,
                                        "default" if args.default else "test")
