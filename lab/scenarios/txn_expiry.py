"""Seed 001, second problem: an idle exactly-once app loses its transactional id.

Mechanism (Kafka source, TransactionStateManager): every
`transaction.remove.expired.transaction.cleanup.interval.ms` the transaction coordinator
removes the transactional ids that are not in a transaction and were last updated more than
`transactional.id.expiration.ms` ago (default 7 days): it writes a tombstone for the id to
`__transaction_state` and forgets its producer id. The producer does not know. Its next
transactional request (AddPartitionsToTxn, AddOffsetsToTxn or EndTxn) is answered with
INVALID_PRODUCER_ID_MAPPING (error 49): "The producer attempted to use a producer id which is
not currently assigned to its transactional id."  What the client then does depends on it:
    librdkafka   abortable (txn_requires_abort); the epoch bump that gives a new producer id
                 happens only if the abort reaches the coordinator (source: rdkafka_txnmgr.c)
    Java 2.5-3.9 abortable (KIP-360): abortTransaction() bumps, the next transaction works
    Java 4.x     fatal (KAFKA-18019): close the producer and create a new one
    Streams <3.8 the stream thread dies (StreamsException); 3.8+ TaskMigrated, recovers (KAFKA-16699)

Second symptom, UnknownProducerIdException ("Found no record of producerId=N on the broker.
It is possible that the last message with the producerId=N has been removed due to hitting the
retention limit."): brokers before 2.4 dropped a producer's state as soon as retention deleted
its last records (Log.truncateHead); 2.4.0 keeps it (KAFKA-7190), 2.5 accepts unknown producers
(KIP-360). Reproducing it needs a ZooKeeper-era broker (lab.zookeeper).

Scenario functions (the notebook, widgets, tests and benchmarks call these):
    expiry_run(...)            clients go idle past the expiration, then get input
    unknown_producer_run(...)  retention deletes a transactional producer's only records
    pinned_zookeeper_check()   can a pre-2.4 broker start on this Java with its own ZooKeeper?
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .. import maven
from ..cluster import kafka_cluster, parse_version
from ..config import KAFKA_VERSION, WORK_DIR
from ..errors import LabError
from ..history import History
from ..processes import Child, spawn_java, spawn_python
from ..streams import LOG4J, LOGGING, JavaProgram, parse_java_log
from ..zookeeper import ZooKeeperKafkaCluster, is_zookeeper_version

# ------------------------------------------------------------------ facts

ERROR_CODE = 49  # INVALID_PRODUCER_ID_MAPPING
SEED_MESSAGE = "The producer attempted to use a producer id which is not currently assigned to its transactional id"
PYTHON_MODES = ("crash", "abort", "recreate", "naive", "heartbeat", "abort-offsets-first")
# kafka-streams-examples (WordCountDemo reads a properties file as args[0]) as Maven Central serves it
STREAMS_EXAMPLES = ("3.7.0", "3.8.0", "4.0.0", "4.3.1")
WORDCOUNT = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
STREAMS_INPUT, STREAMS_OUTPUT = "streams-plaintext-input", "streams-wordcount-output"  # fixed in WordCountDemo
QUIET = {"log_level": 0}        # the lab's own helper clients: their connection chatter is not the story
SPIN_LIMIT = 5                   # this many errors after the input and no commit: the client is stuck

# What librdkafka (rdkafka_txnmgr.c) does with INVALID_PRODUCER_ID_MAPPING, per response.
LIBRDKAFKA_HANDLING = [
    {"request": "AddPartitionsToTxn", "api call that reports it": "send_offsets_to_transaction / commit_transaction",
     "librdkafka": "abortable + epoch bump required", "app must": "abort_transaction, rewind"},
    {"request": "AddOffsetsToTxn", "api call that reports it": "send_offsets_to_transaction",
     "librdkafka": "abortable (no bump flag)", "app must": "abort_transaction, rewind"},
    {"request": "TxnOffsetCommit", "api call that reports it": "send_offsets_to_transaction",
     "librdkafka": "FATAL", "app must": "new producer, rewind"},
    {"request": "EndTxn (commit)", "api call that reports it": "commit_transaction",
     "librdkafka": "abortable", "app must": "abort_transaction, rewind"},
    {"request": "EndTxn (abort)", "api call that reports it": "abort_transaction",
     "librdkafka": "handled: epoch bump (new producer id), abort succeeds", "app must": "nothing"},
]


def broker_config(expiration_ms: int = 10000, cleanup_interval_ms: int = 1000) -> dict:
    """The fast recipe: transactional ids expire after `expiration_ms`, swept every `cleanup_interval_ms`."""
    return {"transactional.id.expiration.ms": str(expiration_ms),
            "transaction.remove.expired.transaction.cleanup.interval.ms": str(cleanup_interval_ms),
            "log.retention.check.interval.ms": "1000"}


def modern_extra_config(version: str) -> dict:
    """Keys only newer brokers know: idle producer state expiry (KIP-854) and the retention task's start delay."""
    extra = {}
    if parse_version(version) >= (3, 4, 0):
        extra["producer.id.expiration.ms"] = "5000"
    if parse_version(version) >= (4, 0, 0):
        extra["log.initial.task.delay.ms"] = "1000"
    return extra


def open_cluster(version: str = KAFKA_VERSION, broker_config: dict | None = None, name: str = "nb02",
                 zookeeper: str | None = "auto"):
    """kafka_cluster() for KRaft versions, the ZooKeeper launcher for older ones (not started).
    zookeeper: see lab.zookeeper.ZooKeeperKafkaCluster ("auto" swaps the 3.4.x jar pre-2.4 Kafka pins)."""
    if is_zookeeper_version(version):
        return ZooKeeperKafkaCluster(version=version, broker_config=broker_config or {}, name=name,
                                     zookeeper=zookeeper)
    return kafka_cluster(version=version, broker_config=broker_config or {}, name=name)


class BackgroundStart:
    """cluster.start() in a thread, so a slow broker boots while something else runs.

    Old brokers begin deleting segments only 30 s after boot (LogManager's initial task
    delay): starting one early hides that wait. The thread stays alive until stop():
    lab.processes children get PR_SET_PDEATHSIG, which fires when the *thread* that
    started them ends, so a finished thread would take the brokers with it.
    """

    def __init__(self, cluster):
        self.cluster, self.error = cluster, None
        self._ready, self._release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"start-{cluster.name}")
        self.thread.start()

    def _run(self):
        try:
            self.cluster.start()
        except BaseException as exc:  # handed to result()
            self.error = exc
        finally:
            self._ready.set()
        self._release.wait()

    def result(self, timeout: float = 300):
        """Wait until the cluster is up (or raise what start() raised); returns the cluster."""
        if not self._ready.wait(timeout):
            raise LabError(f"{self.cluster.name} did not start within {timeout:.0f} s.")
        if self.error:
            raise self.error
        return self.cluster

    def stop(self):
        """Stop the cluster, then let the thread end."""
        try:
            if self._ready.wait(300):
                self.cluster.stop()
        finally:
            self._release.set()


def start_in_background(cluster) -> BackgroundStart:
    return BackgroundStart(cluster)


# ------------------------------------------------------------------ validation

@dataclass(frozen=True)
class ClientSpec:
    name: str       # "python-crash", "java-3.9.1", "streams-3.7.0"
    kind: str       # python | java | streams
    option: str     # python mode, or a version


def parse_client(spec: str) -> ClientSpec:
    m = re.fullmatch(r"(python|java|streams)-(.+)", str(spec).strip())
    if not m:
        raise LabError(f"A client is 'python-<mode>', 'java-<version>' or 'streams-<version>', not {spec!r}.")
    kind, option = m.groups()
    if kind == "python" and option not in PYTHON_MODES:
        raise LabError(f"Python client modes are {', '.join(PYTHON_MODES)}; got {option!r}.")
    if kind == "java":
        if parse_version(option) < (2, 0, 0):
            raise LabError(f"The Java producer program needs kafka-clients 2.0+, not {option}.")
    if kind == "streams" and option not in STREAMS_EXAMPLES:
        raise LabError(f"Kafka Streams versions with a published kafka-streams-examples WordCountDemo: "
                       f"{', '.join(STREAMS_EXAMPLES)}; got {option!r}.")
    return ClientSpec(f"{kind}-{option}", kind, option)


def validate_expiry(*, expiration_ms, cleanup_interval_ms, idle_s, observe_s, clients,
                    broker_version=KAFKA_VERSION) -> dict:
    def number(name, value, lo, hi, integer=True):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and lo <= value <= hi
        if not ok or (integer and int(value) != value):
            raise LabError(f"{name} must be {'an integer' if integer else 'a number'} in {lo}..{hi}, not {value!r}.")
        return int(value) if integer else float(value)
    p = {"expiration_ms": number("expiration_ms", expiration_ms, 1000, 7 * 24 * 3600 * 1000),
         "cleanup_interval_ms": number("cleanup_interval_ms", cleanup_interval_ms, 100, 3600 * 1000),
         "idle_s": number("idle_s", idle_s, 0, 600, integer=False),
         "observe_s": number("observe_s", observe_s, 5, 600, integer=False)}
    parse_version(broker_version)
    if is_zookeeper_version(broker_version):
        raise LabError("expiry_run uses a KRaft broker (3.3+); ZooKeeper-era brokers are for unknown_producer_run.")
    if isinstance(clients, str):
        clients = [c for c in re.split(r"[,\s]+", clients) if c]
    specs = [parse_client(c) for c in clients]
    if not specs:
        raise LabError("Give at least one client, e.g. ['python-crash'].")
    if len({s.name for s in specs}) != len(specs):
        raise LabError(f"Each client at most once per run: {[s.name for s in specs]}.")
    if sum(s.kind == "streams" for s in specs) > 1:
        raise LabError("At most one Kafka Streams client per run: WordCountDemo's topic names are fixed.")
    if len(specs) > 8:
        raise LabError("At most 8 clients per run (2 cores).")
    p.update(clients=specs, broker_version=broker_version)
    return p


def check_cluster_config(cluster, expiration_ms: int, cleanup_interval_ms: int) -> None:
    """A cluster passed in must have the expiration the run is about (static broker configs)."""
    have = getattr(cluster, "broker_config", None)
    if have is None:
        return  # external: lab.cluster already checked what it could
    want = broker_config(expiration_ms, cleanup_interval_ms)
    wrong = {k: (v, have.get(k)) for k, v in want.items()
             if k != "log.retention.check.interval.ms" and have.get(k) != v}
    if wrong:
        lines = ", ".join(f"{k}={w} (cluster has {h})" for k, (w, h) in wrong.items())
        raise LabError(f"This run needs {lines}: start the cluster with txn_expiry.broker_config(...) "
                       "or leave cluster=None to start one.")


# ------------------------------------------------------------------ clients

class _Client:
    """One app under test in a run: start, warm up, go idle, get input, settle."""

    def __init__(self, run: "_Run", spec: ClientSpec):
        self.run, self.spec, self.name = run, spec, spec.name
        self.txn_prefix = f"{run.tag}-{self.name}"
        self.incarnation = 0
        self.restarts: list[float] = []

    def ev(self) -> list[dict]:
        """Events {ts, event, ...} parsed from the client's log."""
        raise NotImplementedError

    # defaults
    def topics(self) -> list[str]:
        return []

    def quiesce(self) -> None:
        pass  # traffic stops when the run stops feeding

    def supervise(self) -> None:
        pass

    def stop(self) -> None:
        pass


class _PythonClient(_Client):
    def __init__(self, run, spec):
        super().__init__(run, spec)
        self.mode = spec.option
        base = f"{run.tag}-{self.name}"
        self.input, self.output, self.group = f"{base}-in", f"{base}-out", base
        self.log_path = run.folder / f"{self.name}.log"
        self.history = History(run.folder / "history" / self.name, f"{run.tag}-{self.name}")
        self.child: Child | None = None
        self.inputs = 0

    def topics(self):
        return [self.input, self.output]

    def argv(self) -> list[str]:
        on_error = {"heartbeat": "recreate", "abort-offsets-first": "abort"}.get(self.mode, self.mode)
        argv = ["--bootstrap", self.run.bootstrap, "--input", self.input, "--output", self.output,
                "--group", self.group, "--transactional-id", self.txn_prefix, "--app", self.name,
                "--incarnation", str(self.incarnation), "--history", str(self.history.folder),
                "--run-id", self.history.run_id, "--on-error", on_error]
        if self.mode == "heartbeat":
            argv += ["--heartbeat-ms", str(max(200, self.run.p["expiration_ms"] // 3))]
        if self.mode == "abort-offsets-first":
            argv += ["--offsets-first"]
        return argv

    def start(self):
        with open(self.log_path, "a") as f:
            f.write(json.dumps({"ts": time.time(), "event": "spawn", "incarnation": self.incarnation}) + "\n")
        self.child = spawn_python(f"eos-{self.name}", "lab.apps.eos_app", self.argv(), self.log_path)

    def ev(self):
        out = []
        if self.log_path.exists():
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
        return out

    def feed(self):
        self.run.send_record(self, f"{self.name}-w{self.inputs}")

    def send(self):
        self.run.send_record(self, f"{self.name}-x0")

    def started(self) -> bool:
        return any(e["event"] == "start" for e in self.ev())

    def warm(self) -> bool:
        return any(e["event"] == "commit" for e in self.ev())

    def quiet(self) -> bool:
        return self._committed_offset() >= self.inputs

    def supervise(self):
        # The crash app exits on the error; like a deployment, start it again (next incarnation).
        if self.mode == "crash" and self.child and not self.child.alive() and self.child.returncode() == 3 \
                and self.incarnation < 3:
            self.incarnation += 1
            self.restarts.append(time.time())
            self.start()

    def settled(self, since: float) -> bool:
        """Committed the input (recovered), gave up on it (naive), is stuck, or is gone."""
        after = [e for e in self.ev() if e["ts"] >= since]
        if self.recovered(since):
            return True
        errors = [e for e in after if e["event"] == "error"]
        if self.mode == "naive" and errors and any(e["event"] in ("abort", "recreate") for e in after):
            return True
        if len(errors) >= SPIN_LIMIT:
            return True
        return bool(self.child and not self.child.alive() and self.mode != "crash")

    def recovered(self, since: float) -> bool:
        return any(e["event"] == "commit" and e["ts"] >= since for e in self.ev()) \
            and self._committed_offset() >= self.inputs

    def _committed_offset(self) -> int:
        best = 0
        for e in self.ev():
            if e["event"] == "commit":
                best = max([best, *e.get("offsets", {}).values()])
        return best

    def stop(self):
        if self.child:
            self.child.stop(15)


class _JavaClient(_Client):
    def __init__(self, run, spec):
        super().__init__(run, spec)
        self.version = spec.option
        self.topic = f"{run.tag}-{self.name}".replace(".", "_")
        self.go = run.folder / f"{self.name}.go"
        self.idle = run.folder / f"{self.name}.idle"
        self.program = JavaProgram(
            self.name, self.version, "IdleTransactionalProducer", ["IdleTransactionalProducer.java"],
            properties={"bootstrap.servers": run.bootstrap, "transactional.id": self.txn_prefix,
                        "lab.topic": self.topic, "lab.go.file": str(self.go), "lab.id.prefix": self.name,
                        "lab.idle.file": str(self.idle), "lab.busy.ms": str(int(run.feed_interval * 1000))},
            folder=run.folder, streams=False, heap="128m")

    def topics(self):
        return [self.topic]

    def start(self):
        self.program.start()

    def ev(self):
        return java_lab_events(self.program.log_path)

    def started(self):
        return any(e["event"] == "ready" for e in self.ev())

    def feed(self):
        pass  # the program commits a transaction every lab.busy.ms by itself

    def warm(self):
        return any(e["event"] == "committed" for e in self.ev())

    def quiesce(self):
        self.idle.touch()

    def quiet(self):
        return any(e["event"] == "idle" for e in self.ev())

    def send(self):
        self.go.touch()

    def settled(self, since):
        return any(e["event"] == "exit" for e in self.ev()) or not self.program.alive()

    def stop(self):
        self.program.stop(15)


class _StreamsClient(_Client):
    """kafka-streams-examples' WordCountDemo, exactly_once_v2, configured by a properties file."""

    def __init__(self, run, spec):
        super().__init__(run, spec)
        self.version = spec.option
        self.app_id = self.txn_prefix.replace(".", "_")
        self.txn_prefix = self.app_id  # Streams' transactional.id = <application.id>-<process id>-<thread>
        self.log_path = run.folder / f"{self.name}.log"
        self.props = run.folder / f"{self.name}.properties"
        self.child: Child | None = None
        self.word_prefix = re.sub(r"[^a-z0-9]", "", f"w{run.tag}{self.version}")
        self.words: list[str] = []
        self.counts: dict[str, list[int]] = {}
        self.seen_at: dict[str, float] = {}
        self.consumer: Consumer | None = None

    def topics(self):
        return [STREAMS_INPUT, STREAMS_OUTPUT]

    def start(self):
        cp = maven.classpath([f"org.apache.kafka:kafka-streams-examples:{self.version}", *LOGGING],
                             label=f"streams-examples-{self.version}")
        (self.run.folder / "log4j.properties").write_text(LOG4J)
        self.props.write_text("".join(f"{k}={v}\n" for k, v in {
            "bootstrap.servers": self.run.bootstrap, "application.id": self.app_id,
            "processing.guarantee": "exactly_once_v2", "state.dir": self.run.folder / f"{self.name}-state",
            "replication.factor": 1}.items()))
        with open(self.log_path, "a") as f:
            f.write(f"===== lab: start #{self.incarnation + 1} of {self.name} at {time.time():.3f}\n")
        self.child = spawn_java(f"streams-{self.name}", cp, WORDCOUNT, [str(self.props)], self.log_path,
                                heap="256m", jvm_options=[
                                    f"-Dlog4j.configuration=file:{self.run.folder / 'log4j.properties'}",
                                    "-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1"])
        self.running_seen = self._running_count()

    def _log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _running_count(self) -> int:
        return len(re.findall(r"stream-client .* State transition from REBALANCING to RUNNING", self._log()))

    def ev(self):
        out, start = [], 0
        for e in parse_java_log(self._log()):
            out.append({"ts": e["ts"], "event": e["kind"], "level": e["level"], "line": e["line"]})
        for m in re.finditer(r"===== lab: start #(\d+) of \S+ at ([\d.]+)", self._log()):
            start += 1
            out.append({"ts": float(m.group(2)), "event": "spawn", "incarnation": start - 1})
        return sorted((e for e in out if e["ts"]), key=lambda e: e["ts"])

    def _poll_output(self):
        if self.consumer is None:
            self.consumer = Consumer({"bootstrap.servers": self.run.bootstrap, "group.id": f"{self.app_id}-reader",
                                      "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
            self.consumer.assign([TopicPartition(STREAMS_OUTPUT, 0, OFFSET_BEGINNING)])
        for m in self.consumer.consume(500, timeout=0.1):
            if m.error() or not m.key():
                continue
            word = m.key().decode()
            if word.startswith(self.word_prefix):
                self.counts.setdefault(word, []).append(int.from_bytes(m.value(), "big", signed=True))
                self.seen_at.setdefault(word, time.time())

    def send_word(self):
        word = f"{self.word_prefix}n{len(self.words)}"
        self.words.append(word)
        self.run.producer.produce(STREAMS_INPUT, value=word.encode())
        self.run.producer.flush(10)
        self.run.streams_history.log("produced", id=word, key=word, seq=1, topic=STREAMS_INPUT,
                                     partition=0, offset=None, true_value=1)

    def started(self):
        return self._running_count() > 0

    def feed(self):
        self.send_word()

    def warm(self):
        self._poll_output()
        return bool(self.words) and self.words[0] in self.counts

    def quiet(self):
        self._poll_output()
        return all(w in self.counts for w in self.words)

    def send(self):
        self.send_word()

    def dead(self) -> bool:
        log = self._log().split("===== lab: start #")[-1]
        # ERROR comes after the dead thread has left the group: a new instance is assigned at once.
        return bool(re.search(r"stream-client .* State transition from PENDING_ERROR to ERROR", log))

    def supervise(self):
        # The seed's operators: "the app to restart". WordCountDemo's JVM stays up in ERROR: replace it.
        if self.child and self.dead() and self.incarnation < 2:
            self.child.stop(10)
            self.incarnation += 1
            self.restarts.append(time.time())
            self.start()

    def settled(self, since):
        self._poll_output()
        return all(w in self.counts for w in self.words)

    def stop(self):
        if self.child:
            self.child.stop(20)
        if self.consumer:
            self.consumer.close()
            self.consumer = None


def java_lab_events(path: Path) -> list[dict]:
    """The "LAB {json}" lines of lab/java/IdleTransactionalProducer.java, plus client log events."""
    out = []
    text = path.read_text(errors="replace") if path.exists() else ""
    for line in text.splitlines():
        i = line.find("LAB {")
        if i >= 0:
            try:
                body = line[i + 4:]
                out.append(json.loads(body[:body.rindex("}") + 1]))
            except ValueError:
                pass
    for e in parse_java_log(text):
        if e["kind"] in ("InvalidPidMappingException", "UnknownProducerIdException") and e["level"] != "TRACE":
            out.append({"ts": e["ts"], "event": "client log", "detail": e["line"]})
        m = re.search(r"ProducerId set to (-?\d+) with epoch (-?\d+)", e["line"])
        if m and int(m.group(1)) >= 0:
            out.append({"ts": e["ts"], "event": "producer id", "detail": f"pid {m.group(1)} epoch {m.group(2)}"})
    return sorted(out, key=lambda e: e["ts"])


# ------------------------------------------------------------------ the expiry run

@dataclass
class ExpiryRun:
    """What one expiry run measured. Times are epoch seconds; `t` columns are seconds since t0."""

    params: dict
    t0: float
    idle_start: float | None
    input_at: float | None
    end: float
    clients: dict                      # name -> summary dict (see _summarise)
    events: object                     # pandas DataFrame: client, ts, t, event, detail
    sweeps: dict                       # name -> epoch seconds the coordinator expired its id (None: not expired)
    verdicts: dict = field(default_factory=dict)   # name -> lab.audit.Verdict (python / streams clients)
    folder: Path | None = None

    def errors(self):
        """One row per client: the first error after the idle period and what happened next."""
        import pandas as pd
        rows = []
        for name, c in self.clients.items():
            rows.append({"client": name, "error": c["error"], "code": c["code"], "call": c["call"],
                         "handling": c["handling"], "then": c["then"], "errors": c["errors"],
                         "recovered": c["recovered"],
                         "error after idle start (s)": c["error_after_idle_s"],
                         "recovery (s)": c["recovery_s"], "message": c["message"]})
        return pd.DataFrame(rows)

    def figure(self, title: str | None = None):
        return timeline_figure(self, title)

    def expiry(self):
        """Per client: its last transaction before the idle period, when the coordinator expired
        its id, and when the input hit the error."""
        import pandas as pd
        rows = []
        for name, c in self.clients.items():
            ev = self.events[(self.events["client"] == name) & (self.events["ts"] <= self.idle_start + 0.01)]
            last = ev[ev["event"].isin(["commit", "committed", "heartbeat"])]["ts"].max() if len(ev) else None
            sweep = self.sweeps.get(name)
            rows.append({"client": name, "last transaction (s)": _t(last, self.t0), "input (s)": _t(self.input_at, self.t0),
                         "expired at (s)": _t(sweep, self.t0),
                         "idle when expired (s)": round(sweep - last, 2) if sweep and last == last else None,
                         "first error (s)": None if c["error_after_idle_s"] is None
                         else _t(self.idle_start + c["error_after_idle_s"], self.t0)})
        return pd.DataFrame(rows)

    def audit_table(self):
        """Per audited client: the audit counts plus how often the input record was read."""
        import pandas as pd
        rows = []
        for name, v in self.verdicts.items():
            c = self.clients[name]
            rows.append({"client": name, "recovered": c["recovered"], "input read (times)": c["reads_per_input"],
                         **{k: v.counts.get(k) for k in ("duplicate", "lost", "aborted_read")},
                         "verdict": v.summary()})
        return pd.DataFrame(rows)

    def log_lines(self, client: str, pattern: str, limit: int = 8) -> list[str]:
        """Lines of a client's own log (librdkafka, Java client, Kafka Streams) matching a regex."""
        rx = re.compile(pattern)
        path = self.folder / f"{client}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        # long bracketed thread / client names ([app-uuid-StreamThread-1]) say nothing here
        return [re.sub(r"\[[^\]]{40,}\] ?", "", l)[:400] for l in lines if rx.search(l)][:limit]

    def as_record(self) -> dict:
        return {"params": {k: (v if k != "clients" else [s.name for s in v]) for k, v in self.params.items()},
                "clients": {n: {k: c[k] for k in ("error", "code", "call", "handling", "recovered", "expired",
                                                  "errors", "restarts", "error_after_idle_s", "recovery_s",
                                                  "message", "reads_per_input")}
                            for n, c in self.clients.items()},
                "audit": {n: v.as_dict() for n, v in self.verdicts.items()}}


def expiry_run(cluster=None, *, expiration_ms: int = 10000, cleanup_interval_ms: int = 1000,
               idle_s: float = 15, observe_s: float = 40, clients=("python-crash",),
               broker_version: str = KAFKA_VERSION, audit=True, spark=None,
               progress: bool = True) -> ExpiryRun:
    """Start the clients, let each commit one transaction, leave them idle `idle_s` seconds,
    then give each one input and watch for up to `observe_s` seconds what they do.

    clients: "python-<mode>" (lab/apps/eos_app.py: crash | abort | recreate | naive | heartbeat |
    abort-offsets-first), "java-<kafka-clients version>" (lab/java/IdleTransactionalProducer.java),
    "streams-<version>" (kafka-streams-examples' WordCountDemo, exactly_once_v2).
    cluster: a running cluster started with broker_config(expiration_ms, cleanup_interval_ms), or
    None to start one for this run. audit: run lab.audit (Spark) on the python and streams clients
    (True), on the clients named in a list, or not at all (False).
    """
    p = validate_expiry(expiration_ms=expiration_ms, cleanup_interval_ms=cleanup_interval_ms, idle_s=idle_s,
                        observe_s=observe_s, clients=clients, broker_version=broker_version)
    if not isinstance(audit, bool):
        unknown = set(audit) - {s.name for s in p["clients"]}
        if unknown:
            raise LabError(f"audit names clients that are not in this run: {sorted(unknown)}.")
    own = cluster is None
    if own:
        cluster = open_cluster(broker_version, {**broker_config(p["expiration_ms"], p["cleanup_interval_ms"]),
                                                **modern_extra_config(broker_version)}, name="nb02-expiry")
        cluster.start()
    else:
        check_cluster_config(cluster, p["expiration_ms"], p["cleanup_interval_ms"])
    try:
        run = _Run(cluster, p, progress)
        result = run.go()
        if audit:
            names = [c.name for c in run.clients] if audit is True else list(audit)
            result.verdicts = run.audits(names, spark)
            run.say("audit done")
        return result
    finally:
        if own:
            cluster.stop()


class _Run:
    def __init__(self, cluster, p: dict, progress: bool):
        self.cluster, self.p, self.progress = cluster, p, progress
        self.bootstrap = cluster.bootstrap
        self.tag = f"nb02{uuid.uuid4().hex[:5]}"
        self.folder = WORK_DIR / "nb02" / self.tag
        self.folder.mkdir(parents=True, exist_ok=True)
        # traffic before the idle period: well inside the expiration
        self.feed_interval = max(0.5, p["expiration_ms"] / 3000)
        self.clients: list[_Client] = []
        for spec in p["clients"]:
            cls = {"python": _PythonClient, "java": _JavaClient, "streams": _StreamsClient}[spec.kind]
            self.clients.append(cls(self, spec))
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "enable.idempotence": True,
                                  **QUIET})
        self.streams_history = History(self.folder / "history" / "streams", f"{self.tag}-streams")
        self.t0 = time.time()
        self.idle_start = self.input_at = None

    def send_record(self, client, record_id: str) -> None:
        """One input record {"id", "key", "seq"}; logged as "produced" once Kafka acknowledged it."""
        client.inputs += 1
        seq = client.inputs
        value = json.dumps({"id": record_id, "key": "k0", "seq": seq})

        def delivered(err, msg):
            if err is None:
                client.history.log("produced", id=record_id, key="k0", seq=seq, topic=msg.topic(),
                                   partition=msg.partition(), offset=msg.offset(), true_value=seq)
        self.producer.produce(client.input, key="k0", value=value, on_delivery=delivered)
        self.producer.flush(10)

    def say(self, text: str) -> None:
        if self.progress:
            print(f"[{time.time() - self.t0:5.1f} s] {text}", flush=True)

    def go(self) -> ExpiryRun:
        try:
            self.create_topics()
            # Slow starters first (javac, JVMs): a python app's id must not wait long before its traffic.
            for c in sorted(self.clients, key=lambda c: c.spec.kind == "python"):
                c.start()
            self.say(f"started {', '.join(c.name for c in self.clients)}")
            # Traffic until every client has committed at least once: each started client gets a
            # record every feed_interval, so no transactional id can expire before the idle period.
            fed: dict[str, float] = {}

            def warm(c):
                if c.started() and time.time() - fed.get(c.name, 0) >= self.feed_interval:
                    fed[c.name] = time.time()
                    c.feed()
                return c.warm()
            self.wait(warm, 240, "to start and commit a first transaction")
            for c in self.clients:
                c.quiesce()
            self.wait(lambda c: c.quiet(), 60, "to commit the last traffic")
            self.idle_start = time.time()
            self.say(f"every client committed; now idle for {self.p['idle_s']:.0f} s "
                     f"(transactional.id.expiration.ms={self.p['expiration_ms']})")
            self.countdown(self.idle_start + self.p["idle_s"])
            self.input_at = time.time()
            for c in self.clients:
                c.send()
            self.say("input sent to every client; watching")
            deadline = time.time() + self.p["observe_s"]
            while time.time() < deadline:
                for c in self.clients:
                    c.supervise()
                if all(c.settled(self.input_at) for c in self.clients):
                    break
                time.sleep(0.2)
            time.sleep(0.5)  # last log lines
            end = time.time()
        finally:
            for c in self.clients:
                c.stop()
            self.producer.flush(5)
        sweeps = expiry_sweeps(self.bootstrap, {c.name: c.txn_prefix for c in self.clients}, self.idle_start)
        self.say("done: " + ", ".join(f"{c.name} {'expired' if sweeps.get(c.name) else 'kept'}" for c in self.clients))
        return self.result(end, sweeps)

    def wait(self, predicate, timeout: float, what: str) -> None:
        """Until predicate(client) holds for every client; a client that exits is an error."""
        deadline = time.time() + timeout
        while True:
            waiting = [c for c in self.clients if not predicate(c)]
            if not waiting:
                return
            for c in waiting:
                child = getattr(c, "child", None) or getattr(getattr(c, "program", None), "process", None)
                if child is not None and not child.alive():
                    tail = "\n".join(child.log().splitlines()[-15:])
                    raise LabError(f"{c.name} exited while waiting for it {what}:\n{tail}")
            if time.time() > deadline:
                raise LabError(f"Timed out after {timeout:.0f} s waiting for {', '.join(c.name for c in waiting)} "
                               f"{what} (logs in {self.folder}).")
            time.sleep(0.2)

    def countdown(self, until: float) -> None:
        last = None
        while True:
            left = until - time.time()
            if left <= 0:
                return
            shown = int(left // 5 * 5)
            if shown != last and self.progress:
                print(f"    idle: {left:4.0f} s left", flush=True)
                last = shown
            time.sleep(min(0.5, left))

    def create_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        existing = set(admin.list_topics(timeout=10).topics)
        wanted = [t for c in self.clients for t in c.topics() if t not in existing]
        if wanted:
            for topic, f in admin.create_topics([NewTopic(t, 1, 1) for t in dict.fromkeys(wanted)]).items():
                try:
                    f.result(30)
                except KafkaException as exc:
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise

    # ---------------------------------------------------------------- results
    def result(self, end: float, sweeps: dict) -> ExpiryRun:
        import pandas as pd
        rows, summaries = [], {}
        for c in self.clients:
            evs = c.ev()
            for e in evs:
                rows.append({"client": c.name, "ts": e["ts"], "t": e["ts"] - self.t0, "event": e["event"],
                             "detail": _detail(e)})
            if sweeps.get(c.name):
                rows.append({"client": c.name, "ts": sweeps[c.name], "t": sweeps[c.name] - self.t0,
                             "event": "expiry sweep", "detail": "coordinator wrote a tombstone for the id"})
            for r in c.restarts:
                rows.append({"client": c.name, "ts": r, "t": r - self.t0, "event": "restart",
                             "detail": "supervisor started a new incarnation"})
            summaries[c.name] = _summarise(c, evs, self.idle_start, self.input_at, sweeps.get(c.name))
        events = pd.DataFrame(rows, columns=["client", "ts", "t", "event", "detail"]).sort_values("ts")
        return ExpiryRun(params=self.p, t0=self.t0, idle_start=self.idle_start, input_at=self.input_at, end=end,
                         clients=summaries, events=events.reset_index(drop=True), sweeps=sweeps, folder=self.folder)

    def audits(self, names, spark=None) -> dict:
        from ..audit import audit
        verdicts = {}
        self.say("auditing the output topics on Spark (read_committed and read_uncommitted)")
        for c in self.clients:
            if c.name not in names:
                continue
            if isinstance(c, _PythonClient):
                # what exactly-once promises, except where the app skips the rewind (or cannot recover)
                expect = "anomalies" if c.mode in ("naive", "abort-offsets-first") else "clean"
                # (no input_topic: the history holds exactly this client's inputs, and reading the
                # input topic twice more would only slow Spark down)
                verdicts[c.name] = audit(c.history, bootstrap=self.bootstrap, output_topic=c.output,
                                         expect=expect, spark=spark, kinds=["duplicate", "lost", "aborted_read"])
            elif isinstance(c, _StreamsClient):
                verdicts[c.name] = streams_audit(self.bootstrap, self.streams_history, c.word_prefix, spark=spark)
        return verdicts


def _t(ts, t0):
    return None if ts is None or ts != ts else round(ts - t0, 2)


def _detail(e: dict) -> str:
    skip = {"ts", "event"}
    if e["event"] == "error":
        return f"{e.get('call')}: {e.get('name') or e.get('exception')} — {e.get('message')}"[:300]
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in skip)[:300]


def _summarise(c: _Client, evs: list[dict], idle_start: float, input_at: float, sweep: float | None) -> dict:
    after = [e for e in evs if input_at and e["ts"] >= input_at]
    s = {"kind": c.spec.kind, "expired": sweep is not None, "error": None, "code": None, "call": None,
         "handling": None, "then": None, "recovered": False, "errors": 0, "restarts": len(c.restarts),
         "error_after_idle_s": None, "recovery_s": None, "message": None, "reads_per_input": None}
    first = None
    if isinstance(c, _PythonClient):
        errors = [e for e in after if e["event"] == "error"]
        s["errors"] = len(errors)
        if errors:
            first = errors[0]
            s.update(error=first["name"], code=first["code"], call=first["call"], message=first["message"],
                     handling="fatal" if first["fatal"] else ("abortable" if first["txn_requires_abort"]
                                                              else "retriable" if first["retriable"] else "other"))
            follow = [e["event"] for e in after if e["event"] in ("abort", "recreate", "rewind")
                      or (e["event"] == "exit" and e.get("code"))]
            s["then"] = {"crash": "exit 3, restarted by the supervisor"}.get(c.mode) or " -> ".join(dict.fromkeys(follow))
        commits = [e for e in after if e["event"] == "commit"]
        s["recovered"] = c.recovered(input_at)
        if s["recovered"] and first:
            s["recovery_s"] = round(commits[-1]["ts"] - first["ts"], 2)
        reads = c.history.frame("read")
        if len(reads):
            ids = reads[reads["id"].str.contains(r"-x\d+$")]
            s["reads_per_input"] = int(ids["id"].value_counts().max()) if len(ids) else 0
    elif isinstance(c, _JavaClient):
        errors = [e for e in after if e["event"] == "error"]
        s["errors"] = len(errors)
        if errors:
            first = errors[0]
            s.update(error=first["exception"].rsplit(".", 1)[-1], call=first["call"], message=first["message"],
                     code=ERROR_CODE if "InvalidPidMapping" in first["exception"] else None)
            aborted = any(e["event"] == "aborted" for e in after)
            recreated = any(e["event"] == "recreated" for e in after)
            s["handling"] = "abortable" if aborted else ("fatal" if recreated else "other")
            s["then"] = "abortTransaction() worked" if aborted else \
                ("abortTransaction() threw; new producer" if recreated else None)
        commits = [e for e in after if e["event"] == "committed"]
        s["recovered"] = bool(commits)
        if commits and first:
            s["recovery_s"] = round(commits[-1]["ts"] - first["ts"], 2)
    else:  # streams
        errors = [e for e in after if e["event"] == "InvalidPidMappingException"]
        s["errors"] = len([e for e in errors if e["level"] != "TRACE"])
        if errors:
            first = errors[0]
            text = next((e["line"] for e in errors if "The producer attempted" in e["line"]), first["line"])
            s.update(error="InvalidPidMappingException", code=ERROR_CODE, call="producer send (repartition topic)",
                     message=_java_message(text))
            died = [e for e in after if e["event"] == "thread died" and e["ts"] < (c.restarts[0] if c.restarts else 1e12)]
            migrated = any(e["event"] == "TaskMigratedException" for e in after)
            s["handling"] = "task migrated" if migrated else ("thread died" if died else "other")
            s["then"] = ("rebalance, new producer, RUNNING again" if migrated else
                         "client ERROR; supervisor restarted the JVM" if c.restarts else None)
        s["recovered"] = all(w in c.counts for w in c.words)
        if s["recovered"] and first and c.words:
            s["recovery_s"] = round(c.seen_at[c.words[-1]] - first["ts"], 2)
        s["reads_per_input"] = None
    if first:
        s["error_after_idle_s"] = round(first["ts"] - idle_start, 2)
    return s


def _java_message(line: str) -> str:
    m = re.search(r"(The producer attempted.*?transactional id\.?)", line)
    return m.group(1) if m else line[:200]


def expiry_sweeps(bootstrap: str, prefixes: dict, since: float | None) -> dict:
    """When the coordinator expired each transactional id: its tombstone in __transaction_state.

    prefixes: name -> transactional.id (or its prefix, for Kafka Streams). Keys there are
    (int16 version, int16 length, id bytes); an expired id gets a record with a null value.
    """
    found = {name: None for name in prefixes}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"nb02-sweeps-{uuid.uuid4().hex[:6]}",
                         "enable.partition.eof": True, "enable.auto.commit": False, **QUIET})
    try:
        md = consumer.list_topics("__transaction_state", timeout=10)
        parts = list(md.topics["__transaction_state"].partitions) if "__transaction_state" in md.topics else []
        consumer.assign([TopicPartition("__transaction_state", p, OFFSET_BEGINNING) for p in parts])
        eof, deadline = set(), time.time() + 20
        while len(eof) < len(parts) and time.time() < deadline:
            for m in consumer.consume(500, timeout=0.5):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof.add(m.partition())
                    continue
                if m.value() is not None or not m.key() or len(m.key()) < 4:
                    continue
                txn_id = m.key()[4:].decode(errors="replace")
                ts = m.timestamp()[1] / 1000
                for name, prefix in prefixes.items():
                    if txn_id.startswith(prefix) and (since is None or ts >= since) and found[name] is None:
                        found[name] = ts
    finally:
        consumer.close()
    return found


# ------------------------------------------------------------------ Kafka Streams audit

def streams_audit(bootstrap: str, history: History, word_prefix: str, spark=None):
    """lab.audit on WordCountDemo's output: key = word, value = 8-byte count. Each input word is
    unique, so a committed count of 2 is a double count (duplicate) and a missing word is lost."""
    from pyspark.sql import functions as F
    from ..audit import audit
    from ..spark import spark_session
    spark = spark or spark_session()

    def frame(isolation):
        raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", STREAMS_OUTPUT).option("startingOffsets", "earliest")
               .option("endingOffsets", "latest").option("kafka.isolation.level", isolation).load())
        word = F.col("key").cast("string")
        count = F.conv(F.hex("value"), 16, 10).cast("long")
        return (raw.filter(word.startswith(word_prefix))
                .select(word.alias("key"),
                        F.to_json(F.struct(word.alias("id"), word.alias("key"), count.alias("value"))).alias("value"),
                        "topic", "partition", "offset", "timestamp"))
    return audit(history, output_df=frame("read_committed"), output_uncommitted_df=frame("read_uncommitted"),
                 expect="clean", spark=spark, kinds=["duplicate", "lost"])


# ------------------------------------------------------------------ part C: UnknownProducerIdException

@dataclass
class UnknownProducerRun:
    broker_version: str
    client_version: str
    zookeeper: str | None
    t0: float
    events: object              # pandas DataFrame: ts, t, source, event, detail
    broker_errors: list         # broker log lines with UnknownProducerIdException
    client_errors: list         # client log lines naming UNKNOWN_PRODUCER_ID
    deleted_at: float | None    # when retention had removed every record of the producer
    committed_after: bool       # the transaction after the deletion committed
    log_start_offset: int | None

    @property
    def reproduced(self) -> bool:
        return bool(self.broker_errors or self.client_errors)

    @property
    def broker_message(self) -> str | None:
        for line in self.broker_errors:
            m = re.search(r"(Found no record of producerId=.*)", line)
            if m:
                return m.group(1)
        return None

    def as_record(self) -> dict:
        return {"broker_version": self.broker_version, "client_version": self.client_version,
                "zookeeper": self.zookeeper, "reproduced": self.reproduced,
                "broker_message": self.broker_message, "broker_errors": len(self.broker_errors),
                "client_errors": len(self.client_errors), "committed_after": self.committed_after,
                "log_start_offset": self.log_start_offset}


def validate_unknown_producer(broker_version, client_version, retention_ms, zookeeper=None) -> None:
    parse_version(broker_version)
    if parse_version(client_version) < (2, 0, 0):
        raise LabError(f"The Java producer program needs kafka-clients 2.0+, not {client_version}.")
    if not isinstance(retention_ms, int) or not 500 <= retention_ms <= 600000:
        raise LabError(f"retention_ms must be an integer in 500..600000, not {retention_ms!r}.")
    if zookeeper not in (None, "auto") and not is_zookeeper_version(broker_version):
        raise LabError(f"zookeeper= only applies to ZooKeeper-era brokers (< 3.3), not {broker_version}.")


def unknown_producer_run(cluster=None, *, broker_version: str = "2.0.1", client_version: str = "2.0.1",
                         zookeeper: str | None = "auto", retention_ms: int = 3000, observe_s: float = 20,
                         progress: bool = True) -> UnknownProducerRun:
    """A transactional Java producer commits one record to a topic with retention.ms=`retention_ms`,
    waits until retention has deleted every segment holding it (log start offset = end offset),
    then commits again with the same producer. Before 2.4 the broker has forgotten the producer:
    UnknownProducerIdException. cluster: a running cluster (its version is used), or None to start
    `broker_version` (ZooKeeper mode before 3.3; zookeeper= replaces the ZooKeeper jar it pins).
    """
    if cluster is not None:
        broker_version = getattr(cluster, "version", broker_version)
        zookeeper = getattr(cluster, "zookeeper", None)
    validate_unknown_producer(broker_version, client_version, retention_ms,
                              zookeeper if cluster is None else None)
    own = cluster is None
    if own:
        config = {"log.retention.check.interval.ms": "1000"}
        if not is_zookeeper_version(broker_version):
            config.update(modern_extra_config(broker_version))
        cluster = open_cluster(broker_version, config, name=f"nb02-upid-{broker_version}", zookeeper=zookeeper)
        cluster.start()
    say = (lambda text: print(f"[{time.time() - t0:5.1f} s] {text}", flush=True)) if progress else (lambda text: None)
    t0 = time.time()
    tag = f"nb02u{uuid.uuid4().hex[:5]}"
    folder = WORK_DIR / "nb02" / tag
    folder.mkdir(parents=True, exist_ok=True)
    topic, go = f"{tag}-retained", folder / "go"
    program = JavaProgram(f"producer-{client_version}", client_version, "IdleTransactionalProducer",
                          ["IdleTransactionalProducer.java"],
                          properties={"bootstrap.servers": cluster.bootstrap, "transactional.id": tag,
                                      "lab.topic": topic, "lab.go.file": str(go), "lab.id.prefix": tag},
                          folder=folder, streams=False, heap="128m")
    consumer = None
    log_mark = _log_sizes(cluster)
    deleted_at = None
    start_offset = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
        admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": str(retention_ms)})])[topic].result(30)
        program.start()
        _wait(lambda: any(e["event"] == "idle" for e in java_lab_events(program.log_path)), 120,
              "the producer to commit its first transaction", program)
        say(f"committed one record to {topic} (retention.ms={retention_ms}); waiting for retention to delete it")
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{tag}-watch", **QUIET})

        def deleted():
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            return (lo, hi) if hi > 0 and lo == hi else None
        # Old brokers start their retention task 30 s after boot (LogManager.InitialTaskDelayMs).
        lo_hi = _wait(deleted, 90 + retention_ms / 1000, "retention to delete the producer's segment", program)
        deleted_at, start_offset = time.time(), lo_hi[0]
        say(f"log start offset is now {start_offset}: nothing of the producer is left; it sends again")
        go.touch()
        _wait(lambda: any(e["event"] == "exit" for e in java_lab_events(program.log_path)) or not program.alive(),
              observe_s, "the producer's second transaction", None)
        time.sleep(0.5)
    finally:
        program.stop(15)
        if consumer:
            consumer.close()
        broker_lines = _grep_since(cluster, log_mark, r"UnknownProducerIdException|Found no record of producerId")
        if own:
            cluster.stop()
    import pandas as pd
    evs = java_lab_events(program.log_path)
    text = program.log_path.read_text(errors="replace")
    client_errors = [l for l in text.splitlines() if "UNKNOWN_PRODUCER_ID" in l or "UnknownProducerId" in l]
    rows = [{"ts": e["ts"], "source": f"client {client_version}", "event": e["event"], "detail": _detail(e)}
            for e in evs]
    for l in client_errors:
        m = re.match(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", l)
        if m:
            rows.append({"ts": _java_ts(m.group(1)), "source": f"client {client_version}",
                         "event": "UNKNOWN_PRODUCER_ID", "detail": l[l.find("Got error"):][:200]})
    for l in broker_lines:
        ts = _broker_ts(l)
        if ts:
            rows.append({"ts": ts, "source": f"broker {broker_version}", "event": "broker error", "detail": l[:300]})
    if deleted_at:
        rows.append({"ts": deleted_at, "source": f"broker {broker_version}", "event": "segments deleted",
                     "detail": f"log start offset {start_offset}"})
    events = pd.DataFrame(rows, columns=["ts", "source", "event", "detail"]).sort_values("ts")
    events.insert(1, "t", events["ts"] - t0)
    committed_after = any(e["event"] == "committed" and e.get("phase", "").startswith("after-idle") for e in evs)
    broker_errors = [l for l in broker_lines if "Found no record" in l or "UnknownProducerIdException" in l]
    return UnknownProducerRun(broker_version, client_version, zookeeper, t0, events.reset_index(drop=True),
                              broker_errors, client_errors, deleted_at, committed_after, start_offset)


def _wait(predicate, timeout, what, program):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if program is not None and not program.alive():
            tail = "\n".join(program.log_path.read_text(errors="replace").splitlines()[-15:])
            raise LabError(f"{program.name} exited while waiting for {what}:\n{tail}")
        if time.time() > deadline:
            raise LabError(f"Timed out after {timeout:.0f} s waiting for {what}.")
        time.sleep(0.25)


def _log_sizes(cluster) -> dict:
    try:
        return {n: cluster.log_path(n).stat().st_size for n in cluster.node_ids}
    except (LabError, OSError, AttributeError):
        return {}


def _grep_since(cluster, mark: dict, pattern: str) -> list[str]:
    """Broker log lines (plus the exception line after an ERROR) written since `mark`."""
    rx, out = re.compile(pattern), []
    for node, size in mark.items():
        with open(cluster.log_path(node), "rb") as f:
            f.seek(size)
            lines = f.read().decode(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if rx.search(line):
                prev = lines[i - 1] if i and lines[i - 1].startswith("[") else ""
                out.append(f"{prev[:25]} {line}".strip() if not line.startswith("[") else line)
    return out


def _java_ts(text: str) -> float:
    from datetime import datetime, timezone
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()


def _broker_ts(line: str) -> float | None:
    m = re.match(r"^\[(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d),(\d{3})\]", line)
    if not m:
        return None
    from datetime import datetime
    # broker logs are in the machine's local time zone
    return datetime.strptime(f"{m.group(1)} {m.group(2)},{m.group(3)}", "%Y-%m-%d %H:%M:%S,%f").timestamp()


def pinned_zookeeper_check(version: str = "2.0.1", timeout_s: float = 8) -> dict:
    """Start `version` with the ZooKeeper jar it pins; return whether it came up and the failing lines.

    ZooKeeper 3.4.x clients cannot connect on Java 14+ (the address stays unresolved:
    ZOOKEEPER-3779, fixed in 3.5.8/3.6.1): brokers before 2.4 need another ZooKeeper jar here.
    """
    cluster = ZooKeeperKafkaCluster(version=version, name=f"nb02-pinned-{version}", zookeeper=None,
                                    broker_config={"zookeeper.connection.timeout.ms": str(int(timeout_s * 1000))})
    try:
        cluster.start(timeout=timeout_s + 30)
        return {"version": version, "started": True, "lines": []}
    except LabError:
        lines = [l for l in cluster.log_path(1).read_text(errors="replace").splitlines()
                 if re.search(r"UnresolvedAddress|Unable to canonicalize|Timed out waiting for connection|"
                              r"zookeeper.version=|Opening socket connection", l)]
        keep = list(dict.fromkeys(lines))[:6]
        return {"version": version, "started": False, "lines": keep}
    finally:
        cluster.stop()


# ------------------------------------------------------------------ figures

COLOURS = {"commit": "#2ca02c", "committed": "#2ca02c", "error": "#d62728", "InvalidPidMappingException": "#d62728",
           "expiry sweep": "#7f7f7f", "restart": "#ff7f0e", "spawn": "#ff7f0e", "abort": "#9467bd",
           "aborted": "#9467bd", "recreate": "#8c564b", "recreated": "#8c564b", "heartbeat": "#17becf",
           "thread died": "#000000", "TaskMigratedException": "#bcbd22", "rewind": "#e377c2",
           "UNKNOWN_PRODUCER_ID": "#d62728", "broker error": "#d62728", "segments deleted": "#7f7f7f"}
SHOWN = set(COLOURS) | {"idle", "read", "exit", "start", "ready", "producer id"}


def timeline_figure(run: ExpiryRun, title: str | None = None):
    """Lanes per client: transactions, the idle period, the expiry sweep, errors and recovery."""
    import plotly.graph_objects as go
    ev = run.events[run.events["event"].isin(SHOWN)]
    fig = go.Figure()
    if run.idle_start and run.input_at:
        fig.add_vrect(x0=run.idle_start - run.t0, x1=run.input_at - run.t0, fillcolor="#dddddd", opacity=0.4,
                      line_width=0, annotation_text="idle", annotation_position="top left")
        fig.add_vline(x=run.input_at - run.t0, line_dash="dot", annotation_text="input",
                      annotation_position="top right")
    for event, part in ev.groupby("event"):
        fig.add_trace(go.Scatter(
            x=part["t"], y=part["client"], mode="markers", name=event,
            marker=dict(size=12 if event in ("error", "expiry sweep", "InvalidPidMappingException") else 9,
                        color=COLOURS.get(event, "#1f77b4"),
                        symbol="x" if event in ("error", "InvalidPidMappingException") else
                        "diamond" if event == "expiry sweep" else "circle"),
            text=part["detail"], hovertemplate="%{y} %{x:.2f} s: " + event + "<br>%{text}<extra></extra>"))
    exp = run.params["expiration_ms"] / 1000
    fig.update_layout(title=title or f"transactional.id.expiration.ms = {exp:.0f} s, idle {run.params['idle_s']:.0f} s",
                      xaxis_title="seconds since the run began", height=140 + 55 * len(run.clients),
                      margin=dict(l=10, r=10, t=60, b=40), legend_title="event")
    return fig


def unknown_producer_figure(runs: list[UnknownProducerRun]):
    import plotly.graph_objects as go
    fig = go.Figure()
    for r in runs:
        lane = f"broker {r.broker_version}"
        ev = r.events
        for event, part in ev.groupby("event"):
            fig.add_trace(go.Scatter(x=part["t"], y=[lane] * len(part), mode="markers", name=f"{event}",
                                     legendgroup=event, showlegend=not any(t.name == event for t in fig.data),
                                     marker=dict(size=11, color=COLOURS.get(event, "#1f77b4"),
                                                 symbol="x" if "error" in event.lower() or "UNKNOWN" in event else "circle"),
                                     text=part["detail"], hovertemplate="%{x:.2f} s<br>%{text}<extra></extra>"))
    fig.update_layout(title="Same producer, same steps: retention deletes its records, then it sends again",
                      xaxis_title="seconds since the producer started", height=160 + 60 * len(runs),
                      margin=dict(l=10, r=10, t=60, b=40))
    return fig
