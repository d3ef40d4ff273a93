"""Lesson 06d, a downstream reader of a changelog (its `lesson`; run_lesson -> Outcome): per variant (internal
changelog, or a named store and an output topic), version 1 then version 2 (with a harmless CHANGELOG_CHANGE) of
lab/java/ChangelogApp.java under one application.id, and the downstream readers: live, a late re-read, and of version
2's changelog. Caching is off (one update per input record); CHANGELOG_SEGMENT_MS and the cleaner backoff let
compaction happen within seconds. changelog_api_analysis measures the outcome, changelog_api_report presents it; their
names stay importable from here."""
from __future__ import annotations

import re
import threading
import time
import uuid
from datetime import datetime, timezone

from ...config import KAFKA_VERSION
from ...connection import kafka_config
from ...errors import LabError
from ...toolbox import Param
from ...toolbox.lesson import Lesson
from ...toolbox.result import Exercise, expect, shown
from ...toolbox.admin import group_offsets, topic_offsets
from ...toolbox.apps import stop_together
from ...record.generator import generate
from ...record.history import History
from ...record.logs import client_config
from ...audit.spark import spark_session
from ...runtime.programs import JavaProgram
from .. import written_fix
from .changelog_api_analysis import (AUDITED, LATE, LIVE, NEW, VIEWS, Outcome, _cleaner_lines, _cumulative,
                                     _records, _unnamed_warning)

__all__ = ["PARAMS", "RULES", "needs", "run_lesson", "input_records", "changelog_config", "Variant",
           "DownstreamReader", "VARIANTS", "CHANGES", "STORE_NAME", "SOURCES", "MAX_RECORDS",
           # from changelog_api_analysis
           "Outcome", "AUDITED", "LIVE", "LATE", "NEW", "VIEWS", "_records", "_cleaner_lines", "_unnamed_warning",
           "_cumulative"]


VARIANTS = ("internal", "explicit")
CHANGES = ("mapValues", "filter")          # the DSL's own spelling (KStream#mapValues, KStream#filter)
STORE_NAME = "counts"                     # the explicit variant's store (Materialized.as)
SOURCES = ["ChangelogApp.java", "Lab.java", "LabStreams.java"]
MAX_RECORDS = 100_000                     # input records the lesson's audits judge in seconds on 2 cores

PARAMS = [
    Param("changelog_variants", ["internal"], "the apps side by side: internal, its downstream reads the count "
          "store's changelog topic; explicit, its store named (Materialized.as) and every count also written with "
          "to() to an output topic, which its downstream reads", choices=VARIANTS),
    Param("changelog_change", "mapValues", "the step version 2 inserts before the aggregation", choices=CHANGES),
    Param("changelog_rate", 40.0, "input records per second, through both versions", lo=1, hi=2000,
          unit="records/s"),
    Param("changelog_keys", 5, "distinct keys counted", lo=1, hi=100_000),
    Param("changelog_phase_s", 6.0, "how long each version runs with input flowing", lo=2, hi=120, unit="s"),
    Param("changelog_segment_ms", 1000, "segment.ms of the changelogs: how often each starts a new log file; "
          "compaction cleans only the closed ones", lo=1, hi=604_800_000, unit="ms"),
    Param("changelog_dirty_ratio", 0.01, "min.cleanable.dirty.ratio of the changelogs: the share of a log not yet "
          "compacted at which compaction starts", lo=0, hi=1),
    Param("changelog_cleaner_backoff_ms", 1000, "the broker's log.cleaner.backoff.ms: how long the broker's "
          "compaction thread sleeps when it has nothing to clean", lo=100, hi=600_000, unit="ms",
          why="below 100 ms the cleaner thread spins on this 2-core machine"),
    Param("changelog_cleaner_wait_s", 15.0, "after version 2 stops: at most this long for compaction (the "
          "broker's log cleaner) to run on the changelog the downstream reads (ends as soon as it has)", lo=0,
          hi=600, unit="s"),
    Param("changelog_partitions", 1, "partitions of the input (and of every changelog)", lo=1, hi=8),
]


def _variants(p: dict) -> str | None:
    if not p["changelog_variants"]:
        return f"CHANGELOG_VARIANTS is empty: choose some of {list(VARIANTS)}."
    return None


def _input_fits(p: dict) -> str | None:
    # the generator's history and the audits hold every record: keep them to what 2 cores audit in seconds
    # (MAX_RECORDS)
    total = input_records(p)
    if total > MAX_RECORDS:
        return (f"CHANGELOG_RATE x CHANGELOG_PHASE_S makes about {total:,} input records; the Spark audit on this "
                f"machine (2 cores) judges at most {MAX_RECORDS:,} within the lesson's time.")
    return None


RULES = [_variants, _input_fits]

SEES = ("all of them", "some of them", "none of them")
READS = {"internal": "the app's internal changelog topic, which Kafka Streams creates for the store",
         "explicit": "the app's output topic, which the app writes with to()"}


def asked_variant(p: dict) -> str:
    """The variant the Predict question is about: the internal changelog if it runs (the lesson's own run has it
    alone; the explicit variant is its Mitigate step's)."""
    return "internal" if "internal" in p["changelog_variants"] else p["changelog_variants"][0]


def question(p: dict) -> tuple:
    return (f"A downstream team reads {READS[asked_variant(p)]}. Version 2 of the app adds a "
            f"`{p['changelog_change']}` step before the count and is deployed while input keeps coming. Of the counts "
            "version 2 makes, how many does the downstream reader get?", SEES)


def measured_answer(record: dict, p: dict):
    row = record["changelog"].get(asked_variant(p))
    if row is None:
        return None
    return SEES[0] if row["live_lost"] == 0 else SEES[2] if row["live_lost"] >= row["inputs_v2"] else SEES[1]


def input_records(p: dict) -> int:
    """About how many records the two versions see (each phase, plus the redeploy's few seconds)."""
    return int(p["changelog_rate"] * (2 * p["changelog_phase_s"] + 10))


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={"log.cleaner.backoff.ms": p["changelog_cleaner_backoff_ms"]})


def changelog_config(p: dict) -> dict:
    """Topic configs of every store's changelog (Materialized.withLoggingEnabled): a segment rolls every
    CHANGELOG_SEGMENT_MS and any dirty part is worth cleaning, at once."""
    return {"segment.ms": p["changelog_segment_ms"], "min.cleanable.dirty.ratio": p["changelog_dirty_ratio"],
            "min.compaction.lag.ms": 0}


# ------------------------------------------------------------------ the programs and the readers

class Variant:
    """One application.id: version 1 and version 2 of ChangelogApp, one after the other."""

    def __init__(self, lab, name: str, input_topic: str, p: dict):
        self.lab, self.name, self.input_topic = lab, name, input_topic
        self.app_id = f"changelog-{name}-{uuid.uuid4().hex[:6]}"
        self.output = (lab.topics(f"{self.app_id}-out", partitions=p["changelog_partitions"])[0]
                       if name == "explicit" else None)
        props = {"bootstrap.servers": lab.bootstrap, "application.id": self.app_id,
                 "processing.guarantee": "at_least_once", "commit.interval.ms": 200, "num.stream.threads": 1,
                 "state.dir": lab.folder / self.app_id / "state", "consumer.auto.offset.reset": "earliest",
                 "session.timeout.ms": 6000, "heartbeat.interval.ms": 1500, "producer.linger.ms": 5,
                 # a pod with a fixed identity; version 1 leaves the group as it stops (ChangelogApp), so
                 # version 2 joins at once and its rebalance creates its new internal topics
                 "group.instance.id": f"{self.app_id}-pod",
                 # KIP-1111 (4.1+): refuse to start if any internal topic is left unnamed
                 **({"ensure.explicit.internal.resource.naming": "true"} if name == "explicit" else {}),
                 "lab.app": f"changelog-{name}", "lab.variant": name, "lab.change": p["changelog_change"],
                 "lab.input.topic": input_topic, "lab.output.topic": self.output or "", "lab.store.name": STORE_NAME,
                 **{f"lab.changelog.{k}": v for k, v in changelog_config(p).items()}}
        self.programs = {v: lab.program(JavaProgram(f"changelog-{name}-v{v}", KAFKA_VERSION, "ChangelogApp", SOURCES,
                                                    heap="192m", properties={**props, "lab.version": v}))
                         for v in (1, 2)}
        self.stores: dict = {}        # version -> the store names it printed
        self.changelogs: dict = {}    # version -> its store's changelog topic, as found on the broker
        self.descriptions: dict = {}  # version -> topology.describe()
        self.running_at: dict = {}    # version -> epoch seconds it reached RUNNING
        self.inputs_v1 = 0            # input records version 1 had committed when it stopped

    def running(self, version: int):
        prog = self.programs[version]
        rows = prog.lab_lines(kind="state", to="RUNNING")
        if rows:
            return rows[0]["ts"]
        if not prog.alive():
            tail = "\n".join(prog.log_path.read_text(errors="replace").splitlines()[-15:])
            raise LabError(f"{prog.name} exited before RUNNING; last lines of {prog.log_path}:\n{tail}")
        return None

    def learn_names(self, version: int, admin) -> None:
        """The store name the app printed, and its changelog among the topics the broker really has."""
        printed = self.programs[version].lab_lines(kind="topology")
        if not printed:
            raise LabError(f"{self.programs[version].name} printed no topology line.")
        self.stores[version] = printed[-1]["stores"]
        self.descriptions[version] = printed[-1]["description"]
        topics = [t for t in admin.list_topics(timeout=10).topics
                  if t.startswith(self.app_id + "-") and t.endswith("-changelog")]
        found = [t for t in topics if t[len(self.app_id) + 1:-len("-changelog")] in self.stores[version]]
        if len(found) != 1:
            raise LabError(f"{self.programs[version].name} printed the store(s) {self.stores[version]}, but the "
                           f"broker's changelog topics of {self.app_id} are {sorted(topics)}.")
        self.changelogs[version] = found[0]

    @property
    def downstream_topic(self) -> str:
        """What the downstream consumer reads: version 1's changelog, or the output topic."""
        return self.output or self.changelogs[1]


class DownstreamReader:
    """A downstream consumer of one topic, named in its configuration, reading records as they arrive: every
    partition from offset 0 (assign, no group join to wait for, so it is ahead of the log cleaner)."""

    def __init__(self, lab, name: str, topic: str):
        self.topic, self.rows, self.stop = topic, [], threading.Event()
        self.task = lab.background(self._read, lab, name=f"reader-{name}")

    def _read(self, lab) -> None:
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer(client_config(kafka_config(lab.bootstrap, {
            "group.id": f"downstream-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False, "log_level": 0})))
        try:
            parts = consumer.list_topics(self.topic, timeout=10).topics[self.topic].partitions
            consumer.assign([TopicPartition(self.topic, q, 0) for q in parts])
            while not (self.stop.is_set() or lab.stopping.is_set()):
                for m in consumer.consume(500, 0.3):
                    if m.error() is None:
                        self.rows.append({"key": (m.key() or b"").decode(), "value": (m.value() or b"").decode(),
                                          "topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                                          "timestamp": m.timestamp()[1] / 1000, "read_ts": time.time()})
        finally:
            consumer.close()

    def position(self) -> dict:
        """partition -> the next offset it will read."""
        out: dict = {}
        for r in self.rows:
            out[r["partition"]] = max(out.get(r["partition"], 0), r["offset"] + 1)
        return out

    def caught_up(self, ends: dict) -> bool:
        mine = self.position()
        return all(mine.get(q, 0) >= end for q, end in ends.items())

    def frame(self, spark):
        """What it read, shaped like lab.audit.spark.read_topic's frame, for the audit."""
        rows = [(r["key"], r["value"], r["topic"], r["partition"], r["offset"],
                 datetime.fromtimestamp(r["timestamp"], tz=timezone.utc)) for r in self.rows]
        return spark.createDataFrame(rows, "key STRING, value STRING, topic STRING, `partition` INT, "
                                           "`offset` LONG, timestamp TIMESTAMP")


# ------------------------------------------------------------------ the lesson

def run_lesson(lab, p: dict) -> "Outcome":
    partitions = p["changelog_partitions"]
    input_topic = lab.topics(f"changelog-input-{lab.id[-6:]}", partitions=partitions)[0]
    history = History(lab.folder / "changelog-input", lab.id)
    admin = lab.cluster.admin()
    variants = {name: Variant(lab, name, input_topic, p) for name in p["changelog_variants"]}
    readers: dict = {}    # (variant, view) -> DownstreamReader
    stop_input = threading.Event()
    feeding = lab.background(generate, lab.bootstrap, input_topic, None, history, keys=p["changelog_keys"],
                             rate=p["changelog_rate"], until=stop_input, name="changelog-input")
    try:
        for version in (1, 2):
            with lab.step(f"version {version} of the topology" + (f" (with {p['changelog_change']} inserted)"
                                                                  if version == 2 else ""), lane="deploy"):
                for v in variants.values():
                    v.programs[version].start()
                for v in variants.values():
                    v.running_at[version] = lab.wait(lambda v=v: v.running(version), 120,
                                                     f"{v.programs[version].name} to reach RUNNING")
                    v.learn_names(version, admin)
                    lab.event(f"changelog-{v.name}", f"v{version} RUNNING", at=v.running_at[version],
                              detail=f"store {v.stores[version]}, changelog {v.changelogs[version]}")
            for name, v in variants.items():
                if version == 1:    # the downstream consumer, configured with the name of what it reads
                    readers[name, LIVE] = DownstreamReader(lab, f"{name}-downstream", v.downstream_topic)
                elif v.output is None and v.changelogs[2] != v.changelogs[1]:
                    # someone who would follow the rename: what version 2 really wrote, read as it comes
                    readers[name, NEW] = DownstreamReader(lab, f"{name}-v2-changelog", v.changelogs[2])
            if version == 2:   # the audit's Spark driver starts while version 2 works: it is needed next
                spark = lab.background(spark_session, name="spark")
            lab.countdown(f"version {version} at work", p["changelog_phase_s"])
            if version == 1:
                stop_together([v.programs[1].process for v in variants.values()])
                committed = lab.wait(lambda: _committed(admin, variants, input_topic), 30,
                                     "version 1's committed offsets")
                for name, v in variants.items():
                    v.inputs_v1 = sum(o or 0 for o in committed[name].values())
                    lab.event(f"changelog-{name}", "v1 stopped (clean)", tone="fault",
                              detail=f"it had processed {v.inputs_v1} input records")
        stop_input.set()
        feeding.result(timeout=30)
        with lab.step("version 2 finishes the input and stops; the readers reach the end", lane="deploy"):
            ends = topic_offsets(admin, input_topic, partitions)
            lab.wait(lambda: _caught_up(admin, variants, input_topic, ends), 60,
                     "version 2 to have processed every input record",
                     evidence=lambda: group_offsets(admin, {n: v.app_id for n, v in variants.items()}, input_topic))
            stop_together([v.programs[2].process for v in variants.values()])
            topic_ends = {key: topic_offsets(admin, r.topic, partitions) for key, r in readers.items()}
            lab.wait(lambda: all(r.caught_up(topic_ends[key]) for key, r in readers.items()), 60,
                     "the downstream readers to reach the end of their topics",
                     evidence=lambda: {f"{k[0]}/{k[1]}": r.position() for k, r in readers.items()})
    finally:
        stop_input.set()
        for r in readers.values():
            r.stop.set()
    for r in readers.values():
        r.task.result(timeout=15)

    compacted = [v.changelogs[1] for v in variants.values() if v.output is None]
    waited = 0.0
    if compacted:
        waited = lab.countdown("the log cleaner to compact the old changelog", p["changelog_cleaner_wait_s"],
                               done=lambda: all(_has_holes(lab, admin, t, partitions) for t in compacted))
    return Outcome.measure(lab, p, variants, readers, history, waited, spark.result(180))


def _committed(admin, variants: dict, topic: str) -> dict | None:
    """name -> {partition: committed offset} once the coordinator answered for every app."""
    committed = group_offsets(admin, {n: v.app_id for n, v in variants.items()}, topic)
    return committed if all(committed.get(n) for n in variants) else None


def _caught_up(admin, variants: dict, topic: str, ends: dict) -> bool:
    committed = _committed(admin, variants, topic) or {}
    return all((committed.get(n) or {}).get(q) == end for n in variants for q, end in ends.items())


def _has_holes(lab, admin, topic: str, partitions: int) -> bool:
    """A topic whose records are fewer than its offsets: the cleaner removed some."""
    return _records(lab, topic) < sum(topic_offsets(admin, topic, partitions).values())


# ------------------------------------------------------------------ the exercise

STORE_NUMBER = re.compile(r"STATE-STORE-(\d{10})-changelog$")    # an auto-generated store's changelog


def _changelog_row(result) -> dict:
    """The internal variant's row, the one the exercise is about: its store's name moved from version 1 to 2 (the
    exercise needs the failure; a named store's changelog does not move, so it has nothing to extrapolate)."""
    row = next((r for r in result.outcome.rows if r["variant"] == "internal"), None)
    if row is None:
        raise LabError(f"the internal variant did not run (CHANGELOG_VARIANTS={result.params['changelog_variants']}): "
                       "add 'internal' and run the lesson again")
    if not row["store_renamed"] or STORE_NUMBER.search(row["changelog_v2"]) is None:
        raise LabError(f"in this run the internal store kept its changelog ({row['changelog_v2']}) from version 1 to "
                       "2: there is no move to extrapolate from")
    return row


def _changelog_v3(result) -> str:
    """The exercise: the changelog a version 3 with one more step before the aggregation would write to: the
    auto-generated store's number one up from version 2's."""
    v2 = _changelog_row(result)["changelog_v2"]
    number = int(STORE_NUMBER.search(v2).group(1))
    return STORE_NUMBER.sub(f"STATE-STORE-{number + 1:010d}-changelog", v2)


def _check_changelog_v3(result, answer) -> None:
    expect(isinstance(answer, str), "give the topic's name as a string")
    row, given = _changelog_row(result), answer.strip()
    if given == _changelog_v3(result):
        return
    expect(given.endswith("-changelog"), "a store's changelog topic is `<application.id>-<store name>-changelog`")
    expect(given not in (row["changelog_v1"], row["changelog_v2"]), "that is the changelog of version "
           f"{1 if given == row['changelog_v1'] else 2}: version 3's added step takes a number of the topology's "
           "too, and the auto-generated store name takes the next one")
    expect(False, f"{given!r} is not version 2's changelog with the store's number moved once more")


def _changelog_v3_wrong(result) -> str:
    """A tempting wrong answer to the exercise: version 2's changelog, as if nothing moved again."""
    return _changelog_row(result)["changelog_v2"]


def _changelog_printed(result) -> list:
    """The names shown above the exercise: each version's store and changelog, the readers' topics, the Mitigate
    cell's variant and the named store of its "In your app"."""
    rows, views = result.outcome.rows, result.outcome.views
    return shown(*(r[k] for r in rows for k in ("store_v1", "store_v2", "changelog_v1", "changelog_v2")),
                 *(v["topic"] for v in views), *written_fix("06d").values(), STORE_NAME, f"{STORE_NAME}-output")


EXERCISES = {
    1: Exercise(
        check=_check_changelog_v3,
        solution=_changelog_v3,
        why="Kafka Streams numbers the nodes of a topology in the order they are built, and an auto-generated store "
            "name takes the next number of the same counter (`KSTREAM-AGGREGATE-STATE-STORE-<number>`). A step "
            "inserted before the aggregation takes a number, so the store's number moves up by one, and with it "
            "the changelog topic, `<application.id>-<store name>-changelog`: version 2 writes to a new topic, and "
            "a downstream reader of the old one reads nothing new. Version 3 adds one more step in front: one "
            "number more again, from version 2's. With a store named by `Materialized.as`, nothing moves: the "
            "explicit variant's changelog keeps its name in every version.",
        wrong=_changelog_v3_wrong,
        closer="Kafka Streams numbers every node of the topology in the order it builds them, and a store left "
               "unnamed takes its number from the same counter: compare the numbers in the changelogs of versions "
               "1 and 2, and count what version 3 adds before the aggregation.",
        needs_failure=True,
        printed=_changelog_printed,
    ),
}


def variants_side_by_side(p: dict) -> int:
    # every variant's version 1 runs beside the others, then their version 2 (version 1 stopped first)
    return len(p["changelog_variants"])


lesson = Lesson("changelog", "A downstream reader of a changelog", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("ChangelogApp",), apps_at_once=variants_side_by_side)
