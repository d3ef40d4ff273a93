"""Lesson 05c, a new state format ("Tales from running Kafka Streams in Production")."""
from lab.scenarios.nb05_exactly_once_under_crashes.answers import SCHEMA_FATES
from tests.expectations import exercises, prediction

# One schema change before 3.9 (the loop), and CONTINUE (3.9+), which the question asks about. Its control is the
# Mitigate step: the tolerant reader (not in the notebook's SCHEMA_MODES: the Mitigate cell introduces it).
PARAMETERS = {
    "SCHEMA_MODES": ["replace_thread", "continue"],
    "RECORDS": 150,
    "COMMIT_INTERVAL_MS": 1000,
    "WATCH_SECONDS": 12,
    "FIX": {"schema_modes": ["tolerant"]},
    "PREDICTION": None,   # the widget's path: no prediction made
}


def check(results):
    assert results["failure_reproduced"] is True, results["verdict"]
    # CONTINUE dropped every input of a key that has old state, not one per key
    prediction(results, None, SCHEMA_FATES[2])
    schema = results["schema"]["replace_thread"]
    # Version 2 cannot read version 1's state (before 3.9, no processing handler): a loop, input stuck.
    assert schema["version"] == "3.8.1", schema
    assert schema["outcome"].startswith("crash loop") and schema["uncaught"] >= 2, schema
    assert any("no field 'total'" in e for e in schema["errors"]), schema["errors"]
    assert schema["lost"] > 0, schema
    dropped = results["schema"]["continue"]
    # KIP-1033's CONTINUE: the app goes on, but a key whose state it cannot read keeps failing, input after input:
    # far more inputs dropped than keys, each counted in dropped-records, none twice.
    assert dropped["version"] == results["param_handler_version"], dropped
    assert dropped["outcome"] == "records dropped" and dropped["deaths"] == 0, dropped
    assert dropped["lost"] > dropped["lost_keys"] > 0 and dropped["dropped_records"] == dropped["lost"], dropped
    assert dropped["duplicates"] == 0, dropped

    # The tolerant reader migrated every key's old state on read: no failure, nothing lost, counts right.
    fixed = results["mitigation"]
    assert fixed["clean"] is True, fixed["verdict"]
    tolerant = fixed["schema"]["tolerant"]
    assert tolerant["outcome"] == "clean" and tolerant["uncaught"] == 0 and tolerant["deaths"] == 0, tolerant
    assert tolerant["migrated"] > 0, tolerant
    assert tolerant["duplicates"] == 0 and tolerant["lost"] == 0, tolerant
    assert tolerant["outputs"] == tolerant["produced"] > 0, tolerant

    # The exercise: how many of version 2's inputs come out under CONTINUE when only 6 of 10 keys have old state (in
    # this run every key had), judged by the rule; the look-up of this run's continue row refused.
    answers = exercises(results, [1])
    assert answers[1] == 160, answers
    assert sum(case.startswith("printed") for case in results["exercises"]["1"]) >= 3, results["exercises"]["1"]
    assert "a count of this run" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]
