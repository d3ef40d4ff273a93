"""What lessons 06a and 06e share: the feed of ever-new keys with timestamps of their own, and one Kafka Streams app
of lab/java/StateGrowthApp.java, whose "growth" LAB lines report its store every second.
"""
from __future__ import annotations

import time
import uuid

from confluent_kafka import KafkaException, Producer

from ...config import KAFKA_VERSION
from ...connection import kafka_config
from ...errors import LabError
from ...toolbox.streams_app import StreamsApp
from ...record.logs import client_config


def feed(bootstrap: str, topic: str, records: int, rate: float, step_ms: int, first_ms: int, stopping,
         progress: list) -> int:
    """Produce `records` records with new keys s0000000, s0000001, ... and timestamps first_ms + i * step_ms
    at `rate` per second; returns how many Kafka acknowledged. lab.record.generator.generate sets no timestamp, hence
    this small producer. `progress` gets (epoch s, records sent so far)."""
    producer = Producer(client_config({**kafka_config(bootstrap), "linger.ms": 5, "enable.idempotence": True}))
    acked, errors = [0], []

    def delivered(err, msg):
        if err is None and msg.offset() is not None and msg.offset() >= 0:
            acked[0] += 1
        else:
            errors.append(str(err))

    start = time.monotonic()
    try:
        for i in range(records):
            if stopping.is_set():
                break
            while True:
                try:
                    producer.produce(topic, key=f"s{i:07d}", value=b"1", timestamp=first_ms + i * step_ms,
                                     on_delivery=delivered)
                    break
                except BufferError:   # local queue full: let deliveries drain
                    producer.poll(0.1)
            producer.poll(0)
            if i % 100 == 0:
                progress.append((time.time(), i))
            ahead = (i + 1) / rate - (time.monotonic() - start)
            if ahead > 0:
                stopping.wait(ahead)
        if producer.flush(60):
            raise LabError(f"records to {topic} were still undelivered after 60 s: is the broker up?")
    except KafkaException as exc:
        raise LabError(f"Producing to {topic} failed: {exc.args[0]}") from None
    progress.append((time.time(), acked[0]))
    if errors:
        raise LabError(f"{len(errors)} records to {topic} failed, e.g. {errors[0]}")
    return acked[0]


def state_app(lab, kind: str, topic: str, *, window_ms: int, retention_ms: int, ttl_ms: int, sweep_ms: int,
              memtable_kb: int, app_id: str | None = None, name: str | None = None, state=None,
              config: dict | None = None, **lab_props) -> StreamsApp:
    """One app of one store kind (kv, window, ttl): one JVM of StateGrowthApp. `config`: more Streams configs;
    `lab_props`: more of its lab.* settings, named without the prefix (disk_limit_bytes=...)."""
    app_id = app_id or f"growth-{kind}-{uuid.uuid4().hex[:4]}"
    name = name or f"growth-{kind}"
    return StreamsApp(lab, app_id, [name], KAFKA_VERSION, "StateGrowthApp",
                      ["StateGrowthApp.java", "Lab.java", "LabStreams.java"], {
                          "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                          "num.stream.threads": 1,
                          "state.dir": state or lab.folder / app_id, "consumer.auto.offset.reset": "earliest",
                          # no record cache: every update reaches RocksDB and the changelog as it happens
                          "statestore.cache.max.bytes": 0,
                          "lab.kind": kind, "lab.app": name, "lab.input.topic": topic,
                          "lab.window.ms": window_ms, "lab.retention.ms": retention_ms, "lab.ttl.ms": ttl_ms,
                          "lab.sweep.ms": sweep_ms, "lab.report.ms": 1000,
                          "lab.write.buffer.bytes": memtable_kb * 1024,
                          **(config or {}), **{"lab." + k.replace("_", "."): v for k, v in lab_props.items()}},
                      report="growth", heap="192m")
