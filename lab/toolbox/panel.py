"""The "tune and re-run" panel at the end of every lesson notebook, generated from the lesson's parameter spec.

    panel(lesson, cluster=cluster, **PARAMS, only=[...])

Shown wherever a person runs the notebook (JupyterLab, Notebook); a run that says it is headless
(KAFKA_LAB_HEADLESS=1 in the kernel's environment: the lab's tests and `make site`, or a CI of your own that runs
the notebooks) shows none and builds none: a kernel cannot tell reliably whether a widget front end is attached
(front ends draw a widget without a word back to the kernel), so the headless runner says so.

Before each run the learner answers the lesson's question for the values set (lab.toolbox.panel_predict); Run
starts the lesson in a worker thread, so the kernel stays free for the Stop button and the panel shows live
progress: the phase, a countdown bar for the long waits, and the events as they happen. When the run ends its
verdict, explanation, table and figure replace the progress, and a row of the panel's table sets the prediction
beside the measurement. The panel borrows the notebook's cluster while that is up and fits the parameters;
otherwise the run starts a broker of its own and stops it when it ends (lab.toolbox.Run). Values the spec refuses,
and a run that would not fit the memory that is free, are refused in one line before anything starts. Stop kills
every process the run started, at once. A failed run shows one line. A panel's run is never the one the lesson's
exercises judge.

CSS classes (the browser test's handles): lab-panel, lab-panel-run, lab-panel-stop, lab-panel-predict,
lab-panel-history, lab-panel-status (text starts with running / done: / stopped / failed: / refused:),
lab-panel-progress.
"""
from __future__ import annotations

import contextlib
import html
import os
import threading
import time
import traceback

from ..config import WORK_DIR
from ..runtime.processes import children_of_thread, stop_thread
from .panel_predict import PanelQuestion, RunHistory
from .params import Param
from .run import Progress, observed
from .timeline import TONES

_shown: list["Panel"] = []   # the panels shown in this kernel, newest last (tests click them)
HEADLESS = "KAFKA_LAB_HEADLESS"   # set to 1 by whoever runs the notebooks with no one to see them


def headless() -> bool:
    """Whether this kernel's runner said no one sees its widgets (KAFKA_LAB_HEADLESS=1)."""
    return os.environ.get(HEADLESS, "").strip().lower() not in ("", "0", "false", "no")


@contextlib.contextmanager
def headless_kernels(on: bool = True):
    """Kernels started inside (papermill's) inherit KAFKA_LAB_HEADLESS=1, or, with on=False, run as a learner's
    do whatever this process has; the environment as it was afterwards."""
    before = os.environ.pop(HEADLESS, None)
    if on:
        os.environ[HEADLESS] = "1"
    try:
        yield
    finally:
        os.environ.pop(HEADLESS, None)
        if before is not None:
            os.environ[HEADLESS] = before


def control(p: Param, value):
    """The ipywidget for one parameter: its range and choices come from the spec."""
    import ipywidgets as w
    said = ", ".join(filter(None, [p.unit, _range(p)]))   # "s, 1 to 600"
    label = p.name.upper() + (f" ({said})" if said else "")
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


def _range(p: Param) -> str:
    """The range a learner may set, from the spec: '1 to 600' (the control refuses a value outside it)."""
    if p.choices or p.type not in (int, float) or (p.lo is None and p.hi is None):
        return ""
    return f"{p.lo:g} to {p.hi:g}" if p.lo is not None and p.hi is not None else \
        (f"at least {p.lo:g}" if p.lo is not None else f"at most {p.hi:g}")


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
                "own_cluster": any(getattr(r, "owns_cluster", False) for r in self.runs)}   # a Run may be half made


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
    """Controls for a lesson's parameters, its question, Run and Stop, live progress, the last result and a row
    for every run."""

    def __init__(self, lesson, *, show=None, title: str = "Try it yourself", only=None, **values):
        import ipywidgets as w
        self.lesson, self.spec = lesson, lesson.spec
        self.show_result = show or (lambda result, display: result.show(display))
        names = [p.name for p in self.spec.params if only is None or p.name in only]
        self.fixed = {k: v for k, v in values.items() if k not in names}
        self.controls = {n: control(self.spec.by_name[n], values.get(n, self.spec.by_name[n].default)) for n in names}
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.status, self.phase, self.events = w.HTML(), w.HTML(), w.HTML()
        self.bar = w.FloatProgress(min=0, max=1, layout=w.Layout(width="300px", display="none"))
        self.bar_label = w.HTML(layout=w.Layout(display="none"))
        self.progress_box = w.VBox([self.phase, w.HBox([self.bar, self.bar_label]), self.events])
        self.out = w.Output()
        self.question = PanelQuestion(lesson, lambda: {**self._fixed_params(), **self.values()})
        for c in self.controls.values():
            c.observe(self.question.refresh, names="value")
        self.history = RunHistory(self.values())
        # the runs' table above the last result: a new row stays in view however long the result below it
        self.box = w.VBox([w.HTML(f"<h4>{html.escape(title)}</h4>"), *self.controls.values(), self.question.box,
                           w.HBox([self.run_button, self.stop_button, self.status]), self.history.widget,
                           self.progress_box, self.out])
        for widget, css in [(self.box, "lab-panel"), (self.run_button, "lab-panel-run"),
                            (self.stop_button, "lab-panel-stop"), (self.status, "lab-panel-status"),
                            (self.progress_box, "lab-panel-progress")]:
            widget.add_class(css)
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())
        self.last_result, self.last_outcome, self._progress, self._prediction = None, None, None, None
        self._done, self._lock = threading.Event(), threading.Lock()
        self._done.set()   # idle

    # ------------------------------------------------------------------ what the buttons do
    def values(self) -> dict:
        """The controls' values as the lesson's parameters (an empty text box is None where allowed)."""
        import ipywidgets as w
        return {name: None if isinstance(c, w.Text) and self.spec.by_name[name].none and c.value == ""
                else c.value for name, c in self.controls.items()}

    def start(self) -> None:
        if self.running:
            return
        try:
            params = self.spec.validate(**{**self._fixed_params(), **self.values()})
            self.lesson.refuse_unless_it_fits(params, self.fixed.get("cluster"))
        except Exception as exc:  # refused before anything starts: one line, nothing ran
            self._finish(None, f"refused: {_one_line(exc)}", {"error": _one_line(exc)})
            return
        self._prediction = self.question.take()
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
                result = self.lesson.run(**extras, **params, remember=False)   # the exercises judge the lesson's
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
            if self._prediction is not None and progress.current:
                self._prediction.compare(result.measured_answer())
                outcome.update(prediction=self._prediction.answer, measured=self._prediction.measured,
                               prediction_right=self._prediction.right())
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
            prediction = self._prediction if progress is not None else None
            row = self.history.add(self.values(), prediction, html.unescape(text))
            self.last_outcome["history_row"] = row
            if progress is not None:   # a run refused before it started keeps the answer for the next try
                self.question.next_run()
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
    def click(self, values: dict | None = None, *, prediction=None, stop_after: float | None = None,
              timeout: float = 900) -> dict:
        """Set controls (name -> value), answer the question (`prediction`), click Run (and Stop after
        `stop_after` s), wait for the end.

        Returns the outcome: verdict and failure_reproduced (with prediction, measured, prediction_right when
        answered), or error, or stopped; seconds; left_running (processes of the run still alive at its end: must
        be 0); the status line; history_row, the run's row in the panel's table.
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
        if prediction is not None:
            self.question.answer(prediction)
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


def panel(lesson, *, show=None, title: str = "Try it yourself", only=None, **values) -> None:
    """Show a panel for the lesson's parameters (`only` = a subset) that runs the lesson with them (last_panel()
    gives it; a cell that ends with this call shows it once); headless (KAFKA_LAB_HEADLESS=1), nothing is built or
    shown.

    `values` are the starting values (the notebook's parameters) and fixed keyword arguments such
    as `cluster=`. `show(result, display)` draws a result (default: result.show(display)).
    """
    if headless():
        return None
    from IPython.display import display
    p = Panel(lesson, show=show, title=title, only=only, **values)
    _shown.append(p)
    display(p.box)


def last_panel() -> Panel:
    """The panel shown last in this kernel."""
    if not _shown:
        raise LookupError(f"no panel has been shown in this kernel (is {HEADLESS} set in its environment?)")
    return _shown[-1]
