"""`python -m lab room` (`make room`): the teacher opens the room and gets the line learners paste.

The server listens only on the interface given (default this machine alone); the room lives in its SQLite file,
so the same command again resumes the same room, with the same code, token and data; --new opens a fresh one.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import signal

from ..config import CACHE_DIR
from ..errors import LabError

PORT = 8765
DB = CACHE_DIR / "room" / "room.sqlite"
PER_ADDRESS = 200   # messages a second from one network address (ten times that at once): a room behind one router


def add_parser(sub) -> None:
    p = sub.add_parser("room", help="a room for a workshop: learners' predictions and runs, live on your page")
    p.add_argument("--ip", default=os.environ.get("KAFKA_LAB_ROOM_IP", "127.0.0.1"),
                   help="the interface to listen on: your laptop's address on the workshop's network (default "
                        "127.0.0.1, this laptop alone)")
    p.add_argument("--port", type=int, default=PORT, help=f"the port (default {PORT}; 0: any free one)")
    p.add_argument("--db", default=str(DB), help=f"the room's file (default {DB}); the same file resumes the room")
    p.add_argument("--new", action="store_true", help="a fresh room: a new code and token, nothing kept")
    p.add_argument("--per-address", type=float, default=PER_ADDRESS,
                   help=f"messages a second taken from one network address (default {PER_ADDRESS})")
    p.set_defaults(run=run)


def other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback: where learners on the same network can reach it."""
    import socket

    import psutil
    return sorted({a.address for addrs in psutil.net_if_addrs().values() for a in addrs
                   if a.family == socket.AF_INET and not a.address.startswith("127.")})


def run(args) -> None:
    from pathlib import Path

    from .store import Store
    try:
        ipaddress.ip_address(args.ip)
    except ValueError:
        raise LabError(f"--ip {args.ip}: give an address of this machine, such as "
                       f"{', '.join(other_addresses()) or '127.0.0.1'}") from None
    store = Store(Path(args.db), new=args.new)
    try:
        asyncio.run(serve(store, args))
    finally:
        store.close()


async def serve(store, args) -> None:
    import tornado.httpserver
    import tornado.netutil

    from .messages import lessons
    from .server import Room, application
    lessons()   # the course's questions, read once now rather than at the first vote
    try:
        sockets = tornado.netutil.bind_sockets(args.port, address=args.ip)
    except OSError as exc:
        raise LabError(f"cannot listen on {args.ip}:{args.port} ({exc.strerror}): another port (ROOM_PORT=...), or an "
                       "address of this machine") from None
    server = tornado.httpserver.HTTPServer(application(Room(store, args.per_address)), max_body_size=1 << 20)
    server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]
    host = f"[{args.ip}]" if ":" in args.ip else args.ip
    url = f"http://{host}:{port}/{store.code}"
    print(f"Room {'resumed' if store.resumed else 'open'} at {url}"
          + (f" ({len(store.laptops)} laptops, {store.count} messages kept)" if store.resumed else ""))
    print(f'Learners: make lab ROOM={url}   (or in a notebook cell: join_room("{url}"))')
    print(f"Teacher's page: {url}/teacher?token={store.token}   (yours alone: do not share it)", flush=True)
    if ipaddress.ip_address(args.ip).is_loopback:
        others = other_addresses()
        print("It listens on this laptop alone: for the room's laptops, make room IP=<this laptop's address on the "
              f"workshop's network>{' (' + ', '.join(others) + ')' if others else ''}.", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.stop()
    print(f"Room closed: {store.count} messages from {len(store.laptops)} laptops kept in {args.db}.", flush=True)
