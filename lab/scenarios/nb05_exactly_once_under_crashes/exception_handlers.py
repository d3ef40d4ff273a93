"""Lesson 05b, the exception-handler runs: a poison record (or a malformed input) under each
handler, and the configuration each handler takes at a Kafka Streams version. dead_letter is CONTINUE with
errors.dead.letter.queue.topic.name (KIP-1034, 4.2+): the poison record goes to that topic with its error.
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
from .answers import handler_answer
from .report import EosCrashResult, Failing
from .streams_app import CONTINUE_HANDLER, DESER_CONTINUE, _slug


def _deser_key(version: str) -> str:
    return ("deserialization.exception.handler" if parse_version(version) >= (4, 0, 0)
            else "default.deserialization.exception.handler")


def dead_letter_topic(app_id: str) -> str:
    return f"{app_id}-dlq"


def handler_props(handler: str, version: str, poison: str, app_id: str = "") -> dict:
    """The app's configuration for one handler run."""
    props = {"lab_handler": "replace_thread" if handler == "replace_thread" else "shutdown_client"}
    if handler == "deserialization":
        props.update({"lab_strict_input": "true", _deser_key(version): DESER_CONTINUE})
    else:
        props["lab_poison_id"] = poison
    if handler in ("continue", "dead_letter"):
        props["processing.exception.handler"] = CONTINUE_HANDLER
    if handler == "dead_letter":
        props["errors.dead.letter.queue.topic.name"] = dead_letter_topic(app_id)
    return props


def dead_letter_row(m) -> dict:
    """A dead-letter record: the input's id (its raw value is the input record's) and the error headers."""
    try:
        record_id = json.loads(m.value()).get("id")
    except (TypeError, ValueError, AttributeError):
        record_id = None
    headers = {k: (v or b"").decode(errors="replace") for k, v in (m.headers() or [])}
    return {"id": record_id, "exception": headers.get("__streams.errors.exception"),
            "message": (headers.get("__streams.errors.message") or "")[:200],
            "from": f"{headers.get('__streams.errors.topic')}-{headers.get('__streams.errors.partition')}"
                    f"@{headers.get('__streams.errors.offset')}"}


def _handler_run(lab: Run, handler: str, p: dict) -> "Failing":
    label, version = f"handler {handler}", p["handler_version"]
    app_id = f"{lab.id}-h-{_slug(handler)}"
    poison = f"{app_id}-{p['records'] // 2}"
    lab.phase(f"{label}: Kafka Streams {version}, exactly_once_v2, "
              + ("a malformed input record" if handler == "deserialization" else f"poison record {poison}"))
    if handler == "dead_letter":
        lab.topics(dead_letter_topic(app_id), partitions=1)
    result = _failing_run(lab, label, app_id, version, p,
                          [("app", handler_props(handler, version, poison, app_id), None)],
                          drops_inputs=handler != "deserialization")
    result.poison = None if handler == "deserialization" else poison
    if handler == "dead_letter":
        with TopicReader(lab.bootstrap, dead_letter_topic(app_id), row=dead_letter_row) as reader:
            result.m["dead_letters"] = reader.to_end(30, strict=True)
    return result


def run_lesson(lab: Run, p: dict) -> EosCrashResult:
    """One app per handler of HANDLERS, each meeting its poison record, watched as a deployment would."""
    return EosCrashResult("handlers", p, lab.id, lab.timeline, handlers={h: _handler_run(lab, h, p) for h in p["handlers"]}, bootstrap=lab.bootstrap,
                          broker_log=chapter._broker_log(lab))


lesson = Lesson("handlers", "A record the processing cannot take", needs=chapter.needs, body=run_lesson,
                params=chapter.params("handlers", "handler_version", "watch_seconds"),
                rules=[chapter._kip_1033_needs_3_9, chapter._dead_letter_needs_4_2, something_to_run("handlers")],
                question=chapter.handler_question, measured_answer=handler_answer,
                exercises={1: EXERCISES["handlers"]}, apps=(chapter.MAIN,), spark_audit=True)
