"""Lesson 07b, more instances for a busy app ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# 3 instances on 2 partitions, a short window. Its control is the Mitigate step: as many partitions as the most
# instances, every instance busy (a CONTROL run would assert the same).
PARAMETERS = {
    "PAR_PARTITIONS": [2],
    "PAR_INSTANCES": [1, 2, 3],
    "PAR_WORK_MS": 10,
    "PAR_WINDOW_S": 5,
    "FIX": {"par_partitions": [3]},
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

    fixed = results["mitigation"]
    assert fixed["clean"] is True and sorted(fixed["parallelism"]) == ["p3_n1", "p3_n2", "p3_n3"], fixed["verdict"]
    for name, row in fixed["parallelism"].items():
        assert row["idle_instances"] == 0 and row["busy_instances"] == row["instances"], (name, row)

    # The exercise, an experiment on a case the run did not use (20 ms a record, 260 records/s coming in): the lesson
    # on 6 partitions with 6 instances at 20 ms measured at least 260 records/s ("correct"); 5 partitions were refused,
    # short of it, before anything ran, and so was 3, the instances in the table (a copy, tried as `printed`).
    answers = exercises(results, [1])
    assert answers[1] == 6, answers
    assert "short of 260" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]
