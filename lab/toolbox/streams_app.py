"""A Kafka Streams app under test: N JVMs of one lab/java program sharing one application.id, adopted by a Run.
They start at once, are watched until RUNNING, say how they stand (running, exited, their client's state, their
log lines), report their group's committed offsets, and stop together, the way a redeploy stops them.

    app = StreamsApp(run, "restore-eos-1a2b", ["restore-eos-0", "restore-eos-1"], "4.3.1", "RestoreApp",
                     ["RestoreApp.java", "Lab.java", "LabStreams.java"],
                     lambda i: {"state.dir": run.folder / "s" / str(i)})
    app.start()
    wait_running(run, [app], 120, "the app to run", ready=lambda a, prog: a.last(prog).get("processed"))
    app.committed(admin, "input")      # {0: 120, 1: None}: its group's committed offsets
    stop_all([app], timeout=30)        # every JVM of every app SIGTERMed at once, then waited for
"""
from __future__ import annotations

import time

from ..errors import LabError
from ..runtime.programs import JavaProgram
from .admin import group_offsets
from .apps import stop_together, streams_running
from ..record.evidence import grep

ERROR_STATES = ("PENDING_ERROR", "ERROR")   # a client that gave up: it never comes back by itself


class StreamsApp:
    """`names`: one JVM each, in this order (a name is its log file's and its evidence's). `properties`: a dict,
    or i -> dict for JVM i; bootstrap.servers defaults to the run's, application.id is `app_id` for all.
    `report`: the kind of the LAB lines in which the program reports its client's state every second or so."""

    def __init__(self, run, app_id: str, names: list[str], version: str, main: str, sources: list[str],
                 properties, *, report: str = "progress", **java):
        self.run, self.app_id, self.report = run, app_id, report
        self.started: dict[str, float] = {}     # name -> epoch seconds of its last start
        self._ran: set[str] = set()             # names whose log showed RUNNING since their last start
        self.programs = [run.program(JavaProgram(name, version, main, list(sources),
                                                 properties=self._properties(properties, i), **java))
                         for i, name in enumerate(names)]

    def _properties(self, properties, i: int) -> dict:
        props = dict(properties(i) if callable(properties) else properties)
        return {"bootstrap.servers": props.pop("bootstrap.servers", self.run.bootstrap),
                "application.id": self.app_id, **props}

    # ------------------------------------------------------------------ start, stop
    def start(self, programs=None) -> None:
        """Start every JVM (or these), one right after the other: none waits for another to be up."""
        for program in self.programs if programs is None else programs:
            self.started[program.name] = time.time()
            self._ran.discard(program.name)
            program.start()

    def stop(self, timeout: float = 20.0) -> None:
        stop_all([self], timeout)

    # ------------------------------------------------------------------ how they stand
    def reports(self, program, kind: str | None = None) -> list[dict]:
        """Its `LAB` lines of kind `kind` (default: its reports)."""
        return program.lab_lines(kind=kind or self.report)

    def last(self, program) -> dict:
        """Its last report ({} before the first)."""
        rows = self.reports(program)
        return rows[-1] if rows else {}

    def state(self, program) -> str | None:
        """Its client's state as its state listener last said it (LAB "state" lines), None before any."""
        rows = program.lab_lines(kind="state")
        return rows[-1].get("to") if rows else None

    def running(self, program) -> bool:
        """RUNNING now: its last report says so, and its log shows the client reached RUNNING since its last
        start (apps.streams_running)."""
        if self.last(program).get("state") != "RUNNING":
            return False
        if program.name not in self._ran and streams_running(program.log_path, since=self.started.get(program.name)):
            self._ran.add(program.name)
        return program.name in self._ran

    def check_alive(self, errors: bool = False) -> None:
        """A LabError naming the log of the first JVM that exited (or, `errors`, whose client is in ERROR)."""
        for program in self.programs:
            if not program.alive():
                raise LabError(f"{program.name} exited: see {program.log_path}")
            if errors and self.state(program) in ERROR_STATES:
                raise LabError(f"{program.name} is in ERROR: see {program.log_path}")

    def grep(self, pattern: str, since: float | None = None, programs=None) -> list[tuple[float | None, str]]:
        """(time, line) of the log lines matching `pattern` of every JVM (or these), in the JVMs' order."""
        return [hit for program in (self.programs if programs is None else programs)
                for hit in grep(program.log_path, pattern, since=since)]

    def first_lines(self, patterns: dict, since: float | None = None, width: int = 400) -> dict:
        """what -> {"count", "first"} for each pattern its logs matched (since `since`): evidence to quote."""
        found = {}
        for what, rx in patterns.items():
            lines = self.grep(rx, since)
            if lines:
                found[what] = {"count": len(lines), "first": lines[0][1].strip()[:width]}
        return found

    def committed(self, admin, topic: str) -> dict[int, int | None]:
        """Its group's committed offsets on `topic` (admin.group_offsets): {} when the coordinator has none."""
        return group_offsets(admin, {self.app_id: self.app_id}, topic).get(self.app_id) or {}


def wait_running(run, apps, timeout: float, what: str, *, ready=None, evidence=None):
    """Run.wait until every JVM of every app is running (StreamsApp.running) and `ready(app, program)`, a lesson's
    own condition, holds; a JVM that exits ends the wait at once with a LabError naming its log."""
    apps = list(apps)

    def all_running() -> bool:
        for app in apps:
            app.check_alive()
        return all(app.running(p) and (ready is None or ready(app, p)) for app in apps for p in app.programs)
    return run.wait(all_running, timeout, what, evidence=evidence or (
        lambda: {a.app_id: [a.last(p).get("state") for p in a.programs] for a in apps}))


def stop_all(apps, timeout: float = 20.0) -> None:
    """Every started JVM of every app SIGTERMed at once, then each waited for up to `timeout` (SIGKILL after):
    their Streams clients close in parallel (about a second each) instead of one after the other."""
    stop_together([p.process for app in apps for p in app.programs if p.process], timeout)
