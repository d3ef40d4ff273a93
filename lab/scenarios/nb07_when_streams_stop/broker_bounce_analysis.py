"""Lesson 07d, a broker bounce under Kafka Streams: the lesson's arithmetic and what the bounce apps
recorded, turned into the lesson's rows. Pure functions: the variants of BOUNCE_APPS, who should die
(expected_to_die), the bounce's windows, and one app's row from its LAB lines, log evidence, committed offsets and
audit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...runtime.versions import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError

HANDLERS = ("shutdown_client", "replace_thread")
KIP_671 = (2, 8, 0)        # StreamsUncaughtExceptionHandler, and KIP-572's retries of a timed-out task
KIP_679 = (3, 0, 0)        # the producer's default acks went from 1 to all
VARIANT = re.compile(r"^(\d+\.\d+\.\d+)(?:/(\w+))?$")
APPS_LISTENER = "APPS"     # the apps' own listener on every broker (lab.cluster.kraft: extra_listener)
DEAD_STATES = ("ERROR", "PENDING_ERROR", "NOT_RUNNING", "PENDING_SHUTDOWN")
# The apps' own words, quoted as evidence (first match of each, per app).
LOG_LINES = {
    "all_threads_died": r"All stream threads have died",
    "handler": r"registered exception handler opted to \w+|Replacing thread in the streams uncaught exception",
    "task_timeout": r"task\.timeout\.ms|Task timed out|timed out .* task",
    "expired": r"Expiring \d+ record\(s\)",
    "no_leader": r"LEADER_NOT_AVAILABLE|NOT_LEADER_OR_FOLLOWER",
    "listener_not_found": r"partitions have leader brokers without a matching listener",
    "error": r"\] ERROR ",
    "send_error": r"Error encountered sending record to topic",   # Streams' own report of a failed send
    "task_corrupted": r"TaskCorruptedException: Tasks \[",        # 2.8+: the task closed dirty and revived
}


@dataclass(frozen=True)
class Variant:
    version: str
    handler: str     # "" before 2.8: there is no handler to choose

    @property
    def name(self) -> str:
        return f"{self.version}/{self.handler}" if self.handler else self.version

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower())


def has_kip_671(version: str) -> bool:
    return parse_version(version) >= KIP_671


def acks_of(version: str, acks: str) -> str:
    """The acks an app's producer runs with: BOUNCE_ACKS, or its client's default."""
    if acks != "default":
        return acks
    return "all" if parse_version(version) >= KIP_679 else "1"


def parse_variant(text: str) -> Variant:
    """"2.7.2" or "4.3.1/replace_thread"; a 2.8+ version alone gets Kafka's default, shutdown_client."""
    m = VARIANT.match(str(text).strip())
    if not m:
        raise LabError(f"BOUNCE_APPS: {text!r} is not a version like '2.7.2' or '{KAFKA_VERSION}/replace_thread'.")
    version, handler = m.group(1), m.group(2) or ""
    if handler and handler not in HANDLERS:
        raise LabError(f"BOUNCE_APPS: {text!r}: the handler is one of {list(HANDLERS)}, not {handler!r}.")
    if handler and not has_kip_671(version):
        raise LabError(f"BOUNCE_APPS: {text!r}: Kafka Streams {version} has no uncaught exception handler to "
                       "choose (KafkaStreams.setUncaughtExceptionHandler(StreamsUncaughtExceptionHandler), "
                       "KIP-671, arrived in 2.8.0): name the version alone.")
    return Variant(version, handler or ("shutdown_client" if has_kip_671(version) else ""))


def expected_to_die(p: dict, v: Variant) -> bool:
    """The arithmetic of the lesson (what the run measures against): the client ends in ERROR when its output
    partitions have no leader it can reach (none, or one without its listener) for longer than it tolerates. Before
    2.8 one expired send kills the thread (delivery.timeout.ms); 2.8+ retries the task for task.timeout.ms more,
    then shutdown_client closes the client and replace_thread starts a new thread instead (the client lives). With
    the whole cluster down the input is down too: nothing new is read, so nothing is sent, and nothing expires
    (measured: 15 s, nobody died)."""
    if p["bounce_down_s"] <= 0 or p["bounce_brokers"] == "all" or p["bounce_replication"] > 1:
        return False
    down_ms = p["bounce_down_s"] * 1000
    if not has_kip_671(v.version):
        return down_ms > p["bounce_delivery_timeout_ms"]
    return v.handler == "shutdown_client" and down_ms > p["bounce_delivery_timeout_ms"] + p["bounce_task_timeout_ms"]


def _windows(bounce_at, listener_lost_at, restart_at, up_at) -> list[tuple[str, float, float, bool]]:
    """The bounce as (label, start, end, up but unreachable by the apps): down, or down / up without the apps'
    listener / down again."""
    if listener_lost_at is None:
        return [("broker(s) down", bounce_at, up_at, False)]
    return [("broker down", bounce_at, listener_lost_at, False),
            (f"up without listener {APPS_LISTENER}", listener_lost_at, restart_at, True),
            ("restart with it", restart_at, up_at, False)]


def dead_at(states: list[dict], before: float | None = None) -> float | None:
    """When the client reached a dead state (its LAB "state" lines; not one we asked for: a stop comes after
    `before`)."""
    for row in states:
        if row["to"] in DEAD_STATES and (before is None or row["ts"] < before):
            return row["ts"]
    return None


def processed(progress: list[dict], at: float) -> int:
    """Records processed by epoch time `at` (the last progress line before it)."""
    rows = [r for r in progress if r["ts"] <= at]
    return rows[-1]["processed"] if rows else 0


def first_error(thread_deaths: list[dict], uncaught: list[dict]) -> dict:
    return (thread_deaths or uncaught or [{}])[0]


def replaced_threads(uncaught: list[dict]) -> list[dict]:
    return [u for u in uncaught if u.get("response") == "REPLACE_THREAD"]


def app_row(p: dict, v: Variant, *, output: str, states: list[dict], progress: list[dict], uncaught: list[dict],
            thread_deaths: list[dict], evidence: dict, committed: dict, ends: dict, audit, truncated: list[str],
            since: float, stopped_at: float) -> dict:
    """One app's row: `states`, `progress`, `uncaught`, `thread_deaths` its LAB lines, `evidence` its first log
    lines (LOG_LINES), `committed` its group's offsets, `ends` the input's, `audit` its Spark audit (or None),
    `truncated` the brokers' truncation lines; `since` when the bounce began, `stopped_at` when the lab stopped it."""
    dead = dead_at(states, before=stopped_at)
    error = first_error(thread_deaths, uncaught)
    seen = [r["to"] for r in states if r["ts"] < stopped_at]
    return {
        "app": v.name, "version": v.version, "handler": v.handler or "(none before 2.8)",
        "acks": acks_of(v.version, p["bounce_acks"]),
        "truncations": sum(re.search(rf"partition={re.escape(output)}-\d+,", line) is not None for line in truncated),
        "expected_to_die": expected_to_die(p, v),
        "died": dead is not None,
        "died_after_s": None if dead is None else round(dead - since, 1),
        "final_state": seen[-1] if seen else "?",
        "states": seen,
        "thread_deaths": len(thread_deaths) + len(uncaught),
        "threads_replaced": len(replaced_threads(uncaught)),
        "exception": error.get("exception", ""),
        "expired_sends": evidence.get("expired", {}).get("count", 0),
        "task_timeout_lines": evidence.get("task_timeout", {}).get("count", 0),
        "send_errors_reported": evidence.get("send_error", {}).get("count", 0),
        "tasks_corrupted": evidence.get("task_corrupted", {}).get("count", 0),
        "listener_not_found_lines": evidence.get("listener_not_found", {}).get("count", 0),
        "processed_before": processed(progress, since),
        "processed": processed(progress, stopped_at),
        "lag_end": sum(ends[q] - (committed.get(q) or 0) for q in range(p["bounce_partitions"])),
        "audit_lost": None if audit is None else audit.counts.get("lost"),
        "audit_duplicate": None if audit is None else audit.counts.get("duplicate"),
    }


def series_of(progress: list[dict], t0: float, stopped_at: float) -> list[tuple]:
    """[(seconds since the run began, processed, state, threads)] of its progress lines until it was stopped."""
    return [(r["ts"] - t0, r["processed"], r["state"], r.get("threads", [])) for r in progress if r["ts"] <= stopped_at]


def bounce_of(p: dict, marks: dict, t0: float) -> dict:
    """What the lab did to the brokers, epoch times as seconds since the run began."""
    bounce = {k: (round(v - t0, 1) if isinstance(v, float) else v) for k, v in marks.items()}
    bounce.update(brokers=p["bounce_brokers"], down_s=p["bounce_down_s"], replication=p["bounce_replication"],
                  delivery_timeout_ms=p["bounce_delivery_timeout_ms"],
                  outage_s=None if marks["down_at"] is None else round(marks["up_at"] - marks["bounce_at"], 1))
    return bounce
