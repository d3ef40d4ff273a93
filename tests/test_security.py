"""Secured clusters: one client properties file (KAFKA_LAB_CLIENT_PROPERTIES) for every client the lab builds,
against real embedded SCRAM-SHA-256 clusters with ACLs: one SASL_PLAINTEXT, one SASL_SSL (TLS with a CA made
for the run), each started once for the module."""
import pytest
from cryptography import x509
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from lab.cluster import ExternalCluster, KafkaCluster, kafka_cluster
from lab.cluster.kraft_node import Node
from lab.cluster.kraft_security import make_ca, make_certificates
from lab.runtime.ports import free_port
from lab.config import BOOTSTRAP_ENV, CLIENT_PROPERTIES_ENV, KAFKA_VERSION, WRITABLE_CLUSTER_ENV
from lab.connection import (command_config, explain_failure, java_properties, kafka_config, parse_properties,
                            redacted, security_properties, spark_kafka_options)
from lab.errors import LabError
from lab.toolbox.consume import read_to_end
from lab.record.generator import generate
from lab.record.history import History
from lab.runtime.processes import wait_until
from lab.runtime.programs import JavaProgram

GOOD, WRONG, STRANGER = "pw-lab-7Qx", "pw-wrong-3Kd", "pw-stranger-9Zr"   # each must never reach a message


@pytest.fixture(scope="module", params=["SASL_PLAINTEXT", "SASL_SSL"])
def scram(request, tmp_path_factory):
    """One SCRAM cluster with ACLs per protocol (SASL_SSL: tls=True): user lab may do anything, user stranger
    nothing. Topic "secured" holds 30 records written through the lab's own generator with lab's properties file."""
    tls = request.param == "SASL_SSL"
    cluster = KafkaCluster(name="scram-tls" if tls else "scram", sasl_users={"lab": GOOD, "stranger": STRANGER},
                           acls=True, tls=tls)
    with cluster, pytest.MonkeyPatch.context() as env:
        cluster.allow_all("lab")
        env.setenv(CLIENT_PROPERTIES_ENV, str(cluster.client_properties_file("lab")))
        history = History(tmp_path_factory.mktemp("history"), "security")
        cluster.made = generate(cluster.bootstrap, "secured", 30, history, keys=3)
        env.undo()
        yield cluster


@pytest.fixture
def as_lab(scram, monkeypatch):
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(scram.client_properties_file("lab")))
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    return scram


def properties(tmp_path, text: str):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def login(cluster, password: str, truststore=None) -> str:
    """A client properties text for user lab on `cluster`'s protocol (SASL_SSL: trusting `truststore`, by default
    the cluster's own CA)."""
    text = (f"security.protocol={cluster.security_protocol}\nsasl.mechanism=SCRAM-SHA-256\n"
            f"sasl.username=lab\nsasl.password={password}\n")
    return text + (f"ssl.truststore.location={truststore or cluster.ca_file}\n" if cluster.tls else "")


# ------------------------------------------------------------------ the file (no broker)

def test_the_file_is_read_like_java_properties_and_translated_for_each_client(tmp_path, monkeypatch):
    path = properties(tmp_path, "# a comment\n! another\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism:PLAIN\n"
                                f"sasl.username=lab\nsasl.password={GOOD}\n")
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(path))
    assert security_properties()["security.protocol"] == "SASL_SSL"
    rd = kafka_config("h:1", {"linger.ms": 5})
    assert rd == {"bootstrap.servers": "h:1", "security.protocol": "sasl_ssl", "sasl.mechanisms": "PLAIN",
                  "sasl.username": "lab", "sasl.password": GOOD, "linger.ms": 5}
    java = java_properties("h:1")
    assert java["sasl.jaas.config"] == ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                        f'username="lab" password="{GOOD}";')
    assert "sasl.username" not in java and "sasl.password" not in java
    assert spark_kafka_options("h:1")["kafka.sasl.jaas.config"] == java["sasl.jaas.config"]
    assert GOOD not in repr(redacted(rd)) + repr(redacted(java))
    written = command_config(tmp_path)
    assert written.stat().st_mode & 0o777 == 0o600


def test_a_properties_file_round_trips_escapes_separators_and_non_ascii(tmp_path):
    """Written and read back as Java does: `\\u` escapes, `=` and `:` in keys and values, a continued line."""
    from lab.connection import write_properties
    props = {"sasl.password": "p=a:s s\\u00e9#!", "a:key=with seps": "café\nline two", "empty": ""}
    written = write_properties(tmp_path / "x.properties", props)
    assert parse_properties(written.read_text()) == props
    assert parse_properties("name = caf\\u00e9\nlong = one \\\n    two\nk\\:x:v=w\n") == {
        "name": "café", "long": "one two", "k:x": "v=w"}


def test_unset_means_plaintext(monkeypatch, tmp_path):
    monkeypatch.delenv(CLIENT_PROPERTIES_ENV, raising=False)
    assert security_properties() == {} and command_config(tmp_path) is None
    assert kafka_config("h:1") == {"bootstrap.servers": "h:1"}


@pytest.mark.parametrize("text, words", [
    ("security.protocol=SASL_PLAINTEXT\nbatch.size=5\n", ["'batch.size'", "client.properties", "sasl.jaas.config"]),
    ("security.protocol=SSL\nssl.truststore.location=/etc/x.jks\nssl.truststore.type=JKS\n", ["JKS", "librdkafka"]),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n", ["GSSAPI"]),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", ["no credentials"]),
])
def test_bad_files_give_one_clear_error(tmp_path, monkeypatch, text, words):
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, text)))
    with pytest.raises(LabError) as caught:
        kafka_config("h:1")
    assert all(w in str(caught.value) for w in words), str(caught.value)


def test_a_missing_file_is_one_error(tmp_path, monkeypatch):
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(tmp_path / "nowhere.properties"))
    with pytest.raises(LabError, match="Cannot read the client properties file .*nowhere.properties"):
        security_properties()


def test_an_unknown_key_is_refused_before_any_connection(tmp_path, monkeypatch):
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, f"sasl.password={GOOD}\nacks=all\n")))
    monkeypatch.setenv(BOOTSTRAP_ENV, f"127.0.0.1:{free_port()}")   # nothing listens: a connection would time out
    with pytest.raises(LabError) as caught:
        kafka_cluster()
    assert "'acks'" in str(caught.value) and "does not answer" not in str(caught.value)
    assert GOOD not in str(caught.value)


def test_tls_needs_sasl_users():
    with pytest.raises(LabError, match="tls=True needs sasl_users"):
        KafkaCluster(name="tls", tls=True)


def test_the_certificates_name_the_host_and_chain_to_their_ca(tmp_path):
    files = make_certificates(tmp_path)
    ca = x509.load_pem_x509_certificate(files["ca"].read_bytes())
    server, issuer = x509.load_pem_x509_certificates(files["chain"].read_bytes())
    assert issuer == ca and server.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert files["key"].stat().st_mode & 0o777 == 0o600 and b"BEGIN PRIVATE KEY" in files["key"].read_bytes()
    assert make_ca(tmp_path / "other")[0].read_bytes() != files["ca"].read_bytes()   # a fresh CA every time


def test_a_tls_node_config_holds_the_pem_the_broker_reads(tmp_path, monkeypatch):
    cluster = KafkaCluster(name="tls", sasl_users={"lab": GOOD}, acls=True, tls=True, folder=tmp_path)
    assert cluster.security_protocol == "SASL_SSL"
    other_ca = make_ca(tmp_path / "other")[0]
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, login(cluster, GOOD, other_ca))))
    assert not cluster.fits(1, KAFKA_VERSION, {})   # no CA of its own yet: nothing trusts the cluster
    cluster._make_certificates()
    assert not cluster.fits(1, KAFKA_VERSION, {})   # another CA
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, login(cluster, GOOD))))
    assert cluster.fits(1, KAFKA_VERSION, {})       # the file's truststore is the cluster's CA
    node = Node(1, 9092, 9093, tmp_path / "node-1")
    cluster._nodes = [node]
    cluster._write_config(node)
    path = node.folder / "server.properties"
    config = parse_properties(path.read_text())   # read as Java reads it: each \n a newline again
    assert path.stat().st_mode & 0o777 == 0o600
    assert config["listeners"] == "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert config["inter.broker.listener.name"] == "SASL_SSL"
    assert config["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    tls_dir = tmp_path / "tls"
    assert config["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert config["listener.name.sasl_ssl.ssl.keystore.key"] == (tls_dir / "server-key.pem").read_text().strip()
    assert config["listener.name.sasl_ssl.ssl.keystore.certificate.chain"] == \
        (tls_dir / "server.pem").read_text().strip()
    assert config["listener.name.sasl_ssl.ssl.truststore.location"] == str(cluster.ca_file)
    assert "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config" in config
    settings = cluster.client_security("lab")
    assert settings["security.protocol"] == "SASL_SSL" and settings["ssl.truststore.location"] == str(cluster.ca_file)


@pytest.mark.parametrize("text, words", [
    ("_SSL: ssl://127.0.0.1:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
     "failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured",
     ["not trusted", "ssl.truststore.location"]),
    ("SslAuthenticationException: SSL handshake failed; SSLHandshakeException: PKIX path building failed",
     ["not trusted"]),
    ("_SSL: ssl://127.0.0.1:1/bootstrap: SSL handshake failed: Disconnected: connecting to a PLAINTEXT broker "
     "listener?", ["does not speak TLS", "security.protocol"]),
    ("SSLHandshakeException: No subject alternative names matching IP address 127.0.0.1 found", ["does not name"]),
    ("_AUTHENTICATION: sasl_ssl://127.0.0.1:1/bootstrap: SASL authentication error: Authentication failed during "
     "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256",
     ["authentication failed (SCRAM-SHA-256)"]),
], ids=["untrusted-librdkafka", "untrusted-java", "not-tls", "not-this-address", "sasl-inside-tls"])
def test_tls_failures_are_told_apart_from_sasl_ones(text, words):
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "lab",
                "sasl.password": GOOD}
    message = str(explain_failure("listing topics", "127.0.0.1:1", [text, "_ALL_BROKERS_DOWN: 1/1 brokers are down"],
                                  security=security))
    assert all(w in message for w in words) and "\n" not in message and GOOD not in message, message


# ------------------------------------------------------------------ a real SCRAM cluster per protocol

def test_lab_helpers_produce_and_read_over_scram(as_lab):
    assert as_lab.made.produced == 30 and as_lab.made.failed == 0
    assert len(read_to_end(as_lab.bootstrap, "secured")) == 30
    settings = security_properties()
    assert settings["security.protocol"] == as_lab.security_protocol
    if as_lab.tls:
        assert settings["ssl.truststore.location"] == str(as_lab.ca_file)
        assert kafka_config(as_lab.bootstrap)["ssl.ca.location"] == str(as_lab.ca_file)


def test_the_external_cluster_check_passes_with_the_file(as_lab, monkeypatch):
    monkeypatch.setenv(BOOTSTRAP_ENV, as_lab.bootstrap)
    monkeypatch.setenv(WRITABLE_CLUSTER_ENV, as_lab.cluster_id)
    external = kafka_cluster()
    assert isinstance(external, ExternalCluster) and external.node_ids == [1]
    assert "secured" in external.admin().list_topics(timeout=10).topics


def test_spark_reads_the_secured_topic(as_lab):
    from lab.audit.spark import read_topic
    rows = read_topic(as_lab.bootstrap, "secured").collect()
    assert len(rows) == 30 and {r.key for r in rows} == {"k0", "k1", "k2"}


def test_java_tools_use_the_file(as_lab, tmp_path):
    secured = command_config(tmp_path)
    out = as_lab._java_output("kafka.admin.ConfigCommand", ["--bootstrap-server", as_lab.bootstrap, "--command-config",
                                                            str(secured), "--describe", "--entity-type", "topics",
                                                            "--entity-name", "secured"])
    assert "secured" in out
    as_lab.set_quota("secured-client", producer_byte_rate=1000)   # the cluster's own ConfigCommand, as its broker user
    assert as_lab.quotas("secured-client") == {"producer_byte_rate": 1000.0}


def test_java_programs_get_the_file(as_lab, tmp_path):
    program = JavaProgram("secured-java", KAFKA_VERSION, "IdleTransactionalProducer",
                          ["IdleTransactionalProducer.java", "Lab.java"],
                          properties={"bootstrap.servers": as_lab.bootstrap, "transactional.id": "secured-java",
                                      "lab.topic": "secured-java", "lab.go.file": str(tmp_path / "go"),
                                      "lab.id.prefix": "java"}, folder=tmp_path, streams=False, heap="128m")
    program.start()
    try:
        wait_until(lambda: read_to_end(as_lab.bootstrap, "secured-java", timeout=2), 90,
                   "a committed record from the Java program", child=program.process)
    finally:
        program.stop()
    written = tmp_path / "secured-java.properties"
    assert written.stat().st_mode & 0o777 == 0o600 and "ScramLoginModule" in written.read_text()
    java = parse_properties(written.read_text())
    assert java["security.protocol"] == as_lab.security_protocol
    if as_lab.tls:
        assert java["ssl.truststore.location"] == str(as_lab.ca_file) and java["ssl.truststore.type"] == "PEM"


def refusal(cluster, path, monkeypatch) -> str:
    """The one-line LabError kafka_cluster() gives with this properties file: it names the step and the user."""
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(path))
    monkeypatch.setenv(BOOTSTRAP_ENV, cluster.bootstrap)
    with pytest.raises(LabError) as caught:
        kafka_cluster()
    message = str(caught.value)
    assert "listing topics" in message.lower() and "as user lab" in message and "\n" not in message
    return message


def test_a_wrong_password_names_the_step_and_hides_the_password(scram, tmp_path, monkeypatch):
    path = properties(tmp_path, login(scram, WRONG))
    message = refusal(scram, path, monkeypatch)
    assert "authentication failed (SCRAM-SHA-256)" in message and str(path) in message
    assert WRONG not in message and GOOD not in message
    print(message)


def test_a_tls_client_that_cannot_trust_the_listener_names_the_step(scram, tmp_path, monkeypatch):
    """SASL_SSL: the right password, but a truststore with another, freshly made CA. SASL_PLAINTEXT: a TLS
    client at a listener that does not speak TLS."""
    stranger_ca, _, _ = make_ca(tmp_path / "another-ca")
    text = login(scram, GOOD, stranger_ca).replace("SASL_PLAINTEXT", "SASL_SSL")
    if not scram.tls:
        text += f"ssl.truststore.location={stranger_ca}\n"
    path = properties(tmp_path, text)
    message = refusal(scram, path, monkeypatch)
    cause = "the broker's certificate is not trusted" if scram.tls else "the listener does not speak TLS"
    assert "SSL handshake failed" in message and cause in message and str(path) in message, message
    assert GOOD not in message
    print(message)


def test_a_user_without_acls_gets_authorization_failed(scram, monkeypatch):
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(scram.client_properties_file("stranger")))
    admin = AdminClient(kafka_config(scram.bootstrap, {"log_level": 0}))
    with pytest.raises(KafkaException) as caught:
        admin.create_topics([NewTopic("not-yours", 1, 1)], request_timeout=15)["not-yours"].result()
    message = str(explain_failure("creating topic not-yours", scram.bootstrap, caught.value))
    assert "authorization failed" in message and "stranger" in message and STRANGER not in message
    print(message)


def test_a_plaintext_client_is_told_the_cluster_wants_authentication(scram, monkeypatch):
    monkeypatch.delenv(CLIENT_PROPERTIES_ENV, raising=False)
    monkeypatch.setenv(BOOTSTRAP_ENV, scram.bootstrap)
    with pytest.raises(LabError) as caught:
        kafka_cluster()
    assert "listing topics" in str(caught.value).lower()


def test_fits_never_mixes_plaintext_and_sasl(as_lab, monkeypatch, tmp_path):
    assert as_lab.fits(1, KAFKA_VERSION, {})
    assert not KafkaCluster(name="plain").fits(1, KAFKA_VERSION, {})   # not started: only compares settings
    other = "SASL_PLAINTEXT" if as_lab.tls else "SASL_SSL"   # the same user over the other protocol
    monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, login(as_lab, GOOD).replace(
        as_lab.security_protocol, other))))
    assert not as_lab.fits(1, KAFKA_VERSION, {})
    if as_lab.tls:   # SASL_SSL trusting another CA
        monkeypatch.setenv(CLIENT_PROPERTIES_ENV, str(properties(tmp_path, login(as_lab, GOOD, make_ca(tmp_path)[0]))))
        assert not as_lab.fits(1, KAFKA_VERSION, {})
    monkeypatch.delenv(CLIENT_PROPERTIES_ENV)
    assert not as_lab.fits(1, KAFKA_VERSION, {})
    assert KafkaCluster(name="plain").fits(1, KAFKA_VERSION, {})


def test_the_doctor_diagnoses_a_secured_cluster(as_lab):
    from lab.doctor import diagnose
    diagnosis = diagnose(as_lab.bootstrap, timeout_s=30)
    assert diagnosis.unreadable == {} and not diagnosis.partial, diagnosis.text()   # client versions: skipped
    assert "secured" in str(diagnosis.facts)
