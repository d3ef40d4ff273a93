"""What chapter 05's four lessons share: their parameters (each lesson takes its own and the COMMON ones), the
rules that check them, the broker they need, their Predict questions, and where a run's broker log is.

    05a crash_points        a crash at every point of the commit, under each guarantee
    05b exception_handlers  a poison record under each exception handler
    05c schema_change       version 2 of an app meets version 1's state
    05d production_errors   an output record the broker refuses, under the production exception handler
"""
from __future__ import annotations

from ...cluster import parse_version
from ...config import KAFKA_VERSION
from ...toolbox import Param, Run
from ...toolbox import checks
from .answers import DUPLICATE_ANSWERS, HANDLER_ANSWERS, HANDLER_RUNS, REFUSED_ANSWERS, SCHEMA_FATES
from .streams_app import (CRASH_POINTS, GUARANTEES, HANDLERS, KIP_1034, MAIN, PRODUCTION_HANDLERS, SCHEMA_MODES,
                          sources)

OLDEST_SUPPORTED = (3, 0, 0)   # exactly_once_v2, the uncaught exception handler, the processor API
KIP_1033 = (3, 9, 0)           # ProcessingExceptionHandler (processing.exception.handler)


def check_streams_version(version: str, name: str = "STREAMS_VERSION") -> None:
    """Resolve (and compile against) the Kafka Streams jars of `version` now, before anything starts: the app's
    sources at that version (streams_app.sources), once it is a version at all."""
    checks.check_version(version, name, lambda v: checks.build_streams_program(v, MAIN, sources(v)),
                         oldest=OLDEST_SUPPORTED, why="exactly_once_v2 and the uncaught exception handler")


def has_kip_1033(version: str) -> bool:
    return parse_version(version) >= KIP_1033


def _kip_1033_needs_3_9(p: dict) -> str | None:
    wanted = [f"{what}" for what, modes in (("HANDLERS", p.get("handlers", ())),
                                            ("SCHEMA_MODES", p.get("schema_modes", ()))) if "continue" in modes]
    if wanted and not has_kip_1033(p["handler_version"]):
        return (f"{' and '.join(wanted)} ask for 'continue', the KIP-1033 ProcessingExceptionHandler, which Kafka "
                f"Streams {p['handler_version']} (HANDLER_VERSION) does not have: it arrived in 3.9.0. Choose "
                "HANDLER_VERSION 3.9.0 or later, or drop 'continue'.")
    return None


def _dead_letter_needs_4_2(p: dict) -> str | None:
    if "dead_letter" in p.get("handlers", ()) and parse_version(p["handler_version"]) < KIP_1034:
        return (f"HANDLERS asks for 'dead_letter', Kafka Streams' dead-letter topic (KIP-1034, "
                f"errors.dead.letter.queue.topic.name), which Kafka Streams {p['handler_version']} (HANDLER_VERSION) "
                "does not have: it arrived in 4.2.0. Choose HANDLER_VERSION 4.2.0 or later, or drop 'dead_letter'.")
    return None


# The refused output's value is REFUSE_BYTES of padding in a JSON record of about 150 bytes; a record batch adds its
# own header (61 bytes) and the record's (about 10). The producer itself refuses a record over max.request.size
# (1 MB by default) before the broker sees it: a different failure, so the padding stays well below it.
RECORD_OVERHEAD = 300
MAX_REQUEST_SIZE = 1_048_576


def _refused_fits_the_request(p: dict) -> str | None:
    if p["refuse_bytes"] + RECORD_OVERHEAD > MAX_REQUEST_SIZE:
        return (f"REFUSE_BYTES {p['refuse_bytes']:,} would make a record above the producer's max.request.size "
                f"(1 MB): the producer, not the broker, would refuse it. Keep it below "
                f"{MAX_REQUEST_SIZE - RECORD_OVERHEAD:,}.")
    return None


_ALL = (
    Param("crash_points", ["before_read", "during_processing", "after_send_before_commit", "after_commit"],
          "where the app halts once (none: no crash)", choices=CRASH_POINTS),
    Param("guarantees", ["exactly_once_v2", "at_least_once"], "processing.guarantee of each crash run",
          choices=GUARANTEES),
    Param("streams_version", KAFKA_VERSION, "Kafka Streams version of the crash runs", check=check_streams_version),
    Param("records", 200, "input records per run", lo=10, hi=100_000),
    Param("crash_at", 80, "the app halts at its N-th record (read, processed or acknowledged), once it has "
          "committed and sent an output since", lo=1, hi=100_000),
    Param("rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("keys", 10, "distinct keys counted", lo=1, hi=10_000),
    Param("partitions", 2, "partitions of every topic (one task each)", lo=1, hi=12),
    Param("commit_interval_ms", 1500, "commit.interval.ms: how much work a commit covers", lo=100, hi=9000,
          unit="ms", why="below Streams' exactly-once transaction.timeout.ms (10 s)"),
    Param("handlers", ["shutdown_client", "replace_thread", "continue", "dead_letter", "deserialization"],
          "exception-handler runs, one each: a record the processor throws on (for deserialization: an input that "
          "cannot be deserialized)", choices=HANDLERS),
    Param("handler_version", KAFKA_VERSION, "Kafka Streams version of the handler and production-error runs, and "
          "of the schema mode continue", check=lambda v: check_streams_version(v, "HANDLER_VERSION")),
    Param("schema_streams_version", "3.8.1", "Kafka Streams version of the schema-change runs other than continue "
          "(continue needs 3.9+ and runs on HANDLER_VERSION; 3.8.1 is the last release before that handler)",
          check=lambda v: check_streams_version(v, "SCHEMA_STREAMS_VERSION")),
    Param("production_handlers", ["default"],
          "production-error runs, one each: the broker refuses one output record, and this production exception "
          "handler answers (default: Kafka's own)", choices=PRODUCTION_HANDLERS),
    Param("production_guarantee", "at_least_once", "processing.guarantee of the production-error runs",
          choices=GUARANTEES),
    Param("other_guarantee_handlers", [], "production-error runs made again under the other guarantee",
          choices=PRODUCTION_HANDLERS),
    Param("refuse_bytes", 20_000, "bytes of padding in the output of the middle record", lo=0, hi=2_000_000,
          unit="bytes"),
    Param("output_max_bytes", 8192, "max.message.bytes of the output topic of the production-error runs",
          lo=1024, hi=8_388_608, unit="bytes"),
    Param("schema_modes", ["shutdown_client", "replace_thread", "continue"],
          "schema-change runs: how version 2 meets version 1's state", choices=SCHEMA_MODES),
    Param("watch_seconds", 10.0, "how long the run keeps watching each app: it moves on once the app's output is "
          "complete, or this long after an exception, whichever comes first (a deployment restarts the app "
          "whenever it stops)", lo=5, hi=300, unit="s"),
)
PARAMS = {param.name: param for param in _ALL}
# what every lesson of the chapter takes: the input, its keys and partitions, the commit interval
COMMON = ("records", "rate", "keys", "partitions", "commit_interval_ms")


def params(*names: str) -> list[Param]:
    """A lesson's parameters: its own, then the COMMON ones."""
    return [PARAMS[name] for name in (*names, *COMMON)]


def needs(p: dict) -> dict:
    """One broker at the lab's version; aborted-by-timeout transactions are swept every second."""
    return dict(nodes=1, version=KAFKA_VERSION,
                broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})


def question(p: dict) -> tuple:
    """The crash lesson's Predict step: after which crash points at-least-once writes duplicates."""
    return (f"Under at_least_once the app is killed (kill -9) once per run, at one of the four crash points of its "
            f"{p['crash_at']}th record, then restarted. After which crash points does a read_committed reader of its "
            "output get some inputs twice?", DUPLICATE_ANSWERS)


HOW_HANDLED = {
    "shutdown_client": "Kafka's default uncaught exception handler, SHUTDOWN_CLIENT, with a deployment that "
                       "restarts the app whenever it stops",
    "replace_thread": "the uncaught exception handler answering REPLACE_THREAD",
    "continue": "a processing exception handler answering CONTINUE",
}


def handler_question(p: dict) -> tuple:
    """The handler lesson's Predict step: which of three answers to the exception get the app past the record."""
    runs = [f"`{h}` ({HOW_HANDLED[h]})" for h in HANDLER_RUNS]
    runs = ", ".join(runs[:-1]) + " and " + runs[-1]
    return ("The processor throws on one input, the middle one, whose value it cannot parse. Three apps meet it: "
            f"{runs}. Which of them get past that record, to the inputs behind it?", HANDLER_ANSWERS)


def production_question(p: dict) -> tuple:
    """The production-error lesson's Predict step: which of three runs get past the record the broker refuses."""
    return (f"One output record ({p['refuse_bytes']:,} bytes of padding) goes to a topic whose max.message.bytes is "
            f"{p['output_max_bytes']:,}, and a deployment restarts the app whenever it stops. Three runs: Kafka's "
            "default production exception handler under at_least_once, and a production exception handler answering "
            "CONTINUE for a record too large, once under at_least_once and once under exactly_once_v2. Which of them "
            "get past that record, to the inputs behind it?", REFUSED_ANSWERS)


def schema_question(p: dict) -> tuple:
    """The schema lesson's Predict step: which of version 2's inputs come out under CONTINUE."""
    return ("Version 2 of the app expects a new format in its state store and is deployed with the same "
            "application.id while input keeps coming, with a processing exception handler answering CONTINUE "
            f"(Kafka Streams {p['handler_version']}). Of the inputs version 2 reads, which come out?", SCHEMA_FATES)


def _broker_log(lab: Run):
    try:
        return lab.cluster.log_path()
    except Exception:  # an external cluster: no broker log to quote
        return None
