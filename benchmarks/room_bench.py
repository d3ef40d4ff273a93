"""What the room server (issue 53, `python -m lab room`) costs: the messages a second it takes, its memory and its
SQLite file after a full day's room, and how long a vote takes to reach the teacher's page.

    .venv/bin/python benchmarks/room_bench.py [--laptops 100] [--votes 20] [--json]

Starts the real server as `make room` does (tests/room_server.py), port 0, its database in a temporary folder. Then
--laptops simulated laptops (threads, each with its own random laptop id, its own keep-alive connection and its own
source address, 127.0.0.2 and up, as laptops on a network have: Linux, where all of 127/8 is loopback) each send,
for every lesson of the course, a vote, a run and one exercise answer. The server lets a laptop send a burst of 30 messages, then 1 a second: so every
laptop sends its messages in rounds of at most 30 (ten lessons) as fast as the server answers, all laptops at once,
and the rounds are apart by the time the laptops' allowance takes to fill again. Messages a second is every message
over the time spent sending (the rounds, not the waits between them). Then the server's resident memory and its
database on disk, and the delay from a vote POSTed to the first `summary` event of the teacher's stream
(/CODE/events) that counts it, --votes times one at a time, each from a new laptop.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import queue
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.scenarios import COURSE  # noqa: E402
from tests.room_server import running_room  # noqa: E402

BURST, REFILL_S = 30, 1.0          # the server's allowance per laptop: a burst of 30, then 1 a second
PER_LESSON = 3                     # a vote, a run, an exercise answer
ROUND = BURST // PER_LESSON        # lessons a laptop sends in one round


def course() -> list[tuple[str, tuple | None]]:
    """(lesson key, its question's choices at the defaults, None for a number question), read once: not timed."""
    return [(e.lesson.key, e.lesson.question(e.defaults())[1]) for e in COURSE]


def messages(laptop: str, lesson: tuple, rng: random.Random) -> list[dict]:
    """A learner's messages for one lesson: the vote, the run, one exercise answer."""
    key, choices = lesson
    answer = rng.choice(choices) if choices else rng.randint(0, 1000)
    base = lambda kind: {"v": 1, "id": uuid.uuid4().hex, "laptop": laptop, "lesson": key, "kind": kind}
    return [{**base("vote"), "answer": answer, "choices": list(choices) if choices else None},
            {**base("run"), "reproduced": rng.random() < 0.9, "measured": answer, "right": rng.random() < 0.5,
             "seconds": round(rng.uniform(20, 90), 1),
             "figures": {"records_read_again": rng.randint(0, 500), "fenced": rng.random() < 0.5},
             "platform": {"os": rng.choice(["Linux", "Darwin"]), "arch": rng.choice(["x86_64", "arm64"]),
                          "python": "3.11.7", "java": "17.0.15"}},
            {**base("exercise"), "number": 1, "right": rng.random() < 0.7, "hints": rng.randint(0, 3)}]


class Laptop:
    """One simulated laptop: its id, its keep-alive connection from its own source address."""

    def __init__(self, n: int, host: str, port: int, code: str):
        self.id, self.code = uuid.uuid4().hex, code
        self.source = (f"127.0.0.{2 + n % 250}", 0) if host == "127.0.0.1" else None
        self.conn = http.client.HTTPConnection(host, port, timeout=30, source_address=self.source)
        self.status: dict = {}

    def send(self, message: dict) -> int:
        body = json.dumps(message).encode()
        for attempt in (1, 2):
            try:
                self.conn.request("POST", f"/{self.code}/send", body, {"Content-Type": "application/json"})
                response = self.conn.getresponse()
                response.read()
                break
            except (OSError, http.client.HTTPException):
                self.conn.close()
                if attempt == 2:
                    self.status["error"] = self.status.get("error", 0) + 1
                    return 0
        self.status[response.status] = self.status.get(response.status, 0) + 1
        return response.status


def load(server, n: int, lessons: list) -> dict:
    """n laptops send every lesson's three messages, in rounds of ROUND lessons; the timed rounds and the refusals."""
    host, port, code, _ = server
    laptops = [Laptop(i, host, port, code) for i in range(n)]
    rounds = [lessons[i:i + ROUND] for i in range(0, len(lessons), ROUND)]
    barrier = threading.Barrier(n + 1)

    def laptop_thread(laptop: Laptop, seed: int) -> None:
        rng = random.Random(seed)
        for part in rounds:
            barrier.wait()
            for lesson in part:
                for message in messages(laptop.id, lesson, rng):
                    laptop.send(message)
            barrier.wait()
        laptop.conn.close()

    threads = [threading.Thread(target=laptop_thread, args=(lt, i), daemon=True) for i, lt in enumerate(laptops)]
    for t in threads:
        t.start()
    sending = waiting = 0.0
    began = time.perf_counter()
    for i, part in enumerate(rounds):
        if i:   # the laptops' allowance fills again: 1 a second, up to the burst
            pause = min(BURST, PER_LESSON * len(part)) * REFILL_S + 1
            time.sleep(pause)
            waiting += pause
        start = time.perf_counter()
        barrier.wait()
        barrier.wait()
        sending += time.perf_counter() - start
    for t in threads:
        t.join()
    status: dict = {}
    for laptop in laptops:
        for k, v in laptop.status.items():
            status[str(k)] = status.get(str(k), 0) + v
    total = sum(status.values())
    return {"laptops": n, "lessons": len(lessons), "wall_s": round(time.perf_counter() - began, 1), "messages": total, "stored": status.get("200", 0),
            "refused_429": status.get("429", 0), "other_errors": total - status.get("200", 0) - status.get("429", 0),
            "status": status, "sending_s": round(sending, 2), "waiting_s": round(waiting, 1),
            "messages_per_s": round(total / sending, 1), "rounds": len(rounds),
            "pacing": f"each laptop sent in {len(rounds)} rounds of at most {ROUND * PER_LESSON} messages (the "
                      f"per-laptop burst), all laptops at once; {waiting:.0f} s of waits between rounds not counted",
            "distinct_addresses": len({lt.source for lt in laptops})}


def sse_delay(server, votes: int, lessons: list) -> dict:
    """Milliseconds from a vote POSTed to the first summary event that counts it, one vote at a time."""
    host, port, code, token = server
    events: queue.Queue = queue.Queue()
    stream = http.client.HTTPConnection(host, port, timeout=60)
    stream.request("GET", f"/{code}/events?token={token}")
    response = stream.getresponse()
    assert response.status == 200, response.status

    def read() -> None:
        try:
            while line := response.readline():
                if line.startswith(b"data:"):
                    events.put((time.perf_counter(), json.loads(line[5:])))
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass   # the stream closed (AttributeError: http.client's, when closed under its reader)
    threading.Thread(target=read, daemon=True).start()
    lesson = next(x for x in lessons if x[1])
    total = lambda summary: next(x for x in summary["lessons"] if x["lesson"] == lesson[0])["votes"]["total"]
    _, first = events.get(timeout=30)        # the summary at connect
    counted, delays = total(first), []
    for i in range(votes):
        time.sleep(random.uniform(0.3, 0.6))
        while not events.empty():
            counted = max(counted, total(events.get()[1]))
        laptop = Laptop(200 + i, host, port, code)
        sent = time.perf_counter()
        assert laptop.send(messages(laptop.id, lesson, random.Random(i))[0]) == 200, laptop.status
        laptop.conn.close()
        while True:
            at, summary = events.get(timeout=30)
            if total(summary) > counted:
                counted = total(summary)
                delays.append((at - sent) * 1000)
                break
    stream.close()
    return {"votes": votes, "median_ms": round(statistics.median(delays), 1), "max_ms": round(max(delays), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--laptops", type=int, default=100)
    parser.add_argument("--votes", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="room-bench-") as tmp:
        folder, lessons = Path(tmp), course()
        with running_room(folder / "room.sqlite") as room:   # the server as `make room` starts it, stopped after
            parts = urllib.parse.urlsplit(room.url)
            server = (parts.hostname, parts.port, room.code, room.token)
            rss_idle = psutil.Process(room.process.pid).memory_info().rss
            sent = load(server, args.laptops, lessons)
            rss = psutil.Process(room.process.pid).memory_info().rss
            db = {p.name: p.stat().st_size for p in folder.glob("room.sqlite*")}
            delay = sse_delay(server, args.votes, lessons)
    result = {"load_average_before": load_before, "cpus": os.cpu_count(), **sent,
              "rss_mb_idle": round(rss_idle / 2**20, 1), "rss_mb_after": round(rss / 2**20, 1),
              "db_bytes": db, "db_mb": round(sum(db.values()) / 2**20, 2), "vote_to_event": delay}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    rows = [("load average before (1, 5, 15 min)", ", ".join(map(str, load_before)) + f" on {os.cpu_count()} cores"),
            ("laptops x lessons x messages", f"{sent['laptops']} x {sent['lessons']} x {PER_LESSON}"
                                             f" from {sent['distinct_addresses']} addresses"),
            ("messages sent / stored", f"{sent['messages']} / {sent['stored']}"),
            ("refused (429) / other errors", f"{sent['refused_429']} / {sent['other_errors']}"),
            ("time spent sending / wall time", f"{sent['sending_s']} s / {sent['wall_s']} s"),
            ("messages a second", f"{sent['messages_per_s']}"),
            ("pacing", sent["pacing"]),
            ("server's resident memory, idle / after", f"{result['rss_mb_idle']} MB / {result['rss_mb_after']} MB"),
            ("SQLite file(s)", f"{result['db_mb']} MB ({', '.join(f'{k} {v:,} B' for k, v in db.items())})"),
            (f"vote to summary event ({delay['votes']} votes)",
             f"median {delay['median_ms']} ms, max {delay['max_ms']} ms")]
    print("| what | figure |\n|---|---|")
    for what, figure in rows:
        print(f"| {what} | {figure} |")


if __name__ == "__main__":
    main()
