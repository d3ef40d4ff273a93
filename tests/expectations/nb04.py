"""Notebook 04: stale reads from a cached store after standby -> active (KAFKA-14624)."""
from tests.expectations import exercises, prediction

# Short steps keep the lesson (the affected release, then the current one, COMPARE_VERSIONS' default) and its Mitigate
# step short; "1 2 3" on 6 tasks still sends a task active -> standby -> active on instance 1 (round-robin over three
# clients). The Mitigate step runs caching off, then 4.3.1 on Kafka 4's streams group protocol (KIP-1071) with its cache
# on; the other fix, a fixed release with caching on, is the CONTROL.
PARAMETERS = {
    "STREAMS_VERSION": "3.3.1",
    "FIX": {"caching": False, "streams_protocol": ["4.3.1"]},
    "PROGRAM": "1 2 3",
    "STEP_SECONDS": 6,
    "SETTLE_SECONDS": 6,
    "PARTITIONS": 6,
    "KEYS": 30,
    "RATE": 50,
    "PREDICTION": "only Kafka Streams 3.3.1",
}

# The control: a fixed version (PR #13369 is in 3.4.1 and 3.5.0) in the affected slot, caching on, the
# same program, alone (COMPARE_VERSIONS empty). No fix to run (FIX empty): the control is the one run, kept short.
CONTROL = {**PARAMETERS, "STREAMS_VERSION": "3.5.2", "COMPARE_VERSIONS": [], "FIX": {}, "PREDICTION": None}

# The panel, clicked in the CONTROL run: the fixed version, 3 s steps, nothing run beside it.
PANEL = {"program": "1 2 3", "step_seconds": 3, "compare": False}
PANEL_FAILS = False


def check(results):
    failing = results["main_counts"]
    # The bug: the affected version with a cached store read stale values, seen by the Spark audit too.
    assert failing["stale_reads"] > 0, f"no stale read on the affected version: {failing}"
    prediction(results, PARAMETERS["PREDICTION"], "only Kafka Streams 3.3.1")
    assert failing["wrong_values"] >= failing["stale_reads"], failing
    assert results["main_audit"]["counts"]["stale_value"] > 0, results["main_audit"]
    assert results["main_audit"]["passed"], results["main_audit"]
    # Exactly-once held: the values are wrong, nothing is lost or duplicated.
    assert failing["missing"] == 0 and failing["duplicates"] == 0, failing
    # The mechanism: the stale value is the instance's own last write, right after a round trip.
    first = results["first_stale"]
    assert first["found"] == first["last_value_this_instance_wrote"], first
    assert first["found"] != first["expected"], first
    assert first["after_round_trip"], first

    # The current release played the same program with its cache on: the same round trip, no stale read.
    assert list(results["compared"]) == ["version 4.3.1"], list(results["compared"])
    current = results["compared"]["version 4.3.1"]
    assert current["caching"] is True and current["round_trips"] > 0, current
    assert current["stale_reads"] == 0 and current["wrong_values"] == 0, current
    assert current["missing"] == 0 and current["duplicates"] == 0, current
    # The Mitigate step: the same program with caching off, alone, clean, and clean for a reason: the same
    # active -> standby -> active movement happened.
    fixed = results["mitigation"]
    assert fixed["fix"] == PARAMETERS["FIX"] and fixed["clean"] is True and fixed["failure_reproduced"] is False, fixed
    assert fixed["param_caching"] is False and fixed["streams_version"] == "3.3.1", fixed
    run = fixed["main_counts"]
    assert run["stale_reads"] == 0 and run["wrong_values"] == 0, run
    assert fixed["main_audit"]["counts"]["stale_value"] == 0 and fixed["main_audit"]["passed"], fixed["main_audit"]
    assert run["missing"] == 0 and run["duplicates"] == 0, run
    assert run["round_trips"] > 0, ("no task came back to an instance: the fix proves nothing", run)
    assert run["produced"] > 0 and run["outputs"] == run["produced"], run
    # On Kafka 4 (its row beside the fix): 4.3.1 on the streams group protocol, the cache on. The broker placed the
    # standbys from the group's config, Kafka Streams said it ignores the app's own num.standby.replicas, and no read
    # went stale, the Spark audit agreeing. (Whether a task made the round trip is recorded, not asserted: the broker's
    # assignor decides it.)
    assert list(fixed["compared"]) == ["version 4.3.1, streams protocol"], list(fixed["compared"])
    kafka4 = fixed["compared"]["version 4.3.1, streams protocol"]
    assert kafka4["protocol"] == "streams" and kafka4["caching"] is True, kafka4
    assert kafka4["standby_tasks"] > 0 and kafka4["standby_setting_ignored"] is True, kafka4
    assert kafka4["stale_reads"] == 0 and kafka4["wrong_values"] == 0, kafka4
    assert kafka4["audit"]["counts"]["stale_value"] == 0 and kafka4["audit"]["passed"], kafka4["audit"]
    assert kafka4["missing"] == 0 and kafka4["duplicates"] == 0 and kafka4["produced"] > 0, kafka4

    # The exercises: each solution passes its check, each tempting wrong answer is refused with a hint.
    answers = exercises(results, [1, 2])
    assert answers == {1: None, 2: 155}, answers   # 1 asks for a function; 2 for the count in its case


def check_control(results):
    failing = results["main_counts"]
    assert results["failure_reproduced"] is False, results["verdict"]
    assert results["streams_version"] == "3.5.2", results["streams_version"]
    prediction(results, None, "none of them")   # 3.5.2 alone: asked about it alone
    # Clean: no read went stale, no value wrong, the Spark audit agrees; exactly-once held.
    assert failing["stale_reads"] == 0 and failing["wrong_values"] == 0 and failing["backwards"] == 0, failing
    assert results["main_audit"]["counts"]["stale_value"] == 0 and results["main_audit"]["passed"], \
        results["main_audit"]
    assert failing["missing"] == 0 and failing["duplicates"] == 0, failing
    assert results["first_stale"] is None, results["first_stale"]
    # And it really tested the conditions: records flowed, and tasks made the same
    # active -> standby -> active round trip on one instance that breaks the affected version.
    assert failing["produced"] > 0 and failing["outputs"] == failing["produced"], failing
    assert failing["round_trips"] > 0, ("no task came back to an instance: the control proves nothing", failing)
    assert results["compared"] == {} and results["mitigation"] is None, results["mitigation"]
    # No stale read: exercise 1's function is judged on the same round trips, and on the histories the mechanism
    # decides; exercise 2's case is judged by the mechanism, whatever the run
    assert exercises(results, [1, 2]) == {1: None, 2: 155}
