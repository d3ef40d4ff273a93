"""A pytest plugin for benchmarks/suite_lanes.py: on the pytest-xdist controller, one JSON line per test phase (its
worker, start and end) appended to $SUITE_TIMELINE. Loaded with `-p suite_timeline` (this folder on PYTHONPATH)."""
import json
import os


def pytest_runtest_logreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("SUITE_TIMELINE"):
        return   # a worker (its controller writes the line), or not asked for
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    with open(os.environ["SUITE_TIMELINE"], "a") as out:
        out.write(json.dumps({"run": os.getpid(), "id": report.nodeid, "when": report.when, "worker": worker,
                              "start": report.start, "stop": report.stop}) + "\n")
