"""SASL and ACLs on the embedded KRaft cluster: SCRAM-SHA-256 users it is formatted with, the broker's own super
user (new credentials for every cluster), client settings and properties files for a user, ACLs, and the
SASL_PLAINTEXT listeners of the nodes, or SASL_SSL ones (tls=True) with a CA and a server certificate made for
the cluster at start (PEM files in its folder, never kept anywhere else). SaslSecurity is a mixin of
lab.cluster.kraft.KafkaCluster (KAFKA_LAB_CLIENT_PROPERTIES on the embedded cluster, tests/test_security.py).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
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
TLS_DIR = "tls"                  # under the cluster's folder: ca.pem, server.pem (chain), server-key.pem (0600)
CERT_DAYS = 30


def _private_key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())   # P-256: quick to make, read by the JDK and OpenSSL alike


def _certificate(subject: str, key, issuer=None, issuer_key=None, *, ca: bool, hosts: tuple[str, ...] = ()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    public = key.public_key()
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer is not None else name)
               .public_key(public).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        names = [_host_name(h) for h in hosts]
        builder = (builder
                   .add_extension(x509.SubjectAlternativeName(names), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                  critical=False))
    return builder.sign(issuer_key if issuer_key is not None else key, hashes.SHA256())


def _host_name(host: str):
    from cryptography import x509
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding
    return cert.public_bytes(Encoding.PEM)


def _write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    return path


def make_ca(folder: Path, name: str = "kafka-lab CA"):
    """A new CA: its certificate as `folder`/ca.pem (what a client's ssl.truststore.location names); returns
    (path, certificate, private key). The key stays in memory: nothing outside this run can sign with it."""
    key = _private_key()
    cert = _certificate(f"{name} {uuid.uuid4().hex[:8]}", key, ca=True)
    return _write(Path(folder) / "ca.pem", _pem(cert)), cert, key


def make_certificates(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> dict[str, Path]:
    """A CA and a server certificate it signs for `hosts` (subjectAltName), as PEM files in `folder`:
    ca.pem, server.pem (the server's certificate, then the CA's) and server-key.pem (PKCS#8, unencrypted, 0600)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    folder = Path(folder)
    ca_path, ca_cert, ca_key = make_ca(folder)
    key = _private_key()
    cert = _certificate(hosts[0], key, ca_cert, ca_key, ca=False, hosts=hosts)
    return {"ca": ca_path,
            "chain": _write(folder / "server.pem", _pem(cert) + _pem(ca_cert)),
            "key": _write(folder / "server-key.pem",
                          key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()), 0o600)}


def _inline(pem: str) -> str:
    """A PEM text as one server.properties value (Java's properties reader turns each \\n back into a newline)."""
    return pem.strip().replace("\r", "").replace("\n", "\\n")


class SaslSecurity:
    """The security side of KafkaCluster (its sasl_users, acls, tls, extra_listener, folder)."""

    def _check_security(self) -> None:
        if self.tls and not self.sasl_users:
            raise LabError("tls=True needs sasl_users: the embedded cluster's TLS listener speaks SASL_SSL "
                           "(SCRAM-SHA-256 over TLS), so it needs users to log in.")
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
        return (protocol == self.security_protocol and wanted.get("sasl.mechanism", "").upper() == SCRAM
                and credentials is not None and users.get(credentials[0]) == credentials[1]
                and (not self.tls or self._trusts(wanted.get("ssl.truststore.location"))))

    def _trusts(self, location: str | None) -> bool:
        """Whether a truststore (PEM) holds this cluster's CA (made at start: before that, no file trusts it)."""
        try:
            return bool(location) and self.ca_file.read_bytes().strip() in Path(location).expanduser().read_bytes()
        except OSError:
            return False

    @property
    def ca_file(self) -> Path | None:
        """The PEM file of the CA that signed the nodes' certificates (tls=True), for ssl.truststore.location."""
        return Path(self.folder) / TLS_DIR / "ca.pem" if getattr(self, "tls", False) else None

    @property
    def security_protocol(self) -> str:
        if not getattr(self, "sasl_users", None):
            return "PLAINTEXT"
        return "SASL_SSL" if getattr(self, "tls", False) else "SASL_PLAINTEXT"

    def _make_certificates(self) -> None:
        """tls=True: a CA and the nodes' certificate (127.0.0.1, localhost), once per cluster (restarts keep them)."""
        if not getattr(self, "tls", False):
            return
        folder = Path(self.folder) / TLS_DIR
        self._tls_files = {"ca": folder / "ca.pem", "chain": folder / "server.pem", "key": folder / "server-key.pem"}
        if not all(path.exists() for path in self._tls_files.values()):
            make_certificates(folder)

    def client_security(self, user: str | None = None) -> dict:
        """Java-style security settings for `user` (default: the broker's own super user); {} when plaintext."""
        if not getattr(self, "sasl_users", None):
            return {}
        password = self._broker_password if user in (None, BROKER_USER) else self.sasl_users.get(user)
        if password is None:
            raise LabError(f"No SASL user {user!r} on this cluster; its users are {sorted(self.sasl_users)}.")
        settings = {"security.protocol": self.security_protocol, "sasl.mechanism": SCRAM,
                    "sasl.jaas.config": connection.jaas_config(SCRAM, user or BROKER_USER, password)}
        if self.tls:
            settings.update({"ssl.truststore.location": str(self.ca_file), "ssl.truststore.type": "PEM"})
        return settings

    def client_properties_file(self, user: str, folder: Path | None = None) -> Path:
        """A Java-style client properties file (0600) for `user`: point KAFKA_LAB_CLIENT_PROPERTIES at it."""
        if not getattr(self, "sasl_users", None):
            raise LabError("This cluster is plaintext: clients need no properties file (sasl_users makes a SASL one).")
        props = self.client_security(user)
        return connection.write_properties(Path(folder or self.folder) / f"client-{user}.properties", props)

    def allow_all(self, user: str) -> None:
        """ACLs letting `user` do anything on every topic, group, transactional id and the cluster (acls=True)."""
        self.allow(user, {kind: ["ALL"] for kind in ("TOPIC", "GROUP", "TRANSACTIONAL_ID", "BROKER")})

    def allow(self, user: str, operations: dict[str, list[str]]) -> None:
        """ACLs letting `user` do `operations` (resource type -> operation names, confluent_kafka's: "DESCRIBE",
        "DESCRIBE_CONFIGS", "READ", "ALL", ...) on every resource of that type; BROKER is the cluster."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                           ResourceType)
        bindings = [AclBinding(ResourceType[kind], "kafka-cluster" if kind == "BROKER" else "*",
                               ResourcePatternType.LITERAL, f"User:{user}", "*", AclOperation[op],
                               AclPermissionType.ALLOW)
                    for kind, ops in operations.items() for op in ops]
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
        """SASL_PLAINTEXT (or SASL_SSL with tls=True)/SCRAM for clients and inter-broker traffic, on one listener
        named after its protocol; the CONTROLLER listener stays PLAINTEXT (127.0.0.1 only)."""
        if not getattr(self, "sasl_users", None):
            return {}
        listener = self.security_protocol   # SASL_PLAINTEXT or SASL_SSL
        prefix = f"listener.name.{listener.lower()}."
        config = {
            "listeners": f"{listener}://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"{listener}://127.0.0.1:{node.port}",
            "inter.broker.listener.name": listener,
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM,
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            f"{prefix}{SCRAM.lower()}.sasl.jaas.config":
                connection.jaas_config(SCRAM, BROKER_USER, self._broker_password),
        }
        if self.tls:
            # PEM in the config itself: older Kafka (3.2 still) reads a PEM keystore *file* only with an encrypted
            # key and ssl.key.password; these two names take an unencrypted PKCS#8 key in every version since 2.7
            # (KIP-651). server.properties is 0600 like every SASL cluster's (it holds the broker's password).
            # The truststore serves the broker as a client of the other nodes (inter-broker, hostname checked).
            files = self._tls_files
            config.update({
                f"{prefix}ssl.keystore.type": "PEM",
                f"{prefix}ssl.keystore.certificate.chain": _inline(files["chain"].read_text()),
                f"{prefix}ssl.keystore.key": _inline(files["key"].read_text()),
                f"{prefix}ssl.truststore.type": "PEM",
                f"{prefix}ssl.truststore.location": str(files["ca"]),
            })
        if self.acls:
            # Brokers reach the controllers over the PLAINTEXT CONTROLLER listener (127.0.0.1 only) as ANONYMOUS.
            config.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                           "super.users": f"User:{BROKER_USER};User:ANONYMOUS"})
        return config
