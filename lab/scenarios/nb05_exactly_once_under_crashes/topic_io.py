"""Chapter 05's topic reads and writes besides the generator's: drain() reads a topic to its end at one
isolation level, after each run (what the analysis measures, sections 2 and 5); _produce_raw() writes the
malformed input of the deserialization-handler run (05b).
"""
from __future__ import annotations

from ...connection import kafka_config
from ...errors import LabError
from ...toolbox.consume import TopicReader


def drain(bootstrap: str, topic: str, isolation: str, timeout: float = 30) -> list[dict]:
    """Every record of `topic` a reader at `isolation` sees, from the beginning to each partition's end (the high
    watermark; the last stable offset for read_committed); a LabError if it does not get there in time."""
    # the end shows as an empty fetch: the broker must not hold it for new data (500 ms by default)
    with TopicReader(bootstrap, topic, committed=isolation == "read_committed", **{"fetch.wait.max.ms": 10}) as r:
        return r.to_end(timeout, strict=True)


def _produce_raw(bootstrap: str, topic: str, value: bytes) -> None:
    from confluent_kafka import Producer
    producer = Producer({**kafka_config(bootstrap), "log_level": 0})
    producer.produce(topic, key=b"k0", value=value)
    if producer.flush(30):
        raise LabError(f"The malformed record to {topic} was not delivered.")
