"""The room in one SQLite file: its code, the teacher's token and every message, each kept once.

A restarted server opens the same file and resumes the same room. The summary the teacher's page draws is computed
from the messages: a laptop's latest vote and latest run of a lesson count, every exercise answer counts.
"""
from __future__ import annotations

import csv
import io
import json
import secrets
import sqlite3
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

from .messages import lessons

MAX_LAPTOPS = 500   # a room's laptops: an id past these is refused (a sender making up ids fills nothing)
MAX_PER_LAPTOP = 1000   # messages a laptop may leave in the room: a day of 22 lessons sends a few hundred


class Store:
    def __init__(self, path: Path, new: bool = False):
        path.parent.mkdir(parents=True, exist_ok=True)
        if new:
            for old in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                old.unlink(missing_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)   # autocommit: one message, one transaction
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")   # WAL keeps the file whole; a power cut may lose the last few
        self.db.execute("CREATE TABLE IF NOT EXISTS room (code TEXT NOT NULL, token TEXT NOT NULL, opened REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, laptop TEXT NOT NULL, "
                        "lesson TEXT NOT NULL, kind TEXT NOT NULL, at REAL NOT NULL, body TEXT NOT NULL)")
        row = self.db.execute("SELECT code, token FROM room").fetchone()
        self.resumed = row is not None
        if row is None:   # unguessable: 96 random bits for the code, 192 for the token
            row = (secrets.token_urlsafe(12), secrets.token_urlsafe(24))
            self.db.execute("INSERT INTO room VALUES (?, ?, ?)", (*row, time.time()))
        self.code, self.token = row
        # every kept message, in the order kept: the summary is drawn from memory, the file is read once
        self.kept = [{**json.loads(body), "at": at}
                     for at, body in self.db.execute("SELECT at, body FROM messages ORDER BY rowid")]   # as they came
        self.laptops = Counter(m["laptop"] for m in self.kept)   # laptop -> its messages kept
        self._summary = None

    @property
    def count(self) -> int:
        return len(self.kept)

    def full(self, laptop: str) -> str | None:
        """Why the room keeps nothing more from this laptop, or None."""
        if laptop not in self.laptops and len(self.laptops) >= MAX_LAPTOPS:
            return "the room is full"
        if self.laptops[laptop] >= MAX_PER_LAPTOP:
            return "this laptop has sent the most a room keeps"
        return None

    def add(self, message: dict) -> bool:
        """Keep a checked message; False when its id is kept already (a message sent twice counts once)."""
        at = time.time()
        cursor = self.db.execute("INSERT OR IGNORE INTO messages VALUES (?, ?, ?, ?, ?, ?)",
                                 (message["id"], message["laptop"], message["lesson"], message["kind"], at,
                                  json.dumps(message, sort_keys=True)))
        if cursor.rowcount:
            self.kept.append({**message, "at": at})
            self.laptops[message["laptop"]] += 1
            self._summary = None
        return bool(cursor.rowcount)

    def messages(self) -> list[dict]:
        return list(self.kept)

    def export_csv(self) -> str:
        rows = self.messages()
        columns = sorted({k for row in rows for k in row}, key=lambda k: (k not in EXPORT_FIRST, k))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else inert(v) for k, v in row.items()})
        return out.getvalue()

    def summary(self) -> dict:
        """What the teacher's page draws (kept until the next message)."""
        if self._summary is None:
            self._summary = summarize(self.code, self.messages(), len(self.laptops))
        return self._summary

    def close(self) -> None:
        self.db.close()


EXPORT_FIRST = ("at", "laptop", "lesson", "kind", "id")


def inert(value):
    """A learner's text as a spreadsheet cell that stays text: one that opens like a formula gets a quote first."""
    return "'" + value if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def spread(values: list) -> dict | None:
    values = [float(v) for v in values]
    if not values:
        return None
    return {"n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(code: str, messages: list[dict], laptops: int) -> dict:
    latest = {}   # (kind, lesson, laptop) -> the latest vote or run
    tries = defaultdict(list)   # (lesson, number, laptop) -> that laptop's answers, in order
    for m in messages:
        if m["kind"] == "exercise":
            tries[(m["lesson"], m["number"], m["laptop"])].append(m)
        else:
            latest[(m["kind"], m["lesson"], m["laptop"])] = m
    by_lesson = defaultdict(lambda: {"vote": [], "run": []})
    for (kind, lesson, _), m in latest.items():
        by_lesson[lesson][kind].append(m)
    exercises = defaultdict(lambda: defaultdict(list))
    for (lesson, number, _), answers in tries.items():
        exercises[lesson][number].append(answers)
    return {"room": code, "laptops": laptops, "messages": len(messages),
            "lessons": [{"lesson": key, **about, "active": key in by_lesson or key in exercises,
                         "votes": _votes(by_lesson[key]["vote"] if key in by_lesson else []),
                         "runs": _runs(by_lesson[key]["run"] if key in by_lesson else []),
                         "exercises": [_exercise(n, exercises[key][n]) for n in sorted(exercises.get(key, {}))]}
                        for key, about in lessons().items()]}


def _votes(votes: list[dict]) -> dict:
    counts = defaultdict(int)
    for v in votes:
        if isinstance(v["answer"], str):
            counts[v["answer"]] += 1
    return {"total": len(votes), "none": sum(v["answer"] is None for v in votes), "counts": dict(counts),
            "numbers": sorted(float(v["answer"]) for v in votes
                              if isinstance(v["answer"], (int, float)) and not isinstance(v["answer"], bool))}


def _runs(runs: list[dict]) -> dict:
    figures = defaultdict(list)
    platforms = defaultdict(list)
    for r in runs:
        for name, value in r["figures"].items():
            figures[name].append(value)
        platforms[f"{r['platform']['os']} {r['platform']['arch']}"].append(r)
    return {"laptops": len(runs), "reproduced": sum(r["reproduced"] for r in runs),
            "right": sum(r["right"] is True for r in runs), "seconds": spread([r["seconds"] for r in runs]),
            "figures": {name: spread(values) for name, values in sorted(figures.items())},
            "platforms": [{"platform": name, "laptops": len(rs), "reproduced": sum(r["reproduced"] for r in rs),
                           "seconds": spread([r["seconds"] for r in rs])} for name, rs in sorted(platforms.items())]}


def _exercise(number: int, laptops: list[list[dict]]) -> dict:
    # hints used: the wrong answers a laptop gave before its first right one (or all of them, not solved yet)
    hints = [next((a["hints"] for a in answers if a["right"]), sum(not a["right"] for a in answers))
             for answers in laptops]
    return {"number": number, "answered": len(laptops), "solved": sum(any(a["right"] for a in answers)
                                                                      for answers in laptops),
            "hints_mean": round(statistics.fmean(hints), 2) if hints else None}
