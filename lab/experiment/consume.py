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


def message_row(m) -> dict:
    """A consumed message as a row: its JSON value's fields (or `raw`, when the value is not a JSON object),
    plus `partition`, `offset` and `kafka_ts` (the record's timestamp, epoch seconds)."""
    try:
        value = json.loads(m.value())
    except (TypeError, ValueError):
        value = {"raw": repr(m.value())[:80]}
    return {**(value if isinstance(value, dict) else {"raw": str(value)}), "partition": m.partition(),
            "offset": m.offset(), "kafka_ts": m.timestamp()[1] / 1000}


class Tail:
    """A read_committed reader kept open on every partition of `topic` from offset 0, while the run goes on:
    poll() adds what is new (message_row each) and returns all rows so far; ids() is the `id`s committed
    output holds. close() it when done."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({**kafka_config(bootstrap), "group.id": f"lab-tail-{uuid.uuid4().hex[:8]}",
                           "isolation.level": "read_committed", "enable.auto.commit": False, "log_level": 0})
        parts = self.c.list_topics(topic, timeout=10).topics[topic].partitions
        self.c.assign([TopicPartition(topic, p, 0) for p in parts])
        self.rows: list[dict] = []

    def poll(self) -> list[dict]:
        while True:
            batch = [m for m in self.c.consume(1000, timeout=0.2) if not m.error()]
            self.rows.extend(message_row(m) for m in batch)
            if not batch:
                return self.rows

    def ids(self) -> set:
        return {r.get("id") for r in self.poll()}

    def close(self) -> None:
        self.c.close()
