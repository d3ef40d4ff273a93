"""Lesson 09, a queue of work (share groups, KIP-932): workers of one share group take records from one topic,
work on each, write it to an output topic and acknowledge it. One record's work is slow, one fails every time. What
the workers recorded (share_workers.Tally) says which records were written more than once, how often the failing one
was delivered and where it ended; the Spark audit counts the output's duplicates and the inputs it never reflects.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ...record.generator import generate
from ...record.history import History
from ...toolbox import Param
from ...toolbox.apps import stop_together
from ...toolbox.lesson import Lesson
from ...toolbox.result import Exercise, judge_count, setting
from .share_workers import ANSWERS, BROKER_CONFIG, Tally, Worker, finish_ms, start, tries, written_again

PARAMS = [
    Param("share_records", 40, "records in the topic, written before the workers start", lo=2, hi=200,
          why="more than one poll's worth would split them between polls"),
    Param("share_workers", 2, "workers in the share group", lo=1, hi=4),
    Param("share_work_ms", 200, "the work on each record", lo=0, hi=10_000, unit="ms"),
    Param("share_slow_offset", 3, "the offset of the one record whose work is slow", lo=0, hi=199),
    Param("share_slow_ms", 8000, "the work on that record", lo=0, hi=60_000, unit="ms"),
    Param("share_failing_offset", 1, "the offset of a record whose work throws an error every time", lo=0, hi=199,
          none="no such record"),
    Param("share_on_failure", "release", "what a worker answers for a record whose work failed: release (deliver it "
          "again) or reject (archive it; the worker writes it to a dead-letter topic of its own)", choices=ANSWERS),
    Param("share_lock_ms", 5000, "share.record.lock.duration.ms, the group's acquisition lock", lo=1000,
          hi=60_000, unit="ms", why="the broker's bounds: group.share.min.record.lock.duration.ms, which the lesson "
          "lowers to 1 s, and group.share.max.record.lock.duration.ms, 60 s by default"),
    Param("share_delivery_limit", 5, "share.delivery.count.limit, the group's delivery limit", lo=2, hi=10,
          why="the broker's bounds"),
    Param("share_watch_s", 60.0, "how long the workers are watched at most (the watch ends sooner once every "
          "record is acknowledged or written twice)", lo=10, hi=600, unit="s"),
]


def _offsets_in_topic(p: dict) -> str | None:
    for name in ("share_slow_offset", "share_failing_offset"):
        if p[name] is not None and p[name] >= p["share_records"]:
            return (f"{name.upper()}={p[name]} is past the topic's last offset ({p['share_records'] - 1}): no worker "
                    "would meet that record.")
    if p["share_failing_offset"] is not None and p["share_failing_offset"] == p["share_slow_offset"]:
        return "SHARE_FAILING_OFFSET and SHARE_SLOW_OFFSET name the same record: give each its own."
    return None


RULES = [_offsets_in_topic]
TOLERANCE = 0.05   # of the count: 37 is right at the defaults, 40 (the whole poll) and 1 (the slow record) are not


def question(p: dict) -> tuple:
    """How many records the app writes to its output more than once (a number)."""
    failing = ("" if p["share_failing_offset"] is None else
               f" The work on the record at offset {p['share_failing_offset']} throws an error every time: nothing "
               f"is written for it, and the worker answers {p['share_on_failure'].upper()}.")
    # Left out: how many records a poll acquires, and when their locks start (lab/commands/misconceptions.py)
    return (f"The topic holds {p['share_records']} records, written before the {p['share_workers']} workers of "
            f"the share group start. A worker writes each record's result, then acknowledges it at once, before the "
            f"next. Each record takes {p['share_work_ms']:,} ms of work, but the one at offset "
            f"{p['share_slow_offset']}, which takes {p['share_slow_ms']:,} ms; the group's lock lasts "
            f"{p['share_lock_ms']:,} ms and its delivery limit is {p['share_delivery_limit']}.{failing} How many of "
            f"the {p['share_records']} records does the app write to its output more than once?", None, TOLERANCE)


def measured_answer(record: dict, p: dict):
    share = record.get("share")
    return None if share is None else share["written_more_than_once"]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config=BROKER_CONFIG)


def run_lesson(lab, p: dict) -> "Outcome":
    tag = uuid.uuid4().hex[:6]
    topic, output, dead = f"jobs-{tag}", f"jobs-done-{tag}", f"jobs-dead-letters-{tag}"
    lab.topics(topic, output, dead, partitions=1)
    produced = History(lab.folder / "share-input", lab.id)
    with lab.step(f"writing {p['share_records']} records to {topic}", lane="input"):
        generate(lab.bootstrap, topic, p["share_records"], produced)
    ids = {r["offset"]: r["id"] for r in produced.rows("produced")}
    group = f"workers-{tag}"
    from ...toolbox.admin import set_group_config
    set_group_config(lab.cluster.admin(), group, **{
        "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": p["share_lock_ms"],
        "share.delivery.count.limit": p["share_delivery_limit"]})
    workers = [Worker(f"worker-{chr(ord('a') + i)}", History(lab.folder / "share-history" / f"worker-{i}", lab.id))
               for i in range(p["share_workers"])]
    for w in workers:
        start(lab, w, group, topic, output, dead, p, ids)
        lab.event(w.name, "start")
    try:
        lab.countdown("workers at work (ends once every record is acknowledged or written twice)",
                      seconds=p["share_watch_s"], done=lambda: Tally.of(workers).settled(p))
    finally:
        stop_together([w.child for w in workers])
    return Outcome.measure(lab, p, workers, produced, output, dead)


# ------------------------------------------------------------------ what was measured

@dataclass
class Outcome:
    summary: dict                  # the run's numbers (as_record()["share"])
    rows: list[dict]               # one per offset
    refused: list[str] = field(default_factory=list)   # the workers' own lines of refused acknowledgements
    audit: object = None           # the Spark audit's Verdict (lab.audit)

    @classmethod
    def measure(cls, lab, p: dict, workers: list[Worker], produced: History, output: str, dead: str) -> "Outcome":
        from ...toolbox.admin import topic_offsets
        from ...toolbox.streaming import audit_many
        tally = Tally.of(workers)
        expected = written_again(p)
        audits = audit_many({"share": dict(history=produced, bootstrap=lab.bootstrap, output_topic=output,
                                           input_topic=None, kinds=["duplicate", "lost"], allow_empty=True,
                                           expect="anomalies" if expected or p["share_failing_offset"] is not None
                                           else "clean")})
        audit = audits["share"]
        failing = p["share_failing_offset"]
        rows = []
        for o in range(p["share_records"]):
            got = tally.deliveries.get(o, [])
            rows.append({"offset": o, "work_ends_ms": finish_ms(p, o), "deliveries": len(got),
                         "workers": ", ".join(sorted({w for w, _ in got})),
                         "last_delivery_count": max((d or 0 for _, d in got), default=0),
                         "written": tally.written[o], "accepted": o in tally.accepted,
                         "failing": o == failing})
        fail_row = rows[failing] if failing is not None else None
        dead_letters = topic_offsets(lab.cluster.admin(), dead).get(0, 0)
        summary = {
            "records": p["share_records"], "workers": p["share_workers"], "first_poll": tally.first_poll,
            "lock_ms": p["share_lock_ms"], "delivery_limit": p["share_delivery_limit"],
            "on_failure": p["share_on_failure"],
            "written_more_than_once": sum(r["written"] > 1 for r in rows),
            "expected_written_again": expected,
            "never_written": sum(r["written"] == 0 for r in rows),
            "refused_acknowledgements": len(tally.refused),
            "failing_offset": failing,
            "failing_deliveries": fail_row["deliveries"] if fail_row else 0,
            "failing_answers": tally.answered.get(failing, []) if fail_row else [],
            # a delivery that waited in a worker's batch past its lock: the broker refused its answer
            "failing_refused": tally.refused_answers(failing) if fail_row else [],
            "expected_failing_deliveries": tries(p),
            "dead_letters": dead_letters,
            "audit_duplicates": audit.counts.get("duplicate"), "audit_lost": audit.counts.get("lost")}
        refused = [f"{r['app']}: offset {r['offset']}: {r['exception']}: {r['message']}" for r in tally.refused[:3]]
        return cls(summary, rows, refused, audit)

    @property
    def failed(self) -> bool:
        """A record written more than once, or one never written that no dead-letter topic holds."""
        s = self.summary
        return s["written_more_than_once"] > 0 or s["never_written"] > s["dead_letters"]

    def as_record(self) -> dict:
        return {"share": self.summary, "share_evidence": self.refused}

    def verdict(self) -> str:
        s = self.summary
        said = [f"{s['written_more_than_once']} of {s['records']} records written more than once"]
        if s["failing_offset"] is not None:
            said.append(f"the failing record delivered {s['failing_deliveries']} time(s), "
                        + ("then kept in the dead-letter topic" if s["dead_letters"] else "then never again, "
                           "and written nowhere"))
        return "; ".join(said)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows).set_index("offset")

    def explain(self) -> str:
        s, lines = self.summary, []
        lines.append(f"- The first poll took {s['first_poll']} of the {s['records']} records, each under a lock of "
                     f"{s['lock_ms']:,} ms from that fetch. {s['written_more_than_once']} record(s) were written more "
                     f"than once (the rule of the lock gives {s['expected_written_again']}); the broker refused "
                     f"{s['refused_acknowledgements']} acknowledgement(s); the Spark audit counts "
                     f"{s['audit_duplicates']} duplicate(s) in the output.")
        if self.refused:
            lines.append(f"  A worker was told: `{self.refused[0][:300]}`")
        if s["failing_offset"] is not None:
            where = (f"the worker wrote it to its dead-letter topic ({s['dead_letters']} record there)"
                     if s["dead_letters"] else "the group never delivered it again, and no dead-letter topic holds it")
            lines.append(f"- The record at offset {s['failing_offset']} was delivered {s['failing_deliveries']} "
                         f"time(s) (delivery limit {s['delivery_limit']}), answered "
                         f"{', '.join(a.upper() for a in s['failing_answers']) or 'nothing'}"
                         + (f" (and {', '.join(a.upper() for a in s['failing_refused'])}, refused: that delivery's lock "
                            "ran out while it waited behind other records of its batch)" if s["failing_refused"] else "")
                         + f"; {where}. The Spark audit counts {s['audit_lost']} input(s) the output never reflects.")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        fig.add_bar(x=[r["offset"] for r in self.rows], y=[r["written"] for r in self.rows], name="times written")
        fig.add_scatter(x=[r["offset"] for r in self.rows], y=[r["deliveries"] for r in self.rows],
                        mode="markers", name="times delivered")
        fig.update_layout(title="Each record: how often it was delivered and written",
                          xaxis_title="offset", yaxis_title="times", template="plotly_white", height=380)
        return fig


# ------------------------------------------------------------------ the exercises

# Exercise 1's other settings: each moves one side of the arithmetic (the lock, the slow record, the work)
OTHER_SETTINGS = ({"share_lock_ms": 10_000}, {"share_lock_ms": 30_000}, {"share_slow_ms": 2000},
                  {"share_slow_offset": 20, "share_lock_ms": 9000}, {"share_work_ms": 400, "share_lock_ms": 12_000},
                  {"share_records": 100, "share_lock_ms": 20_000})


def _check_written_again(result, fn) -> None:
    p = result.params
    cases = [("p", (p,), result.outcome.summary["written_more_than_once"], None)] + [
        ("p", ({**p, **change},), written_again({**p, **change}), setting(change)) for change in OTHER_SETTINGS]
    judge_count(fn, "written_more_than_once", cases, "this run wrote {n} record(s) more than once",
                "the app writes {n} record(s) more than once",
                "when does each record's lock start, and when does its work end?")


def _one_lock_per_record(p):
    """A tempting wrong answer: each record's lock starts when its work starts, so only slow work outlasts it."""
    return int(p["share_slow_ms"] > p["share_lock_ms"])


def _printed(result) -> list:
    """The run's own count, whatever the setting; the rule's column copied; 0 and every record."""
    s = result.outcome.summary
    return [lambda p: s["written_more_than_once"], lambda p: s["expected_written_again"], lambda p: 0,
            lambda p: p["share_records"]]


def _check_tries(result, fn) -> None:
    p = result.params
    cases = [(f"{p['share_on_failure']!r}, {p['share_delivery_limit']}",
              (p["share_on_failure"], p["share_delivery_limit"]), result.outcome.summary["failing_deliveries"], None)]
    cases += [(f"{answer!r}, {limit}", (answer, limit),
               tries({**p, "share_on_failure": answer, "share_delivery_limit": limit}),
               setting({"share_on_failure": answer, "share_delivery_limit": limit}))
              for answer in ANSWERS for limit in (2, 3, 7, 10)]
    judge_count(fn, "deliveries", cases, "in this run it was delivered {n} time(s)", "it is delivered {n} time(s)",
                "what does each answer do to the record, and when does the broker stop delivering it?")


def _tries_printed(result) -> list:
    s = result.outcome.summary
    return [lambda answer, limit: s["failing_deliveries"], lambda answer, limit: limit,
            lambda answer, limit: 1]


def _solution_written_again(result):
    return written_again


def _solution_tries(result):
    def deliveries(answer, limit):
        return 1 if answer == "reject" else limit
    return deliveries


EXERCISES = {
    1: Exercise(
        check=_check_written_again, solution=_solution_written_again,
        why="A fetch acquires all its records at once, and each one's lock runs from that fetch (here, the first "
            "poll), not from when the worker gets to it. A record whose work ends after the lock (the work on it and "
            "on every record before it in the poll) is no longer the worker's: the broker delivers it again, the "
            "late acknowledgement is refused, and the app writes it again. The failing record is never written. "
            "The table's `work_ends_ms` holds that sum for each offset.",
        wrong=lambda result: _one_lock_per_record,
        closer="For each offset, add up the work from the poll to the end of that record's work, and compare it with "
               "the lock. Which records end after it?",
        printed=_printed),
    2: Exercise(
        check=_check_tries, solution=_solution_tries, needs_failure=False,
        why="RELEASE hands the record back: the broker delivers it again, each time with a delivery count one "
            "higher, until the count reaches `share.delivery.count.limit`; then it archives it, and no one gets it "
            "again. REJECT archives it at once: delivered once. Neither writes it anywhere: a dead-letter topic is "
            "the app's own (Kafka 4.3 has none).",
        wrong=lambda result: (lambda answer, limit: limit + 1),
        closer="Count the deliveries in this run's table for the failing offset. What does the limit bound, and "
               "what does REJECT change?",
        printed=_tries_printed),
}


def workers_at_once(p: dict) -> int:
    return p["share_workers"]


# The Mitigate step runs the workers again with the learner's values: a lock long enough for a whole poll's work,
# and REJECT (to the app's own dead-letter topic) for the record that fails every time.
lesson = Lesson("share", "A queue of work", params=PARAMS, rules=RULES, needs=needs, body=run_lesson,
                question=question, measured_answer=measured_answer, exercises=EXERCISES, apps=("ShareWorker",),
                spark_audit=True, apps_at_once=workers_at_once)
