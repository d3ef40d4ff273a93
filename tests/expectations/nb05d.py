"""Lesson 05d, a record the broker refuses ("Some kafka retention lessons (we learned the hard way)")."""
from lab.cluster import parse_version
from lab.scenarios.nb05_exactly_once_under_crashes.answers import CARRIED_ON, REFUSED_ANSWERS
from tests.expectations import exercises, prediction

# Kafka's default production handler and the remedy under at-least-once, and CONTINUE under exactly-once (the
# notebook runs `continue` where this runs `route`: CONTINUE after a note, which the question counts as CONTINUE). Its
# control is the Mitigate step: Kafka's default handler, the output topic's limit just above the batch that carries
# the refused record (the exercise's claim, measured).
PARAMETERS = {
    "PRODUCTION_HANDLERS": ["default", "route"],
    "PRODUCTION_GUARANTEE": "at_least_once",
    "OTHER_GUARANTEE_HANDLERS": ["continue"],
    "REFUSE_BYTES": 20000,
    "OUTPUT_MAX_BYTES": 8192,
    "RECORDS": 150,
    "COMMIT_INTERVAL_MS": 1000,
    "WATCH_SECONDS": 12,
    "FIX": {"output_max_bytes": 20300},
    "PREDICTION": REFUSED_ANSWERS[2],   # wrong: under exactly-once the transaction with a failed send cannot commit
}


def check(results):
    assert results["failure_reproduced"] is True, results["verdict"]
    prediction(results, PARAMETERS["PREDICTION"], REFUSED_ANSWERS[1])   # only CONTINUE under at-least-once
    refused = results["refused"]
    assert sorted(refused) == ["continue · EOS v2", "default", "route"], list(refused)
    # the handlers' answer to drop a record: CONTINUE before Kafka Streams 4.2, Response.resume() from 4.2 on
    drop = "RESUME" if parse_version(results["param_handler_version"]) >= (4, 2, 0) else "CONTINUE"
    fail = refused["default"]
    # Kafka's default production handler: FAIL on the broker's RecordTooLargeException; each restart meets it again,
    # and at-least-once sends everything since the last commit again each time.
    assert fail["outcome"].startswith("app stopped") and fail["deaths"] >= 2, fail
    assert any(e.startswith("RecordTooLargeException") for e in fail["errors"]), fail["errors"]
    assert fail["guarantee"] == "at_least_once" and fail["duplicates"] > 0 and fail["poison_lost"], fail
    assert fail["output_bytes"] > PARAMETERS["REFUSE_BYTES"] > PARAMETERS["OUTPUT_MAX_BYTES"], fail
    route = refused["route"]
    # CONTINUE under at-least-once, with a note: only the refused output is missing, and the note names it.
    assert route["outcome"] == "clean: the refused record is noted in its own topic", route
    assert route["deaths"] == 0 and route["uncaught"] == 0 and route["duplicates"] == 0, route
    assert route["lost_ids"] == [route["poison"]] and route["dropped_records"] == 1, route
    [note] = route["dead_letters"]
    assert note["id"] == route["poison"] and note["exception"].endswith("RecordTooLargeException"), note
    assert [r["response"] for r in route["refused"]] == [drop] and route["refused"][0]["id"] == route["poison"]
    assert route["audit"]["counts"]["lost"] == 1 and route["audit"]["counts"]["duplicate"] == 0, route["audit"]
    eos = refused["continue · EOS v2"]
    # The same CONTINUE under exactly-once: the transaction is in an error state, the next send fails, the thread
    # dies, and nothing of the aborted work came out twice. Restarted, it meets the record again, or goes on without
    # the outputs of the failed transaction: either way more is missing than the refused record.
    assert eos["guarantee"] == "exactly_once_v2" and eos["refused"][0]["response"] == drop, eos
    assert eos["outcome"].startswith("app stopped") and eos["uncaught"] >= 1, eos
    assert eos["outcome"] != CARRIED_ON or eos["lost"] > 1, eos
    assert any("in an error state" in w for w in eos["wrappers"]), eos["wrappers"]
    assert eos["duplicates"] == 0 and eos["poison_lost"], eos

    # Kafka's default handler again, the output topic's limit just above the batch that carries the record: clean.
    fixed = results["mitigation"]
    assert fixed["fix"] == {"output_max_bytes": 20300} and fixed["clean"] is True, fixed
    again = fixed["refused"]["default"]
    assert again["outcome"] == "clean" and again["lost"] == 0 and again["deaths"] == 0, again
    assert again["output_bytes"] + 61 < 20300, again

    # the exercise refuses what the notebook shows above it: the value, the topic's limit, the Mitigate cell's
    answers = exercises(results, [1])
    assert sum(case.startswith("printed") for case in results["exercises"]["1"]) >= 3, results["exercises"]["1"]
    assert answers[1] == max(r["output_bytes"] for r in refused.values()) + 61 + 40, answers
