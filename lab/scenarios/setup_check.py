"""Notebook 00: is everything real and working? Java, a broker, clients, Spark, the audit.

The scenario produces ground-truth records, consumes them back with a real
consumer that copies them to an output topic in transactions, injects one
duplicate and one aborted transaction on purpose, and lets the Spark audit find
exactly those.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer

from ..audit import Verdict, audit
from ..cluster import kafka_cluster
from ..config import KAFKA_VERSION, WORK_DIR
from ..errors import LabError
from ..generator import generate
from ..history import History
from ..processes import require_java
from ..spark import read_topic, spark_session


@dataclass
class SetupCheck:
    java: int
    kafka_version: str
    bootstrap: str
    produced: int
    consumed: int
    spark_committed: int
    spark_uncommitted: int
    aborted_injected: int
    duplicates_injected: int
    verdict: Verdict
    events: list = field(default_factory=list)   # {step, start, end} in epoch seconds

    def results(self) -> dict:
        return {"java": self.java, "kafka_version": self.kafka_version, "produced": self.produced,
                "consumed": self.consumed, "spark_committed": self.spark_committed,
                "spark_uncommitted": self.spark_uncommitted, "aborted_injected": self.aborted_injected,
                "duplicates_injected": self.duplicates_injected,
                "audit": self.verdict.as_dict()}


def run_setup_check(messages: int = 200, keys: int = 5, aborted: int = 7, nodes: int = 1,
                    version: str = KAFKA_VERSION) -> SetupCheck:
    if messages < 2 or keys < 1 or aborted < 1:
        raise LabError("messages must be >= 2, keys >= 1 and aborted >= 1 "
                       f"(got messages={messages}, keys={keys}, aborted={aborted}).")
    events = []

    def step(name, start):
        events.append({"step": name, "start": start, "end": time.time()})

    t = time.time()
    java = require_java(17)
    step("check Java", t)
    t = time.time()
    with kafka_cluster(nodes=nodes, version=version, name="setup-check") as cluster:
        step(f"start Kafka {version} ({nodes} node)", t)
        run_id = f"setup-{int(time.time())}"
        history = History(WORK_DIR / "histories" / run_id, run_id)
        source, copy = f"{run_id}-input", f"{run_id}-output"

        t = time.time()
        generated = generate(cluster.bootstrap, source, messages, history, keys=keys)
        step(f"produce {messages} records", t)

        t = time.time()
        consumed = _copy_with_faults(cluster.bootstrap, source, copy, messages, aborted)
        step("consume + copy (1 duplicate, 1 aborted txn injected)", t)

        t = time.time()
        spark = spark_session()
        step("start Spark", t)
        t = time.time()
        committed = read_topic(cluster.bootstrap, copy, "read_committed", spark).count()
        uncommitted = read_topic(cluster.bootstrap, copy, "read_uncommitted", spark).count()
        step("Spark reads the copy (committed, uncommitted)", t)

        t = time.time()
        verdict = audit(history, bootstrap=cluster.bootstrap, output_topic=copy, expect="anomalies",
                        kinds=["duplicate", "lost", "aborted_read"], spark=spark)
        step("Spark audit", t)
        return SetupCheck(java, version, cluster.bootstrap, generated.produced, consumed, committed,
                          uncommitted, aborted, 1, verdict, events)


def _copy_with_faults(bootstrap: str, source: str, target: str, expected: int, aborted: int) -> int:
    """Consume every input and write {"id"} per input to `target` in one transaction,
    then commit one duplicate of the first id and abort a transaction of `aborted` copies."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{source}-copier",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([source])
    ids, deadline = [], time.monotonic() + 60
    while len(ids) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            ids.append(json.loads(msg.value())["id"])
    consumer.close()
    if len(ids) < expected:
        raise LabError(f"Consumed only {len(ids)} of {expected} records from {source} within 60 s.")

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{target}-writer"})
    producer.init_transactions()
    producer.begin_transaction()
    for i in ids:
        producer.produce(target, key=i, value=json.dumps({"id": i}))
    producer.produce(target, key=ids[0], value=json.dumps({"id": ids[0]}))   # the injected duplicate
    producer.commit_transaction()
    producer.begin_transaction()
    for i in ids[:aborted]:                                                   # the injected aborted txn
        producer.produce(target, key=i, value=json.dumps({"id": i}))
    producer.flush()
    producer.abort_transaction()
    return len(ids)
