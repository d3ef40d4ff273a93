"""Lesson 06b, a restart after a crash ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# Changelogs of 2, 4 and 48 MB killed under exactly-once, at-least-once and with a standby. The largest is past
# two memtables (16 MB each): at 8 MB the at-least-once store had never been flushed, so it kept no offset and
# replayed its whole changelog too (4.3.1 keeps the offset inside RocksDB, whose write-ahead log Kafka Streams turns
# off); the question asks about the largest.
PARAMETERS = {
    "RESTORE_SIZES_MB": [2, 4, 48],
    "FIX": {"restore_modes": ["standby"]},
    "PREDICTION": "none of them: their stores are still on local disk",   # wrong: exactly-once wipes after a kill -9
}

# The control: a clean shutdown (the checkpoint is written: nothing to restore), which no Mitigate step runs.
CONTROL = {**PARAMETERS, "RESTORE_SHUTDOWN": "clean", "FIX": {}, "PREDICTION": None}


def no_restore(runs):
    for run in runs:
        assert not run["wiped"] and not run["full_restore"], run
        assert run["restored_records"] <= 0.1 * run["store_records"], run


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, PARAMETERS["PREDICTION"], "only the exactly-once app")
    assert results["restore_failed"] is True and results["restore_wiped"] is True
    assert "EOS" in results["restore_wipe_line"], results["restore_wipe_line"]
    runs = results["restore_runs"]
    eos = [r for r in runs if r["mode"] == "eos"]
    # Exactly-once: a kill -9 at each size wipes the store, and the whole changelog is replayed from offset 0.
    assert [r["size_mb"] for r in eos] == PARAMETERS["RESTORE_SIZES_MB"], eos
    for r in eos:
        assert r["wiped"] and r["full_restore"] and r["restore_from"] == 0, r
        assert r["restored_records"] >= 0.9 * r["store_records"] > 0, r
    assert eos[0]["restored_records"] < eos[1]["restored_records"] < eos[2]["restored_records"], eos
    # At-least-once never wipes, and past a memtable replays only a tail; the standby takes over without replaying
    # the store.
    assert all(not r["wiped"] and not r["full_restore"] for r in runs if r["mode"] == "alos"), runs
    standby = [r for r in runs if r["mode"] == "standby"]
    assert standby and all(not r["full_restore"] and r["restored_records"] <= 0.1 * r["store_records"]
                           for r in standby), standby

    fixed = results["mitigation"]
    assert fixed["clean"] is True and fixed["restore_failed"] is False, fixed["verdict"]
    assert fixed["restore_runs"] and all(r["mode"] == "standby" for r in fixed["restore_runs"]), fixed["restore_runs"]
    no_restore(fixed["restore_runs"])

    # The exercise: six 8 GiB stores on one thread at the largest exactly-once restore's rate.
    answers = exercises(results, [1])
    assert answers[1] == round(6 * 8 * 1024 / results["restore_rate"]["eos"]["mb_s"], 1), answers


def check_control(results):
    assert results["failure_reproduced"] is False
    prediction(results, None, "none of them: their stores are still on local disk")   # a clean shutdown
    assert results["restore_failed"] is False and results["restore_wiped"] is False
    assert results["restore_shutdown"] == "clean"
    no_restore(results["restore_runs"])
    assert results["mitigation"] is None
    # The exercise needs the failure: a clean shutdown replays nothing and measures no restore rate, so the check
    # says so and judges no answer, 0 and "none" neither; its solution says why there is none.
    tried = results["exercises"]["1"]
    assert tried["none"] == "not answered", tried
    trivial = [said for case, said in tried.items() if case.startswith("trivial")]
    assert trivial and all(said == "did not reproduce the failure" for said in trivial), tried
    assert "replayed no changelog" in tried["right"] and "replayed no changelog" in tried["answer"], tried
