"""How the lab reaches a secured cluster: the ONE place that knows security settings.

KAFKA_LAB_CLIENT_PROPERTIES names a Java-style client properties file (key=value, `#`/`!` comments).
Only security keys are accepted; every client the lab builds (confluent-kafka in the kernel and in its
Python apps, Java tools and programs, Spark's Kafka source) gets them from here, translated to its own
names. Secrets never appear in a message: show settings through `redacted()`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import javaproperties

from .config import CLIENT_PROPERTIES_ENV
from .errors import LabError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Java names; PEM files only, because librdkafka cannot read a JKS or PKCS12 store.
SSL_KEYS = ("ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.type",
            "ssl.key.password", "ssl.endpoint.identification.algorithm")
ACCEPTED = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password", *SSL_KEYS)
SECRET_KEYS = ("sasl.jaas.config", "sasl.password", "ssl.key.password", "sasl.username.password")
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def properties_file() -> Path | None:
    value = os.environ.get(CLIENT_PROPERTIES_ENV, "").strip()
    return Path(value).expanduser() if value else None


def security_properties() -> dict[str, str]:
    """The Java-style security settings of KAFKA_LAB_CLIENT_PROPERTIES (empty when it is unset), checked."""
    path = properties_file()
    if path is None:
        return {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"Cannot read the client properties file {path} ({CLIENT_PROPERTIES_ENV}): "
                       f"{type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) else 'not text'}.") from None
    props = parse_properties(text)
    _check(props, path)
    return props


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties text, read as Java reads it (javaproperties: separators, comments, continuations,
    `\\uXXXX` escapes)."""
    return javaproperties.loads(text)


def _check(props: dict, path: Path) -> None:
    unknown = [k for k in props if k not in ACCEPTED]
    if unknown:
        raise LabError(f"The client properties file {path} ({CLIENT_PROPERTIES_ENV}) has the key "
                       f"{unknown[0]!r}, which the lab does not apply: it accepts only the security keys "
                       f"{', '.join(ACCEPTED)} (SSL stores as PEM files).")
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise LabError(f"security.protocol={protocol} in {path}: use one of {', '.join(PROTOCOLS)}.")
    if protocol.startswith("SASL"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in MECHANISMS:
            raise LabError(f"sasl.mechanism={mechanism} in {path}: the lab supports {', '.join(MECHANISMS)}.")
        has_pair = "sasl.username" in props or "sasl.password" in props
        if has_pair and "sasl.jaas.config" in props:
            raise LabError(f"{path} has both sasl.jaas.config and sasl.username/sasl.password: keep one.")
        if has_pair and not ("sasl.username" in props and "sasl.password" in props):
            raise LabError(f"{path} needs both sasl.username and sasl.password.")
        if not has_pair and _jaas_credentials(props.get("sasl.jaas.config", "")) is None:
            raise LabError(f"{path} sets {protocol} but no credentials: add sasl.username and sasl.password "
                           f"(or a sasl.jaas.config with username=\"...\" password=\"...\").")
    for kind in ("truststore", "keystore"):
        store_type = props.get(f"ssl.{kind}.type", "PEM").upper()
        location = props.get(f"ssl.{kind}.location")
        if store_type != "PEM":
            raise LabError(f"ssl.{kind}.type={store_type} in {path}: the lab's Python clients (librdkafka) cannot "
                           f"read JKS or PKCS12 stores; give PEM files (e.g. `keytool -exportcert -rfc`, "
                           f"`openssl pkcs12 -nodes`) and ssl.{kind}.type=PEM.")
        if location:
            try:
                head = Path(location).expanduser().read_bytes()[:4096]
            except OSError as exc:
                raise LabError(f"ssl.{kind}.location in {path}: cannot read {location} ({exc.strerror}).") from None
            if b"-----BEGIN" not in head:
                raise LabError(f"ssl.{kind}.location={location} in {path} is not a PEM file (a JKS or PKCS12 "
                               f"store?): librdkafka cannot read those; convert it to PEM.")


def _jaas_credentials(jaas: str) -> tuple[str, str] | None:
    """(username, password) out of a PLAIN/SCRAM jaas config, or None."""
    # a JAAS quoted string escapes " and \ with a backslash
    found = {k: re.sub(r"\\(.)", r"\1", v)
             for k, v in re.findall(r'\b(username|password)\s*=\s*"((?:\\.|[^"\\])*)"', jaas)}
    return (found["username"], found["password"]) if {"username", "password"} <= set(found) else None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_config(mechanism: str, username: str, password: str) -> str:
    return f"{LOGIN_MODULES[mechanism.upper()]} required username={_quote(username)} password={_quote(password)};"


def _java_security(props: dict[str, str]) -> dict[str, str]:
    """Security settings as the Java clients name them (sasl.username/password turned into a jaas config)."""
    java = {k: v for k, v in props.items() if k not in ("sasl.username", "sasl.password")}
    if "sasl.username" in props:
        java["sasl.jaas.config"] = jaas_config(props.get("sasl.mechanism", "PLAIN"), props["sasl.username"],
                                               props["sasl.password"])
    for kind in ("truststore", "keystore"):
        if f"ssl.{kind}.location" in java:
            java[f"ssl.{kind}.type"] = "PEM"   # Java's default type is JKS
    return java


def _librdkafka_security(props: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if "security.protocol" in props:
        out["security.protocol"] = props["security.protocol"].lower()
    if "sasl.mechanism" in props:
        out["sasl.mechanisms"] = props["sasl.mechanism"].upper()
    credentials = ((props["sasl.username"], props["sasl.password"]) if "sasl.username" in props
                   else _jaas_credentials(props.get("sasl.jaas.config", "")))
    if credentials:
        out["sasl.username"], out["sasl.password"] = credentials
    if "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:   # one PEM file with the certificate chain and the private key
        out["ssl.certificate.location"] = out["ssl.key.location"] = props["ssl.keystore.location"]
    if "ssl.key.password" in props:
        out["ssl.key.password"] = props["ssl.key.password"]
    if "ssl.endpoint.identification.algorithm" in props:   # Java's "" means off; librdkafka says "none"
        out["ssl.endpoint.identification.algorithm"] = props["ssl.endpoint.identification.algorithm"] or "none"
    return out


def _security(security: dict | None) -> dict[str, str]:
    return security_properties() if security is None else dict(security)


def kafka_config(bootstrap: str, settings: dict | None = None, *, security: dict | None = None) -> dict:
    """A confluent-kafka config: bootstrap.servers, the security settings in librdkafka's names, then `settings`.

    `security` (Java-style, like security_properties()) replaces the file's, e.g. for the embedded
    cluster's own broker user; None means KAFKA_LAB_CLIENT_PROPERTIES.
    """
    return {"bootstrap.servers": bootstrap, **_librdkafka_security(_security(security)), **(settings or {})}


def java_security(security: dict | None = None) -> dict[str, str]:
    """The security settings as Java client properties (no bootstrap): merge them into a program's properties."""
    return _java_security(_security(security))


def java_properties(bootstrap: str, *, security: dict | None = None) -> dict:
    """Java client properties: bootstrap.servers and the security settings in Java's names."""
    return {"bootstrap.servers": bootstrap, **java_security(security)}


def write_properties(path: Path, props: dict) -> Path:
    """A Java .properties file readable only by its owner (it may hold a password)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(javaproperties.dumps({str(k): str(v) for k, v in props.items()}, timestamp=False))
    os.chmod(path, 0o600)   # O_CREAT's mode does not apply to a file that already existed
    return path


def command_config(folder: Path, *, security: dict | None = None) -> Path | None:
    """The security settings in a 0600 file in `folder` for a Java tool's --command-config; None when there are none."""
    java = java_security(security)
    return write_properties(Path(folder) / "client-security.properties", java) if java else None


def spark_kafka_options(bootstrap: str, *, security: dict | None = None) -> dict:
    """`kafka.`-prefixed options for Spark's Kafka source (its clients are Java clients)."""
    return {f"kafka.{k}": v for k, v in java_properties(bootstrap, security=security).items()}


def redacted(props: dict) -> dict:
    """The settings with passwords and jaas configs replaced by "***": for any message that shows them."""
    return {k: "***" if k in SECRET_KEYS or "password" in k or k.endswith("jaas.config") else v
            for k, v in props.items()}


def _secrets(security: dict | None = None) -> list[str]:
    try:
        props = _security(security)
    except LabError:
        return []
    found = [v for k, v in props.items() if k in SECRET_KEYS or "password" in k]
    credentials = _jaas_credentials(props.get("sasl.jaas.config", ""))
    return [s for s in [*found, *(credentials[1:] if credentials else [])] if s]


def scrub(text: str, security: dict | None = None) -> str:
    """`text` with every secret of the security settings replaced by ***."""
    for secret in sorted(_secrets(security), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def sasl_credentials(props: dict) -> tuple[str, str] | None:
    """(username, password) of Java-style security settings (sasl.username/password or a jaas config), or None."""
    if "sasl.username" in props:
        return props["sasl.username"], props.get("sasl.password", "")
    return _jaas_credentials(props.get("sasl.jaas.config", ""))


def _user(props: dict) -> str | None:
    credentials = sasl_credentials(props)
    return credentials[0] if credentials else None


AUTHENTICATION = re.compile(r"authenticat|SASL|SSL handshake|certificate|_AUTHENTICATION|\bSSL\b", re.I)
AUTHORIZATION = re.compile(r"AUTHORIZATION_FAILED|not authorized|AuthorizationException|Authorization failed", re.I)
# A TLS failure (librdkafka's _SSL errors, Java's SslAuthenticationException / SSLHandshakeException / PKIX)...
TLS_FAILURE = re.compile(r"SSL handshake|SSLHandshake|SslAuthentication|\b_?SSL\b|\bTLS\b|certificate|PKIX|"
                         r"certification path", re.I)
# ... because the certificate does not name the address the client dialled ...
TLS_MISMATCH = re.compile(r"mismatch|No subject alternative names?|No name matching|doesn't match|does not match", re.I)
# ... or because no CA in the truststore signed it ...
TLS_UNTRUSTED = re.compile(r"certificate verify failed|could not be verified|PKIX|unable to find valid certification|"
                           r"unable to get (local )?issuer|self[- ]signed|unknown ca|untrusted", re.I)
# ... or because the listener does not speak TLS at all.
TLS_NOT_SPOKEN = re.compile(r"PLAINTEXT broker listener|Unrecognized SSL message|plaintext connection|"
                            r"wrong version number|packet length too long|record layer failure", re.I)
UNREACHABLE = re.compile(r"_TRANSPORT|ALL_BROKERS_DOWN|TIMED_OUT|timed out|Connection refused|resolve|"
                         r"Timeout|disconnect", re.I)


def explain_failure(step: str, bootstrap: str, exc, *, security: dict | None = None) -> LabError:
    """One clear line for a librdkafka or Java client failure: unreachable, authentication or authorization failed.

    `exc` is an exception, a KafkaError, a text, or a list of them (e.g. what an error_cb collected): the
    most telling one (authentication, then authorization, then the rest) names the cause.
    """
    try:
        props = _security(security)
        source = f"in {properties_file()}" if security is None and properties_file() else "in the client settings"
    except LabError as bad:
        return bad
    texts = [_text(e) for e in (exc if isinstance(exc, (list, tuple)) else [exc]) if e is not None]
    user = _user(props)
    who = f" as user {user}" if user else ""
    mechanism = props.get("sasl.mechanism", "").upper()
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    auth = next((t for t in texts if AUTHORIZATION.search(t)), None)
    authn = next((t for t in texts if AUTHENTICATION.search(t) and not AUTHORIZATION.search(t)), None)
    tls = next((t for t in texts if TLS_FAILURE.search(t)), None)
    if tls is not None and protocol in ("SSL", "SASL_SSL"):   # TLS comes first: SASL runs inside it
        cause = _tls_cause(texts, source)
    elif authn is not None and protocol != "PLAINTEXT":
        if protocol.startswith("SASL"):
            cause = (f"authentication failed ({mechanism or 'SASL'}): check sasl.username/sasl.password "
                     f"(or sasl.jaas.config) {source}")
        else:
            cause = f"the SSL handshake failed: check the ssl.* settings {source}"
    elif auth is not None:
        cause = (f"authorization failed: the user{' ' + user if user else ''} lacks an ACL for this "
                 f"(ask for one, e.g. kafka-acls --add --allow-principal User:{user or '...'})")
    elif authn is not None:
        cause = (f"the cluster wants authentication but the lab connects with PLAINTEXT: set "
                 f"{CLIENT_PROPERTIES_ENV} to a client properties file with its security settings")
    elif any(UNREACHABLE.search(t) for t in texts) or not texts:
        cause = (f"it does not answer (unreachable, or it speaks another security protocol than "
                 f"{protocol}): check the address and security.protocol")
    else:
        cause = texts[0].splitlines()[0][:300]
    return LabError(scrub(f"{step[:1].upper()}{step[1:]} at {bootstrap}{who}: {cause}.", security))


def _tls_cause(texts: list[str], source: str) -> str:
    def said(pattern) -> bool:
        return any(TLS_FAILURE.search(t) and pattern.search(t) for t in texts)

    if said(TLS_NOT_SPOKEN):
        return (f"the SSL handshake failed: the listener does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT one?): "
                f"check security.protocol {source}")
    if said(TLS_MISMATCH):
        return (f"the SSL handshake failed: the broker's certificate does not name this address "
                f"(its subjectAltName): connect by a name it has, or check ssl.endpoint.identification.algorithm "
                f"{source}")
    if said(TLS_UNTRUSTED):
        return (f"the SSL handshake failed: the broker's certificate is not trusted: ssl.truststore.location "
                f"{source} must be a PEM file with the CA that signed it")
    return (f"the SSL handshake failed: check ssl.truststore.location (the broker's CA, PEM) and the other "
            f"ssl.* settings {source}")


def _text(e) -> str:
    from confluent_kafka import KafkaError, KafkaException
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return f"{e.name()}: {e.str()}"
    return f"{type(e).__name__}: {e}" if isinstance(e, BaseException) else str(e)
