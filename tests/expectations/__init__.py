"""Each notebook's test parameters and the checks of its recorded results (nbNN.py), and what they share."""


def prediction(r: dict, given, measured) -> None:
    """The Predict step, recorded: what was predicted (None: nothing given), what the run measured, and whether
    they match (None when nothing was predicted)."""
    assert r["prediction"] == given and r["prediction_measured"] == measured, r
    assert r["prediction_right"] == (None if given is None else given == measured), r


def exercises(r: dict, numbers: list[int], not_run: tuple = ()) -> dict:
    """Every exercise tried on the run (tests/test_notebooks.py TRY_EXERCISES): no answer is "not answered", the
    solution is correct, the tempting wrong answer is refused with a hint. An exercise whose lesson this run left
    out (`not_run`) asks for the lesson instead. Returns the solutions' answers, by exercise number."""
    tried = r["exercises"]
    assert sorted(map(int, tried)) == numbers, tried
    for number, t in tried.items():
        if int(number) in not_run:
            assert all("not run in this run" in t[case] for case in ("right", "wrong")), t
            continue
        assert t["none"] == "not answered" and t["right"] == "correct", (number, t)
        assert t["wrong"].startswith("Not quite:"), (number, t)   # expect()'s hint, not a crash of the check
    return {int(n): t["answer"] for n, t in tried.items()}
