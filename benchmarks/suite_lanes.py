"""Where a pytest-xdist run of the suite spends its time and CPU: per worker (lane), per unit, per minute.

    python benchmarks/suite_lanes.py [--out DIR] -- make test PYTHON=python3.13 VENV=.venv-3.13

Runs the command with benchmarks/suite_timeline.py loaded into pytest (each test's start, end and worker) and
samples every process once a second: its CPU time and RSS, credited to the pytest-xdist worker named in its
environment (PYTEST_XDIST_WORKER, which every kernel, broker, app and Spark driver a worker starts inherits).
Prints each unit's wall time, CPU seconds and cores, the machine's busy cores per minute and the peak RSS of the
notebook lanes and of all lanes; writes the raw data to DIR. A short-lived process between two samples is missed,
and the processes of any other pytest-xdist run on the machine count too: run it alone.
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
NOTEBOOK_LANES = ("gw0", "gw1")   # tests/conftest.py: NOTEBOOK_LANES = 2


def sample(command: list[str], out: Path) -> int:
    timeline = out / "timeline.jsonl"
    timeline.unlink(missing_ok=True)
    env = {**os.environ, "SUITE_TIMELINE": str(timeline),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
           "PYTEST_ADDOPTS": " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p suite_timeline"]))}
    child = subprocess.Popen(command, env=env)
    seen: dict[int, tuple] = {}   # pid -> (worker, cpu seconds); a dead process keeps its last figure
    samples = []
    while child.poll() is None:
        rss: dict[str, int] = {}
        for proc in psutil.process_iter(["pid", "memory_info", "cpu_times"]):
            try:
                worker = seen[proc.pid][0] if proc.pid in seen else proc.environ().get("PYTEST_XDIST_WORKER")
            except (psutil.Error, OSError):
                continue
            cpu = proc.info["cpu_times"]
            if cpu is None:
                continue
            seen[proc.pid] = (worker, cpu.user + cpu.system)
            if worker and proc.info["memory_info"]:
                rss[worker] = rss.get(worker, 0) + proc.info["memory_info"].rss
        cpu_by: dict[str, float] = {}
        for worker, cpu in seen.values():
            cpu_by[worker or "other"] = cpu_by.get(worker or "other", 0) + cpu
        samples.append([time.time(), cpu_by, rss])
        time.sleep(1)
    (out / "samples.json").write_text(json.dumps(samples))
    return child.returncode


def report(out: Path) -> None:
    samples = json.loads((out / "samples.json").read_text())
    rows = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    if not rows or not samples:
        print("nothing recorded (no pytest run, or pytest ran without pytest-xdist)")
        return
    times = [s[0] for s in samples]

    def cpu(worker, t):
        return samples[min(len(samples) - 1, bisect.bisect_left(times, t))][1].get(worker, 0)

    units: dict[tuple, list] = {}
    for r in rows:   # a notebook run is a unit of its own; every other test module one unit (tests/conftest.py)
        nid = r["id"]
        unit = nid if "test_notebook" in nid or "test_a_notebook" in nid else nid.split("::")[0]
        span = units.setdefault((r["run"], r["worker"], unit), [r["start"], r["stop"]])
        span[0], span[1] = min(span[0], r["start"]), max(span[1], r["stop"])
    for run in sorted({k[0] for k in units}):
        t0 = min(s for (r, _, _), (s, _) in units.items() if r == run)
        end = max(e for (r, _, _), (_, e) in units.items() if r == run)
        print(f"\npytest run {run}: {(end - t0) / 60:.1f} min\n\n| lane | from min | unit | wall s | CPU s | cores |\n"
              "|---|---|---|---|---|---|")
        for (r, worker, unit), (s, e) in sorted(units.items(), key=lambda kv: kv[1][0]):
            if r == run and e - s >= 20:
                used = cpu(worker, e) - cpu(worker, s)
                print(f"| {worker} | {(s - t0) / 60:.1f} | {unit.split('::')[-1]} | {e - s:.0f} | {used:.0f} | "
                      f"{used / (e - s):.2f} |")
        print("\nbusy cores per minute:", " ".join(
            f"{sum(cpu(w, t0 + 60 * m + 60) - cpu(w, t0 + 60 * m) for w in samples[-1][1]) / 60:.2f}"
            for m in range(int((end - t0) // 60) + 1)))
        inside = [s for s in samples if t0 <= s[0] <= end]
        lanes = max((sum(s[2].get(w, 0) for w in NOTEBOOK_LANES), s[0]) for s in inside)
        every = max((sum(s[2].values()), s[0]) for s in inside)
        print(f"peak RSS: notebook lanes {lanes[0] / 1e9:.2f} GB ({(lanes[1] - t0) / 60:.1f} min in), all lanes "
              f"{every[0] / 1e9:.2f} GB ({(every[1] - t0) / 60:.1f} min in)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("suite-lanes"), help="folder for the raw data")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command that runs pytest")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command that runs the suite after --, e.g. -- make test")
    args.out.mkdir(parents=True, exist_ok=True)
    status = sample(command, args.out)
    report(args.out)
    return status


if __name__ == "__main__":
    sys.exit(main())
