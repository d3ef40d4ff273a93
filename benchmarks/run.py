"""What the lab costs: cluster ready times, Spark start, and each notebook's wall time and peak RSS.

    python benchmarks/run.py [--runs 3] [--notebooks 00 01 ...] [--skip-clusters]

Prints markdown rows to paste into benchmarks/RESULTS.md. Medians over --runs; jars must be
cached already (`make jars`). RSS is the sum over this process and all its descendants
(kernel, brokers, Kafka Streams JVMs, Spark), sampled every 0.25 s.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class PeakRSS:
    """Samples the summed RSS of this process tree in a thread."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.25)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def cluster_ready(nodes):
    from lab.cluster import kafka_cluster
    c = kafka_cluster(nodes=nodes, name=f"bench-{nodes}")
    t = time.perf_counter()
    c.start()
    ready = time.perf_counter() - t
    c.stop()
    c.remove_data()
    return ready


def spark_start():
    from lab.audit.spark import spark_session, stop_spark
    t = time.perf_counter()
    spark_session()
    took = time.perf_counter() - t
    stop_spark()
    return took


def notebook(path: Path):
    import papermill

    from lab.toolbox.panel import headless_kernels
    with tempfile.TemporaryDirectory() as out, PeakRSS() as rss:
        t = time.perf_counter()
        with headless_kernels():
            papermill.execute_notebook(str(path), f"{out}/{path.name}", kernel_name="python3",
                                       cwd=str(path.parent), execution_timeout=900, progress_bar=False)
        took = time.perf_counter() - t
    return took, rss.peak


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--notebooks", nargs="*", default=None, help="numbers, e.g. 00 01 (default: all)")
    parser.add_argument("--skip-clusters", action="store_true")
    args = parser.parse_args()
    rows = []
    if not args.skip_clusters:
        for nodes in (1, 3):
            ready = [cluster_ready(nodes) for _ in range(args.runs)]
            rows.append((f"{nodes}-node cluster ready (jars cached)", statistics.median(ready), ready))
            print(rows[-1], flush=True)
        med, all_ = timed(spark_start, args.runs)
        rows.append(("Spark session start (connector cached)", med, all_))
        print(rows[-1], flush=True)
    from lab.notebook import COURSE
    for path in [ROOT / "notebooks" / f"{entry.name}.ipynb" for entry in COURSE]:   # the course's own notebooks only
        if args.notebooks is not None and path.name[:2] not in args.notebooks:
            continue
        results = [notebook(path) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in results)
        peak = max(r[1] for r in results)
        rows.append((f"{path.stem} under papermill (default parameters)", wall, [r[0] for r in results],
                     peak))
        print(rows[-1], flush=True)
    print("\n| measure | median (s) | runs (s) | peak RSS |\n|---|---|---|---|")
    for row in rows:
        peak = f"{row[3] / 2**30:.2f} GiB" if len(row) > 3 else ""
        print(f"| {row[0]} | {row[1]:.1f} | {', '.join(f'{x:.1f}' for x in row[2])} | {peak} |")


if __name__ == "__main__":
    main()
