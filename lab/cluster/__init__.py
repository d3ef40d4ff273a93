"""A real Apache Kafka cluster for a scenario: embedded (default) or external.

- kraft.KafkaCluster              KRaft combined-mode nodes (3.3+) from Maven Central jars
  (its nodes in kraft_node, SASL and ACLs in kraft_security)
- broker_config                   a version's classpath and broker config names, the base config, log4j files
- zookeeper.ZooKeeperKafkaCluster ZooKeeper-era brokers (2.0 - 3.2) for failures only old brokers show
- external.ExternalCluster        KAFKA_LAB_BOOTSTRAP: the Compose broker (or a cluster the user named writable)

Every cluster says what it can do: `owns_broker` (kill, restart, logs, quotas, static
configs), `running`, and `fits(nodes, version, broker_config[, extra_listener])`.
"""
from __future__ import annotations

import os

import importlib

from ..config import BOOTSTRAP_ENV, CLIENT_PROPERTIES_ENV, KAFKA_VERSION
from ..errors import LabError
from ..runtime.versions import is_zookeeper_version, parse_version

# The launchers load on first use: importing the factory starts no JVM and reads no jar.
_LAZY = {"KafkaCluster": "kraft", "BASE_BROKER_CONFIG": "broker_config", "kafka_classpath": "broker_config",
         "known_broker_configs": "broker_config", "ZooKeeperKafkaCluster": "zookeeper", "zookeeper_for": "zookeeper",
         "ExternalCluster": "external"}
__all__ = ["kafka_cluster", "parse_version", "is_zookeeper_version", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kafka_cluster(nodes: int = 1, version: str = KAFKA_VERSION, broker_config: dict | None = None,
                  name: str = "cluster", jmx: bool = False, **kwargs):
    """The one factory: external when KAFKA_LAB_BOOTSTRAP is set, else an embedded cluster of the
    right era for `version` (KRaft from 3.3, ZooKeeper before). Not started: call start().

    An external cluster cannot take static broker configs: asking for ones it lacks is an error.
    `jmx=True`: an embedded KRaft cluster with its brokers' JMX on 127.0.0.1 (the client versions they see, KIP-511),
    on a free port, even when KAFKA_LAB_BOOTSTRAP is set: a lesson that reads JMX builds its risks on a broker of
    its own, never in the cluster that variable names.
    """
    bootstrap = None if jmx else os.environ.get(BOOTSTRAP_ENV)
    if bootstrap:
        from .external import ExternalCluster
        wants = [what for what, asked in ((f"{nodes} brokers", nodes > 1), (f"a Kafka {version} broker",
                 version != KAFKA_VERSION), ("a second listener", kwargs.get("extra_listener"))) if asked]
        if wants:   # the Compose broker is one 4.3.1 node with one listener: never pretend it is more
            raise LabError(f"This needs {' and '.join(wants)}, which only the lab's own cluster gives: unset "
                           f"{BOOTSTRAP_ENV} ({bootstrap}) to run it there.")
        cluster = ExternalCluster(bootstrap)
        cluster.require_broker_config(broker_config or {})
        return cluster
    wanted = _embedded_security()
    if wanted and is_zookeeper_version(version):
        raise LabError(f"{CLIENT_PROPERTIES_ENV} asks for SASL, which the lab's ZooKeeper-era brokers do not "
                       f"speak: unset it for Kafka {version}.")
    if wanted and "sasl_users" not in kwargs:
        kwargs["sasl_users"] = wanted
    if jmx and is_zookeeper_version(version):
        raise LabError(f"JMX is for the lab's KRaft brokers (Kafka 3.3+), not Kafka {version}.")
    if jmx and not kwargs.get("jmx_port"):
        from ..runtime.ports import free_port
        kwargs["jmx_port"] = free_port()
    if is_zookeeper_version(version):
        from .zookeeper import ZooKeeperKafkaCluster as era
    else:
        from .kraft import KafkaCluster as era
    return era(nodes=nodes, version=version, broker_config=broker_config or {}, name=name, **kwargs)


def _embedded_security() -> dict:
    """With KAFKA_LAB_CLIENT_PROPERTIES set and no external cluster, the embedded cluster gets that file's user,
    so the same settings work on it (it speaks only PLAINTEXT or SASL_PLAINTEXT with SCRAM-SHA-256)."""
    from .. import connection
    props = connection.security_properties()
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return {}
    credentials = connection.sasl_credentials(props)
    if protocol != "SASL_PLAINTEXT" or props.get("sasl.mechanism", "").upper() != "SCRAM-SHA-256" or not credentials:
        raise LabError(f"The embedded broker speaks PLAINTEXT or SASL_PLAINTEXT with SCRAM-SHA-256, not "
                       f"security.protocol={protocol} sasl.mechanism={props.get('sasl.mechanism', '-')} from "
                       f"{connection.properties_file()} ({CLIENT_PROPERTIES_ENV}): unset {CLIENT_PROPERTIES_ENV} to run "
                       f"the lessons on the lab's own broker.")
    return {credentials[0]: credentials[1]}
