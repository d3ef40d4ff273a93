"""The lab's Spark session with the official Kafka connector at the exact pyspark version.

local[2] in this process by default; on a cluster with KAFKA_LAB_SPARK_MASTER (a master URL: the
connector jars go out as spark.jars, the driver serves them to the executors) or SPARK_REMOTE (a Spark
Connect server: the jars go up as session artifacts; no sparkContext there).
"""
from __future__ import annotations

import os
import re
import socket
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from ..runtime import class_archives, maven
from ..config import SCALA_BINARY, SPARK_FULL_JIT_ENV, SPARK_MASTER_ENV, SPARK_REMOTE_ENV, SPARK_VERSION
from ..connection import spark_kafka_options
from ..errors import LabError
from ..record.logs import log_file
from ..runtime.jvm import java_executable
from ..runtime.processes import Child, require_java, wait_until
from .spark_driver import launch_driver_jvm, log4j2_config

_session = None
_dumps: list = []   # the driver's class-archive dump, while it runs (lab.runtime.processes.Child)
_session_lock = threading.Lock()   # one session, even when lab.audit.warm_up's thread and an audit ask at once

REACH_SECONDS = 10      # to reach a master or a Connect server before saying it does not answer
EXECUTOR_SECONDS = 60   # for a standalone master to give the app its first executor
MASTER_URL = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[[\d, ]+\]|spark://[^/\s]+|yarn|k8s://\S+")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def connector_jars() -> list[Path]:
    """spark-sql-kafka and the jars it needs that pyspark does not ship already."""
    import pyspark
    if pyspark.__version__ != SPARK_VERSION:
        raise LabError(f"pyspark {pyspark.__version__} is installed but the lab pins {SPARK_VERSION} "
                       "(the Kafka connector must match it exactly): reinstall with `make reinstall`.")
    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    jars = maven.classpath([f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}"],
                           label=f"spark-kafka-{SPARK_VERSION}")
    return [j for j in jars if _artifact(j.name) not in shipped]


def _artifact(jar_name: str) -> str:
    """'kafka-clients-3.9.0.jar' -> 'kafka-clients'."""
    parts = jar_name[:-4].split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def spark_session(cores: int = 2, memory: str = "1g"):
    """The lab's one Spark session, created on first use: local[cores] in this process, or the cluster
    that KAFKA_LAB_SPARK_MASTER (master URL) or SPARK_REMOTE (Spark Connect) names."""
    global _session
    with _session_lock:
        if _alive(_session):
            if not is_connect(_session):
                _session.sparkContext.setInterruptOnCancel(True)   # this thread's jobs too (cancel_jobs)
            return _session
        remote, master = os.environ.get(SPARK_REMOTE_ENV), os.environ.get(SPARK_MASTER_ENV)
        if remote and master:
            raise LabError(f"Both {SPARK_REMOTE_ENV}={remote} and {SPARK_MASTER_ENV}={master} are set: "
                           "the audit runs on one Spark, unset one of them.")
        if remote:
            _session = _connect_session(remote)
        else:
            _session = _classic_session(master or f"local[{cores}]", cores, memory)
        return _session


# An audit of a run of the lab reads a few thousand records in a few dozen tiny jobs, and Spark's settings for big
# data cost it more than its data: notebook 05's crash audit (150 records, 22 jobs) took 4.5 JVM CPU-s with them
# and 3.1 to 3.4 with these (benchmarks/RESULTS.md). Past SMALL_DATA_ROWS the session's own settings apply.
SMALL_DATA_ROWS = 100_000
SMALL_DATA_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                   "spark.sql.codegen.wholeStage": "false"}
_small_twin: tuple = (None, None)   # (the lab's session, its twin for small data)


def sized_session(spark, rows: int):
    """The session to read about `rows` rows with: for small data a twin of `spark` (the same SparkContext and
    cache, its own SQL settings: SMALL_DATA_CONF), so that no other audit's settings change; else `spark`.
    Under Spark Connect, `spark` itself."""
    global _small_twin
    if rows > SMALL_DATA_ROWS or is_connect(spark):
        return spark
    with _session_lock:
        base, twin = _small_twin
        if base is not spark:
            twin = spark.newSession()
            for key, value in {"spark.sql.session.timeZone": spark.conf.get("spark.sql.session.timeZone"),
                               **SMALL_DATA_CONF}.items():
                twin.conf.set(key, value)
            _small_twin = (spark, twin)
        return twin


def current_session():
    """The session this kernel has running, or None: nothing is started."""
    session = _session
    return session if session is not None and _alive(session) else None


def is_connect(spark) -> bool:
    """A Spark Connect session (no sparkContext, no py4j): the work runs in the server's JVM."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _alive(spark) -> bool:
    if spark is None:
        return False
    return not spark.is_stopped if is_connect(spark) else spark.sparkContext._jsc is not None


def _jit_option() -> str:
    """C1 alone unless KAFKA_LAB_SPARK_FULL_JIT=1. The lab's audits are small (thousands of records): with C1 alone
    the driver spent 16-17 JVM CPU-s instead of 27-32 on its start and seven small audits (benchmarks/spark_start.py).
    An audit of a million records, though, took 84 s instead of 32 (RESULTS.md)."""
    return "" if os.environ.get(SPARK_FULL_JIT_ENV) == "1" else "-XX:TieredStopAtLevel=1 "


def _classic_session(master: str, cores: int, memory: str):
    """A driver in this process (py4j JVM) for a master URL: local[N], or a cluster's executors."""
    if not MASTER_URL.fullmatch(master):
        raise LabError(f"{SPARK_MASTER_ENV}={master!r} is not a Spark master URL: use spark://host:7077, "
                       "local[4], yarn or k8s://https://host:443 (or SPARK_REMOTE=sc://host:15002 for Spark Connect).")
    standalone = master.startswith("spark://")
    addresses = [_host_port(a, 7077) for a in master[len("spark://"):].split(",")] if standalone else []
    for_step = f"reach the Spark master {master} ({SPARK_MASTER_ENV})"
    if standalone:
        _reach(addresses, for_step, "start it (sbin/start-master.sh, plus a worker) or fix the URL")
    require_java(17)
    loopback = master.startswith("local") or (standalone and all(h in LOOPBACK for h, _ in addresses))
    # Python workers must run in this environment (same pandas, pyarrow), not the first python3 on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if loopback:  # a loopback address chosen up front: Spark warns when it has to pick one itself
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession
    jars = ",".join(str(j) for j in connector_jars())
    log = log_file("spark.log")
    options = {"spark.master": master, "spark.app.name": "kafka-failure-lab",
               "spark.jars": jars,   # on a cluster the driver serves them to the executors
               "spark.driver.memory": memory, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
               "spark.sql.session.timeZone": "UTC",
               "spark.driver.extraJavaOptions": " ".join([
                   "-XX:+UseSerialGC", *_jit_option().split(), *class_archives.options(
                       java_executable(), _spark_jars(), Child, dump=False),   # dumped once the driver runs
                   f"-Dlog4j2.configurationFile=file:{log4j2_config(log)}"])}
    if master.startswith("local"):
        options["spark.sql.shuffle.partitions"] = str(cores * 2)
    if loopback:  # executors on another machine must reach the driver: only then may it hide on 127.0.0.1
        options.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    try:
        launch_driver_jvm(options, log)
        session = SparkSession.builder.config(map=options).getOrCreate()
    except (Py4JError, PySparkRuntimeError) as exc:  # the Java error's first line says what
        raise LabError(f"Could not start the Spark driver for {master} ({_first_line(exc)}); "
                       f"details in {log}.") from None
    _dump_driver_archive(session, log.parent)
    # cancel_jobs interrupts the tasks of this thread's jobs, e.g. a Kafka read blocked on a dead broker
    session.sparkContext.setInterruptOnCancel(True)
    if standalone:
        _wait_for_executor(session, master)
    if not master.startswith("local") and not session.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # Spark's default 200 shuffle partitions made a small audit 4x slower on a 1-core worker:
        # two per executor core, unless the user's spark-defaults.conf says otherwise.
        session.conf.set("spark.sql.shuffle.partitions", str(2 * session.sparkContext.defaultParallelism))
    return session


def _spark_jars() -> list[Path]:
    """The jars of the driver's classpath (Spark's launcher puts its jars folder on it): its class archive's key."""
    import pyspark
    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    return sorted((home / "jars").glob("*.jar"))


def _dump_driver_archive(session, folder: Path) -> None:
    """The driver's class archive (lab.runtime.class_archives: a start 2 s and 3.5 CPU-s shorter, and its first
    audit 1.5 s), dumped in the background with the classpath the driver runs with, as its Java expanded it, from
    the folder it started in (the launcher's classpath has a relative entry)."""
    run_classpath = session.sparkContext._jvm.java.lang.System.getProperty("java.class.path")

    def spawn(name, argv, log):
        _dumps.append(Child(name, argv, log, cwd=folder))   # stop_spark stops it too: tried again at a later start
        return _dumps[-1]
    class_archives.dump_when_ready(java_executable(), _spark_jars(), spawn, run_classpath)


def _wait_for_executor(session, master: str) -> None:
    """A standalone master that takes the app but has no free worker would queue every job forever."""
    sc = session.sparkContext._jsc.sc()

    def has_executor():
        if sc.isStopped():  # the master refused the app or went away (StandaloneAppClient gave up)
            raise LabError(f"The Spark master {master} dropped the lab's application: see "
                           f"{log_file('spark.log')} and the master's log.")
        return len(sc.statusTracker().getExecutorInfos()) > 1   # the driver is listed too
    try:
        wait_until(has_executor, EXECUTOR_SECONDS, f"an executor from the Spark master {master}", interval=0.5)
    except LabError as exc:
        session.stop()
        raise LabError(f"{exc} Does it have a live worker with a free core and spark.executor.memory "
                       "(1g by default) free? See the master's web UI.") from None


def _connect_session(url: str):
    """A Spark Connect client session; the connector jars are added as this session's artifacts."""
    from pyspark.errors import PySparkValueError
    try:
        import grpc
        from pyspark.sql.connect.client import DefaultChannelBuilder
    except ImportError as exc:
        raise LabError(f"{SPARK_REMOTE_ENV} is set but the Spark Connect client is missing ({exc}): "
                       f"pip install 'pyspark[connect]=={SPARK_VERSION}'.") from None
    try:
        channels = DefaultChannelBuilder(url)
    except PySparkValueError as exc:  # not sc://host[:port][/;param=value...]
        raise LabError(f"{SPARK_REMOTE_ENV}={url!r} is not a Spark Connect URL like sc://host:15002 "
                       f"({_first_line(exc)}).") from None
    step = f"reach the Spark Connect server {url} ({SPARK_REMOTE_ENV})"
    fix = "start it (sbin/start-connect-server.sh) or fix the URL"
    _reach([_host_port(channels.endpoint, 15002)], step, fix)
    channel = channels.toChannel()
    try:  # bounded: the client itself retries an unreachable server for minutes
        grpc.channel_ready_future(channel).result(timeout=REACH_SECONDS)
    except grpc.FutureTimeoutError:
        raise LabError(f"Could not {step}: its port takes connections but no gRPC answer came within "
                       f"{REACH_SECONDS} s (not a Connect server, or TLS/token settings missing from the URL?). "
                       f"{fix[:1].upper()}{fix[1:]}.") from None
    finally:
        channel.close()
    from pyspark.sql import SparkSession
    session = SparkSession.builder.remote(url).getOrCreate()
    version = session.version
    if version.split(".")[:2] != SPARK_VERSION.split(".")[:2]:
        session.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        raise LabError(f"The Spark Connect server {url} runs Spark {version}; the lab's Kafka connector is "
                       f"built for {SPARK_VERSION}: use a {SPARK_VERSION} server.")
    session.conf.set("spark.sql.session.timeZone", "UTC")
    if not _has_kafka_source(session):
        # Session artifacts: the server loads them in this session's class loader and ships them to its
        # executors, so a server with no Kafka connector of its own serves one session (CONNECT_ONCE).
        session.addArtifacts(*(str(j) for j in connector_jars()))
    return session


def _has_kafka_source(session) -> bool:
    """Whether the Connect server resolves the Kafka source itself (the connector on its classpath). Nothing is
    read: resolving the source's schema reaches no broker."""
    from pyspark.errors import AnalysisException
    try:
        session.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option(
            "subscribe", "lab-probe").load().schema
        return True
    except AnalysisException as exc:
        if "Failed to find data source" in str(exc):
            return False
        raise


# Spark registers the connector's settings once per JVM: a second session's own copy of the connector fails there
# (the server's JVM in local mode, an executor's on a cluster, where the retried tasks only say the class is broken).
CONNECT_ONCE = re.compile(r"Config entry spark\.kafka\S* already registered"
                          r"|Could not initialize class org\.apache\.spark\.sql\.kafka010")


def connector_loaded_twice(spark, exc: BaseException) -> LabError | None:
    """The LabError for a Connect server that loaded the Kafka connector for an earlier session, else None."""
    if not is_connect(spark) or not CONNECT_ONCE.search(str(exc)):
        return None
    return LabError(f"The Spark Connect server ({SPARK_REMOTE_ENV}) loaded the Kafka connector for an earlier "
                    "session, and Spark loads it once per server. Start the server with the connector on its "
                    f"classpath (start-connect-server.sh --packages org.apache.spark:spark-sql-kafka-0-10_"
                    f"{SCALA_BINARY}:{SPARK_VERSION}), then every session uses it; or restart this one.")


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else (address, default_port)


def _reach(addresses: list, step: str, fix: str) -> None:
    """One TCP connect to any of `addresses` within REACH_SECONDS, or one LabError naming the step."""
    errors = []
    for host, port in addresses:
        try:
            socket.create_connection((host.strip("[]"), port), timeout=REACH_SECONDS).close()
            return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise LabError(f"Could not {step}: {'; '.join(errors)}. {fix[:1].upper()}{fix[1:]}.")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    found = re.search(r"(?:Exception|Error): ([^\n]+)", text)
    return (found.group(1) if found else text.splitlines()[0] if text else type(exc).__name__)[:300]


def set_log_level(spark, level: str) -> None:
    """The driver's log level (classic). Under Connect the logs are the server's, and they never
    reach this process (errors arrive as exceptions), so there is nothing to quiet."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


def cancel_jobs() -> None:
    """Cancel every running Spark job now (a panel's Stop), interrupting its tasks."""
    if not _alive(_session):
        return
    if is_connect(_session):
        with _quick_retries(_session):
            _session.interruptAll()   # every operation of this session, whichever thread started it
    else:
        _session.sparkContext.cancelAllJobs()


@contextmanager
def _quick_retries(session):
    """A Connect client retries an unreachable server for ~10 minutes; a Stop must not wait that long."""
    from pyspark.sql.connect.client.retries import DefaultPolicy
    usual = session.client.get_retry_policies()
    session.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=2000)])
    try:
        yield
    finally:
        session.client.set_retry_policies(usual)


def stop_spark() -> None:
    """Stop what spark_session started: the session AND its local driver JVM (SparkSession.stop leaves the
    py4j gateway JVM running). A cluster's master and workers, or a Connect server, keep running: only
    this application (or this Connect session) ends. A warm-up under way finishes first."""
    with _session_lock:
        _stop_spark()


def _stop_spark() -> None:
    global _session, _small_twin
    _small_twin = (None, None)
    if _session is not None:
        if is_connect(_session):
            with _quick_retries(_session):
                _session.stop()   # releases this session on the server, closes the channel
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)   # pyspark's process-wide switch to Connect
        else:
            _session.stop()
        _session = None
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        if getattr(gateway, "proc", None) is not None:
            gateway.proc.kill()
            gateway.proc.wait(10)
        SparkContext._gateway = SparkContext._jvm = None
    while _dumps:
        _dumps.pop().stop()


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", spark=None):
    """Batch-read a whole topic: key/value as strings plus partition, offset, timestamp."""
    if isolation not in ("read_committed", "read_uncommitted"):
        raise LabError(f"isolation must be read_committed or read_uncommitted, not {isolation!r}.")
    spark = spark or spark_session()
    return (spark.read.format("kafka")
            .options(**spark_kafka_options(bootstrap))
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.isolation.level", isolation)
            .load()
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                        "topic", "partition", "offset", "timestamp"))
