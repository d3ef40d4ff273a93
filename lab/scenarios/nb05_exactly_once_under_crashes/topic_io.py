"""Notebook 05's topic reads and writes besides the generator's: drain() reads a topic to its end at one
isolation level, after each run (what the analysis measures, sections 2 and 5); _produce_raw() writes the
malformed input of the deserialization-handler run (section 6).
"""
from __future__ import annotations

import time
import uuid

from ...connection import kafka_config
from ...errors import LabError
from ...experiment.consume import message_row


def drain(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list[dict]:
    """Every record of `topic` a reader at `isolation` sees, from offset 0 to each partition's end (the high
    watermark; the last stable offset for read_committed), which the reader's end-of-partition event marks."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({**kafka_config(bootstrap), "group.id": f"lab-drain-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True,
                  # the end shows as an empty fetch: do not let the broker hold it for new data (500 ms)
                  "fetch.wait.max.ms": 10, "log_level": 0})
    rows, at_end, end = [], set(), time.time() + timeout
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        while len(at_end) < len(parts):
            if time.time() > end:
                raise LabError(f"Reading {topic} ({isolation}) did not reach the end of partitions "
                               f"{sorted(set(parts) - at_end)} within {timeout:.0f} s ({len(rows)} records read).")
            for m in c.consume(1000, timeout=0.3):
                if not m.error():
                    rows.append(message_row(m))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        c.close()
    return rows


def _produce_raw(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer
    producer = Producer({**kafka_config(bootstrap), "log_level": 0})
    producer.produce(topic, key=b"k0", value=value)
    if producer.flush(30):
        raise LabError(f"The malformed record to {topic} was not delivered.")
