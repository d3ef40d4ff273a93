"""Notebook 00's lesson on a result built here (no broker, no Spark): its exercises, each judged from the run's counts
and from the copier's other cases, and its Predict question, whose count must be exact."""
import re

import pandas as pd
import pytest

from lab.toolbox import Timeline
from lab.toolbox.lesson import Lesson
from lab.scenarios.nb00_setup_check import setup_check as sc
from lab.scenarios.nb00_setup_check.setup_check_report import SetupResult


class _Audit:
    counts = {"duplicate": 1, "aborted_read": 5, "lost": 0}

    def __init__(self, aborted: int = 5):
        self.counts = {**self.counts, "aborted_read": aborted}   # exactly the injected faults

    examples = {"duplicate": pd.DataFrame([{"t_s": 1.0, "id": "r-7", "copies": 2, "at": ["0@7", "0@120"]}])}

    def as_dict(self):
        return {"counts": self.counts}


def refused(checked, hint: str = "^Not quite: ") -> None:
    """A wrong answer: a cross and expect()'s hint (lab.toolbox.result.Checked), not an exception."""
    assert not checked and re.search(hint, checked.said), checked


def _result(aborted: int):
    # the copy's log: 121 committed records and their commit marker, then the aborted records and their abort marker
    end = 121 + 1 + (aborted + 1 if aborted else 0)
    outcome = SetupResult("setup_check", {}, "r", Timeline(0.0), produced=120, consumed=120, spark_committed=121,
                          spark_uncommitted=121 + aborted, aborted_injected=aborted, copy_end_offset=end,
                          audit=_Audit(aborted))
    return sc.lesson.result(outcome, messages=120, aborted=aborted), end


def test_the_module_is_a_lesson():
    assert isinstance(sc.lesson, Lesson) and not hasattr(sc, "SPEC") and not hasattr(sc, "run")
    assert sorted(sc.lesson.exercises) == [1, 2] and not SetupResult.exercises
    assert sc.lesson.needs(sc.lesson.spec.defaults)["nodes"] == 1


@pytest.mark.parametrize("aborted", [5, 0])
def test_exercises_check_against_the_measured_counts_and_refuse_the_tempting_answers(aborted):
    r, end = _result(aborted)
    assert r.produced == 120 and sc.measured_answer(r.as_record(), r.params) == end   # through the result
    for n, exercise in r.exercises.items():
        assert not r.check(n, None)
        assert r.check(n, exercise.solution(r))
        refused(r.check(n, exercise.wrong(r)))
        for trivial in (0, "", "none", [], 121 + aborted, None):   # never a number, a word or nothing
            assert not r.check(n, trivial)
    assert r.check(1, lambda m, a: (m + 1, m + 1 + a)) and r.check(2, lambda m, a: m + 2 + (a + 1 if a else 0))
    for n, answer in [(1, (120, 120 + aborted)), (1, "121"), (1, (121,)), (1, lambda m, a: None), (1, lambda m: m),
                      (1, lambda m, a: (m, m + a)), (1, lambda m, a: "121"),
                      (2, lambda m, a: m + 3 + a), (2, lambda m, a: m + 1 + a + 2 * (a > 0)), (2, lambda m, a: None),
                      (2, lambda m: m), (2, end)]:
        refused(r.check(n, answer))


@pytest.mark.parametrize("aborted", [5, 0])
def test_this_runs_numbers_copied_are_refused_with_a_hint(aborted):
    """The counts Spark measured, as a pair or from a function that ignores m and a, and this run's end offset
    hard-coded beside a right formula for the aborted part: each right for this run only, each refused."""
    r, end = _result(aborted)
    refused(r.check(1, (121, 121 + aborted)), "give the function itself")
    refused(r.check(1, lambda m, a: (121, 121 + aborted)), r"this run's counts, but a copy of 10 records")
    refused(r.check(1, lambda m, a: (m + 1, m + 1 + aborted)), r"^Not quite: counts\(10, ")   # this run's a, whatever a is
    refused(r.check(2, end), "give the function itself")
    refused(r.check(2, lambda m, a: end), "^Not quite: end_offset")
    refused(r.check(2, lambda m, a: 122 + (a + 1 if a else 0)), r"^Not quite: end_offset\(10, ")   # m hard-coded


@pytest.mark.parametrize("aborted", [5, 0])
def test_what_the_notebook_prints_above_each_exercise_is_refused(aborted):
    """Each exercise's `printed`: the verdict's counts and the explanation's end offset, in functions that return them
    whatever m and a, or at this run's (m, a) only."""
    r, end = _result(aborted)
    for n, exercise in r.exercises.items():
        copies = exercise.printed(r)
        assert len(copies) >= 2 and all(callable(c) for c in copies), (n, copies)
        assert any(c(120, aborted) in ((121, 121 + aborted), end) for c in copies), n   # right for this run alone
        for copy in copies:
            refused(r.check(n, copy))


def test_a_second_wrong_answer_gets_a_closer_hint_and_a_run_that_saw_other_faults_is_not_judged(capsys):
    r, _ = _result(5)
    for n, exercise in r.exercises.items():
        assert len(exercise.closer.split()) >= 5 and exercise.needs_failure
        refused(r.check(n, exercise.wrong(r)))
        assert "Closer:" not in capsys.readouterr().out
        refused(r.check(n, exercise.wrong(r)))
        assert f"Closer: {exercise.closer}" in capsys.readouterr().out
    # the audit saw something else than the injected faults: the setup is off, and nothing is judged on it
    odd, _ = _result(5)
    odd.outcome.audit.counts["lost"] = 3
    assert not odd.failed
    for n, exercise in odd.exercises.items():
        checked = odd.check(n, exercise.solution(odd))
        assert not checked and checked.said == "did not reproduce the failure", checked


@pytest.mark.parametrize("aborted", [7, 1, 0])
def test_the_predicted_end_offset_is_right_only_when_exact(aborted, capsys):
    """Each classic slip is judged wrong: offsets taken for records (no marker), the aborted records taken out of the
    log, no abort marker, one offset short; with no second transaction there is no abort marker either."""
    p = sc.lesson.spec.validate(aborted=aborted, messages=200)
    text, choices, tolerance = sc.lesson.question(p)
    assert choices is None and tolerance == 0 and "end offset" in text and "200" in text
    end = 200 + 1 + 1 + (aborted + 1 if aborted else 0)
    assert sc.lesson.predict(p, end, show=False).against(end).endswith("As you predicted.")
    for slip in {201 + aborted, 202, 201 + aborted + 1, end - 1} - {end}:
        guess = sc.lesson.predict(p, slip, show=False)
        guess.against(end)
        assert guess.right() is False, slip


def test_the_copys_end_offset_is_read_once_its_last_marker_is_in_the_log(monkeypatch):
    """The coordinator writes a transaction's markers after abort_transaction() has returned: until the abort marker
    is in, the end offset lacks it and the last stable offset still trails (it stops before the open transaction)."""
    answers = iter([(127, 122), (127, 122), (128, 128)])   # (end, last stable): the marker comes on the third look
    seen = {}

    def offsets(admin, topic, partitions=1, spec="latest", committed=False):
        if not committed:
            seen["now"] = next(answers)
        return {0: seen["now"][1] if committed else seen["now"][0]}

    class Lab:
        cluster = type("Cluster", (), {"admin": staticmethod(lambda: None)})()

        @staticmethod
        def wait(predicate, timeout, what, evidence=None):
            while not (got := predicate()):
                pass
            return got

    monkeypatch.setattr(sc, "topic_offsets", offsets)
    assert sc._end_once_settled(Lab, "copy") == 128
