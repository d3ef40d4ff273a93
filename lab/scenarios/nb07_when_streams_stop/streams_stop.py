"""Notebook 07, seed 002's liveness lessons: when streams stop moving. One run of the chosen lessons
(lab.experiment.lessons), each its own module:
    poll_loop    lab/scenarios/nb07_when_streams_stop/poll_loop.py: work between two polls beyond max.poll.interval.ms, a loop
    partitions   lab/scenarios/nb07_when_streams_stop/partition_parallelism.py: instances beyond the partition count sit idle
    lookups      lab/scenarios/nb07_when_streams_stop/slow_lookups.py: a remote call per record caps a thread at 1 / latency
    bounce       lab/scenarios/nb07_when_streams_stop/broker_bounce.py: a broker down for a while kills Streams 2.7; 2.8+ rides it out
The bounce lesson needs 3 brokers, so a run that chooses it puts every lesson on a 3-node cluster.
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
