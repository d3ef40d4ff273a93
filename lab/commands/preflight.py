"""The pre-flight an attendee runs at the start of a workshop: `make check` (`python -m lab check`; seconds, offline).

One line per check, each with what to do when it fails: Python, Java, memory, disk, the course's jars in the
cache, free ports, and a broker that starts and round-trips a record. Nothing here needs the network: after
`make lab` or an install from the offline kit (`make lab KIT=...`) every check can pass with the Wi-Fi off.
"""
from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass

import psutil

from ..config import WORK_DIR

MEMORY_GB = 3.5   # the heaviest notebook (07) peaked at 3.1 GiB with its kernel and Spark, JupyterLab's server beside it
DISK_GB = 4.0     # run folders (pruned), RocksDB stores, class archives (up to 2 GB); the jars are already on disk


@dataclass
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""
    warn: bool = False   # passes, with something to do before a workshop without network

    def line(self) -> str:
        mark = "FAIL" if not self.ok else "warn" if self.warn else "ok  "
        return f"{mark} {self.name:<7} {self.found}" + (f"\n        -> {self.fix}" if self.fix and mark != "ok  " else "")


def python() -> Check:
    v = sys.version_info
    ok = (3, 11) <= v[:2] <= (3, 13)
    return Check("python", ok, f"{v[0]}.{v[1]}.{v[2]} ({sys.executable})", "the lab needs Python 3.11 to 3.13: "
                 "give make PYTHON=python3.12 (or another in that range) and run make lab again")


def java() -> Check:
    from ..errors import LabError
    from ..runtime.jvm import current
    try:
        j = current()
    except LabError as exc:
        return Check("java", False, str(exc).splitlines()[0], "run `make reinstall`: it installs the lab's "
                     "packages again, its own Java 21 among them")
    return Check("java", True, f"Java {j.version} ({j.source}: {j.home})")


def memory() -> Check:
    available = psutil.virtual_memory().available / 2**30
    return Check("memory", available >= MEMORY_GB, f"{available:.1f} GiB available (the largest notebook needs "
                 f"about {MEMORY_GB:g})", "close other programs (browsers with many tabs, IDEs, Docker Desktop's VM)")


def disk() -> Check:
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(WORK_DIR).free / 2**30
    return Check("disk", free >= DISK_GB, f"{free:.1f} GiB free where the lab's runs go ({WORK_DIR})",
                 f"free {DISK_GB:g} GiB there; `make prune KEEP=0` deletes old runs")


def jars() -> Check:
    """Every jar of the course (lab/jars.lock) in the cache, with its pinned checksum. Missing ones only warn: a
    lesson fetches its jars when it first runs, which needs the network (the broker check below needs its own)."""
    from ..runtime import maven
    pinned = maven.committed()["jars"]
    missing = maven.not_cached(pinned)
    found = f"{len(pinned) - len(missing)} of {len(pinned)} jars of the course cached ({maven.REPOSITORY})"
    return Check("jars", True, found, "the lessons that use the others fetch them on their first run, which needs "
                 "the network: fetch them all now with `make fetch-all`, or install from a teacher's "
                 "offline kit (make lab KIT=/path/to/kit)", warn=bool(missing))


def ports() -> Check:
    from ..runtime.ports import free_ports
    try:
        got = free_ports(3)
    except OSError as exc:
        return Check("ports", False, f"no free port on 127.0.0.1 ({exc})", "the loopback interface is down or "
                     "every port is taken: restart the machine's network (WSL2: wsl --shutdown)")
    return Check("ports", True, f"127.0.0.1 gives free ports ({', '.join(map(str, got))}); JupyterLab takes 8888 "
                 "or the next free one")


def broker() -> Check:
    """A broker of the lab's Kafka starts, takes a record and gives it back."""
    from confluent_kafka import Consumer, Producer
    from ..cluster import KafkaCluster
    from ..connection import kafka_config
    from ..errors import LabError
    started = time.monotonic()
    try:
        with KafkaCluster(name="preflight") as cluster:
            producer = Producer(kafka_config(cluster.bootstrap))
            producer.produce("preflight", b"hello")
            unsent = producer.flush(30)
            producer = None   # closed now, before the broker stops (a client left open logs the disconnect)
            if unsent:
                raise LabError("the record was not acknowledged in 30 s")
            consumer = Consumer(kafka_config(cluster.bootstrap, {
                "group.id": "preflight", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
            consumer.subscribe(["preflight"])
            try:
                deadline, got = time.monotonic() + 30, None
                while got is None and time.monotonic() < deadline:
                    message = consumer.poll(1)
                    got = message.value() if message is not None and not message.error() else None
            finally:
                consumer.close()
            if got != b"hello":
                raise LabError("the record did not come back in 30 s")
            version = cluster.version
    except (LabError, OSError) as exc:
        return Check("broker", False, str(exc).splitlines()[0][:200], "read the broker's log lines in the error "
                     "above: usually no memory left, or a disk that is full")
    return Check("broker", True, f"Kafka {version} started and round-tripped a record in "
                 f"{time.monotonic() - started:.0f} s")


CHECKS = (python, java, memory, disk, jars, ports, broker)


def run(out=print) -> list[Check]:
    """Every check in order, each printed as it ends; the broker only when Java is there."""
    results = []
    for check in CHECKS:
        if check is broker and not all(r.ok for r in results if r.name == "java"):
            results.append(Check("broker", False, "not tried: no Java", "fix Java first"))
        else:
            results.append(check())
        out(results[-1].line())
    failed = [r.name for r in results if not r.ok]
    out("Ready for the course." if not failed else f"Not ready: {', '.join(failed)} (see -> above).")
    return results
