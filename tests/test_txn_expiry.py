"""Notebook 02's pure parts, no broker: the spec, the rounds, evidence lines, the expiry sweep, the verdict."""
import json
import struct

import pytest

from lab.errors import LabError
from lab.experiment import Timeline, lab_lines
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
    with pytest.raises(LabError, match="EXPIRATION_MS=10000 is what the run that failed already has"):
        CLIENTS.mitigate.check(p, {"expiration_ms": 10000})


def test_each_lesson_takes_its_own_parameters_and_the_old_brokers_fix_skips_the_pinned_zookeeper(monkeypatch):
    """02b's parameters are the idle round's and its Kafka Streams versions; 02c's step runs only its broker."""
    from lab.scenarios.nb02_transactional_id_expiry import txn_unknown_producer as part_c
    monkeypatch.setattr(part_c, "_old_broker", lambda v: None)
    monkeypatch.setattr(tc, "streams_examples", lambda v: [])
    assert sorted(STREAMS.spec.defaults) == sorted([*tx.IDLE, "streams_versions"])
    p = OLD.spec.validate(old_brokers=["2.0.1"], check_pinned_zookeeper=True)
    old = OLD.mitigate.check(p, {"old_brokers": ["2.4.1"]})
    assert old["old_brokers"] == ["2.4.1"] and old["check_pinned_zookeeper"] is False
    with pytest.raises(LabError, match="Nothing to run"):
        OLD.spec.validate(old_brokers=[], check_pinned_zookeeper=False)


@pytest.mark.parametrize("bad, words", [({"expiration_ms": 0}, "EXPIRATION_MS"),
                                        ({"cleanup_interval_ms": 2 ** 31}, "CLEANUP_INTERVAL_MS"),
                                        ({"python_modes": ["crash", "retry"]}, "PYTHON_MODES"),
                                        ({"observe_s": 1}, "OBSERVE_S"),
                                        ({"idle": 5}, "did you mean 'idle_s'"),
                                        ({"python_modes": list(tx.PYTHON_MODES),       # 6 + 3 clients
                                          "java_clients": ["3.9.1", "4.0.0", "4.3.1"]}, "At most 8"),
                                        ({"python_modes": ["crash", "crash"]}, "names a value twice")])
def test_spec_refuses_what_kafka_or_the_machine_cannot_take(bad, words):
    with pytest.raises(LabError, match=words):
        CLIENTS.spec.validate(**{**NO_MAVEN, **bad})


def test_lists_may_come_as_text_from_a_panel():
    assert CLIENTS.spec.validate(python_modes="crash, naive", **NO_MAVEN)["python_modes"] == ["crash", "naive"]


def test_client_spec_parsing_into_rounds():
    p = {"python_modes": ["crash"], "java_clients": ["3.9.1"], "streams_versions": ["3.7.0", "3.8.0"]}
    assert tx.rounds(p) == [["python-crash", "java-3.9.1", "streams-3.7.0"], ["streams-3.8.0"]]
    assert tx.rounds({"streams_versions": ["3.7.0", "3.8.0"]}) == [["streams-3.7.0"], ["streams-3.8.0"]]
    assert tx.rounds({"python_modes": ["crash"], "java_clients": ["3.9.1"]}) == [["python-crash", "java-3.9.1"]]
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
    records = [(_key("run-python-crash"), b"state", 10.0),      # a live id: not a tombstone
               (_key("run-python-crash"), None, 5.0),           # before the idle period: ignored
               (_key("run-python-crash"), None, 12.0),
               (_key("run-python-crash"), None, 13.0),
               (_key("run-streams-3_8_0-uuid-1"), None, 14.0),   # Streams: the application.id starts the id
               (b"\x00", None, 15.0)]
    found = tx.expired_at(records, {"crash": "run-python-crash", "streams": "run-streams-3_8_0",
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
    p = CLIENTS.spec.validate(idle_s=idle_s, expiration_ms=10000, cleanup_interval_ms=1000, python_modes=["crash"],
                              **NO_MAVEN)
    return CLIENTS.result(tx.TxnExpiryResult("txn_expiry", p, "r", Timeline(0.0), clients=clients), **p)


@pytest.fixture
def heartbeat_runs(monkeypatch):
    """Exercise 2's experiment without a broker: the heartbeat client, its first heartbeat skipped, goes two
    intervals without a transaction, and its id expires when that is past the expiration. The runs it asked for."""
    asked = []

    def run(cluster=None, progress=True, **p):
        asked.append(p)
        gap = 2 * p["heartbeat_ms"] / 1000
        beat = _summary(expired=gap > p["expiration_ms"] / 1000, longest_idle_s=gap)
        return tx.TxnExpiryResult("txn_expiry", p, "r2", Timeline(0.0), clients={"python-heartbeat": beat})
    monkeypatch.setattr(CLIENTS, "run", run)
    return asked


def test_the_heartbeat_exercise_runs_the_learners_interval_with_one_heartbeat_missed(heartbeat_runs):
    r = _result(15, {"python-crash": _summary()})
    assert r.check(2, 3333) and CLIENTS.exercises[2].solution(r) == 3333
    ran = heartbeat_runs[-1]
    assert ran["python_modes"] == ["heartbeat"] and ran["java_clients"] == [] and ran["heartbeat_misses"] == 1
    assert ran["heartbeat_ms"] == 3333 and ran["idle_s"] >= 2 * 3.333 + 1, ran   # two intervals and a sweep
    with pytest.raises(AssertionError, match="a sweep removed it"):   # 2 x 9 s without a transaction
        r.check(2, 9000)
    for answer, words in [(10000, "no need to run that"), (1000, "room for more than two missed"),
                          (0, "room for more than two missed"), ("3 s", "as a number"), (None, None)]:
        before = len(heartbeat_runs)
        if answer is None:
            assert not r.check(2, answer)   # not answered
        else:
            with pytest.raises(AssertionError, match=words):
                r.check(2, answer)
        assert len(heartbeat_runs) == before, answer   # refused before anything ran


def test_verdict_for_the_control_names_the_branch(heartbeat_runs):
    r = _result(5, {"python-crash": _summary()})
    assert not r.failed
    assert r.verdict() == "idle 5 s < expiration 10 s + one sweep: the id was never expired, the commit succeeded"
    assert "answered normally" in r.explain()
    _each_solution_passes_and_each_wrong_answer_is_refused(r)
    r.check(3, lambda table: set())   # no client met the error: none needed a new producer


def test_verdict_for_the_failure(heartbeat_runs):
    r = _result(15, {"python-crash": _summary(expired=True, sweep=11.0, code=49, error="INVALID_PRODUCER_ID_MAPPING",
                                              first_error=15.0, then="exit", handling="abortable",
                                              call="send_offsets_to_transaction")})
    assert r.failed and r.verdict().startswith("idle 15 s >= expiration 10 s + one sweep: the coordinator expired 1")
    assert "`python-crash`: id expired at 11.0 s" in r.explain()
    assert r.expiry()["idle when expired (s)"].tolist() == [10.0]
    r.check(1, lambda e, c: (e / 1000, (e + c) / 1000))
    r.check(3, lambda table: {"python-crash"})
    _each_solution_passes_and_each_wrong_answer_is_refused(r)
    for n, answer in [(1, lambda e, c: (0, 100)), (1, lambda e, c: None), (1, lambda e, c: "soon"), (1, 5),
                      (2, lambda e, c: 0), (2, 0), (2, 10000), (2, "x"),
                      (3, lambda table: set()), (3, lambda table: "python-crash"), (3, lambda table: 1 / 0)]:
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, answer)


def _each_solution_passes_and_each_wrong_answer_is_refused(r):
    """Each exercise of the result's lesson: its solution passes, its tempting wrong answer is refused."""
    for n, exercise in r.exercises.items():
        assert r.check(n, exercise.solution(r))
        with pytest.raises(AssertionError, match="^Not quite: "):
            r.check(n, exercise.wrong(r))


def test_the_streams_and_old_broker_exercises_are_judged_by_the_run_and_by_the_mechanism():
    streams = {"streams-3.7.0": _summary(code=49, error="InvalidPidMappingException", handling="thread died",
                                         recovered=False),
               "streams-3.8.0": _summary(code=49, error="InvalidPidMappingException", handling="task migrated")}
    p = {"idle_s": 15, "expiration_ms": 10000, "cleanup_interval_ms": 1000, "streams_versions": ["3.7.0", "3.8.0"]}
    idle = tx.TxnExpiryResult("txn_expiry", p, "r", Timeline(0.0), clients=streams)
    old = tx.TxnExpiryResult("txn_expiry", {"old_brokers": ["2.0.1"]}, "r", Timeline(0.0),
                             part_c={"2.0.1": {"reproduced": True}, "4.3.1": {"reproduced": False}})
    assert tx.streams_answer(idle.as_record(), p) == tx.STREAMS_ANSWERS[0]
    assert tx.clients_answer(idle.as_record(), p) is None          # no `python-crash` client in this run
    assert tx.old_broker_answer(old.as_record(), old.params) == tx.OLD_BROKER_ANSWERS[0]
    judged = {STREAMS: idle, OLD: old}
    for lesson, outcome in judged.items():
        _each_solution_passes_and_each_wrong_answer_is_refused(lesson.result(outcome))
    for lesson, answer, words in [(STREAMS, lambda v: v >= "3.7", "Kafka Streams 3.7.0 went to ERROR here"),
                                  (STREAMS, lambda v: "yes", "return True or False"),
                                  (OLD, lambda v: v > "2.1", "a broker 2.0.1 forgot the producer in this run"),
                                  (OLD, lambda v: True, "a broker 4.3.1 kept the producer in this run")]:
        with pytest.raises(AssertionError, match=words):
            lesson.result(judged[lesson]).check(1, answer)
