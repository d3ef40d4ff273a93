"""Lesson 05d, the production-error runs: the output of one record is larger than its topic's max.message.bytes, so
the broker refuses it (RecordTooLargeException), and the production exception handler decides:

    default   Kafka's default handler: FAIL, the stream thread dies
    continue  a handler that drops a record too large: CONTINUE (ContinueTooLarge), Response.resume() from 4.2 on
    route     the same, after a note of the refused record goes to a topic of its own (RouteTooLarge)

each under PRODUCTION_GUARANTEE, and those of OTHER_GUARANTEE_HANDLERS again under the other guarantee.

The config key lost its "default." prefix in 4.0 (KIP-1056); the old one still works there, deprecated. From 4.2 on
(KIP-1034) a handler answers with a Response (Response.resume(), .fail(), .retry()) from handleError(), and the
ProductionExceptionHandlerResponse enum of handle() is deprecated: the app's handlers are EosCrashResponses' there,
EosCrashHandlers' before.
"""
from __future__ import annotations

import json

from ...cluster import parse_version
from ...toolbox import Run
from ...toolbox.consume import TopicReader
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from .crash_loop import _failing_run
from . import eos_crashes as chapter
from .exercises import EXERCISES
from .answers import refused_answer
from .report import EosCrashResult, Failing
from .streams_app import ENUM_HANDLERS, GUARANTEES, KIP_1034, RESPONSES, SHORT, _slug

HANDLER_CLASS = {"continue": "ContinueTooLarge", "route": "RouteTooLarge"}   # nested in EosCrashHandlers / EosCrashResponses


def handler_class(handler: str, version: str) -> str:
    """The handler's class at Kafka Streams `version`: the Response form from 4.2 on, the enum form before."""
    return f"{RESPONSES if parse_version(version) >= KIP_1034 else ENUM_HANDLERS}${HANDLER_CLASS[handler]}"


def production_key(version: str) -> str:
    return ("production.exception.handler" if parse_version(version) >= (4, 0, 0)
            else "default.production.exception.handler")


def refused_topic(app_id: str) -> str:
    return f"{app_id}-refused"


def production_props(handler: str, version: str, refuse_id: str, refuse_bytes: int, app_id: str = "") -> dict:
    """The app's configuration for one production-error run."""
    props = {"lab_refuse_id": refuse_id, "lab_refuse_bytes": refuse_bytes}
    if handler in HANDLER_CLASS:
        props[production_key(version)] = handler_class(handler, version)
    if handler == "route":
        props["lab_refused_topic"] = refused_topic(app_id)
    return props


def refused_row(m) -> dict:
    """A note of RouteTooLarge: the refused output's id, topic, size and error."""
    try:
        note = json.loads(m.value())
    except (TypeError, ValueError):
        note = {}
    return {"id": note.get("id"), "exception": (note.get("error") or "").split(":", 1)[0],
            "message": (note.get("error") or "")[:200], "from": f"{note.get('topic')}, {note.get('bytes')} bytes"}


def production_label(handler: str, guarantee: str, p: dict) -> str:
    """A run's name: the handler, and the guarantee when it is not the lesson's (OTHER_GUARANTEE_HANDLERS)."""
    return handler if guarantee == p["production_guarantee"] else f"{handler} · {SHORT[guarantee]}"


def _production_run(lab: Run, handler: str, guarantee: str, p: dict) -> "Failing":
    label, version = f"refused {production_label(handler, guarantee, p)}", p["handler_version"]
    app_id = f"{lab.id}-p-{_slug(production_label(handler, guarantee, p))}"
    refuse_id = f"{app_id}-{p['records'] // 2}"
    lab.phase(f"{label}: Kafka Streams {version}, {guarantee}, the output of {refuse_id} carries "
              f"{p['refuse_bytes']:,} bytes against max.message.bytes {p['output_max_bytes']:,}")
    if handler == "route":
        lab.topics(refused_topic(app_id), partitions=1)
    result = _failing_run(lab, label, app_id, version, p,
                          [("app", production_props(handler, version, refuse_id, p["refuse_bytes"], app_id), None)],
                          guarantee=guarantee,
                          output_config={"max.message.bytes": p["output_max_bytes"]})
    result.poison, result.aside = refuse_id, "the refused record is noted in its own topic"
    if handler == "route":
        with TopicReader(lab.bootstrap, refused_topic(app_id), row=refused_row) as reader:
            result.m["dead_letters"] = reader.to_end(30, strict=True)
    return result


def run_lesson(lab: Run, p: dict) -> EosCrashResult:
    """One app per production handler under PRODUCTION_GUARANTEE, then those of OTHER_GUARANTEE_HANDLERS under the other."""
    other = next(g for g in GUARANTEES if g != p["production_guarantee"])
    runs = [(h, p["production_guarantee"]) for h in p["production_handlers"]]
    runs += [(h, other) for h in p["other_guarantee_handlers"]]
    refused = {production_label(h, g, p): _production_run(lab, h, g, p) for h, g in runs}
    return EosCrashResult("refused", p, lab.id, lab.timeline, refused=refused, bootstrap=lab.bootstrap,
                          broker_log=chapter._broker_log(lab))


lesson = Lesson("refused", "A record the broker refuses", needs=chapter.needs, body=run_lesson,
                params=chapter.params("production_handlers", "production_guarantee", "other_guarantee_handlers", "refuse_bytes", "output_max_bytes",
                                      "handler_version", "watch_seconds"),
                rules=[chapter._refused_fits_the_request, something_to_run("production_handlers", "other_guarantee_handlers")],
                question=chapter.production_question, measured_answer=refused_answer,
                exercises={1: EXERCISES["refused"]}, apps=(chapter.MAIN,), spark_audit=True,
                mitigate_base={"production_handlers": ["default"], "other_guarantee_handlers": []})
