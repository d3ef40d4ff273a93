"""Lesson 05c, the schema-change runs: version 1 of the app writes its state, version 2 (same
application.id, the Kafka Streams version schema_version() picks) reads it, under each mode.
"""
from __future__ import annotations

from ...toolbox import Run
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from .crash_loop import _failing_run
from . import eos_crashes as chapter
from .exercises import EXERCISES
from .answers import schema_answer
from .report import EosCrashResult, Failing
from .streams_app import CONTINUE_HANDLER, _slug


def schema_version(mode: str, p: dict) -> str:
    """'continue' needs KIP-1033 (HANDLER_VERSION, 3.9+); the others run on SCHEMA_STREAMS_VERSION (3.8.1 by
    default: a release without a processing exception handler at all)."""
    return p["handler_version"] if mode == "continue" else p["schema_streams_version"]


def _schema_run(lab: Run, mode: str, p: dict) -> "Failing":
    label, version = f"schema {mode}", schema_version(mode, p)
    app_id = f"{lab.id}-s-{_slug(mode)}"
    lab.phase(f"{label}: version 1 writes {{\"count\": n}}, version 2 (Kafka Streams {version}, same application.id) "
              + ("reads both schemas (tolerant reader, migrates on read)" if mode == "tolerant"
                 else "expects {\"schema\": 2, \"total\": n}"))
    v2 = {"lab_mode": "v2-tolerant" if mode == "tolerant" else "v2",
          "lab_handler": "replace_thread" if mode == "replace_thread" else "shutdown_client"}
    if mode == "continue":
        v2["processing.exception.handler"] = CONTINUE_HANDLER
    result = _failing_run(lab, label, app_id, version, p, [("v1", {"lab_mode": "v1"}, 0.4), ("v2", v2, None)])
    result.poison = None
    return result


def run_lesson(lab: Run, p: dict) -> EosCrashResult:
    """Version 1, then version 2 under each mode of SCHEMA_MODES, with input flowing."""
    return EosCrashResult("schema", p, lab.id, lab.timeline, schema={m: _schema_run(lab, m, p) for m in p["schema_modes"]}, bootstrap=lab.bootstrap,
                          broker_log=chapter._broker_log(lab))


lesson = Lesson("schema", "A new state format", needs=chapter.needs, body=run_lesson,
                params=chapter.params("schema_modes", "handler_version", "schema_streams_version", "watch_seconds"),
                rules=[chapter._kip_1033_needs_3_9, something_to_run("schema_modes")], question=chapter.schema_question,
                measured_answer=schema_answer,
                exercises={1: EXERCISES["schema"]}, apps=(chapter.MAIN,), spark_audit=True)
