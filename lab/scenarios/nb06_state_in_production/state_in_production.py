"""Notebook 06's scenario ("06 · What state costs in production"), on lab.experiment.lessons: five lessons, each
its own module and its own notebook section: growth (state_growth, section 1), restore (state_restore, section
2), memory (rocksdb_memory, section 3), changelog (changelog_api, section 4) and disk (disk_space, section 5). The
notebook runs each alone (run_lesson) on one broker; StateResult shows a lesson and checks the exercises.
"""
from __future__ import annotations

import math
import re

from ...errors import LabError
from ...experiment.lessons import Lessons, LessonsResult
from ...experiment.result import Exercise, count, expect, number
from . import changelog_api, disk_space, rocksdb_memory, state_growth, state_restore


class StateResult(LessonsResult):
    title = "What state costs in production"


SCENARIO = Lessons("state-in-production", {
    "growth": ("1 · state stores don't have TTL", state_growth),
    "restore": ("2 · the restore process", state_restore),
    "memory": ("3 · the memory overhead", rocksdb_memory),
    "changelog": ("4 · changelogs are not an API", changelog_api),
    "disk": ("5 · don't forget the disk space", disk_space),
}, apps=("StateGrowthApp", "RestoreApp", "RocksMemoryApp", "ChangelogApp"), result=StateResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run
predict, run_lesson, together = SCENARIO.predict, SCENARIO.run_lesson, SCENARIO.together
# Each lesson's Mitigate step: the lesson again with the learner's setting (FIX_<LESSON>) over the notebook's: a
# store kind that forgets, standby replicas, the bounded RocksDB config, an explicit store and output topic, a limit
# sized from the arithmetic.
mitigate_growth = SCENARIO.mitigate("growth")
mitigate_restore = SCENARIO.mitigate("restore")
mitigate_memory = SCENARIO.mitigate("memory")
mitigate_changelog = SCENARIO.mitigate("changelog")
mitigate_disk = SCENARIO.mitigate("disk")


# ---------------------------------------------------------------- the exercises

TTL_BUDGET_KEYS = 1_000   # exercise 1: the keys the ttl store may hold at most
# The punctuator runs between batches of records, so a few keys past its time come in before it: the solution keeps
# 3 % of the budget for them (this lab measured 0 and 1 at 1,000 records/s)
TTL_ROOM = 0.97


def _ttl_peak_keys(p: dict, ttl_s: int) -> int:
    """What the mechanism predicts the ttl store peaks at, just before a sweep: the keys younger than the TTL and
    those that came since the last sweep (every TTL / 5), one per GROWTH_STEP_MS of stream time."""
    return state_growth.expected_bound({**p, "growth_ttl_s": ttl_s, "growth_records": 10**12}, "ttl")


def _longest_ttl_s(result: StateResult) -> int:
    """Exercise 1: the longest TTL (whole seconds) whose store never holds more than TTL_BUDGET_KEYS keys, with room
    for the keys that come in before a sweep runs."""
    result.lesson("growth").by_kind()   # a lesson that did not run asks to be run first (LabError)
    p = result.params
    ttl_s = TTL_BUDGET_KEYS * p["growth_step_ms"] // 1000
    while ttl_s >= 1 and _ttl_peak_keys(p, ttl_s) > TTL_ROOM * TTL_BUDGET_KEYS:
        ttl_s -= 1
    if ttl_s < 1:
        raise LabError(f"with GROWTH_STEP_MS={p['growth_step_ms']} even a 1 s TTL keeps more than "
                       f"{TTL_BUDGET_KEYS:,} keys: this exercise needs GROWTH_STEP_MS of 2 ms or more")
    return ttl_s


def _ttl_without_the_sweep(result: StateResult) -> int:
    """A tempting wrong answer to exercise 1: the budget's keys at one per step, as if the punctuator deleted every
    key the moment it got old (the count just after a sweep)."""
    result.lesson("growth").by_kind()
    return TTL_BUDGET_KEYS * result.params["growth_step_ms"] // 1000


def _check_longest_ttl(result: StateResult, answer) -> None:
    """An experiment: the ttl store runs again with the learner's TTL, fed long enough to reach its peak a few
    times, and the most keys it measured decides."""
    right, p = _longest_ttl_s(result), result.params
    given = count(answer, "whole seconds")
    step = p["growth_step_ms"]
    expect(_ttl_peak_keys(p, given) <= 3 * TTL_BUDGET_KEYS, f"a TTL of {given} s keeps the keys of {given} s of "
           f"stream time, {given * 1000 // step:,} of them at one per {step} ms: far over {TTL_BUDGET_KEYS:,}, no "
           "need to run that")
    expect(given >= 0.8 * right, f"a TTL of {given} s keeps the store well under {TTL_BUDGET_KEYS:,} keys: the "
           "question is the longest TTL, and a shorter one forgets keys the app could still use")
    sweep = max(1, given * 1000 // state_growth.SWEEPS_PER_TTL)
    records = max(1_000, (given * 1000 + 4 * sweep) // step + 200)   # past the TTL, then four sweeps
    cluster = result.running_cluster()
    print(f"Exercise 1: running the ttl store with GROWTH_TTL_S = {given}, {records:,} new keys {step} ms apart, "
          + ("on the notebook's cluster ..." if cluster else "on a broker of its own ..."))
    again = SCENARIO.run(cluster=cluster, lessons=["growth"], growth_kinds=["ttl"], growth_ttl_s=given,
                         growth_records=records, growth_rate=p["growth_rate"], growth_step_ms=step,
                         growth_memtable_kb=p["growth_memtable_kb"])
    growth = again.lesson("growth")
    peak, row = growth.ttl_peak(), growth.by_kind()["ttl"]
    print(f"Measured: at most {peak:,} keys (just before a sweep), {row['keys_end']:,} at the end, "
          f"{row['tombstones_written']:,} deleted by {row['sweeps']} sweeps.")
    expect(peak <= TTL_BUDGET_KEYS, f"with GROWTH_TTL_S = {given} the `ttl` store held up to {peak:,} keys, just "
           "before a sweep: the keys younger than the TTL, and those that came since the last sweep (the punctuator "
           "runs every TTL / 5)")


def _restore_10gib_s(result: StateResult) -> float:
    """Exercise 2: seconds to restore 10 GiB at this run's exactly-once restore rate; 0 when its exactly-once
    restarts replayed nothing (a clean shutdown: the checkpoint was written)."""
    restore = result.lesson("restore")
    eos = restore.of("eos")
    if not eos:
        raise LabError(f"this run has no exactly-once restart (RESTORE_MODES={result.params['restore_modes']}): "
                       "add 'eos' to RESTORE_MODES and run again")
    if not any(r["wiped"] or r["full_restore"] for r in eos):
        return 0
    rate = restore.rate("eos")["mb_s"]
    if not rate:
        raise LabError("this run's exactly-once restore was not timed (no restore end in the app's log): run again")
    return round(10 * 1024 / rate, 1)


def _check_restore_10gib_s(result: StateResult, answer) -> None:
    given, right = number(answer, "the seconds"), _restore_10gib_s(result)
    if right == 0:
        expect(abs(given) <= 0.5, "this run's exactly-once restarts replayed nothing (after a clean shutdown the "
               "checkpoint tells Kafka Streams the store is up to date): no changelog is restored, 0 s")
        return
    rate = result.lesson("restore").rate("eos")["mb_s"]
    expect(abs(given * 1024 - right) > 0.1 * right, "10 GiB is 10,240 MB, not 10")
    expect(abs(given * 60 - right) > 0.1 * right, "in seconds, not minutes")
    expect(abs(given - right) <= 0.1 * right, f"{given:g} s is not 10,240 MB / the measured {rate} MB/s")


BUDGET_MB = 2048   # exercise 3: the RocksDB memory a container leaves to the app
STORE_NAME_SUFFIX = f"{changelog_api.STORE_NAME}-changelog"   # the explicit variant's changelog ends so
STORE_NUMBER = re.compile(r"STATE-STORE-(\d{10})-changelog$")    # an auto-generated store's changelog


def _default_per_instance_mb(result: StateResult) -> float:
    """RocksDB memory per store instance of the default config at its most partitions (the memory table's
    `rocksdb_mb / store_instances`)."""
    rows = [r for r in result.lesson("memory").rows if r["config"] == "default"]
    if not rows:
        raise LabError(f"Kafka's default RocksDB options were not run in this run (MEMORY_CONFIGS="
                       f"{result.params['memory_configs']}): add 'default' and run the lesson again")
    top = max(rows, key=lambda r: r["store_instances"])
    return top["rocksdb_mb"] / top["store_instances"]


def _partitions_in_budget(result: StateResult) -> int:
    """Exercise 3: the most partitions whose store instances fit BUDGET_MB at the measured memory per instance."""
    return int(BUDGET_MB // (result.params["memory_stores"] * _default_per_instance_mb(result)))


def _check_partitions_in_budget(result: StateResult, answer) -> None:
    given, right = count(answer, "partitions"), _partitions_in_budget(result)
    if abs(given - right) <= max(1, 0.1 * right):
        return
    per_instance, stores = _default_per_instance_mb(result), result.params["memory_stores"]
    expect(abs(given - BUDGET_MB // per_instance) > max(1, 0.1 * right),
           f"each partition opens one instance of every store: {stores} of them, each about {per_instance:.0f} MB")
    expect(False, f"{given} partitions x {stores} stores x {per_instance:.1f} MB is "
           f"{given * stores * per_instance:,.0f} MB, not about {BUDGET_MB:,} MB")


def _changelog_row(result: StateResult) -> dict:
    """The changelog lesson's row exercise 4 is about: the internal variant if it ran."""
    rows = result.lesson("changelog").rows
    return next((r for r in rows if r["variant"] == "internal"), rows[0])


def _changelog_v3(result: StateResult) -> str:
    """Exercise 4: the changelog a version 3 with one more step before the aggregation would write to: the
    auto-generated store's number one up from version 2's; a named store's changelog does not move."""
    row = _changelog_row(result)
    numbered = STORE_NUMBER.search(row["changelog_v2"])
    if not row["store_renamed"] or numbered is None:
        return row["changelog_v2"]
    return STORE_NUMBER.sub(f"STATE-STORE-{int(numbered.group(1)) + 1:010d}-changelog", row["changelog_v2"])


def _check_changelog_v3(result: StateResult, answer) -> None:
    expect(isinstance(answer, str), "give the topic's name as a string")
    row, given = _changelog_row(result), answer.strip()
    if given == _changelog_v3(result):
        return
    expect(given.endswith("-changelog"), "a store's changelog topic is `<application.id>-<store name>-changelog`")
    expect(given not in (row["changelog_v1"], row["changelog_v2"]), "that is the changelog of version "
           f"{1 if given == row['changelog_v1'] else 2}: version 3's added step takes a number of the topology's "
           "too, and the auto-generated store name takes the next one")
    expect(row["store_renamed"], "this variant's store has a name of its own (`Materialized.as`): its changelog "
           "does not move")
    expect(False, f"{given!r} is not version 2's changelog with the store's number moved once more")


def _changelog_v3_wrong(result: StateResult) -> str:
    """A tempting wrong answer to exercise 4: version 2's changelog, as if nothing moved again; for the explicit
    variant, a numbered name, as if its store were auto-named."""
    row = _changelog_row(result)
    if row["store_renamed"]:
        return row["changelog_v2"]
    return row["changelog_v2"].replace(STORE_NAME_SUFFIX, "KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog")


def _disk(result: StateResult) -> dict:
    disk = result.lesson("disk").measured()
    if disk["sst_bytes_per_key"] is None:
        raise LabError("the disk lesson's store never reported its SST files: run the lesson again")
    return disk


def _needed_kb(result: StateResult) -> float:
    """The SST files that every key fed needs, in KB, at the bytes per key the lesson measured."""
    return result.params["disk_records"] * _disk(result)["sst_bytes_per_key"] / 1024


def _headroom_limit_kb(result: StateResult) -> int:
    """Exercise 5: a limit that holds every key fed with half as much again to spare."""
    return math.ceil(1.5 * _needed_kb(result))


def _check_limit_kb(result: StateResult, answer) -> None:
    """An experiment: the disk lesson runs again with the learner's limit, fed the same keys; whether the store
    filled decides."""
    need, p, per_key = _needed_kb(result), result.params, _disk(result)["sst_bytes_per_key"]
    given = count(answer, "KB")
    expect(given >= need, f"{given:,} KB of SST files hold about {int(given * 1024 / per_key):,} keys at the {per_key} "
           f"bytes a key this run measured: fewer than the {p['disk_records']:,} keys fed (and a limit is in KB: "
           "1,024 bytes)")
    expect(given <= 2 * need, f"{given:,} KB would do, but it is more than twice the {need:,.0f} KB that the keys "
           "need: the question is a limit with room to spare, not a disk that sits mostly empty")
    cluster = result.running_cluster()
    print(f"Exercise 5: running the disk lesson with DISK_LIMIT_KB = {given:,}, {p['disk_records']:,} new keys, "
          + ("on the notebook's cluster ..." if cluster else "on a broker of its own ..."))
    again = SCENARIO.run(cluster=cluster, lessons=["disk"], disk_limit_kb=given,
                         disk_more_kb=max(p["disk_more_kb"], 2 * given), disk_records=p["disk_records"],
                         disk_rate=p["disk_rate"], disk_memtable_kb=p["disk_memtable_kb"])
    m = again.lesson("disk").measured()
    if m["full"]:
        expect(False, f"with {given:,} KB the store was full at {m['keys_at_full']:,} keys ({m['sst_bytes_per_key']} "
               "bytes a key in this run): leave more room than the bytes a key measured once, they vary from run "
               "to run")
    expect((m["keys_end"] or 0) >= m["fed"], f"the store never filled, yet it held {m['keys_end']} of {m['fed']} "
           f"keys at the end: {again.lesson('disk').verdict()}")
    print(f"Measured: never full, {m['keys_end']:,} of {m['fed']:,} keys in the store, {m['sst_bytes_per_key']} "
          "bytes a key.")


StateResult.exercises = {
    1: Exercise(
        check=_check_longest_ttl,
        solution=_longest_ttl_s,
        why="Every record brings a new key, `GROWTH_STEP_MS` later in stream time, and the punctuator deletes the "
            "keys older than the TTL, but only when it runs: every TTL / 5 of stream time. Just before a sweep the "
            "store holds the keys younger than the TTL and those that came since the last sweep: (TTL + TTL / 5) / "
            f"GROWTH_STEP_MS, 1.2 x TTL / step. Under {TTL_BUDGET_KEYS:,} keys: TTL <= {TTL_BUDGET_KEYS:,} x "
            "step / 1.2, in whole seconds, less a little: the punctuator runs between batches of records, so a few "
            "keys past its time come in before it (this solution keeps 3 % of the budget for them; the lab measured "
            "one or none at 1,000 records/s). TTL / step alone is the count just after a sweep, and the store goes "
            "a fifth past it before the next.",
        wrong=_ttl_without_the_sweep,
    ),
    2: Exercise(
        check=_check_restore_10gib_s,
        solution=_restore_10gib_s,
        why="Under exactly-once a crash leaves the store without a valid checkpoint, so Kafka Streams wipes it and "
            "replays the whole changelog from offset 0: the restore time is the changelog's size divided by the "
            "restore rate, and it grows with the size alone. The `restore` table gives the rate of the largest "
            "exactly-once restore (`restore_mb_s`, MB/s): 10,240 MB divided by it is the seconds the instance "
            "stays down restoring. After a clean shutdown the checkpoint is written and nothing is replayed: then "
            "the answer is 0.",
        # 10 GiB read as 10 MB; when nothing was replayed, the time back to processing taken for a restore
        wrong=lambda r: _restore_10gib_s(r) / 1024 if _restore_10gib_s(r) else max(
            r.lesson("restore").of("eos")[-1]["down_s"], 1.0),
    ),
    3: Exercise(
        check=_check_partitions_in_budget,
        solution=_partitions_in_budget,
        why="With Kafka's default options every store instance has its own block cache and write buffers, and "
            "there is one instance per store per partition (per task). The memory table gives the default "
            f"config's RocksDB memory and its `store_instances`: divided, the memory of one instance. {BUDGET_MB:,} MB "
            "divided by (`MEMORY_STORES` x that) is the most partitions the app can take on; one more and it goes "
            "past. Measured at this lesson's fill (`MEMORY_MB_PER_STORE`): more data per store, or reads that keep "
            "coming, move each instance towards the 98 MB of cache and write buffers Kafka gives it, and index and "
            "filter blocks come on top of that. The bounded config shares one cache instead, "
            "so its memory stays near `MEMORY_BOUND_MB` however many partitions.",
        wrong=lambda r: int(BUDGET_MB // _default_per_instance_mb(r)),   # one store per partition, not MEMORY_STORES
    ),
    4: Exercise(
        check=_check_changelog_v3,
        solution=_changelog_v3,
        why="Kafka Streams numbers the nodes of a topology in the order they are built, and an auto-generated store "
            "name takes the next number of the same counter (`KSTREAM-AGGREGATE-STATE-STORE-<number>`). A step "
            "inserted before the aggregation takes a number, so the store's number moves up by one, and with it "
            "the changelog topic, `<application.id>-<store name>-changelog`: version 2 writes to a new topic, and "
            "a downstream reader of the old one reads nothing new. Version 3 adds one more step in front: one "
            "number more again, from version 2's. With a store named by `Materialized.as`, nothing moves: the "
            "explicit variant's changelog keeps its name in every version.",
        wrong=_changelog_v3_wrong,
    ),
    5: Exercise(
        check=_check_limit_kb,
        solution=_headroom_limit_kb,
        why="A store without a TTL keeps every key it ever saw, so its SST files grow by about the same number of "
            "bytes with every new key: the `sst_bytes_per_key` the lesson measured while the store filled (the key, "
            "its value and RocksDB's own framing). Every key fed needs `DISK_RECORDS x sst_bytes_per_key` bytes, "
            "divided by 1,024 for KB. This solution keeps half as much again to spare: the bytes per key vary a "
            "little from run to run, and the keys still in the memtable reach the files at the next flush. The "
            "same arithmetic sizes a production volume: its bytes divided by the bytes a key and by the new keys "
            "a second is how long it lasts. The changelog on the brokers grows beside it, and compaction keeps "
            "every key too. Watch the state directory's size, or give the store a TTL (lesson 1).",
        wrong=lambda r: min(r.params["disk_limit_kb"], math.floor(_needed_kb(r)) - 1),   # the limit that filled
    ),
}
