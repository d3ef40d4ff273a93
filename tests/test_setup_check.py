"""Notebook 00's lesson on a result built here (no broker, no Spark): its exercises, each judged from the run's counts
and from the copier's other cases, and its Predict question, whose count must be exact."""
import pandas as pd
import pytest

from lab.experiment import Timeline
from lab.experiment.lesson import Lesson
from lab.scenarios.nb00_setup_check import setup_check as sc
from lab.scenarios.nb00_setup_check.setup_check_report import SetupResult


class _Audit:
    counts = {"duplicate": 1, "aborted_read": 5, "lost": 0}
    examples = {"duplicate": pd.DataFrame([{"t_s": 1.0, "id": "r-7", "copies": 2, "at": ["0@7", "0@120"]}])}

    def as_dict(self):
        return {"counts": self.counts}


def _result(aborted: int):
    # the copy's log: 121 committed records and their commit marker, then the aborted records and their abort marker
    end = 121 + 1 + (aborted + 1 if aborted else 0)
    outcome = SetupResult("setup_check", {}, "r", Timeline(0.0), produced=120, consumed=120, spark_committed=121,
                          spark_uncommitted=121 + aborted, aborted_injected=aborted, copy_end_offset=end,
                          audit=_Audit())
    return sc.lesson.result(outcome, messages=120, aborted=aborted), end


def test_the_module_is_a_lesson():
    assert isinstance(sc.lesson, Lesson) and not hasattr(sc, "SPEC") and not hasattr(sc, "run")
    assert sorted(sc.lesson.exercises) == [1, 2] and not SetupResult.exercises
    assert sc.lesson.needs(sc.lesson.spec.defaults)["nodes"] == 1


@pytest.mark.parametrize("aborted", [5, 0])
def test_exercises_check_against_the_measured_counts_and_refuse_the_tempting_answers(aborted):
    r, end = _result(aborted)
    assert r.produced == 120 and sc.measured_answer(r.as_record(), r.params) == aborted   # through the result
    for n, exercise in r.exercises.items():
        assert not r.check(n, None)
        assert r.check(n, exercise.solution(r))
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, exercise.wrong(r))
    assert r.check(1, lambda m, a: (m + 1, m + 1 + a)) and r.check(2, lambda m, a: m + 2 + (a + 1 if a else 0))
    for n, answer in [(1, (120, 120 + aborted)), (1, "121"), (1, (121,)), (1, lambda m, a: None), (1, lambda m: m),
                      (1, lambda m, a: (m, m + a)), (1, lambda m, a: "121"),
                      (2, lambda m, a: m + 3 + a), (2, lambda m, a: m + 1 + a + 2 * (a > 0)), (2, lambda m, a: None),
                      (2, lambda m: m), (2, end)]:
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, answer)


@pytest.mark.parametrize("aborted", [5, 0])
def test_this_runs_numbers_copied_are_refused_with_a_hint(aborted):
    """The counts Spark measured, as a pair or from a function that ignores m and a, and this run's end offset
    hard-coded beside a right formula for the aborted part: each right for this run only, each refused."""
    r, end = _result(aborted)
    with pytest.raises(AssertionError, match="give the function itself"):
        r.check(1, (121, 121 + aborted))
    with pytest.raises(AssertionError, match=r"this run's counts, but a copy of 10 records"):
        r.check(1, lambda m, a: (121, 121 + aborted))
    with pytest.raises(AssertionError, match=r"^Not quite: counts\(10, "):
        r.check(1, lambda m, a: (m + 1, m + 1 + aborted))   # this run's a, whatever a is
    with pytest.raises(AssertionError, match="give the function itself"):
        r.check(2, end)
    with pytest.raises(AssertionError, match="^Not quite: end_offset"):
        r.check(2, lambda m, a: end)
    with pytest.raises(AssertionError, match=r"^Not quite: end_offset\(10, "):
        r.check(2, lambda m, a: 122 + (a + 1 if a else 0))   # m hard-coded


@pytest.mark.parametrize("aborted", [7, 1, 0])
def test_the_predicted_count_is_right_only_when_exact(aborted, capsys):
    """The classic slip, the abort marker counted as a record (one more), is judged wrong, and so is one fewer."""
    p = sc.lesson.spec.validate(aborted=aborted)
    text, choices, tolerance = sc.lesson.question(p)
    assert choices is None and tolerance == 0 and "read_uncommitted" in text
    assert sc.lesson.predict(p, aborted, show=False).against(aborted).endswith("As you predicted.")
    for slip in (aborted + 1, aborted - 1):
        guess = sc.lesson.predict(p, slip, show=False)
        guess.against(aborted)
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
