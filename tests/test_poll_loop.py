"""Notebook 07's poll-interval lesson (lab/scenarios/poll_loop.py): real Java and librdkafka consumers on a
real broker. The slow batch loops; each fix, run beside it on the same topic, ends clean."""
import pytest

from lab.errors import LabError
from lab.experiment import Run, Spec
from lab.scenarios import poll_loop

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


@pytest.mark.timeout(300)
def test_the_slow_batch_loops_and_every_fix_ends_clean():
    p = SPEC.validate(**SMALL)
    with Run("test-poll-loop", progress=False, **poll_loop.needs(p)) as lab:
        outcome = poll_loop.run_lesson(lab, p)
    rows = outcome.by_variant()
    assert outcome.failed
    assert "streams/pause_resume" not in rows and len(rows) == 11, list(rows)
    for name, row in rows.items():
        # What looped is what the arithmetic (work between two polls against the interval) said would.
        assert row["looped"] is row["expected_to_loop"], (name, row)
    for client in ("java", "librdkafka", "streams"):
        loop = rows[f"{client}/none"]
        # Dropped from the group (the client says so), the same offsets read again (the Spark audit sees the
        # jump back), and no commit past the slow work.
        assert loop["dropped_lines"] >= 1 and f"{client}/none" in outcome.evidence, loop
        assert loop["max_reads_per_offset"] >= 2 and loop["audit_jumps_back"] >= 1, loop
        if client == "streams":
            assert loop["committed_offset"] <= p["poll_slow_offset"], loop
        else:
            assert loop["commit_failures"] >= 1 and loop["committed_offset"] == 0, loop
        fixes = ("longer_interval",) if client == "streams" else ("max_poll_records_1", "longer_interval",
                                                                   "pause_resume")
        for fix in fixes:
            clean = rows[f"{client}/{fix}"]
            # Every record read once, everything committed, no failed commit, no drop.
            assert clean["commit_failures"] == 0 and clean["dropped_lines"] == 0, clean
            assert clean["reads"] == clean["distinct_offsets"] == p["poll_records"], clean
            assert clean["committed_offset"] == p["poll_records"] and clean["audit_jumps_back"] == 0, clean
    # One slow record is longer than the interval whatever max.poll.records says: that fix cannot help Streams.
    assert rows["streams/max_poll_records_1"]["looped"]
    assert "java/none" in outcome.verdict() and outcome.figure().data
