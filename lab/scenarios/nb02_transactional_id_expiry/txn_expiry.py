"""What chapter 02's three lessons share: their parameters (each lesson takes its own), the broker they run on (a short
transactional.id.expiration.ms), their Predict questions, the idle round of clients (_round) and TxnExpiryResult,
what a lesson's run measured. The defaults straddle the behaviours the lessons compare: kafka-clients 3.9
(the error is abortable) and 4.x (fatal), and the Python client's `plain` mode, with its other modes in 02a's Mitigate
cell; Kafka Streams 3.7 (the thread dies) and 3.8 (TaskMigratedException) side by side, 3.8 alone in
its Mitigate cell; broker 2.0.1 (forgets the producer) beside the KRaft broker, and 2.4.1 (keeps it) in its
Mitigate cell. The parameters' descriptions (docs/parameters.md) say what each knob is, never which value fails.

    02a idle_clients   Python and Java clients idle past the expiration
    02b idle_streams   Kafka Streams idle past it
    02c old_brokers    UnknownProducerIdException on a broker before 2.4 (txn_unknown_producer runs it)
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ...cluster import is_zookeeper_version, parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param, Result, Run, grep
from ...toolbox.admin import expired_at
from ...toolbox.consume import read_to_end
from ...toolbox.predict import choice_table, labels, named, which
from ...runtime.programs import clients_classpath
from . import txn_unknown_producer as part_c
from .txn_clients import CLIENTS, ERROR_CODE, streams_examples

SOURCE_MESSAGE = "The producer attempted to use a producer id which is not currently assigned to its transactional id"
PYTHON_MODES = ("plain", "abort", "recreate", "no-rewind", "heartbeat", "abort-offsets-first")


def _kraft(version):
    if is_zookeeper_version(version):
        raise LabError(f"BROKER_VERSION={version}: the clients run on a KRaft broker (3.3+).")
    __import__("lab.cluster.kraft", fromlist=["kafka_classpath"]).kafka_classpath(version)


_ALL = (
    Param("broker_version", KAFKA_VERSION, "version of the KRaft broker (3.3 or later) the clients run on",
          check=lambda v: _kraft(v)),
    Param("expiration_ms", 10000, "transactional.id.expiration.ms (Kafka's default 604800000, 7 days)",
          lo=1, hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config"),
    Param("cleanup_interval_ms", 1000, "transaction.remove.expired.transaction.cleanup.interval.ms "
          "(Kafka's default 3600000)", lo=1, hi=2 ** 31 - 1, unit="ms", why="Kafka's range for this int config"),
    Param("idle_s", 15.0, "how long the clients sit idle after their last transaction, then one input each", lo=0,
          hi=3600, unit="s"),
    Param("observe_s", 45.0, "how long to watch the clients once the input arrives", lo=5, hi=600, unit="s"),
    Param("python_modes", ["plain"], "error-handling modes of the Python consume-transform-produce client, one "
          "process each", choices=PYTHON_MODES),
    Param("heartbeat_ms", 0, "the `heartbeat` mode's interval between two transactions while idle (0: set from "
          "EXPIRATION_MS)", lo=0, hi=2 ** 31 - 1, unit="ms"),
    Param("heartbeat_misses", 0, "heartbeats the `heartbeat` mode skips while idle (an app stalled by a long GC "
          "pause or a slow deploy)", lo=0, hi=10),
    Param("java_clients", ["3.9.1", "4.3.1"], "kafka-clients versions of the lone Java producer, one each",
          check=lambda vs: [clients_classpath(v) for v in vs]),
    Param("streams_versions", ["3.7.0", "3.8.0"], "Kafka Streams versions (WordCountDemo, exactly-once), one "
          "idle round each (its topic names never change)", check=lambda vs: [streams_examples(v) for v in vs]),
    *part_c.PARAMS,
)
PARAMS = {param.name: param for param in _ALL}
# what the idle rounds take, beside their clients: the broker, its expiration and sweep, the idle and watch times
IDLE = ("broker_version", "expiration_ms", "cleanup_interval_ms", "idle_s", "observe_s")


def params(*names: str) -> list[Param]:
    return [PARAMS[name] for name in names]


def at_most_8_clients(p: dict) -> str | None:
    return None if len(p["python_modes"]) + len(p["java_clients"]) <= 8 else \
        "At most 8 Python and Java clients in one round (2 cores)."


def broker_config(p: dict) -> dict:
    """The fast recipe: ids expire after EXPIRATION_MS, swept every CLEANUP_INTERVAL_MS; retention checked every
    second (02c's steps run here too); idle producer state kept 5 s (KIP-854, 3.4+)."""
    v = parse_version(p["broker_version"])
    # (02c takes neither: their defaults on its KRaft broker, where the producer idles only a few seconds; the
    # ZooKeeper-era brokers keep Kafka's own 7 days)
    config = {"transactional.id.expiration.ms": p.get("expiration_ms", PARAMS["expiration_ms"].default),
              "transaction.remove.expired.transaction.cleanup.interval.ms": p.get(
                  "cleanup_interval_ms", PARAMS["cleanup_interval_ms"].default),
              "log.retention.check.interval.ms": part_c.RETENTION_CHECK_MS,
              **({"producer.id.expiration.ms": 5000} if v >= (3, 4) else {}),
              **({"log.initial.task.delay.ms": 1000} if v >= (3, 8) else {})}
    return {k: str(v) for k, v in config.items()}


def needs(p: dict) -> dict:
    return {"nodes": 1, "version": p["broker_version"], "broker_config": broker_config(p)}


def idle_rounds(lab: Run, p: dict) -> "TxnExpiryResult":
    """02a's and 02b's run: each idle round of clients, then the Spark audit of their outputs."""
    clients = {}
    for names in rounds(p):
        clients.update(_round(lab, p, [CLIENTS[n.split("-")[0]](lab, p, n) for n in names]))
    lab.phase("auditing the output topics on Spark (read_committed and read_uncommitted)")
    audits = {n: c.audit().counts for n, c in clients.items() if c.kind != "java"}
    return TxnExpiryResult("txn_expiry", p, lab.id, lab.timeline, clients={n: c.summary for n, c in clients.items()},
                           audits=audits, logs={n: c.log for n, c in clients.items()}, cluster=lab.cluster)


def rounds(p: dict) -> list[list[str]]:
    """Client names per idle round: WordCountDemo's topics are fixed, so one Streams version a round."""
    streams = [f"streams-{v}" for v in p.get("streams_versions", [])]
    first = [f"python-{m}" for m in p.get("python_modes", [])] + [f"java-{v}" for v in p.get("java_clients", [])]
    first += streams[:1]
    return [r for r in [first, *[[s] for s in streams[1:]]] if r]


IDLE_ANSWERS = ("committed once, processed once", "committed once, processed twice", "committed twice",
                "never committed: lost")
STREAMS_NONE = ("none: each carries on by itself, as after a fencing",
                "none: Kafka Streams' own commits keep the id alive, no error")
OLD_BROKER_NONE = ("none: each still knows the producer, and the commit succeeds",
                   "none: each answers INVALID_PRODUCER_ID_MAPPING, the id expired with the records")


# This run's answer to each lesson's Predict question, from what it recorded (None: it did not measure it).
def clients_answer(record: dict, p: dict) -> str | None:
    """02a: what became of the input of the client that crashes on the error (`python-plain`): its reads of the
    input, whether it recovered, and the audit of its output."""
    c = record["part_a"].get("python-plain")
    if c is None:
        return None
    audit = record.get("part_a_audit", {}).get("python-plain", {})
    if audit.get("lost") or not c["recovered"]:
        return IDLE_ANSWERS[3]
    if audit.get("duplicate"):
        return IDLE_ANSWERS[2]
    return IDLE_ANSWERS[1] if c["error"] or (c["reads_per_input"] or 0) >= 2 else IDLE_ANSWERS[0]


def releases_table(vs: list[str], nones: tuple) -> tuple:
    """02b's and 02c's choices: all the releases (vs, oldest first), only the oldest ones short of all, only the
    newest ones, then both `nones`, which name no release: the run tells them apart by what else it met."""
    sets = [vs[:n] for n in (len(vs), *range(1, len(vs))) if n] + [vs[n:] for n in range(1, len(vs))]
    return (*choice_table((_named(s, vs), s) for s in sets), *((none, frozenset()) for none in nones))


def _named(releases: list[str], vs: list[str]) -> str:
    return named(releases, vs, ", ".join)


def _answer(stopped: list[str], vs: list[str], table: tuple, none: str) -> str:
    """The choice naming the releases in `stopped`: `none`, the measured one of the nones, when there are none; in
    words when no choice names them."""
    return (which(stopped, table) or _named(stopped, vs)) if stopped else none


def streams_answer(record: dict, p: dict) -> str | None:
    """02b: which Kafka Streams versions of STREAMS_VERSIONS stopped for good (their thread died of the error)."""
    vs, b = streams_versions(p), record["part_b"]
    if not vs or any(f"streams-{v}" not in b for v in vs):
        return None
    ran = [b[f"streams-{v}"] for v in vs]
    return _answer([v for v, c in zip(vs, ran) if c["handling"] == "thread died"], vs, streams_table(p),
                   STREAMS_NONE[0] if any(c["error"] for c in ran) else STREAMS_NONE[1])


def old_broker_answer(record: dict, p: dict) -> str | None:
    """02c: which brokers forgot the producer (UNKNOWN_PRODUCER_ID). The last answer, an expired id, is the
    misconception that retention and the id's expiration are one clock: the steps take a minute, the id lasts 7
    days on the ZooKeeper-era brokers."""
    vs, c = old_broker_versions(p), record["part_c"]
    if any(v not in c for v in vs):
        return None
    return _answer([v for v in vs if c[v]["reproduced"]], vs, old_broker_table(p),
                   OLD_BROKER_NONE[1] if any(c[v].get("id_expired") for v in vs) else OLD_BROKER_NONE[0])


def question(p: dict) -> tuple:
    """The clients lesson's Predict step: what becomes of the input the `plain` client gets after the idle period."""
    return (f"The `plain` client sits idle {p['idle_s']:g} s; the broker forgets a transactional id left idle "
            f"{p['expiration_ms'] / 1000:g} s. Then one input record arrives. How many times is it processed, and "
            "how many times committed to the output topic?", IDLE_ANSWERS)


def streams_versions(p: dict) -> list[str]:
    return sorted(dict.fromkeys(p["streams_versions"]), key=parse_version)


def streams_question(p: dict) -> tuple:
    """The streams lesson's Predict step: which of its Kafka Streams releases stop for good, idle as long."""
    vs = streams_versions(p)
    return (f"The same exactly-once Kafka Streams app runs on {' and '.join(vs)}, one after the other. Each sits "
            f"idle {p['idle_s']:g} s (ids expire after {p['expiration_ms'] / 1000:g} s), then one input arrives. "
            "Which of them stop for good (the client in ERROR until restarted from outside)?",
            labels(streams_table(p)))


def streams_table(p: dict) -> tuple:
    return releases_table(streams_versions(p), STREAMS_NONE)


def old_broker_versions(p: dict) -> list[str]:
    """The brokers the steps run on, oldest first: each of ZOOKEEPER_BROKERS, then the KRaft broker."""
    return [*sorted(dict.fromkeys(p["zookeeper_brokers"]), key=parse_version), p["broker_version"]] \
        if p["zookeeper_brokers"] else [p["broker_version"]]


def old_broker_question(p: dict) -> tuple:
    """The old-broker lesson's Predict step: what each broker answers."""
    vs = old_broker_versions(p)
    return (f"On brokers {' and '.join(vs)}, retention deletes every record of an idle transactional producer. "
            "Then it commits again. Which brokers answer UNKNOWN_PRODUCER_ID?", labels(old_broker_table(p)))


def old_broker_table(p: dict) -> tuple:
    return releases_table(old_broker_versions(p), OLD_BROKER_NONE)


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
    transaction_version: dict | None = None   # 02a: the finalized level, each client's commits (idle_clients)
    title: ClassVar[str] = "Clients idle, then one input each"

    @property
    def failed(self) -> bool:
        """A client met error 49 (a Kafka Streams app only when its thread died of it: from 3.8 the task migrates
        and the app carries on by itself), or an old broker forgot a producer (02c)."""
        return any(c["code"] == ERROR_CODE and not (n.startswith("streams") and c["handling"] == "task migrated")
                   for n, c in self.clients.items()) or any(r["reproduced"] for r in self.part_c.values())

    def head(self) -> str:
        idle, exp, sweep = self.params["idle_s"], self.params["expiration_ms"] / 1000, \
            self.params["cleanup_interval_ms"] / 1000
        return f"idle {idle:g} s {'<' if idle < exp + sweep else '>='} expiration {exp:g} s + one sweep"

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
        if not self.clients:   # 02c: the old brokers alone
            return "\n".join(self._part_c_lines())
        exp, sweep = self.params["expiration_ms"] / 1000, self.params["cleanup_interval_ms"] / 1000
        lines = [f"- `{n}`: id expired at {c['sweep'] - self.timeline.t0:.1f} s; `{c['error']}` ({c['code']}) from "
                 f"`{c['call']}`, {c['handling']}; then {c['then']}; {'recovered' if c['recovered'] else 'NOT recovered'}"
                 for n, c in self.clients.items() if c["error"] and c["sweep"]]
        lines += self._part_c_lines()
        why = "" if self.failed else ("\n\nEvery id was still mapped to its producer id when the input came: "
                                      "AddPartitionsToTxn, AddOffsetsToTxn and EndTxn were answered normally.")
        return (f"The coordinator forgets an id idle longer than {exp:g} s at its next sweep (every {sweep:g} s): idle "
                f"up to {exp:g} s never, from {exp + sweep:g} s always, in between the sweep decides. **This run: "
                f"{self.verdict()}.**{why}\n\n" + "\n".join(lines))

    def _part_c_lines(self) -> list[str]:
        return [f"- broker {v}: " + ("`UnknownProducerIdException`: the broker dropped the producer with its last "
                "records (before 2.4)" if r["reproduced"] else "no error: the broker kept the producer's state after "
                "retention deleted its records") for v, r in self.part_c.items()]

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
        return self.timeline.figure("Retention deletes the producer's records, then it commits again",
                                    lanes=[f"broker {v}" for v in self.part_c])

    def figure(self):
        return self.timeline.figure(f"{self.head()}: {'failure' if self.failed else 'no failure'}",
                                    lanes=["run", *self.clients])

    def client_logs(self, *prefixes: str, pattern: str = r"Transiting to .*error state|ProducerId set to|"
                    r"kind.: .(error|abort)") -> None:
        """Print, for each client whose name starts with one of `prefixes`, the lines of its own log matching
        `pattern` (by default: its error states, new producer ids, errors and aborts)."""
        for name in [n for n in self.clients if n.startswith(prefixes)]:
            print(name, *self.log_lines(name, pattern), sep="\n   ")

    def log_lines(self, client: str, pattern: str, limit: int = 6) -> list[str]:
        """Lines of a client's own log (librdkafka, Java client, Kafka Streams) matching a regex."""
        return [re.sub(r"\[[^\]]{40,}\] ?", "", line)[:300] for _, line in grep(Path(self.logs[client]), pattern)][:limit]

    def mitigations(self) -> list[dict]:
        # the heartbeat's label leaves out its interval: exercise 2 asks for one
        rows = [("heartbeat transactions while idle (HEARTBEAT_MS)", self, "python-heartbeat"),
                ("new producer on INVALID_PRODUCER_ID_MAPPING", self, "python-recreate"),
                *[(f"Kafka Streams {v}", self, f"streams-{v}") for v in self.params.get("streams_versions", [])
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
            "pinned_zookeeper": self.pinned, "mitigations": self.mitigations(), "transaction_version":
            self.transaction_version,
            "time_to_error_s": {n: c["error_after_idle_s"] for n, c in cs.items() if c["error"]},
            "source_message_seen": any(SOURCE_MESSAGE in (c["message"] or "") for c in cs.values()),
            "idle_when_expired_s": [round(c["sweep"] - c["last_txn"], 2) for c in cs.values()
                                    if c["sweep"] and c["last_txn"]]}
