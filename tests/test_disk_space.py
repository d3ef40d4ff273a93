"""The pure parts of lesson 06e, how much disk a store takes: no broker, no JVM."""
import pytest

from lab.errors import LabError
from lab.scenarios.nb06_state_in_production import disk_space as d

SPEC = d.lesson.spec

T0 = 1_000.0


def report(ts, keys, sst, memtable_keys=1_000):
    return {"ts": T0 + ts, "keys": keys, "total_sst_bytes": sst, "memtable_keys": memtable_keys}


def phase(name, died, keys_end, reports=(), error=d.FULL):
    return {"phase": name, "died": died, "died_after_s": 10.0 if died else None,
            "error": f"RocksDBException: {error}" if died else None, "keys_end": keys_end, "keys_max": keys_end,
            "restored": 0, "reports": list(reports)}


def outcome(full=True, limit_kb=512):
    p = SPEC.validate(disk_limit_kb=limit_kb, disk_records=30_000)
    filling = [report(1, 4_000, 120_000), report(3, 9_000, 262_144), report(5, 15_000, 480_000)]
    if not full:
        return d.Outcome({"full": phase("full", False, 30_000, filling)}, p, 30_000, [], T0, limit_kb * 1024)
    return d.Outcome({"full": phase("full", True, 16_000, filling), "restart": phase("restart", True, None),
                      "more": phase("more", False, 30_000)}, p, 30_000, [], T0, limit_kb * 1024)


def test_the_bytes_per_key_come_from_the_report_nearest_half_the_limit_and_the_keys_flushed():
    # the keys still in the memtables are not in the SST files: 9,000 held, 1,000 of them in memory
    assert d.bytes_per_key([report(1, 4_000, 120_000), report(3, 9_000, 262_144)], 524_288) == (262_144 / 8_000,
                                                                                                 8_000)
    assert d.bytes_per_key([{"keys": None, "total_sst_bytes": None}], 524_288) is None
    # a report without the memtables' count says nothing of the bytes per key
    assert d.bytes_per_key([report(3, 9_000, 262_144, memtable_keys=None)], 524_288) is None


def test_a_full_store_and_its_recovery_are_measured_and_said():
    o = outcome()
    m = o.measured()
    assert o.failed and m["full"] and m["keys_at_full"] == 16_000 and m["lost"] == 0
    assert m["predicted_keys_at_full"] == int(524_288 / (262_144 / 8_000)) and m["restart_died"] is True
    assert "died again" in o.verdict() and "30,000 of 30,000 keys" in o.verdict()
    assert "crash loop" in o.explain() and "Max allowed space was reached" in o.explain()
    assert d.measured_answer(o.as_record(), o.params) == d.STOPS
    control = outcome(full=False, limit_kb=4096)
    assert not control.failed and "never full" in control.verdict()
    # its files never came near the limit: the question (what the app does once they reach it) was not measured
    assert d.measured_answer(control.as_record(), control.params) is None
    assert control.measured()["restart_died"] is None and len(control.table()) == 1
    # a thread that died of something else is not a full store
    other = outcome()
    other.phases["full"]["error"] = "RocksDBException: IO error: No such file or directory"
    assert not other.failed and other.measured()["full"] is False and other.measured()["keys_at_full"] is None
    assert "something other than RocksDB's space limit (RocksDBException: IO error" in other.verdict()
    assert "Died otherwise" in other.explain()


def test_bad_input_is_refused_before_anything_starts():
    with pytest.raises(LabError, match="DISK_MORE_KB=512 is not more than DISK_LIMIT_KB=1024"):
        SPEC.validate(disk_more_kb=512)
    with pytest.raises(LabError, match="DISK_LIMIT_KB"):
        SPEC.validate(disk_limit_kb=1)


def test_the_exercise_a_limit_with_room_to_spare_is_an_experiment(monkeypatch, capsys):
    """The exercise runs the lesson again with the learner's limit; whether the store filled decides. A limit below
    what the keys need at the measured bytes a key, or over twice that, is refused before anything runs."""
    five = d.lesson.exercises[1]
    r = d.lesson.result(outcome(), **outcome().params)
    calls, filled = [], {"full": False}

    def rerun(remember=None, **params):
        assert remember is False   # an exercise's own run is not the one the learner predicted
        calls.append(params)
        again = outcome(full=filled["full"], limit_kb=params["disk_limit_kb"])
        return d.lesson.result(again, run_id="run-2", **again.params)
    monkeypatch.setattr(d.lesson, "run", rerun)
    # 30,000 keys at 32.8 bytes a key need 960.9 KB; half as much again is 1,442 KB
    assert five.solution(r) == 1442 and five.wrong(r) == 512   # the lesson's own limit, which filled
    for answer, hint in [(512, "fewer than the 30,000 keys fed"), (960, "fewer than"), (1922, "more than twice"),
                         (30_000 * 33, "more than twice"), ("1 MB", "as a number"), (0, "fewer than"),
                         ("none", "as a number"), ("", "as a number"), ([], "as a number"),
                         (float("inf"), "finite")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{hint}"):
            five.check(r, answer)
        assert not r.check(1, answer)
    assert calls == []   # refused before anything runs
    # what the notebook shows above the exercise (the limits, the Mitigate cell's 4,096 KB, the bytes a key and the
    # key counts), copied: each refused before anything runs
    copies = five.printed(r)
    assert {512, 8192, 4096, 32.8, 16_000} <= set(copies), copies
    for copied in copies:
        with pytest.raises(AssertionError, match="^Not quite: "):
            five.check(r, copied)
    assert calls == []
    assert f"Closer: {five.closer}" in capsys.readouterr().out and "1442" not in five.closer
    assert r.check(1, 1442)
    assert calls == [{"cluster": None, "disk_limit_kb": 1442, "disk_more_kb": 8192,
                      "disk_records": 30_000, "disk_rate": 2000.0, "disk_memtable_kb": 128}]
    assert "Measured: never full, 30,000 of 30,000 keys in the store" in capsys.readouterr().out
    assert r.check(1, 1441.3) and calls[-1]["disk_limit_kb"] == 1442   # computed KB, rounded up: the limit holding it
    filled["full"] = True   # a run whose store filled all the same: what was measured decides
    with pytest.raises(AssertionError, match="with 1,000 KB the store was full at 16,000 keys"):
        five.check(r, 1000)
    assert calls[-1]["disk_limit_kb"] == 1000 and calls[-1]["disk_more_kb"] == 8192


def test_the_explanation_says_rocksdb_kept_the_flushed_file_and_failed_the_next_writes():
    text = outcome().explain()
    assert "finished that flush and kept its file" in text and "background `SpaceLimit` error" in text
    assert "refused" not in text


def test_the_disk_fix_runs_the_disk_lesson_again():
    p = SPEC.validate()
    fixed = d.lesson.mitigate.check(p, {"disk_limit_kb": 4096})
    assert fixed["disk_limit_kb"] == 4096
    with pytest.raises(LabError, match="already has"):
        d.lesson.mitigate.check(p, {"disk_limit_kb": 1024})
    with pytest.raises(LabError, match="DISK_MORE_KB=8192 is not more than DISK_LIMIT_KB=16384"):
        d.lesson.mitigate.check(p, {"disk_limit_kb": 16384})   # refused with the lesson's own rule, before it starts


def test_the_predict_choices_are_four_distinct_beliefs():
    """Compaction shrinks live data; the store evicts like a cache; the writes fail and the app stops; the limit is
    only a warning; the writes wait, as in a write stall. Nothing in the question does the arithmetic of the bytes a
    key."""
    text, choices = d.question(d.lesson.spec.validate())
    assert "60,000 keys" in text and "1,024 KB" in text and choices == d.ANSWERS and len(set(choices)) == 5
    assert "compaction" in choices[0] and "evicted" in choices[1] and "compaction" not in choices[1]
    assert choices[2] == d.STOPS and "warning" in choices[3] and "falls behind" in choices[4] and "byte" not in text


def test_every_choice_is_an_outcome_the_run_tells_apart():
    """An app alive to the end whose files went past the limit: a warning; whose store lost keys it had held:
    evicted; whose files reached the limit and every key is in: compaction made room; with keys still to come: its
    writes waited."""
    def alive(keys_max, keys_end, sst):
        o = outcome(full=False, limit_kb=512)
        o.phases["full"]["keys_max"], o.phases["full"]["keys_end"] = keys_max, keys_end
        o.phases["full"]["reports"].append(report(7, keys_end, sst))
        return d.measured_answer(o.as_record(), o.params)
    assert alive(30_000, 30_000, 600_000) == d.ANSWERS[3]
    assert alive(20_000, 17_000, 520_000) == d.ANSWERS[1]
    assert alive(30_000, 30_000, 510_000) == d.ANSWERS[0]
    assert alive(25_000, 25_000, 510_000) == d.ANSWERS[4]
    assert alive(30_000, 30_000, 300_000) is None
