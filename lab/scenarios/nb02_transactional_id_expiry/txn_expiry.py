"""Notebook 02's scenario ("02 · An idle exactly-once app loses its transactional id"): SPEC, needs() and run(), which
runs the idle rounds of the clients (txn_clients) on a KRaft broker with a short transactional.id.expiration.ms and
part C on old brokers (txn_unknown_producer). Three lessons (LESSONS: clients, streams, old_brokers), each run alone
in its section, then its Mitigate step (mitigate_<lesson>) with the learner's fix. TxnExpiryResult shows a lesson and
checks the exercises. The default versions straddle the behaviours the notebook compares: kafka-clients 3.9 (the error
is abortable) and 4.x (fatal); Kafka Streams 3.7 (the thread dies), and 3.8 (TaskMigratedException) in its Mitigate
step; broker 2.0.1 (forgets the producer), and 2.4.1 (keeps it) in its Mitigate step.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ...cluster import is_zookeeper_version, parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import Param, Result, Run, Spec, Timeline, grep
from ...experiment.admin import expired_at
from ...experiment.consume import read_to_end
from ...experiment.parts import Parts
from ...experiment.result import Exercise, called, expect, is_number, number
from ...programs import clients_classpath
from . import txn_unknown_producer as part_c
from .txn_clients import CLIENTS, ERROR_CODE, heartbeat_interval_ms, streams_examples

SOURCE_MESSAGE = "The producer attempted to use a producer id which is not currently assigned to its transactional id"
PYTHON_MODES = ("crash", "abort", "recreate", "naive", "heartbeat", "abort-offsets-first")


def _kraft(version):
    if is_zookeeper_version(version):
        raise LabError(f"BROKER_VERSION={version}: the clients run on a KRaft broker (3.3+), old ones in OLD_BROKERS.")
    __import__("lab.cluster.kraft", fromlist=["kafka_classpath"]).kafka_classpath(version)


SPEC = Spec(
    Param("broker_version", KAFKA_VERSION, "the modern broker (KRaft) the clients run on",
          check=lambda v: _kraft(v)),
    Param("expiration_ms", 10000, "transactional.id.expiration.ms (production default 604800000, 7 days)",
          lo=1, hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config"),
    Param("cleanup_interval_ms", 1000, "transaction.remove.expired.transaction.cleanup.interval.ms "
          "(default 3600000)", lo=1, hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config"),
    Param("idle_s", 15.0, "how long the clients sit idle after their last transaction", lo=0, hi=3600, unit="s"),
    Param("observe_s", 45.0, "how long to watch the clients once the input arrives", lo=5, hi=600, unit="s"),
    Param("python_modes", list(PYTHON_MODES), "lab/apps/eos_app.py behaviours on error", choices=PYTHON_MODES),
    Param("heartbeat_ms", 0, "the `heartbeat` client's interval between transactions while idle (0: a third of "
          "EXPIRATION_MS)", lo=0, hi=2 ** 31 - 1, unit="ms"),
    Param("heartbeat_misses", 0, "heartbeats the `heartbeat` client skips while idle (an app stalled by a long GC "
          "pause or a slow deploy)", lo=0, hi=10),
    Param("java_clients", ["3.9.1", "4.3.1"], "kafka-clients versions of the lone Java producer",
          check=lambda vs: [clients_classpath(v) for v in vs]),
    Param("streams_versions", ["3.7.0"], "Kafka Streams versions (WordCountDemo, exactly-once), one "
          "idle round each (its topics are fixed)", check=lambda vs: [streams_examples(v) for v in vs]),
    *part_c.PARAMS,
    rules=(lambda p: None if len(p["python_modes"]) + len(p["java_clients"]) <= 8 else
           "At most 8 Python and Java clients in one round (2 cores).",),
)


def broker_config(p: dict) -> dict:
    """The fast recipe: ids expire after EXPIRATION_MS, swept every CLEANUP_INTERVAL_MS; retention checked every
    second (part C runs here too); idle producer state kept 5 s (KIP-854, 3.4+)."""
    v = parse_version(p["broker_version"])
    config = {"transactional.id.expiration.ms": p["expiration_ms"],
              "transaction.remove.expired.transaction.cleanup.interval.ms": p["cleanup_interval_ms"],
              "log.retention.check.interval.ms": 1000, **({"producer.id.expiration.ms": 5000} if v >= (3, 4) else {}),
              **({"log.initial.task.delay.ms": 1000} if v >= (3, 8) else {})}
    return {k: str(v) for k, v in config.items()}


def needs(p: dict) -> dict:
    return {"nodes": 1, "version": p["broker_version"], "broker_config": broker_config(p)}


PLAIN_CLIENTS = {"streams_versions": [], "old_brokers": [], "check_pinned_zookeeper": False}


def quick(p: dict) -> dict:
    """One round of plain clients: no Kafka Streams, no part C (the panel)."""
    return {**p, **PLAIN_CLIENTS}


def rounds(p: dict) -> list[list[str]]:
    """Client names per idle round: WordCountDemo's topics are fixed, so one Streams version a round."""
    streams = [f"streams-{v}" for v in p["streams_versions"]]
    first = [f"python-{m}" for m in p["python_modes"]] + [f"java-{v}" for v in p["java_clients"]] + streams[:1]
    return [r for r in [first, *[[s] for s in streams[1:]]] if r]


IDLE_ANSWERS = ("it commits normally", "it fails; after its restart the input is processed again",
                "it fails and the input is lost")


STREAMS_ANSWERS = ("the stream thread dies: the client goes to ERROR", "the task migrates: the thread carries on",
                   "no error: the id was still there")
OLD_BROKER_ANSWERS = ("the broker has forgotten the producer: UNKNOWN_PRODUCER_ID",
                      "no error: the broker still knows the producer")


def question(p: dict) -> tuple:
    """The clients lesson's Predict step: the `crash` client's first transaction after the idle period."""
    return (f"The `crash` client (a supervisor restarts it) sits idle {p['idle_s']:g} s; its transactional id "
            f"expires after {p['expiration_ms'] / 1000:g} s of idleness. What happens to its first transaction when "
            "the next input arrives?", IDLE_ANSWERS)


def streams_question(p: dict) -> tuple:
    """The streams lesson's Predict step: the first Kafka Streams version of the lesson, idle as long."""
    version = (p["streams_versions"] or ["3.7.0"])[0]
    return (f"A Kafka Streams {version} app under exactly-once sits idle {p['idle_s']:g} s (ids expire after "
            f"{p['expiration_ms'] / 1000:g} s), then one input arrives. What happens to it?", STREAMS_ANSWERS)


def old_broker_question(p: dict) -> tuple:
    """The old-broker lesson's Predict step: the first broker of OLD_BROKERS."""
    version = (p["old_brokers"] or ["2.0.1"])[0]
    return (f"On a broker {version}, retention deletes every record of an idle transactional producer. Then it "
            "commits again. What does the broker answer?", OLD_BROKER_ANSWERS)


def run(cluster=None, progress: bool = True, **params) -> "TxnExpiryResult":
    """Clients commit, sit idle IDLE_S, get one input each: what does each one do, and the data?"""
    p = SPEC.validate(**params)
    with Run("txn-expiry", cluster=cluster, progress=progress, spark_audit=bool(rounds(p)), **needs(p)) as lab:
        old = lab.background(part_c.old_brokers, lab, p) if p["old_brokers"] or p["check_pinned_zookeeper"] else None
        clients = {}
        for names in rounds(p):
            clients.update(_round(lab, p, [CLIENTS[n.split("-")[0]](lab, p, n) for n in names]))
        upid = old.result(900) if old else {}
        if p["old_brokers"]:
            upid[p["broker_version"]] = part_c.unknown_producer(lab, p, lab.timeline)
        lab.phase("auditing the output topics on Spark (read_committed and read_uncommitted)")
        audits = {n: c.audit().counts for n, c in clients.items() if c.kind != "java"}
        result = TxnExpiryResult("txn_expiry", p, lab.id, lab.timeline, clients={n: c.summary for n, c in
                                                                                 clients.items()}, audits=audits,
                                 part_c={v: r for v, r in upid.items() if v != "pinned"}, pinned=upid.get("pinned"),
                                 logs={n: c.log for n, c in clients.items()}, cluster=lab.cluster)
    return result


def _merged(ran: list, params: dict) -> "TxnExpiryResult":
    """The results of the sections that ran, as one (none: a lesson that did not run)."""
    first = ran[0] if ran else None
    pinned = next((r.pinned for r in ran if r.pinned), None)
    return TxnExpiryResult("txn_expiry", params, first.run_id if first else "",
                           Timeline.joined(*(r.timeline for r in ran)) if ran else Timeline(0),
                           clients={n: c for r in ran for n, c in r.clients.items()},
                           audits={n: a for r in ran for n, a in r.audits.items()},
                           part_c={v: c for r in ran for v, c in r.part_c.items()}, pinned=pinned,
                           logs={n: log for r in ran for n, log in r.logs.items()},
                           cluster=next((r.cluster for r in ran if r.cluster), None))


# The notebook's lessons, each its own section: the parameters that are its runs, and its Predict question.
LESSONS = Parts(SPEC, run, {"clients": (("python_modes", "java_clients"), question),
                            "streams": (("streams_versions",), streams_question),
                            "old_brokers": (("old_brokers", "check_pinned_zookeeper"), old_broker_question)},
                merge=_merged)
predict, run_lesson, together = LESSONS.predict, LESSONS.run_lesson, LESSONS.together
# Each lesson's Mitigate step (FIX_<LESSON>): the lesson alone again with the learner's fix. The clients: a longer
# expiration (the step starts a broker of its own with it); Kafka Streams: a release from 3.8; the old broker: 2.4+.
mitigate_clients = LESSONS.mitigate("clients")
mitigate_streams = LESSONS.mitigate("streams")
mitigate_old_brokers = LESSONS.mitigate("old_brokers", check_pinned_zookeeper=False)


def _round(lab: Run, p: dict, clients: list) -> dict:
    """Warm up, go idle IDLE_S, one input each, watch until every client settled (or OBSERVE_S)."""
    lab.topics(*dict.fromkeys(t for c in clients for t in c.topics()))
    for c in sorted(clients, key=lambda c: c.kind == "python"):   # slow starters (JVMs) first
        c.start()
    lab.phase(f"started {', '.join(c.name for c in clients)}")
    fed: dict = {}

    def warm():   # each started client gets a record every feed interval until it has committed
        for c in clients:
            c.check()
            if c.started() and time.time() - fed.get(c.name, 0) >= c.feed_interval:
                fed[c.name] = time.time()
                c.feed()
        return all(c.warm() for c in clients)
    lab.wait(warm, 240, "every client to commit a first transaction",
             evidence=lambda: f"not yet: {[c.name for c in clients if not c.warm()]}")
    for c in clients:
        c.quiesce()
    lab.wait(lambda: all(c.quiet() for c in clients), 60, "the last traffic to be committed")
    idle_start = time.time()
    lab.phase(f"idle {p['idle_s']:g} s (expiration {p['expiration_ms'] / 1000:g} s, swept every "
              f"{p['cleanup_interval_ms'] / 1000:g} s)")
    lab.countdown("idle", seconds=p["idle_s"])
    input_at = time.time()
    lab.timeline.band("idle", idle_start, input_at)
    for c in clients:
        c.feed("x")
    lab.phase("input sent to every client; watching")
    lab.countdown("watching the clients", seconds=p["observe_s"],
                  done=lambda: [c.supervise() for c in clients] and all(c.settled(input_at) for c in clients))
    time.sleep(0.5)   # the last log lines
    for c in clients:
        c.stop()
    sweeps = expired_at(read_to_end(lab.bootstrap, "__transaction_state"), {c.name: c.txn_id for c in clients},
                        idle_start)
    for c in clients:
        c.summarise(idle_start, input_at, sweeps[c.name])
    lab.say("expired: " + ", ".join(f"{c.name} {'yes' if sweeps[c.name] else 'no'}" for c in clients))
    return {c.name: c for c in clients}


# ------------------------------------------------------------------ the result

def _frame(rows):
    import pandas as pd
    return pd.DataFrame(rows)


@dataclass
class TxnExpiryResult(Result):
    clients: dict = field(default_factory=dict)      # name -> summary (see _Client.summarise)
    audits: dict = field(default_factory=dict)       # name -> audit counts
    part_c: dict = field(default_factory=dict)       # broker version -> part C record
    pinned: dict | None = None
    logs: dict = field(default_factory=dict)
    title: ClassVar[str] = "Clients idle, then one input each"

    @property
    def failed(self) -> bool:
        """A client met error 49 (a Kafka Streams app only when its thread died of it: from 3.8 the task migrates
        and the app carries on by itself), or an old broker forgot a producer (lesson 3)."""
        return any(c["code"] == ERROR_CODE and not (n.startswith("streams") and c["handling"] == "task migrated")
                   for n, c in self.clients.items()) or any(r["reproduced"] for r in self.part_c.values())

    def head(self) -> str:
        idle, exp, sweep = self.params["idle_s"], self.params["expiration_ms"] / 1000, \
            self.params["cleanup_interval_ms"] / 1000
        return f"idle {idle:g} s {'<' if idle < exp + sweep else '>='} expiration {exp:g} s + one sweep"

    def lessons_ran(self) -> list[str]:
        ran = {"clients": any(n.startswith(("python", "java")) for n in self.clients),
               "streams": any(n.startswith("streams") for n in self.clients),
               "old_brokers": bool(self.part_c or self.pinned)}
        return [name for name, yes in ran.items() if yes]

    def measured_answer(self, lesson: str | None = None) -> str | None:
        """This run's answer to a lesson's Predict question (default: the one lesson that ran); None when that
        lesson did not run or did not measure it."""
        if lesson is None:
            ran = self.lessons_ran()
            lesson = ran[0] if len(ran) == 1 else None
        if lesson == "clients":
            c = self.clients.get("python-crash")
            return None if c is None else IDLE_ANSWERS[0] if not c["error"] else \
                IDLE_ANSWERS[1] if c["recovered"] else IDLE_ANSWERS[2]
        if lesson == "streams":
            c = self.clients.get(f"streams-{(self.params['streams_versions'] or [''])[0]}")
            return None if c is None else STREAMS_ANSWERS[2] if not c["error"] else \
                STREAMS_ANSWERS[0] if c["handling"] == "thread died" else STREAMS_ANSWERS[1]
        if lesson == "old_brokers":
            c = self.part_c.get((self.params["old_brokers"] or [""])[0])
            return None if c is None else OLD_BROKER_ANSWERS[0] if c["reproduced"] else OLD_BROKER_ANSWERS[1]
        return None

    def verdict(self) -> str:
        cs = self.clients
        if not cs and not self.part_c:
            return "nothing ran in this section (its parameters are empty)"
        if not cs:   # the old brokers alone
            return "; ".join(f"broker {v}: " + ("UNKNOWN_PRODUCER_ID once retention deleted the producer's records"
                             if r["reproduced"] else "no error, the producer committed again") for v, r in
                             self.part_c.items())
        expired, stuck = [n for n in cs if cs[n]["expired"]], [n for n in cs if not cs[n]["recovered"]]
        hit = [n for n in cs if cs[n]["code"] == ERROR_CODE]
        if not expired and not hit:
            return f"{self.head()}: the id was never expired, " + (
                "the commit succeeded" if not stuck else f"yet {', '.join(stuck)} did not commit the input")
        streams = [f"Kafka Streams {n.split('-', 1)[1]}: {cs[n]['handling']}" for n in hit if n.startswith("streams")]
        return (f"{self.head()}: the coordinator expired {len(expired)} of {len(cs)} ids; {len(hit)} client(s) got "
                f"INVALID_PRODUCER_ID_MAPPING (error 49){''.join(f'; {s}' for s in streams)}; "
                f"{len(cs) - len(stuck)} of {len(cs)} committed the input")

    def explain(self) -> str:
        exp, sweep = self.params["expiration_ms"] / 1000, self.params["cleanup_interval_ms"] / 1000
        lines = [f"- `{n}`: id expired at {c['sweep'] - self.timeline.t0:.1f} s; `{c['error']}` ({c['code']}) from "
                 f"`{c['call']}`, {c['handling']}; then {c['then']}; {'recovered' if c['recovered'] else 'NOT recovered'}"
                 for n, c in self.clients.items() if c["error"] and c["sweep"]]
        lines += [f"- part C, broker {v}: " + ("`UnknownProducerIdException`: the broker dropped the producer with its "
                  "last records (before 2.4)" if r["reproduced"] else "no error: the broker kept the producer's state "
                  "after retention deleted its records") for v, r in self.part_c.items()]
        why = "" if self.failed else ("\n\nEvery id was still mapped to its producer id when the input came: "
                                      "AddPartitionsToTxn, AddOffsetsToTxn and EndTxn were answered normally.")
        return (f"The coordinator forgets an id idle longer than {exp:g} s at its next sweep (every {sweep:g} s): idle "
                f"up to {exp:g} s never, from {exp + sweep:g} s always, in between the sweep decides. **This run: "
                f"{self.verdict()}.**{why}\n\n" + "\n".join(lines))

    def table(self):
        """One row per client: the first error after the idle period and what happened next."""
        return _frame([{"client": n, **{k: c[k] for k in ("error", "code", "call", "handling", "then", "errors",
                        "recovered", "error_after_idle_s", "recovery_s", "message")}} for n, c in self.clients.items()])

    def expiry(self):
        """Per client: its last transaction before the idle period, when its id expired, its first error."""
        def t(ts):
            return None if ts is None else round(ts - self.timeline.t0, 2)
        return _frame([{"client": n, "last transaction (s)": t(c["last_txn"]), "input (s)": t(c["input_at"]),
                        "expired at (s)": t(c["sweep"]), "first error (s)": t(c["first_error"]),
                        "idle when expired (s)": round(c["sweep"] - c["last_txn"], 2) if c["sweep"] and c["last_txn"]
                        else None} for n, c in self.clients.items()])

    def audit_table(self):
        return _frame([{"client": n, "recovered": self.clients[n]["recovered"],
                        "input read (times)": self.clients[n]["reads_per_input"], **a} for n, a in self.audits.items()])

    def mitigation_table(self):
        """The fixes this run had beside the failure, each measured."""
        return _frame(self.mitigations())

    def part_c_table(self):
        return _frame(list(self.part_c.values()))

    def part_c_figure(self):
        return self.timeline.figure("Part C: retention deletes the producer's records, then it commits again",
                                    lanes=[f"broker {v}" for v in self.part_c])

    def figure(self):
        return self.timeline.figure(f"{self.head()}: {'failure' if self.failed else 'no failure'}",
                                    lanes=["run", *self.clients])

    def log_lines(self, client: str, pattern: str, limit: int = 6) -> list[str]:
        """Lines of a client's own log (librdkafka, Java client, Kafka Streams) matching a regex."""
        return [re.sub(r"\[[^\]]{40,}\] ?", "", line)[:300] for _, line in grep(Path(self.logs[client]), pattern)][:limit]

    def mitigations(self) -> list[dict]:
        rows = [(f"heartbeat transaction every {heartbeat_interval_ms(self.params)} ms", self, "python-heartbeat"),
                 ("new producer on INVALID_PRODUCER_ID_MAPPING", self, "python-recreate"),
                 *[(f"Kafka Streams {v}", self, f"streams-{v}") for v in self.params["streams_versions"]
                   if parse_version(v) >= (3, 8)]]
        return [{"mitigation": label, "client": n, **{k: r.clients[n][k] for k in ("errors", "expired", "recovered")},
                 **{k: r.audits.get(n, {}).get(k) for k in ("duplicate", "lost")}}
                for label, r, n in rows if n in r.clients]

    def record_fields(self) -> dict:
        cs = self.clients

        def keep(names, *keys):
            return {n: {k: cs[n][k] for k in keys} for n in names}
        jvm = [n for n in cs if n.startswith(("java", "streams"))]
        return {
            "part_a": keep(cs, "error", "code", "call", "handling", "recovered", "expired", "errors", "restarts",
                           "reads_per_input"),
            "part_a_audit": {n: a for n, a in self.audits.items() if n.startswith("python")},
            "part_b": keep(jvm, "error", "code", "handling", "recovered", "errors", "expired", "message"),
            "part_b_audit": {n: a for n, a in self.audits.items() if n.startswith("streams")},
            "stuck_abort": keep(["python-abort-offsets-first"], "errors", "recovered", "error", "expired")
            ["python-abort-offsets-first"] if "python-abort-offsets-first" in cs else None,
            "part_c": {v: {k: x for k, x in r.items() if k != "evidence"} for v, r in self.part_c.items()},
            "pinned_zookeeper": self.pinned, "mitigations": self.mitigations(),
            "time_to_error_s": {n: c["error_after_idle_s"] for n, c in cs.items() if c["error"]},
            "source_message_seen": any(SOURCE_MESSAGE in (c["message"] or "") for c in cs.values()),
            "idle_when_expired_s": [round(c["sweep"] - c["last_txn"], 2) for c in cs.values()
                                    if c["sweep"] and c["last_txn"]]}


# ------------------------------------------------------------------ the exercises

def idle_bounds(expiration_ms, cleanup_ms):
    # not yet expired below the expiration; expired at the first sweep after it: at most one interval later
    return expiration_ms / 1000, (expiration_ms + cleanup_ms) / 1000


def needed_new_producer(table):
    if not len(table):
        return set()
    return set(table[table["handling"].isin(["fatal", "thread died"])
                     | table["then"].fillna("").str.startswith(("recreate", "exit"))]["client"])


PRODUCTION = (604800000, 3600000)   # the defaults: ids expire after 7 days, swept every hour


def _check_idle_bounds(r: TxnExpiryResult, fn) -> None:
    _ran(r, "clients", "python_modes")
    for expiration_ms, cleanup_ms in [(r.params["expiration_ms"], r.params["cleanup_interval_ms"]), PRODUCTION]:
        exp, sweep = expiration_ms / 1000, cleanup_ms / 1000
        call = f"idle_bounds({expiration_ms}, {cleanup_ms})"
        bounds = called(fn, call, expiration_ms, cleanup_ms)
        expect(isinstance(bounds, (tuple, list)) and len(bounds) == 2 and all(map(is_number, bounds)),
               f"{call} returned {bounds!r}: return (shortest, longest), in seconds")
        lo, hi = bounds
        expect(lo <= exp + 0.5, f"an id idle {lo:g} s may already be gone: it expires after {exp:g} s, at a sweep")
        expect(hi >= exp + sweep - 0.5,
               f"an id idle {hi:g} s may still be there: the sweep runs every {sweep:g} s")
        expect(hi - lo <= sweep + 0.5, f"({lo:g}, {hi:g}) is looser than one sweep interval ({sweep:g} s)")
    # The measured idle times (result.expiry()) are shown beside the bounds, not checked against them: a sweep or
    # a transaction's completion delayed by a loaded machine moves them by more than any fixed tolerance.


def _expiration_alone(expiration_ms, cleanup_ms):
    return expiration_ms / 1000, expiration_ms / 1000


def _heartbeat_ms(r: TxnExpiryResult) -> int:
    """Exercise 2: a third of the expiration: after one missed heartbeat, two thirds of it without a transaction."""
    return r.params["expiration_ms"] // 3


def _just_before_the_sweep(r: TxnExpiryResult) -> int:
    return r.params["expiration_ms"] - r.params["cleanup_interval_ms"]


def _check_heartbeat(r: TxnExpiryResult, answer) -> None:
    """An experiment: the `heartbeat` client alone with the learner's interval, its first heartbeat skipped, idle
    until two intervals and a sweep have passed; what the coordinator did with its id decides."""
    _ran(r, "clients", "python_modes")
    exp, sweep = r.params["expiration_ms"], r.params["cleanup_interval_ms"]
    given = number(answer, "the milliseconds between two heartbeat transactions")
    expect(given < exp, f"a heartbeat every {given:g} ms leaves the id idle {given / 1000:g} s between two "
           f"transactions even when none is missed, at least the {exp / 1000:g} s expiration: no need to run that")
    expect(given >= exp / 4, f"a heartbeat every {given:g} ms keeps the id, with room for more than two missed "
           "ones: the question is the longest interval that still has room for one")
    idle_s = math.ceil((2 * given + sweep) / 1000) + 2   # the skipped heartbeat, the next one, a sweep after it
    cluster = r.running_cluster()
    print(f"Exercise 2: the `heartbeat` client alone, a transaction every {given:g} ms while idle {idle_s} s, its "
          "first heartbeat skipped, " + ("on the notebook's cluster ..." if cluster else "on a broker of its own ..."))
    again = run(cluster=cluster, **{
        **r.params, **PLAIN_CLIENTS, "python_modes": ["heartbeat"], "java_clients": [], "heartbeat_ms": int(given),
        "heartbeat_misses": 1, "idle_s": idle_s, "observe_s": 20})
    beat = again.clients["python-heartbeat"]
    gap = beat["longest_idle_s"]
    print(f"Measured: at most {gap:.1f} s without a transaction; the coordinator "
          f"{'expired the id' if beat['expired'] else 'kept the id'}.")
    expect(not beat["expired"], f"with a heartbeat every {given:g} ms and one missed, the id was to go "
           f"{2 * given / 1000:g} s without a transaction, past the {exp / 1000:g} s expiration: a sweep removed it "
           f"before the next heartbeat, which failed ({gap:.1f} s without a transaction that succeeded)")
    expect(gap is not None and gap < exp / 1000, f"the id lived, but it went {gap:.1f} s without a transaction, "
           f"past the {exp / 1000:g} s expiration: it lived because no sweep (every {sweep / 1000:g} s) came in "
           "the few moments it was expired; in production that is a lottery")


def _needed_new_producer(r: TxnExpiryResult) -> set:
    """The clients whose producer could not be reused, from what each did with the error."""
    return {n for n, c in r.clients.items() if c["handling"] in ("fatal", "thread died")
            or (c["then"] or "").startswith(("recreate", "exit"))}


def _check_needed_new_producer(r: TxnExpiryResult, fn) -> None:
    _ran(r, "clients", "python_modes")
    answer = called(fn, "needed_new_producer(result.table())", r.table())
    try:
        names = None if isinstance(answer, (str, dict)) else set(answer)
    except TypeError:
        names = None
    expect(names is not None and all(isinstance(n, str) for n in names),
           f"needed_new_producer(result.table()) returned {answer!r}: return a set of client names")
    answer, truth = names, _needed_new_producer(r)
    expect(answer == truth, f"{sorted(answer)}: read each client's `handling` (was the error fatal, did the thread "
                            "die?) and `then` (did the app recreate its producer or exit?)" + (
                                f"; {sorted(answer - truth)} carried on with the same producer" if answer - truth
                                else ""))


def _every_client(r: TxnExpiryResult):
    """Every client of the table, as if error 49 always needed a new producer (one fewer when that happens to be
    right)."""
    every = set(r.clients)
    wrong = every if every != _needed_new_producer(r) else set(sorted(every)[1:])
    return lambda table: wrong


def _ran(r: TxnExpiryResult, lesson: str, key: str) -> None:
    """An exercise of a lesson this run left out asks for the lesson first."""
    if lesson not in r.lessons_ran():
        raise LabError(f"The lesson {lesson!r} was not run in this run ({key.upper()}={r.params[key]!r}): run its "
                       "section first.")


def _judged(fn, name: str, versions: dict, why: str) -> None:
    """fn(version) against the truth for each version: a hint naming the first version it gets wrong."""
    for version, truth in versions.items():
        answer = called(fn, f"{name}({version!r})", version)
        expect(isinstance(answer, bool), f"{name}({version!r}) returned {answer!r}: return True or False")
        expect(answer == truth, f"{name}({version!r}) returned {answer}, but {why(version, truth)}")


def survives(version):
    # from 3.8.0 (KAFKA-16699) Streams handles the error like a fencing: the task migrates, the thread goes on
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (3, 8)


def _streams_truth(r: TxnExpiryResult) -> dict:
    """Measured: each Streams version of this run that met the error; then releases on either side of 3.8.0."""
    measured = {n.split("-", 1)[1]: c["handling"] == "task migrated" for n, c in r.clients.items()
                if n.startswith("streams") and c["error"]}
    return {**measured, **{v: parse_version(v) >= (3, 8) for v in ("2.8.2", "3.6.2", "3.8.1", "3.9.1", "4.1.0")}}


def _check_survives(r: TxnExpiryResult, fn) -> None:
    _ran(r, "streams", "streams_versions")
    measured = {n for n, c in r.clients.items() if n.startswith("streams") and c["error"]}
    _judged(fn, "survives", _streams_truth(r), lambda v, truth: (
        f"Kafka Streams {v} " + ("carried on here (the `handling` column: task migrated)" if truth and f"streams-{v}"
                                 in measured else "went to ERROR here (the thread died)" if f"streams-{v}" in measured
                                 else "handles the error like a fencing (task migrated)" if truth
                                 else "lets the exception kill the stream thread") + "; which release changed it?"))


def _old_broker_truth(r: TxnExpiryResult) -> dict:
    """Measured: each broker of this run's part C; then releases on either side of 2.4.0."""
    return {**{v: c["reproduced"] for v, c in r.part_c.items()},
            **{v: parse_version(v) < (2, 4) for v in ("1.1.1", "2.3.1", "2.4.1", "2.8.2", "3.9.1")}}


def forgets(version):
    # brokers before 2.4 drop a producer's state with its last records (KAFKA-7190, fixed in 2.4.0)
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) < (2, 4)


def _check_forgets(r: TxnExpiryResult, fn) -> None:
    _ran(r, "old_brokers", "old_brokers")
    expect(r.part_c, "this run's old-broker lesson ran no broker (OLD_BROKERS is empty): add one and run it again")
    _judged(fn, "forgets", _old_broker_truth(r), lambda v, truth: (
        f"a broker {v} " + ((("forgot" if truth else "kept") + " the producer in this run") if v in r.part_c else
                            ("forgets" if truth else "keeps") + " the producer") + ": see `log_start_offset`, and "
        "which release stopped dropping producer state with the records"))


TxnExpiryResult.exercises = {
    1: Exercise(
        check=_check_idle_bounds, solution=lambda r: idle_bounds, wrong=lambda r: _expiration_alone,
        why="The coordinator does not forget an id the moment it has been idle `transactional.id.expiration.ms`: it "
            "looks at each sweep, every `transaction.remove.expired.transaction.cleanup.interval.ms`. An id idle less "
            "than the expiration is certainly still there; one idle the expiration plus one sweep interval has "
            "certainly met a sweep after its expiration. In between, when the sweep comes decides."),
    2: Exercise(
        check=_check_heartbeat, solution=_heartbeat_ms, wrong=_just_before_the_sweep,
        why="Any transaction, even one that only re-commits the offsets, resets the id's idle clock. After one "
            "missed heartbeat the id goes two intervals without a transaction, so two intervals must stay under "
            "the expiration: at most half of it, and a third leaves room for a heartbeat that comes late as well. "
            "A heartbeat just short of the expiration keeps the id only while none is ever missed, and the sweep "
            "interval gives no room: a sweep may come any moment after the expiration."),
    3: Exercise(
        check=_check_needed_new_producer, solution=lambda r: needed_new_producer, wrong=_every_client,
        why="Error 49 is abortable for most of librdkafka's transaction calls (the table of requests in lesson 1) "
            "and for the Java producer before 4.0: abort, and the same producer goes on. A new producer (or a new "
            "process) was needed where the error was fatal (the Java producer from 4.0), where the Streams thread "
            "died (before 3.8), or where the app itself recreated its producer or exited: the `handling` and `then` "
            "columns of `clients.table()` say which."),
    4: Exercise(
        check=_check_survives, solution=lambda r: survives, wrong=lambda r: (lambda v: False),
        why="Before 3.8.0 Kafka Streams let the error through to the uncaught exception handler, and the default "
            "one stops the client: the source's app shut down. From 3.8.0 (KAFKA-16699) Streams treats it like a "
            "fencing: it closes the task dirty, recreates the producer, rejoins the group and goes on from the "
            "committed offsets. This run's `handling` column shows both."),
    5: Exercise(
        check=_check_forgets, solution=lambda r: forgets, wrong=lambda r: (lambda v: parse_version(v) < (2, 5)),
        why="A broker keeps a producer's state in its producer-state snapshots, per partition. Before 2.4 it dropped "
            "that state as soon as retention deleted the producer's last records, so the next transaction met "
            "UNKNOWN_PRODUCER_ID; 2.4.0 keeps it until the transactional id expires (KAFKA-7190, the first change of "
            "KIP-360). KIP-360's other changes came in 2.5: the broker stops answering UNKNOWN_PRODUCER_ID there "
            "(KAFKA-8710), and the producer can bump its epoch and go on. A 2.4 broker already keeps the state."),
}
