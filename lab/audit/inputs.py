"""What the audit reads: the run's history files (one pass, cached, mixed runs refused), a topic through the
official Spark connector in both isolation levels at once, and a topic's offsets from the broker itself.
"""
from __future__ import annotations

from ..connection import kafka_config
from ..errors import LabError
from ..record.history import History

# One explicit schema for every kind: ids stay strings, numbers stay numbers, missing fields are null.
HISTORY_SCHEMA = ("run_id STRING, kind STRING, ts DOUBLE, id STRING, key STRING, seq LONG, topic STRING, "
                  "`partition` INT, `offset` LONG, true_value DOUBLE, aborted BOOLEAN, app STRING, "
                  "incarnation LONG, `group` STRING")
HISTORY_KINDS = ("produced", "read", "committed", "restart")
OUTPUT_VALUE_SCHEMA = "id STRING, key STRING, value DOUBLE"


def _topic_offsets(bootstrap: str, topic: str) -> dict:
    """partition -> (earliest, last stable offset, high watermark), from the broker itself."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({**kafka_config(bootstrap), "log_level": 0})
    try:
        md = admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise LabError(f"The Kafka cluster at {bootstrap} does not answer ({exc.args[0]}): is it running?") from None
    if topic not in md.topics:
        names = sorted(t for t in md.topics if not t.startswith("__"))
        raise LabError(f"Topic {topic!r} does not exist on {bootstrap}. Topics there: {names or 'none'}.")
    parts = [TopicPartition(topic, p) for p in sorted(md.topics[topic].partitions)]

    def query(spec, isolation):
        futures = admin.list_offsets({tp: spec for tp in parts}, isolation_level=isolation, request_timeout=15)
        return {tp.partition: f.result().offset for tp, f in futures.items()}

    earliest = query(OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED)
    stable = query(OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
    high = query(OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
    return {p: (earliest[p], stable[p], high[p]) for p in earliest}


def _is_empty(offsets: dict) -> bool:
    return all(high <= earliest for earliest, _, high in offsets.values())


def _load_history(spark, history: History, cached: list) -> dict:
    """{kind: DataFrame or None}: every file read in one pass and cached; mixed runs are refused."""
    from pyspark.sql import functions as F
    files = [str(history.path(k)) for k in HISTORY_KINDS if k in history.kinds()]
    if not files:
        return {k: None for k in HISTORY_KINDS}
    rows = (spark.read.schema(HISTORY_SCHEMA).option("mode", "DROPMALFORMED").json(files)
            .withColumn("line", F.monotonically_increasing_id())  # file order: the O_APPEND order of writes
            .cache())
    cached.append(rows)
    per_run = rows.groupBy("run_id", "kind").count().collect()  # also fills the cache
    others: dict = {}
    for r in per_run:
        if r["run_id"] != history.run_id:
            others[r["run_id"]] = others.get(r["run_id"], 0) + r["count"]
    if others:
        listed = ", ".join(f"{k!r} ({v} lines)" for k, v in sorted(others.items(), key=lambda kv: -kv[1])[:5])
        raise LabError(f"The history in {history.folder} mixes runs: besides {history.run_id!r} it holds {listed}. "
                       "Give every run its own folder, or call History.clear() before the run starts.")
    present = {r["kind"] for r in per_run}
    return {k: rows.filter(F.col("kind") == k) if k in present else None for k in HISTORY_KINDS}


def _read_both(spark, bootstrap: str, topic: str):
    """(read_committed, read_uncommitted) raw views of a topic, read in one job and frozen."""
    from pyspark.sql import functions as F
    from .spark import read_topic
    both = (read_topic(bootstrap, topic, "read_committed", spark=spark).withColumn("committed", F.lit(True))
            .unionByName(read_topic(bootstrap, topic, "read_uncommitted", spark=spark)
                         .withColumn("committed", F.lit(False)))
            .localCheckpoint())
    return (both.filter("committed").drop("committed"), both.filter(~F.col("committed")).drop("committed"))


def _parse_output(df):
    """read_topic's frame -> partition, offset, time (epoch s), id, key, value, raw."""
    from pyspark.sql import functions as F
    parsed = F.from_json("value", OUTPUT_VALUE_SCHEMA)
    return (df.select("partition", "offset", F.col("timestamp").cast("double").alias("time"),
                      F.col("key").alias("kafka_key"), F.col("value").alias("raw"), parsed.alias("j"))
            .select("partition", "offset", "time", F.col("j.id").alias("id"),
                    F.coalesce("j.key", "kafka_key").alias("key"), F.col("j.value").alias("value"), "raw"))


