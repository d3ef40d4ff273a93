"""Lesson 09, a queue of work (share groups, KIP-932, on Kafka 4.3.1)."""
from tests.expectations import exercises, prediction

# 40 records in one poll; 200 ms of work on each but offset 3's 8 s, against a 5 s lock: the work on offset 3 and on
# every record behind it ends after the lock (3 + 8 s > 5 s), so 37 records are written again. Offset 1 fails every
# time and is released: delivered up to the limit of 5, then archived, written nowhere. The lesson's defaults.
PARAMETERS = {
    "SHARE_RECORDS": 40,
    "SHARE_WORKERS": 2,
    "SHARE_WORK_MS": 200,
    "SHARE_SLOW_OFFSET": 3,
    "SHARE_SLOW_MS": 8000,
    "SHARE_FAILING_OFFSET": 1,
    "SHARE_ON_FAILURE": "release",
    "SHARE_LOCK_MS": 5000,
    "SHARE_DELIVERY_LIMIT": 5,
    "SHARE_WATCH_S": 60,
    # the Mitigate step: a lock longer than the poll's 15.8 s of work, and REJECT to the app's own dead letters
    "FIX": {"share_lock_ms": 30000, "share_on_failure": "reject"},
    "PREDICTION": 1,   # wrong: only the slow record, as if each lock started when the worker got to its record
}
WRITTEN_AGAIN = 37

# The control: the fix's settings in the Run step (a 30 s lock, REJECT), and no Mitigate step.
CONTROL = {**PARAMETERS, "SHARE_LOCK_MS": 30000, "SHARE_ON_FAILURE": "reject", "FIX": {}, "PREDICTION": None}

# The panel, clicked in the control run: a short slow record under the long lock, REJECT (about 9 s of work).
PANEL = {"share_slow_ms": 1000, "share_lock_ms": 30000, "share_on_failure": "reject"}
PANEL_FAILS = False


def check(results):
    assert results["failure_reproduced"] is True
    s = results["share"]
    prediction(results, PARAMETERS["PREDICTION"], WRITTEN_AGAIN)
    # One poll took every record; the records whose work ended after the lock were written again, as the rule says,
    # and the Spark audit finds each of them in the output more than once.
    assert s["first_poll"] == s["records"] == 40, s
    assert s["written_more_than_once"] == s["expected_written_again"] == WRITTEN_AGAIN, s
    assert s["audit_duplicates"] == WRITTEN_AGAIN, s
    # The broker refused the late acknowledgements, in the workers' own words.
    assert s["refused_acknowledgements"] >= WRITTEN_AGAIN, s
    assert any("InvalidRecordStateException" in line for line in results["share_evidence"]), results["share_evidence"]
    # The failing record, released each time: delivered up to the limit, then never again; written nowhere. A
    # delivery that waited in a worker's batch past its lock has its RELEASE refused; it counts towards the limit all
    # the same.
    assert s["failing_deliveries"] == s["expected_failing_deliveries"] == 5, s
    assert s["failing_answers"] + s["failing_refused"] == ["release"] * 5 and s["dead_letters"] == 0, s
    assert s["never_written"] == 1 and s["audit_lost"] == 1, s

    # The Mitigate step: nothing written twice, no refusal; the failing record rejected once, in the dead letters.
    fixed = results["mitigation"]
    assert fixed["fix"] == PARAMETERS["FIX"] and fixed["clean"] is True, fixed["verdict"]
    clean(fixed["share"])

    answers = exercises(results, [1, 2])
    assert answers[1] is None and answers[2] is None, answers


def clean(s):
    assert s["lock_ms"] == 30000 and s["first_poll"] == s["records"], s
    assert s["written_more_than_once"] == s["expected_written_again"] == 0 and s["audit_duplicates"] == 0, s
    assert s["refused_acknowledgements"] == 0, s
    assert s["failing_deliveries"] == s["expected_failing_deliveries"] == 1, s
    assert s["failing_answers"] == ["reject"] and s["failing_refused"] == [] and s["dead_letters"] == 1, s
    assert s["never_written"] == 1 and s["audit_lost"] == 1, s   # it stays unprocessed, in the dead letters


def check_control(results):
    assert results["failure_reproduced"] is False
    prediction(results, None, 0)
    clean(results["share"])
    assert results["mitigation"] is None
    answers = exercises(results, [1, 2])
    assert answers[1] is None and answers[2] is None, answers
