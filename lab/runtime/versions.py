"""Kafka version arithmetic, without importing a launcher."""
from __future__ import annotations

import re

from ..config import KAFKA_VERSION
from ..errors import LabError

KRAFT_COMBINED = (3, 3, 0)   # first release whose KRaft combined mode the lab launches
OLDEST_ZOOKEEPER = (2, 0, 0)  # the oldest ZooKeeper-era broker the lab was tried with (with ZooKeeper 3.5.7)


def parse_version(version: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+\.\d+\.\d+", str(version)):
        raise LabError(f"Kafka version {version!r} is not of the form MAJOR.MINOR.PATCH (e.g. {KAFKA_VERSION}).")
    return tuple(int(p) for p in version.split("."))


def is_zookeeper_version(version: str) -> bool:
    """True for brokers before KRaft combined mode (3.3): they run with a ZooKeeper."""
    return parse_version(version) < KRAFT_COMBINED
