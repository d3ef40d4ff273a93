"""Chapter 02's clients under test, for lessons 02a and 02b ("An idle id expires", "Kafka Streams before and after
3.8"): lab/apps/eos_app.py (one per PYTHON_MODES), the lone Java producer (IdleTransactionalProducer) and
kafka-streams-examples' WordCountDemo. A _Client is one of them in one round: started, fed until it has committed,
told to go quiet, fed once after the idle period, supervised, and summarised from its own evidence (LAB lines, or
the Kafka Streams log lines lab.toolbox.java_events names).
"""
from __future__ import annotations

import json
import re
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ...runtime import maven
from ...cluster import parse_version
from ...connection import kafka_config, spark_kafka_options
from ...errors import LabError
from ...toolbox import Run, grep, java_events, lab_lines
from ...toolbox.consume import QUIET
from ...toolbox.apps import streams_running
from ...record.history import History
from ...runtime.files import write_shared
from ...runtime.log4j import PROGRAMS as LOG4J
from ...runtime.programs import LOGGING, idle_producer, settings_file

ERROR_CODE = 49  # INVALID_PRODUCER_ID_MAPPING
WORDCOUNT = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"   # reads a properties file as args[0]
STREAMS_INPUT, STREAMS_OUTPUT = "streams-plaintext-input", "streams-wordcount-output"  # fixed in WordCountDemo
SPIN_LIMIT = 5   # this many errors after the input and no commit: the client is stuck


def streams_examples(version):
    parse_version(version)
    return maven.classpath([f"org.apache.kafka:kafka-streams-examples:{version}", *LOGGING],
                           label=f"streams-examples-{version}")


SHOWN = {"commit": "info", "committed": "info", "heartbeat": "info", "heartbeat_skipped": "fault", "error": "failure",
         "abort": "mitigation", "aborted": "mitigation", "recreate": "mitigation", "recreated": "mitigation",
         "rewind": "mitigation", "exit": "fault", "InvalidPidMappingException": "failure",
         "TaskMigratedException": "mitigation", "thread died": "failure"}
FOLLOW = ("abort", "aborted", "recreate", "recreated", "rewind", "exit", "thread died", "TaskMigratedException")


# each mode of PYTHON_MODES as eos_app's lab.on.error names it (the lesson's names say what a mode does, not how good)
ON_ERROR = {"plain": "crash", "heartbeat": "recreate", "abort-offsets-first": "abort", "no-rewind": "naive"}


def heartbeat_interval_ms(p: dict) -> int:
    """The `heartbeat` client's interval: HEARTBEAT_MS, or by default a third of the expiration."""
    return p["heartbeat_ms"] or max(200, p["expiration_ms"] // 3)


class _Client:
    kind, READY, COMMIT = "", "", ""

    def __init__(self, lab: Run, p: dict, name: str):
        self.lab, self.p, self.name, self.option = lab, p, name, name.split("-", 1)[1]
        self.txn_id = f"{lab.id}-{name}".replace(".", "_")
        self.feed_interval = max(0.5, p["expiration_ms"] / 3000)   # traffic well inside the expiration
        self.log, self.child, self.restarts, self.summary = lab.folder / f"{name}.log", None, [], {}

    def events(self) -> list[dict]:
        return lab_lines(self.log)

    def has(self, kind, since=0.0) -> bool:
        return any(e["kind"] == kind and e["ts"] >= since for e in self.events())

    def started(self):
        return self.has(self.READY)

    def warm(self):
        return self.has(self.COMMIT)

    def recovered_at(self, since):
        return max((e["ts"] for e in self.events() if e["kind"] == self.COMMIT and e["ts"] >= since), default=None)

    def check(self):
        """A client that exits before the idle period is a broken run, not a result."""
        if self.child is not None and not self.child.alive() and not self.restarts:
            raise LabError(f"{self.name} exited early (log {self.log}):\n" + "\n".join(self.child.log().splitlines()[-15:]))

    def restart(self, why):
        self.child.stop(10)
        self.restarts.append(time.time())
        self.lab.event(self.name, "restart", tone="fault", detail=why)
        self.start()

    def errors(self, after):
        return [e for e in after if e["kind"] == "error"]

    def longest_idle_s(self, events, idle_start, input_at) -> float | None:
        """The longest time the id went without a transaction, from the last one before the idle period to the
        input after it (heartbeats count: each is a transaction)."""
        done = sorted(e["ts"] for e in events if e["kind"] in (self.COMMIT, "heartbeat") and e["ts"] <= input_at)
        last_before = [t for t in done if t <= idle_start + 0.01][-1:]
        marks = [*last_before, *(t for t in done if t > idle_start + 0.01), input_at]
        return round(max(b - a for a, b in zip(marks, marks[1:])), 2) if len(marks) > 1 else None

    def summarise(self, idle_start, input_at, sweep):
        events = self.events()
        after = [e for e in events if e["ts"] >= input_at]
        errors = self.errors(after)
        first, done = errors[0] if errors else {}, self.recovered_at(input_at)
        then = [e["kind"] for e in after if e["kind"] in FOLLOW and (e["kind"] != "exit" or e.get("code"))]
        then += ["restarted by the supervisor"] * bool(self.restarts)
        self.summary = {
            "kind": self.kind, "expired": sweep is not None, "sweep": sweep, "input_at": input_at,
            "last_txn": max((e["ts"] for e in events if e["kind"] in (self.COMMIT, "heartbeat")
                             and e["ts"] <= idle_start + 0.01), default=None),
            "longest_idle_s": self.longest_idle_s(events, idle_start, input_at),
            "errors": len(errors), **{k: first.get(k) for k in ("error", "code", "call", "message", "handling")},
            "then": " -> ".join(dict.fromkeys(then)) if errors else None, "recovered": done is not None,
            "restarts": len(self.restarts), "first_error": first.get("ts"),
            "error_after_idle_s": round(first["ts"] - idle_start, 2) if first else None,
            "recovery_s": round(done - first["ts"], 2) if first and done else None,
            "reads_per_input": self.reads_per_input()}
        for e in events:
            if e["kind"] in SHOWN and e.get("level") != "TRACE":
                tone = "mitigation" if e["ts"] >= input_at and e["kind"] == self.COMMIT else SHOWN[e["kind"]]
                self.lab.event(self.name, e["kind"], e["ts"], tone=tone,
                               detail=str({k: v for k, v in e.items() if k not in ("ts", "kind")})[:300])
        if sweep:
            self.lab.event(self.name, "id expired", sweep, tone="fault", detail="tombstone in __transaction_state")

    def _nothing(self, *args):
        return None

    quiesce = supervise = reads_per_input = _nothing

    def stop(self):
        if self.child:
            self.child.stop(20)


class _Python(_Client):
    """lab/apps/eos_app.py: consume-transform-produce with confluent-kafka, one process."""
    kind, READY, COMMIT = "python", "start", "commit"

    def __init__(self, lab, p, name):
        super().__init__(lab, p, name)
        self.input, self.output, self.inputs = f"{self.txn_id}-in", f"{self.txn_id}-out", 0
        self.history = History(lab.folder / "history" / name, self.txn_id)
        self.producer = Producer({**kafka_config(lab.bootstrap), "linger.ms": 0, **QUIET})

    def topics(self):
        return [self.input, self.output]

    def start(self):
        mode = self.option
        settings = {"bootstrap.servers": self.lab.bootstrap, "lab.input": self.input, "lab.output": self.output,
                    "lab.group": self.txn_id, "lab.transactional.id": self.txn_id, "lab.app": self.name,
                    "lab.incarnation": len(self.restarts), "lab.history": self.history.folder,
                    "lab.run.id": self.history.run_id, "lab.on.error": ON_ERROR.get(mode, mode),
                    "lab.offsets.first": mode == "abort-offsets-first"}
        if mode == "heartbeat":
            settings |= {"lab.heartbeat.ms": heartbeat_interval_ms(self.p),
                         "lab.skip.heartbeats": self.p["heartbeat_misses"]}
        self.child = self.lab.spawn_python(self.name, "lab.apps.eos_app", settings)

    def feed(self, suffix="w"):
        self.inputs += 1
        record_id, seq = f"{self.name}-{suffix}{self.inputs}", self.inputs

        def delivered(err, msg):
            if err is None:
                self.history.log("produced", id=record_id, key="k0", seq=seq, topic=msg.topic(),
                                 partition=msg.partition(), offset=msg.offset(), true_value=seq)
        self.producer.produce(self.input, key="k0", value=json.dumps({"id": record_id, "key": "k0", "seq": seq}),
                              on_delivery=delivered)
        self.producer.flush(10)

    def quiet(self):
        return max([0, *(o for e in self.events() if e["kind"] == "commit" for o in e["offsets"].values())]) \
            >= self.inputs

    def supervise(self):   # the plain app exits 3 on the error; like a deployment, start it again
        if self.option == "plain" and self.child.returncode() == 3 and len(self.restarts) < 3:
            self.restart("the supervisor started it again")

    def settled(self, since):
        after = [e["kind"] for e in self.events() if e["ts"] >= since]
        gave_up = self.option == "no-rewind" and "error" in after and ("abort" in after or "recreate" in after)
        return self.recovered_at(since) is not None or gave_up or after.count("error") >= SPIN_LIMIT \
            or (not self.child.alive() and self.option != "plain")

    def reads_per_input(self):
        reads = self.history.frame("read")
        ids = reads[reads["id"].str.contains(r"-x\d+$")] if len(reads) else reads
        return int(ids["id"].value_counts().max()) if len(ids) else 0

    def audit(self):
        from ...audit import audit
        expect = "anomalies" if self.option in ("no-rewind", "abort-offsets-first") else "clean"
        return audit(self.history, bootstrap=self.lab.bootstrap, output_topic=self.output, expect=expect,
                     kinds=["duplicate", "lost", "aborted_read"])


class _Java(_Client):
    """lab/java/IdleTransactionalProducer.java: one transaction per record, at a kafka-clients version."""
    kind, READY, COMMIT = "java", "ready", "committed"

    def __init__(self, lab, p, name):
        super().__init__(lab, p, name)
        self.go, self.idle = lab.folder / f"{name}.go", lab.folder / f"{name}.idle"
        self.program = idle_producer(lab, name, self.option, self.txn_id, self.go, name, **{
            "lab.idle.file": self.idle, "lab.busy.ms": int(self.feed_interval * 1000)})
        self.log = self.program.log_path

    def topics(self):
        return [self.txn_id]

    def start(self):
        self.child = self.program.start()

    def feed(self, suffix="w"):   # the program commits every lab.busy.ms by itself; "x" ends its idle period
        self.go.touch() if suffix == "x" else None

    def quiesce(self):
        self.idle.touch()

    def quiet(self):
        return self.has("idle")

    def settled(self, since):
        return self.has("exit") or not self.child.alive()

    def errors(self, after):
        kinds = {e["kind"] for e in after}
        return [{**e, "error": e["exception"].rsplit(".", 1)[-1], "code": ERROR_CODE if "InvalidPidMapping" in
                 e["exception"] else None, "handling": "abortable" if "aborted" in kinds else "fatal" if
                 "recreated" in kinds else "other"} for e in after if e["kind"] == "error"]


class _Streams(_Client):
    """kafka-streams-examples' WordCountDemo, exactly_once_v2, configured by a properties file."""
    kind = "streams"

    def __init__(self, lab, p, name):
        super().__init__(lab, p, name)
        self.consumer, self.words, self.seen, self.end = None, [], {}, -1   # -1: latest
        self.history = History(lab.folder / "history" / name, self.txn_id)
        self.prefix = re.sub(r"[^a-z0-9]", "", f"w{lab.id}{self.option}".lower())

    def topics(self):
        return [STREAMS_INPUT, STREAMS_OUTPUT]

    def start(self):
        log4j = self.lab.folder / "log4j.properties"
        write_shared(log4j, LOG4J)
        # WordCountDemo reads its configs from args[0], as the lab's own programs do
        props = settings_file(self.lab.folder, self.name, {
            "bootstrap.servers": self.lab.bootstrap, "application.id": self.txn_id, "replication.factor": 1,
            "processing.guarantee": "exactly_once_v2", "state.dir": self.lab.folder / f"{self.name}-state"})
        self.child = self.lab.spawn_java(self.name, streams_examples(self.option), WORDCOUNT, [props], heap="256m",
                                         jvm_options=[f"-Dlog4j.configuration=file:{log4j}", "-Duser.timezone=UTC",
                                                      "-XX:TieredStopAtLevel=1"])

    def events(self):
        return [e for e in java_events(self.log) if e["ts"]]

    def started(self):
        return streams_running(self.log)

    def feed(self, suffix="w"):
        word = f"{self.prefix}{suffix}{len(self.words)}"
        self.words.append(word)
        producer = Producer({**kafka_config(self.lab.bootstrap), **QUIET})
        producer.produce(STREAMS_INPUT, value=word.encode())
        producer.flush(10)
        self.history.log("produced", id=word, key=word, seq=1, topic=STREAMS_INPUT, partition=0, offset=None,
                         true_value=1)

    def warm(self):   # every word so far counted in the read_committed output
        if self.consumer is None:
            self.consumer = Consumer({**kafka_config(self.lab.bootstrap), "group.id": f"{self.txn_id}-reader",
                                      "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
            self.consumer.assign([TopicPartition(STREAMS_OUTPUT, 0, OFFSET_BEGINNING)])
        for m in self.consumer.consume(500, timeout=0.1):
            if not m.error() and m.key() and m.key().decode().startswith(self.prefix):
                self.seen.setdefault(m.key().decode(), time.time())
        return bool(self.words) and all(w in self.seen for w in self.words)

    quiet = warm

    def settled(self, since):
        return self.warm()

    def recovered_at(self, since):   # (after stop(): what the reader saw)
        return self.seen[self.words[-1]] if all(w in self.seen for w in self.words) else None

    def supervise(self):   # the source's operators restarted the app; WordCountDemo's JVM stays up in ERROR
        if grep(self.log, r"stream-client .* State transition from PENDING_ERROR to ERROR",
                since=self.restarts[-1] if self.restarts else 0) and len(self.restarts) < 2:
            self.restart("client in ERROR: a new JVM")

    def errors(self, after):
        kinds = {e["kind"] for e in after}
        message = next((m.group(1) for e in after if (m := re.search(r"(The producer attempted.*?transactional "
                                                                         r"id\.?)", e["line"]))), None)
        return [{**e, "error": e["kind"], "code": ERROR_CODE, "message": message,
                 "call": "producer send (repartition topic)", "handling": "task migrated" if "TaskMigratedException"
                 in kinds else "thread died" if "thread died" in kinds else "other"}
                for e in after if e["kind"] == "InvalidPidMappingException" and e["level"] != "TRACE"]

    def stop(self):   # the audit reads the output up to here: a later round's app re-counts these words
        super().stop()
        if self.consumer:
            self.end = self.consumer.get_watermark_offsets(TopicPartition(STREAMS_OUTPUT, 0), timeout=10)[1]
            self.consumer.close()

    def audit(self):
        """WordCountDemo's output: key = word, value = 8-byte count. Every input word is unique, so a committed
        count of 2 is a double count (duplicate) and a missing word is lost."""
        from pyspark.sql import functions as F
        from ...audit import audit
        from ...audit.spark import sized_session, spark_session
        spark = sized_session(spark_session(), self.end or 0)   # its frames and the audit on one session

        def frame(isolation):
            raw = (spark.read.format("kafka").options(**spark_kafka_options(self.lab.bootstrap))
                   .option("subscribe", STREAMS_OUTPUT).option("startingOffsets", "earliest")
                   .option("endingOffsets", json.dumps({STREAMS_OUTPUT: {"0": self.end}}))
                   .option("kafka.isolation.level", isolation).load())
            word, count = F.col("key").cast("string"), F.conv(F.hex("value"), 16, 10).cast("long")
            return raw.filter(word.startswith(self.prefix)).select(word.alias("key"), F.to_json(F.struct(
                word.alias("id"), word.alias("key"), count.alias("value"))).alias("value"), "topic", "partition",
                "offset", "timestamp")
        return audit(self.history, output_df=frame("read_committed"), output_uncommitted_df=frame("read_uncommitted"),
                     expect="clean", spark=spark, kinds=["duplicate", "lost"])


CLIENTS = {"python": _Python, "java": _Java, "streams": _Streams}
