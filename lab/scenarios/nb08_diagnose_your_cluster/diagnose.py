"""Notebook 08's scenario ("08 · Diagnose your cluster"): SPEC, needs(), embedded_cluster() and run(), which builds the
chosen RISKS (none: the control) on an embedded broker with JMX, runs the read-only lab.doctor.diagnose() and, with
VERIFY, waits for the predicted times, restarts the group's consumer and reuses the idle transactional producer to
prove each prediction. DiagnoseResult shows sections 1-5; your_cluster() is section 6 ("Your cluster"). Risks are
only ever built into the embedded broker: a cluster of yours is only read.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import Param, Result, Run, Spec, lab_lines
from ...experiment.admin import committed_offsets, expired_at, group_offsets, topic_offsets
from ...experiment.consume import read_to_end
from ...experiment.mitigate import Mitigate
from ...experiment.result import Exercise, called, count, expect, whole
from ...generator import generate
from ...history import History
from ...programs import clients_classpath, idle_producer

RISKS = ("expiring_offsets", "idle_transactional_id", "quota_on_streams_producer", "old_client")
SWEEP_MS = 2000            # offsets.retention.check.interval.ms: the coordinator sweeps this often
TXN_SWEEP_MS = 1000        # transaction.remove.expired.transaction.cleanup.interval.ms
QUOTA = 35000              # producer_byte_rate of "Quotas and Kafka Streams EOS"
TRICKLE = 10               # records produced before the restart, so both runs have something new to read
SHORTEST_EXPIRY_S = 60     # Kafka's minimum offsets.retention.minutes: the control's wait without a prediction
EMBEDDED_ONLY = ("This scenario builds risks (short retentions, a quota) into the embedded broker only, never into "
                 "your cluster: diagnose yours read-only with diagnose.your_cluster(bootstrap) or `python -m lab doctor`.")
# the error each expiry predicts for the producer's next transaction (an expired idempotent producer id meets none:
# since 2.5 the broker takes its next batch as a new producer's)
EXPECTED_ERROR = {"transactional-id-expires": "InvalidPidMappingException"}

SPEC = Spec(
    Param("risks", list(RISKS), "the risks built into the cluster; none: the healthy control", choices=RISKS),
    Param("retention_minutes", 1, "offsets.retention.minutes (default 10080 = 7 d)", lo=1, hi=10080, unit="min",
          why="Kafka's minimum is 1; a risky run waits one retention"),
    Param("expiration_ms", 30000, "transactional.id.expiration.ms (default 604800000 = 7 d)", lo=1000,
          hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config; under a second the producer's "
          "first commits race the sweep"),
    Param("messages", 50, "records the group consumes and commits before it leaves", lo=1, hi=100000),
    Param("old_client", "3.3.1", "kafka-clients version of the old Java client (the transactional producer)",
          check=clients_classpath),
    Param("verify", True, "wait for the predicted times and prove each prediction (False: diagnosis only)"),
)


def needs(p: dict) -> dict:
    """A broker whose offsets and transactional ids expire in a minute, swept often."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={
        "offsets.retention.minutes": str(p["retention_minutes"]), "offsets.retention.check.interval.ms": str(SWEEP_MS),
        "transactional.id.expiration.ms": str(p["expiration_ms"]),
        "transaction.remove.expired.transaction.cleanup.interval.ms": str(TXN_SWEEP_MS)})


def embedded_cluster(p: dict, name: str = "diagnose"):
    """The broker `needs(p)` describes, with JMX on 127.0.0.1 (KIP-511 client versions). Not started.

    Always embedded, even with KAFKA_LAB_BOOTSTRAP set: the risks are built here, never in your cluster,
    which only your_cluster(bootstrap) reads."""
    from ...cluster import KafkaCluster
    from ...ports import free_port
    return KafkaCluster(**needs(p), name=name, jmx_port=free_port())


def question(p: dict) -> tuple:
    """The Predict step: a number (the verification measures it)."""
    return (f"The group `billing` consumes and commits {p['messages']} records, then leaves"
            + (" and stays away past offsets.retention.minutes" if "expiring_offsets" in p["risks"] else
               " (in the healthy control a member stays)")
            + ". How many records will it read again when it restarts with auto.offset.reset=earliest?", None)


def run(cluster=None, progress: bool = True, **params) -> "DiagnoseResult":
    """Build the chosen risks, diagnose the cluster read-only, then (VERIFY) wait and prove each prediction."""
    p = SPEC.validate(**params)
    if cluster is not None and not cluster.owns_broker:
        raise LabError(EMBEDDED_ONLY)
    if cluster is not None and getattr(cluster, "jmx", None) is None:
        cluster = None   # without JMX the broker hides client versions (KIP-511): start one that has it
    from ...ports import free_port
    with Run("diagnose", cluster=cluster, progress=progress, cluster_options={"jmx_port": free_port()},
             spark_audit=p["verify"], **needs(p)) as r:
        if not r.cluster.owns_broker:   # KAFKA_LAB_BOOTSTRAP: never build risks into someone's cluster
            raise LabError(EMBEDDED_ONLY)
        return _Experiment(r, p).go()


# The Mitigate step: the same broker, the same short retentions, and the risks the learner's fix leaves (FIX =
# {"risks": []}: a member stays in the group, the producer sends two transactions a second, no quota, a current
# client).
mitigate = Mitigate(run, SPEC)


class _Experiment:
    def __init__(self, run: Run, p: dict):
        self.run, self.p, tag = run, p, run.id.rsplit("-", 1)[-1]
        self.topic, self.group, self.app = f"orders-{tag}", f"billing-{tag}", f"pricing-{tag}"
        self.txn_id = f"invoicer-{tag}"
        self.quota_client = f"{self.app}-StreamThread-1-producer"
        self.history = History(run.folder / "consumer", run.id)
        self.risky = {r: r in p["risks"] for r in RISKS}
        self.client_version = p["old_client"] if self.risky["old_client"] else KAFKA_VERSION
        self.admin, self.consumer, self.inc, self.times = run.cluster.admin(), None, 0, {}

    def go(self) -> "DiagnoseResult":
        run, p = self.run, self.p
        run.topics(self.topic, partitions=2)
        run.topics(self.txn_id)
        run.phase(f"building: {', '.join(p['risks']) or 'nothing risky (the control)'}")
        producer = self.start_producer()
        self.produce("before", p["messages"])
        self.start_consumer()
        self.wait_caught_up("consume and commit")
        run.wait(lambda: producer.lab_lines(kind="committed"), 120, "the transactional producer's first commit",
                 child=producer.process)
        self.committed_before = committed_offsets(self.commits())
        if self.risky["quota_on_streams_producer"]:
            run.cluster.set_quota(self.quota_client, producer_byte_rate=QUOTA)
            run.event("quota", "quota set", tone="fault", detail=f"producer_byte_rate={QUOTA} on {self.quota_client}")
        if self.risky["expiring_offsets"]:
            self.consumer.stop()
            self.times["left"] = time.time()
            run.event("consumer group", "left the group", tone="fault", detail=f"{self.group}: committed "
                      f"{self.committed_before}, then stopped (SIGTERM: leave the group)")
        if self.risky["idle_transactional_id"]:
            self.idle.touch()
            run.wait(lambda: producer.lab_lines(kind="idle"), 30, "the producer to go idle", child=producer.process)
            run.event("transactional id", "idle", tone="fault", detail=f"{self.txn_id}: last transaction committed")
            # lab.doctor counts an id as idle once silent for a tenth of the expiration (at most a minute)
            last = max(e["ts"] for e in producer.lab_lines(kind="committed"))
            run.countdown("the transactional id sits idle", until=last + min(60, p["expiration_ms"] / 10000) + 1)
        state = "idle" if self.risky["idle_transactional_id"] else "busy"
        run.event("client", f"kafka-clients {self.client_version}", tone="fault" if self.risky["old_client"] else
                  "info", detail=f"the transactional producer ({state})")
        diagnosis = self.diagnose()
        verified = self.verify(producer, diagnosis) if p["verify"] else {}
        return DiagnoseResult("diagnose", p, run.id, run.timeline, diagnosis=diagnosis, verified=verified,
                              mine=[f for f in diagnosis.findings if self.concerns(f)],
                              subjects={"group": self.group, "transactional_id": self.txn_id,
                                        "quota_client": self.quota_client, "client_version": self.client_version,
                                        "topic": self.topic}, history=self.history)

    # ---------------------------------------------------------------- the pieces
    def start_producer(self):
        """lab/java/IdleTransactionalProducer.java: two transactions a second until told to go idle (busy, so far from
        the doctor's idle threshold, a tenth of the expiration, even on a loaded machine)."""
        folder = self.run.folder
        self.idle, self.go_file = folder / "producer.idle", folder / "producer.go"
        producer = idle_producer(self.run, "producer", self.client_version, self.txn_id, self.go_file, "invoice",
                                 **{"lab.idle.file": self.idle, "lab.busy.ms": 500})
        producer.start()
        return producer

    def start_consumer(self):
        """lab/apps/consumer_app.py: consume, commit each batch, leave on SIGTERM."""
        args = ["--bootstrap", self.run.bootstrap, "--topic", self.topic, "--group", self.group, "--app", "billing",
                "--history", self.history.folder, "--run-id", self.run.id, "--incarnation", self.inc,
                "--reset", "earliest", "--protocol", "classic"]
        self.consumer = self.run.spawn_python(f"billing-{self.inc}", "lab.apps.consumer_app", args)
        self.run.event("consumer group", "start" if self.inc == 0 else "restart", detail=f"incarnation {self.inc}, "
                       "auto.offset.reset=earliest")

    def commits(self, inc: int | None = None) -> list[dict]:
        return lab_lines(self.run.folder / f"billing-{self.inc if inc is None else inc}.log", kind="commit")

    def wait_caught_up(self, what: str) -> None:
        def caught_up():
            have = committed_offsets(self.commits())
            return all(have.get(part, 0) >= end for part, end in topic_offsets(self.admin, self.topic, 2).items()
                       if end > 0)
        self.run.wait(caught_up, 120, f"the consumer to {what}", child=self.consumer,
                      evidence=lambda: f"committed {committed_offsets(self.commits())}")

    def produce(self, phase: str, n: int) -> None:
        gen = generate(self.run.bootstrap, self.topic, n, self.history, keys=10, id_prefix=f"{phase}-")
        if gen.produced != n:
            raise LabError(f"Only {gen.produced} of {n} records reached {self.topic}.")
        self.run.event("consumer group", f"produce {n}", detail=phase)

    def diagnose(self):
        from ...doctor import diagnose
        run = self.run
        with run.step("lab.doctor.diagnose(): read-only", lane="doctor", tone="info"):
            d = diagnose(run.bootstrap, jmx=run.cluster.jmx, progress=run.say)
        mine = [f for f in d.findings if self.concerns(f)]
        run.say(f"diagnosis: {len(d.findings)} finding(s) in {d.seconds:.1f} s"
                + (f"; could not read {', '.join(d.unreadable)}" if d.unreadable else ""))
        for f in d.findings:
            run.event("doctor", f.rule, tone="failure" if f in mine else "info", detail=f"{f.subject}: {f.consequence}")
        return d

    def concerns(self, f) -> bool:
        """Whether a finding is about what this run built (a user's own cluster may show others)."""
        text = f"{f.subject} {f.evidence}"
        return any(s in text for s in (self.group, self.txn_id, self.quota_client)) or \
            (f.rule == "client-version-bug" and self.client_version in text)

    def verify(self, producer, d) -> dict:
        """Wait for the predicted expiries, restart the consumer (earliest), use the producer again."""
        run, now = self.run, time.time()
        predicted = predictions(d, self.group, self.txn_id)
        sweeps = 2 * SWEEP_MS / 1000 + 3
        if predicted:
            until = max(w / 1000 for w in predicted.values()) + sweeps
            for rule, w in predicted.items():
                lane = "consumer group" if rule == "offsets-expire" else "transactional id"
                run.event(lane, "predicted expiry", at=now, end=max(w / 1000, now), tone="wait",
                          detail=f"{rule}: predicted at {w / 1000 - run.t0:.1f} s")
        else:
            until = now + SHORTEST_EXPIRY_S + sweeps
        if self.risky["expiring_offsets"]:   # a classic group's clock starts when it empties, after its last commit
            until = max(until, self.times["left"] + self.p["retention_minutes"] * 60 + sweeps)
        run.phase(f"verifying: waiting {until - now:.0f} s for the predicted times")
        gone = {}

        def offsets_gone() -> bool:
            if "at" not in gone:
                seen = group_offsets(self.admin, {"g": self.group}, self.topic).get("g")
                if seen is not None and not any(o is not None for o in seen.values()):
                    gone["at"] = time.time()
                    run.event("consumer group", "offsets expired", tone="failure", detail="the coordinator "
                              "deleted the committed offsets")
            return False   # the wait is the same whatever happens: the control waits as long
        run.countdown("waiting for the predicted expiry times", until=until, done=offsets_gone)
        waited = time.time() - now
        run.timeline.band("waited", now, time.time())

        run.phase("restart the consumer (auto.offset.reset=earliest), use the transactional producer again")
        if self.consumer.alive():   # the healthy group: a redeploy, stopped and started at once
            self.consumer.stop()
        self.produce("after the wait", TRICKLE)   # new records: both the risky and the healthy group read them
        self.inc += 1
        self.start_consumer()
        self.wait_caught_up("catch up after the restart")
        self.consumer.stop()
        go_at = time.time()
        self.idle.touch()
        self.go_file.touch()
        run.wait(lambda: producer.lab_lines(kind="exit") or not producer.alive(), 60,
                 "the producer's transaction after the wait")
        producer.stop(15)
        errors = [e for e in producer.lab_lines(kind="error") if e["ts"] >= go_at]
        for e in errors[:1]:
            run.event("transactional id", e["exception"].rsplit(".", 1)[-1], at=e["ts"], tone="failure",
                      detail=e["message"][:300])
        after = [e for e in producer.lab_lines(kind="committed") if e["ts"] >= go_at]
        for e in after[:1]:
            run.event("transactional id", "committed", at=e["ts"], tone="mitigation")
        swept = expired_at(read_to_end(run.bootstrap, "__transaction_state"), {"t": self.txn_id}, now - 120)["t"]
        if swept:
            run.event("transactional id", "id expired", at=swept, tone="failure", detail="tombstone in "
                      "__transaction_state")
        read_again = sum(r["records"] for r in self.commits())
        run.event("consumer group", f"read {read_again}", tone="failure" if gone else "mitigation",
                  detail="after the restart")

        from ...audit import RESET_KINDS, audit
        run.phase("auditing the consumer's history on Spark")
        verdict = audit(self.history, kinds=RESET_KINDS,
                        expect="anomalies" if "offsets-expire" in predicted else "clean")
        return {"predicted_ms": predicted, "waited_s": round(waited, 1),
                "offsets_expired_at": gone.get("at"), "txn_expired_at": swept, "read_after_restart": read_again,
                "audit": verdict, "producer_errors": [e["exception"].rsplit(".", 1)[-1] for e in errors],
                "producer_messages": [e["message"] for e in errors], "committed_after": bool(after),
                "committed_before": {str(k): v for k, v in self.committed_before.items()}}


# ------------------------------------------------------------------ pure parts

def predictions(d, group: str, txn_id: str) -> dict:
    """rule -> predicted epoch ms, for the findings about the group and the transactional id this run built."""
    out = {}
    for f in d.findings:
        about = f"{f.subject} {f.evidence}"
        if f.when_ms and ((f.rule == "offsets-expire" and group in about) or
                          (f.rule == "transactional-id-expires" and txn_id in about)):
            out[f.rule] = min(out.get(f.rule, f.when_ms), f.when_ms)
    return out


def your_cluster(bootstrap: str | None = None, *, command_config: str | None = None, jmx: str | None = None):
    """Diagnose the cluster at `bootstrap`, read-only (`command_config`: a client .properties file for SASL/SSL;
    `jmx`: the brokers' JMX, for client versions). Only this call reads it: no setting of the environment sends
    this notebook or any other to it. Without a bootstrap, say how."""
    from IPython.display import Markdown, display
    if not bootstrap:
        display(Markdown(
            "No cluster given, so there is none of yours to read. Put its address in `YOUR_BOOTSTRAP` above (and, for "
            "SASL/SSL, a client properties file in `YOUR_CLIENT_PROPERTIES`) and run the cell again, or from a "
            "terminal:\n\n```\n.venv/bin/python -m lab doctor --bootstrap broker1:9092 "
            "[--command-config client.properties] [--jmx broker1:9999]\n```\n\n"
            "The diagnosis only reads: it never commits, joins a group or creates a topic."))
        return None
    from ...doctor import diagnose
    d = diagnose(bootstrap, jmx=jmx, command_config=command_config)
    display(Markdown(f"**{bootstrap}**: {len(d.findings)} finding(s) in {d.seconds:.1f} s"
                     + "".join(f"\n- {c.rule} {c.state}: {c.why}" for c in d.checks if not c.complete)))
    display(d.table())
    return d


# ------------------------------------------------------------------ the result

@dataclass
class DiagnoseResult(Result):
    diagnosis: object = None                                # lab.doctor.Diagnosis
    verified: dict = field(default_factory=dict)            # what the verification measured (VERIFY)
    mine: list = field(default_factory=list)                # the findings about what this run built
    subjects: dict = field(default_factory=dict)            # the group, transactional id, quota client id, version
    history: History | None = None                          # the consumer's reads and commits
    title: ClassVar[str] = "Predicted by the diagnosis, then observed"
    exercises: ClassVar[dict] = {}                          # filled in below, once the exercises' functions are defined

    def rules(self) -> list[str]:
        return list(dict.fromkeys(f.rule for f in self.mine))

    failed = property(lambda self: bool(self.mine), doc="The diagnosis found what this run built exposed.")

    def predicted(self, rule: str):
        return self.verified.get("predicted_ms", {}).get(rule)

    def predicted_rereads(self) -> int | None:
        f = next((f for f in self.mine if f.rule == "offsets-expire"
                  and self.subjects["group"] in f"{f.subject} {f.evidence}"), None)
        return None if f is None else f.rereads

    def observed_rereads(self) -> int | None:
        a = self.verified.get("audit")
        return None if a is None else a.counts.get("reprocessed_after_reset")

    def producer_error(self) -> str:
        return (self.verified.get("producer_errors") or [""])[0]

    def predicted_error(self) -> str:
        return EXPECTED_ERROR["transactional-id-expires"] if self.predicted("transactional-id-expires") else ""

    def confirmed(self) -> dict:
        """prediction -> whether the verification saw it (None: not verified)."""
        if not self.verified:
            return {}
        rereads, observed = self.predicted_rereads(), self.observed_rereads()
        return {"re-reads": (observed == rereads if rereads is not None else observed > 0)
                if self.predicted("offsets-expire") else observed == 0,
                "producer error": self.producer_error() == self.predicted_error()}

    def measured_answer(self) -> int | None:
        return self.observed_rereads()

    def offsets_at_diagnosis(self) -> dict:
        """What the doctor read of this run's group and topic, by partition: the group's committed offsets and
        the topic's log start offsets (the first offset still retained)."""
        from ...doctor.rules import section, split_partition
        facts, gid, topic = self.diagnosis.facts, self.subjects["group"], self.subjects["topic"]
        committed = ((section(facts, "groups") or {}).get(gid) or {}).get("offsets") or {}
        logs = section(facts, "topic_offsets") or {}
        parts = {split_partition(tp)[1]: tp for tp in logs if split_partition(tp)[0] == topic}
        return {"committed": {p: committed[tp] for p, tp in sorted(parts.items()) if tp in committed},
                "log_start": {p: logs[tp].get("earliest") for p, tp in sorted(parts.items())}}

    def verdict(self) -> str:
        d = self.diagnosis
        others = len(d.findings) - len(self.mine)
        found = (f"{len(self.mine)} finding(s) ({', '.join(self.rules())})" if self.mine else "no finding") + \
            f" in {d.seconds:.1f} s" + (f" (and {others} about what earlier runs left on this cluster)"
                                        if others else "")
        if not self.verified:
            return f"the diagnosis read the cluster: {found}; not verified (VERIFY = False)"
        v, ok = self.verified, self.confirmed()
        seen = (f"after {v['waited_s']:.0f} s the restarted consumer re-read {self.observed_rereads()} record(s) "
                f"(predicted {self.predicted_rereads() if self.predicted('offsets-expire') else 0}), the producer got "
                f"{self.producer_error() or 'no error'} (predicted {self.predicted_error() or 'none'})")
        return f"{found}; {seen}: " + ("every prediction confirmed" if all(ok.values()) else
                                       "NOT confirmed: " + ", ".join(k for k, good in ok.items() if not good))

    def explain(self) -> str:
        lines = []
        for f in self.mine:
            lines.append(f"- **{f.rule}** ({f.severity}) `{f.subject}`: {f.consequence} Evidence: {f.evidence}"
                         + (f" See notebook [{f.notebook}]({f.notebook})." if f.notebook else ""))
        if not self.mine:
            lines.append("- No finding: every group with offsets still has members, the transactional id commits every "
                         "second, no quota names a Streams producer, and every Java client is current.")
        if self.verified:
            v = self.verified
            lines.append(f"\nThe proof, after waiting {v['waited_s']:.0f} s: the group's committed offsets "
                         + (f"vanished at {v['offsets_expired_at'] - self.timeline.t0:.1f} s" if v["offsets_expired_at"]
                            else "were still there") + f", the restarted consumer re-read {self.observed_rereads()} "
                         "record(s) (Spark audit); the transactional id was " +
                         (f"expired at {v['txn_expired_at'] - self.timeline.t0:.1f} s (a tombstone in "
                          "`__transaction_state`)" if v["txn_expired_at"] else "never expired") +
                         f", and the producer's next transaction got {self.producer_error() or 'no error'}"
                         + (f" (`{v['producer_messages'][0][:160]}`)" if v["producer_messages"] else "") + ".")
        return "\n".join(lines)

    def findings(self):
        """The findings about what this run built (the doctor's whole table: result.diagnosis.table())."""
        import pandas as pd
        t0 = self.timeline.t0
        return pd.DataFrame([{"rule": f.rule, "severity": f.severity, "subject": f.subject, "evidence": f.evidence,
                              "consequence": f.consequence, "when (s)": None if f.when_ms is None else
                              round(f.when_ms / 1000 - t0, 1), "notebook": f.notebook} for f in self.mine],
                            columns=["rule", "severity", "subject", "evidence", "consequence", "when (s)", "notebook"])

    def table(self):
        """Prediction against observation, one row per verifiable finding."""
        import pandas as pd
        t0, v = self.timeline.t0, self.verified

        def s(epoch):
            return None if epoch is None else round(epoch - t0, 1)
        rows = [{"prediction": "offsets-expire", "predicted at (s)": s((self.predicted("offsets-expire") or 0) / 1000
                                                                         or None),
                 "observed at (s)": s(v.get("offsets_expired_at")), "predicted": self.predicted_rereads()
                 if self.predicted("offsets-expire") else 0, "observed": self.observed_rereads(),
                 "what": "records re-read after the restart (Spark audit)"},
                {"prediction": "transactional-id-expires", "predicted at (s)": s(
                    (self.predicted("transactional-id-expires") or 0) / 1000 or None),
                 "observed at (s)": s(v.get("txn_expired_at")), "predicted": self.predicted_error() or "no error",
                 "observed": self.producer_error() or "no error", "what": "the producer's next transaction"}]
        return pd.DataFrame(rows if v else []).astype(object)

    def figure(self):
        return self.timeline.figure(f"{self.title}: {'exposed' if self.failed else 'healthy'}",
                                    lanes=[l for l in ("run", "consumer group", "transactional id", "quota", "client",
                                                       "doctor") if self.timeline.rows(l)])

    def evidence(self) -> str:
        """What each finding read, in the doctor's words."""
        return "\n".join(f"{f.rule} ({f.subject}): {f.evidence}" for f in self.mine) or "(no finding)"

    def reads(self):
        """The consumer's history: every record it read, per incarnation (0: before, 1: after the restart)."""
        return self.history.frame("read")

    def record_fields(self) -> dict:
        d, v = self.diagnosis, self.verified
        by_rule = {r: sum(f.rule == r for f in self.mine) for r in self.rules()}
        out = {"findings": len(self.mine), "findings_all": len(d.findings), "findings_by_rule": by_rule,
               "unreadable": dict(d.unreadable),
               "diagnosis_seconds": round(d.seconds, 2), "verified": bool(v),
               "client_version": self.subjects.get("client_version")}
        if v:
            t0 = self.timeline.t0
            out.update({
                "predicted_rereads": self.predicted_rereads() if self.predicted("offsets-expire") else 0,
                "observed_rereads": self.observed_rereads(), "read_after_restart": v["read_after_restart"],
                "predicted_error": self.predicted_error(), "producer_error": self.producer_error(),
                "producer_committed_after": v["committed_after"], "waited_s": v["waited_s"],
                "predicted_offsets_expiry_s": round(self.predicted("offsets-expire") / 1000 - t0, 1)
                if self.predicted("offsets-expire") else None,
                "observed_offsets_expiry_s": round(v["offsets_expired_at"] - t0, 1) if v["offsets_expired_at"]
                else None,
                "predicted_txn_expiry_s": round(self.predicted("transactional-id-expires") / 1000 - t0, 1)
                if self.predicted("transactional-id-expires") else None,
                "observed_txn_expiry_s": round(v["txn_expired_at"] - t0, 1) if v["txn_expired_at"] else None,
                "confirmed": self.confirmed(), "audit": v["audit"].as_dict()})
        doctor = {key: val for key, val in d.as_record().items() if key != "facts"}   # facts: result.diagnosis
        return {**out, "doctor": doctor}


# ------------------------------------------------------------------ the exercises

def rereads_after_expiry(committed, log_start):
    # from the log start up to each committed offset: what retention still holds of what the group had read
    return sum(max(0, offset - log_start.get(p, 0)) for p, offset in committed.items())


def _every_committed(committed, log_start):
    return sum(committed.values())


def _check_rereads_after_expiry(result: DiagnoseResult, fn) -> None:
    seen = result.offsets_at_diagnosis()
    # this run's group, then a topic whose retention already deleted part of what the group read
    cases = [(seen["committed"], seen["log_start"], result.predicted_rereads(), "this run's group"),
             ({0: 250, 1: 300}, {0: 100, 1: 0}, 450, "a group at 250 and 300, the topic's log starting at 100 and 0"),
             ({0: 50}, {0: 100}, 0, "a group at 50, the log starting at 100 (retention deleted all it had read)")]
    for committed, log_start, truth, what in cases:
        if truth is None:   # no prediction: the group kept its member, so its offsets never expire
            truth = rereads_after_expiry(committed, log_start)
        given = called(fn, f"rereads_after_expiry({committed}, {log_start})", dict(committed), dict(log_start))
        expect(whole(given) is not None, f"for {what} it returned {given!r}: return a whole number of records")
        expect(whole(given) == truth, f"for {what} it returned {given}, the doctor's rule says {truth}: a restart "
                                      "with `earliest` starts at the log start, not at offset 0, and re-reads what "
                                      "lies before the committed offset")


def _rereads(result: DiagnoseResult) -> int:
    """Exercise 2, from the consumer's history: (partition, offset) pairs incarnation 1 read that 0 had read."""
    reads = result.reads() if result.history is not None else None
    if reads is None or not len(reads):
        return 0
    first = set(zip(reads[reads.incarnation == 0].partition, reads[reads.incarnation == 0].offset))
    again = reads[reads.incarnation == 1]
    return sum((p, o) in first for p, o in zip(again.partition, again.offset))


def _check_rereads(result: DiagnoseResult, answer) -> None:
    observed = result.observed_rereads()
    if observed is None:
        raise LabError("The verification was not run in this run (VERIFY = False): run the notebook with VERIFY = "
                       "True first.")
    whole = count(answer)
    expect(whole == observed, "count the (partition, offset) pairs incarnation 1 read that incarnation 0 "
                              "had read and committed")


def _read_after_restart(result: DiagnoseResult) -> int:
    """Every record the restarted consumer read, the new ones included."""
    reads = result.reads() if result.history is not None else None
    return 0 if reads is None or not len(reads) else int((reads.incarnation == 1).sum())


DiagnoseResult.exercises = {
    1: Exercise(
        check=_check_rereads_after_expiry, solution=lambda result: rereads_after_expiry,
        wrong=lambda result: _every_committed,
        why="Once a group's offsets are gone, a consumer that restarts with `auto.offset.reset=earliest` starts at "
            "each partition's log start, the first offset retention still holds, and reads up to where the group "
            "had committed before reading anything new: `committed - log_start` per partition, never below 0. "
            "Offset 0 is only the log start on a topic that retention has not touched yet; on a real cluster it "
            "rarely is, so counting from 0 overestimates. The doctor computes this from the same two things it "
            "reads, and the verification counts it in the consumer's history (exercise 2)."),
    2: Exercise(
        check=_check_rereads, solution=lambda result: int(_rereads(result)), wrong=_read_after_restart,
        why="The restarted consumer (incarnation 1) read from where its group's committed offsets told it to: from "
            "the log start when they had expired, from where it left off when they had not. A record it read that "
            "incarnation 0 had read too, the same `(partition, offset)`, is a re-read; the records produced while it "
            "was down are new, not re-read. Compare the count with the diagnosis's prediction in `result.table()`."),
}
