"""The doctor as a monitor: diagnose again every period, and serve the risks as Prometheus metrics.

The time left before a finding bites is computed when Prometheus scrapes, from the last diagnosis, so it goes down
between two diagnoses too. Series of findings that are gone disappear with the next diagnosis.
"""
from __future__ import annotations

import threading
import time

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

from ..errors import LabError
from .report import UsageError

PREFIX = "kafka_lab_doctor"


class DiagnosisCollector:
    """Prometheus metrics of the last diagnosis (and whether the last attempt could read the cluster)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.diagnosis = None
        self.up = 0
        self.attempted_s = 0.0

    def update(self, diagnosis=None) -> None:
        """A new diagnosis, or None when the cluster could not be read (the last findings stay, `up` drops)."""
        with self._lock:
            self.up = int(diagnosis is not None)
            self.attempted_s = time.time()
            if diagnosis is not None:
                self.diagnosis = diagnosis

    def collect(self):
        with self._lock:
            d, up, attempted = self.diagnosis, self.up, self.attempted_s
        yield GaugeMetricFamily(f"{PREFIX}_up", "1 when the last diagnosis could read the cluster, else 0", value=up)
        yield GaugeMetricFamily(f"{PREFIX}_last_attempt_timestamp_seconds", "When the doctor last tried to read the "
                                "cluster (Unix time)", value=attempted)
        if d is None:
            return
        yield GaugeMetricFamily(f"{PREFIX}_last_diagnosis_timestamp_seconds", "When the last diagnosis read the "
                                "cluster (Unix time)", value=d.now_ms / 1000)
        yield GaugeMetricFamily(f"{PREFIX}_diagnosis_seconds", "How long the last diagnosis took", value=d.seconds)
        findings = GaugeMetricFamily(f"{PREFIX}_findings", "Findings of the last diagnosis, by severity",
                                     labels=["severity"])
        for severity in ("high", "medium", "low"):
            findings.add_metric([severity], sum(f.severity == severity for f in d.findings))
        yield findings
        until = GaugeMetricFamily(f"{PREFIX}_seconds_until_expiry", "Seconds until the finding's offsets or id "
                                  "expire (negative: overdue)", labels=["rule", "subject", "severity"])
        now_s = time.time()
        for f in d.findings:
            if f.when_ms is not None:
                until.add_metric([f.rule, f.subject, f.severity], f.when_ms / 1000 - now_s)
        yield until
        quota = GaugeMetricFamily(f"{PREFIX}_quota_bytes_per_second", "A producer byte-rate quota that can throttle "
                                  "a Streams exactly-once producer", labels=["subject"])
        headroom = GaugeMetricFamily(f"{PREFIX}_quota_headroom_bytes_per_second", "That quota minus what its "
                                     "Streams producers send now (needs --jmx)", labels=["subject"])
        for f in d.findings:
            if f.quota_bytes_s is not None:
                quota.add_metric([f.subject], f.quota_bytes_s)
            if f.headroom_bytes_s is not None:
                headroom.add_metric([f.subject], f.headroom_bytes_s)
        yield quota
        yield headroom
        complete = GaugeMetricFamily(f"{PREFIX}_check_complete", "1 when the check ran on everything it reads, 0 "
                                     "when it ran in part or not at all (see _check_missing)", labels=["check",
                                                                                                        "state"])
        missing = GaugeMetricFamily(f"{PREFIX}_check_missing", "1 for each check that could not read all it needs, "
                                    "with what it needs", labels=["check", "needs"])
        for c in d.checks:
            complete.add_metric([c.rule, c.state], int(c.complete))
            if not c.complete:
                missing.add_metric([c.rule, c.why[:300]], 1)
        yield complete
        yield missing


def serve(address: str) -> DiagnosisCollector:
    """Serve the metrics on `address` ("PORT" or "HOST:PORT"; the host defaults to 127.0.0.1) from now on."""
    host, _, port = address.rpartition(":")
    collector = DiagnosisCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    start_http_server(int(port), addr=host or "127.0.0.1", registry=registry)
    return collector


def watch(diagnose_once, period_s: float, on_result, stop: threading.Event | None = None) -> None:
    """Call `diagnose_once()` every `period_s` seconds (from the start of one to the next) until `stop` is set;
    `on_result(diagnosis or None, error or None)` after each."""
    stop = stop or threading.Event()
    while not stop.is_set():
        started = time.monotonic()
        try:
            on_result(diagnose_once(), None)
        except UsageError:
            raise
        except LabError as exc:   # a round that could not read the cluster: say so, try again next period
            on_result(None, exc)
        stop.wait(max(0.0, period_s - (time.monotonic() - started)))
