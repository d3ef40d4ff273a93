"""Notebook 06's scenario ("06 · What state costs in production"): SPEC, needs() and run() from lab.experiment.lessons,
one run of the chosen LESSONS on one broker, each its own module: growth (state_growth, section 2), restore
(state_restore, section 3), memory (rocksdb_memory, section 4) and changelog (changelog_api, section 5).
StateResult shows section 1 ("The runs"), each lesson and section 6's audits, and checks the exercises.
"""
from __future__ import annotations


from ...errors import LabError
from ...experiment.lessons import Lessons, LessonsResult
from ...experiment.result import Exercise, expect, number
from . import changelog_api, rocksdb_memory, state_growth, state_restore


class StateResult(LessonsResult):
    title = "What state costs in production"


SCENARIO = Lessons("state-in-production", {
    "growth": ("1 · state stores don't have TTL", state_growth),
    "restore": ("2 · the restore process", state_restore),
    "memory": ("3 · the memory overhead", rocksdb_memory),
    "changelog": ("4 · changelogs are not an API", changelog_api),
}, apps=("StateGrowthApp", "RestoreApp", "RocksMemoryApp", "ChangelogApp"), result=StateResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run
predict, run_lesson, together = SCENARIO.predict, SCENARIO.run_lesson, SCENARIO.together


# ---------------------------------------------------------------- the exercises

def _ttl_steady_keys(result: StateResult) -> float:
    """Exercise 1: the keys younger than the TTL, one per GROWTH_STEP_MS of stream time (the growth lesson's)."""
    result.lesson("growth").by_kind()   # a lesson that did not run asks to be run first (LabError)
    p = result.params
    return p["growth_ttl_s"] * 1000 / p["growth_step_ms"]


def _ttl_measured(result: StateResult) -> dict | None:
    """The ttl store's row once it was steady (it ran, its sweeps deleted keys, it stopped growing), else None."""
    row = result.lesson("growth").by_kind().get("ttl")
    return row if row and row["tombstones_written"] and not row["grows"] else None


def _check_ttl_steady_keys(result: StateResult, answer) -> None:
    given, steady, p = number(answer, "a number of keys"), _ttl_steady_keys(result), result.params
    expect(given != p["growth_records"] or abs(given - steady) <= 0.25 * steady,
           "that is every key fed, what the `kv` store keeps: the `ttl` store deletes the keys older than "
           "GROWTH_TTL_S")
    expect(abs(given * 1000 - steady) > 0.25 * steady, "GROWTH_TTL_S is in seconds and GROWTH_STEP_MS in "
           "milliseconds: convert one of them")
    expect(abs(given - steady) <= 0.25 * steady,
           f"{given:g} is not about GROWTH_TTL_S / GROWTH_STEP_MS: the keys younger than the TTL, one per step")
    row = _ttl_measured(result)
    if row is not None:   # between two sweeps the store holds up to a fifth more: within 30 % (and a key) of it
        expect(abs(given - row["keys_end"]) <= 0.3 * row["keys_end"] + 1,
               f"the `ttl` store of this run held {row['keys_end']:,} keys at the end (the growth table's "
               "`keys_end`): your number should be close to it")


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


StateResult.exercises = {
    1: Exercise(
        check=_check_ttl_steady_keys,
        solution=_ttl_steady_keys,
        why="Every record brings a new key, `GROWTH_STEP_MS` later in stream time, and the `ttl` store's "
            "punctuator deletes the keys not updated for `GROWTH_TTL_S`. Once stream time has passed the TTL, the "
            "keys left are those younger than it: `GROWTH_TTL_S * 1000 / GROWTH_STEP_MS`. Between two sweeps "
            "(every TTL / 5 of stream time) up to a fifth more pile up, so the `ttl` row of the growth table "
            "(`keys_end`, `keys_max`) sits between that number and a fifth above it.",
        wrong=lambda r: _ttl_steady_keys(r) / 1000,   # GROWTH_TTL_S / GROWTH_STEP_MS: seconds over milliseconds
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
}
