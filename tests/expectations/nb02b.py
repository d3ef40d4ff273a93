"""Lesson 02b, an idle Kafka Streams app ("Some kafka retention lessons (we learned the hard way)")."""
from tests.expectations import exercises, prediction

# Ids expire after 5 s, the app idles 8 s under Streams 3.7.0, then 3.8.0 (the notebook's two releases). Its control
# is the Mitigate step: Streams 3.8.0 alone meets the same error and carries on.
PARAMETERS = {"EXPIRATION_MS": 5000, "CLEANUP_INTERVAL_MS": 1000, "IDLE_S": 8, "OBSERVE_S": 40,
              "STREAMS_VERSIONS": ["3.7.0", "3.8.0"], "FIX": {"streams_versions": ["3.8.0"]},
              "PREDICTION": "only 3.7.0"}   # right


def check(r):
    assert r["failure_reproduced"] is True, r["verdict"]
    b = r["part_b"]
    assert b["streams-3.7.0"]["error"] == "InvalidPidMappingException", b["streams-3.7.0"]
    assert b["streams-3.7.0"]["handling"] == "thread died", b["streams-3.7.0"]
    # 3.8.0 in the same run: the same error, its task migrates, the thread carries on
    assert b["streams-3.8.0"]["error"] == "InvalidPidMappingException", b["streams-3.8.0"]
    assert b["streams-3.8.0"]["handling"] == "task migrated" and b["streams-3.8.0"]["recovered"], b["streams-3.8.0"]
    prediction(r, PARAMETERS["PREDICTION"], "only 3.7.0")
    for name, counts in r["part_b_audit"].items():
        assert counts["duplicate"] == 0 and counts["lost"] == 0, (name, counts)
    # The Mitigate step: Kafka Streams 3.8.0 meets the same error, its task migrates and the thread carries on by
    # itself; nothing duplicated or lost.
    streams = r["mitigation"]
    assert streams["fix"] == {"streams_versions": ["3.8.0"]} and streams["clean"] is True, streams["verdict"]
    assert set(streams["part_b"]) == {"streams-3.8.0"}, streams["part_b"]
    s38 = streams["part_b"]["streams-3.8.0"]
    assert s38["error"] == "InvalidPidMappingException" and s38["expired"], s38       # the same error as 3.7.0
    assert s38["handling"] == "task migrated" and s38["recovered"], s38
    assert streams["part_b_audit"]["streams-3.8.0"]["duplicate"] == 0, streams["part_b_audit"]
    assert streams["part_b_audit"]["streams-3.8.0"]["lost"] == 0, streams["part_b_audit"]
    answers = exercises(r, [1])
    assert answers[1] is None, answers
