"""Child processes (brokers, JVM apps, Python apps) that never outlive the lab.

Every child is started with PR_SET_PDEATHSIG=SIGKILL, so if the kernel or test
process that started it is killed with SIGKILL, the child dies too. Linux ties
that signal to the THREAD that forked the child: start children from the main
thread (or a thread that outlives them), never from a short-lived worker. Children
also get their own process group and are stopped at interpreter exit.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .errors import LabError

_PR_SET_PDEATHSIG = 1
_children: set["Child"] = set()


def _die_with_parent(parent_pid: int):
    def preexec():
        os.setpgrp()
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # parent died between fork and prctl
            os._exit(1)
    return preexec


class Child:
    """A started process whose combined output goes to `log_path`."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict | None = None,
                 cwd: Path | None = None):
        self.name, self.argv, self.log_path = name, argv, Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=cwd,
                                     env={**os.environ, **(env or {})},
                                     preexec_fn=_die_with_parent(os.getpid()))
        self.pid = self.proc.pid
        self.thread = threading.get_ident()   # the thread it dies with (PR_SET_PDEATHSIG)
        _children.add(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def returncode(self) -> int | None:
        return self.proc.poll()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def grep(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return [line for line in self.log().splitlines() if rx.search(line)]

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.alive():
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()
        return self.proc.returncode

    def terminate(self) -> None:
        """Send SIGTERM without waiting (to stop several processes at once)."""
        if self.alive():
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash)."""
        if self.alive():
            self._signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def _close(self) -> None:
        _children.discard(self)
        if not self._log.closed:
            self._log.close()

    def __repr__(self) -> str:
        state = "running" if self.alive() else f"exited {self.proc.returncode}"
        return f"<{self.name} pid={self.pid} {state}>"


def stop_all() -> None:
    for child in list(_children):
        child.kill()


def children_of_thread(thread: int) -> list[Child]:
    """The live children a thread started (a panel's run: what its Stop must end)."""
    return [c for c in list(_children) if c.thread == thread and c.alive()]


atexit.register(stop_all)


# ---------------------------------------------------------------- Java

def java_executable() -> str:
    java = shutil.which("java") or (Path(os.environ.get("JAVA_HOME", "/nonexistent")) / "bin" / "java")
    if not java or not Path(java).exists():
        raise LabError("No Java found: install OpenJDK 17 or newer (Debian: apt-get install "
                       "openjdk-17-jdk-headless) or set JAVA_HOME.")
    return str(java)


def java_version() -> int:
    out = subprocess.run([java_executable(), "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise LabError(f"Could not read the Java version from: {out[:200]}")
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 else major


def require_java(minimum: int = 17) -> int:
    version = java_version()
    if version < minimum:
        raise LabError(f"Java {version} found, the lab needs Java {minimum}+: install OpenJDK 17 "
                       "and put it first on PATH (or set JAVA_HOME).")
    return version


def spawn_java(name: str, classpath: list[Path], main: str, args: list[str], log_path: Path,
               heap: str = "384m", jvm_options: list[str] = (), env: dict | None = None,
               cwd: Path | None = None) -> Child:
    argv = [java_executable(), f"-Xmx{heap}", "-XX:+UseSerialGC", *jvm_options,
            "-cp", os.pathsep.join(map(str, classpath)), main, *args]
    return Child(name, argv, log_path, env=env, cwd=cwd)


def spawn_python(name: str, module: str, args: list[str], log_path: Path,
                 env: dict | None = None) -> Child:
    """Run `python -m module args` (an app under test) outside the kernel."""
    return Child(name, [sys.executable, "-u", "-m", module, *args], log_path, env=env)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.2, child: Child | None = None,
               evidence=None, tick=None):
    """Poll `predicate` until it returns a truthy value, and return that value.

    The one timeout error names `what` and the last `evidence()` seen; a `child` that exits
    meanwhile ends the wait with its log tail. `tick(elapsed)` runs each round (progress,
    a stop request). lab.experiment.Run.wait is this, with a progress bar.
    """
    start = time.monotonic()
    seen = None
    while True:
        value = predicate()
        if value:
            return value
        if evidence is not None:
            seen = evidence()
        if child is not None and not child.alive():
            tail = "\n".join(child.log().splitlines()[-15:])
            raise LabError(f"{child.name} exited ({child.returncode()}) while waiting for {what}. "
                           f"Last log lines ({child.log_path}):\n{tail}")
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            raise LabError(f"Timed out after {timeout:.0f} s waiting for {what}."
                           + (f" Last seen: {seen}" if seen is not None else ""))
        if tick is not None:
            tick(elapsed)
        time.sleep(min(interval, max(timeout - elapsed, 0.01)))
