"""A learner's lab in a workshop's room (lab.room): what it sends, in the background, and only this.

    join_room("http://192.168.1.20:8765/CODE")   # a notebook cell; or `make lab ROOM=...` (KAFKA_LAB_ROOM) for all

Then a lesson's Predict widget sends the learner's answer once it settles (the room votes before anyone runs), its
run sends the prediction it took at its start and, at its end, what it measured; an exercise's check sends whether
the answer was right and after how many hints. Each message carries a random id of this laptop
(kept in the lab's cache folder), never a name or an address. Sending never holds a cell: a message goes into a
queue that one thread posts with a short timeout; a room that does not answer costs one line, once, and nothing else.
"""
from __future__ import annotations

import atexit
import json
import math
import os
import platform
import queue
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid

from ..config import CACHE_DIR
from ..errors import LabError

ROOM_ENV = "KAFKA_LAB_ROOM"
TIMEOUT_S = 3        # one message's post: a room on the workshop's network answers within milliseconds
FLUSH_AT_EXIT_S = 2  # what a kernel that shuts down gives its last messages
MAX_FIGURES = 40     # a run's headline figures: its record's numbers, as lab.room.messages takes them


def room_url(url: str) -> str:
    """The room's address as the teacher's `make room` printed it, checked: http(s)://host:port/CODE."""
    parts = urllib.parse.urlsplit(url.strip())
    code = parts.path.strip("/")
    try:
        parts.port   # a port that is not a number is a ValueError here
    except ValueError:
        code = ""
    if parts.scheme not in ("http", "https") or not parts.hostname or not code or "/" in code:
        raise LabError(f"{url!r} is not a room's address: paste the line `make room` printed, like "
                       "http://192.168.1.20:8765/k7q2x9...")
    return f"{parts.scheme}://{parts.netloc}/{code}"


# The room is on the workshop's own network: never through a proxy the laptop's settings name for the internet
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def room_answers(url: str) -> bool:
    """Whether the room at `url` answers now (its address says it is open): `make lab ROOM=...` checks once."""
    try:
        with DIRECT.open(room_url(url), timeout=TIMEOUT_S) as response:
            return json.loads(response.read()).get("room") == "open"
    except Exception:   # whatever went wrong, the answer is no (a port that speaks no HTTP, a bad reply)
        return False


class RoomLink:
    def __init__(self, url: str, laptop: str | None = None):
        self.url = room_url(url)
        self.laptop = laptop or laptop_id()
        self.queue: queue.Queue = queue.Queue()
        self.sent = self.refused = 0
        self.said = False   # a problem with the room is said once, whatever it is
        self._thread = threading.Thread(target=self._post_all, name="room", daemon=True)
        self._thread.start()

    def send(self, kind: str, lesson: str, **fields) -> None:
        """Queue one message; returns at once, whatever the network does."""
        self.queue.put({"v": 1, "id": uuid.uuid4().hex, "laptop": self.laptop, "lesson": lesson, "kind": kind,
                        **fields})

    def flush(self, timeout: float = FLUSH_AT_EXIT_S) -> None:
        """Wait up to `timeout` for what is queued to be posted (a kernel's exit: never a cell)."""
        done = threading.Event()
        self.queue.put(done)
        done.wait(timeout)

    def _post_all(self) -> None:
        while True:
            message = self.queue.get()
            if isinstance(message, threading.Event):
                message.set()
                continue
            if message.get("kind") == "run":
                message["platform"] = platform_facts()
            try:
                self.post(message)
                self.sent += 1
            except urllib.error.HTTPError as exc:   # the room refused it (a 4xx): said once, the lab goes on
                self.refused += 1
                self._say_once(f"The room refused a message ({exc.code}: {exc.read()[:200].decode(errors='replace')}).")
            except Exception as exc:   # the network, or a reply that is not the room's: the lab goes on without it
                self._say_once(f"The room at {self.url} did not answer ({getattr(exc, 'reason', exc)}): this lab "
                               "goes on without it.")

    def post(self, message: dict) -> dict:
        request = urllib.request.Request(f"{self.url}/send", data=json.dumps(message).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with DIRECT.open(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())

    def _say_once(self, line: str) -> None:
        if not self.said:
            self.said = True
            print(line, flush=True)


_room: RoomLink | None = None
_from_environment = False


def join_room(url: str) -> None:
    """This kernel's lessons send to the room at `url` (the line the teacher's `make room` printed)."""
    global _room, _from_environment
    _room, _from_environment = RoomLink(url), True
    print(f"In the room {_room.url}: your predictions and runs go to the teacher's page (no name, no address).")


def current_room() -> RoomLink | None:
    """The room this kernel sends to: join_room's, else KAFKA_LAB_ROOM's (make lab ROOM=...), else none."""
    global _room, _from_environment
    if not _from_environment:
        _from_environment = True
        if os.environ.get(ROOM_ENV):
            _room = RoomLink(os.environ[ROOM_ENV])
    return _room


def tell_room(kind: str, lesson: str, **fields) -> None:
    """Send one message when this kernel is in a room; nothing otherwise."""
    room = current_room()
    if room is not None:
        room.send(kind, lesson, **fields)


def on_change(widget, send, settle_s: float = 1.5) -> None:
    """In a room, `send()` once a widget's value has settled (a number typed digit by digit is one message)."""
    if current_room() is None:
        return
    timer = None

    def changed(_change) -> None:
        nonlocal timer
        if timer is not None:
            timer.cancel()
        timer = threading.Timer(settle_s, send)
        timer.daemon = True
        timer.start()
    widget.observe(changed, names="value")


def sendable(value):
    """An answer as the room takes it: a number, a short text, or None."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
        return value
    return str(value)[:200]


def headline_figures(record: dict) -> dict:
    """A run's record, its numbers only (time to failure, records lost or duplicated, peak memory, …), nested ones
    named by their path (`time_to_error_s_streams_3_7_0`): what the room compares across laptops."""
    figures = {}

    def walk(prefix: str, value, depth: int) -> None:
        if isinstance(value, dict) and depth < 3:
            for key, inner in value.items():
                if not str(key).startswith("param_"):   # the run's settings, not what it measured
                    walk(f"{prefix}_{key}", inner, depth + 1)
        elif isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
            name = re.sub(r"[^a-z0-9]+", "_", prefix.lower()).strip("_")[:64]
            if name and len(figures) < MAX_FIGURES:
                figures.setdefault(name, value)
    for key, value in record.items():
        if not key.startswith("param_") and key not in ("failure_reproduced", "prediction_right"):
            walk(key, value, 0)
    return figures


def laptop_id() -> str:
    """A random id of this laptop, made once and kept in the lab's cache folder: the room counts laptops with it."""
    path = CACHE_DIR / "room-laptop-id"
    try:
        known = path.read_text().strip()
        if len(known) == 32 and all(c in "0123456789abcdef" for c in known):
            return known
    except OSError:
        pass
    made = uuid.uuid4().hex
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(made + "\n")
    except OSError:
        pass   # a read-only cache: this kernel's id only
    return made


def platform_facts() -> dict:
    from ..runtime.jvm import current
    try:
        java = f"{current().version} ({current().source})"
    except LabError:
        java = "none"
    return {"os": platform.system()[:40], "arch": platform.machine()[:40],
            "python": platform.python_version()[:40], "java": java[:40]}


@atexit.register
def _flush_at_exit() -> None:
    if _room is not None:
        _room.flush()
