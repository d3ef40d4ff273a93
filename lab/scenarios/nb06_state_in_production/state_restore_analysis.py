"""Lesson 06b, a restart after a crash: what one shutdown and the way back left in the restore apps' LAB
lines and logs, turned into the lesson's row. Pure functions: nothing here runs or asks anything.

    row = restore_row(mode="eos", size_mb=64, ..., restores=restores_since(watched, t_down), wiped=[...], ...)
"""
from __future__ import annotations

import math
import re
import time

from ...record.evidence import STATE_WIPE_STORE_NOT_CLOSED, short_line

KEY_BYTES = 10                    # "k%09d": unique keys
CHECKPOINT_EVERY = 10_000         # OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT: changelog records between checkpoints
FULL = 0.9                        # a restore of at least this share of the store's records is a full restore


def records_for(size_mb: float, value_bytes: int) -> int:
    """Input records (one store entry and one changelog record each) for a changelog of `size_mb`."""
    return math.ceil(size_mb * 2**20 / (value_bytes + KEY_BYTES))


def _stamped(ts: float | None, line: str) -> str:
    """A log line as quoted evidence: a stack-trace line ("Caused by: ...") gets the stamp of its log line."""
    line = short_line(line.strip(), width=400)
    if ts is None or re.match(r"^\d{4}-\d\d-\d\d ", line):
        return line
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f",{int(ts * 1000) % 1000:03d} {line}"


def restores_since(programs, since: float) -> list[dict]:
    """Restore rows (LabStreams.restoreLogger) of these instances since epoch time `since`."""
    return [dict(r, instance=prog.name) for prog in programs for r in prog.lab_lines(kind="restore")
            if r["ts"] >= since]


def probes_seen(programs, keys: list[str]) -> dict:
    """probe key -> when an instance processed it (its "probe" LAB line)."""
    return {r["key"]: r["ts"] for prog in programs for r in prog.lab_lines(kind="probe") if r["key"] in keys}


def restore_timing(restores: list[dict]) -> tuple[int, float]:
    """Records restored, and seconds from the first restore's start to the last one's end (0 if none ended)."""
    starts = [r for r in restores if r["phase"] == "start"]
    ends = [r for r in restores if r["phase"] == "end"]
    restored = sum(r["total_restored"] for r in ends)
    return restored, max(r["ts"] for r in ends) - min(r["ts"] for r in starts) if starts and ends else 0.0


def restore_row(*, mode: str, size_mb: float, shutdown: str, instance: str, watched: list[str], records: int,
                changelog_bytes: int | None, value_bytes: int, standby_lag, checkpoint_file: bool,
                restores: list[dict], wiped: list[tuple], action: list[tuple], seen: dict, t_down: float) -> dict:
    """The lesson's row for one shutdown: `restores` its restore rows since `t_down`, `wiped` / `action` the
    (time, line) log lines of the wipe and its action, `seen` when each probe was processed."""
    starts = [r for r in restores if r["phase"] == "start"]
    restored, restore_s = restore_timing(restores)
    wiped = [_stamped(ts, line) for ts, line in wiped]
    action = [_stamped(ts, line) for ts, line in action]
    per_record = changelog_bytes / records if changelog_bytes and records else value_bytes + KEY_BYTES
    mb = restored * per_record / 2**20
    return {"mode": mode, "size_mb": size_mb, "shutdown": shutdown, "instance": instance,
            "took_over": ", ".join(sorted({r["instance"] for r in starts})) or ", ".join(watched),
            "store_records": records,
            "changelog_mb": round((changelog_bytes or records * per_record) / 2**20, 2),
            "changelog_measured": bool(changelog_bytes),
            "standby_lag": standby_lag,
            "checkpoint_file": checkpoint_file, "wiped": bool(wiped),
            "wipe_reason": (("rocksdb" if re.search(STATE_WIPE_STORE_NOT_CLOSED, wiped[0]) else "checkpoint")
                            if wiped else ""),
            "restore_from": min((r["start_offset"] for r in starts), default=None),
            "restored_records": restored, "restore_s": round(restore_s, 3),
            "restore_mb_s": round(mb / restore_s, 1) if restore_s > 0 else None,
            "restore_records_s": round(restored / restore_s) if restore_s > 0 else None,
            "down_s": round(min(seen.values()) - t_down, 2),
            "full_restore": records > 0 and restored >= FULL * records,
            "wipe_line": wiped[0] if wiped else "", "wipe_action": action[0] if action else ""}
