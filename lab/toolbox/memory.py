"""What the processes of a run really cost in memory: resident set size (RSS), not the JVM heap.

    rss = run.background(peak_rss, stop, lambda: {"apps": [app.pid for app in apps], "brokers": child_pids("kafka.Kafka")})
    stop.set(); rss.result(10)   # {"apps": 812.4, "brokers": 402.0}
    refuse_unless_it_fits(brokers=1, apps=3, spark=True)   # a LabError in one line when it would not fit what is free
"""
from __future__ import annotations

import threading
from typing import Callable


def rss_mb(pids) -> float:
    """Resident memory of these processes together, in MB (a process already gone counts 0)."""
    import psutil
    total = 0.0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss / 2**20
        except psutil.Error:
            pass
    return total


def child_pids(marker: str) -> list[int]:
    """Descendants of this process whose command line has `marker` ("kafka.Kafka": the brokers it started)."""
    import psutil
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            found += [child.pid] if marker in child.cmdline() else []
        except psutil.Error:
            continue
    return found


def peak_rss(stop: threading.Event, groups: Callable[[], dict], every: float = 0.5) -> dict:
    """Sample until `stop` is set (a run.background task): for each group of `groups()` ({name: pids}),
    the largest total RSS in MB seen at one instant; None for a group that never had a process."""
    peak: dict = {}
    while not stop.wait(every):
        for name, pids in groups().items():
            peak[name] = round(max(peak.get(name) or 0.0, rss_mb(pids)), 1) if pids else peak.get(name)
    return peak


def largest(*peaks: dict) -> dict:
    """Several runs' peak_rss() as one: the largest of each group (runs one after the other never overlap)."""
    names = {name for peak in peaks for name in peak}
    return {name: max((peak.get(name) or 0 for peak in peaks), default=0) for name in names}


# What a run's processes hold, in MB of resident memory, from the lab's own runs at each lesson's defaults
# (benchmarks/RESULTS.md, "What a run needs in memory"): a broker 326 to 415, a Kafka Streams or Java client program
# 114 to 224 (a lesson's own estimate where its programs hold more: 06c's RocksDB), a Python client 35, Spark's
# driver 445 after an audit. Rounded up: a run is refused only when even these do not fit what is free.
BROKER_MB, APP_MB, PYTHON_APP_MB, SPARK_MB = 400, 200, 50, 500
SPARE_MB = 256   # left for the kernel, JupyterLab and the system while the run goes


def free_mb() -> float:
    """Memory the machine can give now without swapping, in MB (what the OS counts as available)."""
    import psutil
    return psutil.virtual_memory().available / 2**20


def needed_mb(brokers: int, apps: int, spark: bool, app_mb: float = APP_MB) -> tuple[float, str]:
    """About how much a run that starts these needs, in MB, and what it is made of (for the line that refuses it)."""
    parts = [(brokers, BROKER_MB, "broker"), (apps, app_mb, "app"), (int(spark), SPARK_MB, "Spark")]
    said = [f"{n} {what}{'s' if n > 1 and what != 'Spark' else ''}" for n, _, what in parts if n]
    return sum(n * mb for n, mb, _ in parts), ", ".join(said) or "nothing new"


def refuse_unless_it_fits(brokers: int, apps: int, spark: bool, free: float | None = None,
                          app_mb: float = APP_MB) -> None:
    """A LabError in one line, before anything starts, when the run would not fit the memory that is free."""
    need, what = needed_mb(brokers, apps, spark, app_mb)
    free = free_mb() if free is None else free
    if need + SPARE_MB > free:
        from ..errors import LabError
        raise LabError(f"This run needs about {need / 1024:.1f} GB of memory ({what}) and {free / 1024:.1f} GB is "
                       "free: shut down the kernels of the notebooks you are done with (Kernel > Shut Down Kernel), "
                       "or choose fewer apps or brokers.")
