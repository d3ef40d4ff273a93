"""The lab in a real browser: JupyterLab started as `make lab` starts it, driven by Playwright in chromium.

JupyterLab opens on the course index (notebook 00). One lesson notebook (07c, the quickest at its defaults) is then
opened as committed, its parameters untouched, with exercise 1 answered wrongly as a learner might type it: Run All;
no cell shows a traceback or a stderr block; the wrong answer shows a cross and a hint; the plotly figures render;
the panel is there without anything changed; its question answered, the panel's Run ends with a verdict and a row
that sets the prediction beside the measurement; a second Run ends with "stopped" when Stop is clicked, and 10 s
later nothing that run started is still running. Screenshots go to the test's tmp folder (their paths are printed).
Notebook 00 itself runs under papermill (tests/test_notebooks.py), like every notebook.

The browser is Debian's `chromium` package (`make test` installs it with apt when run as root; Playwright's
own browser download is not used). Without chromium, or without the playwright package, the test is
skipped and says why. Run it alone with `pytest -m browser -s`.

The panel contract (lab/toolbox/panel.py): a VBox with class `lab-panel`; buttons "Run" (`lab-panel-run`)
and "Stop" (`lab-panel-stop`, disabled when idle); the question with its answers (`lab-panel-predict`); a status
(`lab-panel-status`) that reads `running…` during a run and starts with `done:`, `stopped`, `failed:` or `refused:`
when it ends; a progress area (`lab-panel-progress`); a table with a row a run (`lab-panel-history`).
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from tests.jupyterlab import Lab, LabDidNotStart, marked

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"

INDEX = "00_setup_check"     # the notebook `make lab` opens on
NOTEBOOK = "07c_lookups"     # the lesson opened, its parameters as committed (its lesson about 30 s, its Mitigate step as long)
WRONG_ANSWER = "no idea"     # the learner's answer to its exercise 1: the check shows a cross and a hint, no traceback
RUN_ALL_TIMEOUT = 600        # seconds
PANEL_TIMEOUT = 600        # one panel run, seconds
STOP_TIMEOUT = 60          # from the Stop click to the "stopped" status, seconds
STOP_AFTER_JVM_S = 4       # Stop is clicked this long after the second run's first JVM started
NEWS_POPUP = "official Jupyter news"

pytestmark = pytest.mark.browser


# ---------------------------------------------------------------- the browser, JupyterLab

@pytest.fixture(scope="module")
def lab(browser, tmp_path_factory):
    """JupyterLab on a free port with a token; its root holds the course index and the lesson, answered wrongly."""
    import nbformat
    work = tmp_path_factory.mktemp("browser")
    root = work / "notebooks"
    root.mkdir()
    shutil.copy(NOTEBOOK_DIR / f"{INDEX}.ipynb", root / f"{INDEX}.ipynb")
    nb = nbformat.read(NOTEBOOK_DIR / f"{NOTEBOOK}.ipynb", as_version=4)
    answered_wrongly(nb, WRONG_ANSWER)
    nbformat.write(nb, root / f"{NOTEBOOK}.ipynb")
    try:
        server = Lab(root, work)
    except LabDidNotStart as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()
        left = marked(server.marker)
        for proc in left.values():
            try:
                proc.kill()
            except Exception:
                pass
        if left:
            pytest.fail(f"processes of the browser test left after JupyterLab stopped: {describe(left.values())}")


# ---------------------------------------------------------------- processes started from JupyterLab

def describe(procs) -> str:
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {proc.name()}: {' '.join(proc.cmdline())[:160]}")
        except Exception:
            out.append(f"{proc.pid} (gone)")
    return "\n  ".join(["", *out])


def started_since(before: dict, now: dict, roots: set[int]) -> list:
    """Processes in `now` not in `before`, except those under a process that was already there other than
    `roots` (the server, the kernels): Spark's Python workers belong to the Spark JVM that was already up."""
    import psutil
    new = []
    for pid, proc in now.items():
        if pid in before:
            continue
        try:
            if any(p.pid in before and p.pid not in roots for p in proc.parents()):
                continue
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                new.append(proc)
        except psutil.Error:
            continue
    return new


def is_java(proc) -> bool:
    try:
        return proc.name() == "java"
    except Exception:
        return False


# ---------------------------------------------------------------- the page

def say(capsys, line: str) -> None:
    with capsys.disabled():
        print(f"\n[browser] {line}", flush=True)


def shot(page, path: Path, capsys, what: str, target=None) -> None:
    if target is not None:
        for _ in range(2):   # cells scrolled into view lay out and paint after a moment (content-visibility)
            target.scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
    page.screenshot(path=str(path))
    say(capsys, f"screenshot ({what}): {path}")


def wait_until(condition, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def prompts(page) -> list[str]:
    return page.eval_on_selector_all(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt",
                                     "els => els.map(e => e.textContent.trim())")


def run_all(page, lab: Lab, notebook: str, timeout: float) -> float:
    """Run > Run All Cells; wait until no cell is queued or running and the kernel is idle. Seconds taken."""
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all'], "
                 ".lm-Menu-item[data-command='notebook:run-all-cells']").first.click()
    started, idle_since = time.monotonic(), None
    deadline = started + timeout
    while True:
        busy = any("*" in p for p in prompts(page))
        session = lab.session(notebook)
        idle = not busy and session and session["kernel"]["execution_state"] == "idle"
        now = time.monotonic()
        if idle and time.monotonic() - started > 2:
            idle_since = idle_since or now
            if now - idle_since >= 2:
                return idle_since - started
        else:
            idle_since = None
        if now > deadline:
            pytest.fail(f"{notebook}: Run All did not finish in {timeout} s (prompts {prompts(page)})\n"
                        f"{lab.log_tail()}")
        time.sleep(0.5)


def status_text(status) -> str:
    return " ".join(status.inner_text().split())


ENDS = ("done:", "stopped", "failed:", "refused:")


def wait_status(status, prefixes: tuple[str, ...], timeout: float) -> str:
    """The panel status once it starts with one of `prefixes`; a run that ends otherwise fails the test."""
    def reached():
        text = status_text(status)
        if text.startswith(prefixes):
            return text
        if text.startswith(ENDS):
            pytest.fail(f"the panel's run ended {text!r}, expected {' or '.join(prefixes)}")
        return None
    try:
        return wait_until(reached, timeout, f"the panel status to start with {' or '.join(prefixes)}", interval=0.25)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc} (it reads {status_text(status)!r})")


def click_run(run, status, timeout: float = 60) -> str:
    """Click Run; the status once the click took effect (running, or already ended if the run was instant)."""
    before = status_text(status)
    run.click()
    return wait_until(lambda: (t := status_text(status)) != before and t.startswith(("running", *ENDS)) and t,
                      timeout, "the panel to start the run", interval=0.25)


def predict_in(panel) -> str:
    """Answer the panel's question as a learner does: the last of its choices, or a number typed in. The answer."""
    question = panel.locator(".lab-panel-predict")
    choices = question.locator("input[type=radio]")
    if choices.count():
        choices.last.check()
        return " ".join(question.locator("label").last.inner_text().split())
    question.locator("input[type=text]").fill("1")
    question.locator("input[type=text]").press("Enter")
    return "1"


def answered_wrongly(nb, answer) -> None:
    """In place: exercise 1's check cell given `answer`, as a learner who types a wrong one."""
    cell = next(c for c in nb.cells if c.cell_type == "code" and re.search(r"^lesson\.check\(1, ", c.source, re.M))
    cell.source = re.sub(r"^lesson\.check\(1, .*\)$", f"lesson.check(1, {answer!r})", cell.source, flags=re.M)


# ---------------------------------------------------------------- the test

@pytest.mark.timeout(1500)
def test_notebook_in_browser(browser, lab: Lab, tmp_path: Path, capsys):
    name, notebook = NOTEBOOK, f"{NOTEBOOK}.ipynb"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        # make lab opens on the course index (notebook 00); the lesson opens by its URL
        page.goto(f"{lab.url}/?token={lab.token}")
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=90_000)
        assert f"/lab/tree/{INDEX}.ipynb" in page.url, f"JupyterLab did not open on the course index: {page.url}"
        page.goto(f"{lab.url}/lab/tree/{notebook}?reset&token={lab.token}")
        page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=90_000)
        tab = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
        assert tab.inner_text().strip() == notebook, f"the open tab is {tab.inner_text()!r}, not {notebook}"
        wait_until(lambda: (s := lab.session(notebook)) and s["kernel"]["execution_state"] == "idle", 120,
                   f"{notebook}'s kernel to start")

        # Run All
        seconds = run_all(page, lab, notebook, RUN_ALL_TIMEOUT)
        say(capsys, f"{name}: Run All took {seconds:.1f} s")
        shot(page, tmp_path / f"{name}-1-run-all.png", capsys, "after Run All")

        # every code cell ran; no traceback, no stderr block
        not_run = [i for i, p in enumerate(prompts(page)) if not re.search(r"\d", p)]
        stderr = page.eval_on_selector_all(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]',
            "els => els.map(e => e.innerText.slice(0, 300))")
        tracebacks = page.locator(".jp-OutputArea-output", has_text="Traceback (most recent call last)").count()
        assert not stderr and not tracebacks, (
            f"{name}: {len(stderr)} stderr/error output(s), {tracebacks} traceback(s) in the cells:\n"
            + "\n---\n".join(stderr))
        assert not not_run, f"{name}: code cells {not_run} did not run (Run All stopped early)"
        feedback = page.locator(".jp-OutputArea-output", has_text="✗ Exercise 1.")   # answered wrongly
        assert feedback.count() == 1 and "Not quite" in feedback.first.inner_text(), (
            f"{name}: the wrong answer to exercise 1 shows no cross and hint")
        assert page.get_by_text(NEWS_POPUP).count() == 0, "JupyterLab shows the Jupyter news popup"

        # the plotly figures render
        plots = page.locator(".jp-Notebook .js-plotly-plot")
        wait_until(lambda: plots.count() > 0, 60, f"{name}'s plotly figures to render")
        drawn = page.locator(".jp-Notebook .js-plotly-plot .main-svg")   # plotly.js drew into the figure
        wait_until(lambda: drawn.count() >= plots.count(), 60, f"{name}'s plotly figures to be drawn")
        say(capsys, f"{name}: {plots.count()} plotly figure(s) rendered")
        shot(page, tmp_path / f"{name}-2-figure.png", capsys, "first figure", plots.first)

        # the panel: Run, wait for its verdict
        panel = page.locator(".lab-panel").first
        try:
            panel.locator(".lab-panel-run").wait_for(timeout=60_000)
        except Exception:
            pytest.fail(f"{name}: no panel (.lab-panel with a .lab-panel-run button) after Run All: see the panel "
                        "contract in this file's docstring")
        run, stop = panel.locator(".lab-panel-run"), panel.locator(".lab-panel-stop")
        status, progress = panel.locator(".lab-panel-status"), panel.locator(".lab-panel-progress")
        assert stop.count() == 1, f"{name}: the panel has no Stop button (.lab-panel-stop)"
        assert stop.is_disabled(), f"{name}: Stop is enabled while the panel is idle"
        predicted = predict_in(panel)
        say(capsys, f"{name}: predicted {predicted!r} in the panel")
        clicked = time.monotonic()
        click_run(run, status)
        verdict = wait_status(status, ("done:",), PANEL_TIMEOUT)
        first_run = time.monotonic() - clicked
        say(capsys, f"{name}: panel run took {first_run:.1f} s: {verdict}")
        rows = panel.locator(".lab-panel-history tr")
        wait_until(lambda: rows.count() == 2, 30, "the panel's table to show the run's row")
        row = " ".join(rows.nth(1).inner_text().split())
        assert predicted in row and ("✓" in row or "✗" in row), f"{name}: the run's row {row!r} lacks the prediction"
        say(capsys, f"{name}: the panel's row: {row}")
        shot(page, tmp_path / f"{name}-3-panel-done.png", capsys, "panel verdict", panel)

        # Run again, then Stop: the run ends "stopped", and 10 s later nothing it started is running
        server_and_kernels = {pid for pid, p in marked(lab.marker).items()
                              if pid == lab.proc.pid or "ipykernel" in " ".join(p.cmdline())}
        before = marked(lab.marker)
        second = time.monotonic()
        assert click_run(run, status).startswith("running"), f"{name}: the second run ended before Stop"
        wait_until(lambda: stop.is_enabled(), 30, "Stop to be enabled during a run")
        wait_until(lambda: status_text(progress), 60, "the panel's progress to show the run")
        # Stop it early, with something to stop: its first JVM (a broker) up for a few seconds. Not later: the
        # second run reuses the kernel's Spark session and ends sooner than the first, so a Stop at half the
        # first run's time could come after its end (once in five runs it did).
        try:
            wait_until(lambda: any(is_java(p) for p in started_since(before, marked(lab.marker),
                                                                     server_and_kernels)), 60,
                       "the second run's first JVM")
        except pytest.fail.Exception:
            say(capsys, f"{name}: the second run started no JVM within 60 s; stopping it anyway")
        time.sleep(STOP_AFTER_JVM_S)
        assert status_text(status).startswith("running"), (
            f"{name}: the second run ended before Stop could be clicked: {status_text(status)!r}")
        running = started_since(before, marked(lab.marker), server_and_kernels)
        say(capsys, f"{name}: stopping the second run after {time.monotonic() - second:.1f} s, "
                    f"{len(running)} process(es) of it running ({sum(map(is_java, running))} JVMs)")
        shot(page, tmp_path / f"{name}-4-panel-running.png", capsys, "panel running", panel)
        say(capsys, f"{name}: progress while running: {status_text(progress)[:300]}")
        stop_clicked = time.monotonic()
        stop.click()
        stopped = wait_status(status, ("stopped", "done:"), STOP_TIMEOUT)
        stop_took = time.monotonic() - stop_clicked
        say(capsys, f"{name}: Stop -> {stopped!r} in {stop_took:.1f} s")
        assert stopped.startswith("stopped"), f"{name}: the run ended {stopped!r} after Stop, not 'stopped'"
        time.sleep(10)
        left = started_since(before, marked(lab.marker), server_and_kernels)
        shot(page, tmp_path / f"{name}-5-panel-stopped.png", capsys, "panel stopped", panel)
        jvms = [p for p in left if is_java(p)]
        assert not jvms, f"{name}: JVMs of the stopped run still running 10 s after Stop:{describe(jvms)}"
        assert not left, f"{name}: processes of the stopped run still running 10 s after Stop:{describe(left)}"
        assert stop.is_disabled() and run.is_enabled(), f"{name}: after Stop, Run is not enabled or Stop is not disabled"
        stderr = page.eval_on_selector_all(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]',
            "els => els.map(e => e.innerText.slice(0, 300))")
        assert not stderr, f"{name}: the panel's runs left stderr output in the notebook:\n" + "\n---\n".join(stderr)
    except BaseException:
        try:
            shot(page, tmp_path / f"{name}-failure.png", capsys, "at the failure")
        except Exception:
            pass
        say(capsys, f"JupyterLab log: {lab.log_path}")
        raise
    finally:
        context.close()
        try:
            lab.shutdown_kernels()   # the kernels (and their JVMs) end before the fixture looks for leftovers
        except OSError:
            pass                     # the server is gone: the lab fixture reports what it left
        deadline = time.monotonic() + 60
        while any(is_java(p) for p in marked(lab.marker).values()) and time.monotonic() < deadline:
            time.sleep(1)
