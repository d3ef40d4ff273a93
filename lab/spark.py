"""A local Spark session with the official Kafka connector at the exact pyspark version."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from . import maven
from .config import SCALA_BINARY, SPARK_VERSION
from .errors import LabError
from .logs import log_file, process_output_to, verbose
from .processes import require_java

# The driver's log4j2 setup: everything to a file (lab.logs), nothing to the notebook.
LOG4J2 = """rootLogger.level = {level}
rootLogger.appenderRef.main.ref = main
appender.main.type = {appender}
appender.main.name = main
{target}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
"""

_session = None


def connector_jars() -> list[Path]:
    """spark-sql-kafka and the jars it needs that pyspark does not ship already."""
    import pyspark
    if pyspark.__version__ != SPARK_VERSION:
        raise LabError(f"pyspark {pyspark.__version__} is installed but the lab pins {SPARK_VERSION} "
                       "(the Kafka connector must match it exactly): reinstall with `make install`.")
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
    """The lab's one Spark session (local mode); created on first use."""
    global _session
    if _session is not None and _session.sparkContext._jsc is not None:
        _session.sparkContext.setInterruptOnCancel(True)   # this thread's jobs too (cancel_jobs)
        return _session
    require_java(17)
    # Python workers must run in this environment (same pandas, pyarrow), not the first python3 on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A loopback address chosen up front: Spark warns when it has to pick one itself.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    jars = ",".join(str(j) for j in connector_jars())
    log = log_file("spark.log")
    builder = (SparkSession.builder.master(f"local[{cores}]")
               .appName("kafka-failure-lab")
               .config("spark.jars", jars)
               .config("spark.driver.memory", memory)
               .config("spark.sql.shuffle.partitions", str(cores * 2))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions",
                       f"-XX:+UseSerialGC -Dlog4j2.configurationFile=file:{_log4j2_config(log)}"))
    # What the JVM prints outside log4j goes to the log too, and it starts in the log folder, where
    # Spark creates its artifacts/ folder (not in the notebook's folder, the student's file browser).
    with process_output_to(log), _working_directory(log.parent):
        _session = builder.getOrCreate()
    # cancel_jobs interrupts the tasks of this thread's jobs, e.g. a Kafka read blocked on a dead broker
    _session.sparkContext.setInterruptOnCancel(True)
    return _session


def cancel_jobs() -> None:
    """Cancel every running Spark job now (a panel's Stop), interrupting its tasks."""
    if _session is not None and _session.sparkContext._jsc is not None:
        _session.sparkContext.cancelAllJobs()


@contextmanager
def _working_directory(folder: Path):
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def _log4j2_config(log: Path) -> Path:
    """WARN and above to `log` (or, verbose, to stderr, i.e. the cell)."""
    target = ("Console", "appender.main.target = SYSTEM_ERR") if verbose() else \
             ("File", f"appender.main.fileName = {log}")
    path = log.with_name("spark-log4j2.properties")
    path.write_text(LOG4J2.format(level="warn", appender=target[0], target=target[1]))
    return path


def stop_spark() -> None:
    """Stop the session AND its JVM (SparkSession.stop leaves the py4j gateway JVM running)."""
    global _session
    if _session is not None:
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


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", spark=None):
    """Batch-read a whole topic: key/value as strings plus partition, offset, timestamp."""
    if isolation not in ("read_committed", "read_uncommitted"):
        raise LabError(f"isolation must be read_committed or read_uncommitted, not {isolation!r}.")
    spark = spark or spark_session()
    return (spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.isolation.level", isolation)
            .load()
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                        "topic", "partition", "offset", "timestamp"))
