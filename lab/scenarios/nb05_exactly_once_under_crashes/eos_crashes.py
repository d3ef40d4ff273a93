"""Notebook 05's scenario, what the notebook calls: SPEC (its parameters and their rules), needs() (one broker)
and run(), which drives every crash run (crash_points), exception-handler run (exception_handlers),
production-error run (production_errors) and schema-change run (schema_change) on that broker and returns an
EosCrashResult (report). The names the notebook, the tests and the benchmark use are importable from here
(__all__).
"""
from __future__ import annotations

import threading

from ...cluster import parse_version
from ...config import KAFKA_VERSION
from ...experiment import Param, Run, Spec, Timeline
from ...experiment.checks import check_streams_program
from ...experiment.memory import child_pids, largest, peak_rss
from ...experiment.parts import Parts
from .analysis import app_events, loop_rate, measure
from .crash_points import _crash_run, _markers
from .exception_handlers import KIP_1034, _handler_run, handler_props
from .production_errors import _production_run, production_label, production_props
from .report import FATES, OUTPUT_ANSWERS, Crash, EosCrashResult, Failing, asked_point
from .schema_change import _schema_run, schema_version
from .streams_app import (CONTINUE_HANDLER, CRASH_POINTS, DESER_CONTINUE, GUARANTEES, HANDLERS, MAIN,
                          PRODUCTION_HANDLERS, SCHEMA_MODES, SHORT, SOURCES)

__all__ = ["SPEC", "needs", "run", "LESSONS", "predict", "run_lesson", "together", "mitigate_crashes",
           "mitigate_handlers", "mitigate_schema", "mitigate_refused",
           "EosCrashResult", "Crash", "Failing", "check_streams_version", "has_kip_1033", "schema_version",
           "handler_props", "production_props", "measure", "app_events", "loop_rate", "CRASH_POINTS", "GUARANTEES",
           "HANDLERS", "PRODUCTION_HANDLERS", "SCHEMA_MODES", "CONTINUE_HANDLER", "DESER_CONTINUE", "SHORT",
           "RECORD_OVERHEAD"]

OLDEST_SUPPORTED = (3, 0, 0)   # exactly_once_v2, the uncaught exception handler, the processor API
KIP_1033 = (3, 9, 0)           # ProcessingExceptionHandler (processing.exception.handler)


def check_streams_version(version: str, name: str = "STREAMS_VERSION") -> None:
    """Resolve (and compile against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="exactly_once_v2 and the uncaught exception handler")


def has_kip_1033(version: str) -> bool:
    return parse_version(version) >= KIP_1033


def _kip_1033_needs_3_9(p: dict) -> str | None:
    wanted = [f"{what}" for what, modes in (("HANDLERS", p["handlers"]), ("SCHEMA_MODES", p["schema_modes"]))
              if "continue" in modes]
    if wanted and not has_kip_1033(p["handler_version"]):
        return (f"{' and '.join(wanted)} ask for 'continue', the KIP-1033 ProcessingExceptionHandler, which Kafka "
                f"Streams {p['handler_version']} (HANDLER_VERSION) does not have: it arrived in 3.9.0. Choose "
                "HANDLER_VERSION 3.9.0 or later, or drop 'continue'.")
    return None


def _dead_letter_needs_4_2(p: dict) -> str | None:
    if "dead_letter" in p["handlers"] and parse_version(p["handler_version"]) < KIP_1034:
        return (f"HANDLERS asks for 'dead_letter', Kafka Streams' dead-letter topic (KIP-1034, "
                f"errors.dead.letter.queue.topic.name), which Kafka Streams {p['handler_version']} (HANDLER_VERSION) "
                "does not have: it arrived in 4.2.0. Choose HANDLER_VERSION 4.2.0 or later, or drop 'dead_letter'.")
    return None


def _something_to_run(p: dict) -> str | None:
    if not (p["crash_points"] and p["guarantees"]) and not any(p[k] for k in ("handlers", "production_handlers",
                                                                             "production_compare", "schema_modes")):
        return "Nothing to run: give CRASH_POINTS and GUARANTEES, HANDLERS, PRODUCTION_HANDLERS or SCHEMA_MODES."
    return None


# The refused output's value is REFUSE_BYTES of padding in a JSON record of about 150 bytes; a record batch adds its
# own header (61 bytes) and the record's (about 10). The producer itself refuses a record over max.request.size
# (1 MB by default) before the broker sees it: a different failure, so the padding stays well below it.
RECORD_OVERHEAD = 300
MAX_REQUEST_SIZE = 1_048_576


def _refused_fits_the_request(p: dict) -> str | None:
    if (p["production_handlers"] or p["production_compare"]) and p["refuse_bytes"] + RECORD_OVERHEAD > MAX_REQUEST_SIZE:
        return (f"REFUSE_BYTES {p['refuse_bytes']:,} would make a record above the producer's max.request.size "
                f"(1 MB): the producer, not the broker, would refuse it. Keep it below "
                f"{MAX_REQUEST_SIZE - RECORD_OVERHEAD:,}.")
    return None


SPEC = Spec(
    Param("crash_points", ["before_read", "during_processing", "after_send_before_commit", "after_commit"],
          "where the app halts once (none: no crash, the control)", choices=CRASH_POINTS),
    Param("guarantees", ["exactly_once_v2", "at_least_once"], "processing.guarantee of each crash run",
          choices=GUARANTEES),
    Param("streams_version", KAFKA_VERSION, "Kafka Streams version of the crash runs", check=check_streams_version),
    Param("records", 200, "input records per run", lo=10, hi=100_000),
    Param("crash_at", 80, "the app halts at its N-th record (read, processed or acknowledged), once it committed "
          "and an output is in flight", lo=1, hi=100_000),
    Param("rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    Param("keys", 10, "distinct keys counted", lo=1, hi=10_000),
    Param("partitions", 2, "partitions of every topic (one task each)", lo=1, hi=12),
    Param("commit_interval_ms", 1500, "commit.interval.ms: how much work a commit covers", lo=100, hi=9000,
          unit="ms", why="below Streams' exactly-once transaction.timeout.ms (10 s)"),
    Param("handlers", ["shutdown_client", "replace_thread", "continue", "dead_letter", "deserialization"],
          "exception-handler runs: a poison record (or a malformed input for deserialization)", choices=HANDLERS),
    Param("handler_version", KAFKA_VERSION, "Kafka Streams version of the handler runs and of schema 'continue'",
          check=lambda v: check_streams_version(v, "HANDLER_VERSION")),
    Param("old_version", "3.8.1", "Kafka Streams version (before 3.9) of the other schema-change runs",
          check=lambda v: check_streams_version(v, "OLD_VERSION")),
    Param("production_handlers", ["fail", "continue", "route"],
          "production-error runs: the broker refuses one output record, and the production exception handler "
          "answers (fail: Kafka's default)", choices=PRODUCTION_HANDLERS),
    Param("production_guarantee", "at_least_once", "processing.guarantee of the production-error runs",
          choices=GUARANTEES),
    Param("production_compare", ["continue"], "production-error runs made again under the other guarantee",
          choices=PRODUCTION_HANDLERS),
    Param("refuse_bytes", 20_000, "bytes of padding in the output of the middle record", lo=0, hi=2_000_000,
          unit="bytes"),
    Param("output_max_bytes", 8192, "max.message.bytes of the output topic of the production-error runs",
          lo=1024, hi=8_388_608, unit="bytes"),
    Param("schema_modes", ["shutdown_client", "replace_thread", "continue", "tolerant"],
          "schema-change runs: how version 2 meets version 1's state", choices=SCHEMA_MODES),
    Param("loop_seconds", 10.0, "how long a failing app is watched (and restarted) once it fails", lo=5, hi=300,
          unit="s"),
    rules=(_kip_1033_needs_3_9, _dead_letter_needs_4_2, _refused_fits_the_request, _something_to_run),
)


def needs(p: dict) -> dict:
    """One broker at the lab's version; aborted-by-timeout transactions are swept every second."""
    return dict(nodes=1, version=KAFKA_VERSION,
                broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})


def question(p: dict) -> tuple:
    """The crash lesson's Predict step: what exactly-once leaves in the output after a crash at the asked point."""
    point = asked_point(p["crash_points"]) if p["crash_points"] else "none"
    when = ("runs without a crash" if point == "none" else
            f"is killed (kill -9) at the point `{point}` of its {p['crash_at']}th record, then restarted")
    return (f"Under exactly_once_v2 the app {when}. What does the read_committed output hold?", OUTPUT_ANSWERS)


HOW_HANDLED = {
    "shutdown_client": "Kafka's default uncaught exception handler (SHUTDOWN_CLIENT), with a restart from outside "
                       "after each stop",
    "replace_thread": "the uncaught exception handler answering REPLACE_THREAD",
    "continue": "a ProcessingExceptionHandler answering CONTINUE (KIP-1033)",
    "dead_letter": "a ProcessingExceptionHandler answering CONTINUE with a dead-letter topic (KIP-1034)",
    "deserialization": "the DeserializationExceptionHandler answering CONTINUE",
    "tolerant": "a reader that also understands version 1's format",
}


def handler_question(p: dict) -> tuple:
    """The handler lesson's Predict step: what becomes of the app and of the poison record."""
    handler = "shutdown_client" if "shutdown_client" in p["handlers"] else (p["handlers"] or ["shutdown_client"])[0]
    what = "a malformed input it cannot deserialize" if handler == "deserialization" else \
        "a poison record: the processor throws on it, on every attempt"
    return f"The app meets {what}, under {HOW_HANDLED[handler]}. What happens?", FATES


PRODUCTION_HOW = {
    "fail": "Kafka's default production exception handler (FAIL), with a restart from outside after each stop",
    "continue": "a production exception handler answering CONTINUE for a record too large",
    "route": "a production exception handler that notes the refused record in a topic of its own, then answers "
             "CONTINUE",
}


def production_question(p: dict) -> tuple:
    """The production-error lesson's Predict step: the broker refuses one output record."""
    handler = "fail" if "fail" in p["production_handlers"] else (p["production_handlers"] or ["fail"])[0]
    how = PRODUCTION_HOW[handler]
    return (f"Under {p['production_guarantee']}, one output record ({p['refuse_bytes']:,} bytes of padding) goes to a "
            f"topic whose max.message.bytes is {p['output_max_bytes']:,}, under {how}. What happens?", FATES)


def schema_question(p: dict) -> tuple:
    """The schema lesson's Predict step: version 2 meets version 1's state."""
    mode = "shutdown_client" if "shutdown_client" in p["schema_modes"] else \
        (p["schema_modes"] or ["shutdown_client"])[0]
    return ("Version 2 of the app expects a new format in its state store and is deployed with the same "
            f"application.id while input keeps coming, under {HOW_HANDLED[mode]}. What happens?", FATES)


def run(cluster=None, progress: bool = True, **params) -> "EosCrashResult":
    """Every crash run, handler run and schema run on one broker; returns what each measured."""
    p = SPEC.validate(**params)
    with Run("eos-crashes", cluster=cluster, progress=progress, spark_audit=True, **needs(p)) as lab:
        stop = threading.Event()
        rss = lab.background(peak_rss, stop, lambda: {"apps": child_pids(MAIN), "brokers": child_pids("kafka.Kafka")})
        crashes = {}
        for g in p["guarantees"]:
            for point in p["crash_points"]:
                crashes[f"{point} · {SHORT[g]}"] = _crash_run(lab, point, g, p)
        _markers(lab, crashes)
        handlers = {h: _handler_run(lab, h, p) for h in p["handlers"]}
        schema = {m: _schema_run(lab, m, p) for m in p["schema_modes"]}
        other = next(g for g in GUARANTEES if g != p["production_guarantee"])
        runs = [(h, p["production_guarantee"]) for h in p["production_handlers"]]
        runs += [(h, other) for h in p["production_compare"]]
        refused = {production_label(h, g, p): _production_run(lab, h, g, p) for h, g in runs}
        bootstrap, broker_log = lab.bootstrap, _broker_log(lab)
        stop.set()
        peak = rss.result(10)
    return EosCrashResult("eos_crashes", p, lab.id, lab.timeline, crashes=crashes, handlers=handlers,
                          refused=refused, schema=schema, bootstrap=bootstrap, broker_log=broker_log, peak_rss_mb=peak)


def _merged(ran: list, params: dict) -> "EosCrashResult":
    """The results of the sections that ran, as one (none: a lesson that did not run)."""
    first = ran[0] if ran else None
    return EosCrashResult("eos_crashes", params, first.run_id if first else "",
                          Timeline.joined(*(r.timeline for r in ran)) if ran else Timeline(0),
                          crashes={k: c for r in ran for k, c in r.crashes.items()},
                          handlers={k: f for r in ran for k, f in r.handlers.items()},
                          refused={k: f for r in ran for k, f in r.refused.items()},
                          schema={k: f for r in ran for k, f in r.schema.items()},
                          bootstrap=first.bootstrap if first else "", broker_log=first.broker_log if first else None,
                          peak_rss_mb=largest(*(r.peak_rss_mb for r in ran)))


# The notebook's lessons, each its own section: the parameters that are that lesson's runs (run_lesson empties the
# others'; a crash lesson also needs a guarantee), and its Predict question.
LESSONS = Parts(SPEC, run, {"crashes": (("crash_points",), question), "handlers": (("handlers",), handler_question),
                            "schema": (("schema_modes",), schema_question),
                            "refused": (("production_handlers", "production_compare"), production_question)},
                merge=_merged,
                runs=lambda lesson, p: any(p[k] for k in LESSONS.lessons[lesson][0])
                and (lesson != "crashes" or bool(p["guarantees"])))
predict, run_lesson, together = LESSONS.predict, LESSONS.run_lesson, LESSONS.together
# Each lesson's Mitigate step: its runs again with the learner's setting (FIX_<LESSON>) over the notebook's: the
# exactly-once guarantee, a dead-letter topic, a tolerant reader, a topic that takes the record. The production-error
# lesson's runs Kafka's default handler (fail) alone: the fix is in the topic, not in the handler.
mitigate_crashes = LESSONS.mitigate("crashes")
mitigate_handlers = LESSONS.mitigate("handlers")
mitigate_schema = LESSONS.mitigate("schema")
mitigate_refused = LESSONS.mitigate("refused", production_handlers=["fail"], production_compare=[])


def _broker_log(lab: Run):
    try:
        return lab.cluster.log_path()
    except Exception:  # an external cluster: no broker log to quote
        return None
