"""Each notebook's test parameters and the checks of its recorded results (nbNN.py), and what they share."""


def prediction(r: dict, given, measured, lesson: str | None = None) -> None:
    """The Predict step, recorded: what was predicted (None: nothing given), what the run measured, and whether
    they match (None when nothing was predicted). `lesson`: that lesson's prediction, in a notebook of lessons."""
    if lesson is not None:
        r = r["predictions"][lesson]
    assert r["prediction"] == given and r["prediction_measured"] == measured, r
    assert r["prediction_right"] == (None if given is None else given == measured), r


def on_transaction_versions(r: dict, bumped, not_bumped=()) -> None:
    """Which transaction version (KIP-890) the run's commits ran on, as recorded: level 2 finalized; each client of
    `bumped` bumped the epoch at every commit (version 2), each of `not_bumped` at none (version 0); every one of
    them committed at least once, and no other client is listed."""
    tv = r["transaction_version"]
    assert tv["finalized"] == 2, tv
    assert set(tv["clients"]) == set(bumped) | set(not_bumped), tv
    for name, c in tv["clients"].items():
        assert c["commits"] >= 1, (name, tv)
        assert c["on_tv2"] is (name in bumped) and c["bumped"] == (c["commits"] if name in bumped else 0), (name, tv)


TRIVIAL = (0, "", "none", [])   # answers that must never pass: zero, empty, "none", an empty list


def try_exercises(result, skip: tuple = ()) -> dict:
    """Each exercise of a run tried as a learner could: no answer, the solution, the tempting wrong answer, and
    the trivial answers (TRIVIAL). By number: what the check said of each ("correct", "not answered", or its
    hint), the solution's answer (None for a function), and whether a check let an exception reach the notebook.
    `skip`: exercises recorded as {"skipped": True}, not tried."""
    out = {}
    for number, exercise in result.exercises.items():
        if number in skip:
            out[number] = {"skipped": True}
            continue
        tried = {}
        cases = [("none", lambda r: None), ("right", exercise.solution), ("wrong", exercise.wrong),
                 *((f"trivial {t!r}", lambda r, t=t: t) for t in TRIVIAL)]
        try:   # what the notebook shows above the exercise, copied: every exercise says what that is
            copies = exercise.printed(result)
        except Exception as exc:
            copies, tried["printed"] = [], f"raised {type(exc).__name__}: {exc}"
        cases += [(f"printed {i}", lambda r, a=a: a) for i, a in enumerate(copies)]
        for case, answer in cases:
            try:
                tried[case] = result.check(number, answer(result)).said
            except Exception as exc:   # what the learner would see as a traceback: exercises() refuses it
                tried[case] = f"raised {type(exc).__name__}: {exc}"
        try:
            solved = exercise.solution(result)
            tried["answer"] = None if callable(solved) else solved
        except Exception as exc:
            tried["answer"] = f"raised {type(exc).__name__}: {exc}"
        out[number] = tried
    return out


def exercises(r: dict, numbers: list[int], not_run: tuple = (), skipped: tuple = ()) -> dict:
    """Every exercise tried on the run (try_exercises, in a cell tests/test_notebooks.py adds): no answer is
    "not answered", the solution is correct, the tempting wrong answer is refused with a hint. An exercise whose
    lesson this run left out (`not_run`) asks for the lesson instead; one tried in the other run only (`skipped`,
    TRIED_IN_FAILURE_ONLY or TRIED_IN_CONTROL_ONLY) is recorded as skipped, and only it. Returns the solutions' answers, by exercise number."""
    tried = r["exercises"]
    assert sorted(map(int, tried)) == numbers, tried
    assert sorted(int(n) for n, t in tried.items() if t.get("skipped")) == sorted(skipped), tried
    for number, t in tried.items():
        if int(number) in skipped:
            continue
        assert not any(said.startswith("raised ") for case, said in t.items() if case != "answer"), (number, t)
        trivial = {case: said for case, said in t.items() if case.startswith("trivial")}
        assert trivial and "correct" not in trivial.values(), (number, trivial)   # never zero, empty or "none"
        copied = {case: said for case, said in t.items() if case.startswith("printed")}
        assert "correct" not in copied.values(), (number, copied)   # nor a value shown above the exercise
        if int(number) in not_run:
            assert all("not run in this run" in t[case] for case in ("right", "wrong")), t
            continue
        assert t["none"] == "not answered" and t["right"] == "correct", (number, t)
        assert t["wrong"].startswith("Not quite:"), (number, t)   # expect()'s hint, not a crash of the check
    return {int(n): t.get("answer") for n, t in tried.items()}
