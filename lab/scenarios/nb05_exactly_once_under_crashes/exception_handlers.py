"""Notebook 05 section 6, the exception-handler runs: a poison record (or a malformed input) under each
handler, and the configuration each handler takes at a Kafka Streams version.
"""
from __future__ import annotations

from ...cluster import parse_version
from ...experiment import Run
from .crash_loop import _failing_run
from .report import Failing
from .streams_app import CONTINUE_HANDLER, DESER_CONTINUE, _slug


def _deser_key(version: str) -> str:
    return ("deserialization.exception.handler" if parse_version(version) >= (4, 0, 0)
            else "default.deserialization.exception.handler")


def handler_props(handler: str, version: str, poison: str) -> dict:
    """The app's configuration for one handler run."""
    props = {"lab_handler": "replace_thread" if handler == "replace_thread" else "shutdown_client"}
    if handler == "deserialization":
        props.update({"lab_strict_input": "true", _deser_key(version): DESER_CONTINUE})
    else:
        props["lab_poison_id"] = poison
    if handler == "continue":
        props["processing.exception.handler"] = CONTINUE_HANDLER
    return props


def _handler_run(lab: Run, handler: str, p: dict) -> "Failing":
    label, version = f"handler {handler}", p["handler_version"]
    app_id = f"{lab.id}-h-{_slug(handler)}"
    poison = f"{app_id}-{p['records'] // 2}"
    lab.phase(f"{label}: Kafka Streams {version}, exactly_once_v2, "
              + ("a malformed input record" if handler == "deserialization" else f"poison record {poison}"))
    result = _failing_run(lab, label, app_id, version, p, [("app", handler_props(handler, version, poison), None)],
                          drops_inputs=handler != "deserialization")
    result.poison = None if handler == "deserialization" else poison
    return result
