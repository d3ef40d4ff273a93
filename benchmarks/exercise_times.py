"""How long an experiment exercise takes at its notebook's defaults: the lesson alone on the notebook's broker, as
the notebook runs it (`run_lesson`), then the exercise's check with its solution, which runs the lesson again with
that setting. Each argument is NOTEBOOK:LESSON:EXERCISE, or NOTEBOOK:EXERCISE for a lesson notebook.

    python benchmarks/exercise_times.py 06:disk:5 07b:1

Prints a markdown table to paste into benchmarks/RESULTS.md, with the load average at the start and the end.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.lesson_times import timed  # noqa: E402


def exercise_time(number: str, lesson: str, exercise: int) -> tuple:
    """(lesson seconds, its verdict, the solution, exercise seconds, what the check said)."""
    from lab.cluster import kafka_cluster
    from lab.scenarios import notebook
    own = notebook(number).lesson
    scenario = own or notebook(number).module()
    params = own.spec.validate() if own else scenario.SPEC.validate(lessons=[lesson])
    cluster = kafka_cluster(**scenario.needs(params), name=f"exercise-{number}").start()
    try:
        result, lesson_s = timed(lambda: own.run(cluster=cluster, progress=False, **params) if own else
                                 scenario.run_lesson(lesson, cluster=cluster, progress=False, **params))
        answer = result.exercises[exercise].solution(result)
        checked, exercise_s = timed(lambda: result.check(exercise, answer))
        return lesson_s, result.verdict(), answer, exercise_s, "correct" if checked else "not answered"
    finally:
        cluster.stop()


def main() -> None:
    print(f"load {os.getloadavg()[0]:.1f} at the start\n")
    print("| notebook | lesson | seconds | exercise, with the solution | seconds | check |\n|---|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        number, *lesson, exercise = arg.split(":")
        lesson = lesson[0] if lesson else number
        lesson_s, verdict, answer, exercise_s, said = exercise_time(number, lesson, int(exercise))
        print(f"| {number} | {lesson}: {verdict[:80]} | {lesson_s} | {exercise}: {answer!r} | {exercise_s} | {said} |",
              flush=True)
    print(f"\nload {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
