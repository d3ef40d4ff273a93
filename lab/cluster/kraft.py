"""Embedded KRaft Kafka: combined-mode nodes (broker + controller in one JVM) launched
from Maven Central jars, listening on 127.0.0.1 only, data in a fresh folder.

KafkaCluster runs the cluster (lifecycle, faults, facts, quotas, transaction markers); what a broker runs with
is lab.cluster.broker_config, a node's configuration and JVM lab.cluster.kraft_node, SASL, TLS and ACLs
lab.cluster.kraft_security. The names they define stay importable from here.
"""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from .. import connection
from ..config import KAFKA_VERSION, WORK_DIR
from ..errors import LabError
from ..runtime.ports import free_ports, listening, port_is_free
from ..runtime.processes import java_executable, require_java, wait_until
from .broker_config import (BASE_BROKER_CONFIG, JAVA_DIR, _distance, check_broker_config,
                            kafka_classpath, known_broker_configs)
from .kraft_node import Node, NodeLauncher
from .kraft_security import BROKER_USER, LISTENER_NAME, PLAIN_CREDENTIAL, SCRAM, SaslSecurity
from .segments import DUMP_LOG_SEGMENTS, parse_markers, segment_files
from ..runtime.versions import KRAFT_COMBINED, parse_version

# importable from lab.cluster.kraft, where they were defined before
__all__ = ["KafkaCluster", "Node", "BASE_BROKER_CONFIG", "JAVA_DIR", "_distance",
           "check_broker_config", "kafka_classpath", "known_broker_configs", "BROKER_USER", "LISTENER_NAME",
           "PLAIN_CREDENTIAL", "SCRAM"]


@dataclass
class KafkaCluster(NodeLauncher, SaslSecurity):
    """An embedded Kafka cluster. Use as a context manager so it always stops."""

    nodes: int = 1
    version: str = KAFKA_VERSION
    broker_config: dict = field(default_factory=dict)
    name: str = "cluster"
    ports: list[int] | None = None  # broker ports; chosen automatically when None
    heap: str = "512m"
    folder: Path | None = None       # data and logs; a fresh folder under the work dir when None
    jmx_port: int | None = None      # JMX (no auth, 127.0.0.1) on node 1, other nodes on free ports: KIP-511 metrics
    sasl_users: dict | None = None   # {user: password}: a SASL_PLAINTEXT/SCRAM-SHA-256 listener instead of PLAINTEXT
    acls: bool = False               # with sasl_users: StandardAuthorizer, so a user without ACLs is refused
    # With sasl_users: SASL_SSL (SCRAM-SHA-256 over TLS) instead of SASL_PLAINTEXT; a CA and a certificate for
    # 127.0.0.1/localhost are made at start as PEM files in the folder (ca_file: the clients' truststore).
    tls: bool = False
    # A second PLAINTEXT client listener on every node (e.g. "APPS"): clients bootstrapped through it
    # (listener_bootstrap) meet LISTENER_NOT_FOUND for partitions led by a node restarted without it.
    extra_listener: str | None = None

    owns_broker = True   # the lab launched it: it can kill, restart, read logs, set quotas

    def __post_init__(self):
        if self.nodes not in (1, 3):
            raise LabError(f"nodes must be 1 or 3, not {self.nodes}.")
        if parse_version(self.version) < KRAFT_COMBINED:
            raise LabError(f"Kafka {self.version} predates KRaft combined mode: use kafka_cluster(), "
                           "which launches ZooKeeper-era versions with lab.cluster.zookeeper.")
        self._init_common()
        self._check_security()

    def _init_common(self) -> None:
        self.broker_config = {k: str(v) for k, v in self.broker_config.items()}
        self.folder = Path(self.folder or WORK_DIR / f"{self.name}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}")
        self._nodes: list[Node] = []
        self.cluster_id: str | None = None

    # -------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 60) -> "KafkaCluster":
        require_java(17)
        if self.ports is not None:
            if len(self.ports) != self.nodes:
                raise LabError(f"ports needs {self.nodes} entries, got {self.ports}.")
            busy = [p for p in self.ports if not port_is_free(p)]
            if busy:
                raise LabError(f"Port(s) {busy} on 127.0.0.1 are in use: stop what holds them or "
                               "leave ports=None to pick free ports.")
        self.classpath = kafka_classpath(self.version)
        check_broker_config(self.broker_config, self.version)
        # broker, controller and (nodes 2-3) JMX ports, distinct from each other and from the ports given
        given = {*(self.ports or []), *([self.jmx_port] if self.jmx_port else [])}
        chosen = iter(free_ports(4 * self.nodes, avoid=given))
        ports = self.ports or [next(chosen) for _ in range(self.nodes)]
        self._nodes = [Node(i + 1, ports[i], next(chosen), self.folder / f"node-{i + 1}",
                            extra_port=next(chosen) if self.extra_listener else None)
                       for i in range(self.nodes)]
        self._jmx_ports = {n.node_id: self.jmx_port if n.node_id == 1 else next(chosen)
                           for n in self._nodes} if self.jmx_port else {}
        # Kafka's Uuid text form: 16 random bytes, url-safe base64 without padding; like Uuid.randomUuid(),
        # never one starting with "-" (1 in 64: the storage tool would read it as an option and fail).
        self.cluster_id = "-"
        while self.cluster_id.startswith("-"):
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._make_certificates()
        for node in self._nodes:
            self._write_config(node)
        formats = [subprocess.Popen(self._java_argv("kafka.tools.StorageTool",
                                                    ["format", "-t", self.cluster_id, "-c",
                                                     str(n.folder / "server.properties"), *self._scram_args()]),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                   for n in self._nodes]
        for fmt in formats:
            out, _ = fmt.communicate(timeout=120)
            if fmt.returncode != 0:
                raise LabError(f"Formatting the Kafka storage failed:\n{self._scrub(out[-1500:])}")
        for node in self._nodes:
            self._launch(node)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        """Ready means a metadata request succeeds and lists every live node."""
        live = [n for n in self._nodes if n.process and n.process.alive()]
        admin = AdminClient(connection.kafka_config(",".join(n.address for n in live), {"log_level": 0},
                                                    security=self.client_security()))

        def ready():
            for n in live:
                if not n.process.alive():
                    raise LabError(f"Kafka node {n.node_id} exited ({n.process.returncode()}) while starting.\n"
                                   f"{n.process.why()}")
            if not all(listening(n.port) for n in live):
                return False
            try:
                md = admin.list_topics(timeout=2)
            except Exception:
                return False
            return len(md.brokers) >= len(live)

        try:
            wait_until(ready, timeout, f"Kafka {self.version} ({len(live)} node(s)) to be ready")
        except LabError as exc:   # up but not answering: say what each node was doing
            if "Timed out" not in str(exc):
                raise
            raise LabError("\n".join([str(exc), *(f"Node {n.node_id}: {n.process.why(10)}" for n in live)])) from None

    def stop(self) -> None:
        """Clean shutdown of every node at once (SIGTERM, SIGKILL as a last resort)."""
        running = self._processes()
        for process in running:
            process.terminate()
        for process in running:
            process.stop()

    def kill(self) -> None:
        """kill -9 every node (a panel's Stop: end now, no clean shutdown)."""
        for process in self._processes():
            process.kill()

    def _processes(self) -> list:
        return [n.process for n in self._nodes if n.process and n.process.alive()]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -------------------------------------------------------------- faults
    def kill_node(self, node_id: int) -> None:
        """kill -9 one node: no clean shutdown, like a crashed machine."""
        self._node(node_id).process.kill()

    def stop_node(self, node_id: int) -> None:
        self._node(node_id).process.stop()

    def start_node(self, node_id: int, timeout: float = 60) -> None:
        node = self._node(node_id)
        if node.process and node.process.alive():
            raise LabError(f"Node {node_id} is already running.")
        self._launch(node)
        self.wait_ready(timeout)

    def stop_nodes(self, *node_ids: int) -> None:
        """Clean shutdown of several nodes at once (SIGTERM to each, then wait): a whole cluster going down
        together, instead of the last ones waiting for a quorum that left before them."""
        processes = [self._node(i).process for i in node_ids]
        for process in processes:
            if process:
                process.terminate()
        for process in processes:
            if process:
                process.stop()

    def start_nodes(self, *node_ids: int, timeout: float = 60, without_extra_listener: bool = False) -> None:
        """Start several stopped nodes together, then wait once: nodes that lost their controller quorum
        only become ready when a majority of them is back. `without_extra_listener`: their server.properties
        lost the extra listener (a rolling restart with a bad config); the next start puts it back."""
        nodes = [self._node(i) for i in node_ids]
        running = [n.node_id for n in nodes if n.process and n.process.alive()]
        if running:
            raise LabError(f"Node(s) {running} already running.")
        if without_extra_listener and not self.extra_listener:
            raise LabError("without_extra_listener: this cluster has no extra_listener.")
        for node in nodes:
            if self.extra_listener:
                self._write_config(node, extra=not without_extra_listener)
            self._launch(node)
        self.wait_ready(timeout)

    def restart_node(self, node_id: int, timeout: float = 60) -> None:
        self.stop_node(node_id)
        self.start_node(node_id, timeout)

    # -------------------------------------------------------------- facts
    @property
    def running(self) -> bool:
        return any(n.process and n.process.alive() for n in self._nodes)

    def fits(self, nodes: int, version: str, broker_config: dict, extra_listener: str | None = None) -> bool:
        """Whether a scenario asking for this can run here (same size, version, broker settings, and the
        extra listener when it asks for one)."""
        effective = {**BASE_BROKER_CONFIG, **self.broker_config}   # what the nodes actually run with
        return (nodes == self.nodes and version == self.version and self._speaks(connection.security_properties())
                and all(effective.get(k) == str(v) for k, v in broker_config.items())
                and extra_listener in (None, self.extra_listener))

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self._nodes if n.process and n.process.alive()) or \
            ",".join(n.address for n in self._nodes)

    @property
    def jmx(self) -> str | None:
        """ "127.0.0.1:port[,...]" of the nodes' JMX (lab.doctor reads KIP-511 client versions there), or None."""
        return ",".join(f"127.0.0.1:{p}" for p in getattr(self, "_jmx_ports", {}).values()) or None

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self._nodes]

    def alive_nodes(self) -> list[int]:
        return [n.node_id for n in self._nodes if n.process and n.process.alive()]

    def log_path(self, node_id: int = 1) -> Path:
        return self._node(node_id).log_path

    def grep_log(self, pattern: str, node_id: int | None = None) -> list[str]:
        """Lines of the broker log(s) matching a regex, e.g. the coordinator's expiry lines."""
        rx = re.compile(pattern)
        nodes = self._nodes if node_id is None else [self._node(node_id)]
        return [line for n in nodes if n.log_path.exists()
                for line in n.log_path.read_text(errors="replace").splitlines() if rx.search(line)]

    def listener_bootstrap(self, listener: str) -> str:
        """Bootstrap servers through the extra listener (clients that see only the nodes advertising it)."""
        if listener != self.extra_listener:
            raise LabError(f"This cluster has no listener {listener!r} (extra_listener={self.extra_listener!r}).")
        return ",".join(f"127.0.0.1:{n.extra_port}" for n in self._nodes)

    def admin(self) -> AdminClient:
        """An admin client of the lab's own (the broker user on a SASL cluster)."""
        return AdminClient(connection.kafka_config(self.bootstrap, {"log_level": 0}, security=self.client_security()))

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """The partition's leader, or -1 while the answering node does not know it yet
        (just after creation a node's metadata can list the topic without its partitions)."""
        md = self.admin().list_topics(topic, timeout=10)
        found = md.topics.get(topic)
        part = found.partitions.get(partition) if found is not None else None
        return part.leader if part is not None else -1

    # -------------------------------------------------------------- quotas
    def set_quota(self, client_id: str, **rates: float) -> None:
        """E.g. set_quota('app-producer', producer_byte_rate=35000)."""
        allowed = {"producer_byte_rate", "consumer_byte_rate", "request_percentage"}
        bad = set(rates) - allowed
        if bad:
            raise LabError(f"Unknown quota(s) {sorted(bad)}; use {sorted(allowed)}.")
        config = ",".join(f"{k}={v}" for k, v in rates.items())
        self._config_command(["--alter", "--entity-type", "clients", "--entity-name", client_id,
                              "--add-config", config])

    def remove_quota(self, client_id: str, *names: str) -> None:
        names = names or ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
        current = self.quotas(client_id)
        present = [n for n in names if n in current]
        if present:
            self._config_command(["--alter", "--entity-type", "clients", "--entity-name", client_id,
                                  "--delete-config", ",".join(present)])

    def quotas(self, client_id: str) -> dict[str, float]:
        out = self._config_command(["--describe", "--entity-type", "clients", "--entity-name", client_id])
        return {k: float(v) for k, v in re.findall(r"(\w+_rate|request_percentage)=([\d.]+)", out)}

    def _config_command(self, args: list[str]) -> str:
        secured = connection.command_config(self.folder, security=self.client_security())
        login = ["--command-config", str(secured)] if secured else []
        return self._java_output("kafka.admin.ConfigCommand", ["--bootstrap-server", self.bootstrap, *args, *login])

    # -------------------------------------------------------------- internals
    def _node(self, node_id: int) -> Node:
        for n in self._nodes:
            if n.node_id == node_id:
                return n
        raise LabError(f"No node {node_id}; nodes are {self.node_ids}.")

    def _java_argv(self, main: str, args: list[str]) -> list[str]:
        cp = os.pathsep.join(map(str, self.classpath))
        return [java_executable(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", cp, main, *args]

    def _java_output(self, main: str, args: list[str]) -> str:
        run = subprocess.run(self._java_argv(main, args), capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise LabError(self._scrub(f"{main} {' '.join(args)} failed:\n{(run.stdout + run.stderr)[-1500:]}"))
        return run.stdout

    def remove_data(self) -> None:
        """Delete the cluster's folder (only once stopped)."""
        if any(n.process and n.process.alive() for n in self._nodes):
            raise LabError("Stop the cluster before removing its data.")
        shutil.rmtree(self.folder, ignore_errors=True)

    def transaction_markers(self, *topics: str) -> list[dict]:
        """The transaction markers (COMMIT / ABORT control records) in `topics`, read from the log segments
        with Kafka's own DumpLogSegments in one JVM, while the broker runs or after; see segments.parse_markers
        for the fields."""
        segments = segment_files([n.folder / "data" for n in self._nodes], set(topics))
        if not segments:
            return []
        main = next((m for m in DUMP_LOG_SEGMENTS if self._has_class(m)), DUMP_LOG_SEGMENTS[-1])
        return parse_markers(self._java_output(main, ["--deep-iteration", "--files", ",".join(segments)]),
                             segments)

    def _has_class(self, name: str) -> bool:
        entry = name.replace(".", "/") + ".class"
        for jar in self.classpath:
            with zipfile.ZipFile(jar) as z:
                if entry in z.NameToInfo:
                    return True
        return False
