"""Versions and places, pinned in one spot.

KAFKA_VERSION is the newest 4.x release whose full broker classpath Maven
Central serves here (4.4.0's kafka-tools-api is missing there). SPARK_VERSION
must equal the installed pyspark: the official Kafka connector is only served
complete for 4.0.0, so pyspark is pinned to it.
"""
from __future__ import annotations

import os
from pathlib import Path

KAFKA_VERSION = "4.3.1"
SPARK_VERSION = "4.0.0"
SCALA_BINARY = "2.13"

# Set this to a bootstrap server to run the lessons on a broker of yours instead of the embedded one. The lessons
# write (topics, groups, transactions), so they take only the broker of docker-compose.yml, known by its cluster id,
# or a cluster whose id you name in WRITABLE_CLUSTER_ENV: see lab.cluster.external.
BOOTSTRAP_ENV = "KAFKA_LAB_BOOTSTRAP"
WRITABLE_CLUSTER_ENV = "KAFKA_LAB_WRITABLE_CLUSTER_ID"
COMPOSE_CLUSTER_ID = "a2Fma2EtZmFpbHVyZS1sYQ"   # docker-compose.yml's CLUSTER_ID: "kafka-failure-la" in base64
# A Java-style client properties file with its security settings (SASL, SSL): see lab.connection.
CLIENT_PROPERTIES_ENV = "KAFKA_LAB_CLIENT_PROPERTIES"
# Where the Spark audit runs: a master URL (spark://host:7077, local[4], yarn, ...) here, or a Spark
# Connect server in Spark's own SPARK_REMOTE (sc://host:15002). Neither set: local[2] in the kernel.
SPARK_MASTER_ENV = "KAFKA_LAB_SPARK_MASTER"
SPARK_REMOTE_ENV = "SPARK_REMOTE"
# Set to 1 for an audit of millions of records: the Spark driver then compiles its hot code with C2 too (see
# lab.audit.spark._classic_session).
SPARK_FULL_JIT_ENV = "KAFKA_LAB_SPARK_FULL_JIT"

CACHE_DIR = Path(os.environ.get("KAFKA_LAB_CACHE", Path.home() / ".cache" / "kafka-failure-lab"))
WORK_DIR = Path(os.environ.get("KAFKA_LAB_WORK", Path.home() / ".cache" / "kafka-failure-lab" / "work"))
# The package itself: its Java sources (java/), the pinned jar sets (jars.lock), the site's template (site_template/).
LAB_DIR = Path(__file__).resolve().parent
