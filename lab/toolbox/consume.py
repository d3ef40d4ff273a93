"""Reading a topic the way the lab's checks need it: one reader (TopicReader) of every partition from its
beginning, read_committed or not, as rows or raw tuples; to the end (read_to_end), until a run has what it waits
for (read_committed), or kept open while the run goes on (TopicReader.ids). read_as_group reads as a real
consumer group instead, for the lessons about groups."""
from __future__ import annotations

import json
import time
import uuid

from ..connection import kafka_config
from ..errors import LabError
from ..record.logs import client_config

QUIET = {"log_level": 0}   # librdkafka's own logging stays out of the notebook


def message_row(m) -> dict:
    """A consumed message as a row: its JSON value's fields (or `raw`, when the value is not a JSON object),
    plus `partition`, `offset` and `kafka_ts` (the record's timestamp, epoch seconds)."""
    try:
        value = json.loads(m.value())
    except (TypeError, ValueError):
        value = {"raw": repr(m.value())[:80]}
    return {**(value if isinstance(value, dict) else {"raw": str(value)}), "partition": m.partition(),
            "offset": m.offset(), "kafka_ts": m.timestamp()[1] / 1000}


def raw_row(m) -> tuple:
    """A consumed message as (key, value, timestamp in epoch seconds), for internal topics' binary records."""
    return m.key(), m.value(), m.timestamp()[1] / 1000


class TopicReader:
    """Every partition of `topic` from its beginning, with no group membership and no commits. committed:
    only what committed transactions wrote (isolation.level=read_committed). row: how a message becomes a row
    (message_row, or raw_row). poll() adds what is new to `rows` and says how much; close() it when done."""

    def __init__(self, bootstrap: str, topic: str, *, committed: bool = True, row=message_row, **config):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        self.topic, self.row, self.rows, self.at_end = topic, row, [], set()
        self.c = Consumer({**kafka_config(bootstrap), "group.id": f"lab-reader-{uuid.uuid4().hex[:8]}",
                           "isolation.level": "read_committed" if committed else "read_uncommitted",
                           "enable.partition.eof": True, "enable.auto.commit": False, **QUIET, **config})
        md = self.c.list_topics(topic, timeout=10).topics.get(topic)
        self.partitions = list(md.partitions) if md else []
        self.c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in self.partitions])

    def poll(self, wait: float = 0.2) -> int:
        """One batch: how many new rows it added (a partition's end is noted, not counted)."""
        from confluent_kafka import KafkaError
        added = 0
        for m in self.c.consume(1000, timeout=wait):
            if not m.error():
                self.rows.append(self.row(m))
                self.at_end.discard(m.partition())
                added += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                self.at_end.add(m.partition())
        return added

    def drain(self, wait: float = 0.2) -> list:
        """Everything already there: poll until a batch brings nothing new. Returns every row so far."""
        while self.poll(wait):
            pass
        return self.rows

    def ids(self) -> set:
        """The `id`s of every row so far, after reading what is new."""
        return {r.get("id") for r in self.drain()}

    def to_end(self, timeout: float, strict: bool = False) -> list:
        """Poll until every partition is read to its end (or `timeout` s; strict: a LabError then). Returns
        every row so far."""
        deadline = time.time() + timeout
        while len(self.at_end) < len(self.partitions) and time.time() < deadline:
            self.poll(0.5)
        if strict and len(self.at_end) < len(self.partitions):
            raise LabError(f"Reading {self.topic} did not reach the end of partitions "
                           f"{sorted(set(self.partitions) - self.at_end)} within {timeout:.0f} s "
                           f"({len(self.rows)} records read).")
        return self.rows

    def close(self) -> None:
        self.c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_to_end(bootstrap: str, topic: str, timeout: float = 20) -> list[tuple]:
    """Every record of a topic (internal ones too, uncommitted included) as raw (key, value, timestamp in epoch
    seconds), from the beginning of each partition to its end (or `timeout`)."""
    with TopicReader(bootstrap, topic, committed=False, row=raw_row) as reader:
        return reader.to_end(timeout)


def read_committed(run, topic: str, done, timeout: float = 90, what: str = "") -> list[dict]:
    """Every record of `topic` a read_committed reader sees, from the beginning, as message_row dicts. Waits
    (run.wait) until `done(rows)` is true, then reads what else is there (duplicates, late copies)."""
    with TopicReader(run.bootstrap, topic) as reader:
        run.wait(lambda: reader.poll(0.5) >= 0 and done(reader.rows), timeout,
                 what or f"the records wanted from {topic}", evidence=lambda: f"{len(reader.rows)} records read",
                 interval=0)
        return reader.drain(1.0)


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
