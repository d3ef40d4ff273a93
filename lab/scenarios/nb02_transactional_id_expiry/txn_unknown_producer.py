"""Lesson 02c's steps: on each of ZOOKEEPER_BROKERS (its own
Run), a transactional Java producer commits, waits until topic retention deleted all its records, and commits again
(unknown_producer); pinned_zookeeper() starts an old broker with the ZooKeeper it pins. Only brokers before 2.4
forget a producer with its last records. They pin a ZooKeeper 3.4 client that cannot connect on Java 14+, so
lab.cluster runs them with ZooKeeper 3.5.7.
"""
from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from ...cluster import kafka_cluster, parse_version
from ...connection import kafka_config
from ...errors import LabError
from ...toolbox import Param, Run, grep, lab_lines
from ...runtime.programs import clients_classpath, idle_producer

BROKER_ERROR = r"Found no record of producerId=.*|UnknownProducerIdException"
RETENTION_CHECK_MS = 1000   # log.retention.check.interval.ms on every broker of the steps (Kafka's default 5 min)


def _old_broker(version):
    from ...cluster.zookeeper import zk_kafka_classpath, zookeeper_for
    if parse_version(version) >= (3, 3, 0):
        raise LabError(f"ZOOKEEPER_BROKERS: {version} is not a ZooKeeper-era broker (< 3.3); the KRaft broker "
                       "BROKER_VERSION runs the same steps anyway.")
    zk_kafka_classpath(version, zookeeper_for(version))


PARAMS = (
    Param("zookeeper_brokers", ["2.0.1"], "ZooKeeper-era broker versions (before 3.3) the steps run on, each "
          "with its own ZooKeeper, before the KRaft broker", check=lambda vs: [_old_broker(v) for v in vs]),
    Param("client_version", "2.0.1", "kafka-clients version of the transactional Java producer, on every broker",
          check=clients_classpath),
    Param("retention_ms", 3000, "retention.ms of the topic the producer writes to", lo=1, hi=600000, unit="ms"),
    Param("check_pinned_zookeeper", True, "also try to start the first ZooKeeper-era broker with the ZooKeeper "
          "client its release shipped with (the steps run with ZooKeeper 3.5.7)"),
)


def old_brokers(parent: Run, p: dict) -> dict:
    """Part C on each old broker, one after the other (in a background task: each its own Run); the pinned
    ZooKeeper's try meanwhile, in a task of its own (it waits for a start that does not come)."""
    pinned = parent.background(pinned_zookeeper, (p["zookeeper_brokers"] or ["2.0.1"])[0], parent) \
        if p["check_pinned_zookeeper"] else None
    found = {}
    for version in p["zookeeper_brokers"]:
        with Run(f"txn-upid-{version}", version=version, progress=False,
                 broker_config={"log.retention.check.interval.ms": str(RETENTION_CHECK_MS)}) as run:
            found[version] = unknown_producer(run, p, parent.timeline, parent)
    if pinned is not None:
        found["pinned"] = pinned.result(120)
    return found


def unknown_producer(run: Run, p: dict, timeline, parent: Run | None = None) -> dict:
    """The steps on run's cluster; events on `timeline`'s lane "broker <version>"."""
    version, lane, since = run.cluster.version, f"broker {run.cluster.version}", time.time()
    topic = f"{run.id}-retained".replace(".", "_")
    run.topics(topic, config={"retention.ms": p["retention_ms"]})
    go = run.folder / f"{topic}.go"
    program = idle_producer(run, f"producer-{version}", p["client_version"], topic, go, topic)
    child = program.start()
    watch = Consumer({**kafka_config(run.bootstrap), "group.id": f"{topic}-watch", "log_level": 0})

    def deleted():   # every record of the producer is gone: log start offset = end offset
        (parent or run).check()
        lo, hi = watch.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        return (lo, hi) if hi > 0 and lo == hi else None
    try:
        # the producer's "idle" line comes right after its last commit: the idle time is measured from there
        idle_from = run.wait(lambda: lab_lines(program.log_path, kind="idle"), 120, "the producer's first commit",
                             child=child)[0]["ts"]
        timeline.add(lane, "committed, idle", detail=f"retention.ms={p['retention_ms']}")
        # brokers before 3.8 start their retention task 30 s after boot (no log.initial.task.delay.ms yet)
        start_offset = run.wait(deleted, 90 + p["retention_ms"] / 1000, "retention to delete the producer's records",
                                child=child)[0]
        timeline.add(lane, "segments deleted", tone="wait", detail=f"log start offset {start_offset}")
        go.touch()
        idle_s = round(time.time() - idle_from, 1)
        run.wait(lambda: lab_lines(program.log_path, kind="exit") or not program.alive(), 60,
                 "the producer's second transaction")
    finally:
        watch.close()
        program.stop(15)
    broker = [line for _, line in grep(run.cluster.log_path(1), BROKER_ERROR, since=since)] \
        if run.cluster.owns_broker else []
    client = [line for _, line in grep(program.log_path, r"UNKNOWN_PRODUCER_ID|UnknownProducerId")]
    expired = bool(grep(program.log_path, r"INVALID_PRODUCER_ID_MAPPING|InvalidPidMapping"))   # the id, not the state
    for ts, line in grep(run.cluster.log_path(1), r"Found no record of producerId", since=since)[:1]:
        timeline.add(lane, "UnknownProducerIdException", ts, tone="failure", detail=line[:300])
    after = [e for e in lab_lines(program.log_path, kind="committed") if e["phase"].startswith("after-idle")]
    for e in after[:1]:
        timeline.add(lane, "committed again", e["ts"], tone="mitigation")
    message = next((m for line in broker for m in [line[line.find("Found no record"):]] if "Found no" in line), None)
    return {"broker_version": version, "client_version": p["client_version"], "reproduced": bool(broker or client),
            "broker_message": message, "broker_errors": len(broker), "client_errors": len(client),
            "committed_after": bool(after), "id_expired": expired, "log_start_offset": start_offset, "idle_s": idle_s,
            "evidence": (broker + client)[:3]}


def pinned_zookeeper(version: str, parent: Run) -> dict:
    """Start `version` with the ZooKeeper jar it pins: does it come up? (3.4.x clients leave 127.0.0.1
    unresolved on Java 14+, ZOOKEEPER-3779.)"""
    cluster = kafka_cluster(version=version, zookeeper=None, name=f"pinned-{version}",
                            folder=parent.folder / f"pinned-{version}",
                            broker_config={"zookeeper.connection.timeout.ms": "8000"})
    try:
        cluster.start(timeout=38)
        return {"version": version, "started": True, "lines": []}
    except LabError:
        lines = grep(cluster.log_path(1), r"UnresolvedAddress|Unable to canonicalize|Timed out waiting for "
                                          r"connection|zookeeper.version=|Opening socket connection")
        return {"version": version, "started": False, "lines": list(dict.fromkeys(l for _, l in lines))[:6]}
    finally:
        cluster.stop()
