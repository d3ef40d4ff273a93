"""Quiet outputs: Spark, the JVMs and librdkafka log to files, and a notebook quotes what it needs.

A cell shows the lesson, not the machinery: brokers and programs under test already log to their
run folder (lab.runtime.processes), the Spark driver logs to `<work>/logs/spark.log`, and the in-kernel
confluent-kafka clients to `<work>/logs/kafka-clients.log`. `setup(verbose=True)` in a notebook,
or KAFKA_LAB_VERBOSE=1, sends them back to the cell for debugging.
"""
from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

from ..config import WORK_DIR

VERBOSE_ENV = "KAFKA_LAB_VERBOSE"
LOG_DIR = WORK_DIR / "logs"


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0", "false", "False")


def set_verbose(on: bool) -> None:
    os.environ[VERBOSE_ENV] = "1" if on else "0"


def log_file(name: str) -> Path:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    return LOG_DIR / name


def _client_logger() -> logging.Logger:
    logger = logging.getLogger("kafka_failure_lab.librdkafka")
    if not logger.handlers:
        handler = RotatingFileHandler(log_file("kafka-clients.log"), maxBytes=5_000_000, backupCount=1)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False   # never to the root logger, i.e. never to a cell
    return logger


def client_config(config: dict) -> dict:
    """A confluent-kafka config whose librdkafka log lines (`%4|…|GETPID|…`) go to a file, not the cell."""
    return dict(config) if verbose() else {**config, "logger": _client_logger()}
