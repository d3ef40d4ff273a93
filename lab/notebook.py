"""What every notebook's Setup cell imports: one surface for the whole course.

    from lab.notebook import *          # display, Markdown, record, panel, kafka_cluster, setup, course_table
    from lab.scenarios import offset_expiry
    setup()
"""
from __future__ import annotations

from IPython.display import Markdown, display

from .cluster import kafka_cluster
from .experiment.panel import panel
from .results import record

__all__ = ["display", "Markdown", "record", "panel", "kafka_cluster", "setup", "COURSE", "course_table"]

# The course, in order: (notebook, the failure). Notebook 00 lists it.
COURSE = [
    ("00_setup_check", "Java, the embedded broker, clients, Spark, and the audit finding an injected duplicate "
                       "and an aborted transaction"),
    ("01_offset_expiry_reprocessing", "consumers re-read (or silently skip) a topic after their committed "
                                      "offsets expired (seed 001)"),
    ("02_transactional_id_expiry", "\"The producer attempted to use a producer id which is not currently "
                                   "assigned to its transactional id\", UnknownProducerIdException (seed 001)"),
    ("03_quota_driven_fencing", "slightly exceeding a producer quota fences exactly-once Kafka Streams (seed 000)"),
    ("04_stale_standby_cache", "stale reads from a cached store after standby -> active, KAFKA-14624 (seed 003)"),
    ("05_exactly_once_under_crashes", "does exactly-once survive a crash at every point? Exception handlers, crash "
                                      "loops and a changed state schema (seeds 001, 002)"),
    ("06_state_in_production", "what state costs in production: stores without TTL, the restore after a crash, "
                               "RocksDB memory, changelogs that are not an API (seed 002)"),
    ("07_when_streams_stop", "streams that stop moving: poll-interval rebalance loops, partitions that bound "
                             "parallelism, slow lookups (seed 002)"),
    ("08_diagnose_your_cluster", "is MY cluster exposed? A read-only diagnosis (`python -m lab doctor`), each "
                                 "prediction then proven on a risky cluster and a healthy control (issue 15)"),
]


def course_table() -> str:
    """The course as a markdown table (notebook 00 shows it): notebook and the failure it reproduces."""
    rows = ["| notebook | what it shows |", "|---|---|"]
    rows += [f"| [`{name}`]({name}.ipynb) | {what} |" for name, what in COURSE]
    return "\n".join(rows)


def setup(verbose: bool | None = None) -> str:
    """Figures stay in the saved notebook (offline); print and return the versions in use.

    verbose=True (or KAFKA_LAB_VERBOSE=1) sends Spark's and librdkafka's logs to the cells again
    (lab.logs), for debugging.
    """
    import confluent_kafka
    import plotly.io as pio
    import pyspark

    from .config import KAFKA_VERSION
    from .logs import set_verbose
    if verbose is not None:
        set_verbose(verbose)
    pio.renderers.default = "plotly_mimetype+notebook"
    line = (f"Kafka broker {KAFKA_VERSION} · confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]}) · pyspark {pyspark.__version__}")
    print(line)
    return line
