"""What the Spark driver costs a notebook: its start, then seven audits of a small history (as a lesson's), timed,
with the driver JVM's CPU seconds and its resident memory after them (lab/toolbox/memory.py's SPARK_MB). Run it with and without KAFKA_LAB_SPARK_FULL_JIT=1 to compare the lab's C1-alone
driver with Spark's full JIT.

    python benchmarks/spark_start.py
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.audit import audit  # noqa: E402
from lab.config import SPARK_FULL_JIT_ENV  # noqa: E402
from lab.record.history import History  # noqa: E402
from lab.audit.spark import spark_session, stop_spark  # noqa: E402


def small_history(folder: str, run_id: str, records: int = 200) -> History:
    history = History(folder, run_id)
    history.log_many("read", [{"app": "a", "incarnation": 0, "topic": "t", "partition": 0, "offset": offset,
                               "id": str(offset)} for offset in range(records)])
    history.close()
    return history


def main() -> None:
    started = time.monotonic()
    spark_session()
    start_s = time.monotonic() - started
    driver = [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]
    audits = []
    with tempfile.TemporaryDirectory(prefix="spark-start-") as folder:
        for n in range(7):
            t = time.monotonic()
            audit(small_history(f"{folder}/{n}", f"r{n}"), kinds=["non_monotonic"])
            audits.append(round(time.monotonic() - t, 2))
    cpu = sum(sum(p.cpu_times()[:2]) for p in driver)
    rss_mb = sum(p.memory_info().rss for p in driver) / 2**20
    jit = "full JIT" if os.environ.get(SPARK_FULL_JIT_ENV) == "1" else "C1 alone"
    print(f"| {jit} | start {start_s:.1f} s | audits {audits} s | {cpu:.1f} JVM CPU-s | driver RSS {rss_mb:.0f} MB "
          f"| load {os.getloadavg()[0]:.1f} |")
    stop_spark()


if __name__ == "__main__":
    main()
