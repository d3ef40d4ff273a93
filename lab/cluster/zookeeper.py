"""ZooKeeper-era Kafka brokers (before KRaft), for failures that only old brokers show.

`ZooKeeperKafkaCluster` has the public interface of `lab.cluster.KafkaCluster`
(start/stop, bootstrap, kill/stop/start/restart_node, grep_log, log_path, admin,
quotas) but launches, from one Maven classpath `kafka_2.12:<version>`:
one ZooKeeper (`ZooKeeperServerMain`, the zookeeper jar Kafka itself depends on)
and 1 or 3 ZK-mode brokers, all on 127.0.0.1 only, data in a fresh folder.
Kafka before 2.4 pins a ZooKeeper 3.4 that cannot connect on Java 14+: by default those
versions run with ZooKeeper 3.5.7 instead (see zookeeper_for); the broker code is unchanged.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from ..runtime import maven
from ..errors import LabError
from ..runtime.ports import free_port
from ..runtime.processes import Child, require_java, spawn_java, wait_until
from ..runtime.log4j import BROKER_LOG4J1
from .kraft import BASE_BROKER_CONFIG, KafkaCluster, Node, _distance, known_broker_configs
from ..runtime.versions import OLDEST_ZOOKEEPER as OLDEST, is_zookeeper_version, parse_version


# Kafka 2.4+ exists for Scala 2.13, older releases only up to 2.12: 2.12 covers every ZK-era version.
ZK_SCALA_BINARY = "2.12"
LOGGING = ["org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25"]


def zookeeper_for(version: str, replacement: str = "3.5.7") -> str | None:
    """The ZooKeeper jar to run Kafka `version` with on Java 14+. Kafka before 2.4 pins a 3.4.x
    ZooKeeper whose client leaves 127.0.0.1 unresolved there (UnresolvedAddressException,
    measured with 2.0.1 and 2.3.1), so it gets `replacement`; later versions keep their own."""
    return replacement if parse_version(version) < (2, 4, 0) else None


def zk_kafka_classpath(version: str, zookeeper: str | None = None) -> list[Path]:
    """Broker + ZooKeeper + a log4j 1 binding, for one ZooKeeper-era version.

    zookeeper: None = the ZooKeeper release this Kafka version depends on; a version
    (e.g. "3.5.9") replaces it, server and the broker's client library alike.
    """
    if parse_version(version) < OLDEST:
        raise LabError(f"The ZooKeeper launcher runs Kafka {'.'.join(map(str, OLDEST))} or newer, not {version}.")
    coords = [f"org.apache.kafka:kafka_{ZK_SCALA_BINARY}:{version}", *LOGGING]
    if zookeeper:
        parse_version(zookeeper)
        coords.append(f"org.apache.zookeeper:zookeeper:{zookeeper}")  # a direct dependency wins in Maven
    return maven.classpath(coords, label=f"zk-kafka-{version}" + (f"-zk{zookeeper}" if zookeeper else ""))


def zk_known_broker_configs(version: str) -> set[str]:
    """Every broker config name this old version defines (kafka.server.KafkaConfig.configNames())."""
    return known_broker_configs(version, zk_kafka_classpath(version), lister="ZkBrokerConfigNames.java")


ZOO_CFG = """tickTime=500
initLimit=10
syncLimit=5
dataDir={data}
clientPort={port}
clientPortAddress=127.0.0.1
maxClientCnxns=0
"""


@dataclass
class ZooKeeperKafkaCluster(KafkaCluster):
    """An embedded ZooKeeper-mode Kafka cluster (Kafka < 3.3). Use as a context manager."""

    version: str = "2.0.1"
    # The ZooKeeper jar (server and the broker's client): "auto" = zookeeper_for(version),
    # None = the one Kafka pins, "3.5.7" = that release instead.
    zookeeper: str | None = "auto"

    def __post_init__(self):
        if self.nodes not in (1, 3):
            raise LabError(f"nodes must be 1 or 3, not {self.nodes}.")
        if not is_zookeeper_version(self.version) or parse_version(self.version) < OLDEST:
            raise LabError(f"The ZooKeeper launcher runs Kafka {'.'.join(map(str, OLDEST))} to 3.2.x, "
                           f"not {self.version} (3.3+ runs in KRaft mode: lab.cluster.kraft.KafkaCluster).")
        if self.extra_listener is not None:
            raise LabError("extra_listener is for the KRaft launcher (Kafka 3.3+).")
        if self.zookeeper == "auto":
            self.zookeeper = zookeeper_for(self.version)
        elif self.zookeeper is not None:
            parse_version(self.zookeeper)
        self._init_common()
        self.zk_process: Child | None = None
        self.zk_port: int | None = None

    # -------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 90) -> "ZooKeeperKafkaCluster":
        require_java(17)
        self.classpath = zk_kafka_classpath(self.version, self.zookeeper)
        known = zk_known_broker_configs(self.version)
        unknown = [k for k in self.broker_config if k not in known]
        if unknown:
            hints = [f"{k!r} (did you mean {sorted(known, key=lambda n: _distance(n, k))[0]!r}?)" for k in unknown]
            raise LabError(f"Kafka {self.version} has no broker config {', '.join(hints)}.")
        ports = self.ports or [free_port() for _ in range(self.nodes)]
        if len(ports) != self.nodes:
            raise LabError(f"ports needs {self.nodes} entries, got {ports}.")
        self._nodes = [Node(i + 1, ports[i], 0, self.folder / f"node-{i + 1}") for i in range(self.nodes)]
        self._start_zookeeper(timeout)
        try:
            for node in self._nodes:
                self._write_config(node)
                self._launch(node)
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_zookeeper(self, timeout: float) -> None:
        zk_dir = self.folder / "zookeeper"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        self.zk_port = free_port()
        (zk_dir / "zoo.cfg").write_text(ZOO_CFG.format(data=zk_dir / "data", port=self.zk_port))
        (zk_dir / "log4j.properties").write_text(BROKER_LOG4J1)
        self.zk_process = spawn_java(
            f"zookeeper-{self.name}", self.classpath, "org.apache.zookeeper.server.ZooKeeperServerMain",
            [str(zk_dir / "zoo.cfg")], zk_dir / "zookeeper.log", heap="128m",
            # ZooKeeper 3.5+ starts an admin web server on 8080 unless told not to.
            jvm_options=[f"-Dlog4j.configuration=file:{zk_dir / 'log4j.properties'}",
                         "-Dzookeeper.admin.enableServer=false",
                         # reload4j has no log4j JMX classes; ZooKeeper only registers them for JMX.
                         "-Dzookeeper.jmx.log4j.disable=true", "-XX:TieredStopAtLevel=1",
                         "-Duser.timezone=UTC"])

        def ruok():
            try:
                with socket.create_connection(("127.0.0.1", self.zk_port), timeout=1) as s:
                    s.sendall(b"srvr")
                    return b"Zookeeper version" in s.recv(4096)
            except OSError:
                return False
        wait_until(ruok, timeout, f"ZooKeeper for Kafka {self.version}", child=self.zk_process)

    def stop(self) -> None:
        """Brokers first (they deregister from ZooKeeper), then ZooKeeper."""
        super().stop()
        if self.zk_process:
            self.zk_process.stop()

    def kill(self) -> None:
        super().kill()
        if self.zk_process:
            self.zk_process.kill()

    # -------------------------------------------------------------- facts
    @property
    def zookeeper_connect(self) -> str:
        return f"127.0.0.1:{self.zk_port}"

    def _config_command(self, args: list[str]) -> str:
        # Before 2.6 (KIP-546) client quotas are only reachable through ZooKeeper.
        if parse_version(self.version) < (2, 6, 0):
            return self._java_output("kafka.admin.ConfigCommand", ["--zookeeper", self.zookeeper_connect, *args])
        return super()._config_command(args)

    # -------------------------------------------------------------- internals
    # _launch is KafkaCluster's: before 4.0 it already passes the log4j 1 configuration.
    def _write_config(self, node: Node) -> None:
        node.folder.mkdir(parents=True, exist_ok=True)
        rf = str(min(3, self.nodes))
        base = dict(BASE_BROKER_CONFIG)
        config = {
            **base,
            "broker.id": str(node.node_id),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": "30000",
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "log.dirs": str(node.folder / "data"),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "default.replication.factor": rf,
            **self.broker_config,
        }
        (node.folder / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        (node.folder / "log4j.properties").write_text(BROKER_LOG4J1)

