"""One node of the embedded KRaft cluster: its ports and folder (Node), the server.properties and log4j file it
starts with, and its JVM (broker and controller in one, JMX on 127.0.0.1 when asked). NodeLauncher is a
mixin of lab.cluster.kraft.KafkaCluster.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..runtime.processes import Child, spawn_java
from ..runtime.log4j import BROKER_LOG4J1, BROKER_LOG4J2
from .broker_config import BASE_BROKER_CONFIG
from ..runtime.versions import parse_version


@dataclass
class Node:
    node_id: int
    port: int
    controller_port: int
    folder: Path
    extra_port: int | None = None    # the cluster's extra_listener on this node
    process: Child | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.folder / "broker.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class NodeLauncher:
    """Writes a node's configuration and starts its JVM (KafkaCluster's nodes, folder, version, heap...)."""

    def _write_config(self, node: Node, extra: bool = True) -> None:
        node.folder.mkdir(parents=True, exist_ok=True)
        rf = str(min(3, self.nodes))
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes)
        client = [f"PLAINTEXT://127.0.0.1:{node.port}"]
        if self.extra_listener and extra:
            client.append(f"{self.extra_listener}://127.0.0.1:{node.extra_port}")
        config = {
            **BASE_BROKER_CONFIG,
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": ",".join([*client, f"CONTROLLER://127.0.0.1:{node.controller_port}"]),
            "advertised.listeners": ",".join(client),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                                              + (f",{self.extra_listener}:PLAINTEXT" if self.extra_listener else ""),
            "log.dirs": str(node.folder / "data"),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "default.replication.factor": rf,
            **self._sasl_broker_config(node),
            **self.broker_config,
        }
        (node.folder / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        if getattr(self, "sasl_users", None):
            (node.folder / "server.properties").chmod(0o600)   # it holds the broker user's password
        if parse_version(self.version) >= (4, 0, 0):
            (node.folder / "log4j2.properties").write_text(BROKER_LOG4J2)
        else:
            (node.folder / "log4j.properties").write_text(BROKER_LOG4J1)

    def _launch(self, node: Node) -> None:
        if parse_version(self.version) >= (4, 0, 0):
            logging = [f"-Dlog4j2.configurationFile={node.folder / 'log4j2.properties'}"]
        else:
            logging = [f"-Dlog4j.configuration=file:{node.folder / 'log4j.properties'}"]
        node.starts += 1
        with open(node.log_path, "a") as f:
            f.write(f"===== lab: start #{node.starts} of node {node.node_id} at {time.time():.3f}\n")
        node.process = spawn_java(
            f"kafka-{self.name}-node{node.node_id}", self.classpath, "kafka.Kafka",
            [str(node.folder / "server.properties")], node.log_path, heap=self.heap,
            # UTC: lab.record.evidence reads every log stamp as UTC.
            jvm_options=[*logging, f"-Dkafka.logs.dir={node.folder / 'logs'}", "-Duser.timezone=UTC",
                         "-XX:TieredStopAtLevel=1", "-Xshare:auto", *self._jmx_options(node)])

    def _jmx_options(self, node: Node) -> list[str]:
        port = getattr(self, "_jmx_ports", {}).get(node.node_id)
        if port is None:
            return []
        # One port for the registry and the RMI server, bound to 127.0.0.1: reachable only from this machine.
        return [f"-Dcom.sun.management.jmxremote.port={port}", f"-Dcom.sun.management.jmxremote.rmi.port={port}",
                "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1",
                "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false"]
