"""How long each lesson takes at its notebook's default parameters, run as the notebook runs it: a lesson notebook's
`lesson.run` (05a to 07d), one cell per lesson on the notebook's broker (02, 03: `run_lesson`), or the notebook's one
run (the others), then its Mitigate steps with the notebook's default fixes: `mitigate` with FIX on the run's result
(01, 04, 05a to 07d, 08), `mitigate_<lesson>` with FIX_<LESSON> on that lesson's (02, 03). The broker's start is
timed apart (08's is the notebook's own, with JMX).

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


def default_fix(number: str, name: str = "FIX") -> dict:
    """FIX (or another fix) as the notebook's parameters cell sets it."""
    import ast

    import papermill
    from lab.scenarios import notebook
    path = ROOT / "notebooks" / f"{notebook(number).name}.ipynb"
    return ast.literal_eval(papermill.inspect_notebook(str(path))[name]["default"])


def lesson_times(number: str) -> list[tuple[str, float, str]]:
    """(lesson, seconds, verdict) for each lesson of notebook `number` at its defaults, and its broker's start."""
    from lab.cluster import kafka_cluster
    from lab.scenarios import notebook
    scenario = notebook(number).lesson or notebook(number).module()   # a Lesson has the same run, needs, mitigate
    params = (scenario.spec if hasattr(scenario, "spec") else scenario.SPEC).validate()
    lessons = getattr(scenario, "LESSONS", None)   # 02, 03: lab.experiment.parts
    cluster, started = timed(lambda: kafka_cluster(**scenario.needs(params), name=f"times-{number}").start())
    rows = [("(broker start)", started, "")]
    try:
        results = {}
        if lessons:
            for lesson in lessons:
                result, seconds = timed(lambda: scenario.run_lesson(lesson, cluster=cluster, progress=False, **params))
                rows.append((lesson, seconds, result.verdict()))
                results[lesson] = result
        else:
            result, seconds = timed(lambda: scenario.run(cluster=cluster, progress=False, **params))
            rows.append(("the run", seconds, result.verdict()))
            results["the run"] = result
        steps = [("mitigate", next(iter(results)))] if hasattr(scenario, "mitigate") else []
        steps += [(name, name.removeprefix("mitigate_")) for name in dir(scenario) if name.startswith("mitigate_")]
        for name, lesson in steps:
            fix = default_fix(number, "FIX" if name == "mitigate" else f"FIX_{lesson.upper()}")
            fixed, seconds = timed(lambda: getattr(scenario, name)(results[lesson], cluster=cluster, progress=False,
                                                                   **fix))
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
