"""Lesson 09's workers and their arithmetic: share consumers of one share group (KIP-932; lab/java/ShareWorker.java),
started together on a topic written before they start, and what each recorded: every delivery (with the delivery
count the broker gave it), every record written to the output, every acknowledgement the broker took or refused.

The rules (what the lesson's exercises ask for) follow from two facts of the share group: a poll acquires its
records together, under one acquisition lock each that runs from the fetch, so a record acknowledged after
`share.record.lock.duration.ms` is refused and delivered again; and a record released that many times
(`share.delivery.count.limit`) is archived, never delivered again.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from ...config import KAFKA_VERSION
from ...record.history import History
from ...runtime.programs import JavaProgram
from ...toolbox import lab_lines

# What the broker must allow for the lesson's short locks, and for its share-group state on one node (the state
# topic's defaults, replication factor 3 and min.isr 2, need three brokers).
BROKER_CONFIG = {"group.share.min.record.lock.duration.ms": "1000",
                 "share.coordinator.state.topic.replication.factor": "1",
                 "share.coordinator.state.topic.min.isr": "1"}
ANSWERS = ("release", "reject")   # what a worker answers for a record whose work failed


def finish_ms(p: dict, offset: int) -> int:
    """When the work on `offset` ends, counted from the poll that took every record: the work on it and on each
    record before it (the failing one is worked on too, then fails)."""
    return sum(p["share_slow_ms"] if o == p["share_slow_offset"] else p["share_work_ms"] for o in range(offset + 1))


def written_again(p: dict) -> int:
    """How many records the app writes more than once: each one whose work ends after its lock, which ran from the
    poll (its acknowledgement is refused, and the record is delivered and worked on again), but the failing one,
    which is never written."""
    return sum(finish_ms(p, o) > p["share_lock_ms"] for o in range(p["share_records"])
               if o != p["share_failing_offset"])


def tries(p: dict) -> int:
    """How many times the failing record is delivered: once if the app rejects it, else until the delivery limit."""
    if p["share_failing_offset"] is None:
        return 0
    return 1 if p["share_on_failure"] == "reject" else p["share_delivery_limit"]


@dataclass
class Worker:
    name: str
    history: History
    child: object = None   # lab.runtime.processes.Child
    log: object = None     # its log path

    def rows(self, kind: str) -> list[dict]:
        return self.history.rows(kind)


def start(lab, w: Worker, group: str, topic: str, output: str, dead_letters: str, p: dict, ids: dict) -> None:
    failing = p["share_failing_offset"]
    program = lab.program(JavaProgram(
        w.name, KAFKA_VERSION, "ShareWorker", ["ShareWorker.java", "Lab.java"], streams=False, heap="128m",
        properties={"bootstrap.servers": lab.bootstrap, "group.id": group,
                    "lab.topic": topic, "lab.output.topic": output, "lab.app": w.name,
                    "lab.history": w.history.folder, "lab.run.id": w.history.run_id,
                    "lab.work.ms": p["share_work_ms"], "lab.slow.ms": p["share_slow_ms"],
                    "lab.slow.ids": ids.get(p["share_slow_offset"], ""),
                    "lab.fail.ids": "" if failing is None else ids.get(failing, ""),
                    "lab.on.failure": p["share_on_failure"], "lab.dead.letter.topic": dead_letters}))
    w.child, w.log = program.start(), program.log_path


@dataclass
class Tally:
    """What the workers recorded, per offset."""
    deliveries: dict      # offset -> [(worker, delivery count)]
    written: collections.Counter
    accepted: set         # offsets whose ACCEPT the broker took
    answered: dict        # offset -> the answers (release, reject) the broker took for a failed record
    refused: list         # the LAB lines of refused acknowledgements
    first_poll: int       # records in the first poll that returned any

    @classmethod
    def of(cls, workers: list[Worker]) -> "Tally":
        deliveries, written, accepted, answered, refused, polls = {}, collections.Counter(), set(), {}, [], []
        for w in workers:
            for r in w.rows("read"):
                deliveries.setdefault(r["offset"], []).append((w.name, r.get("delivery")))
            written.update(r["offset"] for r in w.rows("written"))
            for r in w.rows("acknowledged"):
                if str(r.get("answer", "")).lower() == "accept":
                    accepted.add(r["offset"])
                else:
                    answered.setdefault(r["offset"], []).append(r.get("answer", "").lower())
            lines = lab_lines(w.log) if w.log else []
            refused += [line for line in lines if line["kind"] == "ack_refused"]
            polls += [(line["ts"], line["records"]) for line in lines if line["kind"] == "batch"]
        return cls(deliveries, written, accepted, answered, refused, min(polls)[1] if polls else 0)

    def refused_answers(self, offset: int) -> list[str]:
        """The answers the broker refused for a record (its lock had run out before the worker answered)."""
        return [str(line.get("answer", "")).lower() for line in self.refused if line.get("offset") == offset]

    def settled(self, p: dict) -> bool:
        """Every record accepted or written twice (what is written more than once can change no more), and the
        failing one delivered as often as it will be, each delivery answered, the answer taken or refused (a worker
        logs a delivery before it answers it)."""
        failing = p["share_failing_offset"]
        rest = all(o in self.accepted or self.written[o] >= 2 for o in range(p["share_records"]) if o != failing)
        if failing is None:
            return rest
        delivered = len(self.deliveries.get(failing, []))
        answered = len(self.answered.get(failing, [])) + len(self.refused_answers(failing))
        return rest and delivered >= tries(p) and answered >= delivered
