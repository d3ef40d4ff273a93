"""Notebook 00's exercises on a result built here (no broker, no Spark): each judged from the run's counts."""
import pandas as pd
import pytest

from lab.experiment import Timeline
from lab.scenarios.nb00_setup_check import setup_check as sc


class _Audit:
    counts = {"duplicate": 1, "aborted_read": 5, "lost": 0}
    examples = {"duplicate": pd.DataFrame([{"t_s": 1.0, "id": "r-7", "copies": 2, "at": ["0@7", "0@120"]}])}


@pytest.mark.parametrize("aborted", [5, 0])
def test_exercises_check_against_the_measured_counts_and_refuse_the_tempting_answers(aborted):
    r = sc.SetupResult("setup_check", {}, "r", Timeline(0.0), produced=120, consumed=120, spark_committed=121,
                       spark_uncommitted=121 + aborted, aborted_injected=aborted, audit=_Audit())
    for n, exercise in sc.SetupResult.exercises.items():
        assert not r.check(n, None)
        assert r.check(n, exercise.solution(r))
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, exercise.wrong(r))
    assert r.check(1, (121, 121 + aborted)) and r.check(2, "r-7")
    for n, answer in [(1, (120, 120 + aborted)), (1, "121"), (1, (121,)), (1, lambda m, a: None), (1, lambda m: m),
                      (2, "r-0"), (2, ["r-7"]), (2, 7)]:
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, answer)
