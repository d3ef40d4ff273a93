"""A workshop day on one laptop: the day plan's notebooks, one after the other, in one JupyterLab, as learners leave
them (each Run All at its defaults, its kernel left open), with the memory of everything the lab runs measured.

    .venv/bin/python benchmarks/day.py [--notebooks 00 01 ...] [--idle-minutes 3] [--out day.json]

JupyterLab starts as `make lab` starts it (lab.commands.main.jupyter_command): its kernels are culled after
`--idle-minutes` idle. A day has about 25 class minutes a lesson and the lab culls after 30 idle minutes, so a
learner's previous notebook is still open during the next lesson's run and gone by the one after; run back to back,
the lessons take 1 to 3 minutes each, so 3 idle minutes keeps that day's shape in compressed time (0: never cull,
every kernel stays). Each notebook runs in a kernel JupyterLab started for it (a session, as opening it does), its
cells executed one by one over the kernel's channels, as Run All does.

Memory is the resident memory of every process whose environment carries this run's marker: JupyterLab, its
kernels, their Spark drivers, the brokers and programs the lessons start (sampled every second; the peak during each
notebook and what is left once it ends). The pre-flight asks for lab.commands.preflight.MEMORY_GB.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.commands.preflight import MEMORY_GB  # noqa: E402
from tests.jupyterlab import Lab, marked  # noqa: E402

# The day plan's notebooks (docs/teaching.md, "A day")
DAY = ["00", "01", "02a", "02b", "02c", "03a", "04", "05a", "05b", "06a", "06e", "07a", "07c", "08"]


def rss_gib(procs) -> tuple[float, dict]:
    """Their summed resident memory in GiB, and in MB by kind (jupyterlab, kernel, java)."""
    kinds: dict = {}
    for proc in procs:
        try:
            cmd = " ".join(proc.cmdline())
            kind = "java" if "java" in proc.name() else "kernel" if "ipykernel" in cmd else \
                "jupyterlab" if "jupyter" in cmd else "other"
            kinds[kind] = kinds.get(kind, 0) + proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return sum(kinds.values()) / 1024, {k: round(v) for k, v in kinds.items()}


class Sampler:
    def __init__(self, marker: str):
        self.marker, self.peak, self.stop = marker, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            self.peak = max(self.peak, rss_gib(marked(self.marker).values())[0])

    def take_peak(self) -> float:
        peak, self.peak = self.peak, 0.0
        return peak


class Day(Lab):
    """JupyterLab as `make lab` starts it (tests/jupyterlab.py), opening the day's notebooks one by one."""

    def run_all(self, notebook: Path) -> float:
        """Open the notebook (a session and its kernel) and run every cell in order; seconds taken."""
        import nbformat
        from jupyter_client import BlockingKernelClient
        from jupyter_core.paths import jupyter_runtime_dir
        from nbclient import NotebookClient
        session = self.api("sessions", "POST", {"path": notebook.name, "type": "notebook", "name": notebook.name,
                                                "kernel": {"name": "python3"}})
        kc = BlockingKernelClient()
        kc.load_connection_file(str(Path(jupyter_runtime_dir()) / f"kernel-{session['kernel']['id']}.json"))
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        nb = nbformat.read(notebook, as_version=4)
        client = NotebookClient(nb, timeout=900, kernel_name="python3")
        client.kc = kc
        client.reset_execution_trackers()
        started = time.monotonic()
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
        finally:
            kc.stop_channels()   # the kernel stays: the learner leaves the tab open
        return time.monotonic() - started

    def kernels(self) -> int:
        return len(self.api("kernels"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="*", default=DAY)
    parser.add_argument("--idle-minutes", type=float, default=3.0)
    parser.add_argument("--out", default=None, help="write the rows as JSON here too")
    args = parser.parse_args()
    from lab.commands.site import names
    rows = []
    with tempfile.TemporaryDirectory(prefix="day-") as tmp:
        root = Path(tmp) / "notebooks"
        root.mkdir()
        chosen = names(args.notebooks)
        for name in chosen:
            (root / f"{name}.ipynb").write_bytes((ROOT / "notebooks" / f"{name}.ipynb").read_bytes())
        lab = Day(root, Path(tmp), idle_minutes=args.idle_minutes)   # as a learner runs them: panels shown
        marker = lab.marker
        sampler = Sampler(marker)
        print("| notebook | Run All (s) | peak during it (GiB) | after it (GiB) | by kind after it (MB) | kernels open |"
              "\n|---|---|---|---|---|---|", flush=True)
        try:
            for name in chosen:
                seconds = lab.run_all(root / f"{name}.ipynb")
                time.sleep(5)   # what stops at the end has stopped
                after, kinds = rss_gib(marked(marker).values())
                row = {"notebook": name, "seconds": round(seconds), "peak_gib": round(sampler.take_peak(), 2),
                       "after_gib": round(after, 2), "kinds_mb": kinds, "kernels": lab.kernels(),
                       "load": round(os.getloadavg()[0], 1)}
                rows.append(row)
                print(f"| {name} | {row['seconds']} | {row['peak_gib']} | {row['after_gib']} | {kinds} | "
                      f"{row['kernels']} |", flush=True)
        finally:
            sampler.stop.set()
            lab.stop()
            left = list(marked(marker).values())
            for proc in left:
                proc.kill()
    peak = max(r["peak_gib"] for r in rows)
    print(f"\nPeak {peak} GiB against the pre-flight's {MEMORY_GB} GiB "
          f"({'within' if peak <= MEMORY_GB else 'OVER'}); idle kernels culled after {args.idle_minutes:g} min; "
          f"{len(left)} process(es) left after JupyterLab stopped (killed)")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "peak_gib": peak, "idle_minutes": args.idle_minutes,
                                              "memory_gb": MEMORY_GB}, indent=1))


if __name__ == "__main__":
    main()
