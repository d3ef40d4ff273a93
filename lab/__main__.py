"""`python -m lab fetch | start | clean-notebooks NB...`"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fetch(_args) -> None:
    """Check Java and cache every jar the default lab needs (broker, Spark connector)."""
    from .cluster import kafka_classpath, known_broker_configs
    from .config import KAFKA_VERSION
    from .processes import require_java
    from .spark import connector_jars
    print(f"Java {require_java(17)} found")
    print(f"Kafka {KAFKA_VERSION}: {len(kafka_classpath())} jars, "
          f"{len(known_broker_configs(KAFKA_VERSION))} broker configs known")
    print(f"Spark Kafka connector: {len(connector_jars())} jars")


def start(args) -> None:
    """A playground broker for free exploration, then JupyterLab on localhost with a token.

    Each notebook starts the cluster its scenario needs; this one is for poking around.
    """
    from .cluster import KafkaCluster
    with KafkaCluster(name="playground") as cluster:
        print(f"Playground Kafka {cluster.version} at {cluster.bootstrap} "
              f"(log: {cluster.log_path()}); set as KAFKA_LAB_PLAYGROUND in JupyterLab.")
        env = {**os.environ, "KAFKA_LAB_PLAYGROUND": cluster.bootstrap}
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={args.port}", f"--ServerApp.root_dir={ROOT / 'notebooks'}"]
        if os.geteuid() == 0:  # containers and CI machines often run as root
            cmd.append("--allow-root")
        try:
            subprocess.run(cmd, env=env, check=False)
        except KeyboardInterrupt:
            pass
    print("Lab stopped; the playground broker is down.")


def clean_notebooks(args) -> None:
    """Strip outputs, execution counts and widget state; keep cell tags (the parameters tag)."""
    for path in args.notebooks:
        nb = json.loads(Path(path).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
            for key in ("execution", "collapsed", "scrolled"):
                cell.get("metadata", {}).pop(key, None)
        nb["metadata"].pop("widgets", None)
        nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        print(f"cleaned {path}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="check Java, cache the Kafka and Spark jars").set_defaults(run=fetch)
    p = sub.add_parser("start", help="playground broker + JupyterLab")
    p.add_argument("--port", type=int, default=8888)
    p.set_defaults(run=start)
    p = sub.add_parser("clean-notebooks", help="strip outputs before committing")
    p.add_argument("notebooks", nargs="+")
    p.set_defaults(run=clean_notebooks)
    args = parser.parse_args()
    from .errors import LabError
    try:
        args.run(args)
    except LabError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
