"""Lesson 03b, load against quota, client by client: one app per (client version, load / quota ratio), in waves of
SWEEP_PARALLEL, and each client version's bytecode read for the KAFKA-17455 fix."""
from __future__ import annotations

from ...toolbox import Run
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from . import quota_fencing as chapter
from .exercises import EXERCISES
from .quota_fencing_report import QuotaResult, sweep_answer


def run_lesson(lab: Run, p: dict) -> QuotaResult:
    chapter.own_broker(lab)
    points, n = chapter.sweep_points(p), p["sweep_parallel"]
    sweep = [chapter.measure(lab, points[i:i + n], p["sweep_seconds"], audit=False) for i in range(0, len(points), n)]
    return QuotaResult("sweep", p, lab.id, lab.timeline, sweep=sweep, fix_in_bytecode=chapter.fixes(points),
                       cluster=lab.cluster)


def apps_per_wave(p: dict) -> int:
    # one app per (client, ratio), in waves of SWEEP_PARALLEL: a wave's apps run together
    return min(p["sweep_parallel"], len(p["sweep_versions"]) * len(p["sweep_ratios"]))


lesson = Lesson("sweep", "Load against quota, client by client", needs=chapter.needs, body=run_lesson,
                params=chapter.params(*chapter.LOAD, "sweep_ratios", "sweep_versions", "sweep_seconds",
                                      "sweep_parallel"),
                rules=[something_to_run("sweep_ratios")], question=chapter.sweep_question, measured_answer=sweep_answer,
                exercises=EXERCISES["sweep"],
                apps=("QuotaStateApp", "lab.apps.quota_eos_loop"), apps_at_once=apps_per_wave)
