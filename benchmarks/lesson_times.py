"""How long each lesson takes at its notebook's default parameters, run as the notebook runs it: `lesson.run` on the
notebook's broker, then its Mitigate step with the fix its Mitigate cell writes. The broker's start is timed apart
(08's is the notebook's own, with JMX).

    python benchmarks/lesson_times.py 06a 07d      # default: every notebook

Prints a markdown table to paste into benchmarks/RESULTS.md, with the load average at the start and the end.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(fn):
    t = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - t, 1)


def lesson_times(number: str) -> list[tuple[str, float, str]]:
    """(step, seconds, verdict) for notebook `number` at its defaults: its broker's start, its run, its fix."""
    from lab.cluster import kafka_cluster
    from lab.scenarios import notebook
    entry = notebook(number)
    lesson = entry.lesson
    params = lesson.spec.validate()
    cluster, started = timed(lambda: kafka_cluster(**lesson.needs(params), name=f"times-{number}").start())
    rows = [("(broker start)", started, "")]
    try:
        result, seconds = timed(lambda: lesson.run(cluster=cluster, progress=False, **params))
        rows.append(("the run", seconds, result.verdict()))
        fix = entry.written_fix()
        if fix:
            fixed, seconds = timed(lambda: lesson.mitigate(result, cluster=cluster, progress=False, **fix))
            rows.append((f"Mitigate {fix}", seconds, fixed.verdict()))
    finally:
        cluster.stop()
    return rows


def main() -> None:
    from lab.scenarios import COURSE
    numbers = sys.argv[1:] or [e.number for e in COURSE]
    print(f"load {os.getloadavg()[0]:.1f} at the start\n")
    print("| notebook | lesson | seconds at defaults | verdict |\n|---|---|---|---|")
    for number in numbers:
        for lesson, seconds, verdict in lesson_times(number):
            print(f"| {number} | {lesson} | {seconds} | {verdict[:160]} |", flush=True)
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
