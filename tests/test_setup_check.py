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
    # the copy's log: 121 committed records and their commit marker, then the aborted records and their abort marker
    end = 121 + 1 + (aborted + 1 if aborted else 0)
    r = sc.SetupResult("setup_check", {}, "r", Timeline(0.0), produced=120, consumed=120, spark_committed=121,
                       spark_uncommitted=121 + aborted, aborted_injected=aborted, copy_end_offset=end, audit=_Audit())
    for n, exercise in sc.SetupResult.exercises.items():
        assert not r.check(n, None)
        assert r.check(n, exercise.solution(r))
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, exercise.wrong(r))
    assert r.check(1, (121, 121 + aborted)) and r.check(2, lambda m, a: m + 2 + (a + 1 if a else 0))
    for n, answer in [(1, (120, 120 + aborted)), (1, "121"), (1, (121,)), (1, lambda m, a: None), (1, lambda m: m),
                      (2, lambda m, a: m + 3 + a), (2, lambda m, a: m + 1 + a + 2 * (a > 0)), (2, lambda m, a: None),
                      (2, lambda m: m), (2, end)]:
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, answer)
