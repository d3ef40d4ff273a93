"""The Kafka Streams app every run of chapter 05 drives (lab/java/EosCrashApp.java): the crash points,
guarantees, handlers and schema modes it knows, the sources it is compiled from at a version (sources), the Streams
log lines the runs look for, one JVM's configuration (_app), starting an incarnation until it is RUNNING (_start)
and the error when it fails (_fail).
"""
from __future__ import annotations

import re
import time

from ...cluster import parse_version
from ...errors import LabError
from ...toolbox import Run
from ...record.evidence import STATE_WIPE, STATE_WIPE_ACTION
from ...runtime.programs import JavaProgram

MAIN, SOURCES = "EosCrashApp", ["EosCrashApp.java", "EosCrashHandlers.java", "Lab.java", "LabStreams.java"]
CRASH_POINTS = ("none", "before_read", "during_processing", "after_send_before_commit", "after_commit")
GUARANTEES = ("exactly_once_v2", "at_least_once")
HANDLERS = ("shutdown_client", "replace_thread", "continue", "dead_letter", "deserialization")
# the production exception handler, when the broker refuses an output record (production_errors)
PRODUCTION_HANDLERS = ("default", "continue", "route")
SCHEMA_MODES = ("shutdown_client", "replace_thread", "continue", "tolerant")
KIP_1034 = (4, 2, 0)   # the dead-letter queue (errors.dead.letter.queue.topic.name), and the handlers' Response
# The production exception handlers in the form of Kafka Streams 4.2+ (handleError() answering a Response), compiled
# only against those versions: the older ones run EosCrashHandlers', which answer the enum that 4.2 deprecated.
RESPONSES, ENUM_HANDLERS = "EosCrashResponses", "EosCrashHandlers"
CONTINUE_HANDLER = "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler"
DESER_CONTINUE = "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"
SHORT = {"exactly_once_v2": "EOS v2", "at_least_once": "ALOS"}
# why the store was wiped after the crash (the version's own words), and that it was
WIPE_LINE = f"{STATE_WIPE}|{STATE_WIPE_ACTION}"
# Streams' producer on (re)start: a new epoch for the same transactional.id fences the killed one.
EPOCH_LINE = r"ProducerId set to \d+ with epoch \d+"


def sources(version: str) -> list[str]:
    """The app's sources at Kafka Streams `version`: EosCrashResponses.java too from 4.2 on."""
    return SOURCES + ([f"{RESPONSES}.java"] if parse_version(version) >= KIP_1034 else [])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _app(lab: Run, name: str, version: str, app_id: str, topics: list, guarantee: str, p: dict, **lab_props):
    """One Streams JVM of this scenario (not started)."""
    state = lab.folder / app_id / "state"
    props = {"application.id": app_id, "bootstrap.servers": lab.bootstrap, "processing.guarantee": guarantee,
             "commit.interval.ms": p["commit_interval_ms"], "num.stream.threads": 1, "state.dir": state,
             "session.timeout.ms": 6000, "heartbeat.interval.ms": 1500,
             # Streams' producer lingers 100 ms: send at once, so what is processed is on the broker
             "producer.linger.ms": 5,
             "lab.input.topic": topics[0], "lab.output.topic": topics[1], "lab.counts.topic": topics[2],
             "lab.crash.point": "none", "lab.crash.at": 0, "lab.crash.marker": lab.folder / app_id / "crashed",
             "lab.mode": "crash", "lab.handler": "shutdown_client", "lab.strict.input": "false",
             "lab.incarnation": 1}
    props.update({k.replace("_", ".") if k.startswith("lab_") else k: v for k, v in lab_props.items()})
    return lab.program(JavaProgram(name, version, MAIN, sources(version), heap="192m", properties=props))


def _start(lab: Run, prog: JavaProgram, incarnation: int, what: str, timeout: float = 90) -> float:
    """Start an incarnation and wait for Kafka Streams RUNNING (or its death); returns when it ran."""
    prog.properties["lab.incarnation"] = incarnation
    since = time.time()
    prog.start()
    lab.event(prog.name, f"start #{incarnation}", since, tone="info")

    def running():
        # RUNNING, or already failing: a thread that dies on its first record never lets the client reach RUNNING
        rows = [r for r in prog.lab_lines() if r.get("incarnation") == incarnation
                and (r.get("kind") == "state" and r.get("to") == "RUNNING" or r.get("kind") == "uncaught")]
        return rows[0]["ts"] if rows else (None if prog.alive() else -1.0)
    at = lab.wait(running, timeout, f"{what} (incarnation {incarnation}) to reach RUNNING")
    return at


def _fail(prog: JavaProgram, why: str) -> LabError:
    tail = "\n".join(prog.process.log().splitlines()[-15:]) if prog.process else ""
    return LabError(f"{prog.name}: {why}; last lines of {prog.log_path}:\n{tail}")
