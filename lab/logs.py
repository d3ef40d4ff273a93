"""Quiet outputs: Spark, the JVMs and librdkafka log to files, and a notebook quotes what it needs.

A cell shows the lesson, not the machinery: brokers and programs under test already log to their
run folder (lab.processes), the Spark driver logs to `<work>/logs/spark.log`, and the in-kernel
confluent-kafka clients to `<work>/logs/kafka-clients.log`. `setup(verbose=True)` in a notebook,
or KAFKA_LAB_VERBOSE=1, sends them back to the cell for debugging.
"""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from logging.handlers import RotatingFileHandler
from pathlib import Path

from .config import WORK_DIR

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


@contextmanager
def process_output_to(path: Path):
    """Point this process's stdout/stderr file descriptors at `path` while the block runs.

    A JVM started inside (the Spark driver) inherits them for good, so what it prints outside
    log4j (`WARNING: Using incubator modules`) lands in the file; Python's own streams and the
    kernel's capture are restored when the block ends.
    """
    if verbose():
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(path, "ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
