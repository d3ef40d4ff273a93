"""Which lessons run on the broker of docker-compose.yml: each notebook run on it, its recorded results checked.

    .venv/bin/python benchmarks/compose_lessons.py [--notebooks 00 04 ...]

There is no Docker engine here, so the lab's embedded node of the same Kafka version stands in for the container: it
starts with docker-compose.yml's broker settings (its KAFKA_* environment, in Kafka's names) and the notebooks reach
it as an outside cluster, as a learner with Docker does: KAFKA_LAB_BOOTSTRAP, with its cluster id named writable.
Each notebook runs as its failure test runs it (tests/test_notebooks.py: its test parameters and fix, its exercises
tried, headless or, for 00, its panel clicked), and its expectations' check is applied to what it recorded; a notebook that needs what only the lab's own brokers give (several nodes, another
version, its log, broker settings the Compose broker lacks) must refuse in one line before its lesson starts.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import papermill  # noqa: E402
import yaml  # noqa: E402

from lab.cluster import KafkaCluster  # noqa: E402
from lab.config import BOOTSTRAP_ENV, KAFKA_VERSION, WRITABLE_CLUSTER_ENV  # noqa: E402
from lab.record.recorded import read_results  # noqa: E402
from lab.toolbox.panel import headless_kernels  # noqa: E402
from tests.test_notebooks import (NAMES, NOTEBOOK_DIR, expectations, interactive,  # noqa: E402
                                  with_exercises_tried, with_fix, with_panel_clicks)

# the container's own wiring, which the embedded node sets up its own way
WIRING = {"node.id", "process.roles", "controller.quorum.voters", "listeners", "advertised.listeners",
          "controller.listener.names", "listener.security.protocol.map", "inter.broker.listener.name"}


def compose_broker_config() -> dict:
    """docker-compose.yml's KAFKA_* settings in Kafka's names (KAFKA_OFFSETS_RETENTION_MINUTES: offsets.retention.minutes)."""
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["kafka"]
    assert service["image"].endswith(f":{KAFKA_VERSION}"), service["image"]
    config = {k[len("KAFKA_"):].lower().replace("_", "."): str(v) for k, v in service["environment"].items()
              if k.startswith("KAFKA_")}
    return {k: v for k, v in config.items() if k not in WIRING}


def run_one(name: str, folder: Path) -> tuple[str, str]:
    """(ran | refused | failed, one line)."""
    expect = expectations(name)
    parameters = dict(expect.PARAMETERS)
    notebook = NOTEBOOK_DIR / f"{name}.ipynb"
    if "FIX" in parameters:
        notebook = with_fix(notebook, parameters.pop("FIX"), folder / f"fix-{name}.ipynb")
    learner = interactive(expect, "failure")   # its only run is a learner's, its panel clicked (00): as in its test
    if learner:
        notebook = with_panel_clicks(notebook, expect.PANEL, folder / f"panel-{name}.ipynb")
    notebook = with_exercises_tried(notebook, folder / f"tried-{name}.ipynb",   # as its test run: the checks read it
                                    skip=getattr(expect, "TRIED_IN_CONTROL_ONLY", ()))
    output = folder / f"{name}.ipynb"
    try:
        with headless_kernels(not learner):
            papermill.execute_notebook(str(notebook), str(output), parameters=parameters, kernel_name="python3",
                                       cwd=str(NOTEBOOK_DIR), execution_timeout=600, progress_bar=False)
    except papermill.PapermillExecutionError as exc:
        line = f"{exc.ename}: {str(exc.evalue).splitlines()[0] if exc.evalue else ''}"
        before = "kafka_cluster(" in exc.source or "lesson.run(" in exc.source   # before its lesson started anything
        return ("refused" if exc.ename == "LabError" and before else "failed"), line
    results = read_results(output)
    try:
        expect.check(results)
    except AssertionError as exc:
        return "failed", f"its checks: {str(exc).splitlines()[0][:200]}"
    return "ran", str(results.get("verdict", ""))[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="*", default=None, help="numbers (default: the whole course)")
    args = parser.parse_args()
    chosen = [n for n in NAMES if not args.notebooks or n.split("_")[0] in args.notebooks]
    os.environ.pop(BOOTSTRAP_ENV, None)
    config = compose_broker_config()
    print(f"docker-compose.yml's settings: {config}", flush=True)
    with KafkaCluster(name="compose-stand-in", broker_config=config) as cluster, \
            tempfile.TemporaryDirectory(prefix="compose-") as tmp:
        os.environ[BOOTSTRAP_ENV], os.environ[WRITABLE_CLUSTER_ENV] = cluster.bootstrap, cluster.cluster_id
        print("| notebook | on the Compose broker | seconds | what it said |\n|---|---|---|---|", flush=True)
        for name in chosen:
            started = time.monotonic()
            outcome, line = run_one(name, Path(tmp))
            print(f"| {name} | {outcome} | {time.monotonic() - started:.0f} | {line} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
