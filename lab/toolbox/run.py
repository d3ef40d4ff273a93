"""A Run: one experiment's id, folder, clock, cluster, children, waits and progress.

    with Run("offset-expiry", cluster=cluster, broker_config=cfg) as run:
        run.topics("input", partitions=2)
        app = run.spawn_python("app-1", "lab.apps.consumer_app", {"bootstrap.servers": ..., "lab.topic": ...})
        run.wait(lambda: committed() >= 10, 60, "app-1 to commit 10 records", evidence=committed)
        run.countdown("the retention to pass", seconds=65)
        run.event("app-1", "restart", tone="fault")

Everything a run started (its cluster if it had to start one, programs, Python
apps, background tasks) stops when the `with` block ends, however it ends.
If the process running the lab dies (SIGKILL, a restarted kernel), a watchdog
(lab.runtime.reaper) kills its children: they die with the lab process, whichever thread
spawned them.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from ..config import KAFKA_VERSION, WORK_DIR
from ..errors import LabError
from ..runtime.processes import Child, Stopped, spawn_java, spawn_python, wait_until
from ..runtime.programs import settings_file
from .timeline import Timeline

KEEP_RUNS = 8          # run folders kept for their logs; older ones are pruned when a run ends
PRUNE_AFTER_S = 600    # never prune a folder written to in the last 10 minutes (another kernel's run)
_active_runs: set["Run"] = set()


class RunStopped(Stopped):
    """The run was asked to stop (a panel's Stop button)."""


class Progress:
    """Phase lines and countdown bars: tqdm.auto draws a widget in Jupyter, text in a terminal.

    A panel replaces it with one that draws into its own widgets (lab.toolbox.panel) and
    adopts every Run its thread creates (`observed`), so that its Stop button reaches them.
    """

    def __init__(self, enabled: bool = True, t0: float | None = None):
        self.enabled, self.t0 = enabled, t0 or time.time()

    def adopt(self, run: "Run") -> None:
        """A run reports here (a panel's progress keeps it, to stop it)."""

    def say(self, text: str) -> None:
        if self.enabled:
            print(f"[{time.time() - self.t0:6.1f} s] {text}", flush=True)

    def event(self, lane: str, kind: str, tone: str) -> None:
        """A timeline mark, as it happens (a cell shows the phases only; a panel lists these)."""

    def bar(self, what: str, total: float, delay: float = 0.0):
        from tqdm.auto import tqdm
        return tqdm(total=round(total, 1), desc=what, unit="s", leave=False, delay=delay,
                    disable=not self.enabled, file=sys.stdout,
                    bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s")


def _complete(bar) -> None:
    """A wait that ended because its condition was met fills its bar: a bar left short is drawn as a failure
    (tqdm's notebook bar turns red), which only a wait that raised should be."""
    bar.n = bar.total
    bar.refresh()


_observer = threading.local()   # the Progress a panel set for the runs of its worker thread


@contextmanager
def observed(progress: Progress):
    """Every Run created in this thread inside the block reports to `progress` (a panel's)."""
    _observer.progress = progress
    try:
        yield progress
    finally:
        _observer.progress = None


class Task:
    """A background thread whose exception reaches whoever asks for its result."""

    def __init__(self, name: str, fn, args, kwargs):
        self.name, self._value, self._error = name, None, None
        self._thread = threading.Thread(target=self._main, args=(fn, args, kwargs), name=name, daemon=True)
        self._thread.start()

    def _main(self, fn, args, kwargs):
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:  # handed back to the caller in result()
            self._error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def check(self) -> None:
        """Raise now if the task already failed."""
        if self._error is not None:
            raise self._error

    def result(self, timeout: float | None = None):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise LabError(f"Background task {self.name} did not finish within {timeout:.0f} s.")
        self.check()
        return self._value


class Run:
    def __init__(self, scenario: str, *, cluster=None, nodes: int = 1, version: str = KAFKA_VERSION,
                 broker_config: dict | None = None, extra_listener: str | None = None, progress: bool = True,
                 keep: int = KEEP_RUNS, cluster_options: dict | None = None, spark_audit: bool = False):
        self.scenario = scenario
        self._spark_audit = spark_audit   # its results are audited on Spark: Spark starts once the broker is up
        self.id = f"{scenario}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.folder = WORK_DIR / "runs" / self.id
        self.t0 = time.time()
        self.timeline = Timeline(self.t0)
        self.progress = getattr(_observer, "progress", None) or Progress(progress, self.t0)
        self.stopping = threading.Event()
        self.progress.adopt(self)
        self._wanted = dict(nodes=nodes, version=version, broker_config=dict(broker_config or {}))
        if extra_listener:   # a cluster that fits must have it (lab.cluster.kraft: extra_listener)
            self._wanted["extra_listener"] = extra_listener
        self._given, self._keep = cluster, keep
        self._options = dict(cluster_options or {})   # e.g. jmx_port for a cluster this run starts
        self.cluster, self.owns_cluster = None, False
        self._children: list = []       # Child or JavaProgram: anything with stop()
        self._tasks: list[Task] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Run":
        self.folder.mkdir(parents=True, exist_ok=True)
        _active_runs.add(self)
        try:
            self.cluster = self._choose_cluster()
        except BaseException:
            self.close()
            raise
        if self._spark_audit:   # in the background, while the run's apps work: its audit then finds Spark up and warm
            from ..audit import warm_up
            warm_up()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _choose_cluster(self):
        from ..cluster import kafka_cluster
        given, want = self._given, self._wanted
        if given is not None and not given.owns_broker:     # the user's own cluster: always borrowed
            given.require_broker_config(want["broker_config"])
            return given
        if given is not None and given.running and given.fits(**want):
            return given
        if given is not None:
            self.say(f"the given cluster {'is stopped' if not given.running else 'does not fit these parameters'}"
                     f": starting one of its own (Kafka {want['version']}, {want['nodes']} node(s))")
        self.phase(f"starting Kafka {want['version']} ({want['nodes']} node(s))")
        cluster = kafka_cluster(name=self.scenario, folder=self.folder / "cluster", **want, **self._options)
        self.owns_cluster = True
        self._children.append(cluster)
        cluster.start()
        return cluster

    def close(self) -> None:
        """Stop everything this run started, newest first; then prune old run folders."""
        self.stopping.set()
        for task in self._tasks:
            task._thread.join(10)
        for child in reversed(self._children):
            try:
                child.stop()
            except Exception as exc:  # keep stopping the others
                self.say(f"stopping {child!r} failed: {exc}")
        self._children.clear()
        _active_runs.discard(self)
        prune(self._keep)

    def stop(self) -> None:
        """End the run from another thread (a panel's Stop): its next wait raises RunStopped, and every
        process it started is killed now, so a step blocked on one of them ends too."""
        self.stopping.set()
        for child in list(self._children):
            kill = getattr(child, "kill", None)
            try:
                kill() if kill is not None else child.stop()
            except Exception:  # it is going anyway; close() tries again
                pass

    def check(self) -> None:
        if self.stopping.is_set():
            raise RunStopped(f"run {self.id} was stopped")
        for task in self._tasks:
            task.check()

    # ------------------------------------------------------------------ clock and progress
    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def elapsed(self, at: float | None = None) -> float:
        return round((time.time() if at is None else at) - self.t0, 3)

    def say(self, text: str) -> None:
        self.progress.say(text)

    def phase(self, text: str) -> None:
        """A step of the experiment: said now, and a mark on the timeline's 'run' lane."""
        self.say(text)
        self.event("run", text, tone="info")

    @contextmanager
    def step(self, text: str, lane: str | None = None, tone: str = "info"):
        """A timed step: said now, and a span on the timeline (lane `lane`, default the text) when it ends."""
        self.say(text)
        start = time.time()
        try:
            yield
        finally:
            self.timeline.add(lane or text, text, start, end=time.time(), tone=tone)

    def event(self, lane: str, kind: str, at: float | None = None, **kw):
        """A mark on the timeline (`at` in epoch seconds, default now); see Timeline.add."""
        self.progress.event(lane, kind, kw.get("tone", "info"))
        return self.timeline.add(lane, kind, at, **kw)

    def countdown(self, what: str, seconds: float | None = None, until: float | None = None,
                  done=None) -> float:
        """Sleep `seconds` (or until the epoch time `until`) with a bar; `done()` true ends it early.

        Returns the seconds actually waited.
        """
        start = time.time()
        end = until if until is not None else start + (seconds or 0)
        with self.progress.bar(what, max(end - start, 0)) as bar:
            while time.time() < end:
                self.check()
                if done is not None and done():
                    break
                time.sleep(min(0.5, max(end - time.time(), 0)))
                bar.n = round(min(time.time(), end) - start, 1)
                bar.refresh()
            _complete(bar)
        return time.time() - start

    def wait(self, predicate, timeout: float, what: str, *, evidence=None, interval: float = 0.2,
             child: Child | None = None):
        """Poll `predicate` until it returns something truthy, and return that.

        On timeout one LabError names `what` and the last `evidence()` seen; a `child` that exits
        while we wait ends it with its log tail. A bar appears when the wait lasts over 5 s.
        """
        with self.progress.bar(f"waiting for {what}", timeout, delay=5) as bar:
            def tick(elapsed):
                self.check()
                if elapsed >= 5:  # short waits stay silent
                    bar.n = round(elapsed, 1)
                    bar.refresh()
            self.check()
            found = wait_until(predicate, timeout, what, interval, child=child, evidence=evidence, tick=tick)
            if bar.n:   # shown (a short wait stays silent)
                _complete(bar)
            return found

    # ------------------------------------------------------------------ Kafka
    def topics(self, *names: str, partitions: int = 1, config: dict | None = None,
               replication: int | None = None, timeout: float = 60) -> list[str]:
        """Create topics and wait until every partition has a leader. Existing topics are kept."""
        from confluent_kafka.admin import NewTopic
        admin = self.cluster.admin()
        rf = replication or min(3, len(self.cluster.node_ids))
        futures = admin.create_topics([NewTopic(n, partitions, rf, config={k: str(v) for k, v in
                                                                          (config or {}).items()})
                                       for n in names], operation_timeout=30)
        for name, future in futures.items():
            try:
                future.result()
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise LabError(f"Creating topic {name} failed: {exc}") from None

        def leaders():
            md = admin.list_topics(timeout=5)
            missing = [f"{n}[{p}]" for n in names for p in range(partitions)
                       if n not in md.topics or p not in md.topics[n].partitions
                       or md.topics[n].partitions[p].leader < 0]
            return missing
        self.wait(lambda: not leaders(), timeout, f"leaders for {', '.join(names)}",
                  evidence=lambda: f"no leader yet for {leaders()}")
        return list(names)

    # ------------------------------------------------------------------ children
    def spawn_python(self, name: str, module: str, settings: dict | list, env: dict | None = None) -> Child:
        """A program under test in its own process; its output goes to <run folder>/<name>.log. A lab program
        (lab/apps) gets its `settings` as the Java ones do, a properties file (<run folder>/<name>.properties:
        lab.runtime.programs.settings_file); any other module, a list of command-line arguments."""
        args = [settings_file(self.folder, name, settings, java=False)] if isinstance(settings, dict) else settings
        child = spawn_python(name, module, [str(a) for a in args], self.folder / f"{name}.log", env=env)
        self._children.append(child)
        return child

    def spawn_java(self, name: str, classpath, main: str, args: list[str], **kw) -> Child:
        child = spawn_java(name, classpath, main, [str(a) for a in args], self.folder / f"{name}.log", **kw)
        self._children.append(child)
        return child

    def program(self, program):
        """Adopt a lab.runtime.programs.JavaProgram: it lives in the run's folder and stops with the run."""
        program.folder = self.folder
        self._children.append(program)
        return program

    def background(self, fn, *args, name: str | None = None, **kwargs) -> Task:
        """fn(*args) in a thread; `task.result()` returns its value or raises its exception.

        Long-running functions should return when `run.stopping` is set.
        """
        task = Task(name or getattr(fn, "__name__", "task"), fn, args, kwargs)
        self._tasks.append(task)
        return task


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if Path(path).exists() else ""


def prune(keep: int = KEEP_RUNS) -> list[Path]:
    """Delete all but the newest `keep` folders under the lab's work folder; returns what went.

    A folder in use (by a run of this process, or named on the command line of a live process:
    a broker's server.properties, a program's log4j file) or written to in the last 10 minutes stays.
    """
    if not WORK_DIR.exists():
        return []
    in_use = {r.folder for r in _active_runs} | _named_by_live_processes()
    entries = [p for base in (WORK_DIR, WORK_DIR / "runs") if base.exists() for p in base.iterdir()
               if p.is_dir() and p.name != "runs"]
    entries.sort(key=_last_write, reverse=True)
    removed = []
    for path in entries[keep:]:
        if path in in_use or time.time() - _last_write(path) < PRUNE_AFTER_S or not path.exists():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _named_by_live_processes() -> set[Path]:
    """Work folders named in a live process's command line (any process on this machine)."""
    import psutil
    names, prefix = set(), str(WORK_DIR) + os.sep
    for proc in psutil.process_iter(["cmdline"]):   # a process we may not read, or a zombie: None
        argv = "\0".join(proc.info["cmdline"] or [])
        at = argv.find(prefix)
        while at >= 0:
            parts = Path(argv[at:].split("\0")[0].split(":")[0]).relative_to(WORK_DIR).parts
            if parts:
                names.add(WORK_DIR / parts[0])
                if parts[0] == "runs" and len(parts) > 1:
                    names.add(WORK_DIR / "runs" / parts[1])
            at = argv.find(prefix, at + 1)
    return names


def _last_write(path: Path) -> float:
    """The newest modification time in the folder; 0 for one that is already gone (another process pruned it
    meanwhile: two notebooks at once each prune when a run ends)."""
    try:
        newest = path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                newest = max(newest, os.stat(os.path.join(root, f)).st_mtime)
            except OSError:
                pass
    return newest
