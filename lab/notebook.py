"""What every notebook's Setup cell imports: one surface for the whole course.

    from lab.notebook import *          # display, Markdown, record, panel, predict, kafka_cluster, setup,
                                        # course_table
    from lab.scenarios.nb07_when_streams_stop.poll_loop import lesson
    setup()
"""
from __future__ import annotations

from IPython.display import Markdown, display

from .cluster import kafka_cluster
from .experiment.panel import panel
from .experiment.predict import predict
from .recorded import record
from .scenarios import COURSE, course_table

__all__ = ["display", "Markdown", "record", "panel", "predict", "kafka_cluster", "setup", "COURSE", "course_table"]

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
