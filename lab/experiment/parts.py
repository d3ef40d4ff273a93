"""A notebook of lessons on one scenario function (notebooks 02 and 03): each lesson is a group of the scenario's
parameters (the runs it makes), and runs alone by leaving the other lessons' groups empty.

    LESSONS = Parts(SPEC, run, {"clients": (("python_modes", "java_clients"), question), ...}, merge=_merge)
    guess = LESSONS.predict("clients", PARAMS, PREDICTIONS)
    clients = LESSONS.run_lesson("clients", cluster=cluster, **PARAMS)
    guess.against(clients.measured_answer())
    result = LESSONS.together(clients, ...)       # every section's result as one: exercises, record()

A chapter of lesson notebooks (06, 07) has a lab.experiment.lesson.Lesson per lesson instead.
"""
from __future__ import annotations

from ..errors import LabError
from .mitigate import Mitigate
from .params import Spec
from .predict import Prediction, predict_lesson


def _empty(value):
    return type(value)()   # [] for a list of runs, False for a switch


class Parts:
    def __init__(self, spec: Spec, run, lessons: dict, *, merge, runs=None):
        """`lessons`: name -> (its parameter names, its question(p) -> (text, choices)), in the course's order;
        `merge(results, params)`: the scenario's result made of the results that ran (none: a lesson that did not
        run, with `params`); `runs(lesson, p)`: whether the lesson has something to run (default: any of its
        parameters set)."""
        self.spec, self.run, self.lessons, self.merge = spec, run, dict(lessons), merge
        self.runs = runs or (lambda lesson, p: any(p[k] for k in self.lessons[lesson][0]))

    def __iter__(self):
        return iter(self.lessons)

    def __contains__(self, lesson) -> bool:
        return lesson in self.lessons

    def keys(self):
        return self.lessons.keys()

    def _lesson(self, lesson: str) -> tuple:
        if lesson not in self.lessons:
            raise LabError(f"There is no lesson {lesson!r} (lessons: {list(self.lessons)}).")
        return self.lessons[lesson]

    def question(self, lesson: str, p: dict) -> tuple:
        return self._lesson(lesson)[1](p)

    def predict(self, lesson: str, p: dict, given: dict | None = None, show: bool = True) -> Prediction:
        """The lesson's Predict step; `given` maps lessons to predictions (the notebook's PREDICTIONS)."""
        return predict_lesson(lesson, self.question(lesson, p), given, list(self.lessons), show)

    def run_lesson(self, lesson: str, cluster=None, progress: bool = True, **params):
        """One lesson alone, as its notebook section runs it: only its runs, on the notebook's broker. A lesson
        whose parameters were left empty does not run, and its result says so."""
        p = self.spec.validate(**params)
        keys = self._lesson(lesson)[0]
        others = {k: _empty(p[k]) for name, (ks, _) in self.lessons.items() if name != lesson for k in ks}
        if not self.runs(lesson, p):
            return self.merge([], {**p, **others, **{k: _empty(p[k]) for k in keys}})
        return self.run(cluster=cluster, progress=progress, **{**p, **others})

    def mitigate(self, lesson: str, **base) -> Mitigate:
        """The lesson's Mitigate step: its runs alone again (the other lessons' parameters empty), with `base` and
        then the learner's fix (FIX_<LESSON>) over the notebook's parameters; recorded as mitigation_<lesson>."""
        self._lesson(lesson)
        defaults = self.spec.defaults
        others = {k: _empty(defaults[k]) for name, (ks, _) in self.lessons.items() if name != lesson for k in ks}
        return Mitigate(self.run, self.spec, base={**others, **base}, record_as=f"mitigation_{lesson}")

    def together(self, *results):
        """The sections' results as one, as if one run had run them all: the exercises and record() read it."""
        ran = [r for r in results if r.run_id]
        params = dict((ran or results)[0].params)
        for r in ran:
            params.update({k: r.params[k] for ks, _ in self.lessons.values() for k in ks if r.params[k]})
        return self.merge(ran, params)
