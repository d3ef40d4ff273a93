"""lab.doctor: the rules on synthetic facts (no JVM), then one read-only diagnosis of a small risky embedded cluster."""
import json
import subprocess
import sys
import threading
import time

import pytest

from lab.doctor import Diagnosis, diagnose, rules
from lab.doctor.checks import statuses
from lab.errors import LabError

NOW = 1_700_000_000_000
MIN, HOUR, DAY = 60_000, 3_600_000, 86_400_000


def configs(**values) -> dict:
    names = {"offsets_retention_minutes": "offsets.retention.minutes",
             "transactional_id_expiration_ms": "transactional.id.expiration.ms",
             "producer_id_expiration_ms": "producer.id.expiration.ms"}
    return {"1": {names[k]: {"value": str(v), "source": "STATIC_BROKER_CONFIG"} for k, v in values.items()}}


def cluster_facts(*, group_state="Empty", members=(), group_type="Classic", commit_ago=10 * MIN,
                  txn_state="CompleteCommit", txn_idle=5 * MIN, producer_idle=5 * MIN, quota_client=None,
                  clients=(("apache-kafka-java", "4.3.1"),), retention_minutes=1440,
                  topic_retention=14 * DAY) -> dict:
    """One topic `orders` (2 partitions, records 100-400 retained), a group `billing` that committed 250 and 300,
    a transactional id `invoicer`, an idempotent producer 7, and whatever quota and clients are asked for."""
    return {
        "broker_configs": configs(offsets_retention_minutes=retention_minutes,
                                  transactional_id_expiration_ms=7 * DAY, producer_id_expiration_ms=DAY),
        "topics": {"orders": {"partitions": 2, "retention_ms": topic_retention, "cleanup_policy": "delete"}},
        "topic_offsets": {"orders-0": {"earliest": 100, "latest": 400}, "orders-1": {"earliest": 0, "latest": 300}},
        "groups": {"billing": {"type": group_type, "protocol": "consumer", "state": group_state,
                               "members": [{"client_id": c, "host": "/10.0.0.1", "partitions": 1} for c in members],
                               "offsets": {"orders-0": 250, "orders-1": 300}}},
        "commit_log": {"billing": {"orders-0": {"offset": 250, "commit_ms": NOW - commit_ago - MIN},
                                   "orders-1": {"offset": 300, "commit_ms": NOW - commit_ago}}},
        "transactions": {"invoicer": {"state": txn_state, "producer_id": 3, "producer_epoch": 0,
                                      "timeout_ms": 60000, "start_ms": None, "partitions": 0}},
        "transaction_log": {"invoicer": {"producer_id": 3, "epoch": 0, "status": 4,
                                         "last_update_ms": NOW - txn_idle, "start_ms": -1}},
        "producers": {"orders-0": [{"producer_id": 7, "epoch": 0, "last_sequence": 9,
                                    "last_timestamp": NOW - producer_idle, "txn_start_offset": None},
                                   {"producer_id": 3, "epoch": 0, "last_sequence": 0,
                                    "last_timestamp": NOW - txn_idle, "txn_start_offset": None}]},
        "quotas": ([{"entity": {"client-id": quota_client}, "quotas": {"producer_byte_rate": 35000.0}}]
                   if quota_client else []),
        "clients": [{"jmx": "h:1", "listener": "PLAINTEXT", "name": n, "version": v, "connections": 1}
                    for n, v in clients],
    }


HEALTHY = {"group_state": "Stable", "members": ("billing-1",), "txn_idle": 200, "producer_idle": 300,
           "clients": (("apache-kafka-java", "4.3.1"), ("confluent-kafka-python", "2.6.0")),
           "quota_client": "reporting-consumer"}


def by_rule(facts, rule):
    return [f for f in rules.findings(facts, NOW) if f.rule == rule]


def test_a_healthy_cluster_gives_no_finding():
    assert rules.findings(cluster_facts(**HEALTHY), NOW) == []


def test_what_a_group_re_reads_is_counted_in_records_where_the_collector_counted_them():
    """Offsets number transaction markers and aborted records too: the collector's read_committed count wins."""
    counts = {"partitions": {"orders-0": {"records": 270, "before": {"250": 130}},    # offsets 100-400
                             "orders-1": {"records": 280, "before": {"300": 280}}}, "uncounted": [], "stopped": None}
    [f] = by_rule({**cluster_facts(), "group_records": counts}, "offsets-expire")
    assert f.rereads == 410 and "re-reads 410 records (counted" in f.consequence
    assert "50 other offsets hold transaction markers or aborted records" in f.consequence   # 600 offsets, 550 records
    assert "skips the 140 not yet consumed" in f.consequence
    uncounted = {**counts, "partitions": {"orders-0": counts["partitions"]["orders-0"]}, "uncounted": ["orders-1"],
                 "stopped": "bytes"}
    [f] = by_rule({**cluster_facts(), "group_records": uncounted}, "offsets-expire")
    assert f.rereads == 450 and "re-reads up to 450 records (offsets" in f.consequence and "--max-read-mb" in \
        f.consequence


def test_an_empty_classic_group_expires_at_the_earliest_one_retention_after_its_last_commit():
    [f] = by_rule(cluster_facts(), "offsets-expire")
    assert f.when_ms == NOW - 10 * MIN + 1440 * MIN and f.severity == "medium"
    assert "re-reads up to 450 records" in f.consequence      # (250 - 100) + (300 - 0): log start to committed
    assert "skips the 150 not yet consumed" in f.consequence and "earliest it can happen" in f.evidence
    assert f.notebook == "01_quiet_service.ipynb"


def test_an_empty_classic_group_whose_record_says_when_it_emptied_expires_one_retention_after_that():
    facts = {**cluster_facts(), "group_log": {"billing": {"current_state_ms": NOW - 2 * MIN, "protocol_type":
                                                          "consumer", "members": 0}}}
    [f] = by_rule(facts, "offsets-expire")
    assert f.when_ms == NOW - 2 * MIN + 1440 * MIN           # not the last commit's 10 minutes ago
    assert "empty since" in f.evidence and "earliest it can happen" not in f.evidence
    # a group with members is not at risk, whatever its record says
    assert by_rule({**facts, **cluster_facts(group_state="Stable", members=("billing-1",))} |
                   {"group_log": facts["group_log"]}, "offsets-expire") == []


def test_a_consumer_protocol_group_expires_one_retention_after_its_oldest_commit():
    [f] = by_rule(cluster_facts(group_type="Consumer", retention_minutes=1), "offsets-expire")
    assert f.when_ms == NOW - 11 * MIN + MIN and f.severity == "high" and "KIP-848" in f.evidence
    assert "due to expire now" in f.consequence


def test_a_group_with_members_or_without_commits_is_not_at_risk():
    assert by_rule(cluster_facts(group_state="Stable", members=("c1",)), "offsets-expire") == []
    facts = cluster_facts()
    facts["groups"]["billing"]["offsets"] = {}
    assert by_rule(facts, "offsets-expire") == []


def test_unknown_commit_times_say_so_instead_of_guessing():
    facts = {**cluster_facts(), "commit_log": {"error": "TopicAuthorizationException: __consumer_offsets"}}
    [f] = by_rule(facts, "offsets-expire")
    assert f.when_ms is None and "unknown" in f.consequence


def test_an_idle_transactional_id_expires_one_expiration_after_its_last_update():
    [f] = by_rule(cluster_facts(), "transactional-id-expires")
    assert f.when_ms == NOW - 5 * MIN + 7 * DAY and f.severity == "low" and "InvalidPidMapping" in f.consequence
    assert by_rule(cluster_facts(txn_state="Ongoing"), "transactional-id-expires") == []
    assert by_rule(cluster_facts(txn_idle=500), "transactional-id-expires") == []     # commits often: active


def test_idleness_is_measured_when_its_section_was_read_not_when_the_reading_ended():
    # 7 days expire ids silent for a minute (a tenth, at most a minute). Read 50 s after the last update, and the
    # diagnosis ending 20 s later: active when read, so no finding; without the read moment, 70 s: idle.
    slow = {**cluster_facts(txn_idle=70_000, producer_idle=70_000),
            "section_read_ms": {"transaction_log": NOW - 20_000, "producers": NOW - 20_000}}
    assert by_rule(slow, "transactional-id-expires") == [] and by_rule(slow, "producer-id-expires") == []
    assert len(by_rule(cluster_facts(txn_idle=70_000), "transactional-id-expires")) == 1


def test_an_idle_idempotent_producer_expires_but_transactional_ones_are_left_to_their_id():
    found = by_rule(cluster_facts(), "producer-id-expires")
    assert [f.subject for f in found] == ["producer id 7"] and found[0].when_ms == NOW - 5 * MIN + DAY
    # what it meets is read from Kafka's source, not reproduced by a notebook: the finding says so, and names none
    assert "no error since 2.5" in found[0].consequence and "not reproduced" in found[0].consequence
    assert found[0].notebook == ""


@pytest.mark.parametrize("client, fires", [("pricing-StreamThread-1-producer", True),
                                           ("app-StreamThread-2-0_1-producer", True),
                                           ("pricing-StreamThread-1-consumer", False), ("reporting", False)])
def test_a_quota_on_a_streams_eos_producer(client, fires):
    found = by_rule(cluster_facts(quota_client=client), "quota-on-streams-eos-producer")
    assert bool(found) == fires
    if fires:
        assert found[0].severity == "high" and "KAFKA-17455" in found[0].consequence and found[0].when_ms is None


def test_the_default_client_quota_matters_only_where_streams_apps_run():
    assert by_rule(cluster_facts(quota_client="<default>"), "quota-on-streams-eos-producer") == []
    streams = cluster_facts(quota_client="<default>", group_state="Stable", members=("pricing-StreamThread-1-consumer",))
    [f] = by_rule(streams, "quota-on-streams-eos-producer")
    assert "every client id" in f.evidence


def test_old_java_clients_map_to_the_bugs_this_course_reproduces():
    found = by_rule(cluster_facts(clients=(("apache-kafka-java", "3.3.1"),)), "client-version-bug")
    bugs = {f.subject.split("(")[1].rstrip(")"): f for f in found}
    assert set(bugs) == {"KAFKA-14624", "KAFKA-17455", "KAFKA-16699"}
    assert bugs["KAFKA-14624"].notebook == "04_store_reads.ipynb"
    assert all("if this client is a Kafka Streams app" in f.consequence for f in found)
    assert {f.subject for f in by_rule(cluster_facts(clients=(("apache-kafka-java", "3.9.0"),)),
                                       "client-version-bug")} == {"clients 3.9.0 (KAFKA-17455)"}
    assert by_rule(cluster_facts(clients=(("apache-kafka-java", "3.9.1"),)), "client-version-bug") == []


def streams_group(instances=2, standby=0, changelogs=("stock-counts-changelog",), group_type="Streams",
                  setting=("0", "DEFAULT_CONFIG")) -> dict:
    """The facts with a streams group `stock` (KIP-1071) of `instances` instances holding 6 active tasks."""
    members = [{"client_id": f"stock-{i}", "host": "/10.0.0.1", "process_id": f"p{i}", "active": 6 // instances,
                "standby": standby} for i in range(instances)]
    group = {"type": group_type, "protocol": "streams", "state": "Stable", "members": members,
             "changelogs": list(changelogs)}
    if setting:
        group["standby_replicas"] = {"value": setting[0], "source": setting[1]}
    facts = cluster_facts(**HEALTHY)
    return {**facts, "groups": {**facts["groups"], "stock": group}}


def test_a_streams_group_of_several_instances_with_state_and_no_standby_is_found():
    [f] = by_rule(streams_group(), "streams-group-without-standbys")
    assert f.subject == "group stock" and f.severity == "low" and f.notebook == "04_store_reads.ipynb"
    assert "2 instances, 6 active and 0 standby tasks" in f.evidence, f.evidence
    assert "stock-counts-changelog" in f.evidence and "streams.num.standby.replicas=0 (DEFAULT_CONFIG)" in f.evidence
    assert "num.standby.replicas is ignored" in f.consequence and "restores its stores" in f.consequence
    assert "not read" in by_rule(streams_group(setting=None), "streams-group-without-standbys")[0].evidence
    # standbys placed, one instance (no other to hold one), no state, or a classic group: nothing to say
    for facts in (streams_group(standby=3), streams_group(instances=1), streams_group(changelogs=()),
                  streams_group(group_type="Classic")):
        assert by_rule(facts, "streams-group-without-standbys") == [], facts["groups"]["stock"]


def test_report_sorts_by_severity_then_time_and_renders():
    facts = {**cluster_facts(quota_client="x-StreamThread-1-producer"), "clients": None}   # no --jmx
    d = Diagnosis(rules.findings(facts, NOW), now_ms=NOW, bootstrap="b:9092", checks=statuses(facts))
    assert [f.severity for f in d.findings] == sorted((f.severity for f in d.findings), key=rules_order)
    assert list(d.table().columns)[:3] == ["severity", "rule", "subject"]
    assert "offsets-expire" in d.text() and "skipped  client-version-bug: client versions need --jmx" in d.text()
    record = json.loads(json.dumps(d.as_record()))
    assert record["findings"][0]["rule"] == "quota-on-streams-eos-producer"


def rules_order(severity):
    return ("high", "medium", "low").index(severity)


@pytest.mark.parametrize("risky", [True, False])
def test_notebook_08s_exercises_judge_from_the_run_and_refuse_the_tempting_answers(tmp_path, risky):
    """The result of notebook 08, on a history written here: two offsets re-read (risky) or none, one new record;
    the doctor read the group at 250 and 300, the topic's log starting at 100 and 0."""
    from lab.doctor.report import Diagnosis
    from lab.toolbox import Timeline
    from lab.record.history import History
    from lab.scenarios.nb08_diagnose_your_cluster.diagnose import lesson
    from lab.scenarios.nb08_diagnose_your_cluster.diagnose_report import DiagnoseResult
    history = History(tmp_path, "r")
    for incarnation, offset in [(0, 0), (0, 1)] + [(1, 0), (1, 1)] * risky + [(1, 2)]:
        history.log("read", incarnation=incarnation, partition=0, offset=offset)
    facts = cluster_facts(**({} if risky else HEALTHY))
    mine = [f for f in rules.findings(facts, NOW) if f.rule == "offsets-expire"] if risky else []
    audit = type("Audit", (), {"counts": {"reprocessed_after_reset": 2 if risky else 0}})()
    outcome = DiagnoseResult("diagnose", {}, "r", Timeline(0.0), diagnosis=Diagnosis(mine, facts=facts),
                             verified={"audit": audit}, mine=mine, subjects={"group": "billing", "topic": "orders"},
                             history=history)
    r = lesson.result(outcome, setups=["consumer_leaves"] if risky else [], messages=40)
    assert r.offsets_at_diagnosis() == {"committed": {0: 250, 1: 300}, "log_start": {0: 100, 1: 0}}
    assert r.predicted_rereads() == (150 + 300 if risky else None)   # the doctor's own prediction, when it made one
    for n, exercise in lesson.exercises.items():
        assert r.check(n, exercise.solution(r))
        wrong = r.check(n, exercise.wrong(r))
        assert not wrong and wrong.said.startswith("Not quite: "), wrong
    count_rereads = lesson.exercises[2].solution(r)
    assert count_rereads(r.reads()) == (2 if risky else 0)   # a function: this run's count is what it returns
    # copies of this run's numbers, nothing, and rules that skip the mechanism: a cross and a hint, never a pass
    this_run = 2 if risky else 0
    for n, answer in [(1, "450"), (1, 450), (1, 0), (1, "none"), (1, lambda c, s: None),
                      (1, lambda c, s: sum(c.values()) - 100), (1, lambda c, s: sum(c[p] - s[p] for p in c)),
                      (2, this_run), (2, 0), (2, "none"), (2, ""), (2, [2]), (2, lambda reads: this_run),
                      (2, lambda reads: len(set(reads[reads.incarnation == 1].offset)
                                            & set(reads[reads.incarnation == 0].offset)))]:
        checked = r.check(n, answer)
        assert not checked and checked.said.startswith("Not quite: "), (n, answer, checked)
    # What the notebook prints above each (the predicted and observed re-reads, MESSAGES), in functions that return
    # it whatever they are given, or on this run's offsets or history only (0 elsewhere). On a run whose group
    # committed elsewhere than the check's own other case (here it sits on it: 250 and 300), as a notebook's does.
    facts["groups"]["billing"]["offsets"] = {"orders-0": 120, "orders-1": 30}
    for tp, offset in facts["groups"]["billing"]["offsets"].items():
        facts["commit_log"]["billing"][tp]["offset"] = offset
    mine = [f for f in rules.findings(facts, NOW) if f.rule == "offsets-expire"] if risky else []
    elsewhere = lesson.result(DiagnoseResult("diagnose", {}, "r", Timeline(0.0), diagnosis=Diagnosis(mine, facts=facts),
                                             verified={"audit": audit}, mine=mine, history=history,
                                             subjects={"group": "billing", "topic": "orders"}),
                              setups=r.params["setups"], messages=40)
    assert elsewhere.predicted_rereads() == (20 + 30 if risky else None)
    for n, exercise in lesson.exercises.items():
        copies = exercise.printed(elsewhere)
        assert len(copies) == (2 * 3 if risky else 2), (n, copies)   # 50 predicted, 2 observed, 40 MESSAGES
        for copy in copies:
            checked = elsewhere.check(n, copy)
            assert not checked and checked.said.startswith("Not quite: "), (n, copy, checked)


@pytest.mark.parametrize("kwargs, words", [({"bootstrap": "no-port"}, "not host:port"),
                                           ({"bootstrap": "h:9092", "jmx": "h"}, "jmx"),
                                           ({"bootstrap": "h:9092", "timeout_s": 0}, "timeout_s")])
def test_bad_parameters_give_one_clear_error_before_anything_starts(kwargs, words):
    with pytest.raises(LabError, match=words):
        diagnose(**kwargs)


def test_no_bootstrap_is_a_usage_error_even_with_the_lessons_variable_set(monkeypatch):
    monkeypatch.setenv("KAFKA_LAB_BOOTSTRAP", "127.0.0.1:9092")   # the lessons' setting is never the doctor's cluster
    with pytest.raises(LabError, match="--bootstrap host:port"):
        diagnose()


# ------------------------------------------------------------------------------------------- real Kafka (JVM)

def test_unreachable_bootstrap_and_unknown_properties_key_exit_2_and_bad_arguments_4(tmp_path):
    from lab.runtime.ports import free_port
    cli = [sys.executable, "-m", "lab", "doctor", "--bootstrap", f"127.0.0.1:{free_port()}", "--timeout", "3",
           "--quiet"]
    run = subprocess.run(cli, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "step 'connect'" in run.stderr
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\nsasl.mechanismz=PLAIN\n")
    run = subprocess.run([*cli, "--command-config", str(props)], check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "step 'config'" in run.stderr and "sasl.mechanismz" in run.stderr
    for bad in (["--bootstrap", "no-port"], ["--bootstrap", "h:1", "--fail-on", "critical"],
                ["--bootstrap", "h:1", "--metrics", "9999"], ["--bootstrap", "h:1", "--command-config", "/no/such"]):
        # bad arguments: their own exit code, nothing read
        run = subprocess.run([sys.executable, "-m", "lab", "doctor", *bad], capture_output=True, text=True, timeout=60)
        assert run.returncode == 4 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr


def test_diagnosis_of_a_risky_cluster_finds_every_risk_and_writes_nothing(tmp_path):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import NewTopic

    from lab.cluster import KafkaCluster
    from lab.runtime.ports import free_port
    from lab.runtime.programs import JavaProgram
    config = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "600000",
              "transactional.id.expiration.ms": "30000", "producer.id.expiration.ms": "30000",
              "transaction.remove.expired.transaction.cleanup.interval.ms": "600000"}
    with KafkaCluster(name="doctor-test", broker_config=config, jmx_port=free_port(), folder=tmp_path / "kafka") as kc:
        admin = kc.admin()
        for f in admin.create_topics([NewTopic("orders", 2, 1), NewTopic("invoicer", 1, 1),
                                                NewTopic("prices", 1, 1), NewTopic("stock-in", 2, 1),
                                                NewTopic("stock-out", 1, 1)]).values():
            f.result()
        # Two instances of a counting app (a store, so a changelog) on the streams group protocol (KIP-1071), asking
        # for a standby of their own: the group's config, left at the brokers' default, gives them none
        stock = [JavaProgram(f"stock-{i}", "4.3.1", "StaleStandbyWorker", ["StaleStandbyWorker.java", "Lab.java"],
                             properties={"bootstrap.servers": kc.bootstrap, "application.id": "stock",
                                         "group.protocol": "streams", "num.standby.replicas": 1,
                                         "lab.input.topic": "stock-in", "lab.output.topic": "stock-out",
                                         "lab.caching": "true", "lab.instance": i, "state.dir": tmp_path / f"s{i}"},
                             folder=tmp_path, heap="192m") for i in (1, 2)]
        for app in stock:
            app.start()
        producer = Producer({"bootstrap.servers": kc.bootstrap, "enable.idempotence": True, "log_level": 0})
        for i in range(30):
            producer.produce("orders", str(i).encode(), partition=i % 2)
        producer.flush(30)
        before_commit = int(time.time() * 1000)
        consume_and_leave({"bootstrap.servers": kc.bootstrap, "log_level": 0}, "billing", "orders", 30)
        after_commit = int(time.time() * 1000)
        kc.set_quota("pricing-StreamThread-1-producer", producer_byte_rate=35000)
        idle = JavaProgram("invoicer", "3.3.1", "IdleTransactionalProducer",
                           ["IdleTransactionalProducer.java", "Lab.java"],
                           properties={"bootstrap.servers": kc.bootstrap, "transactional.id": "invoicer",
                                       "lab.topic": "invoicer", "lab.go.file": tmp_path / "never"},
                           folder=tmp_path, streams=False, heap="128m")
        stop = threading.Event()
        sender = threading.Thread(target=send_steadily, args=(kc.bootstrap, "pricing-StreamThread-1-producer",
                                                              "prices", stop))
        idle.start()
        try:
            deadline = time.monotonic() + 90
            while not all(app.process.grep('"active": ?\\["0_') for app in stock) and time.monotonic() < deadline:
                time.sleep(0.2)   # each instance RUNNING with a task of its own: the broker assigned both
            assert all(app.process.grep('"active": ?\\["0_') for app in stock), stock[0].process.log()[-2000:]
            deadline = time.monotonic() + 60
            while not idle.process.grep('"kind": ?"idle"') and time.monotonic() < deadline:
                time.sleep(0.2)
            assert idle.process.grep('"kind": ?"idle"'), idle.process.log()[-2000:]
            time.sleep(3.5)       # idle longer than a tenth of the 30 s expirations: counted as idle
            # a client under the quota keeps sending, about 5 kB/s, all through the diagnosis however long a loaded
            # machine makes it: the brokers' rate (an 11 s window) then always has it
            sender.start()
            time.sleep(2)
            snapshot = read_only_snapshot(kc, admin, TopicPartition)
            lines = []
            d = diagnose(kc.bootstrap, jmx=kc.jmx, progress=lines.append)
            gate_and_monitor(kc)
            assert read_only_snapshot(kc, admin, TopicPartition) == snapshot
        finally:
            stop.set()
            if sender.ident:
                sender.join(30)
            idle.stop()
            for app in stock:
                app.stop()
    assert any("__consumer_offsets: 1/1 partition(s)" in line for line in lines), lines
    assert d.unreadable == {}, d.unreadable
    found = {f.rule: [g for g in d.findings if g.rule == f.rule] for f in d.findings}
    assert set(found) == {"offsets-expire", "transactional-id-expires", "producer-id-expires",
                          "quota-on-streams-eos-producer", "client-version-bug", "streams-group-without-standbys"}, \
        d.text()
    [standbys] = found["streams-group-without-standbys"]
    assert standbys.subject == "group stock" and "2 instances" in standbys.evidence, standbys
    assert "stock-counts-changelog" in standbys.evidence and "0 standby tasks" in standbys.evidence, standbys
    assert "streams.num.standby.replicas=0" in standbys.evidence, standbys
    [offsets] = found["offsets-expire"]
    assert offsets.subject == "group billing" and "re-reads 30 records (counted" in offsets.consequence
    assert before_commit + MIN <= offsets.when_ms <= after_commit + MIN and offsets.severity == "high"
    emptied = d.facts["group_log"]["billing"]["current_state_ms"]    # the group's own record of when it emptied
    assert before_commit <= emptied <= after_commit and offsets.when_ms == emptied + MIN, d.facts["group_log"]
    assert "empty since" in offsets.evidence, offsets.evidence
    [txn] = found["transactional-id-expires"]
    started = d.facts["transaction_log"]["invoicer"]["last_update_ms"]
    assert txn.when_ms == started + 30000 and before_commit <= started <= d.now_ms
    assert all("producer.id.expiration.ms=30000" in f.evidence for f in found["producer-id-expires"])   # 3.4+
    [quota] = found["quota-on-streams-eos-producer"]
    assert quota.subject == "client id pricing-StreamThread-1-producer" and quota.quota_bytes_s == 35000
    assert 0 < 35000 - quota.headroom_bytes_s < 35000, quota   # its measured rate, from the brokers' JMX
    assert "clients 3.3.1 (KAFKA-14624)" in {f.subject for f in found["client-version-bug"]}


def test_on_a_transactional_topic_what_a_group_would_re_read_is_counted_in_records(tmp_path):
    """20 records in two committed transactions over 3 partitions, 5 in an aborted one between them: the offsets
    also number the aborted records and a marker per partition and transaction; a restart re-reads the 20."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from lab.cluster import KafkaCluster
    with KafkaCluster(name="doctor-records", folder=tmp_path / "kafka") as kc:
        admin = kc.admin()
        admin.create_topics([NewTopic("payments", 3, 1)])["payments"].result()
        producer = Producer({"bootstrap.servers": kc.bootstrap, "transactional.id": "payer", "log_level": 0})
        producer.init_transactions(30)
        for values, commit in ((range(0, 10), True), (range(100, 105), False), (range(10, 20), True)):
            producer.begin_transaction()
            for i in values:
                producer.produce("payments", str(i).encode(), partition=i % 3)
            producer.flush(30)   # in the log before the abort (an abort drops what is still queued)
            producer.commit_transaction(30) if commit else producer.abort_transaction(30)
        consume_and_leave({"bootstrap.servers": kc.bootstrap, "log_level": 0, "isolation.level": "read_committed"},
                          "ledger", "payments", 20)
        d = diagnose(kc.bootstrap, timeout_s=10)
        # the same from the doctor alone: none of the course's packages importable, its flags and exit codes
        from tests.test_doctor_deploy import alone
        gate = alone("--bootstrap", kc.bootstrap, "--format", "json", "--fail-on", "low", "--quiet")
    assert gate.returncode == 1, gate.stderr   # a week's retention: a low finding, at the gate's severity
    assert [f["rereads"] for f in json.loads(gate.stdout)["findings"] if f["rule"] == "offsets-expire"] == [20]
    [f] = [f for f in d.findings if f.rule == "offsets-expire"]
    ends = d.facts["topic_offsets"]
    offsets = sum(ends[f"payments-{p}"]["latest"] - ends[f"payments-{p}"]["earliest"] for p in range(3))
    assert offsets == 20 + 5 + 3 * 3, ends   # the records, the aborted ones, a marker per partition and transaction
    assert f.rereads == 20 and "re-reads 20 records (counted" in f.consequence, f.consequence
    assert f"{offsets - 20} other offsets hold transaction markers or aborted records" in f.consequence
    assert d.facts["group_records"]["uncounted"] == [] and d.facts["group_records"]["stopped"] is None


def consume_and_leave(config: dict, group: str, topic: str, records: int) -> None:
    """A consumer of `group` reads `records` from the start of `topic`, commits and leaves: the group is Empty with
    committed offsets."""
    from confluent_kafka import Consumer
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    while seen < records:
        message = consumer.poll(1)
        seen += message is not None and message.error() is None
    consumer.commit(asynchronous=False)
    consumer.close()


def gate_and_monitor(kc):
    """The command line on the risky cluster: the gate's exit codes and formats, then a monitor scraped twice."""
    import xml.etree.ElementTree as ET

    import jsonschema

    from lab.runtime.ports import free_port
    from tests.test_doctor_gate import sarif_schema
    cli = [sys.executable, "-m", "lab", "doctor", "--bootstrap", kc.bootstrap, "--jmx", kc.jmx, "--quiet"]
    gate = subprocess.run([*cli, "--fail-on", "high", "--format", "sarif"], capture_output=True, text=True,
                          timeout=120)
    assert gate.returncode == 1, gate.stderr       # HIGH findings: the pipeline fails
    log = json.loads(gate.stdout)
    jsonschema.validate(log, sarif_schema())
    assert {r["ruleId"] for r in log["runs"][0]["results"]} >= {"offsets-expire", "quota-on-streams-eos-producer"}
    report = subprocess.run([*cli, "--fail-on", "never", "--format", "junit"], capture_output=True, text=True,
                            timeout=120)
    assert report.returncode == 0, report.stderr
    cases = ET.fromstring(report.stdout).findall("./testsuite/testcase")
    assert len(cases) == 6 and all(c.find("failure") is not None for c in cases), report.stdout   # a finding each
    port = free_port()
    monitor = subprocess.Popen([*cli, "--watch", "5", "--metrics", str(port), "--format", "json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first, _ = scrape_until(port, 'kafka_lab_doctor_seconds_until_expiry{rule="offsets-expire"', monitor)
        time.sleep(3)
        second, text = scrape_until(port, 'kafka_lab_doctor_seconds_until_expiry{rule="offsets-expire"', monitor)
        assert "kafka_lab_doctor_up 1.0" in text
        assert first - 4 < second < first - 2, (first, second)   # the time left goes down as the clock runs
    finally:
        monitor.terminate()
        out, err = monitor.communicate(timeout=60)
    assert monitor.returncode == 0, err
    assert json.loads(out.splitlines()[0])["findings"], out[:500]   # one JSON document a line per diagnosis


def scrape_until(port: int, prefix: str, process, timeout: float = 90) -> tuple[float, str]:
    """The value of the first metric line starting with `prefix` once the monitor serves it, and the whole page."""
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            line = next((l for l in text.splitlines() if l.startswith(prefix)), None)
            if line:
                return float(line.split()[-1]), text
        except OSError:   # not serving yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"no {prefix} metric within {timeout} s")


def send_steadily(bootstrap: str, client_id: str, topic: str, stop) -> None:
    """1,000 bytes every 0.2 s until stop is set: a producer well under a 35 kB/s quota, never idle."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "client.id": client_id})
    while not stop.wait(0.2):
        producer.produce(topic, b"x" * 1000)
        producer.poll(0)
    producer.flush(30)


def read_only_snapshot(kc, admin, TopicPartition):
    """What a diagnosis must not change: topics, end offsets, groups and their committed offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    topics = sorted(admin.list_topics(timeout=10).topics)
    groups = sorted(g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid)
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("billing")])["billing"].result()
    from lab.toolbox.admin import topic_offsets
    return (topics, groups, sorted((tp.topic, tp.partition, tp.offset) for tp in committed.topic_partitions),
            topic_offsets(admin, "orders", 2), topic_offsets(admin, "invoicer", 1))


# Describe rights only (no READ anywhere): what an engineer's monitoring principal often has.
DESCRIBE_ONLY = {"BROKER": ["DESCRIBE", "DESCRIBE_CONFIGS"], "GROUP": ["DESCRIBE"],
                 "TOPIC": ["DESCRIBE", "DESCRIBE_CONFIGS"], "TRANSACTIONAL_ID": ["DESCRIBE"]}


def test_on_a_secured_cluster_a_describe_only_principal_gets_a_partial_diagnosis_naming_the_acls(tmp_path,
                                                                                                 monkeypatch):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from lab.cluster import KafkaCluster
    from lab.config import CLIENT_PROPERTIES_ENV
    from lab.connection import kafka_config
    users = {"ops": "ops-secret-1", "stranger": "stranger-secret-1", "monitor": "monitor-secret-1"}
    with KafkaCluster(name="doctor-acl", sasl_users=users, acls=True, folder=tmp_path / "kafka") as kc:
        kc.allow_all("ops")
        kc.allow("monitor", DESCRIBE_ONLY)
        as_ops = lambda **more: kafka_config(kc.bootstrap, {"log_level": 0, **more}, security=kc.client_security("ops"))
        admin = kc.admin()   # kept alive until the futures resolve
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result()
        producer = Producer(as_ops(**{"transactional.id": "invoicer"}))
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(10):
            producer.produce("orders", str(i).encode())
        producer.commit_transaction(30)
        consume_and_leave(as_ops(), "billing", "orders", 10)
        monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(kc.client_properties_file("ops")))
        full = diagnose(kc.bootstrap)
        monitor_properties = kc.client_properties_file("monitor")
        monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(monitor_properties))
        partial = diagnose(kc.bootstrap)
        cli = subprocess.run([sys.executable, "-m", "lab", "doctor", "--bootstrap", kc.bootstrap, "--command-config",
                              str(monitor_properties), "--quiet"], capture_output=True, text=True, timeout=120)
        monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(kc.client_properties_file("stranger")))
        nothing = diagnose(kc.bootstrap)
        wrong = tmp_path / "wrong.properties"
        wrong.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                         "sasl.username=ops\nsasl.password=not-the-password\n")
        monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(wrong))
        with pytest.raises(LabError) as caught:
            diagnose(kc.bootstrap)
    assert full.unreadable == {} and not full.partial, full.text()
    assert {f.rule for f in full.findings} == {"offsets-expire"}   # a day's retention: the group's offsets, later
    # Describe rights: what needs READ is named, one line each, and the rest is still read and reported
    state = {c.rule: c for c in partial.checks}
    assert state["offsets-expire"].state == "partial" and "READ on the topic __consumer_offsets" in \
        state["offsets-expire"].why, partial.text()
    assert state["transactional-id-expires"].state == "not run"
    assert "READ on the topic __transaction_state" in state["transactional-id-expires"].why
    assert state["producer-id-expires"].state == "not run" and "READ on the topics" in state["producer-id-expires"].why
    assert state["quota-on-streams-eos-producer"].state == "ran" and state["client-version-bug"].state == "skipped"
    [offsets] = partial.findings
    assert offsets.subject == "group billing" and offsets.when_ms is None and offsets.rereads in (10, 11)   # + marker
    assert partial.facts["transactions"]["invoicer"]["state"] == "CompleteCommit"   # DESCRIBE on the id: listed
    assert cli.returncode == 3 and "Traceback" not in cli.stderr, cli.stderr     # partial, said by the exit code
    assert "not run  transactional-id-expires: transaction_log: needs READ on the topic __transaction_state" in \
        cli.stdout.replace("\n  ", " "), cli.stdout
    # A user without ACLs: what needs cluster rights or the internal topics is named, the rest is still read.
    assert {"broker_configs", "quotas", "commit_log", "transaction_log"} <= set(nothing.unreadable), nothing.unreadable
    assert all("Authorization" in nothing.unreadable[s] and "needs" in nothing.unreadable[s]
               for s in ("broker_configs", "quotas", "commit_log")), nothing.unreadable
    assert "topics" not in nothing.unreadable and nothing.facts["topics"] == {}
    assert {c.rule: c.state for c in nothing.checks}["quota-on-streams-eos-producer"] == "not run"
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "step 'connect'" in message and "authentication failed" in message
    assert "not-the-password" not in message
