"""Notebook 00's lesson, the setup check: on the notebook's broker, a producer writes ground-truth records; a copier
reads them through a consumer group and copies them in one committed transaction with one injected duplicate, then
writes `aborted` records in a transaction it aborts (none when 0); Spark reads the copy under both isolation levels
and the audit compares it with the ground truth. The outcome, SetupResult, is in setup_check_report; the
exercises in exercises.
"""
from __future__ import annotations

import json
import time

from confluent_kafka import Producer

from ...audit import audit
from ...connection import kafka_config
from ...toolbox import Param, Run
from ...toolbox.admin import topic_offsets
from ...toolbox.consume import read_as_group
from ...toolbox.lesson import Lesson
from ...record.generator import generate
from ...record.history import History
from ...runtime.jvm import current as current_java
from ...record.logs import client_config
from ...audit.spark import read_topic, spark_session
from .exercises import EXERCISES
from .setup_check_report import DUPLICATES, SetupResult

PARAMS = [
    Param("messages", 200, "records produced to the input topic, then copied", lo=1, hi=100_000,
          why="the copier holds every id in memory and one consumer reads them"),
    Param("keys", 5, "distinct keys among the input records", lo=1, hi=10_000),
    Param("aborted", 7, "records the copier writes in a second transaction, which it aborts (0: no second "
          "transaction)", lo=0, hi=100_000, why="they are written in one transaction"),
    Param("nodes", 1, "brokers in the cluster", choices=(1, 3)),
]

JAVA_FROM = {"JAVA_HOME": "your JAVA_HOME", "PATH": "the java on your PATH", "bundled": "the lab's own runtime"}


def needs(p: dict) -> dict:
    return {"nodes": p["nodes"], "broker_config": {}}


def measured_answer(record: dict, p: dict) -> int:
    """This run's answer to the Predict question: the copy's end offset once its last marker is in the log."""
    return record["copy_end_offset"]


def question(p: dict) -> tuple:
    """The Predict step: an offset, right only when exact. Each slip is a misconception (lab.commands.misconceptions):
    offsets taken for a count of records, aborted records taken to leave the log, an abort taken to leave no marker."""
    aborted = (f"then writes {p['aborted']} records in a second transaction and aborts it" if p["aborted"] else
               "and aborts no transaction this time (`ABORTED = 0`)")
    return (f"The producer writes {p['messages']} records. The copier copies each once and the first one a second "
            f"time to a copy topic of one partition, all in one transaction that it commits, {aborted}. The copy's "
            "first record is at offset 0. What is the copy's end offset (the offset its next record would get) "
            "once the copier is done?", None, 0)


def check(lab: Run, p: dict) -> SetupResult:
    """The lesson's body: produce, copy with the two faults, read the copy on Spark both ways, audit it."""
    java = current_java()   # JAVA_HOME, PATH (17 to 21) or the lab's own Java 21
    if lab.owns_cluster:    # a run on a broker of its own (the panel's, once the notebook's cluster is stopped)
        lab.event(f"start Kafka {lab.cluster.version}", f"{p['nodes']} node(s)", at=lab.t0, end=time.time())
    source, copy = lab.topics(f"{lab.id}-input", f"{lab.id}-output")
    history = History(lab.folder / "history", lab.id)
    with lab.step(f"produce {p['messages']} records"):
        generated = generate(lab.bootstrap, source, p["messages"], history, keys=p["keys"])
    with lab.step("consume + copy (faults injected)"):
        # every id of the input topic, read by a real consumer group
        ids = [row["id"] for row in read_as_group(lab, source, p["messages"], f"{source}-copier")]
        _copy_with_faults(lab, copy, ids, p["aborted"])
        end_offset = _end_once_settled(lab, copy)   # records and transaction markers alike
    with lab.step("start Spark"):
        spark = spark_session()
    with lab.step("Spark reads the copy (committed, uncommitted)"):
        committed = read_topic(lab.bootstrap, copy, "read_committed", spark).count()
        uncommitted = read_topic(lab.bootstrap, copy, "read_uncommitted", spark).count()
    with lab.step("Spark audit"):
        verdict = audit(history, bootstrap=lab.bootstrap, output_topic=copy, expect="anomalies",
                        kinds=["duplicate", "lost", "aborted_read"], spark=spark)
    for kind, count in verdict.checked.items():
        lab.event("audit", f"{kind}={count}", tone="failure" if count else "mitigation")
    return SetupResult("setup_check", p, lab.id, lab.timeline, java=java.version, java_from=JAVA_FROM[java.source],
                       kafka_version=lab.cluster.version, bootstrap=lab.bootstrap, produced=generated.produced,
                       consumed=len(ids), spark_committed=committed, spark_uncommitted=uncommitted,
                       aborted_injected=p["aborted"], copy_end_offset=end_offset, audit=verdict)


def _end_once_settled(lab: Run, topic: str) -> int:
    """The copy's end offset once its last transaction's marker is in the log: the coordinator writes the markers
    after the producer's commit or abort has returned, and until then the last stable offset trails the end."""
    admin = lab.cluster.admin()

    def settled():
        end = topic_offsets(admin, topic)[0]
        return end if topic_offsets(admin, topic, committed=True)[0] == end else None
    return lab.wait(settled, 30, "the copy's last transaction marker",
                    evidence=lambda: f"end {topic_offsets(admin, topic)[0]}, last stable "
                                     f"{topic_offsets(admin, topic, committed=True)[0]}")


def _copy_with_faults(lab: Run, target: str, ids: list[str], aborted: int) -> None:
    """{"id"} per input in one committed transaction plus a duplicate of the first id,
    then a transaction of `aborted` copies that is aborted."""
    producer = Producer(client_config({**kafka_config(lab.bootstrap), "transactional.id": f"{target}-writer"}))
    producer.init_transactions()
    producer.begin_transaction()
    for i in ids + ids[:DUPLICATES]:
        producer.produce(target, key=i, value=json.dumps({"id": i}))
    producer.commit_transaction()
    lab.event("copy", f"{DUPLICATES} duplicate committed", tone="fault")
    if aborted:
        producer.begin_transaction()
        for n in range(aborted):
            i = ids[n % len(ids)]
            producer.produce(target, key=i, value=json.dumps({"id": i}))
        producer.flush()
        producer.abort_transaction()
        lab.event("copy", f"{aborted} records aborted", tone="fault")


lesson = Lesson("setup_check", "Setup check", params=PARAMS, needs=needs, body=check, question=question,
                measured_answer=measured_answer,
                exercises=EXERCISES, spark_audit=True,
                apps_at_once=lambda p: 0)   # no program of its own: the kernel produces, copies and reads
