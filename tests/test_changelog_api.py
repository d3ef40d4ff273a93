"""Lesson 06d, a downstream reader of a changelog (lab/scenarios/nb06_state_in_production/changelog_api.py): its refusals, its arithmetic, and
an outcome built from measured-looking rows. No JVM, no broker: the live run is the notebook's test."""
from types import SimpleNamespace

import pytest

from lab.errors import LabError
from lab.toolbox import Spec
from lab.scenarios.nb06_state_in_production import changelog_api
from lab.scenarios.nb06_state_in_production.changelog_api import LATE, LIVE, NEW, DownstreamReader, Outcome

SPEC = Spec(*changelog_api.PARAMS, rules=changelog_api.RULES)


@pytest.mark.parametrize("values, message", [
    (dict(changelog_variants=[]), "CHANGELOG_VARIANTS is empty"),
    (dict(changelog_variants=["internal", "internal"]), "twice"),
    (dict(changelog_variants=["internal", "renamed"]), "CHANGELOG_VARIANTS"),
    (dict(changelog_change="flatMap"), "CHANGELOG_CHANGE"),
    (dict(changelog_rate=2000, changelog_phase_s=60), "Spark audit"),
    (dict(changelog_cleaner_backoff_ms=10), "spins"),
    (dict(changelog_dirty_ratio=1.5), "CHANGELOG_DIRTY_RATIO"),
    (dict(changelog_segment_ms=0), "CHANGELOG_SEGMENT_MS"),
    (dict(changelog_partitions=0), "CHANGELOG_PARTITIONS"),
])
def test_bad_parameters_are_refused_before_anything_starts(values, message):
    with pytest.raises(LabError, match=message):
        SPEC.validate(**values)


def test_defaults_and_the_control_are_accepted():
    assert SPEC.validate()["changelog_variants"] == ["internal"]   # the question's run; explicit is the Mitigate step's
    assert SPEC.validate(changelog_variants=["explicit"])["changelog_variants"] == ["explicit"]


def test_the_broker_and_the_changelogs_are_set_for_a_cleaner_within_seconds():
    p = SPEC.validate(changelog_cleaner_backoff_ms=500, changelog_segment_ms=700, changelog_dirty_ratio=0.05)
    assert changelog_api.needs(p) == {"nodes": 1, "broker_config": {"log.cleaner.backoff.ms": 500}}
    assert changelog_api.changelog_config(p) == {"segment.ms": 700, "min.cleanable.dirty.ratio": 0.05,
                                                 "min.compaction.lag.ms": 0}
    assert changelog_api.input_records(SPEC.validate(changelog_rate=10, changelog_phase_s=5)) == 200


def test_a_reader_is_caught_up_when_it_has_read_up_to_every_end_offset():
    reader = object.__new__(DownstreamReader)   # no consumer thread: only its bookkeeping
    reader.rows = [{"partition": 0, "offset": 4}, {"partition": 1, "offset": 0}, {"partition": 0, "offset": 9}]
    assert reader.position() == {0: 10, 1: 1}
    assert reader.caught_up({0: 10, 1: 1}) and not reader.caught_up({0: 10, 1: 2})
    assert reader.caught_up({0: 10, 1: 1, 2: 0})   # an empty partition holds nothing to read


def test_the_broker_cleaner_report_is_quoted_per_topic(tmp_path):
    log = tmp_path / "broker.log"
    log.write_text("[2026-11-24T11:21:15,570] INFO [kafka-log-cleaner-thread-0]: \n"
                   "\tLog cleaner thread 0 cleaned log app-STORE-1-changelog-0 (dirty section = [0, 26])\n"
                   "\t0.0 MB of log processed in 0.6 seconds (0.0 MB/sec).\n"
                   "\tStart size: 0.0 MB (26 messages)\n\tEnd size: 0.0 MB (5 messages)\n"
                   "\t79.1% size reduction (80.8% fewer messages)\n"
                   "\tLog cleaner thread 0 cleaned log other-changelog-0 (dirty section = [0, 9])\n")
    lab = SimpleNamespace(cluster=SimpleNamespace(log_path=lambda: log))
    lines = changelog_api._cleaner_lines(lab, ["app-STORE-1-changelog"])
    assert lines == ["Log cleaner thread 0 cleaned log app-STORE-1-changelog-0 (dirty section = [0, 26]) -> "
                     "Start size: 0.0 MB (26 messages) -> End size: 0.0 MB (5 messages)"]
    assert changelog_api._cleaner_lines(SimpleNamespace(cluster=SimpleNamespace()), ["x"]) == []


def _row(variant, **kw):
    internal = variant == "internal"
    row = {"variant": variant, "change": "mapValues", "downstream_topic": "t-STORE-1-changelog" if internal else "out",
           "store_v1": "STORE-1" if internal else "counts", "store_v2": "STORE-2" if internal else "counts",
           "store_renamed": internal, "changelog_v1": "t-STORE-1-changelog", "changelog_v2": "t-STORE-2-changelog",
           "inputs": 100, "inputs_v1": 50, "inputs_v2": 50, "downstream_written": 50 if internal else 100,
           "live_read": 50 if internal else 100, "live_lost": 0, "live_stale": 0, "live_duplicate": 0,
           "late_read": 50 if internal else 100, "late_lost": 0, "late_stale": 0, "late_duplicate": 0,
           "late_missed_extra": 0, "compacted_away": 0 if internal else None, "cleaner_ran": False if internal else None,
           "cleaner_wait_s": 15.0 if internal else None, "v2_changelog_written": 50 if internal else None,
           "v2_changelog_stale": 50 if internal else None}
    row.update(kw)
    row["missed"] = bool(row["live_lost"] or row["live_stale"] or row["late_lost"] or row["late_stale"])
    return row


def _outcome(rows):
    views = [{"variant": r["variant"], "view": v, "topic": r["downstream_topic"], "read": r["live_read"],
              "written": r["downstream_written"], "duplicate": 0, "lost": r["live_lost"], "stale_value": 0}
             for r in rows for v in (LIVE, LATE)]
    curves = {"input produced": [(1.0, 1), (9.0, 100)], f"{rows[0]['variant']}: {LIVE}": [(2.0, 1), (5.0, 50)]}
    return Outcome(rows, views, curves, 6.0, {"cleaner_lines": [], "unnamed_warning": {}})


def test_the_failure_is_what_the_downstream_reader_missed():
    failing = _outcome([_row("internal", live_lost=50, late_lost=90, late_read=10, compacted_away=40,
                             cleaner_ran=True, late_missed_extra=40), _row("explicit")])
    assert failing.failed
    assert "missed 50 of 100" in failing.verdict() and "40 records compacted away" in failing.verdict()
    assert "explicit: clean" in failing.verdict()
    assert "intermediate values" in failing.explain()
    record = failing.as_record()
    assert all(k.startswith("changelog") for k in record)
    assert record["changelog"]["internal"]["live_lost"] == 50
    assert set(record["changelog_views"]) == {f"{v}/{w}" for v in ("internal", "explicit") for w in (LIVE, LATE)}
    assert len(failing.table()) == 4
    assert failing.figure().layout.template.layout.paper_bgcolor is not None   # plotly_white


def test_the_control_is_clean_only_when_measured_clean():
    assert not _outcome([_row("explicit")]).failed
    assert _outcome([_row("explicit", late_stale=3)]).failed   # a mitigation that misses is not waved through


def test_a_cleaner_that_did_not_run_is_said_so():
    quiet = _outcome([_row("internal", live_lost=50, late_lost=50)])
    assert quiet.failed and "had not run" in quiet.verdict()
    assert "had not compacted" in quiet.explain()


def test_views_are_named_once():
    assert len({LIVE, LATE, NEW}) == 3 and changelog_api.VIEWS == (LIVE, LATE, NEW)


def _state_result(rows):
    return changelog_api.lesson.result(_outcome(rows))


def test_the_predict_question_and_its_answer_follow_the_variant():
    p = SPEC.validate(changelog_variants=["internal", "explicit"])
    assert "internal changelog topic" in changelog_api.question(p)[0]
    # the question says where the topic comes from, not how the store is named (that is the lesson's answer)
    text = changelog_api.question(SPEC.validate())[0]
    assert "`mapValues` step" in text and "named" not in text and "Materialized" not in text
    # the question's run is the internal variant alone; the explicit one is the Mitigate step's fix
    assert changelog_api.lesson.mitigate.check(SPEC.validate(), {"changelog_variants": ["explicit"]})[
        "changelog_variants"] == ["explicit"]
    record = {"changelog": {"internal": _row("internal", live_lost=50), "explicit": _row("explicit")}}
    assert changelog_api.measured_answer(record, p) == "none of them"
    record["changelog"]["internal"]["live_lost"] = 20
    assert changelog_api.measured_answer(record, p) == "some of them"
    explicit = SPEC.validate(changelog_variants=["explicit"])
    assert "output topic" in changelog_api.question(explicit)[0]
    assert changelog_api.measured_answer(record, explicit) == "all of them"


def test_the_exercise_version_3s_changelog_moves_once_more_and_needs_the_moved_store(capsys):
    v1 = "app-KSTREAM-AGGREGATE-STATE-STORE-0000000001-changelog"
    v2 = "app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog"
    # the internal downstream missed version 2's updates: the failure
    r = _state_result([_row("internal", changelog_v1=v1, changelog_v2=v2, live_lost=50), _row("explicit")])
    four = changelog_api.lesson.exercises[1]
    assert r.failed and four.solution(r) == "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"
    assert r.check(1, " " + four.solution(r)) and four.wrong(r) == v2
    for answer, hint in [(v2, "the changelog of version 2"), (v1, "the changelog of version 1"),
                         ("app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog", "moved once more"),
                         ("KSTREAM-AGGREGATE-STATE-STORE-0000000003", "-changelog"), (3, "as a string"),
                         ("none", "-changelog"), ("", "-changelog"), (0, "as a string"), ([], "as a string")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{hint}"):
            four.check(r, answer)
        assert not r.check(1, answer)
    assert f"Closer: {four.closer}" in capsys.readouterr().out and "0000000003" not in four.closer
    # the names shown above the exercise (stores, changelogs, the readers' topics, the Mitigate cell's variant and
    # its named store), copied: each refused
    copies = four.printed(r)
    assert {v1, v2, "STORE-2", "explicit", "counts"} <= set(copies), copies
    for copied in copies:
        with pytest.raises(AssertionError, match="^Not quite: "):
            four.check(r, copied)
    # a named store's changelog does not move: the run did not reproduce the failure, and no answer passes (its
    # own changelog's name neither); the toolbox says why instead of judging
    named = "app-counts-changelog"
    explicit = _state_result([_row("explicit", changelog_v1=named, changelog_v2=named)])
    assert four.needs_failure and not explicit.failed
    for answer in (named, "none", ""):
        checked = explicit.check(1, answer)
        assert not checked and checked.said == "did not reproduce the failure"
    with pytest.raises(LabError, match="internal variant did not run"):
        four.check(explicit, named)
    # an internal store that kept its name has nothing to extrapolate from
    kept = _state_result([_row("internal", changelog_v1=v1, changelog_v2=v1, store_renamed=False, live_lost=50)])
    with pytest.raises(LabError, match="kept its changelog"):
        four.solution(kept)
