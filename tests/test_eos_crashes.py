"""The pure parts of chapter 05's lessons (05a to 05d): no broker, no JVM."""
import re

import pytest

from lab.errors import LabError
from lab.toolbox import checks
from lab.toolbox import Timeline
from lab.scenarios.nb05_exactly_once_under_crashes import analysis, crash_points, exception_handlers, production_errors
from lab.scenarios.nb05_exactly_once_under_crashes import schema_change, streams_app
from lab.scenarios.nb05_exactly_once_under_crashes.answers import (
    CARRIED_ON, DUPLICATE_ANSWERS, FATES, HANDLER_ANSWERS, REFUSED_ANSWERS, SCHEMA_FATES, fate, handler_answer,
    output_answer, refused_answer, schema_answer)
from lab.scenarios.nb05_exactly_once_under_crashes.report import Crash, EosCrashResult, Failing

CRASHES, HANDLERS, SCHEMA, REFUSED = (m.lesson for m in (crash_points, exception_handlers, schema_change,
                                                         production_errors))

T0 = 1_000.0


@pytest.fixture
def no_maven(monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)   # no jars, no compiler here


def lab(kind, ts, incarnation=1, **fields):
    """One app evidence line, as EosCrashApp logs it through log4j."""
    body = "".join(f',"{k}":{v}' if isinstance(v, (int, float)) else f',"{k}":"{v}"' for k, v in fields.items())
    return (f'[2026-11-23 12:00:00,000] INFO [main] LAB {{"kind":"{kind}","ts":{ts:.3f},'
            f'"incarnation":{incarnation}{body}}} (EosCrashApp)')


def test_defaults_and_the_control_validate(no_maven):
    p = CRASHES.spec.validate()
    assert p["crash_points"] == ["before_read", "during_processing", "after_send_before_commit", "after_commit"]
    assert CRASHES.spec.validate(crash_points=["none"])["crash_points"] == ["none"]
    assert SCHEMA.spec.validate(schema_modes=["tolerant"])["schema_modes"] == ["tolerant"]


@pytest.mark.parametrize("lesson, params, message", [
    (CRASHES, dict(crash_points=["after_ack"]), "CRASH_POINTS"),
    (CRASHES, dict(guarantees=["exactly_once"]), "GUARANTEES"),
    (HANDLERS, dict(handlers=["retry"]), "HANDLERS"),
    (SCHEMA, dict(schema_modes=["ignore"]), "SCHEMA_MODES"),
    (CRASHES, dict(crash_points=["none", "none"]), "twice"),
    (CRASHES, dict(commit_interval_ms=20000), "COMMIT_INTERVAL_MS"),
    (HANDLERS, dict(records=0), "RECORDS"),
    (CRASHES, dict(crash_points=[]), "Nothing to run: give CRASH_POINTS and GUARANTEES"),
    (HANDLERS, dict(handlers=[]), "Nothing to run: give HANDLERS"),
    (REFUSED, dict(production_handlers=[], other_guarantee_handlers=[]), "PRODUCTION_HANDLERS or OTHER_GUARANTEE_HANDLERS"),
    (CRASHES, dict(streams_version="2.8.2"), "STREAMS_VERSION.*older"),
    (CRASHES, dict(streams_version="four"), "STREAMS_VERSION"),
    (CRASHES, dict(crash_point=["none"]), "did you mean"),
])
def test_bad_input_is_refused_before_anything_starts(no_maven, lesson, params, message):
    with pytest.raises(LabError, match=message):
        lesson.spec.validate(**params)


def test_kip_1033_continue_needs_3_9(no_maven):
    with pytest.raises(LabError, match="KIP-1033.*3.9.0"):
        HANDLERS.spec.validate(handlers=["continue"], handler_version="3.8.1")
    with pytest.raises(LabError, match="SCHEMA_MODES"):
        SCHEMA.spec.validate(schema_modes=["continue"], handler_version="3.8.1")
    # without 'continue', an old handler version is a valid experiment
    assert HANDLERS.spec.validate(handlers=["replace_thread"], handler_version="3.8.1")
    assert SCHEMA.spec.validate(schema_modes=["tolerant"], handler_version="3.8.1")
    assert HANDLERS.spec.validate(handlers=["continue"], handler_version="3.9.0")["handler_version"] == "3.9.0"


def test_the_dead_letter_topic_needs_4_2_and_is_configured_with_continue(no_maven):
    with pytest.raises(LabError, match="KIP-1034.*4.2.0"):
        HANDLERS.spec.validate(handlers=["dead_letter"], handler_version="3.9.0")
    props = exception_handlers.handler_props("dead_letter", "4.3.1", "app-5", "app")
    assert props["errors.dead.letter.queue.topic.name"] == "app-dlq" and props["lab_poison_id"] == "app-5"
    assert props["processing.exception.handler"].endswith("LogAndContinueProcessingExceptionHandler")


def test_an_unknown_version_is_refused_when_maven_has_none(monkeypatch):
    def missing(version):
        raise LabError(f"Maven Central has no artifact org.apache.kafka:kafka-streams:jar:{version}.")
    monkeypatch.setattr(checks, "build_streams_program", lambda version, *a, **k: missing(version))
    with pytest.raises(LabError, match=r"STREAMS_VERSION='3.8.99'.*no artifact"):
        CRASHES.spec.validate(streams_version="3.8.99")


def test_handler_configuration_follows_the_version():
    assert exception_handlers.handler_props("continue", "4.3.1", "p-1") == {
        "lab_handler": "shutdown_client", "lab_poison_id": "p-1", "processing.exception.handler": streams_app.CONTINUE_HANDLER}
    assert exception_handlers.handler_props("replace_thread", "3.8.1", "p-1")["lab_handler"] == "replace_thread"
    assert exception_handlers.handler_props("deserialization", "4.3.1", "p")["deserialization.exception.handler"] == streams_app.DESER_CONTINUE
    assert exception_handlers.handler_props("deserialization", "3.8.1", "p")["default.deserialization.exception.handler"] == \
        streams_app.DESER_CONTINUE
    versions = {"handler_version": "4.3.1", "schema_streams_version": "3.8.1"}
    assert schema_change.schema_version("continue", versions) == "4.3.1"
    assert schema_change.schema_version("replace_thread", versions) == "3.8.1"


def test_the_app_is_compiled_with_the_response_handlers_from_4_2_on():
    # Kafka Streams 4.2 answers a production error with a Response and deprecates the enum: the handlers in that
    # form are compiled (and configured) from 4.2 on only, the enum form before
    assert streams_app.sources("4.1.1") == streams_app.SOURCES
    assert streams_app.sources("4.2.0") == streams_app.SOURCES + ["EosCrashResponses.java"]
    assert production_errors.handler_class("continue", "4.3.1") == "EosCrashResponses$ContinueTooLarge"
    assert production_errors.handler_class("route", "4.1.1") == "EosCrashHandlers$RouteTooLarge"


def produced(n, keys=2, prefix="r-"):
    rows, count = [], {}
    for i in range(n):
        k = f"k{i % keys}"
        count[k] = count.get(k, 0) + 1
        rows.append({"id": f"{prefix}{i}", "key": k, "true_value": count[k]})
    return rows


def out(ids_values, partition=0):
    return [{"id": i, "key": k, "value": v, "partition": partition, "offset": o, "kafka_ts": T0 + o}
            for o, (i, k, v) in enumerate(ids_values)]


def test_measure_exact_output_is_clean():
    truth = produced(4)
    committed = out([(r["id"], r["key"], r["true_value"]) for r in truth])
    counts = [{"key": r["key"], "count": r["true_value"], "partition": 0, "offset": o} for o, r in enumerate(truth)]
    m = analysis.measure(truth, committed, committed, counts)
    assert (m["duplicates"], m["lost"], m["wrong_values"], m["overcount"], m["undercount"], m["aborted_visible"]) == \
        (0, 0, 0, 0, 0, 0)


def test_measure_at_least_once_replay_duplicates_and_overcounts():
    truth = produced(4)   # k0: r-0, r-2; k1: r-1, r-3
    # r-2 and r-3 were processed, the app died before the commit and processed them again on top of the state
    committed = out([("r-0", "k0", 1), ("r-1", "k1", 1), ("r-2", "k0", 2), ("r-3", "k1", 2),
                     ("r-2", "k0", 3), ("r-3", "k1", 3)])
    counts = [{"key": "k0", "count": 3, "partition": 0, "offset": 0}, {"key": "k1", "count": 3, "partition": 0,
                                                                        "offset": 1}]
    m = analysis.measure(truth, committed, committed, counts)
    assert m["duplicates"] == 2 and m["lost"] == 0 and m["overcount"] == 2 and m["wrong_values"] == 2


def test_measure_exactly_once_aborted_records_only_read_uncommitted_sees():
    truth = produced(3)
    committed = out([("r-0", "k0", 1), ("r-1", "k1", 1), ("r-2", "k0", 2)])
    # offsets 3, 4 belong to the killed transaction (aborted); read_committed skips them
    uncommitted = committed + [{"id": "r-2", "key": "k0", "value": 2, "partition": 0, "offset": 3, "kafka_ts": T0 + 3},
                               {"id": "r-1", "key": "k1", "value": 1, "partition": 1, "offset": 0, "kafka_ts": T0 + 4}]
    counts = [{"key": "k0", "count": 2, "partition": 0, "offset": 0}, {"key": "k1", "count": 1, "partition": 0,
                                                                        "offset": 1}]
    m = analysis.measure(truth, committed, uncommitted, counts)
    assert m["duplicates"] == 0 and m["aborted_visible"] == 2 and m["aborted_ids"] == ["r-1", "r-2"]
    assert (m["aborted_first_ts"], m["aborted_last_ts"]) == (T0 + 3, T0 + 4)


def test_measure_lost_records_are_named():
    truth = produced(12)
    committed = out([(r["id"], r["key"], r["true_value"]) for r in truth if r["id"] not in ("r-10", "r-2")])
    m = analysis.measure(truth, committed, committed, [])
    assert m["lost"] == 2 and m["lost_ids"] == ["r-2", "r-10"]
    assert m["undercount"] == 12   # no count update at all


def test_app_events_by_incarnation():
    log = "\n".join([
        lab("state", T0 + 1, to="RUNNING"), lab("commit", T0 + 2, total=1, processed=40),
        lab("crash", T0 + 3, point="after_send_before_commit", processed=61, acked=60), "cut LAB {\"kind\":",
        lab("state", T0 + 6, 2, to="REBALANCING"),
        lab("restore_start", T0 + 6.5, 2, partition=0, start=0, end=30),
        lab("restore_start", T0 + 6.6, 2, partition=1, start=0, end=31),
        lab("restore_end", T0 + 7.0, 2, partition=0, restored=30), lab("restore_end", T0 + 7.5, 2, partition=1,
                                                                        restored=31),
        lab("state", T0 + 8, 2, to="RUNNING"), lab("metrics", T0 + 9, 2, dropped_records=1),
        lab("uncaught", T0 + 10, 2, n=1, response="REPLACE_THREAD", error="IllegalStateException: poison")])
    ev = analysis.app_events(log)
    assert ev["crash"]["point"] == "after_send_before_commit" and ev["crash"]["acked"] == 60
    assert ev["running"] == {1: T0 + 1, 2: T0 + 8}
    assert ev["restores"][2] == {"start": T0 + 6.5, "end": T0 + 7.5, "restored": 61}
    assert ev["dropped_records"] == 1 and len(ev["uncaught"]) == 1 and len(ev["commits"]) == 1


def test_loop_rate():
    assert analysis.loop_rate([T0]) is None
    assert analysis.loop_rate([T0, T0 + 6, T0 + 12]) == 10.0


def crash(point, guarantee, **m):
    base = {"crashed": point != "none", "crash": {"processed": 61, "acked": 60}, "duplicates": 0, "lost": 0,
            "overcount": 0, "undercount": 0, "aborted_visible": 0, "outputs": 10, "produced": 10, "restored": 0,
            "restore_s": None, "state_wiped": False}
    return Crash(f"{point} · {streams_app.SHORT[guarantee]}", point, guarantee, "4.3.1", "app", None, [], {**base, **m}, "",
                   Timeline(T0))


def result(crashes=(), handlers=()):
    return EosCrashResult("eos_crashes", {}, "run", Timeline(T0), crashes={c.label: c for c in crashes},
                          handlers={f.label: f for f in handlers})


def lesson_result(lesson, outcome, **params):
    """A lesson's result around an outcome made here (its exercises judge it)."""
    return lesson.result(outcome, **params)


def test_verdict_branches():
    eos = crash("after_send_before_commit", "exactly_once_v2", aborted_visible=41, state_wiped=True, restored=60,
                restore_s=0.5)
    alos = crash("after_send_before_commit", "at_least_once", duplicates=12, overcount=12)
    clean_alos = crash("after_commit", "at_least_once")
    assert "aborted" in eos.why() and "wiped" in eos.why() and eos.anomalies == 0
    assert "processed them again" in alos.why() and "over-count by 12" in alos.why()
    assert "nothing was in flight" in clean_alos.why()
    assert "control" in crash("none", "exactly_once_v2").why()
    assert "never reached" in crash("after_commit", "exactly_once_v2", crashed=False).why()
    r = result([eos, alos, clean_alos])
    assert r.failed and "12 duplicate(s)" in r.verdict() and "41 aborted" in r.verdict()
    assert not result([crash("none", "exactly_once_v2"), crash("none", "at_least_once")]).failed


def failing(label, **m):
    base = {"uncaught": 0, "responses": [], "deaths": 0, "lost": 0}
    return Failing(label, "app", "4.3.1", None, [], {**base, **m}, {}, Timeline(T0))


def test_failing_outcomes():
    assert failing("h", uncaught=5, responses=["REPLACE_THREAD"]).outcome == "crash loop (threads replaced)"
    assert failing("h", deaths=1).outcome == "app stopped"
    assert failing("h", deaths=3).outcome == "app stopped (restarted, died again)"
    # stopped once, restarted, and every input came out with no error in the last incarnation: it carried on
    assert failing("h", deaths=1, restarts=1, carried_on=True).outcome == CARRIED_ON
    assert failing("h", deaths=2, restarts=2, carried_on=True).outcome == "app stopped (restarted, died again)"
    assert failing("h", lost=1).outcome == "records dropped"
    assert failing("h").outcome == "clean"
    assert result(handlers=[failing("h", lost=1)]).failed
    # the one input missing from the output is in the dead-letter topic: nothing lost, and not a failure
    letters = [{"id": "app-5", "exception": "java.lang.IllegalStateException", "message": "poison", "from": "t-0@5"}]
    kept = failing("h", lost=1, lost_all={"app-5"}, dead_letters=letters)
    assert kept.outcome == "clean: the poison record is in the dead-letter topic"
    assert not result(handlers=[kept]).failed
    assert failing("h", lost=2, lost_all={"app-5", "app-6"}, dead_letters=letters).outcome == "records dropped"


def crashes_result(crashes):
    return lesson_result(CRASHES, result(crashes))


def test_the_crash_exercise_is_judged_by_the_rule_at_settings_the_run_did_not_use(no_maven, capsys):
    one = CRASHES.exercises[1]
    alos = crash("before_read", "at_least_once", duplicates=44, overcount=44, restored=79)
    r = lesson_result(CRASHES, result([alos, crash("after_commit", "at_least_once"),
                                       crash("before_read", "exactly_once_v2", aborted_visible=7)]), rate=50)
    assert one.solution(r) == 240 and r.check(1, 240) and r.check(1, 236.5)   # 200 records/s for 1.2 s, about
    # the run's own rows read by the same rule: 44 twice at 50 records/s, 0.88 s after a commit
    assert "at 50 records/s, at-least-once wrote 44 inputs twice: by the same rule its halts came about 0.88 s " \
           "after a commit" in capsys.readouterr().out
    assert not r.check(1, None) and "`lesson.solution(1)`" in capsys.readouterr().out
    for answer, hint in [(one.wrong(r), "44 is what this run wrote twice"),
                         (1000, "a whole commit interval's worth"), (240_000, "mind the units"),
                         (1200, "mind the units"), (120, "not what the app processed"),
                         (0, "visible as soon as it is sent"), ("none", "a number"), ("", "a number"), ([], "a number")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{re.escape(hint)}"):
            one.check(r, answer)
    copied = one.printed(r)
    assert {44, 79, 7, 50} <= set(copied) and not any(r.check(1, a) for a in copied)   # the table, the parameters
    assert not r.check(1, one.wrong(r)) and "Closer:" in capsys.readouterr().out   # a second wrong answer
    shown = []
    r.solution(1, display=shown.append)
    assert "200 × 1.2 = 240" in shown[0].data
    assert not any(ch.isdigit() for ch in one.closer)
    # a run with no at-least-once crash: the same rule, the look-up a whole interval
    control = lesson_result(CRASHES, result([crash("none", "exactly_once_v2")]))
    assert control.check(1, 240) and one.wrong(control) == 1000 and not control.check(1, 1000)


def test_the_mechanism_evidence_says_when_there_is_none():
    assert "control" in result([crash("none", "exactly_once_v2")]).evidence()
    r = result([crash("during_processing", "exactly_once_v2", aborted_visible=3)])
    assert "no broker log" in r.evidence() and "during_processing · EOS v2" in r.evidence()


def marked(point, guarantee, markers, **m):
    """A crash run with the broker's markers counted the way run() counts them."""
    from lab.toolbox.markers import around
    c = crash(point, guarantee, producer_ids=[126], downtime_s=None, **m)
    c.markers = markers
    c.m.update(around(markers, {126}, c.m["crash"]["ts"] if c.m["crashed"] else None))
    return c


def marker(kind, ts, records, partition=0, offset=0):
    return {"topic": "out", "partition": partition, "offset": offset, "producer_id": 126, "producer_epoch": 1,
            "marker": kind, "timestamp": ts, "records": records}


def test_the_markers_explain_the_exactly_once_crash():
    at = T0 + 5
    eos = marked("during_processing", "exactly_once_v2", [marker("COMMIT", at - 1, 40), marker("ABORT", at + 2, 7)],
                 crash={"ts": at, "processed": 61}, aborted_visible=7)
    alos = marked("during_processing", "at_least_once", [], crash={"ts": at, "processed": 61}, duplicates=3)
    summary = eos.summary()
    assert (summary["commits_before"], summary["aborts_after"], summary["aborted_by_markers"]) == (1, 1, 7)
    assert summary["first_abort_after_s"] == 2.0 and summary["producer_ids"] == [126]
    assert "1 ABORT marker(s) for producer 126 2.0 s after the halt, closing 7 record(s)" in eos.why()
    r = result([eos, alos])
    assert r.marker_lines(eos.label) == ["-1.00 s COMMIT marker, partition 0 offset 0: producer 126 epoch 1, "
                                         "closes 40 record(s)",
                                         "+2.00 s ABORT marker, partition 0 offset 0: producer 126 epoch 1, "
                                         "closes 7 record(s)"]
    assert "+2.00 s ABORT marker" in r.evidence()
    r.params = {"streams_version": "4.3.1"}
    record = r.record_fields()
    assert record["eos_aborts_after"] == 1 and record["alos_markers"] == 0
    assert r.table()["ABORT markers after crash"].tolist() == [1, 0]


def test_markers_not_read_stay_unknown():
    # an external cluster: no log segments, so no count (None), never a 0 that looks measured
    r = result([crash("during_processing", "exactly_once_v2"), crash("during_processing", "at_least_once")])
    r.params = {"streams_version": "4.3.1"}
    assert r.record_fields()["eos_aborts_after"] is None and r.record_fields()["alos_markers"] is None
    assert r.crashes["during_processing · EOS v2"].summary()["aborts_after"] is None


def test_each_lesson_has_its_question_and_the_run_answers_it(no_maven):
    p = HANDLERS.spec.validate()
    guess = HANDLERS.predict(p, HANDLER_ANSWERS[2], show=False)
    assert "REPLACE_THREAD" in guess.question and guess.choices == HANDLER_ANSWERS
    assert "every attempt" not in guess.question and "dead" not in guess.question
    with pytest.raises(LabError, match="not one of the answers"):
        CRASHES.predict(CRASHES.spec.validate(), "x")
    def recorded(runs):   # what a run records of each of its runs, as far as the answer reads it
        return {k: {"outcome": f.outcome} for k, f in runs.items()}
    # a thread replaced into the same record and an app restarted into it: neither got past it; CONTINUE did
    runs = {"shutdown_client": failing("handler shutdown_client", deaths=3),
            "replace_thread": failing("handler replace_thread", uncaught=4, responses=["REPLACE_THREAD"]),
            "continue": failing("handler continue", lost=1)}
    assert handler_answer({"handlers": recorded(runs)}, p) == HANDLER_ANSWERS[1] == "only continue"
    runs["shutdown_client"] = failing("handler shutdown_client", deaths=1, carried_on=True)   # had it carried on
    assert handler_answer({"handlers": recorded(runs)}, p) == "shutdown_client and continue"
    del runs["continue"]   # not all three ran: the question was not measured
    assert handler_answer({"handlers": recorded(runs)}, p) is None
    assert handler_answer({"handlers": {"deserialization": {"outcome": "clean"}}}, p) is None

    # 05a: the at-least-once points that wrote duplicates, once all four ran and crashed
    alos = {pt: crash(pt, "at_least_once", duplicates=3 if pt != "after_commit" else 0)
            for pt in ("before_read", "during_processing", "after_send_before_commit", "after_commit")}
    eos = crash("after_send_before_commit", "exactly_once_v2", aborted_visible=5)
    def crashes(runs):
        return {"crashes": {c.label: c.summary() for c in runs}}
    cp = CRASHES.spec.validate()
    assert output_answer(crashes([*alos.values(), eos]), cp) == DUPLICATE_ANSWERS[3]
    alos["before_read"] = crash("before_read", "at_least_once")
    assert output_answer(crashes(alos.values()), cp) == "during_processing and after_send_before_commit"
    assert output_answer(crashes([alos["before_read"], eos]), cp) is None   # not all four points ran
    assert output_answer({"crashes": {}}, cp) is None   # no crash ran: the crash question was not measured
    alos["after_commit"] = crash("after_commit", "at_least_once", crashed=False)
    assert output_answer(crashes(alos.values()), cp) is None   # a point never reached proves nothing
    assert "at_least_once" in CRASHES.predict(cp, show=False).question

    # 05c: CONTINUE's dropped inputs against their keys
    sp = SCHEMA.spec.validate()
    assert SCHEMA.predict(sp, show=False).choices == SCHEMA_FATES and "CONTINUE" in SCHEMA.predict(sp, show=False).question
    def schema(**m):
        return {"schema": {"continue": {"outcome": failing("schema continue", **m).outcome, "lost": m.get("lost", 0),
                                        "lost_keys": m.get("lost_keys", 0), "wrong_values": m.get("wrong_values", 0)}}}
    assert schema_answer(schema(lost=112, lost_keys=10), sp) == SCHEMA_FATES[2]
    assert schema_answer(schema(lost=10, lost_keys=10), sp) == SCHEMA_FATES[1]
    assert schema_answer(schema(uncaught=3, responses=["REPLACE_THREAD"]), sp) == SCHEMA_FATES[0]
    assert schema_answer(schema(wrong_values=40), sp) == SCHEMA_FATES[3]
    assert schema_answer(schema(), sp) == SCHEMA_FATES[4]
    assert schema_answer({"schema": {"replace_thread": {"outcome": "crash loop (threads replaced)"}}}, sp) is None

    assert [fate(o) for o in ("crash loop (threads replaced)", "app stopped (restarted, died again)", CARRIED_ON,
                              "records dropped", "clean: the poison record is in the dead-letter topic",
                              "clean")] == [FATES[0], *FATES]
    assert fate("clean", dropped=1) == FATES[2]   # the deserialization handler skipped its input on purpose
    for choices in (DUPLICATE_ANSWERS, HANDLER_ANSWERS, SCHEMA_FATES, REFUSED_ANSWERS):   # distinct choices
        assert len(set(choices)) == len(choices) >= 4


def test_the_handler_exercise_is_judged_on_what_ran_then_on_the_malformed_input(no_maven, capsys):
    three = HANDLERS.exercises[1]
    runs = {"shutdown_client": failing("handler shutdown_client", deaths=3),
            "replace_thread": failing("handler replace_thread", uncaught=3, responses=["REPLACE_THREAD"]),
            "continue": failing("handler continue", lost=1)}
    handlers = lesson_result(HANDLERS, EosCrashResult("handlers", {}, "run", Timeline(T0), handlers=runs))
    fate = three.solution(handlers)
    assert handlers.check(1, fate)
    assert [fate(h, rec) for h in streams_app.HANDLERS for rec in ("poison", "malformed")] == [
        "stuck", "stuck", "stuck", "stuck", "dropped", "stuck", "kept aside", "stuck", "stuck", "dropped"]
    for answer, hint in [(three.wrong(handlers), "fate('continue', 'malformed') = 'dropped', but by the mechanism "
                                                 "it is 'stuck'"),
                         (lambda h, rec: "stuck", "fate('continue', 'poison') = 'stuck', but in this run it was "
                                                  "'dropped'"),
                         (lambda h, rec: "loops", "return one of 'stuck', 'dropped', 'kept aside'"),
                         (lambda h: "stuck", "raised TypeError"), ("dead_letter", "is not a function"),
                         (0, "is not a function"), ("none", "is not a function"), ([], "is not a function")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{re.escape(hint)}"):
            three.check(handlers, answer)
    copied = three.printed(handlers)   # look-ups of the table and the Mitigate cell's handler, and its name
    assert "dead_letter" in copied and not any(handlers.check(1, a) for a in copied)
    assert len(three.closer.split()) >= 5 and "stuck" not in three.closer
    # the control: the deserialization handler's row measured, the rest by the mechanism
    control = lesson_result(HANDLERS, EosCrashResult("handlers", {}, "run", Timeline(T0), handlers={
        "deserialization": failing("handler deserialization", dropped_records=1)}))
    assert control.check(1, fate) and not any(control.check(1, a) for a in three.printed(control))
    # a run whose measurement went against the mechanism: the measurement decides for its row
    broken = lesson_result(HANDLERS, EosCrashResult("handlers", {}, "run", Timeline(T0), handlers={
        "dead_letter": failing("handler dead_letter", lost=2, lost_all={"a", "b"})}))
    with pytest.raises(AssertionError, match="fate\\('dead_letter', 'poison'\\) = 'kept aside', but in this run it was "
                                             "'dropped'"):
        three.check(broken, fate)


def test_the_schema_exercise_counts_inputs_when_only_some_keys_have_old_state(no_maven, capsys):
    four = SCHEMA.exercises[1]
    schema = lesson_result(SCHEMA, EosCrashResult("schema", {}, "run", Timeline(T0), schema={
        "replace_thread": failing("schema replace_thread", uncaught=3, responses=["REPLACE_THREAD"], outputs=60,
                                  produced=150, lost=90, dropped_records=0, migrated=0),
        "continue": failing("schema continue", outputs=62, produced=150, lost=88, lost_keys=10, dropped_records=88,
                            migrated=0)}), keys=10, records=150)
    assert four.solution(schema) == 160 and schema.check(1, 160)   # the four keys without old state, 40 each
    assert "88 of version 2's inputs were dropped, over 10 keys" in capsys.readouterr().out
    for answer, hint in [(four.wrong(schema), "62 is a count of this run"), (400, "all 400 come out only if"),
                         (394, "writes nothing back"), (240, "240 inputs belong to keys with old state"),
                         (100, "which keys have state"), (160.5, "not a whole number"),
                         (0, "nothing old to read"), ("none", "not a whole number"), ([], "not a whole number")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{re.escape(hint)}"):
            four.check(schema, answer)
    copied = four.printed(schema)
    assert {62, 88, 150, 10, "tolerant"} <= set(copied) and not any(schema.check(1, a) for a in copied)
    assert len(four.closer.split()) >= 5 and "160" not in four.closer and "4" not in four.closer


def test_production_errors_are_configured_by_version_and_refused_before_anything_starts(no_maven):
    props = production_errors.production_props("continue", "4.3.1", "app-75", 20_000)
    assert props == {"lab_refuse_id": "app-75", "lab_refuse_bytes": 20_000,
                     "production.exception.handler": "EosCrashResponses$ContinueTooLarge"}   # the 4.2+ form
    assert production_errors.production_props("route", "3.8.1", "app-75", 1, "app")["default.production.exception.handler"] == \
        "EosCrashHandlers$RouteTooLarge"
    assert production_errors.production_props("route", "3.8.1", "app-75", 1, "app")["lab_refused_topic"] == "app-refused"
    assert "production.exception.handler" not in production_errors.production_props("default", "4.3.1", "a", 1)
    with pytest.raises(LabError, match="PRODUCTION_HANDLERS"):
        REFUSED.spec.validate(production_handlers=["retry"])
    with pytest.raises(LabError, match="max.request.size"):
        REFUSED.spec.validate(production_handlers=["default"], refuse_bytes=1_048_400)
    # the control: a topic large enough for the record
    assert REFUSED.spec.validate(production_handlers=["default"], other_guarantee_handlers=[], output_max_bytes=65_536)
    # the comparison alone is something to run
    assert REFUSED.spec.validate(production_handlers=[], other_guarantee_handlers=["continue"])


def refused_run(label, guarantee="at_least_once", output_bytes=20_187, **m):
    base = dict(refused=[], wrappers=[], errors=[], duplicates=0, outputs=149, produced=150, dropped_records=0,
                failures_per_min=None, migrated=0)
    f = failing(f"refused {label}", guarantee=guarantee, output_bytes=output_bytes, **{**base, **m})
    f.aside = "the refused record is noted in its own topic"
    return f


def test_the_production_error_lesson_asks_and_answers(no_maven, capsys):
    p = REFUSED.spec.validate()
    guess = REFUSED.predict(p, show=False)
    assert "Kafka's default production exception handler" in guess.question and "8,192" in guess.question
    assert "FAIL" not in guess.question   # what it answers is for the run to show
    notes = [{"id": "a-75", "exception": "org.apache.kafka.common.errors.RecordTooLargeException", "message": "",
              "from": "out, 20187 bytes"}]
    runs = {"default": refused_run("default", deaths=3, uncaught=3, lost=1, duplicates=142,
                                errors=["RecordTooLargeException: too large"]),
            "continue": refused_run("continue", lost=1, lost_all={"a-75"}, dropped_records=1,
                                    refused=[{"id": "a-75", "bytes": 20_193, "error": "RecordTooLargeException: x",
                                              "response": "CONTINUE"}]),
            "route": refused_run("route", lost=1, lost_all={"a-75"}, dead_letters=notes),
            "continue · EOS v2": refused_run("continue · EOS v2", "exactly_once_v2", deaths=2, uncaught=3, lost=113,
                                             wrappers=["Cannot execute transactional method because we are in an "
                                                       "error state"])}
    r = lesson_result(REFUSED, EosCrashResult("refused", p, "run", Timeline(T0), refused=runs), **p)
    recorded = {"refused": {k: {"outcome": f.outcome, "guarantee": f.m["guarantee"], "lost": f.m["lost"]}
                            for k, f in runs.items()}}
    assert refused_answer(recorded, r.params) == REFUSED_ANSWERS[1] == "only CONTINUE under at_least_once"
    eos = recorded["refused"]["continue · EOS v2"]
    # restarted, exactly-once's CONTINUE may go on without a whole failed transaction's outputs: not past with the rest
    recorded["refused"]["continue · EOS v2"] = {**eos, "outcome": CARRIED_ON, "lost": 57}
    assert refused_answer(recorded, r.params) == REFUSED_ANSWERS[1]
    recorded["refused"]["continue · EOS v2"] = {**eos, "outcome": CARRIED_ON, "lost": 1}   # only the refused one
    assert refused_answer(recorded, r.params) == REFUSED_ANSWERS[2]
    recorded["refused"]["continue · EOS v2"] = eos
    del recorded["refused"]["continue"]   # route answers CONTINUE too, after its note: it stands in
    assert refused_answer(recorded, r.params) == REFUSED_ANSWERS[1]
    del recorded["refused"]["continue · EOS v2"]   # not all three ran
    assert refused_answer(recorded, r.params) is None
    assert [f.outcome for f in runs.values()] == ["app stopped (restarted, died again)", "records dropped",
                                                  "clean: the refused record is noted in its own topic",
                                                  "app stopped (restarted, died again)"]
    table = r.handler_table("refused")
    assert table["output bytes"].tolist() == [20_187] * 4 and table["duplicates"].tolist() == [142, 0, 0, 0]
    assert "in an error state" in r.refused_evidence() and "→ CONTINUE" in r.refused_evidence()
    early = EosCrashResult("refused", p, "run", Timeline(T0), refused={"default": refused_run("default",
                                                                                              output_bytes=None)})
    assert "(output of ? bytes)" in early.refused_evidence()   # a run that never reached the large record
    assert "refused route: clean" in r.verdict() and r.failed

    five = REFUSED.exercises[1]
    assert five.solution(r) == 20_187 + 61 + 40 and r.check(1, five.solution(r))
    assert "lesson.mitigate(result, output_max_bytes=20288)" in capsys.readouterr().out
    for answer, hint in [(five.wrong(r), "not even the record's value"), (20_200, "the batch's header (61 bytes)"),
                         (1_000_000, "not near the smallest"), ("big", "a number"), (0, "not even the record's value"),
                         ("none", "a number"), ("", "a number"), ([], "a number")]:
        with pytest.raises(AssertionError, match=f"^Not quite: .*{re.escape(hint)}"):
            five.check(r, answer)
    assert len(five.closer.split()) >= 5 and not any(ch.isdigit() for ch in five.closer)
    copied = five.printed(r)   # the value, the topic's limit and padding, the Mitigate cell's 32768
    assert {20_187, 8192, 20_000, 32_768} <= set(copied) and not any(r.check(1, a) for a in copied)


def test_the_production_error_fix_runs_kafkas_default_handler_again(no_maven):
    p = REFUSED.spec.validate()
    fixed = REFUSED.mitigate.check(p, {"output_max_bytes": 32_768})
    assert fixed["production_handlers"] == ["default"] and fixed["other_guarantee_handlers"] == []
    with pytest.raises(LabError, match="already has"):
        REFUSED.mitigate.check(p, {"output_max_bytes": 8192})


def test_the_notebooks_state_the_cases_their_exercises_judge():
    """05a's and 05c's exercises give their case in numbers: the same numbers the checks judge by."""
    import json
    from lab.scenarios import notebook
    from lab.scenarios.nb05_exactly_once_under_crashes.exercises import SOME_OLD, TWICE

    def statement(name):
        cells = json.loads(notebook(name).path.read_text())["cells"]
        return next("".join(c["source"]) for c in cells if "**Exercise 1.**" in "".join(c["source"]))
    crash_case, schema_case = statement("05a"), statement("05c")
    assert f"commit.interval.ms={TWICE['commit_interval_ms']}" in crash_case and f"{TWICE['rate']} input" in crash_case
    assert f"{TWICE['since_commit_ms'] / 1000:g} s after its last commit" in crash_case
    total = SOME_OLD["keys"] * SOME_OLD["per_key"]
    assert f"counts for {SOME_OLD['old_keys']} keys" in schema_case and f"reads {total} inputs" in schema_case
    assert f"{SOME_OLD['per_key']} for each of {SOME_OLD['keys']} keys" in schema_case
