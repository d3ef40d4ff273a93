"""Notebook 06's scenario ("06 · What state costs in production"): SPEC, needs() and run() from lab.experiment.lessons,
one run of the chosen LESSONS on one broker, each its own module: growth (state_growth, section 2), restore
(state_restore, section 3), memory (rocksdb_memory, section 4) and changelog (changelog_api, section 5).
StateResult shows section 1 ("The runs"), each lesson and section 6's audits, and checks the exercises.
"""
from __future__ import annotations

from ...experiment.lessons import Lessons, LessonsResult
from . import changelog_api, rocksdb_memory, state_growth, state_restore


class StateResult(LessonsResult):
    title = "What state costs in production"

    def measured_answer(self):
        """This run's answer to the Predict question (None: the lesson or the asked variant did not run)."""
        if "growth" not in self.outcomes:
            return None
        row = self.lesson("growth").by_kind().get(asked_kind(self.params))
        return None if row is None else row["keys_end"]


SCENARIO = Lessons("state-in-production", {
    "growth": ("1 · state stores don't have TTL", state_growth),
    "restore": ("2 · the restore process", state_restore),
    "memory": ("3 · the memory overhead", rocksdb_memory),
    "changelog": ("4 · changelogs are not an API", changelog_api),
}, apps=("StateGrowthApp", "RestoreApp", "RocksMemoryApp", "ChangelogApp"), result=StateResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run


def asked_kind(p: dict) -> str:
    """The store the Predict question is about: the plain count (no TTL) if it runs."""
    return "kv" if "kv" in p["growth_kinds"] else p["growth_kinds"][0]


def question(p: dict) -> tuple:
    """The Predict step (the first lesson's): a number."""
    return (f"The `{asked_kind(p)}` store gets a key it never saw before with every record, {p['growth_records']:,} "
            f"records {p['growth_step_ms']} ms apart in event time. How many keys does it hold at the end?", None)


def _exercise_1(result: StateResult, answer) -> None:
    """How many keys does the ttl store hold once steady (a new key per record, GROWTH_STEP_MS apart)?"""
    p = result.params
    steady = p["growth_ttl_s"] * 1000 / p["growth_step_ms"]
    assert abs(float(answer) - steady) <= 0.25 * steady, (
        f"{answer} is not about GROWTH_TTL_S / GROWTH_STEP_MS: the keys younger than the TTL")


def _exercise_2(result: StateResult, answer) -> None:
    """At this run's exactly-once restore rate, how many seconds would a 10 GiB changelog take to restore?"""
    rate = result.lesson("restore").rate("eos")["mb_s"]
    if rate is None:
        raise AssertionError("this run restored nothing under eos (a clean shutdown?): run the crash first")
    want = 10 * 1024 / rate
    assert abs(float(answer) - want) <= 0.1 * want, f"{answer} s is not 10240 MB / the measured {rate} MB/s"


StateResult.exercises = {1: _exercise_1, 2: _exercise_2}
