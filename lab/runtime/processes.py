"""Child processes (brokers, JVM apps, Python apps) that never outlive the lab.

Every child gets a process group of its own (stop/kill signal the whole group) and is stopped
at interpreter exit. If the lab process dies without exiting (SIGKILL, a crashed or restarted
kernel), a watchdog kills its children: `python -m lab.runtime.reaper`, started with the first child in
a session of its own, reads one line per child's group on a pipe from the lab and SIGKILLs every
group still registered when that pipe reaches end-of-file, which the OS gives it whenever the
lab dies. The same code on Linux, macOS and WSL2; children die with the lab PROCESS, whatever
thread started them.
"""
from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from . import class_archives
from ..config import LAB_DIR
from ..errors import LabError
from .jvm import current as current_java, java_executable

_children: set["Child"] = set()
# A panel's Stop and a process starting in its run's thread never interleave: a process is either started
# and seen by the Stop, or refused because the Stop came first (no process escapes a Stop by starting late).
_start_lock = threading.Lock()
_stopped_threads: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()


class Stopped(LabError):
    """A Stop ended the work of the thread that tried to start a process (a panel's run)."""

# ---------------------------------------------------------------- the watchdog (lab/runtime/reaper.py)

_reaper: subprocess.Popen | None = None
_reaper_lock = threading.RLock()   # children start from several threads (a panel's worker, tasks)


def ensure_reaper() -> subprocess.Popen:
    """The watchdog of this process's children: started on first use, and again if it was killed."""
    global _reaper
    with _reaper_lock:
        if _reaper is None or _reaper.poll() is not None:
            # Only this process holds the pipe's write end: Python's pipes are not inheritable and
            # close_fds=True, so no child keeps it open after the lab dies (which would hide the EOF).
            # bufsize=0: every line reaches the pipe as it is written, nothing waits in a buffer.
            # cwd: `-m` looks in the current folder first, so `lab` is found even when not installed.
            _reaper = subprocess.Popen([sys.executable, "-m", "lab.runtime.reaper"], stdin=subprocess.PIPE, bufsize=0,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                                       start_new_session=True, cwd=LAB_DIR.parent)
            for child in list(_children):   # a reaper after a killed one must learn every child
                if child._registered:
                    _reaper.stdin.write(f"add {child.pid}\n".encode())
        return _reaper


def _tell_reaper(verb: str, pgid: int) -> None:
    """One line to the reaper: `add` a child's group, or `del` one the lab stopped itself."""
    global _reaper
    with _reaper_lock:
        try:
            ensure_reaper().stdin.write(f"{verb} {pgid}\n".encode())
        except BrokenPipeError:   # someone killed the reaper: a new one learns every registered child
            _reaper.stdin.close()
            _reaper = None
            ensure_reaper()


def _stop_reaper() -> None:
    """At a normal exit, after stop_all: end-of-file, the reaper kills what is left and exits."""
    with _reaper_lock:
        if _reaper is not None and _reaper.poll() is None:
            try:
                _reaper.stdin.close()
                _reaper.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass


# ---------------------------------------------------------------- children


class Child:
    """A started process whose combined output goes to `log_path`."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict | None = None,
                 cwd: Path | None = None):
        self.name, self.argv, self.log_path = name, argv, Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._registered = False
        ensure_reaper()   # before the child: only the `add` below separates its start from its guard
        with _start_lock:
            self.thread = threading.current_thread()   # a panel's Stop kills the children of its run's thread
            if self.thread in _stopped_threads:
                self._log.close()
                raise Stopped(f"{name} was not started: a Stop ended the work of {self.thread.name}")
            # start_new_session: its own process group (pgid = pid), which _signal and the reaper signal whole
            self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=cwd,
                                         env={**os.environ, **(env or {})}, start_new_session=True)
            self.pid = self.proc.pid
            _children.add(self)
            self._registered = True
        _tell_reaper("add", self.pid)

    def alive(self) -> bool:
        if self.proc.poll() is None:
            return True
        self._forget()
        return False

    def returncode(self) -> int | None:
        return None if self.alive() else self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def command(self) -> str:
        """Its command line, a classpath shown as its number of entries (a broker's runs to 100 jars)."""
        argv = [f"<{len(arg.split(os.pathsep))} classpath entries>" if prev in ("-cp", "-classpath") else arg
                for prev, arg in zip(["", *self.argv], self.argv)]
        return " ".join(argv)

    def why(self, lines: int = 20) -> str:
        """What to read when it failed: its command, the first errors its log names (a broker logs the cause, then
        many lines of its shutdown) and the last `lines` lines."""
        log = self.log().splitlines()
        errors = [line for line in log[:-lines] if re.search(r"\b(ERROR|FATAL)\b|Exception\b", line)][:5]
        first = "".join(f"\n{line[:400]}" for line in errors)
        tail = "\n".join(log[-lines:])
        return (f"Command: {self.command()}\n" + (f"First errors in its log:{first}\n" if first else "")
                + f"Last log lines ({self.log_path}):\n{tail}")

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

    def _forget(self) -> None:
        """Once it has exited and been waited for, its pid (its group's number) may be reused: the
        reaper must not kill that group at the lab's death."""
        if self._registered:
            self._registered = False
            _tell_reaper("del", self.pid)

    def _close(self) -> None:
        _children.discard(self)
        self.alive()   # it has exited (stop and kill waited for it): alive() tells the reaper to forget it
        if not self._log.closed:
            self._log.close()

    def __repr__(self) -> str:
        state = "running" if self.alive() else f"exited {self.proc.returncode}"
        return f"<{self.name} pid={self.pid} {state}>"


def stop_all() -> None:
    for child in list(_children):
        child.kill()


def children_of_thread(thread: threading.Thread) -> list[Child]:
    """The live children a thread started (a panel's run: what its Stop must end)."""
    return [c for c in list(_children) if c.thread is thread and c.alive()]


def stop_thread(thread: threading.Thread) -> list[Child]:
    """Kill every child `thread` started, and refuse it any new one (Stopped): a panel's Stop, which must
    leave nothing of its run behind even when the run was just starting a broker."""
    with _start_lock:
        _stopped_threads.add(thread)
        children = children_of_thread(thread)
    for child in children:
        child.kill()
    return children


@atexit.register
def _at_exit() -> None:
    try:
        stop_all()
    finally:
        _stop_reaper()


# ---------------------------------------------------------------- Java

def require_java(minimum: int = 17) -> int:
    """The version of the Java the lab runs (lab.runtime.jvm: JAVA_HOME, PATH or the bundled Java 21)."""
    version = current_java().version
    if version < minimum:   # lab.runtime.jvm allows 17 to 21 only; a caller may ask for more
        raise LabError(f"Java {version} found, this needs Java {minimum}+: set JAVA_HOME to such a JDK.")
    return version


def spawn_java(name: str, classpath: list[Path], main: str, args: list[str], log_path: Path,
               heap: str = "384m", jvm_options: list[str] = (), env: dict | None = None,
               cwd: Path | None = None) -> Child:
    # The lab's JVMs (brokers, apps) live for seconds to minutes at a few hundred records a second: C1 alone
    # (TieredStopAtLevel=1) starts them sooner and spends far less CPU on compiling (notebook 06's restore lesson
    # alone: 49.7 CPU-s and 41 s with C2, 28.6 CPU-s and 31 s without). Spark's JVM keeps C2 (not started here).
    # The jars first and the lab's compiled classes (folders) after them: the jars are what a class archive holds
    # (lab.runtime.class_archives: a broker starts in two thirds of the time), and a folder cannot be in one.
    jars = [Path(p) for p in classpath if str(p).endswith(".jar")]
    classpath = [*jars, *(Path(p) for p in classpath if not str(p).endswith(".jar"))]
    java = java_executable()
    argv = [java, f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            *class_archives.options(java, jars, Child), *jvm_options, "-cp", os.pathsep.join(map(str, classpath)), main, *args]
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
    a stop request). lab.toolbox.Run.wait is this, with a progress bar.
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
            raise LabError(f"{child.name} exited ({child.returncode()}) while waiting for {what}.\n{child.why(15)}")
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            raise LabError(f"Timed out after {timeout:.0f} s waiting for {what}."
                           + (f" Last seen: {seen}" if seen is not None else "")
                           + (f"\n{child.why(15)}" if child is not None else ""))
        if tick is not None:
            tick(elapsed)
        time.sleep(min(interval, max(timeout - elapsed, 0.01)))
