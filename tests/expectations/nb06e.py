"""Lesson 06e, how much disk a store takes ("Tales from running Kafka Streams in Production")."""
import math

from tests.expectations import exercises, prediction

# 30,000 new keys against 512 KB of SST files. Its control is the Mitigate step: a limit of 4 MB, never full.
PARAMETERS = {
    "DISK_RECORDS": 30000,
    "DISK_LIMIT_KB": 512,
    "FIX": {"disk_limit_kb": 4096},
    "PREDICTION": "RocksDB's compaction shrinks the files to make room, and it takes every key",   # wrong
}


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, PARAMETERS["PREDICTION"], "its writes fail and the stream thread dies: the app stops")
    disk = results["disk"]
    # RocksDB's space limit reached: the thread died of it, near the keys the early bytes per key predicted; a
    # restart on the same limit died again; on more space every key fed was in the store.
    assert results["disk_failed"] is True and disk["full"] is True and disk["died"] is True, disk
    assert disk["error"] == "RocksDBException: Max allowed space was reached", disk
    assert disk["restart_died"] is True and disk["restart_error"] == disk["error"], disk
    assert disk["keys_end"] == disk["fed"] == PARAMETERS["DISK_RECORDS"] and disk["lost"] == 0, disk
    assert disk["keys_at_full"] < disk["fed"], disk
    assert abs(disk["predicted_keys_at_full"] - disk["keys_at_full"]) <= 0.25 * disk["keys_at_full"], disk
    # the Mitigate step: the same keys against a limit sized from the arithmetic: never full, every key in
    fixed = results["mitigation"]
    assert fixed["fix"] == {"disk_limit_kb": 4096} and fixed["clean"] is True, fixed
    assert fixed["disk"]["full"] is False and fixed["disk"]["keys_end"] == PARAMETERS["DISK_RECORDS"], fixed["disk"]

    # The exercise, an experiment: the lesson again with half as much again as every key needs at the measured bytes
    # a key; it never filled ("correct"). The lesson's own limit, which filled, was refused before anything ran.
    answers = exercises(results, [1])
    assert answers[1] == math.ceil(1.5 * PARAMETERS["DISK_RECORDS"] * disk["sst_bytes_per_key"] / 1024), answers
    assert "fewer than the 30,000 keys fed" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]
