"""Lesson 07b, more instances for a busy app ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# 3 instances on 2 partitions, a short window. Its control is the Mitigate step: as many partitions as the most
# instances, every instance busy (a CONTROL run would assert the same). The most instances also run, after the others,
# on the streams group protocol (KIP-1071, group.protocol=streams: the broker assigns the tasks), in both steps.
PARAMETERS = {
    "PAR_PARTITIONS": [2],
    "PAR_INSTANCES": [1, 2, 3],
    "PAR_WORK_MS": 10,
    "PAR_STREAMS_PROTOCOL": [3],
    "PAR_WINDOW_S": 5,
    "FIX": {"par_partitions": [3], "par_streams_protocol": [3]},
    "PREDICTION": 2,   # right: 3 instances on 2 partitions, 2 busy
}


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, PARAMETERS["PREDICTION"], 2)
    par = results["parallelism"]
    # 3 instances on 2 partitions: one has no task and processes nothing in the window; 1 and 2 all work.
    assert par["p2_n3"]["idle_instances"] == 1 and par["p2_n3"]["busy_instances"] == 2, par["p2_n3"]
    assert par["p2_n3"]["idle_processed"] == 0, par["p2_n3"]
    for n in (1, 2):
        assert par[f"p2_n{n}"]["idle_instances"] == 0 and par[f"p2_n{n}"]["busy_instances"] == n, par

    # The same 3 instances on the streams group protocol (KIP-1071), after the others: the broker's assignment still
    # gives a partition one task, so one instance had none and processed nothing.
    streams = results["streams_protocol"]
    assert sorted(streams) == ["p2_n3"] and streams["p2_n3"]["protocol"] == "streams", streams
    assert streams["p2_n3"]["idle_instances"] == 1 and streams["p2_n3"]["busy_instances"] == 2, streams["p2_n3"]
    assert streams["p2_n3"]["idle_processed"] == 0, streams["p2_n3"]

    fixed = results["mitigation"]
    assert fixed["clean"] is True and sorted(fixed["parallelism"]) == ["p3_n1", "p3_n2", "p3_n3"], fixed["verdict"]
    for name, row in fixed["parallelism"].items():
        assert row["idle_instances"] == 0 and row["busy_instances"] == row["instances"], (name, row)
    # and on 3 partitions, on the streams protocol too, every one of the 3 instances busy
    assert sorted(fixed["streams_protocol"]) == ["p3_n3"], fixed.get("streams_protocol")
    row = fixed["streams_protocol"]["p3_n3"]
    assert row["idle_instances"] == 0 and row["busy_instances"] == 3, row

    # The exercise, an experiment on a case the run did not use (20 ms a record, 260 records/s coming in): the lesson
    # on 6 partitions with 6 instances at 20 ms measured at least 260 records/s ("correct"); 5 partitions were refused,
    # short of it, before anything ran, and so was 3, the instances in the table (a copy, tried as `printed`).
    answers = exercises(results, [1])
    assert answers[1] == 6, answers
    assert "short of 260" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]
