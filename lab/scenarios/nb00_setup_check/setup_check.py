"""Notebook 00's scenario ("00 · Setup check"): SPEC, needs() and run(), which starts a broker, produces ground-truth
records, copies them through a consumer group in transactions with one injected duplicate and one aborted
transaction of `aborted` records (0: the control), and has Spark read the copy and audit it. SetupResult shows
sections 1-4 ("Run the check", "Timeline", "The audit verdict", "Why the numbers are what they are") and checks
the exercises.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import ClassVar

from confluent_kafka import Producer

from ...audit import Verdict, audit
from ...config import KAFKA_VERSION
from ...connection import kafka_config
from ...experiment import Param, Result, Run, Spec
from ...experiment.consume import read_as_group
from ...experiment.result import Exercise, expect, whole
from ...generator import generate
from ...history import History
from ...logs import client_config
from ...jvm import current as current_java
from ...spark import read_topic, spark_session

SPEC = Spec(
    Param("messages", 200, "ground-truth records to produce and consume", lo=1, hi=100_000,
          why="the copier holds every id in memory and one consumer reads them"),
    Param("keys", 5, "distinct keys among them", lo=1, hi=10_000),
    Param("aborted", 7, "records in the transaction aborted on purpose (0: no aborted transaction)",
          lo=0, hi=100_000, why="they are written in one transaction"),
    Param("nodes", 1, "brokers in the embedded cluster", choices=(1, 3)),
)
DUPLICATES = 1   # the first id is written twice, in the committed transaction


JAVA_FROM = {"JAVA_HOME": "your JAVA_HOME", "PATH": "the java on your PATH", "bundled": "the lab's own runtime"}

def needs(p: dict) -> dict:
    return {"nodes": p["nodes"], "version": KAFKA_VERSION, "broker_config": {}}


def question(p: dict) -> tuple:
    """The Predict step: a number."""
    return (f"The copier also writes one transaction of {p['aborted']} records and aborts it. How many more records "
            "does a read_uncommitted reader see than a read_committed one?", None)


def run(cluster=None, progress: bool = True, **params) -> "SetupResult":
    """The one scenario function: notebook 00, its panel and its test call it."""
    p = SPEC.validate(**params)
    java = current_java()   # JAVA_HOME, PATH (17 to 21) or the lab's own Java 21
    with Run("setup-check", cluster=cluster, progress=progress, **needs(p)) as r:
        if r.owns_cluster:
            r.event(f"start Kafka {r.cluster.version}", f"{p['nodes']} node(s)", at=r.t0, end=time.time())
        source, copy = r.topics(f"{r.id}-input", f"{r.id}-output")
        history = History(r.folder / "history", r.id)
        with r.step(f"produce {p['messages']} records"):
            generated = generate(r.bootstrap, source, p["messages"], history, keys=p["keys"])
        with r.step("consume + copy (faults injected)"):
            # every id of the input topic, read by a real consumer group
            ids = [row["id"] for row in read_as_group(r, source, p["messages"], f"{source}-copier")]
            _copy_with_faults(r, copy, ids, p["aborted"])
        with r.step("start Spark"):
            spark = spark_session()
        with r.step("Spark reads the copy (committed, uncommitted)"):
            committed = read_topic(r.bootstrap, copy, "read_committed", spark).count()
            uncommitted = read_topic(r.bootstrap, copy, "read_uncommitted", spark).count()
        with r.step("Spark audit"):
            verdict = audit(history, bootstrap=r.bootstrap, output_topic=copy, expect="anomalies",
                            kinds=["duplicate", "lost", "aborted_read"], spark=spark)
        for kind, count in verdict.checked.items():
            r.event("audit", f"{kind}={count}", tone="failure" if count else "mitigation")
        return SetupResult("setup_check", p, r.id, r.timeline, java=java.version, java_from=JAVA_FROM[java.source], kafka_version=r.cluster.version,
                           bootstrap=r.bootstrap, produced=generated.produced, consumed=len(ids),
                           spark_committed=committed, spark_uncommitted=uncommitted,
                           aborted_injected=p["aborted"], audit=verdict)


def _copy_with_faults(r: Run, target: str, ids: list[str], aborted: int) -> None:
    """{"id"} per input in one committed transaction plus a duplicate of the first id,
    then a transaction of `aborted` copies that is aborted."""
    producer = Producer(client_config({**kafka_config(r.bootstrap), "transactional.id": f"{target}-writer"}))
    producer.init_transactions()
    producer.begin_transaction()
    for i in ids + ids[:DUPLICATES]:
        producer.produce(target, key=i, value=json.dumps({"id": i}))
    producer.commit_transaction()
    r.event("copy", f"{DUPLICATES} duplicate committed", tone="fault")
    if aborted:
        producer.begin_transaction()
        for n in range(aborted):
            i = ids[n % len(ids)]
            producer.produce(target, key=i, value=json.dumps({"id": i}))
        producer.flush()
        producer.abort_transaction()
        r.event("copy", f"{aborted} records aborted", tone="fault")


@dataclass
class SetupResult(Result):
    java: int = 0
    java_from: str = ""
    kafka_version: str = ""
    bootstrap: str = ""
    produced: int = 0
    consumed: int = 0
    spark_committed: int = 0
    spark_uncommitted: int = 0
    aborted_injected: int = 0
    duplicates_injected: int = DUPLICATES
    audit: Verdict | None = None

    title: ClassVar[str] = "Setup check: what ran, and when"

    @property
    def counts(self) -> dict:
        return self.audit.counts

    @property
    def failed(self) -> bool:
        """The faults under study (the injected ones) were reproduced and the audit saw exactly them."""
        return (self.counts.get("duplicate") == self.duplicates_injected
                and self.counts.get("aborted_read") == self.aborted_injected and self.counts.get("lost") == 0)

    def measured_answer(self) -> int:
        return self.spark_uncommitted - self.spark_committed

    def verdict(self) -> str:
        c = self.counts
        seen = (f"duplicate={c.get('duplicate')}, aborted_read={c.get('aborted_read')}, lost={c.get('lost')}")
        if self.failed:
            return (f"the audit found exactly the injected faults ({seen}); read_committed "
                    f"{self.spark_committed}, read_uncommitted {self.spark_uncommitted}")
        return (f"the audit found {seen}, but {self.duplicates_injected} duplicate and "
                f"{self.aborted_injected} aborted records were injected: something is off in the setup")

    def record_fields(self) -> dict:
        return {"java": self.java, "java_from": self.java_from, "kafka_version": self.kafka_version, "produced": self.produced,
                "consumed": self.consumed, "spark_committed": self.spark_committed,
                "spark_uncommitted": self.spark_uncommitted, "aborted_injected": self.aborted_injected,
                "duplicates_injected": self.duplicates_injected, "audit": self.audit.as_dict()}

    def table(self):
        return self.audit.table()

    def explain(self) -> str:
        c, m, a = self.counts, self.produced, self.aborted_injected
        gap = self.spark_uncommitted - self.spark_committed
        aborted = (f"* `read_uncommitted − read_committed` = {gap}: the {a} records of the aborted transaction. "
                   "The broker keeps them in the log, marked by an abort control record; only the isolation "
                   "level decides whether a reader sees them." if a else
                   f"* `read_uncommitted − read_committed` = {gap}: no transaction was aborted (`ABORTED = 0`), "
                   "so both isolation levels read the same copy.")
        return "\n".join([
            aborted,
            f"* `duplicate = {c.get('duplicate')}`: the id written twice in a committed transaction. "
            "Transactions make a *write* atomic; they do not make the same input idempotent.",
            f"* `lost = {c.get('lost')}`: " + (f"every one of the {m} produced ids is in the committed copy."
                                                if not c.get("lost") else "produced ids are missing from the copy."),
        ])

    def duplicate_ids(self) -> set:
        ex = self.audit.examples.get("duplicate")
        return set() if ex is None or "id" not in ex else set(ex["id"])

    exercises: ClassVar[dict] = {}   # filled in below, once the exercises' functions are defined


# ------------------------------------------------------------------ the exercises

def counts(m, a):
    committed = m + 1                 # every input once, plus the one duplicate, committed with them
    return committed, committed + a   # read_uncommitted also sees the aborted transaction's a records


def _forgets_the_duplicate(m, a):
    return m, m + a


def _check_counts(r: SetupResult, answer) -> None:
    if callable(answer):
        try:
            answer = answer(r.produced, r.aborted_injected)
        except Exception as exc:
            expect(False, f"counts(m, a) raised {type(exc).__name__}: {exc}")
        expect(answer is not None, "counts(m, a) returns None: return the pair (read_committed, read_uncommitted)")
    pair = [whole(n) for n in answer] if isinstance(answer, (tuple, list)) else []
    expect(len(pair) == 2 and None not in pair,
           f"{answer!r} is not a pair of whole numbers (read_committed, read_uncommitted)")
    expect(tuple(pair) == (r.spark_committed, r.spark_uncommitted),
           f"{tuple(pair)} for m = {r.produced}, a = {r.aborted_injected}; read_committed sees every input once "
           "plus the committed duplicate; read_uncommitted also sees the aborted transaction")


def _duplicate_id(r: SetupResult):
    ex = r.audit.examples.get("duplicate")
    return None if ex is None or not len(ex) else str(ex["id"].iloc[0])


def _duplicate_offsets(r: SetupResult):
    """Where the duplicate's copies landed (partition@offset), not which id it is."""
    ex = r.audit.examples.get("duplicate")
    return ["0@0"] if ex is None or not len(ex) else [str(at) for at in ex["at"].iloc[0]]


def _check_duplicate_id(r: SetupResult, answer) -> None:
    expect(isinstance(answer, str), f"{answer!r} is not an id: the ids are strings, in the `id` column of "
                                    "result.audit.examples[\"duplicate\"]")
    expect(answer in r.duplicate_ids(), f"{answer!r} is not a duplicate id: the `id` column says which input was "
                                        "copied twice, the `at` column where its copies landed")


SetupResult.exercises = {
    1: Exercise(
        check=_check_counts, solution=lambda r: counts, wrong=lambda r: _forgets_the_duplicate,
        why="The copier writes every one of the `m` inputs once and the first one a second time, all in the "
            "transaction it commits: a `read_committed` reader sees `m + 1` records. The aborted transaction's `a` "
            "records stay in the log, marked aborted, and only a `read_uncommitted` reader sees them: `m + 1 + a`. "
            "The same function holds for any `MESSAGES` and `ABORTED`."),
    2: Exercise(
        check=_check_duplicate_id, solution=_duplicate_id, wrong=_duplicate_offsets,
        why="The audit matches every input id against the copy: an id found there more than once is a duplicate. "
            "`result.audit.examples[\"duplicate\"]` lists it with the places of its copies (`at`, "
            "partition@offset); the answer is its `id`: `result.audit.examples[\"duplicate\"][\"id\"].iloc[0]`."),
}
