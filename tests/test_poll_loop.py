"""Lesson 07a, work between two polls (lab/scenarios/nb07_when_streams_stop/poll_loop.py): its arithmetic, its
refusals and its exercises."""
import re

import pytest

from lab.errors import LabError
from lab.scenarios.nb07_when_streams_stop import poll_loop

SPEC = poll_loop.lesson.spec
# 400 records x 20 ms = 8 s of work per poll against a 6 s interval: dropped at 6 s, the commit fails at 8 s.
# Streams: one record of 9 s against the same 6 s interval.
SMALL = dict(poll_batch=400, poll_work_ms=20, poll_records=450, poll_interval_ms=6000,
             poll_longer_interval_ms=20_000, poll_slow_record_ms=9000, poll_slow_offset=100, poll_watch_s=60)


def refused(checked, hint: str) -> None:
    """A wrong answer: a cross and expect()'s hint (lab.toolbox.result.Checked), not an exception."""
    assert not checked and re.search(hint, checked.said), checked


def test_the_arithmetic_decides_what_loops():
    p = SPEC.validate(**SMALL)
    assert poll_loop.expected_to_loop(p, "baseline")
    assert not any(poll_loop.expected_to_loop(p, f) for f in ("max_poll_records_1", "longer_interval",
                                                              "pause_resume"))
    fast = SPEC.validate(**{**SMALL, "poll_work_ms": 5})   # 2 s per poll: the baseline reads on too
    assert not poll_loop.expected_to_loop(fast, "baseline")
    # Kafka Streams polls between its records: its batch's 8 s does not count, only its longest record
    assert poll_loop.expected_to_loop(p, "baseline", "streams")   # the 9 s record
    no_slow = SPEC.validate(**{**SMALL, "poll_slow_record_ms": 0})
    assert poll_loop.expected_to_loop(no_slow, "baseline", "java")
    assert not poll_loop.expected_to_loop(no_slow, "baseline", "streams")
    assert poll_loop.loops("streams", "baseline", no_slow) is False and poll_loop.loops("java", "baseline", no_slow)


def test_the_run_asked_about_is_the_baseline_and_the_other_variants_are_the_mitigate_steps():
    """The Predict question's run has the baseline only (the other variants, read beside it, would read as its
    fixes); the Mitigate step takes them as its fix and runs them, every client, without the baseline."""
    p = SPEC.validate()
    assert p["poll_variants"] == ["baseline"] and poll_loop.asked_variant(p) == "baseline"
    fix = {"poll_variants": ["max_poll_records_1", "longer_interval", "pause_resume"]}
    fixed = poll_loop.lesson.mitigate.check(p, fix)
    assert fixed["poll_variants"] == fix["poll_variants"] and fixed["poll_clients"] == p["poll_clients"]
    # a fix of the baseline's own numbers runs the baseline alone again
    assert poll_loop.lesson.mitigate.check(p, {"poll_interval_ms": 20_000})["poll_variants"] == ["baseline"]


def test_the_predict_question_asks_which_consumers_loop_and_each_choice_is_an_outcome_of_the_arithmetic():
    """Which consumers keep reading the same batch: every client, none, the plain clients only (their batch outlasts
    the interval, Streams' one record does not), or Streams only (the reverse). Each choice is one a run can give."""
    p = SPEC.validate(**SMALL)
    text, choices = poll_loop.question(p)
    assert "400 records a poll, 20 ms of work each" in text and "9,000 ms" in text and "6,000 ms" in text, text
    assert choices == ("all three", "none of them: each moves on",
                       "the Java consumer and the librdkafka consumer, not Kafka Streams", "only Kafka Streams")

    def record(*looping):
        return {"poll_loop": {f"{c}/baseline": {"looped": c in looping} for c in poll_loop.CLIENTS}}
    assert poll_loop.measured_answer(record("java", "librdkafka", "streams"), p) == choices[0]
    assert poll_loop.measured_answer(record(), p) == choices[1]
    assert poll_loop.measured_answer(record("java", "librdkafka"), p) == choices[2]
    assert poll_loop.measured_answer(record("streams"), p) == choices[3]
    assert poll_loop.measured_answer({"poll_loop": {}}, p) is None
    # each choice is what the arithmetic gives at some setting of the question's own numbers
    settings = [{}, {"poll_interval_ms": 20_000}, {"poll_slow_record_ms": 1000}, {"poll_batch": 100}]
    for choice, change in zip(choices, settings):
        q = {**p, **change}
        looping = [c for c in poll_loop.CLIENTS if poll_loop.expected_to_loop(q, "baseline", c)]
        assert poll_loop.measured_answer(record(*looping), q) == choice, (choice, change)
    # one client: its own yes or no; pause_resume leaves Kafka Streams out
    one = SPEC.validate(**SMALL, poll_clients=["java"])
    assert poll_loop.question(one)[1] == ("yes: it keeps reading it", "no: it moves on")
    paused = SPEC.validate(**SMALL, poll_variants=["pause_resume"])
    assert poll_loop.question(paused)[1] == ("both", "none of them: each moves on")


@pytest.mark.parametrize("values, message", [
    (dict(poll_interval_ms=3000), "POLL_INTERVAL_MS"),
    (dict(poll_variants=["baseline", "baseline"]), "twice"),
    (dict(poll_clients=["kafkajs"]), "POLL_CLIENTS"),
    (dict(poll_records=50, poll_slow_record_ms=9000, poll_slow_offset=60), "POLL_SLOW_OFFSET"),
])
def test_bad_parameters_are_refused_before_anything_starts(values, message):
    with pytest.raises(LabError, match=message):
        SPEC.validate(**values)


# The live run (real consumers on a real broker) is lesson 07a's test: tests/expectations/nb07a.py asserts every
# variant of it, failure and CONTROL, so it is not run a second time here.


def test_exercise_1_is_judged_on_what_looped_in_this_run_and_on_the_arithmetic_elsewhere(capsys):
    p = SPEC.validate(**SMALL)

    def result(looped: dict):
        rows = [{"client": name.split("/")[0], "variant": name.split("/")[1], "looped": loop}
                for name, loop in looped.items()]
        return poll_loop.lesson.result(poll_loop.Outcome(rows, {}), **p)

    one = poll_loop.lesson.exercises[1]
    measured = {"java/baseline": True, "java/max_poll_records_1": False, "streams/baseline": True,
                "streams/max_poll_records_1": True}
    r = result(measured)
    assert r.check(1, one.solution(r)) and r.check(1, poll_loop.loops)
    assert not r.check(1, None) and "`lesson.solution(1)` shows" in capsys.readouterr().out
    for answer, hint in [
            (one.wrong(r), "loops('streams', 'max_poll_records_1', p) = False, but in this run it looped"),
            (lambda c, f, q: f == "baseline" or c == "streams" and f != "pause_resume",   # names, not arithmetic
             "loops('java', 'baseline', p) = True, but with POLL_INTERVAL_MS=60000"),
            (lambda c, f, q: f != "pause_resume", "loops('java', 'max_poll_records_1', p) = True, but in this run"),
            (lambda c, f, q: "yes", "returned 'yes'"), (lambda c: True, "raised TypeError"), ("java/baseline", "function"),
            (0, "function"), ("none", "function")]:
        refused(r.check(1, answer), f"^Not quite: .*{re.escape(hint)}")
    # a run whose measurement went against the arithmetic: the measurement decides for this run's variants
    odd = result({**measured, "java/baseline": False})
    refused(odd.check(1, poll_loop.loops), r"^Not quite: loops\('java', 'baseline', p\) = True, but in this run it read on")
    # nothing looped (the control: the baseline with a 20 s interval): the same function is right, the tempting one
    # still refused by the other settings
    control = poll_loop.lesson.result(poll_loop.Outcome([{"client": c, "variant": "baseline", "looped": False}
                                                         for c in poll_loop.CLIENTS], {}),
                                      **{**p, "poll_interval_ms": 20_000})
    assert control.check(1, poll_loop.loops)
    refused(control.check(1, one.wrong(control)), "^Not quite: ")
    # what the notebook prints above it: look-ups of the run's table and of the Mitigate cell's, True, False
    for run in (r, control):
        copies = one.printed(run)
        assert len(copies) == 4 and copies[1]("java", "pause_resume", p) is False, copies
        for copy in copies:
            refused(run.check(1, copy), "^Not quite: loops")


def test_exercise_2_an_interval_too_short_or_too_long_is_refused_before_anything_runs(monkeypatch):
    """Its case (260 records a poll, 50 ms each: 13 s of work) is no run's; the experiment itself runs in the
    notebook's tests. Here, what is refused without running it, and the solution's arithmetic: a quarter more than the
    case's work, rounded up to a second, whatever the run's own parameters."""
    def never_run(**params):
        raise AssertionError(f"the experiment ran: {params}")
    monkeypatch.setattr(poll_loop.lesson, "run", never_run)
    p = SPEC.validate(**SMALL)
    r = poll_loop.lesson.result(poll_loop.Outcome([], {}), **p)
    two = poll_loop.lesson.exercises[2]
    assert two.solution(r) == 17_000 and two.wrong(r) == 12_000        # 13 s of work
    for answer, hint in [(5000, "below 6000 ms"), (19_501, "more than half as long again"), ("17 s", "whole number"),
                         (True, "whole number"), (0, "below 6000 ms"), ("none", "whole number"), ("", "whole number"),
                         (10_399, "far shorter than the work between two polls \\(260 records x 50 ms\\)")]:
        refused(r.check(2, answer), f"^Not quite: .*{hint}")
    # within the bounds it runs the lesson as the case, an exercise's own run, which lesson.check() does not judge
    refused(r.check(2, 10_400), "the experiment ran: .*'remember': False")
    refused(r.check(2, 13_000), "the experiment ran: .*'poll_interval_ms': 13000, 'poll_batch': 260, 'poll_work_ms': 50")
    # what the notebook prints above it: the table's batch_ms (the run's 8 s of work, formerly the answer) and
    # interval_ms, the Mitigate cell's, the parameters, the Explain's 6 s and 10 s, the case's numbers: all refused
    # before anything runs
    copies = two.printed(r)
    assert copies == [20, 50, 100, 260, 400, 450, 6000, 8000, 9000, 10_000, 20_000, 30_000], copies
    refused(r.check(2, 8000), "far shorter than the work")
    for copy in copies:
        refused(r.check(2, copy), "^Not quite: (?!.*the experiment ran)")
    # the case is the exercise's own: the run's batch does not move its answer
    other = poll_loop.lesson.result(poll_loop.Outcome([], {}), **{**p, "poll_batch": 100})
    assert two.solution(other) == 17_000 and two.wrong(other) == 12_000
