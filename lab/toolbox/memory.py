"""What the processes of a run really cost in memory: resident set size (RSS), not the JVM heap.

    rss = run.background(peak_rss, stop, lambda: {"apps": [app.pid for app in apps], "brokers": child_pids("kafka.Kafka")})
    stop.set(); rss.result(10)   # {"apps": 812.4, "brokers": 402.0}
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
