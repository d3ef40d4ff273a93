"""The doctor as a monitor: the Prometheus alert rules (promtool's checks and unit tests) and the Grafana dashboard
(its structure, every PromQL expression parsed by promtool, every metric one the doctor exports), docs/doctor/."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lab.doctor.checks import statuses
from lab.doctor.monitor import DiagnosisCollector
from lab.doctor.report import Diagnosis, Finding

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "docs" / "doctor"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian's prometheus "
                                                             "package: `make tools` as root installs it)")


def exported_metrics() -> set[str]:
    """Every metric family the doctor's collector serves, after a diagnosis with a finding of each kind."""
    findings = [Finding("offsets-expire", "high", "group billing", "e", "c", 1_700_000_000_000, "01.ipynb"),
                Finding("quota-on-streams-eos-producer", "high", "client id x", "e", "c", None, "03a.ipynb",
                        quota_bytes_s=35000.0, headroom_bytes_s=1000.0)]
    collector = DiagnosisCollector()
    collector.update(Diagnosis(findings, now_ms=1_700_000_000_000, bootstrap="b:9092", checks=statuses({})))
    return {family.name for family in collector.collect()}


def promql_used(text: str) -> set[str]:
    return set(re.findall(r"\bkafka_lab_doctor_\w+", text))


def test_every_metric_the_rules_and_the_dashboard_use_is_one_the_doctor_exports():
    exported = exported_metrics()
    assert {"kafka_lab_doctor_up", "kafka_lab_doctor_seconds_until_expiry",
            "kafka_lab_doctor_check_missing"} <= exported
    for name in ("alerts.yml", "alerts_test.yml", "dashboard.json"):
        used = promql_used((MONITORING / name).read_text())
        assert used and used <= exported, (name, sorted(used - exported))
    # the dashboard shows every metric but the attempt time (the up panel covers it)
    assert exported - promql_used((MONITORING / "dashboard.json").read_text()) == \
        {"kafka_lab_doctor_last_attempt_timestamp_seconds"}


@needs_promtool
def test_the_alert_rules_pass_promtool_check_and_their_unit_tests():
    check = subprocess.run([PROMTOOL, "check", "rules", "alerts.yml"], cwd=MONITORING, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 6 rules found" in check.stdout, check.stdout + check.stderr
    tested = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=MONITORING, capture_output=True,
                            text=True, timeout=60)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    # what the issue asks alerts for: a finding about to expire, the diagnosis failing or stale, a check not run
    names = set(re.findall(r"alert: (\w+)", (MONITORING / "alerts.yml").read_text()))
    assert {"KafkaDoctorExpiryWithinAnHour", "KafkaDoctorCannotReadCluster", "KafkaDoctorDiagnosisStale",
            "KafkaDoctorCheckIncomplete"} <= names
    assert names <= set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts_test.yml").read_text()))


@needs_promtool
def test_a_wrong_expectation_fails_the_unit_tests(tmp_path):
    """The unit tests can fail: an expected summary changed by one word is reported."""
    shutil.copy(MONITORING / "alerts.yml", tmp_path)
    text = (MONITORING / "alerts_test.yml").read_text()
    (tmp_path / "alerts_test.yml").write_text(text.replace("offsets-expire in less than an hour",
                                                           "offsets-expire in less than a day", 1))
    tested = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert tested.returncode != 0 and "FAILED" in tested.stdout + tested.stderr


def dashboard() -> dict:
    return json.loads((MONITORING / "dashboard.json").read_text())


def test_the_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus():
    d = dashboard()
    assert d["title"] and d["uid"] == "kafka-lab-doctor" and isinstance(d["schemaVersion"], int)
    [variable] = d["templating"]["list"]
    assert variable == {**variable, "name": "datasource", "type": "datasource", "query": "prometheus"}
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)) >= 6
    for p in d["panels"]:
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0 and p["title"] and p["description"], p["title"]
        assert p["type"] in {"stat", "table", "timeseries", "state-timeline"}, p["type"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"] and all(t["expr"] and t["datasource"] == p["datasource"] for t in p["targets"])
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]


@needs_promtool
def test_every_dashboard_expression_is_promql_that_promtool_parses(tmp_path):
    exprs = [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr_{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard_rules.json").write_text(json.dumps(rules))   # YAML is a superset of JSON
    check = subprocess.run([PROMTOOL, "check", "rules", "dashboard_rules.json"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0 and f"SUCCESS: {len(exprs)} rules found" in check.stdout, check.stdout + check.stderr
    (tmp_path / "broken.json").write_text(json.dumps({"groups": [{"name": "d", "rules": [
        {"record": "x", "expr": "kafka_lab_doctor_up{"}]}]}))
    broken = subprocess.run([PROMTOOL, "check", "rules", "broken.json"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert broken.returncode != 0   # a check that can fail
