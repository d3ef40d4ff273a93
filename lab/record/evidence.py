"""One evidence protocol for every program under test, and one clock for every log.

Programs under test (Python apps and Java programs alike) say what they did in
lines `LAB {json}`: a JSON object with at least `kind` and `ts` (epoch seconds).
Python apps call `emit(kind, **fields)`; Java programs log the same text through
log4j, so the line may carry a log prefix before `LAB `. `lab_lines()` parses both.

Log lines (brokers, Streams, clients) are timestamped by `log_time()`. The one
timezone rule: every JVM the lab launches runs with -Duser.timezone=UTC, so a
log4j stamp without a zone is UTC.
"""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path

MARK = "LAB "
# Kafka Streams throwing a task's state away under exactly-once after an unclean shutdown: why (2.6 to 4.2, and 4.x
# when RocksDB had not flushed its offsets: no .checkpoint file; since KIP-1035, 4.3: a store that was not closed
# cleanly), then what it does (the task closed dirty, its state directory wiped and restored from scratch).
STATE_WIPE_NO_CHECKPOINT = r"did not find checkpoint offsets while stores are not empty"
STATE_WIPE_STORE_NOT_CLOSED = r"didn't find a valid state, since under EOS"
STATE_WIPE = f"{STATE_WIPE_NO_CHECKPOINT}|{STATE_WIPE_STORE_NOT_CLOSED}"
STATE_WIPE_ACTION = r"Will close the task as dirty and re-create and bootstrap from scratch"
_DECODER = json.JSONDecoder()
# [2026-11-23 12:03:14,123] or [2026-11-23T12:03:14,123] (log4j's ISO8601), with '.' or ',' before millis
_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)[,.](\d{3})\]")


def emit(kind: str, **fields) -> dict:
    """Print one evidence line (Python apps under test); returns the row."""
    row = {"kind": kind, "ts": time.time(), **fields}
    print(MARK + json.dumps(row, default=str), flush=True)
    return row


def read_text(source: str | Path) -> str:
    """A log's text from a path (missing file = empty) or the text itself."""
    if isinstance(source, Path):
        return source.read_text(errors="replace") if source.exists() else ""
    return source


def lab_lines(source: str | Path, **match) -> list[dict]:
    """Every `LAB {json}` row in a log, in order; `match` keeps rows whose fields equal the values."""
    rows = []
    for line in read_text(source).splitlines():
        at = line.find(MARK + "{")
        if at < 0:
            continue
        try:
            row, _ = _DECODER.raw_decode(line, at + len(MARK))
        except ValueError:
            continue  # a line cut short by a kill -9
        if isinstance(row, dict) and all(row.get(k) == v for k, v in match.items()):
            rows.append(row)
    return rows


def log_time(line: str) -> float | None:
    """Epoch seconds of a log4j line's stamp (UTC, see the module doc), or None."""
    m = _STAMP.search(line[:40])
    if not m:
        return None
    stamp = datetime.strptime(f"{m.group(1)} {m.group(2)}.{m.group(3)}", "%Y-%m-%d %H:%M:%S.%f")
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def grep(source: str | Path, pattern: str, since: float | None = None) -> list[tuple[float | None, str]]:
    """(time, line) of each log line matching `pattern`; stack-trace lines take the last stamp seen.

    `since` drops lines stamped before that epoch time.
    """
    rx, found, last = re.compile(pattern), [], None
    for line in read_text(source).splitlines():
        last = log_time(line) or last
        if rx.search(line) and (since is None or last is None or last >= since):
            found.append((last, line))
    return found


# What the notebooks look for in Java client / Streams logs, most specific first.
JAVA_EVENTS = [
    ("AddOffsetsToTxn timeout", r"Timeout expired after \d+ms while awaiting AddOffsetsToTxn"),
    ("InvalidPidMappingException", r"InvalidPidMappingException|producer id which is not currently assigned"),
    ("UnknownProducerIdException", r"UnknownProducerIdException"),
    ("InvalidProducerEpochException", r"InvalidProducerEpochException"),
    ("ProducerFencedException", r"ProducerFencedException"),
    ("InvalidTxnStateException", r"InvalidTxnStateException"),
    ("TaskCorruptedException", r"TaskCorruptedException"),
    ("TaskMigratedException", r"TaskMigratedException"),
    # (a clean shutdown also ends in "... to DEAD", so that transition is not a death)
    ("thread died", r"Encountered the following exception during processing and the registered exception "
                    r"handler opted to|Replacing thread in the streams uncaught exception handler"),
    ("state transition", r"State transition from \w+ to \w+"),
    ("rebalance", r"Request joining group due to|partitions revoked|Assigned tasks|partition assignment took"),
]
_JAVA_EVENTS = [(kind, re.compile(rx)) for kind, rx in JAVA_EVENTS]
_BODY = re.compile(r"^\[[^\]]+\] (\w+) (.*)$")


def java_events(source: str | Path, patterns=None) -> list[dict]:
    """Log4j lines as events {ts, kind, level, line}: the first pattern a line matches names it.

    Stack-trace lines ("Caused by", "org.", "java.") count too, at the last stamp seen.
    """
    compiled = _JAVA_EVENTS if patterns is None else [(k, re.compile(rx)) for k, rx in patterns]
    events, last = [], None
    for line in read_text(source).splitlines():
        ts = log_time(line)
        if ts is not None:
            last = ts
            m = _BODY.match(line)
            level, body = (m.group(1), m.group(2)) if m else ("INFO", line)
        elif line.lstrip().startswith(("Caused by", "org.", "java.")):
            level, body = "TRACE", line
        else:
            continue
        for kind, rx in compiled:
            if rx.search(body):
                events.append({"ts": last, "kind": kind, "level": level, "line": body[:400]})
                break
    return events


# The Java producer's transaction manager at DEBUG (org.apache.kafka.clients.producer.internals.TransactionManager
# and .Sender): when a transactional request (AddOffsetsToTxn, EndTxn, ...) was queued and when it was sent.
_TXN_LINE = re.compile(r"(Enqueuing|Sending) transactional request (\w+?)(?:RequestData|Request)?\(")


def txn_waits(source: str | Path) -> list[dict]:
    """How long each transactional request sat in a Java producer between enqueue and send (DEBUG lines):
    {ts (sent), request, wait_s}. A request can be enqueued twice (again after a coordinator lookup): the
    wait counts from the first."""
    queued, out = {}, []
    for ts, line in grep(source, _TXN_LINE.pattern):
        what, request = _TXN_LINE.search(line).groups()
        if ts is not None and what == "Enqueuing":
            queued.setdefault(request, []).append(ts)
        elif ts is not None and queued.get(request):
            out.append({"t_s": ts, "request": request, "wait_s": round(ts - queued.pop(request)[0], 3)})
    return out


def incidents(events, gap_s: float = 5.0):
    """Collapse events (a DataFrame with t_s, kind, line) into incidents: one exception logs several lines,
    so a new incident starts only after `gap_s` seconds of quiet. Columns t_s (first), kinds, line (first)."""
    import pandas as pd
    ev = events.sort_values("t_s")
    return pd.DataFrame([{"t_s": g.t_s.iloc[0], "kinds": ", ".join(sorted(set(g.kind))), "line": g.line.iloc[0]}
                         for _, g in ev.groupby((ev["t_s"].diff() > gap_s).cumsum())],
                        columns=["t_s", "kinds", "line"])


def short_line(line: str, width: int = 240) -> str:
    """A log4j line without its thread name: stamp, level, message (cut at `width` characters)."""
    m = re.match(r"^\[([^\]]+)\] (\w+) \[[^\]]*\] (.*)$", line)
    return (f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else line)[:width]
