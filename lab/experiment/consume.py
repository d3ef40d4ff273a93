"""What a run's programs wrote: the committed records of a topic, read until the run has what it waits for."""
from __future__ import annotations

import json
import uuid

from ..connection import kafka_config
from ..logs import client_config


def read_committed(run, topic: str, done, timeout: float = 90, what: str = "") -> list[dict]:
    """Every record of `topic` a read_committed reader sees, from offset 0: JSON values as dicts, plus
    `partition` and `offset`. Waits (run.wait) until `done(rows)` is true, then reads what else is there."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({**kafka_config(run.bootstrap), "group.id": f"lab-reader-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
    rows: list[dict] = []

    def drain(wait: float = 0.5) -> int:
        batch = [m for m in consumer.consume(1000, timeout=wait) if not m.error()]
        rows.extend({**json.loads(m.value()), "partition": m.partition(), "offset": m.offset()} for m in batch)
        return len(batch)

    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        run.wait(lambda: drain() >= 0 and done(rows), timeout, what or f"the records wanted from {topic}",
                 evidence=lambda: f"{len(rows)} records read", interval=0)
        while drain(1.0):  # whatever else is already committed (duplicates, late copies)
            pass
        return rows
    finally:
        consumer.close()


def read_as_group(run, topic: str, n: int, group: str, timeout: float = 60) -> list[dict]:
    """The first `n` records (at least) that a real consumer group reads from `topic` (subscribe,
    auto.offset.reset=earliest, no commits): JSON values as dicts. Waits (run.wait) until it has them."""
    from confluent_kafka import Consumer
    consumer = Consumer(client_config({**kafka_config(run.bootstrap), "group.id": group,
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([topic])
    rows: list[dict] = []

    def enough() -> bool:
        rows.extend(json.loads(m.value()) for m in consumer.consume(500, 0.5) if not m.error())
        return len(rows) >= n
    try:
        run.wait(enough, timeout, f"{group} to read {n} records from {topic}", evidence=lambda: f"{len(rows)} read")
    finally:
        consumer.close()
    return rows
