"""What every notebook's Setup cell imports: one surface for the whole course.

    from lab.notebook import *          # display, Markdown, record, panel, predict, kafka_cluster, setup,
                                        # course_table
    lesson = setup("07a")               # the versions in use, and this notebook's lesson

A notebook names its lesson by number, not by module: a module's name may name the failure, and the Setup cell is
read before the question.
"""
from __future__ import annotations

from IPython.display import Markdown, display

from .cluster import kafka_cluster
from .toolbox.panel import panel
from .toolbox.predict import predict
from .toolbox.room import join_room
from .record.recorded import record
from .scenarios import COURSE, course_table, notebook

__all__ = ["display", "Markdown", "record", "panel", "predict", "kafka_cluster", "setup", "COURSE", "course_table",
           "join_room"]

def one_line_errors() -> None:
    """In this kernel, a LabError raised in a cell (a value out of range, a refused fix, a jar missing offline) shows
    as its message alone, which says what to do, not as a traceback; any other error keeps its traceback. The cell
    still fails, so Run All stops there."""
    from IPython import get_ipython

    from .errors import LabError
    shell = get_ipython()
    if shell is None:
        return

    def message_alone(shell, etype, value, tb, tb_offset=None):
        # an error output as any error's (its name and message, for Jupyter and papermill), its one line the only
        # one shown: _showtraceback is where a kernel sends an error (ipykernel's override), frames or not
        shell._showtraceback(etype, value, shell.InteractiveTB.get_exception_only(etype, value))
    shell.set_custom_exc((LabError,), message_alone)


def setup(number: str | None = None, verbose: bool | None = None):
    """Figures stay in the saved notebook (offline); print the versions in use. Returns the lesson of notebook
    `number` ("07a"), or the versions line when no number is given.

    verbose=True (or KAFKA_LAB_VERBOSE=1) sends Spark's and librdkafka's logs to the cells again
    (lab.record.logs), for debugging.
    """
    import confluent_kafka
    import plotly.io as pio
    import pyspark

    from .config import KAFKA_VERSION
    from .record.logs import set_verbose
    if verbose is not None:
        set_verbose(verbose)
    one_line_errors()
    pio.renderers.default = "plotly_mimetype+notebook"
    line = (f"Kafka broker {KAFKA_VERSION} · confluent-kafka {confluent_kafka.version()[0]} "
            f"(librdkafka {confluent_kafka.libversion()[0]}) · pyspark {pyspark.__version__}")
    print(line)
    return notebook(number).lesson if number is not None else line
