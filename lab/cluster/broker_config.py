"""What an embedded broker runs with, whatever launches it: the Maven Central classpath of a Kafka version, the
broker config names that version defines (an unknown override is refused, with the closest name), the lab's
base broker config and its log4j files. Used by lab.cluster.kraft and lab.cluster.zookeeper, the cluster of
every notebook, and by `python -m lab`.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..config import CACHE_DIR, KAFKA_VERSION, SCALA_BINARY
from ..errors import LabError
from ..runtime import maven
from ..runtime.files import replacing
from ..runtime.processes import java_executable
from ..runtime.versions import parse_version

JAVA_DIR = Path(__file__).parent.parent / "java"

# Sensible fast defaults for a laptop; scenario overrides win.
BASE_BROKER_CONFIG = {
    "num.partitions": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "log.flush.interval.messages": "9223372036854775807",
}


def kafka_classpath(version: str = KAFKA_VERSION) -> list[Path]:
    """Broker, tools and a logging binding for one Kafka version."""
    v = parse_version(version)
    coords = [f"org.apache.kafka:kafka_{SCALA_BINARY}:{version}"]
    if v >= (4, 0, 0):
        coords += [f"org.apache.kafka:kafka-tools:{version}",
                   "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
                   "org.apache.logging.log4j:log4j-core:2.24.3",
                   "org.apache.logging.log4j:log4j-api:2.24.3"]   # named: the core's own, not a newer one
    else:
        coords += ["org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25"]
    return maven.classpath(coords, label=f"kafka-{version}")


def known_broker_configs(version: str = KAFKA_VERSION, classpath: list[Path] | None = None,
                         lister: str = "BrokerConfigNames.java") -> set[str]:
    """Every broker config name this Kafka version defines (cached per version).

    `lister` is the small Java program under lab/java that prints them for this era of Kafka.
    """
    cache = CACHE_DIR / "broker-config-names" / f"{version}.txt"
    if not cache.exists():
        from ..runtime.programs import compile_sources   # (lab.runtime.programs imports this package)
        classpath = classpath or kafka_classpath(version)
        # compiled, not run as a single source file: that launcher needs jdk.compiler, which a runtime lacks
        classes = compile_sources([JAVA_DIR / lister], classpath, label=f"{Path(lister).stem}-{version}")
        run = subprocess.run([java_executable(), "-cp", os.pathsep.join(map(str, [classes, *classpath])),
                              Path(lister).stem], capture_output=True, text=True)
        names = [n for n in run.stdout.split() if "." in n]
        if run.returncode != 0 or not names:
            raise LabError(f"Could not list the broker configs of Kafka {version}: {run.stderr[-500:]}")
        with replacing(cache) as tmp:   # whole or absent to another lab process
            tmp.write_text("\n".join(names))
    return set(cache.read_text().split())


def check_broker_config(overrides: dict, version: str) -> None:
    known = known_broker_configs(version)
    unknown = [k for k in overrides if k not in known and not k.startswith("listener.name.")]
    if unknown:
        hints = []
        for key in unknown:
            close = sorted(known, key=lambda n: _distance(n, key))[:1]
            hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
        raise LabError(f"Kafka {version} has no broker config {', '.join(hints)}.")


def _distance(a: str, b: str) -> int:
    return len(set(a.split(".")) ^ set(b.split("."))) * 10 + abs(len(a) - len(b))



