"""Chapter 03's lessons (03a over_quota in module fencing, 03b sweep, on lab.scenarios.nb03_quota_driven_fencing.quota_fencing): their
pure parts, without a broker.

Logs are written the way the programs write them (log4j stamps in UTC, `LAB {json}` lines), and the
mechanism of an incident is derived from them: a stuck transactional request vs an oversized transaction.
"""
import json
import re
import zipfile
from datetime import datetime, timezone

import pandas as pd
import pytest

from lab.errors import LabError
from lab.toolbox import checks
from lab.toolbox import Param, Spec
from lab.scenarios.nb03_quota_driven_fencing import fencing, sweep as sweep_lesson
from lab.scenarios.nb03_quota_driven_fencing import quota_fencing as qf
from lab.scenarios.nb03_quota_driven_fencing import quota_fencing_analysis as qa
from lab.scenarios.nb03_quota_driven_fencing.quota_fencing_report import QuotaResult, fencing_answer, sweep_answer

FENCING, SWEEP = fencing.lesson, sweep_lesson.lesson
from lab.runtime.programs import clients_classpath
from tests.expectations import try_exercises

T0 = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc).timestamp()


def stamp(t: float) -> str:
    """A log4j stamp `t` seconds after T0, as QuotaStateApp logs it (UTC)."""
    at = datetime.fromtimestamp(T0 + t, tz=timezone.utc)
    return at.strftime("[%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}]"


def debug(t, what, request):
    return (f"{stamp(t)} DEBUG [kafka-producer-network-thread | x] [Producer clientId=x, transactionalId=x] "
            f"{what} transactional request {request}RequestData(transactionalId='x') (Sender)")


def metrics(t, processed, commits, throttle=0.0, client="app-StreamThread-1-producer"):
    row = {"kind": "metrics", "ts": T0 + t, "state": "RUNNING",
           "producers": {client: {"produce-throttle-time-max": throttle}},
           "threads": {"app-StreamThread-1": {"process-total": processed, "commit-total": commits,
                                              "commit-latency-max": 50.0}}}
    return f"{stamp(t)} INFO [lab-metrics] LAB {json.dumps(row)} (QuotaStateApp)"


def fenced(t):
    return (f"{stamp(t)} ERROR [StreamThread-1] stream-thread [x] Failed to commit: "
            "org.apache.kafka.common.errors.InvalidProducerEpochException: Producer attempted to produce with an "
            "old epoch. (TaskManager)")


# ---------------------------------------------------------------- parsers

def test_txn_waits_pair_enqueue_and_send_and_count_from_the_first_enqueue():
    text = "\n".join([debug(1, "Enqueuing", "AddOffsetsToTxn"), debug(2, "Enqueuing", "AddOffsetsToTxn"),
                      debug(31, "Sending", "AddOffsetsToTxn"), debug(32, "Enqueuing", "EndTxn"),
                      debug(32.25, "Sending", "EndTxn"), debug(40, "Sending", "EndTxn")])
    waits = qa.txn_waits(text)
    assert [(w["request"], w["wait_s"]) for w in waits] == [("AddOffsetsToTxn", 30.0), ("EndTxn", 0.25)]
    assert waits[0]["t_s"] == pytest.approx(T0 + 31)


def test_streams_metrics_read_lab_lines_and_the_open_transaction():
    text = "\n".join([metrics(1, 30, 10), metrics(2, 60, 20, throttle=800), metrics(3, 400, 20, throttle=1200),
                      "garbage LAB {not json", metrics(4, 900, 20)])
    rows, ids = qa.streams_metrics(text)
    assert ids == {"app-StreamThread-1-producer"}
    assert [r["open_records"] for r in rows] == [0, 0, 340, 840]   # records since the last commit
    assert [r["throttle_max_ms"] for r in rows] == [0, 800, 1200, 0]
    assert rows[0]["t_s"] == pytest.approx(T0 + 1) and rows[0]["commit_latency_ms"] == 50.0


def test_incidents_collapse_events_closer_than_the_gap():
    ev = pd.DataFrame({"t_s": [10.0, 11.0, 14.0, 30.0], "line": list("abcd"),
                       "kind": ["ProducerFencedException", "TaskMigratedException", "rebalance",
                                "InvalidProducerEpochException"]})
    found = qa.incidents(ev)
    assert list(found["t_s"]) == [10.0, 30.0]
    assert found["kinds"].iloc[0] == "ProducerFencedException, TaskMigratedException, rebalance"
    assert qa.incidents(ev.iloc[:0]).empty


@pytest.mark.parametrize("version, fixed", [("3.8.1", False), ("3.9.0", False), ("3.9.1", True), ("4.3.1", True)])
def test_the_fix_is_read_from_the_real_kafka_clients_jar(version, fixed):
    """PR #17527 (KAFKA-17455) reached 3.9.1 and 4.0: the class file of those jars says so, without a JDK's javap."""
    jar = next(j for j in clients_classpath(version) if j.name == f"kafka-clients-{version}.jar")
    assert qa.awaitready_polls_delay(jar) is fixed
    with zipfile.ZipFile(jar) as z:
        called = qa.called_methods(z.read("org/apache/kafka/clients/NetworkClientUtils.class"))
    assert {"poll", "isReady", "milliseconds"} <= called      # the constant pool was read, not only searched


def test_a_file_that_is_not_a_class_is_refused():
    with pytest.raises(LabError, match="CAFEBABE"):
        qa.called_methods(b"PK\x03\x04 not a class")


# ---------------------------------------------------------------- mechanism

def measured(tmp_path, log_lines, quota=35000, aborts=()):
    v = qa.Variant("3.8.1 quota", quota=quota)
    log = tmp_path / "app.log"
    log.write_text("\n".join(log_lines) + "\n")
    aborts = pd.DataFrame([(v.name, t, "Completed rollback ... due to timeout") for t in aborts],
                          columns=["variant", "t_s", "line"])
    return qa.Measured([v], 60, T0, 60, {v.name: "qf-x"}, {v.name: log}, {v.name: []}, aborts), v


def test_a_stuck_transactional_request_is_named_as_kafka_17455(tmp_path):
    got, v = measured(tmp_path, [metrics(9, 300, 90, throttle=900), debug(10, "Enqueuing", "AddOffsetsToTxn"),
                                 metrics(20, 303, 90), debug(40, "Sending", "AddOffsetsToTxn"), fenced(40.1)],
                       aborts=(21.0, 75.0))   # the second came after the stop: a shutdown, not counted
    row = got.row(v.name)
    assert row["coordinator_aborts"] == 1
    assert row["crashes"] == 1 and row["first_crash_s"] == 40.1
    assert row["mechanism"].startswith("1x stuck transactional request (KAFKA-17455: AddOffsetsToTxn waited 30.0 s")
    assert row["longest_txn_wait_s"] == 30.0 and row["throttle_max_ms"] == 900
    assert "the longest throttle recorded before it was 0.9 s" in row["mechanism"]


def test_a_stall_with_no_throttle_recorded_does_not_blame_one(tmp_path):
    # Seen below the quota (0.93x): a 30 s stall while every metric sample said the producer was never throttled.
    got, v = measured(tmp_path, [metrics(9, 300, 90), debug(10, "Enqueuing", "AddOffsetsToTxn"),
                                 metrics(20, 303, 90), debug(40, "Sending", "AddOffsetsToTxn"), fenced(40.1)])
    mechanism = got.row(v.name)["mechanism"]
    assert "AddOffsetsToTxn waited 30.0 s; no throttle was recorded before it" in mechanism
    assert "behind throttles" not in mechanism


def test_an_oversized_transaction_is_named_as_such(tmp_path):
    # 1,000 records x 1,164 B open for 10 s against 35,000 B/s: 1.16 MB > 350 KB; requests waited ~1 s each.
    got, v = measured(tmp_path, [metrics(1, 100, 10, throttle=1200), metrics(2, 1100, 10, throttle=1500),
                                 debug(3, "Enqueuing", "AddOffsetsToTxn"), debug(4.2, "Sending", "AddOffsetsToTxn"),
                                 metrics(8, 1100, 10, throttle=1400), fenced(12)])
    mechanism = got.row(v.name)["mechanism"]
    assert mechanism.startswith("1x transaction larger than the quota passes within transaction.timeout.ms")
    assert "KAFKA-17455" not in mechanism


def test_after_a_stuck_request_the_backlog_fences_by_an_oversized_transaction(tmp_path):
    # Measured on 3.8.1 at 1.1x: one 30 s stall, then no commit succeeds again: each retry of the backlog
    # (906 records x 1,164 B) is more than 35,000 B/s passes in 10 s, and the coordinator aborts it.
    got, v = measured(tmp_path, [metrics(9, 300, 90), debug(10, "Enqueuing", "AddOffsetsToTxn"),
                                 debug(40, "Sending", "AddOffsetsToTxn"), fenced(40.1), metrics(41, 303, 90),
                                 metrics(45, 1206, 90, throttle=2900), metrics(52, 1206, 90, throttle=3400),
                                 fenced(53.5)])
    mechanism = got.row(v.name)["mechanism"]
    assert mechanism.startswith("1x stuck transactional request (KAFKA-17455: AddOffsetsToTxn waited 30.0 s")
    assert "; 1x transaction larger than the quota passes within transaction.timeout.ms (~1055 KB open" in mechanism


def test_a_wait_as_long_as_the_throttle_it_sat_behind_is_not_kafka_17455(tmp_path):
    got, v = measured(tmp_path, [metrics(1, 100, 10, throttle=6000), debug(2, "Enqueuing", "AddOffsetsToTxn"),
                                 debug(8, "Sending", "AddOffsetsToTxn"), metrics(9, 120, 10, throttle=6000), fenced(12)])
    assert "KAFKA-17455" not in got.row(v.name)["mechanism"]


def test_an_app_that_was_never_fenced_says_so(tmp_path):
    got, v = measured(tmp_path, [metrics(1, 30, 10), debug(2, "Enqueuing", "EndTxn"), debug(2.01, "Sending", "EndTxn"),
                                 metrics(2, 60, 20)])
    row = got.row(v.name)
    assert row["crashes"] == 0 and row["mechanism"] == "not fenced" and row["throttle_max_ms"] == 0


# ---------------------------------------------------------------- quota arithmetic and SPEC

def test_quota_arithmetic_round_trips():
    assert qf.quota_for(1.0) == 33 * (1024 + qa.WIRE_OVERHEAD_BYTES)
    assert qf.quota_for(1 / 1.5, 33, 1024) == round(1.5 * 33 * 1164)
    assert qa.Variant("x", quota=qf.quota_for(1.3)).load_ratio == pytest.approx(1.3, rel=1e-4)
    assert qa.Variant("x", quota=None).load_ratio is None


def test_the_lineup_follows_the_parameters_and_derives_the_variant_values(monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)   # no jars, no compiler here
    assert list(qf.lineup(FENCING.spec.validate())) == ["app", "other_version", "no_quota", "headroom",
                                                         "request_timeout"]
    p = FENCING.spec.validate(transaction_timeout_ms=20000, compare=list(qf.BASELINES), variants=list(qf.VARIANTS))
    roles = qf.lineup(p)
    assert list(roles) == ["app", "other_version", "no_quota", "librdkafka", "headroom", "request_timeout",
                           "transaction_timeout"]
    assert roles["other_version"].version == "4.3.1" and roles["no_quota"].quota is None
    assert roles["request_timeout"].request_timeout_ms == 4000           # a fifth of the transaction timeout
    assert roles["transaction_timeout"].txn_timeout_ms == 60000
    assert roles["headroom"].load_ratio == pytest.approx(1 / 1.5, rel=1e-4)
    control = qf.lineup(FENCING.spec.validate(quota=55000, compare=[], variants=[]))
    assert list(control) == ["app"] and control["app"].load_ratio == pytest.approx(0.698, abs=0.01)
    cells = SWEEP.spec.validate(transaction_timeout_ms=20000)
    assert len(qf.sweep_points(cells)) == 6 and qf.sweep_points({**cells, "sweep_ratios": []}) == []
    assert {v.txn_timeout_ms for v in qf.sweep_points(cells)} == {20000}


def test_the_spec_accepts_any_load_kafka_takes_and_refuses_what_it_cannot(monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)
    for quota in (1024, 55000, 100_000_000):      # 0.7x, 37x, 0.0004x the load: all valid experiments
        assert FENCING.spec.validate(quota=quota)["quota"] == quota
    for lesson, bad, says in [
            (FENCING, {"quota": 1000}, "QUOTA"), (FENCING, {"streams_version": "3.2.0"}, "STREAMS_VERSION.*older"),
            (FENCING, {"other_version": "3.2.0"}, "OTHER_VERSION.*older"),
            (FENCING, {"variants": ["pray"]}, "VARIANTS"), (FENCING, {"compare": "other_version, nope"}, "COMPARE"),
            (FENCING, {"transaction_timeout_ms": 900_001}, "transaction.max.timeout.ms"),
            (SWEEP, {"sweep_ratios": [1.1, 50]}, "SWEEP_RATIOS"), (SWEEP, {"sweep_ratios": []}, "Nothing to run"),
            (SWEEP, {"sweep_versions": ["2.8.0"]}, "SWEEP_VERSIONS.*older"), (SWEEP, {"sweep_parallel": 13}, "app of its own"),
            (FENCING, {"quota_bytes": 1}, "did you mean")]:
        with pytest.raises(LabError, match=says):
            lesson.spec.validate(**bad)


def test_list_parameters_check_each_item_and_take_text():
    spec = Spec(Param("ratios", [0.9, 1.1], "ratios", lo=0.05, hi=20), Param("m", ["a"], "m", choices=("a", "b")))
    assert spec.validate(ratios="1, 2.5", m=("b",)) == {"ratios": [1.0, 2.5], "m": ["b"]}
    assert spec.validate(ratios=[])["ratios"] == []
    with pytest.raises(LabError, match="outside"):
        spec.validate(ratios=[0.01])
    with pytest.raises(LabError, match="subset"):
        spec.validate(m=["c"])


# ---------------------------------------------------------------- exercises

def refused(result, number, answer, match="^Not quite: "):
    """The check said no, with a hint (no traceback): what the learner sees."""
    got = result.check(number, answer)
    assert not got and re.search(match, got.said), (number, answer, got.said)
    return got


def quota_result(tmp_path, fenced_affected: bool = True, variants=("transaction_timeout",)):
    """The app under study (stuck 30 s and fenced, or clean) beside the variants asked for, each clean."""
    p = {"send_rate": 33.0, "record_bytes": 1024, "variants": list(variants), "compare": [], "quota": 35000,
         "transaction_timeout_ms": 10000, "streams_version": "3.8.1", "duration_s": 60}
    roles = {"app": qa.Variant("3.8.1 quota"),
             **{m: qa.Variant(f"3.8.1 {m}", txn_timeout_ms=60000) for m in variants}}
    stuck = [metrics(9, 300, 90, throttle=900), debug(10, "Enqueuing", "AddOffsetsToTxn"),
             debug(40, "Sending", "AddOffsetsToTxn"), fenced(40.1)]
    clean = [metrics(1, 30, 10), debug(2, "Enqueuing", "EndTxn"), debug(2.25, "Sending", "EndTxn"), metrics(2, 60, 20)]
    logs = {}
    for role, v in roles.items():
        logs[v.name] = tmp_path / f"{role}.log"
        logs[v.name].write_text("\n".join(stuck if role == "app" and fenced_affected else clean) + "\n")
    names = [v.name for v in roles.values()]
    main = qa.Measured(list(roles.values()), 60, T0, 60, {n: n for n in names}, logs, {n: [] for n in names},
                       pd.DataFrame(columns=["variant", "t_s", "line"]))
    return FENCING.result(QuotaResult("over_quota", p, "x", None, roles=roles, main=main), **p)


def test_03a_asks_which_release_is_fenced_and_answers_from_its_own_rows():
    """The question names the releases that run under the quota (STREAMS_VERSION and, run beside it, OTHER_VERSION)
    and asks which are fenced: no yes/no bet, its choices producible by the run (nobody, the release from before the
    change, the one after it, both); the answer is read from the two apps' rows."""
    text, choices = qf.question(FENCING.spec.defaults)
    assert "3.8.1" in text and "4.3.1" in text and "1.10x" in text and "45 s" in text, text
    assert choices == ("none of them", "only Kafka Streams 3.8.1", "only Kafka Streams 4.3.1",
                       "every Kafka Streams version")
    assert not re.search(r"\bfix|bug|stuck|KAFKA-", text)
    row = lambda version, crashes: {"version": version, "crashes": crashes}   # noqa: E731
    answer = lambda app, other=None: fencing_answer({"app": app, **({"other_version": other} if other else {})},
                                                    FENCING.spec.defaults)   # noqa: E731
    assert answer(row("3.8.1", 1), row("4.3.1", 0)) == choices[1]
    assert answer(row("3.8.1", 0), row("4.3.1", 0)) == choices[0]
    assert answer(row("3.8.1", 0), row("4.3.1", 1)) == choices[2]
    assert answer(row("3.8.1", 2), row("4.3.1", 1)) == choices[3]
    # the app alone (COMPARE without OTHER_VERSION, as the Mitigate step runs it): asked about it alone
    alone = FENCING.spec.validate(compare=[], quota=55000)
    assert qf.question(alone)[1] == ("none of them", "Kafka Streams 3.8.1") and "0.70x" in qf.question(alone)[0]
    assert answer(row("3.8.1", 0)) == "none of them" and answer(row("3.8.1", 3)) == "Kafka Streams 3.8.1"


class _Rerun:
    """Stands in for the lesson's run() in exercise 2's experiment: records each call, and measures what it is told."""

    def __init__(self, crashes: int):
        self.crashes, self.calls = crashes, []

    def __call__(self, **params):
        self.calls.append(params)
        row = {"crashes": self.crashes, "mechanism": "1x stuck transactional request" if self.crashes else "not fenced",
               "throttle_max_ms": 900.0, "longest_txn_wait_s": 30.0 if self.crashes else 0.9, "output_records": 900,
               "produced": 1485}
        return type("Measured", (), {"row": lambda _self, role: row})()


@pytest.mark.parametrize("fenced_affected, variants", [(True, ("transaction_timeout",)), (False, ())])
def test_the_exercises_take_the_solution_and_refuse_the_tempting_wrong_answer(tmp_path, fenced_affected,
                                                                              variants, monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)
    result = quota_result(tmp_path, fenced_affected, variants)
    rerun = _Rerun(crashes=0)
    monkeypatch.setattr(FENCING, "run", rerun)
    assert result.failed is fenced_affected
    tried = try_exercises(result)
    for number in (1, 2):
        t = tried[number]
        assert t["none"] == "not answered" and t["right"] == "correct", (number, t)
        assert t["wrong"].startswith("Not quite:"), (number, t)
        assert all(said.startswith("Not quite:") for case, said in t.items() if case.startswith("trivial")), t
    assert sorted(tried) == [1, 2], tried   # 03a's own exercises; the transaction budget is 03b's
    assert all(e.closer for e in result.exercises.values())
    solve = {n: e.solution(result) for n, e in result.exercises.items()}
    assert solve[1](30000, 10000, 900) == 30.0 and solve[2] == round(1.5 * 33 * (2048 + qa.WIRE_OVERHEAD_BYTES))
    # this run's stuck request (30 s against a 0.9 s throttle) judges exercise 1 too: only its wait passes
    from lab.scenarios.nb03_quota_driven_fencing.exercises import _stuck
    assert _stuck(result) == ([(30000, 10000, 900.0, 30.0)] if fenced_affected else [])
    assert result.check(1, lambda request_ms, txn_ms, throttle_ms: request_ms / 1000 + 0.5)
    # exercise 2 is an experiment: 03a's app alone at the learner's quota, with records twice the run's, not
    # remembered as the run the exercises judge
    runs = len(rerun.calls)
    assert result.check(2, solve[2] + 1) and len(rerun.calls) == runs + 1
    assert {k: rerun.calls[-1][k] for k in ("quota", "record_bytes", "compare", "variants", "duration_s",
                                            "streams_version", "cluster", "remember")} == {
        "quota": solve[2] + 1, "record_bytes": 2048, "compare": [], "variants": [], "duration_s": 60,
        "streams_version": "3.8.1", "cluster": None, "remember": False}
    load = 33 * (2048 + qa.WIRE_OVERHEAD_BYTES)
    assert result.check(2, round(1.1 * load))   # whatever the measurement says, above the load and within twice it
    # what the notebook shows above each exercise, copied: refused (exercise 2's without running anything)
    copies = [(n, a) for n, e in result.exercises.items() for a in e.printed(result)]
    assert {n for n, _ in copies} == {1, 2} and round(1.5 * 33 * 1164) in [a for _, a in copies], copies
    refused_answers = [(1, 30), (1, lambda r, t, th: t / 1000), (1, lambda r, t, th: r), (1, lambda r, t, th: "30"),
               (1, lambda r, t, th: max(r, t) / 1000), (1, lambda r: 30.0),
               (2, "57618"), (2, 0), (2, 10**9), (2, round(33 * 2048 + 100)), (2, round(load / 1.5)),
               (2, round(1.5 * 33 * 1164)), *copies]
    runs = len(rerun.calls)
    for number, answer in refused_answers:
        refused(result, number, answer)
    assert len(rerun.calls) == runs   # refused before anything runs
    # a quota at which the experiment measured fencing is refused, with what it measured; the second wrong answer
    # adds the closer hint
    monkeypatch.setattr(FENCING, "run", _Rerun(crashes=1))
    got = refused(result, 2, round(1.1 * load), "3.8.1 was fenced .*stuck transactional request")
    assert result.exercises[2].closer in got.message
    shown = []
    result.solution(2, display=shown.append)
    assert f"For this run: `{solve[2]}`" in shown[0].data and "1 / 1.5" in shown[0].data


def test_the_sweep_answers_its_own_question_and_exercise_and_the_fix_runs_the_affected_app_alone(tmp_path,
                                                                                               monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)
    cells = [qa.Variant("3.8.1 x1.3"), qa.Variant("4.3.1 x1.3", version="4.3.1"),
             qa.Variant("confluent-kafka x1.3", client=qa.LOOP, version="3.8.1")]
    stuck = [metrics(8, 270, 90), metrics(9, 300, 90, throttle=900), debug(10, "Enqueuing", "AddOffsetsToTxn"),
             metrics(30, 300, 90), debug(40, "Sending", "AddOffsetsToTxn"), fenced(40.1)]
    clean = [metrics(1, 30, 10), debug(2, "Enqueuing", "EndTxn"), debug(2.25, "Sending", "EndTxn"), metrics(2, 60, 20)]
    logs = {}
    for v in cells:
        logs[v.name] = tmp_path / f"{v.name}.log"
        logs[v.name].write_text("\n".join(stuck if v.name.startswith("3.8.1") else clean) + "\n")
    names = [v.name for v in cells]
    wave = qa.Measured(cells, 45, T0, 45, {n: n for n in names}, logs, {n: [] for n in names},
                       pd.DataFrame(columns=["variant", "t_s", "line"]))
    p = {"sweep_ratios": [1.3], "transaction_timeout_ms": 10000, "send_rate": 33.0, "record_bytes": 1024}
    outcome = QuotaResult("sweep", p, "x", None, sweep=[wave], fix_in_bytecode={"3.8.1": False, "4.3.1": True})
    assert outcome.sweep_fenced() == ["3.8.1"] and outcome.failed
    assert sweep_answer(outcome.as_record(), p) == "only Kafka Streams 3.8.1"
    # the question's choices name clients, never which carries a change; the measured set is named the same way
    versions = ["3.8.1", "4.3.1", qa.LOOP]
    choices = qf.sweep_question({"sweep_ratios": [0.9, 1.3], "sweep_seconds": 45, "sweep_versions": versions})[1]
    assert choices == ("none of them", "only Kafka Streams 3.8.1", "only Kafka Streams 4.3.1",
                       "every Kafka Streams version", "every client, confluent-kafka too")
    assert not [c for c in choices if re.search(r"\bfix", c)]
    assert sweep_answer(outcome.as_record(), {**p, "sweep_versions": versions}) == choices[1]
    assert qa.sweep_label({"4.3.1"}, versions) == choices[2]   # the releases from 3.9.1 on
    assert qa.sweep_label({"4.3.1", qa.LOOP}, versions) not in choices   # none of the choices
    assert qa.sweep_label(set(versions), versions) == choices[4]
    assert qa.sweep_choices(["3.9.1"]) == ("none of them", "Kafka Streams 3.9.1")    # distinct, whatever the clients
    assert qa.sweep_choices(["3.8.1", qa.LOOP]) == ("none of them", "only Kafka Streams 3.8.1",
                                                     "every client, confluent-kafka too")
    assert fencing_answer(outcome.as_record(), p) is None   # no main run: the fencing question was not measured
    assert outcome.verdict().startswith("sweep of 3 apps: fenced at x1.3: 3.8.1")
    sweep = SWEEP.result(outcome, **p)
    # exercise 1, the smallest quota that lets one transaction through: the rule, on other settings and on this run's
    # fenced transaction (3.8.1's, no fix: 30 records open, its transactional request stuck)
    from lab.scenarios.nb03_quota_driven_fencing.exercises import _fenced_transactions, smallest_quota
    assert [case[1:] for case in _fenced_transactions(sweep)] == [(30, 1024, 10000, False)]
    assert sweep.check(1, smallest_quota)
    assert smallest_quota(2000, 200, 4000, True) == 170_000 and smallest_quota(1, 1, 1000, False) == float("inf")
    wire = lambda n, b, t: n * (b + qa.WIRE_OVERHEAD_BYTES) / (t / 1000)   # noqa: E731
    budget = qf.quota_for(1.3) * 10   # the old exercise's answer: the top quota for 10 s
    for answer, words in ((lambda n, b, t, f: wire(n, b, t), "without the fix"),
                          (lambda n, b, t, f: float("inf") if not f else wire(n, b, t) / 1000, "milliseconds"),
                          (lambda n, b, t, f: float("inf") if not f else n * b / (t / 1000), "on the wire"),
                          (lambda n, b, t, f: float("inf") if not f else wire(n, b, t) / 2, "longer to get through"),
                          (lambda n, b, t, f: float("inf") if not f else wire(n, b, t) * 2, "the smallest"),
                          (lambda n, b, t, f: float("inf"), "waits only the throttle"),
                          (lambda n, b, t, f: None, "returned None"), (budget, "not a function"),
                          (lambda *_: budget, "without the fix"), ("none", "not a function")):
        refused(sweep, 1, answer, words)
    assert all(not sweep.check(1, copy) for copy in sweep.exercises[1].printed(sweep))
    fixed = FENCING.mitigate.check(FENCING.spec.defaults, {"transaction_timeout_ms": 60000})
    assert fixed["compare"] == fixed["variants"] == []
    # the sweep's step: the sweep again, every cell at the learner's ratio
    headroom = SWEEP.mitigate.check(SWEEP.spec.defaults, {"sweep_ratios": [0.7]})
    assert headroom["sweep_ratios"] == [0.7]
