"""The room's web server (Tornado, which JupyterLab brings): learners' messages in, the teacher's page out.

    GET  /CODE                      says the room is open (a learner's check that the network reaches it)
    POST /CODE/send                 one message (lab.room.messages): 200 {"stored": ...}, else a 4xx and nothing kept
    GET  /CODE/teacher?token=T      the teacher's page; teacher.js, .css and .svg (its icon) beside it
    GET  /CODE/summary?token=T      what the page draws (lab.room.store.summarize)
    GET  /CODE/events?token=T       the same, as server-sent events: at connect and after each change
    GET  /CODE/export.json|csv?token=T   every message kept

The room code is on every path and the teacher's token on every teacher's request: a wrong one is a 404 or a 403.
A network address or a laptop that sends too fast is refused (429) before its message is parsed or kept. Nothing a learner
sends is run or written into HTML (the page draws it as text) or a spreadsheet formula (the CSV export).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import time
from datetime import timedelta
from pathlib import Path

import tornado.locks
import tornado.web
from tornado.iostream import StreamClosedError

from .messages import MAX_BYTES, BadMessage, parse
from .store import Store

PAGE = Path(__file__).resolve().parent / "page"
ASSETS = {"teacher.js": "application/javascript", "teacher.css": "text/css", "teacher.svg": "image/svg+xml"}
EVENTS_EVERY_S = 0.25   # the page is sent a new summary at most this often
PING_S = 15             # a comment line this often keeps the events stream open through proxies
LAPTOP_BURST, LAPTOP_PER_S = 30, 1.0   # one laptop: a lesson's messages at once, then one a second
# new laptop ids from one address: a room's worth at once (on a workshop's network each laptop has its own address),
# then one every 10 s; someone making up ids cannot fill the room's 500
NEW_LAPTOPS_BURST, NEW_LAPTOPS_PER_S = 150, 0.1


def same(given: str, secret: str) -> bool:
    """A constant-time comparison of what a request gave with the room's secret (any text, any length)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), secret.encode())


class Buckets:
    """Token buckets by key: `burst` at once, then `per_s` a second."""

    def __init__(self, burst: float, per_s: float, most_keys: int = 10_000):
        self.burst, self.per_s, self.most_keys = burst, per_s, most_keys
        self.level: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> bool:
        now = time.monotonic()
        tokens, then = self.level.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.per_s)
        if len(self.level) >= self.most_keys and key not in self.level:   # keep the table small: forget full ones
            self.level = {k: v for k, v in self.level.items() if v[0] + (now - v[1]) * self.per_s < self.burst}
        if tokens < 1:
            self.level[key] = (tokens, now)
            return False
        self.level[key] = (tokens - 1, now)
        return True


class Room:
    """The room's state in the server: its store, its limits, and the page's listeners woken on each change."""

    def __init__(self, store: Store, per_address: float):
        self.store = store
        self.addresses = Buckets(burst=10 * per_address, per_s=per_address)
        self.laptops = Buckets(burst=LAPTOP_BURST, per_s=LAPTOP_PER_S)
        self.new_laptops = Buckets(burst=NEW_LAPTOPS_BURST, per_s=NEW_LAPTOPS_PER_S)
        self.changed = tornado.locks.Condition()
        self.version = 0

    def stored(self) -> None:
        self.version += 1
        self.changed.notify_all()


class RoomHandler(tornado.web.RequestHandler):
    def initialize(self, room: Room):
        self.room = room

    def set_default_headers(self):
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")

    def prepare(self):
        if not same(self.path_kwargs.get("code", ""), self.room.store.code):
            self.refuse(404, "no such room")

    def teacher_only(self):
        if not same(self.get_query_argument("token", ""), self.room.store.token):
            self.refuse(403, "the teacher's token is needed")

    def refuse(self, status: int, why: str):
        self.set_status(status)
        self.finish({"error": why})
        raise tornado.web.Finish()

    def write_error(self, status_code, **kwargs):
        self.finish({"error": self._reason})   # never a traceback or a page


class Send(RoomHandler):
    def post(self, code):
        if not self.room.addresses.take(self.request.remote_ip):
            self.refuse(429, "too many messages from this address: slow down")
        if len(self.request.body) > MAX_BYTES:
            self.refuse(413, f"a message is at most {MAX_BYTES} bytes")
        try:
            message = parse(self.request.body)
        except BadMessage as exc:
            self.refuse(400, str(exc))
        store = self.room.store
        if not self.room.laptops.take(message["laptop"]):
            self.refuse(429, "too many messages from this laptop: slow down")
        new_laptop = message["laptop"] not in store.laptops
        if new_laptop and not self.room.new_laptops.take(self.request.remote_ip):
            self.refuse(429, "too many new laptops from this address")
        if why := store.full(message["laptop"]):
            self.refuse(429, why)
        stored = store.add(message)
        if stored:
            self.room.stored()
            if new_laptop:
                print(f"A laptop joined: {len(store.laptops)} in the room.", flush=True)
        self.finish({"stored": stored})


class Open(RoomHandler):
    def get(self, code):   # what a learner's browser shows at the room's address: it is reachable
        self.finish({"room": "open", "say": "This is the workshop's room: start the lab with make lab ROOM=<this "
                                            "address>, or run join_room(\"<this address>\") in a notebook."})


class Page(RoomHandler):
    def get(self, code):
        self.teacher_only()
        # the page's own files only: no inline script or style, nothing from elsewhere
        self.set_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                                                   "form-action 'none'")
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish((PAGE / "teacher.html").read_bytes())


class Asset(RoomHandler):
    def get(self, code, name):
        if name not in ASSETS:
            self.refuse(404, "no such file")
        self.set_header("Content-Type", f"{ASSETS[name]}; charset=utf-8")
        self.finish((PAGE / name).read_bytes())


class Summary(RoomHandler):
    def get(self, code):
        self.teacher_only()
        self.finish(self.room.store.summary())


class Export(RoomHandler):
    def get(self, code, kind):
        self.teacher_only()
        self.set_header("Content-Disposition", f'attachment; filename="room-{code}.{kind}"')
        if kind == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.finish(self.room.store.export_csv())
        else:
            self.set_header("Content-Type", "application/json; charset=utf-8")
            self.finish(json.dumps(self.room.store.messages()))


class Events(RoomHandler):
    async def get(self, code):
        self.teacher_only()
        self.set_header("Content-Type", "text/event-stream")
        room, seen = self.room, -1
        while not self.request.connection.stream.closed():
            if room.version != seen:
                seen = room.version
                self.write(f"event: summary\ndata: {json.dumps(room.store.summary())}\n\n")
            else:
                self.write(": ping\n\n")
            try:
                await self.flush()
            except StreamClosedError:
                return
            await asyncio.sleep(EVENTS_EVERY_S)
            if room.version == seen:
                await room.changed.wait(timeout=timedelta(seconds=PING_S))


def application(room: Room) -> tornado.web.Application:
    code = r"/(?P<code>[A-Za-z0-9_-]{1,64})"
    args = {"room": room}
    return tornado.web.Application([
        (code + r"/?", Open, args),
        (code + r"/send", Send, args),
        (code + r"/teacher", Page, args),
        (code + r"/(?P<name>teacher\.(?:js|css|svg))", Asset, args),
        (code + r"/summary", Summary, args),
        (code + r"/events", Events, args),
        (code + r"/export\.(?P<kind>json|csv)", Export, args),
    ], log_function=lambda handler: None,   # quiet, and no token ever written to a log
        default_handler_class=tornado.web.ErrorHandler, default_handler_args={"status_code": 404})
