"""A broker's start with and without a class archive (lab.runtime.class_archives): wall time from start() to ready, and the
broker JVM's CPU seconds by then. The archive is made first, in a folder of its own (the lab's stays untouched).

    .venv/bin/python benchmarks/broker_start.py [--runs 3]
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lab.runtime import class_archives  # noqa: E402
from lab.cluster import kafka_cluster  # noqa: E402


def start_once(name: str) -> tuple[float, float]:
    cluster = kafka_cluster(1, name=name)
    started = time.monotonic()
    cluster.start()
    wall = time.monotonic() - started
    cpu = sum(sum(p.cpu_times()[:2]) for p in psutil.process_iter(["name", "cmdline"])
              if p.info["name"] == "java" and "kafka.Kafka" in (p.info["cmdline"] or []))
    cluster.stop()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="class-archives-") as folder:
        class_archives.folder = lambda: Path(folder)
        os.environ[class_archives.ENV] = "0"
        plain = [start_once(f"plain{i}") for i in range(runs)]
        del os.environ[class_archives.ENV]
        start_once("listing")                       # writes the class list
        time.sleep(class_archives.QUIET_FOR_S + 1)
        start_once("dumping")                       # dumps it beside this start
        while class_archives._dumping:
            time.sleep(0.5)
        archived = [start_once(f"archived{i}") for i in range(runs)]
    print(f"load {os.getloadavg()[0]:.2f}")
    for label, rows in (("no archive", plain), ("archive", archived)):
        print(f"{label:>10}: " + ", ".join(f"{wall:.2f} s / {cpu:.2f} CPU-s" for wall, cpu in rows))


if __name__ == "__main__":
    main()
