"""Lesson 06b, a restart after a crash: what the lesson runs. One Kafka Streams app per mode
(lab/java/RestoreApp.java, lab.toolbox.streams_app), the input the lab fills, the probe records that show an app
processing again, and one shutdown measured: kill -9 (or SIGTERM), restart, restore, processing again.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from ...connection import kafka_config
from ...errors import LabError
from ...record.evidence import STATE_WIPE, STATE_WIPE_ACTION
from ...toolbox.streams_app import StreamsApp
from ...record.logs import client_config
from .state_restore_analysis import probes_seen, restore_row, restore_timing, restores_since

MAIN, SOURCES = "RestoreApp", ["RestoreApp.java", "Lab.java", "LabStreams.java"]
GUARANTEE = {"eos": "exactly_once_v2", "alos": "at_least_once", "standby": "exactly_once_v2"}
HEAP = "256m"


class App(StreamsApp):
    """One mode's Kafka Streams app: its instances (JVMs of RestoreApp) share one application.id."""

    def __init__(self, lab, mode: str, topic: str, p: dict):
        self.lab, self.mode, self.topic = lab, mode, topic
        app_id = f"restore-{mode}-{uuid.uuid4().hex[:4]}"
        count = p["restore_instances"] if mode == "standby" else 1
        super().__init__(lab, app_id, [f"restore-{mode}-{i}" for i in range(count)], p["restore_version"], MAIN,
                         SOURCES, lambda i: {
                             "processing.guarantee": GUARANTEE[mode],
                             # at-least-once commits every 30 s by default: 1 s keeps the checkpoint close behind
                             "commit.interval.ms": 100 if GUARANTEE[mode] != "at_least_once" else 1000,
                             "num.standby.replicas": p["restore_standbys"] if mode == "standby" else 0,
                             "state.dir": lab.folder / app_id / str(i),
                             # static membership: a restarted instance takes its tasks back at once (as a pod of a
                             # StatefulSet would), so the downtime measured is the JVM's start and the restore
                             "group.instance.id": f"{app_id}-{i}", "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 1500,
                             "lab.input.topic": topic, "lab.app": f"restore-{mode}-{i}"},
                         heap=HEAP)

    def committed_records(self, admin, partitions: int) -> int:
        """Input records whose offsets the app committed (all partitions)."""
        mine = self.committed(admin, self.topic)
        return sum(mine.get(q) or 0 for q in range(partitions))

    def holder(self):
        """The running instance with the most active tasks (the one whose loss hurts)."""
        alive = [prog for prog in self.programs if prog.alive()]
        return max(alive, key=lambda prog: len(self.last(prog).get("active") or []))


def fill(bootstrap: str, topic: str, start: int, end: int, value_bytes: int) -> None:
    """Records start..end-1 of the input: unique keys, random values (a changelog that does not compress)."""
    from confluent_kafka import Producer
    producer = Producer(client_config(kafka_config(bootstrap, {
        "linger.ms": 20, "batch.size": 1_000_000, "partitioner": "murmur2_random", "log_level": 0})))
    pool = os.urandom(max(2 * value_bytes, 65_536))
    for i in range(start, end):
        at = (i * 7919) % (len(pool) - value_bytes)
        while True:
            try:
                producer.produce(topic, key=b"k%09d" % i, value=pool[at:at + value_bytes])
                break
            except BufferError:   # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise LabError(f"The input {topic} was not all delivered within 60 s: is the broker at {bootstrap} up?")


def probe(bootstrap: str, topic: str, label: str, partitions: int) -> list[str]:
    """One probe record per partition: its processing is the moment the app works again."""
    from confluent_kafka import Producer
    producer = Producer(client_config(kafka_config(bootstrap, {"log_level": 0})))
    keys = [f"probe-{label}-{q}" for q in range(partitions)]
    for q, key in enumerate(keys):
        producer.produce(topic, key=key.encode(), value=b"probe", partition=q)
    producer.flush(30)
    return keys


def measure(lab, app: App, down, survivors, label: str, p: dict, admin, size_mb: float) -> dict:
    """Take `down` out (kill -9 or SIGTERM), restart it unless survivors take over, and time the way back."""
    partitions = p["restore_partitions"]
    before = app.last(down)
    records = app.committed_records(admin, partitions)
    changelog_bytes = sum(app.last(prog).get("changelog_bytes") or 0 for prog in [down]) or None
    kill = p["restore_shutdown"] == "kill"
    t_down = time.time()
    lab.event(app.mode, "kill -9" if kill else "SIGTERM", tone="fault", detail=f"{down.name} at {size_mb:g} MB")
    down.kill() if kill else down.stop(60)
    # where the offsets of the store were left: a .checkpoint file (before KIP-1035), else only inside RocksDB
    checkpoint_file = any(Path(down.properties["state.dir"]).rglob(".checkpoint"))
    watched = survivors or [down]
    if not survivors:
        app.start([down])
    keys = probe(lab.bootstrap, app.topic, label, partitions)

    def probes_done():
        seen = probes_seen(watched, keys)
        restores = restores_since(watched, t_down)
        ends = [r for r in restores if r["phase"] == "end"]
        starts = [r for r in restores if r["phase"] == "start"]
        return seen if len(seen) == len(keys) and len(ends) >= len(starts) else None
    # what a restore can take at a slow 5 MB/s, on top of a JVM start and a rebalance
    seen = lab.wait(probes_done, 90 + size_mb / 5, f"{app.mode} to process again after the {label} shutdown",
                    evidence=lambda: [app.last(prog).get("state") for prog in watched],
                    child=None if survivors else down.process)
    restores = restores_since(watched, t_down)
    row = restore_row(mode=app.mode, size_mb=size_mb, shutdown=p["restore_shutdown"], instance=down.name,
                      watched=[x.name for x in watched], records=records, changelog_bytes=changelog_bytes,
                      value_bytes=p["restore_value_bytes"],
                      standby_lag=before.get("lag") if app.mode == "standby" else None,
                      checkpoint_file=checkpoint_file, restores=restores,
                      wiped=app.grep(STATE_WIPE, since=t_down - 1, programs=watched),
                      action=app.grep(STATE_WIPE_ACTION, since=t_down - 1, programs=watched), seen=seen, t_down=t_down)
    restored, restore_s = restore_timing(restores)
    lab.event(app.mode, f"restored {restored} records in {restore_s:.1f} s",
              tone="failure" if row["full_restore"] else "mitigation",
              detail=f"processing again {row['down_s']} s after the shutdown")
    lab.say(f"{app.mode} at {size_mb:g} MB: restored {restored:,} of {records:,} records in {restore_s:.2f} s, "
            f"processing again after {row['down_s']} s{' (state wiped)' if row['wiped'] else ''}")
    return row
