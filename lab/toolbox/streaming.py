"""Spark jobs several scenarios run: a checkpointed Structured Streaming query, and audits side by side.

    query = CheckpointedQuery(run, "spark-checkpoint", history, topic)
    query.once()            # incarnation 0: an availableNow run from the checkpoint (or from earliest)
    query.once()            # incarnation 1: resumes where the checkpoint says; its error, if any, in .error
    verdicts = audit_many({"a": dict(history=h, kinds=[...]), ...})

A query writes what it read in the lab.record.history contract ("read" rows with its incarnation, "committed"
rows with the offsets its last batch ended at), so lab.audit judges it like any consumer group.
"""
from __future__ import annotations

import json
import re

from ..connection import spark_kafka_options


class CheckpointedQuery:
    """One Spark Structured Streaming query over a Kafka topic, its offsets kept in its checkpoint only."""

    def __init__(self, run, name: str, history, topic: str, fail_on_data_loss: bool = True):
        self.run, self.name, self.history, self.topic = run, name, history, topic
        self.fail_on_data_loss, self.folder = fail_on_data_loss, run.folder / name
        self.incarnation, self.error = -1, None

    def once(self, spark=None) -> list:
        """One availableNow run; returns the rows it read. A query that stops on an error (failOnDataLoss)
        keeps the error in `.error` and on the timeline instead of raising."""
        from pyspark.sql import functions as F
        from ..audit.spark import set_log_level, spark_session
        spark, run, name = spark or spark_session(), self.run, self.name
        inc = self.incarnation = self.incarnation + 1
        self.history.log("restart", app=name, incarnation=inc)
        run.event(name, "start" if inc == 0 else "restart", detail=f"incarnation {inc}")
        stream = (spark.readStream.format("kafka").options(**spark_kafka_options(run.bootstrap))
                  .option("subscribe", self.topic).option("startingOffsets", "earliest")
                  .option("failOnDataLoss", str(self.fail_on_data_loss).lower()).load()
                  .select(F.get_json_object(F.col("value").cast("string"), "$.id").alias("id"), "partition",
                          "offset", F.current_timestamp().cast("double").alias("ts"), F.lit(inc).alias("incarnation")))
        sink = self.folder / "sink"
        query = (stream.writeStream.format("parquet").option("path", str(sink))
                 .option("checkpointLocation", str(self.folder / "checkpoint")).trigger(availableNow=True).start())
        if self.fail_on_data_loss and inc > 0:  # the expected failure: keep Spark's stack traces out of the output
            set_log_level(spark, "OFF")
        try:
            query.awaitTermination()
        except Exception as exc:  # StreamingQueryException: the query stopped on an error
            found = re.findall(r"Some data may have been lost[^\n]*|Reason: [^\n]*", str(exc))
            self.error = " ".join(found) if found else str(exc).splitlines()[0][:300]
            run.event(name, "error", tone="failure", detail=self.error[:200])
        finally:
            set_log_level(spark, "ERROR")
        rows = (spark.read.parquet(str(sink)).filter(F.col("incarnation") == inc).collect()
                if any(sink.glob("*.parquet")) else [])
        who = {"app": name, "incarnation": inc, "group": f"checkpoint:{name}", "topic": self.topic}
        self.history.log_many("read", [{**who, **{k: row[k] for k in ("partition", "offset", "id", "ts")}}
                                       for row in rows])
        ends = [s["endOffset"] for pr in query.recentProgress for s in json.loads(pr.json)["sources"][:1]]
        ends = [json.loads(e) if isinstance(e, str) else e for e in ends if e]
        self.history.log_many("committed", [{**who, "partition": int(part), "offset": int(off)}
                                            for part, off in (ends[-1].get(self.topic, {}) if ends else {}).items()])
        run.event(name, "end", detail=f"read {len(rows)} record(s)")
        return rows


def audit_many(jobs: dict, parallel: int = 2) -> dict:
    """name -> lab.audit.audit(**job) (each job a dict with `history` and the audit's keywords), `parallel`
    at a time: small Spark jobs, two at a time keep both cores busy."""
    from concurrent.futures import ThreadPoolExecutor
    from ..audit import audit
    from ..audit.spark import spark_session
    if jobs:
        spark_session()   # once, here: two threads importing pyspark for the first time trip on its circular imports
    with ThreadPoolExecutor(parallel) as pool:
        futures = {k: pool.submit(lambda a: audit(a.pop("history"), **a), dict(a)) for k, a in jobs.items()}
        return {k: f.result() for k, f in futures.items()}
