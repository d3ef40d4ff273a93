"""One lesson: the shape every lesson notebook, its panel, its tests and its benchmark call.

    from lab.notebook import *
    lesson = setup("07a")                                 # the versions in use, and the notebook's lesson
    PARAMS = lesson.spec.from_notebook(globals())         # this lesson's knobs only, checked before anything starts
    cluster = kafka_cluster(**lesson.needs(PARAMS)).start()
    guess = lesson.predict(PARAMS, PREDICTION)             # the question, answered before the run
    result = lesson.run(cluster=cluster, prediction=guess, **PARAMS)   # takes the answer; a LessonResult
    fixed = lesson.mitigate(result, poll_interval_ms=12000)            # the learner's fix, written in the cell
    lesson.check(1, MY_ANSWER)                             # a tick, or a cross and a hint; lesson.solution(1)
    record(**result.as_record(), **fixed.as_record(), **guess.as_record())
    lesson.end(cluster)                                    # the last cell: its broker and this kernel's Spark stop

A lesson module defines what is its own (its parameters, their rules, what it needs from the cluster, the body that
runs on a lab.toolbox.Run and returns an outcome, its question, its exercises) and ends with
`lesson = Lesson(...)`. An outcome has failed, verdict(), explain(), table(), figure(), as_record() and, when
audited, `audits`; its analysis is pure functions of the run's history. The exercises judge the run the learner
predicted (the notebook's Run cell), not a panel's, a fix's or an exercise's own run. In a workshop's room
(lab.toolbox.room), that run sends the learner's vote and what it measured, and each exercise check its verdict.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..config import KAFKA_VERSION
from .memory import APP_MB, child_pids, peak_rss, refuse_unless_it_fits
from .mitigate import Mitigate
from .params import Param, Spec
from .predict import Prediction, predict
from .result import Checked, Exercise, Result
from .room import current_room, headline_figures, on_change, sendable, tell_room
from .run import Run
from .timeline import Timeline


class Lesson:
    def __init__(self, key: str, title: str, *, params: list[Param], needs: Callable[[dict], dict],
                 body: Callable, question: Callable[[dict], tuple], measured_answer: Callable[[dict, dict], object],
                 rules=(), exercises: dict[int, Exercise] | None = None, apps: tuple[str, ...] = (),
                 spark_audit: bool = False, mitigate_base: dict | None = None,
                 apps_at_once: Callable[[dict], int] = lambda p: 1,
                 app_mb: float | Callable[[dict], float] = APP_MB):
        """`key` names its runs and its record ("poll_loop"); `needs(p)` -> {nodes, broker_config[, version,
        extra_listener, jmx]} (the lab's Kafka unless it names a version; jmx=True: a broker with JMX, which only the
        lab's own gives);
        `body(lab, p)` -> its outcome; `question(p)` -> (text, choices or None for a number[, tolerance of a
        number]); `measured_answer(record, p)`: this run's answer to it, from what the run recorded (the outcome's
        as_record()), None when it did not measure it; `apps`: a marker in the command line of each program it starts (their memory is sampled); `mitigate_base`: what its Mitigate step sets whatever the fix (for example only the variant
        without a fix); `apps_at_once(p)`: the most programs it runs side by side, each about `app_mb` MB (or
        app_mb(p)): a run that would not fit the free memory is refused before it starts."""
        self.key, self.title = key, title
        self.spec = Spec(*params, rules=tuple(rules))
        self._needs, self.body, self._question, self._measured = needs, body, question, measured_answer
        self.exercises = dict(exercises or {})
        self.apps, self.spark_audit, self.apps_at_once, self.app_mb = tuple(apps), spark_audit, apps_at_once, app_mb
        self.mitigate = Mitigate(self.run, self.spec, base=mitigate_base)
        self.last: LessonResult | None = None   # the run the learner predicted: its exercises judge it

    def __repr__(self) -> str:
        return f"Lesson({self.key!r}: {self.title})"

    def needs(self, p: dict) -> dict:
        """What its broker must have: kafka_cluster(**lesson.needs(PARAMS)) starts it."""
        wanted = self._needs(p)
        needs = dict(nodes=wanted.get("nodes", 1), version=wanted.get("version", KAFKA_VERSION),
                     broker_config=dict(wanted.get("broker_config", {})))
        return {**needs, **{k: wanted[k] for k in ("extra_listener", "jmx") if wanted.get(k)}}

    def question(self, p: dict) -> tuple:
        """Its Predict question: (text, choices[, tolerance]), choices None for a number."""
        return self._question(p)

    def predict(self, p: dict, given=None, show: bool = True) -> Prediction:
        """Its Predict step: a widget in Jupyter, or `given` (a notebook's PREDICTION) headless."""
        prediction = predict(*self.question(p), given=given, show=show)
        if prediction.widget is not None:   # in a room, the answer counts as it is chosen: the room votes, then runs
            on_change(prediction.widget, lambda: None if prediction.taken else self._vote(prediction))
        return prediction

    def _vote(self, prediction: Prediction) -> None:
        tell_room("vote", self.key, answer=sendable(prediction.answer),
                  choices=[str(c)[:200] for c in prediction.choices][:10] if prediction.choices else None)

    def run(self, cluster=None, progress: bool = True, prediction: Prediction | None = None,
            remember: bool | None = None, **params) -> "LessonResult":
        """The lesson once, on `cluster` when it fits (else a broker of its own, stopped at the end). `prediction`:
        the learner's, taken as the run starts and printed beside the measurement at its end; that run is the one
        lesson.check() judges (`remember`, default: when there is a prediction)."""
        p = self.spec.validate(**params)
        cluster, needs, options = self._where(p, cluster)
        self.refuse_unless_it_fits(p, cluster, needs)
        remember = remember or (remember is None and prediction is not None)
        if prediction is not None:
            prediction.take()
        if remember and prediction is not None:   # the learner's run: in a room, its prediction is the vote
            self._vote(prediction)
        started = time.monotonic()
        with Run(self.key.replace("_", "-"), cluster=cluster, progress=progress, spark_audit=self.spark_audit,
                 cluster_options=options, **needs) as lab:
            stop = threading.Event()
            rss = lab.background(peak_rss, stop, lambda: {
                "apps": [pid for marker in self.apps for pid in child_pids(marker)],
                "brokers": child_pids("kafka.Kafka")})
            try:
                lab.phase(self.title)
                outcome = self.body(lab, p)
            finally:
                stop.set()
            peak = rss.result(10)
        result = LessonResult(self.key, p, lab.id, lab.timeline, cluster=cluster, outcome=outcome, lesson=self,
                              peak_rss_mb=peak, answer=self._answer(outcome, p))
        if prediction is not None:
            prediction.against(result.measured_answer())
        if remember:
            self.last = result
        if remember and current_room() is not None:
            tell_room("run", self.key, reproduced=bool(result.failed), measured=sendable(result.measured_answer()),
                      right=prediction.right() if prediction is not None else None,
                      seconds=round(time.monotonic() - started, 1), figures=headline_figures(result.as_record()))
        return result

    def _where(self, p: dict, cluster) -> tuple:
        """(the cluster to offer the run, what its broker must have, options for a broker the run starts)."""
        needs = self.needs(p)
        options = {"jmx": needs.pop("jmx")} if needs.get("jmx") else {}   # for a broker the run starts
        if options and getattr(cluster, "jmx", None) is None:
            cluster = None   # it lacks the JMX this lesson reads: a broker of its own, with JMX (never an external one)
        if getattr(cluster, "owns_broker", False) and cluster.running and cluster.nodes > needs["nodes"]:
            needs = {**needs, "nodes": cluster.nodes}   # a bigger lab cluster fits: run there, as the lesson did
        return cluster, needs, options

    def refuse_unless_it_fits(self, p: dict, cluster=None, needs: dict | None = None) -> None:
        """One line (a LabError) before anything starts when the run's brokers, programs and Spark would not fit
        the memory that is free now; a cluster it borrows and a Spark already up cost nothing new."""
        if needs is None:
            cluster, needs, _ = self._where(p, cluster)
        fits = getattr(cluster, "fits", None)
        borrowed = cluster is not None and (not getattr(cluster, "owns_broker", True)
                                            or (getattr(cluster, "running", False) and fits and fits(**needs)))
        spark = False
        if self.spark_audit:
            from ..audit.spark import current_session
            spark = current_session() is None
        app_mb = self.app_mb(p) if callable(self.app_mb) else self.app_mb
        refuse_unless_it_fits(0 if borrowed else needs["nodes"], self.apps_at_once(p), spark, app_mb=app_mb)

    def end(self, cluster=None) -> None:
        """The notebook's last cell: what the lesson took goes back. Its cluster stops (an outside one is left as
        it is) and so does this kernel's Spark session, whose driver JVM would hold its memory for as long as the
        kernel stays open; the panel, or an audit asked for later, starts what it needs again."""
        from ..audit.spark import current_session, stop_spark
        stopped = [what for what, up in (("its broker", getattr(cluster, "owns_broker", False)
                                          and getattr(cluster, "running", False)),
                                         ("Spark", current_session() is not None)) if up]
        if cluster is not None:
            cluster.stop()
        stop_spark()
        print(f"Lesson over: {' and '.join(stopped) or 'nothing'} stopped, memory given back. The panel above "
              "still runs the lesson, on a broker of its own." if stopped else
              "Lesson over: nothing of it is running. The panel above still runs the lesson, on a broker of its own.")

    def check(self, number: int, answer):
        """Exercise `number` judged on the run the learner predicted; before it ran, a line saying so."""
        if self.last is None:
            return Checked.say(False, f"Exercise {number}: run the lesson first (its Run cell): the exercise is "
                                      "judged on what the run measured.", "not run yet")
        return self.last.check(number, answer)

    def solution(self, number: int, display=None) -> None:
        """The solution of exercise `number` for the run the learner predicted, and why."""
        if self.last is None:
            print(f"Exercise {number}: run the lesson first (its Run cell): the solution is this run's.")
            return
        self.last.solution(number, display)

    def _answer(self, outcome, p: dict):
        return self._measured(outcome.as_record(), p)

    def measured_answer(self, record: dict, p: dict):
        """A run's answer to its question, from what it recorded (an executed notebook's results: the answer key)."""
        return self._measured(record, p)

    def result(self, outcome, run_id: str = "run-1", cluster=None, **params) -> "LessonResult":
        """A result of this lesson around an outcome made elsewhere (a unit test's rows), at these parameters."""
        return LessonResult(self.key, self.spec.validate(**params), run_id, Timeline(0.0), cluster=cluster,
                            outcome=outcome, lesson=self)


@dataclass
class LessonResult(Result):
    """A lesson's run: what its outcome measured, with the exercises of its lesson."""
    outcome: object = None
    lesson: Lesson | None = field(default=None, repr=False, compare=False)
    peak_rss_mb: dict = field(default_factory=dict)   # {"apps": MB, "brokers": MB}: the largest at one instant
    answer: object = None                             # this run's answer to the lesson's Predict question

    @property
    def exercises(self) -> dict:
        return self.lesson.exercises if self.lesson else {}

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def audits(self) -> dict:
        """The Spark audit's verdicts of this run, by name ({} when the lesson audits nothing)."""
        return getattr(self.outcome, "audits", {})

    def verdict(self) -> str:
        return self.outcome.verdict()

    def explain(self) -> str:
        return self.outcome.explain()

    def table(self, *args, **kwargs):
        return self.outcome.table(*args, **kwargs)

    def figure(self, *args, **kwargs):
        return self.outcome.figure(*args, **kwargs)

    def measured_answer(self):
        return self.answer

    def record_fields(self) -> dict:
        # an outcome that is a Result of its own (chapter 05's) gives its fields, not a second run id and verdict
        fields = self.outcome.record_fields() if isinstance(self.outcome, Result) else self.outcome.as_record()
        return {**fields, "peak_rss_mb": self.peak_rss_mb}

    def __getattr__(self, name):
        """Anything else is the outcome's: a lesson's own tables and evidence (`result.handler_table()`)."""
        if name.startswith("_") or name in ("outcome", "lesson"):
            raise AttributeError(name)
        return getattr(self.outcome, name)
