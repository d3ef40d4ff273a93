"""Lesson 02c, a producer whose records retention deleted: the same steps on each ZooKeeper-era broker of
ZOOKEEPER_BROKERS (each with its own ZooKeeper, txn_unknown_producer) and on the lab's KRaft broker."""
from __future__ import annotations

from ...toolbox import Run
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from . import txn_expiry as chapter
from . import txn_unknown_producer as part_c
from .exercises import EXERCISES


def run_lesson(lab: Run, p: dict) -> chapter.TxnExpiryResult:
    found = part_c.old_brokers(lab, p) if p["zookeeper_brokers"] or p["check_pinned_zookeeper"] else {}
    if p["zookeeper_brokers"]:
        found[p["broker_version"]] = part_c.unknown_producer(lab, p, lab.timeline)
    return chapter.TxnExpiryResult("txn_expiry", p, lab.id, lab.timeline,
                                   part_c={v: r for v, r in found.items() if v != "pinned"}, pinned=found.get("pinned"),
                                   cluster=lab.cluster)


def producers_at_once(p: dict) -> int:
    # one Java producer per broker, the brokers one after the other; the pinned ZooKeeper's try starts no program
    return 1 if p["zookeeper_brokers"] else 0


lesson = Lesson("old_brokers", "A producer whose records retention deleted", needs=chapter.needs, body=run_lesson,
                params=chapter.params("broker_version", "zookeeper_brokers", "client_version", "retention_ms",
                                      "check_pinned_zookeeper"),
                rules=[something_to_run("zookeeper_brokers", "check_pinned_zookeeper")],
                question=chapter.old_broker_question, measured_answer=chapter.old_broker_answer,
                exercises=EXERCISES["old_brokers"], mitigate_base={"check_pinned_zookeeper": False},
                apps_at_once=producers_at_once)
