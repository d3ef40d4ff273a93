"""Notebook 01's pure parts, no broker: evidence extraction, expiry clocks, the SPEC, the result's branches."""
import re
import time

import pytest

from lab.errors import LabError
from lab.toolbox import Timeline, lab_lines
from lab.scenarios.nb01_offset_expiry_reprocessing import offset_expiry as oe, offset_expiry_report as report

APP_LOG = """earliest-0 starting
LAB {"kind": "start", "ts": 100.0, "app": "earliest", "incarnation": 0, "group": "g", "reset": "earliest"}
LAB {"kind": "commit", "ts": 101.0, "app": "earliest", "incarnation": 0, "records": 40, "offsets": {"0": 20, "1": 20}}
LAB {"kind": "commit", "ts": 102.0, "app": "earliest", "incarnation": 0, "records": 5, "offsets": {"1": 25}}
LAB {"kind": "commit", "ts": 103
"""


def test_commit_lines_give_the_highest_offset_per_partition():
    rows = lab_lines(APP_LOG, kind="commit")
    assert len(rows) == 2  # the line cut short by a kill is not a commit
    assert oe.committed_offsets(rows) == {0: 20, 1: 25}
    assert oe.committed_offsets([]) == {}


@pytest.mark.parametrize("idle, seen, clock", [
    (15, 61.0, "group empty"),        # classic: one retention after the group emptied
    (15, 46.5, "last commit"),        # KIP-848: retention after the last commit
    (1, 60.0, "either (idle too short to tell)"),
    (30, 50.0, "neither (closer to group empty)"),
])
def test_expiry_clock(idle, seen, clock):
    assert report.clock_for(idle, seen, 60, 2) == clock


def test_skipped_by_latest():
    day = 86400
    assert report.skipped_by_latest(30 * 3600, day, 50) == 5_400_000   # everything produced while it was down
    assert report.skipped_by_latest(20 * 3600, day, 50) == 0           # back before the expiry: it resumes


def test_expires_after_stop():
    week, day = 7 * 86400, 86400
    assert report.expires_after_stop("classic", 8 * day, week) == week
    assert report.expires_after_stop("consumer", 3 * day, week) == 4 * day
    assert report.expires_after_stop("consumer", 8 * day, week) == 0


def test_spec_accepts_a_downtime_shorter_than_the_retention_and_refuses_what_kafka_cannot_take():
    p = oe.lesson.spec.validate(downtime_s=20, variants=["earliest"], spark=False)
    assert p["downtime_s"] == 20 and p["retention_minutes"] == 1
    assert oe.lesson.spec.validate(early_downtime_s=600)["early_downtime_s"] == 600   # a control that expires: valid
    assert oe.needs(p)["broker_config"]["offsets.retention.minutes"] == "1"
    for bad in (dict(retention_minutes=0), dict(variants=["nope"]), dict(group_protocol="x"),
                dict(variants=[], spark=False), dict(partitions=4), dict(downtime_s=0), dict(retension_minutes=1)):
        with pytest.raises(LabError):
            oe.lesson.spec.validate(**bad)


def refused(checked, hint: str = "^Not quite: ") -> None:
    """A wrong answer: a cross and expect()'s hint (lab.toolbox.result.Checked), not an exception."""
    assert not checked and re.search(hint, checked.said), checked


class _Verdict:
    def __init__(self, **counts):
        self.counts, self.examples = counts, {}

    def summary(self):
        return str(self.counts)


def _result(expired: bool):
    t0 = time.time() - 100
    timeline = Timeline(t0)
    down = 65.0 if expired else 20.0
    facts = {n: {"protocol": "classic", "reset": report.VARIANTS[n].reset, "idle_before_stop_s": 0.5,
                 "expired_after_stop_s": 61.0 if expired else None, "downtime_s": down, "read_after_restart": 40,
                 "committed_before_restart": not expired}
             for n in ("earliest", "latest")}
    facts["idle-consumer"] = dict(facts["earliest"], protocol="consumer", idle_before_stop_s=15.0,
                                  expired_after_stop_s=46.0 if expired else None)
    n = 60 if expired else 0
    verdicts = {"earliest": _Verdict(reprocessed_after_reset=n, skipped_after_reset=0, duplicate=n, lost=0),
                "latest": _Verdict(reprocessed_after_reset=0, skipped_after_reset=30 if expired else 0)}
    snapshots = [{"moment": "before the restart", "variant": v, "partition": p,
                  "committed_offset": None if expired else 30} for v in facts for p in (0, 1)]
    params = oe.lesson.spec.validate(downtime_s=None if expired else 20, variants=list(facts), spark=False)
    outcome = report.OffsetExpiryResult(scenario="offset-expiry", params=params, run_id="r", timeline=timeline,
                                        topic="events", stop_t=10.0, facts=facts, verdicts=verdicts,
                                        snapshots=snapshots)
    return oe.lesson.result(outcome, run_id="r", **params)


def test_control_branch_says_nothing_expired():
    r = _result(expired=False)
    assert not r.failed
    assert r.verdict() == "downtime 20 s < retention 60 s: the offsets were still there, nothing re-read"
    assert "never applied" in r.explain() and "Down 20 s < 60 s" in r.explain(), r.explain()
    assert r.clock().empty and "offsets still there" in r.explain_clock()
    rec = r.as_record()
    assert rec["failure_reproduced"] is False and rec["earliest_reprocessed"] == 0
    assert rec["earliest_committed_before_restart"] is True and rec["latest_read_after_restart"] == 40
    assert "idle_consumer_clock" not in rec
    r.figure(), r.audit_table(), r.offsets_table(), r.table(), r.broker_lines()
    # the exercises on a clean run: exercise 1's function is judged on `latest` back in time (it skipped none)
    # and on outages the run did not have; exercise 2's on the clocks the mechanism gives; the wrong ones refused
    exercises = oe.lesson.exercises
    for n in (1, 2):
        assert r.check(n, exercises[n].solution(r))
        refused(r.check(n, exercises[n].wrong(r)))
    # a function that skips everything produced while down, expired or not: refused on this run's own group
    refused(r.check(1, lambda down, retention, rate: rate * down), "in this run `latest` was down 20 s")
    for copy in exercises[1].printed(r):
        refused(r.check(1, copy))
    assert not [k for k in r.as_record() if k.startswith("exercise")]


def test_failure_branch_names_what_each_group_did():
    r = _result(expired=True)
    assert r.failed
    assert "earliest re-read 60, skipped 0, duplicates 60" in r.verdict(), r.verdict() and "latest re-read 0, skipped 30" in r.verdict()
    assert "found nothing" in r.explain()
    rec = r.as_record()
    assert rec["idle_consumer_clock"] == "last commit" and rec["earliest_committed_before_restart"] is False
    assert r.check(2, report.expires_after_stop) and r.check(1, report.skipped_by_latest)
    assert r.check(1, lambda down, retention, rate: round(rate * down) if down >= retention else 0)   # whole records
    # the formerly passing look-up, the `latest` row's 30 skipped, as a number and as a function; the wrong one
    # (only what arrived after the expiry) refused on this run's own group, whose 30 arrived just after the stop
    refused(r.check(1, oe.lesson.exercises[1].wrong(r)), "in this run `latest` was down 65 s")
    for n, answer in [(1, 30), (1, lambda *_: 30), (1, lambda down, retention, rate: 30 if down >= retention else 0),
                      (1, lambda down, retention, rate: rate * down), (1, lambda *_: 0), (1, lambda *_: None),
                      (1, lambda *_: "30"), (1, lambda *_: 1 / 0), (1, 0), (1, ""), (1, "none"), (1, []),
                      (2, oe.lesson.exercises[2].wrong(r)), (2, lambda *_: "soon"),
                      (2, lambda *_: 1 / 0), (2, 60), (2, 0), (2, "none"), (2, lambda *_: 60)]:
        refused(r.check(n, answer))
    # what the notebook shows above each exercise, copied: the table's counts (`latest`'s 30 skipped among them),
    # the reads after the restart, MESSAGES_BEFORE, MESSAGES_WHILE_DOWN and the Mitigate cell's downtime (30, as
    # many as `latest` skipped), and the `latest` row looked up; the clock table looked up, the retention and the
    # Mitigate cell's downtime
    one, two = oe.lesson.exercises[1].printed(r), oe.lesson.exercises[2].printed(r)
    assert [f(1, 1, 1) for f in one[:-1]] == [60, 30, 40, 200, 100], [f(1, 1, 1) for f in one]
    assert one[-1](65, 60, 1) == 30 and len(two) == 4, (one, two)
    for n, copies in [(1, one), (2, two)]:
        for copy in copies:
            refused(r.check(n, copy))


def test_a_second_wrong_answer_gets_a_closer_hint(capsys):
    r = _result(expired=True)
    for n, exercise in oe.lesson.exercises.items():
        assert len(exercise.closer.split()) >= 5
        refused(r.check(n, exercise.wrong(r)))
        assert "Closer:" not in capsys.readouterr().out
        refused(r.check(n, exercise.wrong(r)))
        assert f"Closer: {exercise.closer}" in capsys.readouterr().out


def test_exercise_1_without_a_latest_group_is_judged_on_the_other_outages():
    """A run without a `latest` group has no measured case: the function is judged on the outages alone."""
    r = _result(expired=True)
    r.outcome.facts.pop("latest")
    r.outcome.verdicts.pop("latest")
    assert r.check(1, report.skipped_by_latest)
    refused(r.check(1, oe.lesson.exercises[1].wrong(r)), "down 30 h with a 24 h retention")
    refused(r.check(1, lambda down, retention, rate: rate * down), "down 20 h with a 24 h retention")


def test_the_variants_names_do_not_say_what_happens():
    """A group's name is read above the question: `id-table` says what it has, not what it prevents."""
    assert "id-table" in report.VARIANTS and "idempotent" not in report.VARIANTS
    assert oe.lesson.spec.validate(variants=["id-table"])["variants"] == ["id-table"]
