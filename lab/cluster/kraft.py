"""Embedded KRaft Kafka: combined-mode nodes (broker + controller in one JVM) launched
from Maven Central jars, listening on 127.0.0.1 only, data in a fresh folder.
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

from .. import connection, maven
from ..config import CACHE_DIR, KAFKA_VERSION, SCALA_BINARY, WORK_DIR
from ..errors import LabError
from ..ports import free_ports, listening, port_is_free
from ..processes import Child, java_executable, require_java, spawn_java, wait_until
from .segments import DUMP_LOG_SEGMENTS, parse_markers, segment_files
from .versions import KRAFT_COMBINED, parse_version

JAVA_DIR = Path(__file__).parent.parent / "java"

# Sensible fast defaults for a laptop; scenario overrides win.
SCRAM = "SCRAM-SHA-256"
BROKER_USER = "lab-broker"   # the embedded SASL cluster's inter-broker (and super) user
# Credentials go into `--add-scram NAME=[name=...,password=...]`: keep them to characters that need no quoting.
PLAIN_CREDENTIAL = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
LISTENER_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,30}")

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
        from ..programs import compile_sources   # (lab.programs imports this package)
        classpath = classpath or kafka_classpath(version)
        # compiled, not run as a single source file: that launcher needs jdk.compiler, which a runtime lacks
        classes = compile_sources([JAVA_DIR / lister], classpath, label=f"{Path(lister).stem}-{version}")
        run = subprocess.run([java_executable(), "-cp", os.pathsep.join(map(str, [classes, *classpath])),
                              Path(lister).stem], capture_output=True, text=True)
        names = [n for n in run.stdout.split() if "." in n]
        if run.returncode != 0 or not names:
            raise LabError(f"Could not list the broker configs of Kafka {version}: {run.stderr[-500:]}")
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("\n".join(names))
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


@dataclass
class KafkaCluster:
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

    def _check_security(self) -> None:
        if self.extra_listener is not None and (self.sasl_users or not LISTENER_NAME.fullmatch(self.extra_listener)
                                                or self.extra_listener in ("PLAINTEXT", "CONTROLLER")):
            raise LabError(f"extra_listener={self.extra_listener!r}: a second PLAINTEXT listener needs a name of "
                           "its own (A-Z, 0-9, _) and a cluster without sasl_users.")
        users = dict(self.sasl_users or {})
        if self.acls and not users:
            raise LabError("acls=True needs sasl_users: without authentication every client is the same user.")
        bad = [u for u, pw in users.items() if not (PLAIN_CREDENTIAL.fullmatch(str(u))
                                                    and PLAIN_CREDENTIAL.fullmatch(str(pw)))]
        if bad or BROKER_USER in users:
            raise LabError(f"sasl_users: user {(bad or [BROKER_USER])[0]!r} cannot be used: names and passwords "
                           f"need 1-64 of A-Z a-z 0-9 _ . @ + - and {BROKER_USER!r} is the broker's own user.")
        self.sasl_users = {str(u): str(pw) for u, pw in users.items()} or None
        self._broker_password = uuid.uuid4().hex   # inter-broker credentials, new for every cluster

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
                    tail = "\n".join(n.process.log().splitlines()[-20:])
                    raise LabError(f"Kafka node {n.node_id} exited while starting "
                                   f"(log {n.log_path}):\n{tail}")
            if not all(listening(n.port) for n in live):
                return False
            try:
                md = admin.list_topics(timeout=2)
            except Exception:
                return False
            return len(md.brokers) >= len(live)

        wait_until(ready, timeout, f"Kafka {self.version} ({len(live)} node(s)) to be ready")

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

    def _speaks(self, wanted: dict) -> bool:
        """Whether clients with these security settings (KAFKA_LAB_CLIENT_PROPERTIES) can use this cluster."""
        protocol = wanted.get("security.protocol", "PLAINTEXT").upper()
        users = getattr(self, "sasl_users", None)
        if not users:
            return protocol == "PLAINTEXT"
        credentials = connection.sasl_credentials(wanted)
        return (protocol == "SASL_PLAINTEXT" and wanted.get("sasl.mechanism", "").upper() == SCRAM
                and credentials is not None and users.get(credentials[0]) == credentials[1])

    # -------------------------------------------------------------- security
    @property
    def security_protocol(self) -> str:
        return "SASL_PLAINTEXT" if getattr(self, "sasl_users", None) else "PLAINTEXT"

    def client_security(self, user: str | None = None) -> dict:
        """Java-style security settings for `user` (default: the broker's own super user); {} when plaintext."""
        if not getattr(self, "sasl_users", None):
            return {}
        password = self._broker_password if user in (None, BROKER_USER) else self.sasl_users.get(user)
        if password is None:
            raise LabError(f"No SASL user {user!r} on this cluster; its users are {sorted(self.sasl_users)}.")
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": SCRAM,
                "sasl.jaas.config": connection.jaas_config(SCRAM, user or BROKER_USER, password)}

    def client_properties_file(self, user: str, folder: Path | None = None) -> Path:
        """A Java-style client properties file (0600) for `user`: point KAFKA_LAB_CLIENT_PROPERTIES at it."""
        if not getattr(self, "sasl_users", None):
            raise LabError("This cluster is plaintext: clients need no properties file (sasl_users makes a SASL one).")
        props = self.client_security(user)
        return connection.write_properties(Path(folder or self.folder) / f"client-{user}.properties", props)

    def allow_all(self, user: str) -> None:
        """ACLs letting `user` do anything on every topic, group, transactional id and the cluster (acls=True)."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                           ResourceType)
        bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*",
                               AclOperation.ALL, AclPermissionType.ALLOW)
                    for kind, name in [(ResourceType.TOPIC, "*"), (ResourceType.GROUP, "*"),
                                       (ResourceType.TRANSACTIONAL_ID, "*"), (ResourceType.BROKER, "kafka-cluster")]]
        admin = self.admin()   # kept alive until the futures resolve
        for future in admin.create_acls(bindings, request_timeout=15).values():
            future.result()

    def _scram_args(self) -> list[str]:
        if not getattr(self, "sasl_users", None):
            return []
        users = {BROKER_USER: self._broker_password, **self.sasl_users}
        return [arg for u, pw in users.items() for arg in ("--add-scram", f"{SCRAM}=[name={u},password={pw}]")]

    def _scrub(self, text: str) -> str:
        for pw in [*(getattr(self, "sasl_users", None) or {}).values(), getattr(self, "_broker_password", None)]:
            text = text.replace(pw, "***") if pw else text
        return text

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
        md = self.admin().list_topics(topic, timeout=10)
        return md.topics[topic].partitions[partition].leader

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
            (node.folder / "log4j2.properties").write_text(LOG4J2)
        else:
            (node.folder / "log4j.properties").write_text(LOG4J1)

    def _sasl_broker_config(self, node: Node) -> dict:
        """SASL_PLAINTEXT/SCRAM for clients and inter-broker traffic; the CONTROLLER listener stays PLAINTEXT."""
        if not getattr(self, "sasl_users", None):
            return {}
        config = {
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{node.port}",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM,
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            f"listener.name.sasl_plaintext.{SCRAM.lower()}.sasl.jaas.config":
                connection.jaas_config(SCRAM, BROKER_USER, self._broker_password),
        }
        if self.acls:
            # Brokers reach the controllers over the PLAINTEXT CONTROLLER listener (127.0.0.1 only) as ANONYMOUS.
            config.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "super.users": f"User:{BROKER_USER};User:ANONYMOUS"})
        return config

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
            # UTC: lab.experiment.evidence reads every log stamp as UTC.
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


LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{ISO8601}] %p %m (%c{1})%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.metadata.name = org.apache.kafka.image
logger.metadata.level = WARN
"""

LOG4J1 = """log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d{ISO8601}] %p %m (%c{1})%n
log4j.logger.org.apache.kafka.raft=WARN
log4j.logger.org.apache.kafka.image=WARN
"""
