"""SASL and ACLs on the embedded KRaft cluster: SCRAM-SHA-256 users it is formatted with, the broker's own super
user (new credentials for every cluster), client settings and properties files for a user, ACLs, and the
SASL_PLAINTEXT listeners of the nodes. SaslSecurity is a mixin of lab.cluster.kraft.KafkaCluster
(KAFKA_LAB_CLIENT_PROPERTIES on the embedded cluster, tests/test_security.py).
"""
from __future__ import annotations

import re
import uuid
from pathlib import Path

from .. import connection
from ..errors import LabError
from .kraft_node import Node

SCRAM = "SCRAM-SHA-256"
BROKER_USER = "lab-broker"   # the embedded SASL cluster's inter-broker (and super) user
# Credentials go into `--add-scram NAME=[name=...,password=...]`: keep them to characters that need no quoting.
PLAIN_CREDENTIAL = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
LISTENER_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,30}")


class SaslSecurity:
    """The security side of KafkaCluster (its sasl_users, acls, extra_listener, folder)."""

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

    def _speaks(self, wanted: dict) -> bool:
        """Whether clients with these security settings (KAFKA_LAB_CLIENT_PROPERTIES) can use this cluster."""
        protocol = wanted.get("security.protocol", "PLAINTEXT").upper()
        users = getattr(self, "sasl_users", None)
        if not users:
            return protocol == "PLAINTEXT"
        credentials = connection.sasl_credentials(wanted)
        return (protocol == "SASL_PLAINTEXT" and wanted.get("sasl.mechanism", "").upper() == SCRAM
                and credentials is not None and users.get(credentials[0]) == credentials[1])

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
