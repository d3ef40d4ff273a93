"""The room's server (`python -m lab room`) started for a test, as a teacher starts it, and stopped after.

    with running_room(tmp_path / "room.sqlite") as room:
        room.send({...})            # POST /CODE/send: (status, JSON reply)
        room.teacher_url            # the teacher's page, token included

Its three printed lines give the URLs (`--port 0`: the port is the one printed). Everything it prints is kept in
`room.output` for a failing test's message.
"""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60   # the first start imports the course (every lesson's question)
STOP_TIMEOUT_S = 10

OPEN = re.compile(r"^Room (?:open|resumed) at (?P<url>http://\S+)")
TEACHER = re.compile(r"^Teacher's page: (?P<url>http://\S+)")


class RoomDidNotStart(RuntimeError):
    pass


@dataclass
class RoomServer:
    url: str            # http://127.0.0.1:PORT/CODE
    code: str
    token: str
    teacher_url: str
    process: subprocess.Popen
    output: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    def send(self, message: dict) -> tuple[int, dict]:
        """POST one message; (HTTP status, the JSON reply)."""
        request = urllib.request.Request(f"{self.url}/send", data=json.dumps(message).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def summary(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/summary?token={self.token}", timeout=10) as reply:
            return json.loads(reply.read())


def message(kind: str, lesson: str, laptop: str, **fields) -> dict:
    """A message as the learner's lab sends it (a fresh id each)."""
    return {"v": 1, "id": uuid.uuid4().hex, "laptop": laptop, "lesson": lesson, "kind": kind, **fields}


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:   # drains the pipe to its end, so the server never blocks on a full one
        lines.put(line.rstrip("\n"))
    lines.put(None)


@contextmanager
def running_room(db_path: Path, *extra: str) -> Iterator[RoomServer]:
    """The room's server on a free port of 127.0.0.1, its room in `db_path`; stopped (SIGTERM, then kill) after."""
    command = [sys.executable, "-m", "lab", "room", "--ip", "127.0.0.1", "--port", "0", "--db", str(db_path), *extra]
    process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue = queue.Queue()
    output: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        url = teacher_url = None
        deadline = time.monotonic() + START_TIMEOUT_S
        while teacher_url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RoomDidNotStart(f"no teacher's line within {START_TIMEOUT_S} s:\n" + "\n".join(output))
            if line is None:
                raise RoomDidNotStart(f"it exited ({process.wait()}):\n" + "\n".join(output))
            output.append(line)
            if found := OPEN.match(line):
                url = found["url"]
            elif found := TEACHER.match(line):
                teacher_url = found["url"]
        if url is None:
            raise RoomDidNotStart("no 'Room open at' line before the teacher's:\n" + "\n".join(output))
        token = urllib.parse.parse_qs(urllib.parse.urlsplit(teacher_url).query)["token"][0]
        room = RoomServer(url=url, code=url.rstrip("/").rsplit("/", 1)[1], token=token, teacher_url=teacher_url,
                          process=process, output=output)
        # the rest of what it prints, kept as it comes
        threading.Thread(target=_keep, args=(lines, output), daemon=True).start()
        yield room
    finally:
        _stop(process, reader)


def _keep(lines: queue.Queue, output: list[str]) -> None:
    while (line := lines.get()) is not None:
        output.append(line)


def _stop(process: subprocess.Popen, reader: threading.Thread) -> None:
    import psutil
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
    for child in children:   # it starts none today; should it ever, none outlives the test
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    reader.join(STOP_TIMEOUT_S)   # the pipe at its end: then it can be closed under no reader
    if process.stdout and not reader.is_alive():
        process.stdout.close()


# ---------------------------------------------------------------- a notebook run in a room (tests/test_notebooks.py)

ROOM_LINE = re.compile(r"\b(?:The room|In the room)\b")   # what the learner's lab says about the room


@contextmanager
def silent_room() -> Iterator[str]:
    """A room's address whose port takes connections and never answers: a room the network lost."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/lost"
    finally:
        server.close()


def room_lines(executed: Path) -> list[str]:
    """The lines of an executed notebook's outputs that speak of the room."""
    import nbformat
    return [line for cell in nbformat.read(executed, as_version=4).cells for out in cell.get("outputs", [])
            if out.get("output_type") == "stream"
            for line in out.get("text", "").splitlines() if ROOM_LINE.search(line)]


def kept(room: RoomServer) -> list[dict]:
    """Every message the room kept (its JSON export)."""
    with urllib.request.urlopen(f"{room.url}/export.json?token={room.token}", timeout=10) as reply:
        return json.loads(reply.read())


def assert_room_heard(room: RoomServer, results: dict, lesson: str) -> None:
    """The notebook's run told the room what it recorded: one vote (its frozen prediction), one run (whether the
    failure reproduced, the measured answer, whether the prediction was right), and each exercise answer the run
    checked (right ones and wrong ones), all from one laptop."""
    messages = kept(room)
    assert {m["lesson"] for m in messages} == {lesson} and len({m["laptop"] for m in messages}) == 1, messages
    votes, runs = ([m for m in messages if m["kind"] == kind] for kind in ("vote", "run"))
    assert len(votes) == 1 and votes[0]["answer"] == results["prediction"], votes
    assert len(runs) == 1, runs
    run = runs[0]
    assert run["reproduced"] is results["failure_reproduced"] and run["measured"] == results["prediction_measured"]
    assert run["right"] == results["prediction_right"] and run["seconds"] > 0 and run["platform"]["java"], run
    tried = {int(n): t for n, t in results["exercises"].items() if not t.get("skipped")}
    answers = [m for m in messages if m["kind"] == "exercise"]
    for number, said in tried.items():
        mine = [m for m in answers if m["number"] == number]
        judged = [s for case, s in said.items()   # what the check judged (no answer and no run are not sent)
                  if case != "answer" and s not in ("not answered", "did not reproduce the failure")]
        assert len(mine) == len(judged), (number, said, mine)
        assert sum(m["right"] for m in mine) == judged.count("correct"), (number, said, mine)
        assert [m["hints"] for m in mine if not m["right"]] == list(range(len(mine) - judged.count("correct"))), mine
