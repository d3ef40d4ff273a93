"""The "tune and re-run" panel of every notebook, generated from the scenario's parameter spec.

    panel(lesson.spec, lesson.run, cluster=cluster, **PARAMS, only=[...])

Run starts the scenario in a worker thread, so the kernel stays free for the Stop button and
the panel shows live progress: the phase, a countdown bar for the long waits, and the events
as they happen. When the run ends its verdict, explanation, table and figure replace the
progress. The panel borrows the notebook's cluster while that is up and fits the parameters;
otherwise the run starts a broker of its own and stops it when it ends (lab.toolbox.Run).
Stop kills every process the run started, at once. A failed run shows one line.

CSS classes (the browser test's handles): lab-panel, lab-panel-run, lab-panel-stop,
lab-panel-status (text starts with running / done: / stopped / failed:), lab-panel-progress.
"""
from __future__ import annotations

import html
import threading
import time
import traceback

from ..config import WORK_DIR
from ..runtime.processes import children_of_thread, stop_thread
from .params import Param, Spec
from .run import Progress, observed
from .timeline import TONES

_shown: list["Panel"] = []   # the panels shown in this kernel, newest last (tests click them)


def control(p: Param, value):
    """The ipywidget for one parameter: its range and choices come from the spec."""
    import ipywidgets as w
    label = f"{p.name.upper()}" + (f" ({p.unit})" if p.unit else "")
    common = dict(description=label, tooltip=p.help, style={"description_width": "initial"},
                  layout=w.Layout(width="420px"))
    if p.choices and p.many:
        return w.SelectMultiple(options=list(p.choices), value=tuple(value), rows=len(p.choices), **common)
    if p.many:
        return w.Text(value=", ".join(map(str, value)), placeholder="comma-separated", **common)
    if p.choices:
        return w.Dropdown(options=list(p.choices), value=value, **common)
    if p.type is bool:
        return w.Checkbox(value=bool(value), indent=False, **common)
    if p.none or value is None:   # empty text = None
        return w.Text(value="" if value is None else str(value), placeholder=f"empty = {p.none}", **common)
    bounds = dict(min=p.lo if p.lo is not None else -1e12, max=p.hi if p.hi is not None else 1e12)
    if p.type is int:
        return w.BoundedIntText(value=value, **{k: int(v) for k, v in bounds.items()}, **common)
    if p.type is float:
        return w.BoundedFloatText(value=value, **bounds, **common)
    return w.Text(value=str(value), **common)


class PanelProgress(Progress):
    """One click of Run: its progress, drawn into the panel's widgets, and what its Stop must reach.

    A run that was stopped may still be unwinding in its thread (a call blocked on the killed broker)
    after the panel moved on; its progress then draws nothing.
    """

    MAX_LINES = 14

    def __init__(self, panel: "Panel"):
        super().__init__(True)
        self.panel, self.runs, self.lines = panel, [], []
        self.stopping, self.worker = threading.Event(), None
        self.killed = threading.Event()   # set once a Stop has killed every process of the run

    @property
    def current(self) -> bool:
        return self.panel._progress is self and self.panel.running

    def adopt(self, run) -> None:
        self.runs.append(run)
        if self.stopping.is_set():
            run.stop()

    def say(self, text: str) -> None:
        if self.current:
            self.panel.phase.value = f"<b>{html.escape(text)}</b>"
            self._line(text, "info")

    def event(self, lane: str, kind: str, tone: str) -> None:
        if lane != "run" and self.current:   # the run's own phases are said already
            self._line(f"{lane}: {kind}", tone)

    def _line(self, text: str, tone: str) -> None:
        stamp = f"{time.time() - self.t0:6.1f} s"
        self.lines = (self.lines + [f"<span style='color:{TONES.get(tone, '#333')}'>{stamp}  "
                                    f"{html.escape(text)}</span>"])[-self.MAX_LINES:]
        self.panel.events.value = "<pre style='margin:0;line-height:1.3'>" + "\n".join(self.lines) + "</pre>"

    def bar(self, what: str, total: float, delay: float = 0.0):
        return _WidgetBar(self, what, total, delay)

    def outcome(self) -> dict:
        left = children_of_thread(self.worker)
        return {"seconds": round(time.time() - self.t0, 1), "stopped": self.stopping.is_set(),
                "left_running": len(left), "run_ids": [r.id for r in self.runs],
                "own_cluster": any(r.owns_cluster for r in self.runs)}


class _WidgetBar:
    """The slice of tqdm's interface a Run uses (`with ... as bar: bar.n = x; bar.refresh()`)."""

    def __init__(self, progress: PanelProgress, what: str, total: float, delay: float):
        self.progress, self.panel = progress, progress.panel
        self.what, self.total, self.delay, self.n = what, max(total, 0.1), delay, 0.0

    def __enter__(self):
        return self

    def refresh(self) -> None:
        if self.n < self.delay or not self.progress.current:
            return
        bar = self.panel.bar
        bar.max, bar.value, bar.description = self.total, min(self.n, self.total), ""
        self.panel.bar_label.value = f"{html.escape(self.what)}: {self.n:.0f} / {self.total:.0f} s"
        bar.layout.display = self.panel.bar_label.layout.display = None

    def __exit__(self, *exc):
        if self.progress.current:
            self.panel.bar.layout.display = self.panel.bar_label.layout.display = "none"


class Panel:
    """Controls for a spec's parameters, Run and Stop, live progress, and the last result."""

    def __init__(self, spec: Spec, scenario, *, show=None, title: str = "Try it yourself", only=None,
                 **values):
        import ipywidgets as w
        self.spec, self.scenario = spec, scenario
        self.show_result = show or (lambda result, display: result.show(display))
        names = [p.name for p in spec.params if only is None or p.name in only]
        self.fixed = {k: v for k, v in values.items() if k not in names}
        self.controls = {n: control(spec.by_name[n], values.get(n, spec.by_name[n].default)) for n in names}
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.status, self.phase, self.events = w.HTML(), w.HTML(), w.HTML()
        self.bar = w.FloatProgress(min=0, max=1, layout=w.Layout(width="300px", display="none"))
        self.bar_label = w.HTML(layout=w.Layout(display="none"))
        self.progress_box = w.VBox([self.phase, w.HBox([self.bar, self.bar_label]), self.events])
        self.out = w.Output()
        self.box = w.VBox([w.HTML(f"<h4>{html.escape(title)}</h4>"), *self.controls.values(),
                           w.HBox([self.run_button, self.stop_button, self.status]), self.progress_box, self.out])
        for widget, css in [(self.box, "lab-panel"), (self.run_button, "lab-panel-run"),
                            (self.stop_button, "lab-panel-stop"), (self.status, "lab-panel-status"),
                            (self.progress_box, "lab-panel-progress")]:
            widget.add_class(css)
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())
        self.last_result, self.last_outcome, self._progress = None, None, None
        self._done, self._lock = threading.Event(), threading.Lock()
        self._done.set()   # idle

    # ------------------------------------------------------------------ what the buttons do
    def values(self) -> dict:
        """The controls' values as scenario parameters (an empty text box is None where allowed)."""
        import ipywidgets as w
        return {name: None if isinstance(c, w.Text) and self.spec.by_name[name].none and c.value == ""
                else c.value for name, c in self.controls.items()}

    def start(self) -> None:
        if self.running:
            return
        try:
            params = self.spec.validate(**{**self._fixed_params(), **self.values()})
        except Exception as exc:  # refused before anything starts: one line, nothing ran
            self._finish(None, f"failed: {_one_line(exc)}", {"error": _one_line(exc)})
            return
        progress = self._progress = PanelProgress(self)
        self._done.clear()
        self.run_button.disabled, self.stop_button.disabled = True, False
        self.status.value = "running against the real broker…"
        self.phase.value = self.events.value = ""
        self.progress_box.layout.display = None
        self.out.clear_output()
        # The worker thread starts every process of the run: Stop kills that thread's children
        # (children_of_thread); they no longer die with it, but with the kernel (lab.runtime.reaper).
        progress.worker = threading.Thread(target=self._main, args=(params, progress), name="lab-panel-run",
                                           daemon=True)
        progress.worker.start()

    def stop(self) -> None:
        """End the run now: every run it created stops, every process its thread started is killed, and
        Spark's jobs are cancelled. The panel is free again once nothing of the run is left running, even
        if a call of its thread still waits for the killed broker (it ends in the background)."""
        progress = self._progress
        if not self.running or progress.stopping.is_set():
            return
        progress.stopping.set()
        self.status.value = "stopping…"
        self.stop_button.disabled = True
        for run in list(progress.runs):
            run.stop()
        try:
            stop_thread(progress.worker)   # and a process it starts from now on is refused
        finally:
            progress.killed.set()
        from ..audit.spark import cancel_jobs
        cancel_jobs()
        threading.Thread(target=self._when_stopped, args=(progress,), daemon=True).start()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def _fixed_params(self) -> dict:
        return {k: v for k, v in self.fixed.items() if k in self.spec.by_name}

    def _main(self, params: dict, progress: PanelProgress) -> None:
        result, error = None, None
        try:
            with observed(progress):
                extras = {k: v for k, v in self.fixed.items() if k not in self.spec.by_name}   # cluster=
                result = self.scenario(**extras, **params)
        except BaseException as exc:  # noqa: BLE001 - reported in the panel, not raised in a dead thread
            error = exc
            self._log_traceback(exc)
        if progress.stopping.is_set():
            # the run's thread may unwind while the Stop is still killing its processes one by one: count what is
            # left once the Stop is through (a broker and a class-archive dump take a moment each)
            progress.killed.wait(30)
        outcome = progress.outcome()
        if progress.stopping.is_set():
            self._finish(progress, _stopped_text(outcome), outcome)
        elif error is not None:
            outcome["error"] = _one_line(error)
            self._finish(progress, f"failed: {_one_line(error)}", outcome)
        else:
            outcome.update(verdict=result.verdict(), failure_reproduced=result.failed)
            if progress.current:
                self.last_result = result
                self.show_result(result, self.out.append_display_data)
            self._finish(progress, f"done: {html.escape(result.verdict())}", outcome)

    def _when_stopped(self, progress: PanelProgress, grace: float = 5.0) -> None:
        """After a Stop: the run's thread normally ends within a second or two; if a call still blocks,
        report the stop anyway once no process of the run is left."""
        progress.worker.join(grace)
        outcome = progress.outcome()
        self._finish(progress, _stopped_text(outcome, unwinding=progress.worker.is_alive()), outcome)

    def _finish(self, progress: PanelProgress | None, text: str, outcome: dict) -> bool:
        """Show how a run ended, once (the first of its worker and its stop watcher wins); False if it was
        not the panel's current run any more."""
        with self._lock:
            if progress is not None and (progress is not self._progress or self._done.is_set()):
                return False
            self.last_outcome = {**outcome, "status": text}
            self.progress_box.layout.display = "none" if "verdict" in outcome else None
            self.status.value = text
            self.run_button.disabled, self.stop_button.disabled = False, True
            self._done.set()
            return True

    def _log_traceback(self, exc: BaseException) -> None:
        path = WORK_DIR / "panel-errors.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            f.write("".join(traceback.format_exception(exc)))

    # ------------------------------------------------------------------ for tests: click as a user would
    def click(self, values: dict | None = None, *, stop_after: float | None = None,
              timeout: float = 900) -> dict:
        """Set controls (name -> value), click Run (and Stop after `stop_after` s), wait for the end.

        Returns the outcome: verdict and failure_reproduced, or error, or stopped; seconds;
        left_running (processes of the run still alive at its end: must be 0); the status line.
        """
        import ipywidgets as w
        for name, value in (values or {}).items():
            c = self.controls[name]
            if isinstance(c, w.SelectMultiple):
                c.value = tuple(value)
            elif isinstance(c, w.Text):   # a list, or a number that may be None: typed as text
                c.value = "" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            else:
                c.value = value
        self.last_outcome = None
        self.run_button.click()
        if stop_after is not None and self.running:
            time.sleep(stop_after)
            self.stop_button.click()
        if not self._done.wait(timeout):
            raise TimeoutError(f"the panel's run did not end within {timeout:.0f} s")
        return dict(self.last_outcome or {})

    def _ipython_display_(self):
        from IPython.display import display
        display(self.box)


def _stopped_text(outcome: dict, unwinding: bool = False) -> str:
    left = outcome["left_running"]
    return (f"stopped after {outcome['seconds']:.0f} s; "
            + (f"{left} process(es) still running" if left else "nothing left running")
            + ("; a call that waited for the killed broker ends in the background" if unwinding else ""))


def _one_line(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" + ("" if isinstance(exc, _lab_error()) else
                                               f" (traceback in {WORK_DIR / 'panel-errors.log'})")


def _lab_error():
    from ..errors import LabError
    return LabError


def panel(spec: Spec, scenario, *, show=None, title: str = "Try it yourself", only=None, **values) -> Panel:
    """Show a panel for the spec's parameters (`only` = a subset) that calls scenario(**params).

    `values` are the starting values (the notebook's parameters) and fixed keyword arguments such
    as `cluster=`. `show(result, display)` draws a result (default: result.show(display)).
    """
    from IPython.display import display
    p = Panel(spec, scenario, show=show, title=title, only=only, **values)
    _shown.append(p)
    display(p.box)
    return p


def last_panel() -> Panel:
    """The panel shown last in this kernel."""
    if not _shown:
        raise LookupError("no panel has been shown in this kernel (is INTERACTIVE = True?)")
    return _shown[-1]
