"""Notebook 07's poll-interval lesson (lab/scenarios/nb07_when_streams_stop/poll_loop.py): its arithmetic and its refusals."""
import pytest

from lab.errors import LabError
from lab.experiment import Spec
from lab.scenarios.nb07_when_streams_stop import poll_loop

SPEC = Spec(*poll_loop.PARAMS, rules=poll_loop.RULES)
# 400 records x 20 ms = 8 s of work per poll against a 6 s interval: dropped at 6 s, the commit fails at 8 s.
# Streams: one record of 9 s against the same 6 s interval.
SMALL = dict(poll_batch=400, poll_work_ms=20, poll_records=450, poll_interval_ms=6000,
             poll_longer_interval_ms=20_000, poll_slow_record_ms=9000, poll_slow_offset=100, poll_watch_s=60)


def test_the_arithmetic_decides_what_loops():
    p = SPEC.validate(**SMALL)
    assert poll_loop.expected_to_loop(p, "none")
    assert not any(poll_loop.expected_to_loop(p, f) for f in ("max_poll_records_1", "longer_interval",
                                                              "pause_resume"))
    fast = SPEC.validate(**{**SMALL, "poll_work_ms": 5})   # 2 s per poll: no fix needed, the control
    assert not poll_loop.expected_to_loop(fast, "none")


@pytest.mark.parametrize("values, message", [
    (dict(poll_interval_ms=3000), "POLL_INTERVAL_MS"),
    (dict(poll_fixes=["none", "none"]), "twice"),
    (dict(poll_clients=["kafkajs"]), "POLL_CLIENTS"),
    (dict(poll_records=50, poll_slow_offset=60), "POLL_SLOW_OFFSET"),
])
def test_bad_parameters_are_refused_before_anything_starts(values, message):
    with pytest.raises(LabError, match=message):
        SPEC.validate(**values)


# The live run (real consumers on a real broker) is notebook 07's test: tests/expectations/nb07.py asserts every
# variant of it, failure and CONTROL, so it is not run a second time here.
