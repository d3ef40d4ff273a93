"""Lesson 07a, work between two polls (observed, audited by Spark, explained in the clients' words): consumers
of one topic, each in its own group, per client and variant (poll_loop_consumers starts them); what each read and
committed is a lab.record.history History, and the Spark audit's non_monotonic check counts the re-reads.
"""
from __future__ import annotations

import collections
import uuid
from dataclasses import dataclass, field

from ...toolbox import Param
from ...toolbox.apps import stop_together
from ...toolbox.lesson import Lesson
from ...toolbox.predict import choice_table, labels, named, which
from ...toolbox.result import Exercise, judge_rule, setting
from ...record.generator import generate
from ...record.history import History
from .. import written_fix
from .poll_loop_interval import INTERVAL
from .poll_loop_consumers import (CLIENTS, MIN_SESSION_MS, START, VARIANTS, Variant, _commit_failures, _dropped,
                                  _reads, _settled, applies, batch_ms, expected_to_loop, interval_ms)

PARAMS = [
    Param("poll_clients", list(CLIENTS), "the consumers the lesson compares: the Java client, librdkafka "
          "(confluent-kafka), a Kafka Streams app", choices=CLIENTS),
    Param("poll_variants", ["baseline"], "how each consumer runs, side by side: baseline (as the other parameters "
          "set it), max_poll_records_1 (one record per poll), longer_interval (max.poll.interval.ms = "
          "POLL_LONGER_INTERVAL_MS), pause_resume (partitions paused while a worker thread processes; not for Kafka "
          "Streams), consumer_protocol (the Java baseline on the consumer group protocol, KIP-848). The lesson's Run "
          "step runs the baseline, its Mitigate step the others", choices=VARIANTS),
    Param("poll_interval_ms", 6000, "max.poll.interval.ms", lo=MIN_SESSION_MS, hi=600_000, unit="ms",
          why="librdkafka needs session.timeout.ms <= max.poll.interval.ms, and the broker's minimum session is 6 s"),
    Param("poll_batch", 500, "max.poll.records: the most records one poll hands over", lo=1, hi=10_000),
    Param("poll_work_ms", 20, "processing time per record", lo=0, hi=10_000, unit="ms"),
    Param("poll_records", 600, "records in the topic", lo=1, hi=100_000),
    Param("poll_slow_record_ms", 0, "Kafka Streams: the time one slow record takes, in place of POLL_WORK_MS (0: "
          "no slow record)", lo=0, hi=600_000, unit="ms"),
    Param("poll_slow_offset", 100, "Kafka Streams: the offset of the slow record", lo=0, hi=100_000),
    Param("poll_longer_interval_ms", 30_000, "max.poll.interval.ms of the longer_interval variant", lo=MIN_SESSION_MS,
          hi=600_000, unit="ms"),
    Param("poll_watch_s", 30.0, "how long the consumers are watched at most (the watch ends sooner as POLL_REPEATS "
          "says)", lo=5, hi=600, unit="s"),
    Param("poll_repeats", 2, "the watch ends sooner once each consumer has either read the whole topic, or read one "
          "offset this many times more than once", lo=1, hi=10),
]


def _slow_record_exists(p: dict) -> str | None:
    if "streams" in p["poll_clients"] and p["poll_slow_record_ms"] and p["poll_slow_offset"] >= p["poll_records"]:
        return (f"POLL_SLOW_OFFSET={p['poll_slow_offset']} is past the topic's last offset "
                f"({p['poll_records'] - 1}): the Streams app would never meet its slow record.")
    return None


RULES = [_slow_record_exists]
NAMES = {"java": "the Java consumer", "librdkafka": "the librdkafka consumer", "streams": "Kafka Streams"}


def asked_variant(p: dict) -> str:
    """The way of running the consumers that the Predict question is about: their baseline if it runs."""
    return "baseline" if "baseline" in p["poll_variants"] else p["poll_variants"][0]


def asked_clients(p: dict) -> list[str]:
    return [c for c in p["poll_clients"] if applies(c, asked_variant(p))]


def _consumers(clients: list[str]) -> str:
    """The clients' names, as a sentence lists them: "A and B", "A, B and C"."""
    names = [NAMES[c] for c in clients]
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


def _named(looping: list[str], clients: list[str]) -> str:
    """The consumers that keep reading the same batch, as the choices word them."""
    n = len(clients)
    return named(looping, clients, _consumers, none="none of them: each moves on" if n > 1 else "no: it moves on",
                 every={1: "yes: it keeps reading it", 2: "both"}.get(n, f"all {n}" if n > 3 else "all three"),
                 several=lambda some, rest: f"{_consumers(some)}, not {' nor '.join(NAMES[c] for c in rest)}")


def looping_table(p: dict) -> tuple:
    """Every outcome the arithmetic allows (the plain clients share theirs; Kafka Streams' is its one slow
    record), so each choice is one a run can give: all, none, then the plain clients alone and Kafka Streams
    alone."""
    clients = asked_clients(p)
    plain = [c for c in clients if c != "streams"]
    outcomes = [clients, []] + ([plain, ["streams"]] if plain and "streams" in clients else [])
    return choice_table((_named(o, clients), o) for o in outcomes)


def question(p: dict) -> tuple:
    """Which consumers of the asked variant keep reading the same batch (looping_table). Every client does the same
    work per record: that Kafka Streams polls between its records is what it asks (lab/commands/misconceptions.py)."""
    variant, clients = asked_variant(p), asked_clients(p)
    batch = 1 if variant == "max_poll_records_1" else p["poll_batch"]
    said = f"{_consumers(clients)} get{'s' * (len(clients) == 1)} up to {batch} record{'s' * (batch != 1)} a poll, " \
           f"{p['poll_work_ms']} ms of work each"
    if "streams" in clients and p["poll_slow_record_ms"]:
        said += f"; Kafka Streams' record at offset {p['poll_slow_offset']} takes {p['poll_slow_record_ms']:,} ms"
    how = " (each pauses its partitions and keeps polling while a worker thread processes)" \
        if variant == "pause_resume" else "" if variant == "baseline" else f" ({variant})"
    return (f"{said[0].upper()}{said[1:]}{how}. "
            + (f"Each has max.poll.interval.ms = {interval_ms(p, variant):,} ms. Which of them keep reading the same "
               "batch again?" if len(clients) > 1 else
               f"It has max.poll.interval.ms = {interval_ms(p, variant):,} ms. Does it keep reading the same batch "
               "again?"),
            labels(looping_table(p)))


def measured_answer(record: dict, p: dict):
    variant, clients = asked_variant(p), asked_clients(p)
    rows = [record["poll_loop"].get(f"{c}/{variant}") for c in clients]
    if not clients or None in rows:
        return None
    looping = [c for c, row in zip(clients, rows) if row["looped"]]
    return which(looping, looping_table(p)) or _named(looping, clients)


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def run_lesson(lab, p: dict) -> "Outcome":
    topic = f"poll-input-{uuid.uuid4().hex[:6]}"
    lab.topics(topic, partitions=1)
    with lab.step(f"writing {p['poll_records']} records to {topic}", lane="input"):
        generate(lab.bootstrap, topic, p["poll_records"], History(lab.folder / "poll-input", lab.id))
    variants = [Variant(c, f, f"poll-{c}-{f}-{uuid.uuid4().hex[:4]}",
                        History(lab.folder / "poll-history" / f"{c}-{f}", lab.id))
                for c in p["poll_clients"] for f in p["poll_variants"] if applies(c, f)]
    for v in variants:
        START[v.client](lab, v, topic, p)
        lab.event(v.name, "start", detail=f"{batch_ms(p, v.variant, v.client) / 1000:.1f} s of work per poll, "
                                          f"interval {interval_ms(p, v.variant) / 1000:.0f} s")
    try:
        lab.countdown(f"consumers at work (ends once each has read everything or looped {p['poll_repeats']} "
                      "time(s))", seconds=p["poll_watch_s"],
                      done=lambda: all(_settled(v, p["poll_records"], p["poll_repeats"]) for v in variants))
    finally:
        stop_together([v.child for v in variants])
    return Outcome.measure(lab, p, variants, topic)


# ------------------------------------------------------------------ what was measured

@dataclass
class Outcome:
    rows: list[dict]                     # one per variant
    reads: dict                          # variant -> [(t_s, offset)] for the figure
    evidence: dict = field(default_factory=dict)   # variant -> the client's own first line about it
    audits: dict = field(default_factory=dict)     # variant -> the Spark audit's Verdict (lab.audit)

    @classmethod
    def measure(cls, lab, p: dict, variants: list[Variant], topic: str) -> "Outcome":
        from ...toolbox.admin import group_offsets
        from ...toolbox.streaming import audit_many
        committed = group_offsets(lab.cluster.admin(), {v.name: v.group for v in variants}, topic)
        audits = audit_many({v.name: dict(history=v.history, kinds=["non_monotonic"], allow_empty=True,
                                          expect="anomalies" if expected_to_loop(p, v.variant, v.client)
                                          else "clean")
                             for v in variants if _reads(v)})
        rows, reads, evidence = [], {}, {}
        for v in variants:
            read = _reads(v)
            per_offset = collections.Counter(r["offset"] for r in read)
            failures = _commit_failures(v)
            said = _dropped(v)
            if said:
                evidence[v.name] = said[0][1].strip()[:400]
            for f in failures:
                lab.event(v.name, "commit failed", at=f["ts"], tone="failure",
                          detail=f.get("exception") or f.get("code") or "")
            audit = audits.get(v.name)
            rows.append({
                "client": v.client, "variant": v.variant, "batch_ms": batch_ms(p, v.variant, v.client),
                "interval_ms": interval_ms(p, v.variant),
                "expected_to_loop": expected_to_loop(p, v.variant, v.client),
                "records": p["poll_records"],
                "reads": len(read), "distinct_offsets": len(per_offset),
                "max_reads_per_offset": max(per_offset.values(), default=0),
                # the group's committed offset, from the broker once the consumer stopped
                "committed_offset": (committed.get(v.name) or {}).get(0) or 0,
                "commit_failures": len(failures), "dropped_lines": len(said),
                "audit_jumps_back": None if audit is None else audit.counts.get("non_monotonic"),
                # a loop: a failed commit or an offset read again (dropped alone is not one: on the consumer
                # protocol the late commit can still go through)
                "looped": bool(failures) or max(per_offset.values(), default=0) > 1})
            reads[v.name] = [(r["ts"] - lab.t0, r["offset"]) for r in read]
        return cls(rows, reads, evidence, audits)

    @property
    def failed(self) -> bool:
        return any(r["looped"] for r in self.rows)

    def by_variant(self) -> dict:
        return {f"{r['client']}/{r['variant']}": r for r in self.rows}

    def as_record(self) -> dict:
        return {"poll_loop": self.by_variant(), "poll_loop_evidence": self.evidence}

    def verdict(self) -> str:
        looped = [k for k, r in self.by_variant().items() if r["looped"]]
        clean = [k for k, r in self.by_variant().items() if not r["looped"]]
        text = []
        if looped:
            text.append(f"looping (dropped from the group, the same offsets read again, commits failing): "
                        f"{', '.join(looped)}")
        if clean:
            text.append(f"clean: {', '.join(clean)}")
        return "; ".join(text)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows)

    def explain(self) -> str:
        lines = []
        for k, r in self.by_variant().items():
            arithmetic = (f"{r['batch_ms'] / 1000:.1f} s of work per poll against max.poll.interval.ms "
                          f"{r['interval_ms'] / 1000:.0f} s")
            if r["looped"]:
                lines.append(f"- **{k}**: {arithmetic}. Dropped from the group; {r['commit_failures']} commit(s) "
                             f"failed; {r['reads']} reads of {r['distinct_offsets']} offsets (one offset up to "
                             f"{r['max_reads_per_offset']} times; the Spark audit counts {r['audit_jumps_back']} "
                             f"jump(s) back to an offset already read); committed offset {r['committed_offset']} "
                             f"of {r['records']}.")
                if k in self.evidence:
                    lines.append(f"  The client said: `{self.evidence[k][:300]}`")
            elif r["dropped_lines"]:   # dropped, yet no loop: the consumer protocol's late commit went through
                lines.append(f"- **{k}**: {arithmetic}. Dropped from the group {r['dropped_lines']} time(s), yet "
                             f"{r['commit_failures']} commit(s) failed: it rejoined at the offset it had just "
                             f"committed. {r['reads']} reads of {r['distinct_offsets']} offsets (the Spark audit "
                             f"counts {r['audit_jumps_back']} jump(s) back), committed {r['committed_offset']} of "
                             f"{r['records']}.")
                if k in self.evidence:
                    lines.append(f"  The client said: `{self.evidence[k][:300]}`")
            else:
                how = ("poll() went on while a worker thread processed the paused partitions"
                       if r["variant"] == "pause_resume" else "each poll's work fits the interval")
                lines.append(f"- **{k}**: {arithmetic}: {how}. {r['reads']} reads of {r['distinct_offsets']} "
                             f"offsets, committed {r['committed_offset']} of {r['records']}, "
                             f"{r['commit_failures']} failed commit(s).")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for name, points in self.reads.items():
            if points:
                fig.add_scatter(x=[t for t, _ in points], y=[o for _, o in points], mode="markers", name=name,
                                marker={"size": 3})
        fig.update_layout(title="Offsets read over time: a saw-tooth is the same batch read again",
                          xaxis_title="seconds since the run began", yaxis_title="offset read",
                          template="plotly_white", height=420)
        return fig


# ------------------------------------------------------------------ the exercises

def loops(client, variant, p):
    # the work between two polls against the interval; pause_resume keeps polling; Kafka Streams polls between its
    # records, so only its longest record counts
    if variant == "pause_resume":
        return False
    work = max(p["poll_slow_record_ms"], p["poll_work_ms"]) if client == "streams" else \
        (1 if variant == "max_poll_records_1" else p["poll_batch"]) * p["poll_work_ms"]
    return work > (p["poll_longer_interval_ms"] if variant == "longer_interval" else p["poll_interval_ms"])


def _only_the_batch(client, variant, p):
    """A tempting wrong answer: the batch's work against the interval, in the baseline only, for every client:
    Kafka Streams' batch taken for work between two polls, and max.poll.records=1 for a cure of a slow record."""
    return variant == "baseline" and p["poll_batch"] * p["poll_work_ms"] > p["poll_interval_ms"]


# Exercise 1's other settings: each moves one side of the arithmetic (the interval, the batch, the slow record)
OTHER_SETTINGS = ({"poll_interval_ms": 60_000}, {"poll_batch": 10}, {"poll_slow_record_ms": 1000},
                  {"poll_slow_record_ms": 120_000}, {"poll_work_ms": 200, "poll_longer_interval_ms": 60_000})


# The variants exercise 1 names: the classic group protocol's (consumer_protocol is the Mitigate step's comparison)
ASKED_VARIANTS = ("baseline", "max_poll_records_1", "longer_interval", "pause_resume")


def _check_loops(result, fn) -> None:
    p = result.params
    cases = [(f"{r['client']!r}, {r['variant']!r}, p", (r["client"], r["variant"], dict(p)), r["looped"], None)
             for r in result.outcome.rows if r["variant"] in ASKED_VARIANTS]
    for change in OTHER_SETTINGS:   # the same arithmetic at other settings
        q = {**p, **change}
        cases += [(f"{client!r}, {variant!r}, p", (client, variant, q), expected_to_loop(q, variant, client),
                   setting(change))
                  for client in CLIENTS for variant in ASKED_VARIANTS if applies(client, variant)]
    judge_rule(fn, "loops", cases, (("looped", "read on"), ("loops", "reads on")),
               "compare the work between two of its polls with its max.poll.interval.ms (for Kafka Streams, its one "
               "slow record), and ask what each variant changes")


def _loops_printed(result) -> list:
    """Look-ups of the run's table (`looped`) and of the Mitigate cell's rows (`expected_to_loop` at the run's
    settings), False for the rest; and True, and False, whatever they are given."""
    p, seen = result.params, {(r["client"], r["variant"]): r["looped"] for r in result.outcome.rows}
    written = written_fix("07a").get("poll_variants", [])
    shown = {**{(c, v): expected_to_loop(p, v, c) for v in written for c in CLIENTS if applies(c, v)}, **seen}
    return [lambda c, v, q: seen.get((c, v), False), lambda c, v, q: shown.get((c, v), False),
            lambda *_: True, lambda *_: False]


EXERCISES = {
    1: Exercise(
        check=_check_loops,
        solution=lambda result: loops,
        why="A consumer loops when the work between two of its polls lasts longer than `max.poll.interval.ms`: its "
            "own client drops it from the group, its commit fails, and the next poll rejoins at the last committed "
            "offset, the same batch again. The work is `max.poll.records` x the time per record for the plain "
            "clients; Kafka Streams polls again between records once half the interval has passed, so for it the "
            "work is its longest record, which `max.poll.records=1` does not shorten. A "
            "longer interval moves the bound; pause/resume keeps calling poll() while a worker processes, so no "
            "work counts against it. The table's `batch_ms` and `interval_ms` show the two sides for each variant.",
        wrong=lambda result: _only_the_batch,
        closer="For each variant, find how long the consumer goes without calling poll() and the "
               "max.poll.interval.ms it runs with. Which variants shorten the first, which lengthen the second, and "
               "which keep calling poll() while the work goes on? Kafka Streams polls between two records: for it, the "
               "longest gap is its longest record.",
        printed=_loops_printed,
    ),
    2: INTERVAL,   # an experiment on a case of its own (poll_loop_interval)
}


def consumers_side_by_side(p: dict) -> int:
    # one consumer per client and variant (pause_resume not for Kafka Streams), all watched at once
    return sum(applies(c, f) for c in p["poll_clients"] for f in p["poll_variants"])


# The Run step runs the consumers in their baseline (poll_variants' default); the Mitigate step runs them again with
# the learner's values over the parameters: the other variants (the notebook's written fix), or a baseline with a
# longer interval or a smaller batch.
lesson = Lesson("poll_loop", "Work between two polls", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("PollLoopConsumer", "SlowRecordApp", "lab.apps.consumer_app"), spark_audit=True,
                apps_at_once=consumers_side_by_side, mitigate_base={"poll_variants": ["baseline"]})
