"""The audit's checks, one function per anomaly kind over Spark DataFrames of a run's history and of what
landed in Kafka (lab.audit.inputs): no broker, no side effects. Each returns a DataFrame of anomaly rows with a
`time` column (epoch seconds); lab.audit.runner counts and samples them.
"""
from __future__ import annotations

from .inputs import _parse_output


def _match(out, intended):
    """Output records (in_output) full-outer-joined on id with the inputs that should be reflected."""
    from pyspark.sql import functions as F
    records = out.select("id", "key", "value", "partition", "offset", "time", F.lit(True).alias("in_output"))
    if intended is None:
        return records.select("*", *[F.lit(None).cast(t).alias(c) for c, t in
                                     [("input_key", "string"), ("input_topic", "string"), ("input_partition", "int"),
                                      ("input_offset", "long"), ("true_value", "double"), ("produced_ts", "double")]])
    inputs = intended.select("id", F.col("key").alias("input_key"), F.col("topic").alias("input_topic"),
                             F.col("partition").alias("input_partition"), F.col("offset").alias("input_offset"),
                             "true_value", F.col("ts").alias("produced_ts"))
    return records.join(inputs, "id", "full_outer")


def _duplicates(matched):
    from pyspark.sql import functions as F
    copies = F.sort_array(F.collect_list(F.struct("time", "partition", "offset")))
    return (matched.filter(F.col("in_output")).groupBy("id").agg(F.count("*").alias("copies"), copies.alias("c"))
            .filter(F.col("copies") > 1)
            .select("id", "copies",
                    F.expr("transform(c, x -> concat(x.partition, '@', x.offset))").alias("at"),
                    F.col("c")[1]["time"].alias("time")))      # when the second copy landed


def _lost(matched):
    from pyspark.sql import functions as F
    return (matched.filter(F.col("in_output").isNull())
            .select("id", F.col("input_key").alias("key"), F.col("input_topic").alias("topic"),
                    F.col("input_partition").alias("partition"), F.col("input_offset").alias("offset"),
                    F.col("produced_ts").alias("time")))


def _reprocessed(read, committed, restart):
    """A read of an offset below what the same group had already committed (by ts)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    cols = ["group", "topic", "partition", "offset", "ts", "app", "incarnation"]
    events = (read.select(*cols, "id", F.lit(0).alias("is_commit"))
              .unionByName(committed.select(*cols, F.lit(None).cast("string").alias("id"),
                                            F.lit(1).alias("is_commit"))))
    # At equal ts the read counts as before the commit: only earlier commits matter.
    w = (Window.partitionBy("group", "topic", "partition").orderBy("ts", "is_commit")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    rows = (events.withColumn("committed_before", F.max(F.when(F.col("is_commit") == 1, F.col("offset"))).over(w))
            .filter((F.col("is_commit") == 0) & (F.col("offset") < F.col("committed_before")))
            .select("app", "incarnation", "group", "topic", "partition", "offset", "committed_before", "id",
                    F.col("ts").alias("time")))
    if restart is not None:  # when the incarnation that re-read began
        starts = restart.groupBy("app", "incarnation").agg(F.min("ts").alias("restart_ts"))
        rows = rows.join(starts, ["app", "incarnation"], "left")
    return rows


def _skipped(read, existing):
    """Records sitting in a hole of a group's read offsets (the group read offsets on both sides)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    key = ["group", "topic", "partition"]
    # Holes: consecutive read offsets more than 1 apart. Ordered by (offset, ts), the row after a hole
    # is the earliest read past it: when the group went past. Holes left by transaction markers hold
    # no produced record, so they find nothing below.
    w = Window.partitionBy(*key).orderBy("offset", "ts")
    holes = (read.select(*key, "offset", "ts")
             .withColumn("next_offset", F.lead("offset").over(w)).withColumn("time", F.lead("ts").over(w))
             .filter(F.col("next_offset") > F.col("offset") + 1)
             .select(*key, F.col("offset").alias("read_before"), F.col("next_offset").alias("read_after"), "time"))
    return (existing.select("topic", "partition", "offset", "id", F.col("ts").alias("produced_ts"))
            .join(holes, ["topic", "partition"])
            .filter((F.col("offset") > F.col("read_before")) & (F.col("offset") < F.col("read_after")))
            .select(*key, "offset", "id", "read_before", "read_after", "produced_ts", "time"))


def _aborted(spark, sources, produced):
    """Records seen by read_uncommitted but not read_committed, below the last stable offset;
    plus ids the generator aborted that a read_committed reader nevertheless saw.
    Records at or past the last stable offset belong to transactions still open: seen_by "_pending"."""
    from functools import reduce
    from pyspark.sql import functions as F
    frames = []
    for topic, committed, uncommitted, offsets in sources:  # committed parsed, uncommitted raw
        only_u = _parse_output(uncommitted.join(committed.select("partition", "offset"),
                                                ["partition", "offset"], "left_anti"))
        only_u = only_u.withColumn("seen_by", F.lit("read_uncommitted"))
        if offsets:
            lso = spark.createDataFrame([(p, s) for p, (_, s, _) in offsets.items()], "partition INT, lso LONG")
            only_u = (only_u.join(F.broadcast(lso), "partition")
                      .withColumn("seen_by", F.when(F.col("offset") >= F.col("lso"), F.lit("_pending"))
                                  .otherwise(F.col("seen_by"))))
        frames.append(only_u.select(F.lit(topic).alias("topic"), "partition", "offset", "id", "time", "seen_by"))
        if produced is not None:
            # an id the generator aborted, in committed data: a read_committed reader saw it
            # (on the output topic: an app read the aborted input and its result was committed)
            aborted_ids = produced.filter(F.coalesce("aborted", F.lit(False))).select("id")
            frames.append(committed.join(aborted_ids, "id", "left_semi")
                          .select(F.lit(topic).alias("topic"), "partition", "offset", "id", "time",
                                  F.lit("read_committed").alias("seen_by")))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _stale(matched):
    """Per key, in output order: a value below the previous one, or unlike the true value for its id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("key").orderBy("partition", "offset")
    rows = (matched.filter(F.col("in_output") & F.col("value").isNotNull())
            .withColumn("previous", F.lag("value").over(w)))
    backwards = F.col("previous").isNotNull() & (F.col("value") < F.col("previous"))
    differs = F.col("true_value").isNotNull() & (F.col("value") != F.col("true_value"))
    return (rows.withColumn("reason", F.concat_ws("+", F.when(backwards, F.lit("went_backwards")),
                                                  F.when(differs, F.lit("differs_from_truth"))))
            .filter(F.col("reason") != "")
            .select("key", "id", "value", "previous", "true_value", "reason", "partition", "offset", "time"))


def _non_monotonic(read):
    """Within one app incarnation and partition, in the order the reads were logged."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    w = Window.partitionBy("app", "incarnation", "topic", "partition").orderBy("ts", "line")
    return (read.withColumn("previous_offset", F.lag("offset").over(w))
            .filter(F.col("offset") <= F.col("previous_offset"))
            .select("app", "incarnation", "topic", "partition", "offset", "previous_offset", "id",
                    F.col("ts").alias("time")))
