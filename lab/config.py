"""Versions and places, pinned in one spot.

KAFKA_VERSION is the newest 4.x release whose full broker classpath Maven
Central serves here (4.4.0's kafka-tools-api is missing there). SPARK_VERSION
must equal the installed pyspark: the official Kafka connector is only served
complete for 4.0.0, so pyspark is pinned to it.
"""
from __future__ import annotations

import os
from pathlib import Path

KAFKA_VERSION = "4.3.1"
SPARK_VERSION = "4.0.0"
SCALA_BINARY = "2.13"

# Set this to a bootstrap server to use your own cluster instead of the embedded one.
BOOTSTRAP_ENV = "KAFKA_LAB_BOOTSTRAP"

CACHE_DIR = Path(os.environ.get("KAFKA_LAB_CACHE", Path.home() / ".cache" / "kafka-failure-lab"))
WORK_DIR = Path(os.environ.get("KAFKA_LAB_WORK", Path.home() / ".cache" / "kafka-failure-lab" / "work"))
