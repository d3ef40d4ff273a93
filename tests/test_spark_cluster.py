"""The audit on a Spark cluster: a standalone master + one worker from the installed pyspark, and a Spark
Connect server on them, against one embedded broker. Same verdict as local mode; unreachable ones fail fast.

The lab's session is a per-process singleton (and Connect switches pyspark into Connect mode for the whole
process), so every audit here runs in its own Python process, with the environment a user would set.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from lab.config import SPARK_MASTER_ENV, SPARK_REMOTE_ENV
from lab.errors import LabError
from lab.record.history import History

ROOT = Path(__file__).resolve().parent.parent

# Audits the topic in a fresh process; prints the verdict's counts and where the work ran as one JSON line.
AUDIT = textwrap.dedent("""
    import json, sys
    from lab.audit import audit
    from lab.record.history import History
    from lab.audit.spark import cancel_jobs, is_connect, spark_session, stop_spark
    folder, run_id, bootstrap, topic = sys.argv[1:5]
    spark = spark_session()
    where = {"connect": is_connect(spark)}
    if not where["connect"]:
        sc = spark.sparkContext
        where.update(master=sc.master, app=sc.applicationId,
                     executors=len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1)
    verdict = audit(History(folder, run_id), bootstrap=bootstrap, output_topic=topic, spark=spark)
    cancel_jobs()     # nothing running: must be a no-op in every mode
    stop_spark()
    print(json.dumps({"counts": verdict.counts, "where": where}))
""")


def run_audit(written, fails: bool = False, **env) -> dict | str:
    """The audit's counts and where it ran; with fails=True, the error it ended with."""
    history, bootstrap, topic = written
    clean = {k: v for k, v in os.environ.items() if k not in (SPARK_MASTER_ENV, SPARK_REMOTE_ENV)}
    done = subprocess.run([sys.executable, "-c", AUDIT, str(history.folder), history.run_id, bootstrap, topic],
                          env={**clean, **env}, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    if fails:
        assert done.returncode != 0, done.stdout[-3000:]
        return done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    from lab.audit.spark_standalone import StandaloneSpark
    with StandaloneSpark(tmp_path_factory.mktemp("spark-standalone"), cores=1, memory="1g") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A real topic with one injected duplicate and one aborted transaction, and its history."""
    from confluent_kafka.admin import NewTopic
    from lab.cluster import KafkaCluster
    from lab.record.generator import generate
    with KafkaCluster(name="spark-cluster-test") as kafka:
        topic = f"cluster-audit-{uuid.uuid4().hex[:6]}"
        admin = kafka.admin()
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        history = History(tmp_path_factory.mktemp("history"), "cluster-1")
        made = generate(kafka.bootstrap, topic, 60, history, keys=4, transactional=True, transaction_size=20,
                        abort_transactions=[1], duplicate=[10])
        assert (made.produced, made.aborted, made.injected_duplicates) == (40, 20, 1)
        yield history, kafka.bootstrap, topic


@pytest.fixture(scope="module")
def local(written):
    """The reference: the same audit in local mode (no cluster variable set)."""
    local = run_audit(written)
    assert local["where"] == {"connect": False, "master": "local[2]", "app": local["where"]["app"], "executors": 0}
    assert local["counts"]["duplicate"] == 1 and local["counts"]["aborted_read"] == 20
    assert local["counts"]["lost"] == 0
    return local


def test_audit_on_a_standalone_cluster_matches_local_mode(standalone, written, local):
    on_cluster = run_audit(written, **{SPARK_MASTER_ENV: standalone.master_url})
    assert on_cluster["counts"] == local["counts"]
    where = on_cluster["where"]
    assert where["master"] == standalone.master_url and where["executors"] == 1
    # The tasks ran in the worker's executor, which fetched the connector jars from the driver.
    app = standalone.work_dir / where["app"]
    assert app in standalone.app_folders()
    fetched = {p.name for p in app.rglob("*.jar")}
    assert any(name.startswith("spark-sql-kafka-0-10") for name in fetched), fetched
    # stop_spark ended the application, not the cluster.
    assert standalone.master.alive() and standalone.worker.alive()


def test_audit_through_spark_connect_matches_local_mode(standalone, written, local):
    before = set(standalone.app_folders())
    remote = standalone.start_connect_server()   # a plain server: no Kafka connector on its classpath
    via_connect = run_audit(written, **{SPARK_REMOTE_ENV: remote})
    assert via_connect["where"] == {"connect": True}
    assert via_connect["counts"] == local["counts"]
    # The server's executor ran the tasks with the connector the client sent as session artifacts.
    (server_app,) = set(standalone.app_folders()) - before
    fetched = {p.name for p in server_app.rglob("*.jar")}
    assert any(name.startswith("spark-sql-kafka-0-10") for name in fetched), fetched
    # stop_spark released the session, not the server.
    assert standalone.connect.alive()
    # A second session of its own connector: Spark registers the connector's settings once per server JVM.
    error = run_audit(written, fails=True, **{SPARK_REMOTE_ENV: remote})
    assert "LabError" in error and "loaded the Kafka connector for an earlier session" in error, \
        "\n".join(line for line in error.splitlines() if not line.lstrip().startswith("at "))[:6000]
    assert "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0" in error, error[-3000:]


def test_a_connect_server_with_the_connector_serves_session_after_session(standalone, written, local):
    from lab.audit.spark import connector_jars
    remote = standalone.start_connect_server(jars=connector_jars())   # in place of the plain one
    for _ in range(2):   # a kernel restarted, or a second learner: each session finds the server's connector
        via_connect = run_audit(written, **{SPARK_REMOTE_ENV: remote})
        assert via_connect == {"counts": local["counts"], "where": {"connect": True}}


def test_unreachable_master_or_connect_server_is_one_clear_error(monkeypatch):
    import lab.audit.spark
    from lab.runtime.ports import free_port
    monkeypatch.setattr(lab.audit.spark, "_session", None)   # as in a fresh kernel; nothing is started
    port = free_port()   # nothing listens there
    monkeypatch.setenv(SPARK_MASTER_ENV, f"spark://127.0.0.1:{port}")
    with pytest.raises(LabError, match=rf"Could not reach the Spark master spark://127.0.0.1:{port} .*refused"):
        lab.audit.spark.spark_session()
    monkeypatch.setenv(SPARK_MASTER_ENV, "spark:/oops")
    with pytest.raises(LabError, match="is not a Spark master URL"):
        lab.audit.spark.spark_session()
    monkeypatch.delenv(SPARK_MASTER_ENV)
    monkeypatch.setenv(SPARK_REMOTE_ENV, f"sc://127.0.0.1:{port}")
    with pytest.raises(LabError, match=rf"Could not reach the Spark Connect server sc://127.0.0.1:{port}"):
        lab.audit.spark.spark_session()
    monkeypatch.setenv(SPARK_MASTER_ENV, "local[1]")
    with pytest.raises(LabError, match="Both SPARK_REMOTE"):
        lab.audit.spark.spark_session()
    assert lab.audit.spark._session is None and "SPARK_CONNECT_MODE_ENABLED" not in os.environ
