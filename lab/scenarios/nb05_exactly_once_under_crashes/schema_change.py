"""Notebook 05 section 7, the schema-change runs: version 1 of the app writes its state, version 2 (same
application.id, the Kafka Streams version schema_version() picks) reads it, under each mode.
"""
from __future__ import annotations

from ...experiment import Run
from .crash_loop import _failing_run
from .report import Failing
from .streams_app import CONTINUE_HANDLER, _slug


def schema_version(mode: str, p: dict) -> str:
    """'continue' needs KIP-1033 (HANDLER_VERSION); the others show the pre-3.9 behaviour (OLD_VERSION)."""
    return p["handler_version"] if mode == "continue" else p["old_version"]


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
