"""Notebook 06's "State Stores don't have TTL" lesson (lab/scenarios/nb06_state_in_production/state_growth.py): its refusals, its
arithmetic, and an outcome built from synthetic reports. The live run (three Kafka Streams apps on a real
broker) is the notebook's test."""
import re

import pytest

from lab.errors import LabError
from lab.experiment import Spec
from lab.scenarios.nb06_state_in_production import state_growth
from lab.scenarios.nb06_state_in_production.state_growth import Outcome, expected_bound, segment_interval_ms, summarise, sweep_ms

SPEC = Spec(*state_growth.PARAMS, rules=state_growth.RULES)


@pytest.mark.parametrize("values, message", [
    (dict(growth_kinds=["kv", "kv"]), "twice"),
    (dict(growth_kinds=[]), "GROWTH_KINDS is empty"),
    (dict(growth_kinds=["lru"]), "GROWTH_KINDS"),
    (dict(growth_retention_s=30, growth_window_s=60), "window size"),
    (dict(growth_ttl_s=0), "GROWTH_TTL_S"),
    (dict(growth_records=500_000, growth_step_ms=60_000), "days of event time"),
    (dict(growth_records=10_000_000), "GROWTH_RECORDS"),
    (dict(growth_memtable_kb=1), "GROWTH_MEMTABLE_KB"),
])
def test_what_kafka_or_the_machine_cannot_take_is_refused(values, message):
    with pytest.raises(LabError, match=message):
        SPEC.validate(**values)


def test_a_short_retention_is_fine_when_no_window_store_runs():
    assert SPEC.validate(growth_kinds=["kv", "ttl"], growth_retention_s=30, growth_window_s=60)["growth_kinds"] \
        == ["kv", "ttl"]


def test_a_disk_too_small_is_refused(monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(LabError, match="GiB free"):
        SPEC.validate(growth_records=100_000)


def test_the_segment_and_expiry_arithmetic():
    # Stores.persistentWindowStore: max(retention / 2, 60 s)
    assert segment_interval_ms(300_000) == 150_000 and segment_interval_ms(60_000) == 60_000
    p = SPEC.validate(growth_records=15_000, growth_step_ms=100, growth_retention_s=300, growth_ttl_s=300)
    assert sweep_ms(p) == 60_000
    assert expected_bound(p, "window") == (300_000 + 150_000) // 100 + 1
    assert expected_bound(p, "ttl") == (300_000 + 60_000) // 100 + 1
    assert expected_bound(p, "kv") == 15_000
    # never more than what was fed
    assert expected_bound(SPEC.validate(growth_records=1_000, growth_ttl_s=3600), "ttl") == 1_000


def _reports(kind, keys_of):
    """One report per 1,000 records processed (0 .. 15,000), entries as keys_of(processed) says."""
    return [{"ts": 1000.0 + i, "processed": n, "keys": keys_of(n), "estimate_num_keys": keys_of(n),
             "state_dir_bytes": 30 * keys_of(n), "changelog_bytes": 40 * n, "tombstones": 0, "sweeps": 0}
            for i, n in enumerate(range(0, 15_001, 1_000))]


CONTENTS = {"records_read": 15_000, "tombstones": 0, "live_keys": 15_000}
SERIES = {"kv": _reports("kv", lambda n: n),
          "window": _reports("window", lambda n: min(n, 3_000 + n % 1_500)),
          "ttl": _reports("ttl", lambda n: min(n, 3_000 + n % 600))}


def _outcome(kinds):
    p = SPEC.validate(growth_records=15_000, growth_kinds=kinds)
    rows = [summarise(k, SERIES[k], 15_000, p, [(0, 15_000)], CONTENTS) for k in kinds]
    return Outcome(rows, {k: SERIES[k] for k in kinds}, [(1000.0, 0), (1015.0, 15_000)], p, 1000.0, 1015.0,
                   990.0, 0)


def test_a_store_that_keeps_every_key_is_the_failure():
    out = _outcome(["kv", "window", "ttl"])
    rows = out.by_kind()
    assert rows["kv"]["grows"] and rows["kv"]["gained_per_record"] == 1.0
    assert not rows["window"]["grows"] and not rows["ttl"]["grows"]
    assert out.failed
    assert out.verdict().startswith("kv: grows without bound (15,000 entries for 15,000 new keys)")
    record = out.as_record()
    assert record["growth_failed"] and record["growth"]["kv"]["keys_end"] == 15_000
    assert record["growth_segment_interval_s"] == 150 and record["growth_event_span_s"] == 1_500
    assert "compaction" in out.explain() and len(out.table()) == 3
    assert len(out.figure().data) == 1 + 3 * 4   # keys fed; per kind: entries, estimate, state dir, changelog


def test_the_control_without_kv_is_clean():
    out = _outcome(["window", "ttl"])
    assert not out.failed and "grows without bound" not in out.verdict()


def test_a_kv_store_that_stopped_growing_is_not_called_unbounded():
    p = SPEC.validate(growth_records=15_000, growth_kinds=["kv"])
    flat = _reports("kv", lambda n: min(n, 5_000))
    out = Outcome([summarise("kv", flat, 15_000, p, [], CONTENTS)], {"kv": flat}, [], p, 0.0, 1.0, 0.0, 0)
    assert not out.failed


def _state_result(outcomes, params):
    from lab.experiment import Timeline
    from lab.scenarios.nb06_state_in_production import state_in_production
    return state_in_production.StateResult("state_in_production", params, "run-1", Timeline(0.0), outcomes=outcomes,
                                           titles=dict(state_in_production.SCENARIO.titles))


def test_exercise_1_the_ttl_stores_keys_from_the_arithmetic_and_the_table(capsys):
    from lab.scenarios.nb06_state_in_production.state_in_production import StateResult
    p = SPEC.validate(growth_records=15_000, growth_kinds=["kv", "ttl"])   # TTL 300 s, a key every 100 ms
    swept = [dict(r, keys=min(r["processed"], 3_000 + r["processed"] % 700), tombstones=r["processed"] // 2)
             for r in SERIES["ttl"]]
    rows = [summarise("kv", SERIES["kv"], 15_000, p, [(0, 15_000)], CONTENTS),
            summarise("ttl", swept, 15_000, p, [(0, 15_000)], CONTENTS)]
    r = _state_result({"growth": Outcome(rows, {"kv": SERIES["kv"], "ttl": swept}, [], p, 0.0, 1.0, 0.0, 0)}, p)
    assert r.lesson("growth").by_kind()["ttl"]["keys_end"] == 3_300
    one = StateResult.exercises[1]
    assert one.solution(r) == 3_000 and r.check(1, 3_000) and r.check(1, 3_400)
    assert not r.check(1, None) and "`.solution(1)` on the same result" in capsys.readouterr().out
    for answer, hint in [(one.wrong(r), "GROWTH_TTL_S is in seconds"), (15_000, "every key fed"),
                         (5_000, "not about GROWTH_TTL_S / GROWTH_STEP_MS"), (0, "not about"),
                         (2_300, "held 3,300 keys at the end"),   # within the arithmetic's 25 %, far from the table
                         ("3000", "a number"), ([3_000], "a number")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{re.escape(hint)}"):
            r.check(1, answer)

    # the growth lesson did not run: the check, the solution and the wrong answer ask for it
    missing = _state_result({}, p)
    for attempt in (lambda: missing.check(1, 3_000), lambda: one.solution(missing), lambda: one.wrong(missing)):
        with pytest.raises(LabError, match="not run in this run"):
            attempt()
