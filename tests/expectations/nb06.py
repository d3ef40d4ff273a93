"""Notebook 06: what state costs in production: stores without TTL, the restore after a crash, RocksDB memory,
changelogs that are not an API, a disk that fills ("Tales from running Kafka Streams in Production")."""
import math

from tests.expectations import exercises, prediction

# Every lesson, small: 15,000 new keys (25 min of stream time) against a 5 min retention and TTL; changelogs of
# 2, 4 and 8 MB killed under exactly-once; 1 and 4 partitions x 2 stores with 24 MB each against a 128 MB bound;
# two versions of the counting app, 2 s of input each; 30,000 new keys against 512 KB of SST files.
PARAMETERS = {
    "LESSONS": ["growth", "restore", "memory", "changelog", "disk"],
    "GROWTH_RECORDS": 15000,
    "GROWTH_RATE": 1000,
    "RESTORE_SIZES_MB": [2, 4, 8],
    "MEMORY_PARTITIONS": [1, 4],
    "MEMORY_MB_PER_STORE": 24,
    "CHANGELOG_PHASE_S": 2,
    "DISK_RECORDS": 30000,
    "DISK_LIMIT_KB": 512,
    # each lesson's Mitigate step, the notebook's own fixes: a TTL of 120 s alone, a standby replica, the bounded
    # config, the explicit store and topic, a limit of 4 MB. Each is that lesson's control: it runs the setting in
    # which the failure does not happen, judged by the lesson's own measurement.
    "FIX_GROWTH": {"growth_kinds": ["ttl"], "growth_ttl_s": 120},
    "FIX_RESTORE": {"restore_modes": ["standby"]},
    "FIX_MEMORY": {"memory_configs": ["bounded"]},
    "FIX_CHANGELOG": {"changelog_variants": ["explicit"]},
    "FIX_DISK": {"disk_limit_kb": 4096},
    # every key kept (right), a restore from the checkpoint (wrong: exactly-once wipes after a kill -9), memory
    # past the bound (right), none for the changelog (the widget's path)
    "PREDICTIONS": {"growth": 15000, "restore": "only what its checkpoint does not cover",
                    "memory": "no, it grows past 128 MB", "disk": "yes: RocksDB compacts its files to make room"},
    "INTERACTIVE": False,
}

# The control: a clean shutdown (the checkpoint is written: nothing to restore), the one clean setting that no
# Mitigate step runs; every other lesson's clean setting is its Mitigate step in the failure run. Left out here,
# those sections and their Mitigate steps say that they did not run.
# The other fixes stay given: a Mitigate step of a lesson that did not run runs nothing.
CONTROL = {**PARAMETERS, "LESSONS": ["restore"], "RESTORE_SHUTDOWN": "clean", "FIX_RESTORE": {}, "PREDICTIONS": {}}

# The panel, clicked in the CONTROL run: the memory lesson, bounded, one partition.
PANEL = {"lessons": ["memory"], "memory_configs": ["bounded"], "memory_partitions": [1]}
PANEL_FAILS = False


def _bounded_stores(growth, kinds=("window", "ttl")):
    for kind in kinds:
        row = growth[kind]
        # Flat: gained less than half an entry per record over the feed's second half, far under the keys fed.
        assert row["grows"] is False and row["keys_end"] < 0.5 * row["processed"], (kind, row)
        assert row["keys_max"] <= 1.1 * row["expected_bound"], (kind, row)
        if kind == "ttl":
            assert row["tombstones_written"] > 0 and row["sweeps"] > 0, row


def _no_restore(runs):
    for run in runs:
        assert not run["wiped"] and not run["full_restore"], run
        assert run["restored_records"] <= 0.1 * run["store_records"], run


def _clean_views(views, variant):
    for name, view in views.items():
        if name.startswith(f"{variant}/"):
            assert view["lost"] == 0 and view["stale_value"] == 0 and view["duplicate"] == 0, (name, view)
            assert view["read"] == view["written"] > 0, (name, view)


def check(results):
    assert results["failure_reproduced"] is True
    assert results["lessons"] == PARAMETERS["LESSONS"]
    # each lesson's Predict step. Growth, a number: the kv store's keys at the end, within a quarter of it
    given, predicted = PARAMETERS["PREDICTIONS"], results["predictions"]
    assert predicted["growth"]["prediction"] == 15000, predicted["growth"]
    assert predicted["growth"]["prediction_measured"] == results["growth"]["kv"]["keys_end"], predicted["growth"]
    assert predicted["growth"]["prediction_right"] is True, results["growth"]["kv"]
    prediction(results, given["restore"], "the whole changelog, from its first offset", "restore")
    prediction(results, given["memory"], "no, it grows past 128 MB", "memory")    # default, 4 partitions
    prediction(results, None, "none of them", "changelog")     # the internal changelog's live reader
    prediction(results, given["disk"], "no: it stops when its store is full", "disk")

    growth = results["growth"]
    kv = growth["kv"]
    # The key-value store kept every key it was fed and was still gaining one per record at the end.
    assert results["growth_failed"] is True and kv["grows"] is True, kv
    assert kv["processed"] == kv["fed"] == PARAMETERS["GROWTH_RECORDS"], kv
    assert kv["keys_end"] == kv["processed"] and kv["changelog_live_keys"] == kv["processed"], kv
    _bounded_stores(growth)
    assert growth["ttl"]["changelog_live_keys"] < 0.5 * kv["changelog_live_keys"], growth["ttl"]

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
    # At-least-once never wipes; the standby takes over without replaying the store.
    assert all(not r["wiped"] for r in runs if r["mode"] == "alos"), runs
    standby = [r for r in runs if r["mode"] == "standby"]
    assert standby and all(not r["full_restore"] and r["restored_records"] <= 0.1 * r["store_records"]
                           for r in standby), standby

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

    rows = results["changelog"]
    internal = rows["internal"]
    # A harmless change renamed the store and its changelog: the downstream of the old one missed version 2.
    assert internal["store_renamed"] is True and internal["changelog_v1"] != internal["changelog_v2"], internal
    assert internal["inputs_v2"] > 0 and internal["live_lost"] >= internal["inputs_v2"] > 0, internal
    # The late reader of the compacted changelog misses the intermediate values too.
    assert internal["late_lost"] > internal["live_lost"] and internal["cleaner_ran"] is True, internal
    assert rows["explicit"]["store_renamed"] is False, rows["explicit"]
    _clean_views(results["changelog_views"], "explicit")

    # The exercises, tried on this run: the longest TTL whose store stays under 1,000 keys at the 100 ms step (80 s,
    # run on the cluster and judged by the peak it measured; the tempting 100 s measured over it), 10 GiB at the
    # largest exactly-once restore's rate, the partitions whose default store instances fit 2,048 MB, and version 3's
    # changelog: version 2's with the store's number one up.
    disk = results["disk"]
    # RocksDB's space limit reached: the thread died of it, near the keys the early bytes per key predicted; a
    # restart on the same limit died again; on more space every key fed was in the store.
    assert results["disk_failed"] is True and disk["full"] is True, disk
    assert disk["error"] == "RocksDBException: Max allowed space was reached", disk
    assert disk["restart_died"] is True and disk["restart_error"] == disk["error"], disk
    assert disk["keys_end"] == disk["fed"] == PARAMETERS["DISK_RECORDS"] and disk["lost"] == 0, disk
    assert disk["keys_at_full"] < disk["fed"], disk
    assert abs(disk["predicted_keys_at_full"] - disk["keys_at_full"]) <= 0.25 * disk["keys_at_full"], disk
    fixed = results["mitigation_disk"]
    # the Mitigate step: the same keys against a limit sized from the arithmetic: never full, every key in
    assert fixed["fix"] == {"disk_limit_kb": 4096} and fixed["clean"] is True, fixed
    assert fixed["disk"]["full"] is False and fixed["disk"]["keys_end"] == PARAMETERS["DISK_RECORDS"], fixed["disk"]

    _mitigations(results)

    answers = exercises(results, [1, 2, 3, 4, 5])
    # Exercise 5's experiment: the disk lesson again with half as much again as every key needs at the measured bytes
    # a key; it never filled ("correct"). The lesson's own limit, which filled, was refused before anything ran.
    assert answers[5] == math.ceil(1.5 * PARAMETERS["DISK_RECORDS"] * disk["sst_bytes_per_key"] / 1024), answers
    assert "fewer than the 30,000 keys fed" in results["exercises"]["5"]["wrong"], results["exercises"]["5"]
    assert answers[1] == 80, answers
    assert answers[2] == round(10 * 1024 / results["restore_rate"]["eos"]["mb_s"], 1), answers
    top = memory["default-p4"]
    assert answers[3] == 2048 // (2 * top["rocksdb_mb"] / top["store_instances"]), (answers, top)
    v2 = internal["changelog_v2"]
    number = int(v2[-len("0000000002-changelog"):-len("-changelog")])
    assert answers[4] == f"{v2[:-len('0000000002-changelog')]}{number + 1:010d}-changelog", (answers, v2)


def _mitigations(results):
    # The other Mitigate steps, each clean by its lesson's own measurement.
    fixed = results["mitigation_growth"]
    assert fixed["clean"] is True and fixed["growth_failed"] is False, fixed["verdict"]
    assert list(fixed["growth"]) == ["ttl"] and fixed["param_growth_ttl_s"] == 120, list(fixed["growth"])
    _bounded_stores(fixed["growth"], kinds=("ttl",))
    # a TTL of 120 s keeps fewer keys than the lesson's 300 s
    assert fixed["growth"]["ttl"]["keys_max"] < results["growth"]["ttl"]["keys_max"], fixed["growth"]["ttl"]
    fixed = results["mitigation_restore"]
    assert fixed["clean"] is True and fixed["restore_failed"] is False, fixed["verdict"]
    runs = fixed["restore_runs"]
    assert runs and all(r["mode"] == "standby" for r in runs), runs
    _no_restore(runs)
    fixed = results["mitigation_memory"]
    assert fixed["clean"] is True and fixed["memory_bounded_over_cap"] == [], fixed["verdict"]
    assert all(name.startswith("bounded") and row["within_cap"] for name, row in fixed["memory_rows"].items())
    fixed = results["mitigation_changelog"]
    assert fixed["clean"] is True and list(fixed["changelog"]) == ["explicit"], fixed["verdict"]
    assert fixed["changelog"]["explicit"]["store_renamed"] is False
    _clean_views(fixed["changelog_views"], "explicit")


def check_control(results):
    assert results["failure_reproduced"] is False and results["lessons"] == ["restore"], results["lessons"]
    # no prediction given; what the question measured
    prediction(results, None, "only what its checkpoint does not cover", "restore")   # a clean shutdown
    assert results["restore_failed"] is False and results["restore_wiped"] is False
    assert results["restore_shutdown"] == "clean"
    _no_restore(results["restore_runs"])
    # no Mitigate step ran: FIX_RESTORE is empty, and the other lessons did not run
    for lesson in ("growth", "restore", "memory", "changelog", "disk"):
        assert results[f"mitigation_{lesson}"] is None, lesson
    # The exercises: a clean shutdown replays nothing, so a 10 GiB changelog costs 0 s; the others ask for their
    # lessons to run first.
    answers = exercises(results, [1, 2, 3, 4, 5], not_run=(1, 3, 4, 5))
    assert answers[2] == 0, answers
