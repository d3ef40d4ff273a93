"""Notebook 07, seed 002's liveness lessons: when streams stop moving. One run of the chosen lessons, each
its own module with the same small interface (PARAMS, RULES, needs, run_lesson -> an outcome with failed,
verdict, explain, table, figure, as_record):
    poll_loop    lab/scenarios/poll_loop.py: work between two polls beyond max.poll.interval.ms, a loop
    partitions   lab/scenarios/partition_parallelism.py: instances beyond the partition count sit idle
    lookups      lab/scenarios/slow_lookups.py: a remote call per record caps a thread at 1 / latency
The broker-bounce lesson of the issue (Streams 2.7 against 2.8+, KIP-671, LISTENER_NOT_FOUND) is not built yet.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..config import KAFKA_VERSION
from ..errors import LabError
from ..experiment import Param, Result, Run, Spec
from ..experiment.memory import child_pids, peak_rss
from . import partition_parallelism, poll_loop, slow_lookups

LESSONS = {"poll_loop": poll_loop, "partitions": partition_parallelism, "lookups": slow_lookups}
# The programs under test, by the argument that names them on their command line (memory.child_pids).
APPS = ("PollLoopConsumer", "SlowRecordApp", "ThroughputApp", "lab.apps.consumer_app")
TITLES = {"poll_loop": "1 · the poll-interval loop", "partitions": "2 · partitions bound parallelism",
          "lookups": "3 · slow lookups"}


def _something_to_run(p: dict) -> str | None:
    if not p["lessons"]:
        return f"LESSONS is empty: choose some of {list(LESSONS)}."
    if len(set(p["lessons"])) != len(p["lessons"]):
        return f"LESSONS={p['lessons']!r} names a lesson twice."
    return None


def _rules_of_chosen_lessons(p: dict) -> str | None:
    for name in p["lessons"]:
        for rule in LESSONS[name].RULES:
            if message := rule(p):
                return message
    return None


SPEC = Spec(
    Param("lessons", list(LESSONS), "which lessons to run, in this order", choices=tuple(LESSONS)),
    *poll_loop.PARAMS, *partition_parallelism.PARAMS, *slow_lookups.PARAMS,
    rules=(_something_to_run, _rules_of_chosen_lessons),
)


def needs(p: dict) -> dict:
    """One broker at the lab's version serves every lesson built so far."""
    wanted = [LESSONS[name].needs(p) for name in p["lessons"]]
    return dict(nodes=max(w["nodes"] for w in wanted), version=KAFKA_VERSION,
                broker_config={k: v for w in wanted for k, v in w["broker_config"].items()})


def run(cluster=None, progress: bool = True, **params) -> "StreamsStopResult":
    p = SPEC.validate(**params)
    with Run("streams-stop", cluster=cluster, progress=progress, **needs(p)) as lab:
        stop = threading.Event()
        rss = lab.background(peak_rss, stop, lambda: {"apps": [pid for a in APPS for pid in child_pids(a)],
                                                      "brokers": child_pids("kafka.Kafka")})
        try:
            outcomes = {name: LESSONS[name].run_lesson(lab, p) for name in p["lessons"]}
        finally:
            stop.set()
        peak = rss.result(10)
    return StreamsStopResult("streams_stop", p, lab.id, lab.timeline, outcomes=outcomes, peak_rss_mb=peak)


@dataclass
class StreamsStopResult(Result):
    outcomes: dict = field(default_factory=dict)   # lesson -> its outcome
    solved: dict = field(default_factory=dict)     # exercise number -> True once checked right
    peak_rss_mb: dict = field(default_factory=dict)   # {"apps": MB, "brokers": MB}: the largest at one instant
    title = "When streams stop moving"

    @property
    def failed(self) -> bool:
        return any(o.failed for o in self.outcomes.values())

    def verdict(self) -> str:
        return " · ".join(f"{TITLES[name].split(' · ')[1]}: {o.verdict()}" for name, o in self.outcomes.items())

    def explain(self) -> str:
        return "\n\n".join(f"**{TITLES[name]}**\n\n{o.explain()}" for name, o in self.outcomes.items())

    def lesson(self, name: str):
        """One lesson's outcome (its table(), figure(), explain()); a clear error if it did not run."""
        if name not in self.outcomes:
            raise LabError(f"The lesson {name!r} did not run (LESSONS={list(self.outcomes)}).")
        return self.outcomes[name]

    def table(self):
        import pandas as pd
        return pd.concat([o.table().assign(lesson=name) for name, o in self.outcomes.items()], ignore_index=True)

    def check(self, number: int, answer) -> bool:
        self.solved[number] = super().check(number, answer)
        return self.solved[number]

    def record_fields(self) -> dict:
        fields = {"lessons": list(self.outcomes), "exercises_ok": [self.solved.get(n, False) for n in (1, 2)],
                  "peak_rss_mb": self.peak_rss_mb}
        for o in self.outcomes.values():
            fields.update(o.as_record())
        return fields


def _exercise_1(result: StreamsStopResult, answer) -> None:
    """Which variants of the poll lesson looped?"""
    looped = sorted(k for k, r in result.lesson("poll_loop").by_variant().items() if r["looped"])
    assert sorted(answer) == looped, f"{sorted(answer)} is not what looped in this run (see the table)"


def _exercise_2(result: StreamsStopResult, answer) -> None:
    """How many records per second can one thread do against the lookup service?"""
    cap = 1000 / result.params["lookup_latency_ms"]
    assert abs(float(answer) - cap) <= 0.05 * cap, f"{answer} is not 1000 / LOOKUP_LATENCY_MS"


StreamsStopResult.exercises = {1: _exercise_1, 2: _exercise_2}
