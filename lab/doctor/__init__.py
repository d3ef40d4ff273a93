"""`lab.doctor`: a read-only diagnosis of a Kafka cluster against the failures this course reproduces.

    from lab.doctor import diagnose
    d = diagnose("broker:9092", jmx="broker:9999")   # jmx optional: KIP-511 client versions
    d.findings, d.checks, d.partial, d.unreadable, d.table(), d.text(), d.as_record()
    d.exit_code("high")   # the command line's gate: 1 at or above that severity, 3 partial, else 0

It never writes to the cluster: Admin describe/list calls and an assign()-only consumer with no group.id that
never commits (lab/java/ClusterFacts.java). The rules (rules.py) are pure functions of what it read.
"""
from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from .checks import NEEDS, problem, statuses
from .report import Diagnosis, Finding, UsageError
from .rules import findings as apply_rules

__all__ = ["Diagnosis", "Finding", "UsageError", "diagnose"]
HOST_PORT = re.compile(r"^[\w.\-\[\]:]+:\d{1,5}$")


def diagnose(bootstrap: str | None = None, jmx: str | None = None, now_ms: int | None = None, progress=None,
             *, command_config: str | Path | None = None, timeout_s: float = 20,
             max_read_mb: float = 256) -> Diagnosis:
    """Read the cluster (read-only) and turn what it read into findings; see the module docstring.

    `timeout_s` bounds each request and each read of an internal topic, `max_read_mb` the bytes of such a read;
    `progress` is called with one line at a time while it reads."""
    if not bootstrap:   # always said, never taken from the environment: a report names the cluster it was asked for
        raise UsageError("lab doctor needs a cluster: --bootstrap host:port (in Python, bootstrap='host:port').")
    bad = [a for a in bootstrap.split(",") if not HOST_PORT.match(a.strip())]
    if bad:
        raise UsageError(f"lab doctor: bootstrap {bootstrap!r} is not host:port[,host:port] ({bad[0]!r}).")
    if jmx is not None and (not jmx or any(not HOST_PORT.match(a.strip()) for a in jmx.split(","))):
        raise UsageError(f"lab doctor: jmx {jmx!r} is not host:port[,host:port] (the brokers' JMX ports).")
    if not timeout_s > 0:
        raise UsageError(f"lab doctor: timeout_s must be positive, not {timeout_s!r}.")
    if not max_read_mb > 0:
        raise UsageError(f"lab doctor: max_read_mb must be positive, not {max_read_mb!r}.")
    def say(message: str) -> None:
        if progress and message:
            progress(message)
    from .facts import read_facts
    started = time.monotonic()
    say(f"lab doctor: reading {bootstrap} (read-only) ...")
    with tempfile.TemporaryDirectory(prefix="lab-doctor-") as folder:
        facts = read_facts(bootstrap, jmx=jmx, command_config=_command_config(command_config, Path(folder)),
                           timeout_s=timeout_s, max_read_bytes=int(max_read_mb * 2**20),
                           progress=lambda line: say(progress_text(line)))
    now_ms = int(now_ms if now_ms is not None else time.time() * 1000)
    d = Diagnosis(apply_rules(facts, now_ms), unreadable=unreadable(facts), facts=facts,
                  seconds=time.monotonic() - started, bootstrap=bootstrap, now_ms=now_ms, checks=statuses(facts))
    say(f"lab doctor: {len(d.findings)} finding(s) in {d.seconds:.1f} s"
        + (f", partial: {sum(not c.complete for c in d.checks)} check(s) incomplete" if d.partial else ""))
    return d


def progress_text(line: dict) -> str:
    """One progress line of the collector, in words ('' for none worth showing)."""
    if line.get("topic"):
        return (f"lab doctor: {line['topic']}: {line.get('partitions_complete', 0)}/{line.get('partitions', 0)} "
                f"partition(s), {line.get('records', 0):,} records, {line.get('bytes', 0) / 2**20:.1f} MB, "
                f"{line.get('seconds', 0):.0f} s")
    return f"lab doctor: reading {line['section']} ..." if line.get("section") else ""


def unreadable(facts: dict) -> dict[str, str]:
    """section -> one line: what could not be read, or read only in part, and the right or bound it takes. A section
    not asked for (client versions without --jmx) is not in it: its check says it was skipped."""
    return {name: why for name in NEEDS if facts.get(name) is not None and (why := problem(facts, name))}


def _command_config(explicit: str | Path | None, folder: Path) -> Path | None:
    """The client properties for a secured cluster: explicit, else the security settings lab.connection reads
    from KAFKA_LAB_CLIENT_PROPERTIES (in Java's names, written to `folder`)."""
    if explicit:
        if not Path(explicit).is_file():
            raise UsageError(f"lab doctor: the client properties file {explicit} does not exist.")
        return Path(explicit)
    from ..connection import command_config
    return command_config(folder)
