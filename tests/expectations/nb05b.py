"""Lesson 05b, a record the processing cannot take ("Tales from running Kafka Streams in Production")."""
from lab.scenarios.nb05_exactly_once_under_crashes.answers import HANDLER_ANSWERS
from tests.expectations import exercises, prediction

# The three runs the question names: a restarted app and a replaced thread meet the record again; KIP-1033 drops it.
PARAMETERS = {
    "HANDLERS": ["shutdown_client", "replace_thread", "continue"],
    "RECORDS": 150,
    "COMMIT_INTERVAL_MS": 1000,
    "WATCH_SECONDS": 12,
    "FIX": {"handlers": ["dead_letter"]},
    "PREDICTION": HANDLER_ANSWERS[3],   # wrong: each restart meets the record again
}

# The control: a malformed input skipped by the DeserializationExceptionHandler: everything real comes out.
CONTROL = {**PARAMETERS, "HANDLERS": ["deserialization"], "FIX": {}, "PREDICTION": None}


def clean_output(run, what):
    assert run["duplicates"] == 0 and run["lost"] == 0, (what, run)
    assert run["outputs"] == run["produced"] > 0, (what, run)


def check(results):
    assert results["failure_reproduced"] is True, results["verdict"]
    prediction(results, PARAMETERS["PREDICTION"], HANDLER_ANSWERS[1])   # only continue got past it
    h = results["handlers"]
    stopped = h["shutdown_client"]
    # SHUTDOWN_CLIENT with a deployment that restarts the app: it stops, and every restart meets the record again.
    assert stopped["outcome"].startswith("app stopped") and stopped["deaths"] >= 2, stopped
    assert stopped["lost"] > 0 and stopped["poison_lost"] and not stopped["carried_on"], stopped
    loop = h["replace_thread"]
    # REPLACE_THREAD: the same poison record kills thread after thread; the input behind it never comes out.
    assert loop["outcome"].startswith("crash loop") and loop["uncaught"] >= 2, loop
    assert loop["lost"] > 0 and loop["poison_lost"], loop
    assert loop["duplicates"] == 0, loop
    dropped = h["continue"]
    # KIP-1033 CONTINUE: exactly the poison record is lost, and the dropped-records metric counts it.
    assert dropped["outcome"] == "records dropped" and dropped["lost"] == 1, dropped
    assert dropped["lost_ids"] == [dropped["poison"]] and dropped["poison_lost"], dropped
    assert dropped["dropped_records"] == 1, dropped
    assert dropped["audit"]["counts"]["lost"] == 1 and dropped["audit"]["counts"]["duplicate"] == 0, dropped["audit"]

    # KIP-1034: the same CONTINUE with a dead-letter topic: the poison record is there, with its error, and is the
    # only input missing from the output; the app never died.
    fixed = results["mitigation"]
    assert fixed["clean"] is True, fixed["verdict"]
    kept = fixed["handlers"]["dead_letter"]
    assert kept["outcome"].startswith("clean") and kept["deaths"] == 0 and kept["lost_ids"] == [kept["poison"]], kept
    [letter] = kept["dead_letters"]
    assert letter["id"] == kept["poison"] and letter["exception"].endswith("Exception"), letter
    assert letter["from"].startswith(f"{kept['poison'].rsplit('-', 1)[0]}-input-"), letter

    # The exercise: a function (handler, record) -> what the app does with it, judged on this run's three rows, then
    # on the pairs it left out (the malformed input, dead_letter, deserialization) by the mechanism; the tempting
    # rule (a handler does to any record what it did to the poison one) refused at continue's malformed input.
    answers = exercises(results, [1])
    assert answers[1] is None, answers
    assert sum(case.startswith("printed") for case in results["exercises"]["1"]) >= 3, results["exercises"]["1"]
    assert "fate('continue', 'malformed') = 'dropped'" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]


def check_control(results):
    assert results["failure_reproduced"] is False, results["verdict"]
    prediction(results, None, None)   # the three runs the question names did not run
    deser = results["handlers"]["deserialization"]
    # The malformed input was skipped (and counted); every real input came out once.
    assert deser["outcome"] == "clean" and deser["dropped_records"] == 1 and deser["uncaught"] == 0, deser
    clean_output(deser, "deserialization")
    assert results["mitigation"] is None
    # the same function, this run's row the deserialization handler's, measured
    answers = exercises(results, [1])
    assert answers[1] is None, answers
    assert sum(case.startswith("printed") for case in results["exercises"]["1"]) >= 3, results["exercises"]["1"]
