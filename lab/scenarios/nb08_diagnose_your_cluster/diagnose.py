"""Lesson 08, diagnose your cluster: the chosen SETUPS are built into a broker of the lab's own (with JMX, for the
client versions), the read-only lab.doctor.diagnose() reads it and, with VERIFY, the run waits for the predicted times,
restarts the group's consumer and uses the idle transactional producer again to prove each prediction. Its outcome
is a DiagnoseResult (diagnose_report), its exercises are in exercises; your_cluster() diagnoses the learner's own
cluster, read-only. Set-ups are only ever built into the lab's broker: a cluster of yours is only read.
"""
from __future__ import annotations

import time

from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param, Run, lab_lines
from ...toolbox.admin import committed_offsets, expired_at, group_offsets, topic_offsets
from ...toolbox.consume import read_to_end
from ...toolbox.lesson import Lesson
from ...record.generator import generate
from ...record.history import History
from ...runtime.programs import clients_classpath, idle_producer
from .diagnose_report import DiagnoseResult, predictions
from .exercises import EXERCISES

# What the run can build, named for what it does rather than for the risk (the diagnosis's own rule names, like
# offsets-expire, come after the run): a consumer group whose only consumer commits and leaves (consumer_leaves), a
# transactional producer that commits, then sends nothing (producer_idles), a produce quota on a Kafka Streams
# producer's client id (streams_producer_quota), an old kafka-clients release for that producer (old_client).
SETUPS = ("consumer_leaves", "producer_idles", "streams_producer_quota", "old_client")
# the two sweeps' intervals: the notebook's Parameters text states them, so change it with them
SWEEP_MS = 2000            # offsets.retention.check.interval.ms: the coordinator sweeps this often
TXN_SWEEP_MS = 1000        # transaction.remove.expired.transaction.cleanup.interval.ms
QUOTA = 35000              # producer_byte_rate of "Quotas and Kafka Streams EOS"
TRICKLE = 10               # records produced before the restart, so both runs have something new to read
SHORTEST_EXPIRY_S = 60     # Kafka's minimum offsets.retention.minutes: the wait without a prediction
EMBEDDED_ONLY = ("This lesson builds its set-ups (short retentions, a quota) into the lab's own broker only, never "
                 "into your cluster: diagnose yours read-only with your_cluster(bootstrap) or `python -m lab doctor`.")

PARAMETERS = [
    Param("setups", list(SETUPS), "what the run builds into the lab's broker (any of the four, or none): a group "
          "whose only consumer commits and leaves, a transactional producer that commits and then sends nothing, a "
          "produce quota on a Streams producer's client id, that producer on kafka-clients OLD_CLIENT",
          choices=SETUPS),
    Param("retention_minutes", 1, "offsets.retention.minutes (default 10080 = 7 d)", lo=1, hi=10080, unit="min",
          why="Kafka's minimum is 1; a verified run waits about one retention"),
    Param("expiration_ms", 30000, "transactional.id.expiration.ms (default 604800000 = 7 d)", lo=1000,
          hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config; under a second the producer's "
          "first commits race the sweep"),
    Param("messages", 50, "records the group consumes and commits first", lo=1, hi=100000),
    Param("old_client", "3.3.1", "kafka-clients version of the old Java client (the transactional producer)",
          check=clients_classpath),
    Param("verify", True, "after the diagnosis: wait, restart the group's consumer, send one more transaction and "
          "compare with what the diagnosis said (False: the diagnosis only)"),
]


def needs(p: dict) -> dict:
    """A broker whose offsets and transactional ids expire as set, swept often, with JMX (KIP-511 client versions):
    always the lab's own (lab.cluster.kafka_cluster refuses JMX on an external one)."""
    return dict(nodes=1, version=KAFKA_VERSION, jmx=True, broker_config={
        "offsets.retention.minutes": str(p["retention_minutes"]), "offsets.retention.check.interval.ms": str(SWEEP_MS),
        "transactional.id.expiration.ms": str(p["expiration_ms"]),
        "transaction.remove.expired.transaction.cleanup.interval.ms": str(TXN_SWEEP_MS)})


def measured_answer(record: dict, p: dict) -> int | None:
    """This run's answer to the Predict question: the records the group read again, as the Spark audit counted them
    (None: the run did not verify)."""
    return record.get("observed_rereads")


def question(p: dict) -> tuple:
    """The Predict step: a count (the verification measures it), judged exactly."""
    # The question gives no time for the group's absence: the run waits past any time the diagnosis names, and
    # whether it names one for the group is what the learner works out from the setting (its beliefs:
    # lab/commands/misconceptions.py)
    return (f"The group `billing` consumes and commits {p['messages']} records"
            + (", then its only consumer leaves" if "consumer_leaves" in p["setups"] else
               ", and a member stays in it until it restarts")
            + ". The run diagnoses the cluster, waits past any time the diagnosis names, and restarts the group's "
              "consumer with auto.offset.reset=earliest. How many records does it read again?", None, 0)


def diagnose_and_verify(lab: Run, p: dict) -> DiagnoseResult:
    """The lesson's body: build the chosen set-ups, diagnose the cluster read-only, then (VERIFY) wait and prove
    each prediction."""
    if not lab.cluster.owns_broker:   # KAFKA_LAB_BOOTSTRAP: never build set-ups into someone's cluster
        raise LabError(EMBEDDED_ONLY)
    if p["verify"]:   # the verification audits the consumer's history: Spark warms up while the set-ups are built
        from ...audit import warm_up
        warm_up()
    return _Experiment(lab, p).go()


class _Experiment:
    def __init__(self, run: Run, p: dict):
        self.run, self.p, tag = run, p, run.id.rsplit("-", 1)[-1]
        self.topic, self.group, self.app = f"orders-{tag}", f"billing-{tag}", f"pricing-{tag}"
        self.txn_id = f"invoicer-{tag}"
        self.quota_client = f"{self.app}-StreamThread-1-producer"
        self.history = History(run.folder / "consumer", run.id)
        self.built = {r: r in p["setups"] for r in SETUPS}
        self.client_version = p["old_client"] if self.built["old_client"] else KAFKA_VERSION
        self.admin, self.consumer, self.inc, self.times = run.cluster.admin(), None, 0, {}

    def go(self) -> DiagnoseResult:
        run, p = self.run, self.p
        run.topics(self.topic, partitions=2)
        run.topics(self.txn_id)
        run.phase(f"building: {', '.join(p['setups']) or 'the healthy set-up'}")
        producer = self.start_producer()
        self.produce("before", p["messages"])
        self.start_consumer()
        self.wait_caught_up("consume and commit")
        run.wait(lambda: producer.lab_lines(kind="committed"), 120, "the transactional producer's first commit",
                 child=producer.process)
        self.committed_before = committed_offsets(self.commits())
        if self.built["streams_producer_quota"]:
            run.cluster.set_quota(self.quota_client, producer_byte_rate=QUOTA)
            run.event("quota", "quota set", tone="fault", detail=f"producer_byte_rate={QUOTA} on {self.quota_client}")
        if self.built["consumer_leaves"]:
            self.consumer.stop()
            self.times["left"] = time.time()
            run.event("consumer group", "left the group", tone="fault", detail=f"{self.group}: committed "
                      f"{self.committed_before}, then stopped (SIGTERM: leave the group)")
        if self.built["producer_idles"]:
            self.idle.touch()
            run.wait(lambda: producer.lab_lines(kind="idle"), 30, "the producer to go idle", child=producer.process)
            run.event("transactional id", "idle", tone="fault", detail=f"{self.txn_id}: last transaction committed")
            # lab.doctor counts an id as idle once silent for a tenth of the expiration (at most a minute)
            last = max(e["ts"] for e in producer.lab_lines(kind="committed"))
            run.countdown("the transactional id sits idle", until=last + min(60, p["expiration_ms"] / 10000) + 1)
        state = "idle" if self.built["producer_idles"] else "busy"
        run.event("client", f"kafka-clients {self.client_version}", tone="fault" if self.built["old_client"] else
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
        settings = {"bootstrap.servers": self.run.bootstrap, "lab.topic": self.topic, "lab.group": self.group,
                    "lab.app": "billing", "lab.history": self.history.folder, "lab.run.id": self.run.id,
                    "lab.incarnation": self.inc, "lab.reset": "earliest", "lab.protocol": "classic"}
        self.consumer = self.run.spawn_python(f"billing-{self.inc}", "lab.apps.consumer_app", settings)
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
        if self.built["consumer_leaves"]:   # a classic group's clock starts when it empties, after its last commit
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
            return False   # the wait is the same whatever happens: the healthy run waits as long
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


# The Mitigate step (lesson.mitigate): the same broker, the same short retentions, and the set-ups the learner's fix
# leaves (`lesson.mitigate(result, setups=[])`: a member stays in the group, the producer sends two transactions a
# second, no quota, a current client).
lesson = Lesson("diagnose", "Diagnose your cluster", params=PARAMETERS, needs=needs, body=diagnose_and_verify,
                question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("lab.apps.consumer_app", "IdleTransactionalProducer"))
lesson.your_cluster = your_cluster   # the notebook's last step: `lesson.your_cluster(bootstrap)`, read-only
