"""Chapter 02's pure parts (lessons 02a to 02c), no broker: the specs, the rounds, evidence lines, the expiry sweep,
the verdicts, the questions and the exercises' checks."""
import json
import re
import struct

import pytest

from lab.errors import LabError
from lab.toolbox import Timeline, lab_lines
from lab.scenarios.nb02_transactional_id_expiry import txn_clients as tc
from lab.scenarios.nb02_transactional_id_expiry import idle_clients, idle_streams, old_brokers
from lab.scenarios.nb02_transactional_id_expiry import txn_expiry as tx

CLIENTS, STREAMS, OLD = idle_clients.lesson, idle_streams.lesson, old_brokers.lesson
NO_MAVEN = {"java_clients": []}


@pytest.fixture(autouse=True)
def no_maven(monkeypatch):
    """Version checks resolve jars on Maven Central; here they only parse the version."""
    monkeypatch.setattr(tc.maven, "classpath", lambda coords, label="": [])
    monkeypatch.setattr(tx, "clients_classpath", lambda v: tx.parse_version(v))
    monkeypatch.setattr(tx, "_kraft", lambda v: None)


def test_idle_shorter_than_the_expiration_is_a_valid_experiment():
    p = CLIENTS.spec.validate(idle_s=5, expiration_ms=10000, **NO_MAVEN)
    assert p["idle_s"] == 5.0 and p["expiration_ms"] == 10000


def test_long_idle_is_accepted_and_a_fix_that_changes_the_expiration_is_checked_before_anything_starts():
    p = CLIENTS.spec.validate(idle_s=40, **NO_MAVEN)
    fixed = CLIENTS.mitigate.check(p, {"expiration_ms": 90000})
    assert fixed["expiration_ms"] == 90000 and fixed["idle_s"] == 40
    with pytest.raises(LabError, match="expiration_ms=10000 is what the run that failed already has"):
        CLIENTS.mitigate.check(p, {"expiration_ms": 10000})


def test_each_lesson_takes_its_own_parameters_and_the_old_brokers_fix_skips_the_pinned_zookeeper(monkeypatch):
    """02b's parameters are the idle round's and its Kafka Streams versions; 02c's step runs only its broker."""
    from lab.scenarios.nb02_transactional_id_expiry import txn_unknown_producer as part_c
    monkeypatch.setattr(part_c, "_old_broker", lambda v: None)
    monkeypatch.setattr(tc, "streams_examples", lambda v: [])
    assert sorted(STREAMS.spec.defaults) == sorted([*tx.IDLE, "streams_versions"])
    p = OLD.spec.validate(zookeeper_brokers=["2.0.1"], check_pinned_zookeeper=True)
    old = OLD.mitigate.check(p, {"zookeeper_brokers": ["2.4.1"]})
    assert old["zookeeper_brokers"] == ["2.4.1"] and old["check_pinned_zookeeper"] is False
    with pytest.raises(LabError, match="Nothing to run"):
        OLD.spec.validate(zookeeper_brokers=[], check_pinned_zookeeper=False)


def test_the_question_run_has_the_plain_client_and_the_mitigate_step_runs_the_other_modes_without_java():
    """02a's parameters cell names only the question's mode; its Mitigate cell runs the others, without the Java
    producers (mitigate_base), and a fix of the expiration runs `plain` alone."""
    p = CLIENTS.spec.validate(java_clients=["3.9.1", "4.3.1"])
    assert p["python_modes"] == ["plain"] and "`plain`" in CLIENTS.question(p)[0]
    others = [m for m in tx.PYTHON_MODES if m != "plain"]
    fixed = CLIENTS.mitigate.check(p, {"python_modes": others})
    assert fixed["python_modes"] == others and fixed["java_clients"] == [] and fixed["idle_s"] == p["idle_s"]
    assert tx.rounds(fixed) == [[f"python-{m}" for m in others]]
    assert CLIENTS.mitigate.check(p, {"expiration_ms": 40000})["python_modes"] == ["plain"]


def test_client_logs_prints_the_lines_of_the_clients_asked_for(tmp_path, capsys):
    log = tmp_path / "java.log"
    log.write_text("[x] INFO [Producer clientId=p] ProducerId set to 7 with epoch 0\nnothing here\n")
    r = tx.TxnExpiryResult("txn_expiry", {}, "r", Timeline(0.0), clients={"java-4.3.1": {}, "python-plain": {}},
                           logs={"java-4.3.1": str(log), "python-plain": str(tmp_path / "none.log")})
    r.client_logs("java")
    out = capsys.readouterr().out
    assert out.startswith("java-4.3.1\n   ") and "ProducerId set to 7" in out and "python-plain" not in out


@pytest.mark.parametrize("bad, words", [({"expiration_ms": 0}, "EXPIRATION_MS"),
                                        ({"cleanup_interval_ms": 2 ** 31}, "CLEANUP_INTERVAL_MS"),
                                        ({"python_modes": ["plain", "retry"]}, "PYTHON_MODES"),
                                        ({"observe_s": 1}, "OBSERVE_S"),
                                        ({"idle": 5}, "did you mean 'idle_s'"),
                                        ({"python_modes": list(tx.PYTHON_MODES),       # 6 + 3 clients
                                          "java_clients": ["3.9.1", "4.0.0", "4.3.1"]}, "At most 8"),
                                        ({"python_modes": ["plain", "plain"]}, "names a value twice")])
def test_spec_refuses_what_kafka_or_the_machine_cannot_take(bad, words):
    with pytest.raises(LabError, match=words):
        CLIENTS.spec.validate(**{**NO_MAVEN, **bad})


def test_lists_may_come_as_text_from_a_panel():
    assert CLIENTS.spec.validate(python_modes="plain, no-rewind", **NO_MAVEN)["python_modes"] == ["plain", "no-rewind"]


def test_client_spec_parsing_into_rounds():
    p = {"python_modes": ["plain"], "java_clients": ["3.9.1"], "streams_versions": ["3.7.0", "3.8.0"]}
    assert tx.rounds(p) == [["python-plain", "java-3.9.1", "streams-3.7.0"], ["streams-3.8.0"]]
    assert tx.rounds({"streams_versions": ["3.7.0", "3.8.0"]}) == [["streams-3.7.0"], ["streams-3.8.0"]]
    assert tx.rounds({"python_modes": ["plain"], "java_clients": ["3.9.1"]}) == [["python-plain", "java-3.9.1"]]
    assert tx.CLIENTS["java"] is tc._Java and "streams-3.8.0".split("-", 1)[1] == "3.8.0"


def test_broker_config_follows_the_version():
    p = CLIENTS.spec.validate(expiration_ms=5000, **NO_MAVEN)
    config = tx.broker_config({**p, "broker_version": "3.7.2"})   # log.initial.task.delay.ms came in 3.8.0
    assert config["transactional.id.expiration.ms"] == "5000" and "log.initial.task.delay.ms" not in config
    assert tx.broker_config({**p, "broker_version": "3.8.1"})["log.initial.task.delay.ms"] == "1000"
    assert "producer.id.expiration.ms" not in tx.broker_config({**p, "broker_version": "3.3.2"})


def _key(txn_id: str) -> bytes:
    raw = txn_id.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def test_expiry_sweep_parsing_takes_the_first_tombstone_after_the_idle_start():
    records = [(_key("run-python-plain"), b"state", 10.0),      # a live id: not a tombstone
               (_key("run-python-plain"), None, 5.0),           # before the idle period: ignored
               (_key("run-python-plain"), None, 12.0),
               (_key("run-python-plain"), None, 13.0),
               (_key("run-streams-3_8_0-uuid-1"), None, 14.0),   # Streams: the application.id starts the id
               (b"\x00", None, 15.0)]
    found = tx.expired_at(records, {"crash": "run-python-plain", "streams": "run-streams-3_8_0",
                                    "java": "run-java-4_3_1"}, since=8.0)
    assert found == {"crash": 12.0, "streams": 14.0, "java": None}


def test_event_extraction_from_both_apps():
    text = "\n".join([
        '%4|1795436980.1|TXNERR|rdkafka#producer-1| librdkafka noise',
        'LAB ' + json.dumps({"kind": "error", "ts": 3.0, "call": "send_offsets_to_transaction",
                             "error": "INVALID_PRODUCER_ID_MAPPING", "code": 49, "handling": "abortable"}),
        '[2026-11-23 12:29:40,719] INFO LAB {"kind":"error","ts":4.5,"exception":"org.apache.kafka.common.errors.'
        'InvalidPidMappingException","call":"commitTransaction"} (IdleTransactionalProducer)',
        '[2026-11-23 12:29:40,935] INFO LAB {"kind":"recreated","ts":4.7,"phase":"after-idle"} (Idle'])
    rows = lab_lines(text)
    assert [r["kind"] for r in rows] == ["error", "error", "recreated"]
    java = tc._Java.errors(None, rows[1:])
    assert java[0]["error"] == "InvalidPidMappingException" and java[0]["code"] == 49
    assert java[0]["handling"] == "fatal"
    assert tc._Client.errors(None, rows)[0]["handling"] == "abortable"


def _summary(**kw):
    base = {"expired": False, "code": None, "recovered": True, "error": None, "sweep": None, "message": None,
            "handling": None, "then": None, "last_txn": 1.0, "input_at": 9.0, "first_error": None, "errors": 0,
            "call": None, "restarts": 0, "error_after_idle_s": None, "recovery_s": None, "reads_per_input": 1}
    return {**base, **kw}


def _result(idle_s, clients):
    p = CLIENTS.spec.validate(idle_s=idle_s, expiration_ms=10000, cleanup_interval_ms=1000, python_modes=["plain"],
                              **NO_MAVEN)
    return CLIENTS.result(tx.TxnExpiryResult("txn_expiry", p, "r", Timeline(0.0), clients=clients), **p)


@pytest.fixture
def heartbeat_runs(monkeypatch):
    """Exercise 2's experiment without a broker: the heartbeat client, its first heartbeat skipped, goes two
    intervals without a transaction, and its id expires when that is past the expiration. The runs it asked for."""
    asked = []

    def run(cluster=None, progress=True, remember=None, **p):
        assert remember is False   # an exercise's own run is not the one the learner predicted
        asked.append(p)
        gap = 2 * p["heartbeat_ms"] / 1000
        beat = _summary(expired=gap > p["expiration_ms"] / 1000, longest_idle_s=gap)
        return tx.TxnExpiryResult("txn_expiry", p, "r2", Timeline(0.0), clients={"python-heartbeat": beat})
    monkeypatch.setattr(CLIENTS, "run", run)
    return asked


def test_the_heartbeat_exercise_asks_for_a_function_and_runs_its_interval_with_one_heartbeat_missed(heartbeat_runs,
                                                                                                   capsys):
    r = _result(15, {"python-plain": _summary()})
    two = CLIENTS.exercises[2]
    assert r.check(2, lambda e: e // 3) and two.solution(r)(10000) == 3333
    ran = heartbeat_runs[-1]
    assert ran["python_modes"] == ["heartbeat"] and ran["java_clients"] == [] and ran["heartbeat_misses"] == 1
    assert ran["heartbeat_ms"] == 3333 and ran["idle_s"] >= 2 * 3.333 + 1, ran   # two intervals and a sweep
    with pytest.raises(AssertionError, match="a sweep removed it"):   # 2 x 9 s without a transaction
        two.check(r, lambda e: e * 9 // 10)
    with pytest.raises(AssertionError, match="a sweep removed it"):   # the tempting answer, one sweep short
        two.check(r, two.wrong(r))
    # refused before anything runs: this run's number copied (a constant), intervals outside the room, not a function
    for answer, words in [(lambda e: 3333, r"heartbeat_ms\(60000\) = 3333: .*room for more than two missed"),
                          (lambda e: e, "even when none is missed"), (lambda e: 1000, "room for more than two missed"),
                          (lambda e: 0, "room for more than two missed"), (lambda e: "3 s", "return the milliseconds"),
                          (lambda e: None, "returned None"), (3333, "is not a function"), (0, "is not a function"),
                          ("none", "is not a function"), ([], "is not a function")]:
        before = len(heartbeat_runs)
        with pytest.raises(AssertionError, match=words):
            two.check(r, answer)
        assert len(heartbeat_runs) == before, answer
    assert not r.check(2, None) and "`lesson.solution(2)`" in capsys.readouterr().out   # not answered
    # right for this run's expiration, but two intervals past a minute's: refused after the experiment
    with pytest.raises(AssertionError, match=r"heartbeat_ms\(60000\) = 36000: with one missed"):
        two.check(r, lambda e: e // 3 if e == 10000 else e * 6 // 10)
    # the toolbox's check: a cross and the hint, then a closer hint from the second wrong answer on
    assert not r.check(2, lambda e: 1000) and "Closer:" not in capsys.readouterr().out
    assert not r.check(2, lambda e: 1000) and f"Closer: {two.closer}" in capsys.readouterr().out
    assert "third" not in two.closer and "3333" not in two.closer


def _each_solution_passes_and_each_wrong_answer_is_refused(r):
    """Each exercise of the result's lesson: its solution passes, its tempting wrong answer and the trivial answers
    are refused; one that needs the failure, on a run without it, judges nothing and says so."""
    for n, exercise in r.exercises.items():
        if exercise.needs_failure and not r.failed:
            for answer in (exercise.solution(r), exercise.wrong(r), 0, "", "none", []):
                assert r.check(n, answer).said == "did not reproduce the failure"
            continue
        assert r.check(n, exercise.solution(r))
        with pytest.raises(AssertionError, match="^Not quite: "):
            exercise.check(r, exercise.wrong(r))
        for trivial in (0, "", "none", []):
            with pytest.raises(AssertionError, match="^Not quite: "):
                exercise.check(r, trivial)


def test_verdict_for_the_control_names_the_branch(heartbeat_runs):
    r = _result(5, {"python-plain": _summary()})
    assert not r.failed
    assert r.verdict() == "idle 5 s < expiration 10 s + one sweep: the id was never expired, the commit succeeded"
    assert "answered normally" in r.explain()
    _each_solution_passes_and_each_wrong_answer_is_refused(r)
    assert not r.check(3, lambda table: set())   # no client met the error: nothing to judge, not even the empty set


def _failed_clients():
    return {"python-plain": _summary(expired=True, sweep=11.0, code=49, error="INVALID_PRODUCER_ID_MAPPING",
                                     first_error=15.0, then="exit -> restarted by the supervisor",
                                     handling="abortable", call="send_offsets_to_transaction"),
            "python-abort": _summary(expired=True, sweep=11.0, code=49, error="INVALID_PRODUCER_ID_MAPPING",
                                     first_error=15.0, then="abort -> rewind", handling="abortable",
                                     call="send_offsets_to_transaction"),
            "java-4.3.1": _summary(expired=True, sweep=11.2, code=49, error="InvalidPidMappingException",
                                   first_error=15.1, then="recreated", handling="fatal", call="commitTransaction")}


def test_verdict_for_the_failure(heartbeat_runs):
    r = _result(15, _failed_clients())
    assert r.failed and r.verdict().startswith("idle 15 s >= expiration 10 s + one sweep: the coordinator expired 3")
    assert "`python-plain`: id expired at 11.0 s" in r.explain()
    assert r.expiry()["idle when expired (s)"].tolist() == [10.0, 10.0, 10.2]
    assert r.check(1, lambda e, c: (e / 1000, (e + c) / 1000))
    assert r.check(3, lambda t: set(t[(t["handling"] == "fatal") | t["then"].fillna("").str.contains("exit|recreate")]
                                     ["client"]))
    _each_solution_passes_and_each_wrong_answer_is_refused(r)
    one, three = CLIENTS.exercises[1], CLIENTS.exercises[3]
    for exercise, answer in [(one, lambda e, c: (0, 100)), (one, lambda e, c: None), (one, lambda e, c: "soon"),
                             (one, 5), (one, lambda e, c: (10, 11)),   # this run's bounds, copied
                             (three, lambda table: set()), (three, lambda table: "python-plain"),
                             (three, lambda table: 1 / 0), (three, lambda table: set(table["client"]))]:
        with pytest.raises(AssertionError, match="^Not quite: "):
            exercise.check(r, answer)
    # what the notebook shows above each exercise, copied (a constant or a look-up): refused, and exercise 2's
    # before its experiment runs
    before = len(heartbeat_runs)
    for n, exercise in CLIENTS.exercises.items():
        copies = exercise.printed(r)
        assert len(copies) >= 3 and not any(r.check(n, copy) for copy in copies), n
    assert len(heartbeat_runs) == before


def test_the_new_producer_exercise_needs_the_mechanism_not_this_runs_names(capsys):
    """Exercise 3 passed with this run's names hard-coded; now the check also tries the function on another
    deployment's table: the same rows under other names and in another order, with a client of each kind of 02a."""
    from lab.scenarios.nb02_transactional_id_expiry import exercises as ex
    r = _result(15, _failed_clients())
    three = CLIENTS.exercises[3]
    assert three.needs_failure and len(three.closer.split()) >= 5
    assert ex.needed_new_producer(r.table()) == {"python-plain", "java-4.3.1"}
    copied = lambda table: {"python-plain", "java-4.3.1"}   # noqa: E731 (right on this run's table only)
    by_position = lambda table: set(table["client"].iloc[[0, 2]])   # noqa: E731
    for answer in (copied, by_position):
        with pytest.raises(AssertionError, match="decide from each row's columns"):
            three.check(r, answer)
    other = ex._other_deployment(r.table())
    assert len(other) == 3 + 6 and not set(other["client"]) & set(r.table()["client"])
    assert ex._other_deployment(r.table()).equals(other)   # the same every time
    assert len(ex.needed_new_producer(other)) == 2 + 3   # this run's two, a crash, a new producer, a fatal error
    assert not r.check(3, copied) and "Closer:" not in capsys.readouterr().out
    assert not r.check(3, copied) and f"Closer: {three.closer}" in capsys.readouterr().out


def _streams_and_old_broker_results(idle_s=15, old_idle=(25.3, 3.4)):
    """02b's run (3.7.0 died, 3.8.0 migrated its task, idle `idle_s` with ids expiring after 10 s, swept every
    second) and 02c's (2.0.1 forgot the producer, 4.3.1 kept it, each idle as long as `old_idle` says)."""
    streams = {"streams-3.7.0": _summary(code=49, error="InvalidPidMappingException", handling="thread died",
                                         recovered=False),
               "streams-3.8.0": _summary(code=49, error="InvalidPidMappingException", handling="task migrated")}
    p = {"idle_s": idle_s, "expiration_ms": 10000, "cleanup_interval_ms": 1000, "streams_versions": ["3.7.0", "3.8.0"]}
    idle = tx.TxnExpiryResult("txn_expiry", p, "r", Timeline(0.0), clients=streams)
    old = tx.TxnExpiryResult("txn_expiry", {"zookeeper_brokers": ["2.0.1"], "broker_version": "4.3.1",
                                            "retention_ms": 3000}, "r", Timeline(0.0),
                             part_c={"2.0.1": {"reproduced": True, "idle_s": old_idle[0]},
                                     "4.3.1": {"reproduced": False, "idle_s": old_idle[1]}})
    return idle, old


def test_the_streams_and_old_broker_questions_name_their_releases():
    idle, old = _streams_and_old_broker_results()
    p, streams = idle.params, idle.clients
    # each question names its releases, oldest first; each answer is one of its choices
    assert tx.streams_answer(idle.as_record(), p) == "only 3.7.0" in tx.streams_question(p)[1]
    assert tx.clients_answer(idle.as_record(), p) is None          # no `python-plain` client in this run
    assert tx.old_broker_answer(old.as_record(), old.params) == "only 2.0.1" in tx.old_broker_question(old.params)[1]
    both = {n: {**c, "handling": "thread died"} for n, c in streams.items()}
    assert tx.streams_answer({"part_b": both}, p) == "both"
    calm = {n: {**c, "error": None, "handling": None} for n, c in streams.items()}
    assert tx.streams_answer({"part_b": calm}, p) == tx.STREAMS_NONE[1]
    assert tx.streams_answer({"part_b": {"streams-3.7.0": streams["streams-3.7.0"]}}, p) is None   # one did not run
    kept = {v: {"reproduced": False, "id_expired": v == "4.3.1"} for v in ("2.0.1", "4.3.1")}
    assert tx.old_broker_answer({"part_c": kept}, old.params) == tx.OLD_BROKER_NONE[1]


def test_the_streams_and_old_broker_exercises_need_the_clock_and_the_release():
    """Each asks for a rule of a release AND a clock (02b: the id's expiration and sweep; 02c: retention and its
    check), judged on the run's own cases, then on settings it did not use. What the page shows is refused: the
    table looked up, the Mitigate cell's release, the Explain's release alone (the former look-up answer, as numbers
    or as text) and the clock alone."""
    from lab.scenarios.nb02_transactional_id_expiry import exercises as ex
    idle, old = _streams_and_old_broker_results()
    judged = {STREAMS: idle, OLD: old}
    for lesson, outcome in judged.items():
        result = lesson.result(outcome)
        _each_solution_passes_and_each_wrong_answer_is_refused(result)
        copies = lesson.exercises[1].printed(result)
        assert len(copies) == 7 and not any(result.check(1, copy) for copy in copies), lesson
    streams, brokers = STREAMS.result(idle), OLD.result(old)
    assert streams.check(1, lambda v, idle_s, e, c: idle_s * 1000 > e and tuple(map(int, v.split("."))) < (3, 8))
    assert brokers.check(1, lambda v, idle_s, r, c: idle_s * 1000 > r and tuple(map(int, v.split("."))) < (2, 4))
    version_alone = "Kafka Streams 2.8.2 \\(idle 6 days, ids expiring after 7 days, swept every 1 h\\) it carries on"
    for lesson, answer, words in [
            (STREAMS, lambda v: v < "3.8.0", "raised TypeError"),                 # the former answer, one argument
            (STREAMS, lambda v, *_: ex.parse_version(v) < (3, 8), version_alone),  # the Explain's release alone
            (STREAMS, lambda v, idle_s, e, c: idle_s * 1000 >= e + c, "stops\\('3.8.0', 15, 10000, 1000\\) = True, "
             "but in this run it carried on"),                                      # the clock alone
            (STREAMS, lambda v, idle_s, e, c: v == "3.7.0", "stops\\('2.8.2', 691200, 604800000, 3600000\\) = "
             "False"),                                                               # this run's table, by name
            (STREAMS, lambda *_: "yes", "return True or False"),
            (OLD, lambda v: v < "2.4", "raised TypeError"),
            (OLD, lambda v, *_: ex.parse_version(v) < (2, 4), "forgets\\('1.0.2', 1800, 3600000, 300000\\) = True"),
            (OLD, lambda v, idle_s, r, c: idle_s * 1000 >= r + c, "forgets\\('2.4.0', 10800, 3600000, 300000\\) = "
             "True, but with broker 2.4.0 \\(idle 3 h, retention.ms 1 h, checked every 5 min\\) it keeps it"),
            (OLD, lambda v, idle_s, r, c: v < "2.1" and idle_s * 1000 >= r + c, "forgets\\('2.3.1', 10800"),
            (OLD, lambda v, *_: True, "forgets\\('1.0.2', 1800")]:
        with pytest.raises(AssertionError, match=words):
            lesson.exercises[1].check(lesson.result(judged[lesson]), answer)
    assert {ex._span(s) for s in (90, 1800, 3 * 3600, 86400, 8 * 86400)} == {"90 s", "30 min", "3 h", "1 day", "8 days"}


def test_the_run_cases_of_the_streams_and_old_broker_exercises_leave_out_the_uncertain_band():
    """A run idle between the expiration and one sweep after it (02b), or a producer idle between retention.ms and
    one check after it (02c), says nothing a rule can be held to: those cases are left out, the others kept."""
    from lab.scenarios.nb02_transactional_id_expiry import exercises as ex
    certain, certain_old = _streams_and_old_broker_results()
    assert [c[2] for c in ex._stops_cases(certain) if c[3] is None] == [True, False]   # 3.7.0 died, 3.8.0 lived
    assert [c[1][0] for c in ex._forgets_cases(certain_old) if c[3] is None] == ["2.0.1"]   # 4.3.1: idle 3.4 s
    idle, old = _streams_and_old_broker_results(idle_s=10.5, old_idle=(3.5, 60))
    assert not [c for c in ex._stops_cases(idle) if c[3] is None]
    assert [c[1][0] for c in ex._forgets_cases(old) if c[3] is None] == ["4.3.1"]
    for lesson, outcome in {STREAMS: idle, OLD: old}.items():   # a measurement in the band decides nothing
        assert lesson.result(outcome).check(1, lesson.exercises[1].solution(None))
    # every other case is outside the band, and none is a setting of this run
    assert all(ex._certain(*c[1][1:]) for c in ex._stops_cases(idle) + ex._forgets_cases(old))
    assert all(c[1][2:] != (10000, 1000) for c in ex._stops_cases(idle) if c[3])
    # the same idle under both releases: an old one stops, a new one carries on
    assert {(c[1][0], c[2]) for c in ex._stops_cases(idle) if c[1][1] == 8 * 86400} >= {("3.7.1", True),
                                                                                      ("3.8.0", False)}
    assert {(c[1][0], c[2]) for c in ex._forgets_cases(old) if c[1][1] == 3 * 3600} >= {("2.3.1", True),
                                                                                     ("2.4.0", False)}


GIVE_AWAY = re.compile(r"\b(affected|fixed|fix|fixes|control|fails?|failure|broken|e\.g\.|part [abc])\b", re.I)


@pytest.mark.parametrize("lesson", [CLIENTS, STREAMS, OLD], ids=["02a", "02b", "02c"])
def test_the_parameters_say_what_each_knob_is_and_the_question_has_distinct_choices(lesson):
    """Read before the question (docs/parameters.md): no description says which value meets the error, which
    version is affected, or names an internal part; every exercise has a closer hint; the choices differ."""
    said = {param.name: param.help for param in lesson.spec.params if GIVE_AWAY.search(param.help)}
    assert not said, said
    assert not [name for name in lesson.spec.defaults if re.search(r"fix|control|affected|workaround", name)]
    text, choices = lesson.question(lesson.spec.defaults)[:2]
    assert len(set(choices)) == len(choices) >= 3, choices
    assert all(len(e.closer.split()) >= 5 for e in lesson.exercises.values())
