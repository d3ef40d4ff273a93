"""A scenario made of lessons (notebooks 06 and 07): one run of the chosen lessons, one after the other, on one
cluster, each lesson its own module with the same small interface:

    PARAMS       its parameters (lab.experiment.Param), every name prefixed with the lesson's
    RULES        fn(p) -> a refusal or None: what Kafka or the machine cannot take
    needs(p)     dict(nodes=N, broker_config={...}[, extra_listener=NAME]): what its broker must have
    run_lesson(lab, p) -> an outcome with failed, verdict(), explain(), table(), figure(), as_record()
    question(p) -> (text, choices or None)      its Predict question
    measured_answer(record, p) -> the answer     this run's answer to it, from the outcome's as_record()

    SCENARIO = Lessons("streams-stop", {"poll_loop": ("1 · the poll-interval loop", poll_loop), ...},
                       apps=("PollLoopConsumer", ...), result=StreamsStopResult)
    SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run

A notebook gives each lesson its own section (predict, run that lesson alone, observe, try):

    guess = SCENARIO.predict("poll_loop", PARAMS, PREDICTIONS)
    poll = SCENARIO.run_lesson("poll_loop", cluster=cluster, **PARAMS)
    guess.against(poll.measured_answer())
    ...
    result = SCENARIO.together(poll, ...)      # every section's result, for the exercises and record()
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..config import KAFKA_VERSION
from ..errors import LabError
from .memory import child_pids, largest, peak_rss
from .mitigate import Mitigate
from .params import Param, Spec
from .predict import Prediction, predict_lesson
from .result import Result
from .run import Run
from .timeline import Timeline


class Lessons:
    def __init__(self, scenario: str, lessons: dict, *, apps: tuple[str, ...], result: type["LessonsResult"]):
        """`lessons`: name -> (title, module), in the course's order; `apps`: a marker in the command line of
        each program under test (their memory is sampled); `result`: the LessonsResult subclass returned."""
        self.scenario, self.apps, self.result = scenario, apps, result
        self.titles = {name: title for name, (title, _) in lessons.items()}
        self.modules = {name: module for name, (_, module) in lessons.items()}
        self.spec = Spec(
            Param("lessons", list(self.modules), "which lessons to run, in this order", choices=tuple(self.modules)),
            *(param for module in self.modules.values() for param in module.PARAMS),
            rules=(self._something_to_run, self._rules_of_chosen_lessons))

    def _something_to_run(self, p: dict) -> str | None:
        if not p["lessons"]:
            return f"LESSONS is empty: choose some of {list(self.modules)}."
        return None

    def _rules_of_chosen_lessons(self, p: dict) -> str | None:
        """Only the chosen lessons' rules: a lesson left out cannot refuse a run."""
        for name in p["lessons"]:
            for rule in self.modules[name].RULES:
                if message := rule(p):
                    return message
        return None

    def needs(self, p: dict) -> dict:
        """One broker at the lab's version for every chosen lesson: the most nodes any asks for, and the union of
        their broker configs (a lesson's config must not change another's outcome)."""
        wanted = [self.modules[name].needs(p) for name in p["lessons"]]
        needs = dict(nodes=max(w["nodes"] for w in wanted), version=KAFKA_VERSION,
                     broker_config={k: v for w in wanted for k, v in w["broker_config"].items()})
        listener = next((w["extra_listener"] for w in wanted if w.get("extra_listener")), None)
        return {**needs, "extra_listener": listener} if listener else needs

    def question(self, p: dict, lesson: str) -> tuple:
        """The lesson's Predict question: (text, choices), choices None for a number."""
        return self._module(lesson).question(p)

    def predict(self, lesson: str, p: dict, given: dict | None = None, show: bool = True) -> Prediction:
        """The lesson's Predict step; `given` maps lessons to predictions (a notebook's PREDICTIONS, headless)."""
        return predict_lesson(lesson, self.question(p, lesson), given, list(self.modules), show)

    def run_lesson(self, lesson: str, cluster=None, progress: bool = True, **params) -> "LessonsResult":
        """One lesson alone, as its notebook section runs it. A lesson left out of LESSONS does not run: its
        result says so (and the section's cells say it in one line each)."""
        p = self.spec.validate(**params)
        self._module(lesson)
        if lesson not in p["lessons"]:
            return self.result(self.scenario.replace("-", "_"), {**p, "lessons": []}, "", Timeline(0),
                               outcomes={}, titles=self.titles)
        # on the broker every chosen lesson needs: the one the notebook started, not one of its own
        return self._run({**p, "lessons": [lesson]}, self.needs(p), cluster, progress)

    def mitigate(self, lesson: str, **base) -> Mitigate:
        """The lesson's Mitigate step: the lesson alone again, with `base` and then the learner's fix (FIX_<LESSON>)
        over the notebook's parameters; recorded as mitigation_<lesson>."""
        self._module(lesson)
        return Mitigate(self.run, self.spec, base={"lessons": [lesson], **base}, record_as=f"mitigation_{lesson}")

    def together(self, *results: "LessonsResult") -> "LessonsResult":
        """The sections' results as one, as if one run had run their lessons: the exercises and record() read it.
        Its timeline puts every section's events on one clock."""
        ran = [r for r in results if r.outcomes]
        first = ran[0] if ran else results[0]
        timeline = Timeline.joined(*(r.timeline for r in ran))
        outcomes = {name: o for r in ran for name, o in r.outcomes.items()}
        peak = largest(*(r.peak_rss_mb for r in ran))
        return self.result(self.scenario.replace("-", "_"), {**first.params, "lessons": list(outcomes)},
                           first.run_id, timeline, notes=[n for r in ran for n in r.notes], outcomes=outcomes,
                           titles=self.titles, peak_rss_mb=peak,
                           answers={k: v for r in ran for k, v in r.answers.items()},
                           cluster=next((r.cluster for r in ran if r.cluster is not None), None))

    def _module(self, lesson: str):
        if lesson not in self.modules:
            raise LabError(f"There is no lesson {lesson!r} (lessons: {list(self.modules)}).")
        return self.modules[lesson]

    def run(self, cluster=None, progress: bool = True, **params) -> "LessonsResult":
        """The chosen lessons, one after the other, on one broker."""
        p = self.spec.validate(**params)
        return self._run(p, self.needs(p), cluster, progress)

    def _run(self, p: dict, needs: dict, cluster, progress: bool) -> "LessonsResult":
        if getattr(cluster, "owns_broker", False) and cluster.running and cluster.nodes > needs["nodes"]:
            # the notebook's cluster, made for all its lessons (run_lesson): a Mitigate step or a panel's run of a
            # lesson that needs fewer nodes runs on it too, as the lesson itself did, not on a broker of its own
            needs = {**needs, "nodes": cluster.nodes}
        spark_audit = any(getattr(self.modules[name], "SPARK_AUDIT", False) for name in p["lessons"])
        with Run(self.scenario, cluster=cluster, progress=progress, spark_audit=spark_audit, **needs) as lab:
            stop = threading.Event()
            rss = lab.background(peak_rss, stop, lambda: {
                "apps": [pid for marker in self.apps for pid in child_pids(marker)],
                "brokers": child_pids("kafka.Kafka")})
            try:
                outcomes = {}
                for name in p["lessons"]:
                    lab.phase(self.titles[name])   # the progress line names the lesson as the notebook does
                    outcomes[name] = self.modules[name].run_lesson(lab, p)
            finally:
                stop.set()
            peak = rss.result(10)
        answers = {name: self.modules[name].measured_answer(o.as_record(), p) for name, o in outcomes.items()
                   if hasattr(self.modules[name], "measured_answer")}
        return self.result(self.scenario.replace("-", "_"), p, lab.id, lab.timeline, outcomes=outcomes,
                           titles=self.titles, peak_rss_mb=peak, answers=answers, cluster=cluster)


class NotRun:
    """A lesson that did not run in this run: its figure, table and explanation are one line saying so, it has
    no audits, and anything else (an exercise's look at its rows) asks to run it first."""

    def __init__(self, title: str, ran: list):
        self.message = f"*{title}: not run in this run (LESSONS={ran}); add it to LESSONS and run again.*"
        self.audits = {}

    def figure(self):
        from IPython.display import Markdown
        return Markdown(self.message)

    table = figure

    def explain(self) -> str:
        return self.message

    def __getattr__(self, name):
        if name.startswith("_"):   # what display machinery probes for: not there
            raise AttributeError(name)
        raise LabError(self.message.strip("*"))


@dataclass
class LessonsResult(Result):
    outcomes: dict = field(default_factory=dict)      # lesson -> its outcome
    titles: dict = field(default_factory=dict)        # lesson -> "N · title"
    peak_rss_mb: dict = field(default_factory=dict)   # {"apps": MB, "brokers": MB}: the largest at one instant
    answers: dict = field(default_factory=dict)       # lesson -> this run's answer to its Predict question

    @property
    def failed(self) -> bool:
        return any(o.failed for o in self.outcomes.values())

    def verdict(self) -> str:
        return " · ".join(f"{self.titles[name].split(' · ')[-1]}: {o.verdict()}" for name, o in self.outcomes.items())

    def explain(self) -> str:
        return "\n\n".join(f"**{self.titles[name]}**\n\n{o.explain()}" for name, o in self.outcomes.items())

    def measured_answer(self, lesson: str | None = None):
        """This run's answer to a lesson's Predict question (default: the lesson that ran, when one did); None
        when that lesson did not run or did not measure it."""
        if lesson is None:
            if len(self.outcomes) != 1:
                return None
            lesson = next(iter(self.outcomes))
        return self.answers.get(lesson)

    def lesson(self, name: str):
        """One lesson's outcome (its table(), figure(), explain()); for a lesson that did not run, a stand-in
        whose figure, table and explanation say so, so that a notebook runs to its end whichever lessons ran."""
        if name not in self.outcomes:
            if name not in self.titles:
                raise LabError(f"There is no lesson {name!r} (lessons: {list(self.titles)}).")
            return NotRun(self.titles[name], list(self.outcomes))
        return self.outcomes[name]

    def show_lesson(self, name: str, display=None) -> None:
        """A notebook section in one call: the lesson's figure, table and explanation, or one line saying
        that it did not run in this run."""
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        outcome = self.lesson(name)
        if isinstance(outcome, NotRun):
            display(outcome.figure())   # one line: not run
            return
        display(outcome.figure())
        display(outcome.table())
        display(Markdown(outcome.explain()))

    def show_audits(self, display=None) -> None:
        """Every Spark audit verdict the lessons of this run computed (an outcome's `audits`), each under its name."""
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        shown = 0
        for name, outcome in self.outcomes.items():
            for key, verdict in getattr(outcome, "audits", {}).items():
                display(Markdown(f"**{self.titles[name]}: `{key}`**"))
                display(verdict)
                shown += 1
        if not shown:
            display(Markdown(f"*No lesson of this run audits records (LESSONS={list(self.outcomes)}).*"))

    def table(self):
        import pandas as pd
        return pd.concat([o.table().assign(lesson=name) for name, o in self.outcomes.items()], ignore_index=True)

    def record_fields(self) -> dict:
        fields = {"lessons": list(self.outcomes), "peak_rss_mb": self.peak_rss_mb}
        for o in self.outcomes.values():
            fields.update(o.as_record())
        return fields
