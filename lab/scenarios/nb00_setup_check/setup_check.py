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
from ...experiment.admin import topic_offsets
from ...experiment.consume import read_as_group
from ...experiment.result import Exercise, called, expect, whole
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
    with Run("setup-check", cluster=cluster, progress=progress, spark_audit=True, **needs(p)) as r:
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
            end_offset = topic_offsets(r.cluster.admin(), copy)[0]   # records and transaction markers alike
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
                           aborted_injected=p["aborted"], copy_end_offset=end_offset, audit=verdict)


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
    copy_end_offset: int = 0     # the copy's partition end offset: the offset its next record would get
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
                "duplicates_injected": self.duplicates_injected, "copy_end_offset": self.copy_end_offset,
                "audit": self.audit.as_dict()}

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
            f"* the copy's partition ends at offset {self.copy_end_offset}, yet no reader sees more than "
            f"{self.spark_uncommitted} records: ending a transaction writes a control record (a marker) into the "
            "log too. It takes an offset, and no consumer ever receives it.",
        ])

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


def end_offset(m, a):
    # one commit marker after the m + 1 committed records; an aborted transaction adds its a records and its abort
    # marker (none when a = 0: the copier starts no second transaction)
    return m + 1 + 1 + (a + 1 if a else 0)


def _records_only(m, a):
    return m + 1 + a   # every record a read_uncommitted reader sees, and nothing else


def _check_end_offset(r: SetupResult, fn) -> None:
    m, a = r.produced, r.aborted_injected
    cases = {(m, a): r.copy_end_offset, **{(m, other): end_offset(m, other) for other in (0, 5) if other != a}}
    for (mm, aa), truth in cases.items():
        given = called(fn, f"end_offset({mm}, {aa})", mm, aa)
        expect(whole(given) is not None, f"end_offset({mm}, {aa}) returned {given!r}: return a whole number")
        measured = (mm, aa) == (m, a)
        expect(whole(given) >= mm + 1 + aa, f"end_offset({mm}, {aa}) = {given}: fewer offsets than the records a "
                                            "read_uncommitted reader sees; every record takes an offset")
        expect(whole(given) == truth, f"end_offset({mm}, {aa}) = {given}, but " + (
            f"this run's copy ends at offset {truth}" if measured else "that is not what this copier writes") +
            ": a read_uncommitted reader sees every record, yet the log holds more. What does the broker write "
            "into the partition when a transaction ends, and does the copier end a transaction when a = 0?")


SetupResult.exercises = {
    1: Exercise(
        check=_check_counts, solution=lambda r: counts, wrong=lambda r: _forgets_the_duplicate,
        why="The copier writes every one of the `m` inputs once and the first one a second time, all in the "
            "transaction it commits: a `read_committed` reader sees `m + 1` records. The aborted transaction's `a` "
            "records stay in the log, marked aborted, and only a `read_uncommitted` reader sees them: `m + 1 + a`. "
            "The same function holds for any `MESSAGES` and `ABORTED`."),
    2: Exercise(
        check=_check_end_offset, solution=lambda r: end_offset, wrong=lambda r: _records_only,
        why="Every record takes an offset, and so does each transaction's end: the transaction coordinator writes a "
            "control record (a commit or an abort marker) into every partition the transaction wrote to. No "
            "consumer ever receives a marker, whatever its isolation level, but it is in the log. The copier's "
            "committed transaction holds `m + 1` records and ends with a commit marker; its aborted transaction, "
            "when `a > 0`, holds `a` records and ends with an abort marker: `m + 2 + (a + 1 if a else 0)`. This is "
            "why a topic written by transactions has gaps in its offsets, and why counting offsets overcounts its "
            "records."),
}
