"""Notebook 07's scenario ("07 · When streams stop moving"): SPEC, needs() and run() from lab.experiment.lessons, one
run of the chosen LESSONS, each its own module: poll_loop (sections 2-4), partitions (partition_parallelism, section
5), lookups (slow_lookups, section 6) and bounce (broker_bounce, section 7). StreamsStopResult shows section 1 ("The
runs") and checks the exercises. The bounce lesson needs 3 brokers, so a run that chooses it puts every lesson on a
3-node cluster.
"""
from __future__ import annotations

from ...experiment.lessons import Lessons, LessonsResult
from . import broker_bounce, partition_parallelism, poll_loop, slow_lookups


class StreamsStopResult(LessonsResult):
    title = "When streams stop moving"

    def measured_answer(self):
        """This run's answer to the Predict question (None: the lesson or the asked variant did not run)."""
        if "poll_loop" not in self.outcomes:
            return None
        row = self.lesson("poll_loop").by_variant().get(asked_variant(self.params))
        return None if row is None else LOOP_ANSWERS[0] if row["looped"] else LOOP_ANSWERS[1]


SCENARIO = Lessons("streams-stop", {
    "poll_loop": ("1 · the poll-interval loop", poll_loop),
    "partitions": ("2 · partitions bound parallelism", partition_parallelism),
    "lookups": ("3 · slow lookups", slow_lookups),
    "bounce": ("4 · broker bounce", broker_bounce),
}, apps=("PollLoopConsumer", "SlowRecordApp", "ThroughputApp", "BounceApp", "lab.apps.consumer_app"),
    result=StreamsStopResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run
LOOP_ANSWERS = ("yes, it keeps reading the same batch", "no, it moves on")


def asked_variant(p: dict) -> str:
    """The poll lesson's variant the Predict question is about: the Java consumer, without a fix if it runs."""
    return "java/" + ("none" if "none" in p["poll_fixes"] else p["poll_fixes"][0])


def question(p: dict) -> tuple:
    """The Predict step (the first lesson's)."""
    fix = asked_variant(p).split("/")[1]
    interval = p["poll_longer_interval_ms"] if fix == "longer_interval" else p["poll_interval_ms"]
    return (f"The Java consumer (fix: {fix}) gets up to {p['poll_batch']} records per poll, {p['poll_work_ms']} ms of "
            f"work each, with max.poll.interval.ms = {interval:,}. Does it keep reading the same batch again?",
            LOOP_ANSWERS)


def _exercise_1(result: StreamsStopResult, answer) -> None:
    """Which variants of the poll lesson looped?"""
    looped = sorted(k for k, r in result.lesson("poll_loop").by_variant().items() if r["looped"])
    assert sorted(answer) == looped, f"{sorted(answer)} is not what looped in this run (see the table)"


def _exercise_2(result: StreamsStopResult, answer) -> None:
    """How many records per second can one thread do against the lookup service?"""
    cap = 1000 / result.params["lookup_latency_ms"]
    assert abs(float(answer) - cap) <= 0.05 * cap, f"{answer} is not 1000 / LOOKUP_LATENCY_MS"


StreamsStopResult.exercises = {1: _exercise_1, 2: _exercise_2}
