"""Ports on 127.0.0.1, where everything the lab launches listens (brokers, JMX, Spark, JupyterLab)."""
from __future__ import annotations

import random
import socket

from ..errors import LabError


def free_port(preferred: int | None = None) -> int:
    """`preferred` if nothing listens on it, else a free port of PORT_RANGE (free_ports)."""
    if preferred and port_is_free(preferred):
        return preferred
    return free_ports(1)[0]


# Below every system's ephemeral range (Linux and WSL2 from 32768, macOS from 49152): a port the system hands to an
# outgoing connection (a client of another broker, two notebooks at a time) is never the one chosen here for a broker
# that has not bound it yet.
PORT_RANGE = range(20000, 32768)


def free_ports(n: int, avoid=()) -> list[int]:
    """n distinct free ports of PORT_RANGE, picked at random, none in `avoid`: all held open at once while choosing,
    so none is handed out twice."""
    held = []
    try:
        for port in random.sample(PORT_RANGE, len(PORT_RANGE)):
            if len(held) == n:
                break
            if port in avoid:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
        if len(held) < n:
            raise LabError(f"Fewer than {n} free ports on 127.0.0.1 between {PORT_RANGE.start} and "
                           f"{PORT_RANGE.stop - 1}: stop what listens there.")
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def listening(port: int) -> bool:
    """Something accepts connections on `port`."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
