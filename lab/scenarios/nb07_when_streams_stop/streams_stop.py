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


SCENARIO = Lessons("streams-stop", {
    "poll_loop": ("1 · the poll-interval loop", poll_loop),
    "partitions": ("2 · partitions bound parallelism", partition_parallelism),
    "lookups": ("3 · slow lookups", slow_lookups),
    "bounce": ("4 · broker bounce", broker_bounce),
}, apps=("PollLoopConsumer", "SlowRecordApp", "ThroughputApp", "BounceApp", "lab.apps.consumer_app"),
    result=StreamsStopResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run


def _exercise_1(result: StreamsStopResult, answer) -> None:
    """Which variants of the poll lesson looped?"""
    looped = sorted(k for k, r in result.lesson("poll_loop").by_variant().items() if r["looped"])
    assert sorted(answer) == looped, f"{sorted(answer)} is not what looped in this run (see the table)"


def _exercise_2(result: StreamsStopResult, answer) -> None:
    """How many records per second can one thread do against the lookup service?"""
    cap = 1000 / result.params["lookup_latency_ms"]
    assert abs(float(answer) - cap) <= 0.05 * cap, f"{answer} is not 1000 / LOOKUP_LATENCY_MS"


StreamsStopResult.exercises = {1: _exercise_1, 2: _exercise_2}
