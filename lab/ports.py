"""Ports on 127.0.0.1, where everything the lab launches listens (brokers, JMX, Spark, JupyterLab)."""
from __future__ import annotations

import socket


def free_port(preferred: int | None = None) -> int:
    """`preferred` if nothing listens on it, else a free port the system picks."""
    if preferred and port_is_free(preferred):
        return preferred
    return free_ports(1)[0]


def free_ports(n: int, avoid=()) -> list[int]:
    """n distinct free ports, none in `avoid`: all held open at once, so the system cannot hand one out twice."""
    held = []
    try:
        while len(held) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] in avoid:
                s.close()
                continue
            held.append(s)
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
