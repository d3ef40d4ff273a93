"""The local driver's JVM for lab.audit.spark: launched through pyspark's py4j gateway, its output and its
working directory kept out of the kernel's, and its log4j2 settings (WARN and above to the lab's log)."""
from __future__ import annotations

import os
from pathlib import Path

from ..record.logs import verbose
from ..runtime.jvm import spark_java_home
from ..runtime.log4j import spark_driver


def launch_driver_jvm(options: dict, log: Path) -> None:
    """The driver's JVM (pyspark's py4j gateway), unless one runs already. What it prints outside log4j goes to
    the log, and it starts in the log folder, where Spark creates its artifacts/ folder (not in the notebook's
    folder, the student's file browser). Both are given to its Popen: this process's own stdout and working
    directory stay as they are, so a session may start in a background thread (lab.audit.warm_up)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)   # no JVM yet: a plain dict, passed to spark-submit as --conf
    conf.setAll(list(options.items()))
    java_home = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(spark_java_home())   # launch_gateway hands os.environ to spark-submit
    try:
        if verbose():
            gateway = launch_gateway(conf, popen_kwargs={"cwd": str(log.parent)})
        else:
            with open(log, "ab") as out:
                gateway = launch_gateway(conf, popen_kwargs={"cwd": str(log.parent), "stdout": out, "stderr": out})
    finally:
        if java_home is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = java_home
    SparkContext._ensure_initialized(gateway=gateway)


def log4j2_config(log: Path) -> Path:
    """WARN and above to `log` (or, verbose, to stderr, i.e. the cell)."""
    path = log.with_name("spark-log4j2.properties")
    path.write_text(spark_driver(None if verbose() else log))
    return path
