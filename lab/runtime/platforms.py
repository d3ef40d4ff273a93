"""The platform rules: where the lab runs, and which RocksDB an old Kafka Streams needs there.

Pure functions of the platform they are given (`sys.platform`, `platform.machine()` by default), so every rule is
testable on Linux.
"""
from __future__ import annotations

import sys

from .versions import parse_version
from ..errors import LabError

WINDOWS = ("win32", "cygwin")
ARM64 = ("arm64", "aarch64")   # macOS says arm64, Linux aarch64

# The first rocksdbjni with a macOS arm64 library (librocksdbjni-osx-arm64.jnilib): Kafka Streams 3.2.0 brings it.
# 5.18.4 (Streams 2.6-2.8), 6.19.3 (3.0), 6.22.1.1 (3.1) and 6.28.2 ship only librocksdbjni-osx.jnilib, x86_64 alone.
OSX_ARM64_ROCKSDB, OSX_ARM64_STREAMS = "6.29.4.1", (3, 2, 0)
# The first rocksdbjni with librocksdbjni-linux-aarch64.so: Kafka Streams 2.6.0 brings it. 5.14.2 (Streams 2.1),
# 5.15.10 (2.2) and 5.18.3 (2.3-2.5) have none.
LINUX_ARM64_ROCKSDB, LINUX_ARM64_STREAMS = "5.18.4", (2, 6, 0)
# The oldest Kafka Streams whose stores work with OSX_ARM64_ROCKSDB (see rocksdb_for).
PINNABLE_ON_OSX_ARM64 = (3, 0, 0)


def platform_problem(system: str = sys.platform) -> str | None:
    """Why the lab cannot run on `system` (one line), or None."""
    if system in WINDOWS:
        return ("The lab runs on Linux, macOS, or Windows through WSL2 (or the dev container in .devcontainer/), "
                "not on native Windows: Kafka's log deletion renames open files, which Windows refuses "
                "(KAFKA-1194), and Spark needs winutils there.")
    return None


def rocksdb_for(streams_version: str, machine: str, system: str) -> str | None:
    """The org.rocksdb:rocksdbjni version to put on Kafka Streams `streams_version`'s classpath on this platform,
    or None when the one it brings has the platform's native library; a LabError when no version can do.

    Tried on Linux x86_64 (Java 17): a TopologyTestDriver app with a DSL table (RocksDB key-value store) and a
    windowed count (RocksDB segments), 1000 records each, metrics.recording.level=DEBUG, its stores read back and
    every state metric read, with the bundled rocksdbjni swapped for the pin:
    - 3.0.2 and 3.1.2 with 6.29.4.1: stores open, write, read; SST files flushed; all metrics read. Pinned.
    - 2.7.2 and 2.8.2 with 6.29.4.1: the first window segment fails to open, "RocksDBException: Column family not
      found: keyValueWithTimestamp": RocksDBTimestampedStore (every DSL store since 2.3) only creates its column
      family when the message is RocksDB 5's "Column family not found: : keyValueWithTimestamp". Refused.
    - 2.1.1, 2.2.1, 2.3.1 and 2.5.1 with 5.18.4: all work. Pinned on Linux arm64 (Docker on Apple Silicon).
    """
    version = parse_version(streams_version)
    if machine.lower() not in ARM64:
        return None
    if system == "darwin" and version < OSX_ARM64_STREAMS:
        if version < PINNABLE_ON_OSX_ARM64:
            raise LabError(f"Kafka Streams {streams_version} cannot open RocksDB stores on macOS arm64 (Apple "
                           f"Silicon): its RocksDB has no arm64 library and the first that has one "
                           f"({OSX_ARM64_ROCKSDB}) breaks its stores. Use Kafka Streams 3.0.0 or later, or the dev "
                           f"container (.devcontainer/).")
        return OSX_ARM64_ROCKSDB
    if system.startswith("linux") and version < LINUX_ARM64_STREAMS:
        return LINUX_ARM64_ROCKSDB
    return None
