"""Notebook 01's Spark Structured Streaming queries, run inside offset_expiry's experiment, for section 7 ("Spark
Structured Streaming keeps its offsets in the checkpoint") and the spark-checkpoint mitigation of section 8:
spark-checkpoint reads the main topic across the groups' downtime; spark-strict and spark-lenient
(failOnDataLoss true / false) read a topic whose retention deletes a batch before they read it.
"""
from __future__ import annotations

from ...audit import RESET_KINDS
from ...toolbox.admin import set_topic_config, topic_offsets
from ...toolbox.streaming import CheckpointedQuery
from ...record.history import History

DATA_LOSS_BATCH = 10  # records per step of the failOnDataLoss demo (read / deleted unread / new)
SPARK_VARIANTS = {
    "spark-checkpoint": "offsets in the checkpoint: resumes exactly after the same window",
    "spark-strict": "failOnDataLoss=true: fails when retention deleted data it had not read",
    "spark-lenient": "failOnDataLoss=false: carries on past the deleted data (skips it)",
}


class SparkQueries:
    """spark-checkpoint: offsets in its checkpoint. spark-strict / -lenient: failOnDataLoss true / false.
    `x` is offset_expiry's experiment: its run, admin client, topics, histories and produce()."""

    def __init__(self, x):
        self.x, self.verdicts = x, {}
        self.aged = History(x.run.folder / "aged", x.run.id)
        self.queries = {n: CheckpointedQuery(x.run, n, x.hist[n], x.topic if n == "spark-checkpoint" else x.aged,
                                             fail_on_data_loss=n != "spark-lenient") for n in SPARK_VARIANTS}

    errors = property(lambda self: {n: q.error for n, q in self.queries.items() if q.error})

    def first_run(self) -> None:
        self.queries["spark-checkpoint"].once()

    def data_loss(self) -> None:
        """Read A, stop; B arrives and topic retention deletes it unread; C arrives; restart; audit both."""
        from ...audit import audit
        x, pair = self.x, ("spark-strict", "spark-lenient")
        x.produce("aged A", DATA_LOSS_BATCH, x.aged, self.aged)
        for name in pair:
            self.queries[name].once()
        x.produce("aged B", DATA_LOSS_BATCH, x.aged, self.aged)
        end, log_start = topic_offsets(x.admin, x.aged)[0], lambda: topic_offsets(x.admin, x.aged, spec="earliest")
        set_topic_config(x.admin, x.aged, **{"retention.ms": 1000})
        x.run.wait(lambda: log_start()[0] >= end, 60, f"topic retention to delete the unread records of {x.aged}",
                   evidence=log_start)
        set_topic_config(x.admin, x.aged, **{"retention.ms": 7 * 24 * 3600 * 1000})
        x.produce("aged C", DATA_LOSS_BATCH, x.aged, self.aged)
        for name in pair:
            x.run.event(name, "retention deleted", tone="fault", detail=f"{x.aged}: offsets below {end} deleted")
            self.queries[name].once()
        for name in pair:
            x.hist[name].path("produced").write_bytes(self.aged.path("produced").read_bytes())
            self.verdicts[name] = audit(x.hist[name], kinds=RESET_KINDS,
                                        expect="anomalies" if name == "spark-lenient" else "clean")
