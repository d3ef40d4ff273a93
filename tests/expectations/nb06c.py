"""Lesson 06c, RocksDB's memory as the partitions grow ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# 1 and 4 partitions x 2 stores with 24 MB each against a 128 MB bound. Its control is the Mitigate step: the
# bounded config alone, judged by the lesson's own measurement.
PARAMETERS = {
    "MEMORY_PARTITIONS": [1, 4],
    "MEMORY_MB_PER_STORE": 24,
    "FIX": {"memory_configs": ["bounded"]},
    "PREDICTION": "no, it grows past 128 MB",   # right
    "INTERACTIVE": False,
}

# The panel: the lesson, bounded, one partition.
PANEL = {"memory_configs": ["bounded"], "memory_partitions": [1]}
PANEL_FAILS = False


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, PARAMETERS["PREDICTION"], "no, it grows past 128 MB")    # default, 4 partitions
    memory = results["memory_rows"]
    # Kafka's default RocksDB options: native memory grows with partitions x stores, past the bound.
    assert results["memory_failed"] is True and results["memory_default_grows"] is True
    assert results["memory_default_over_bound"], results["memory_default_over_bound"]
    assert memory["default-p4"]["rocksdb_mb"] > results["memory_bound_mb"] > 0, memory["default-p4"]
    assert memory["default-p4"]["rocksdb_mb"] > 1.5 * memory["default-p1"]["rocksdb_mb"], memory
    for name, row in memory.items():
        if name.startswith("bounded"):
            assert row["within_cap"] is True, (name, row)
    assert results["memory_bounded_over_cap"] == []

    fixed = results["mitigation"]
    assert fixed["clean"] is True and fixed["memory_bounded_over_cap"] == [], fixed["verdict"]
    assert all(name.startswith("bounded") and row["within_cap"] for name, row in fixed["memory_rows"].items())

    # The exercise: the partitions whose default store instances fit 2,048 MB.
    answers = exercises(results, [1])
    top = memory["default-p4"]
    assert answers[1] == 2048 // (2 * top["rocksdb_mb"] / top["store_instances"]), (answers, top)
