"""The course's notebooks, executed headless by papermill, and their recorded results asserted.

Only the course's own notebooks run (the names in `lab.notebook.COURSE`): a copy a student
saves in notebooks/ (`00_interactive.ipynb`) is not part of the suite.

Each notebook `NN_name` has `tests/expectations/nbNN.py` with
- PARAMETERS (small sizes injected through papermill; the failure must still reproduce) and
  `check(results)`, which asserts what the notebook measured;
- optionally CONTROL (parameters under which the failure must NOT happen) and
  `check_control(results)`, which asserts the clean verdict;
- PANEL (values for the panel's controls, small) and PANEL_FAILS (must those values reproduce the
  failure?). Every run but one is headless (KAFKA_LAB_HEADLESS=1 in its kernel's environment, as
  `make site` runs them): its panel cell shows nothing. One run of each notebook (the CONTROL one where
  there is one) runs as a learner's does, with the panel shown, and the harness adds cells that answer
  the panel's question and click its Run as a user would: once while the notebook's cluster is up, then,
  after its last cell stopped it, once more with Stop clicked after 3 s (the panel starts a cluster of
  its own). `check_panel` asserts the verdict, the prediction beside the measurement in the panel's table,
  the Stop, and that no process of a panel run is left. A whole run on the panel's own cluster is the
  toolbox's path, the same for every notebook: the Stop click proves it.

Every run's outputs must be quiet: no Spark WARN, JVM warning or librdkafka `%N|` line in a cell.
"""
import ast
import contextlib
import importlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import papermill
import pytest

from lab.commands.site import headless_kernel_manager
from lab.notebook import COURSE
from lab.toolbox.panel import headless_kernels
from lab.scenarios import mitigate_call, notebook as notebook_entry
from lab.record.recorded import read_results
from lab.toolbox.room import ROOM_ENV
from tests.room_server import assert_room_heard, room_lines, running_room, silent_room

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NAMES = [entry.name for entry in COURSE]
CELL_TIMEOUT = 600  # seconds; papermill's default is "never"
STOP_AFTER_S = 3   # the panel's Stop is clicked this long after its Run
# Runs made in a workshop's room (lab/room): one whose room is up must tell it what it recorded; one whose room the
# network lost (a port that never answers) must run as it does alone, with one line more.
ROOM_RUNS = {("07a_poll_loop", "failure"): "up", ("07a_poll_loop", "control"): "lost"}
# Spark's console log line, the JVM's own warnings, librdkafka's `%4|1700000000.123|GETPID|…`
NOISE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|ERROR) |^WARNING: |Using Spark's default log4j"
                   r"|^%\d\|\d+\.\d+\|")
# A lesson notebook (lab.toolbox.lesson): one lesson's steps, in order. The setup check has nothing to fix (no
# Mitigate); the doctor's notebook diagnoses your own cluster after its exercises.
LESSON_NOTEBOOK_SECTIONS = ["## Setup", "## Parameters", "## The setting", "## Predict", "## Run", "## Observe",
                            "## Explain", "## Mitigate", "## Exercises", "## Try it yourself", "## Key points"]
SECTIONS = {"00_setup_check": [s for s in LESSON_NOTEBOOK_SECTIONS if s != "## Mitigate"],
            "08_diagnose_your_cluster": [*LESSON_NOTEBOOK_SECTIONS[:9], "## Your cluster",
                                         *LESSON_NOTEBOOK_SECTIONS[9:]]}


def expectations(name: str):
    number = name.split("_")[0]
    try:
        return importlib.import_module(f"tests.expectations.nb{number}")
    except ModuleNotFoundError:
        pytest.fail(f"{name} has no tests/expectations/nb{number}.py: every notebook's results are asserted")


def runs():
    """(notebook, "failure" | "control") for each parameter set its expectations define."""
    cases = []
    for name in NAMES:
        cases.append(pytest.param(name, "failure", id=f"{name}[failure]", marks=pytest.mark.notebook))
        number = name.split("_")[0]
        try:
            has_control = hasattr(importlib.import_module(f"tests.expectations.nb{number}"), "CONTROL")
        except ModuleNotFoundError:
            has_control = False   # test_notebook[failure] says what is missing
        if has_control:
            cases.append(pytest.param(name, "control", id=f"{name}[control]", marks=pytest.mark.notebook))
    return cases


def interactive(expect, variant: str) -> bool:
    """The run whose panel the harness clicks: the CONTROL run, or the only one."""
    return hasattr(expect, "PANEL") and variant == ("control" if hasattr(expect, "CONTROL") else "failure")


def with_panel_clicks(notebook: Path, panel_values: dict, into: Path) -> Path:
    """A copy of the notebook with cells that click its panel: before its last cell stops the
    notebook's cluster (the panel borrows it), and a Stop after that (the panel starts its own)."""
    nb = nbformat.read(notebook, as_version=4)
    # the first answer the panel's question offers (or 1 for a number): any answer will do, the row must hold it
    answer = "(lambda asked: asked[1][0] if asked[1] else 1)(last_panel().question.asked)"
    click = ("from lab.toolbox.panel import last_panel  # added by tests/test_notebooks.py\n"
             f"record(panel_cluster_up=last_panel().click({panel_values!r}, prediction={answer}))")
    after = f"record(panel_stop=last_panel().click({panel_values!r}, stop_after={STOP_AFTER_S}))"
    stops = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip() == "lesson.end(cluster)"]
    at = stops[-1] if stops else len(nb.cells)
    nb.cells[at:at] = [nbformat.v4.new_code_cell(click)]
    nb.cells.append(nbformat.v4.new_code_cell(after))
    nbformat.write(nb, into)
    return into


# Appended to every run: each exercise tried with no answer, its solution and its tempting wrong answer
# (tests.expectations.try_exercises), recorded as `exercises` (asserted by tests.expectations.exercises).
# An expectations module's TRIED_IN_FAILURE_ONLY names experiment exercises whose run does not depend on what
# CONTROL changes: tried once, in the failure run.
TRY_EXERCISES = """\
# added by tests/test_notebooks.py
import sys
sys.path.insert(0, {root!r})
from tests.expectations import try_exercises
record(exercises=try_exercises(result, skip={skip!r}))
"""


def with_fix(notebook: Path, fix: dict, into: Path) -> Path:
    """A copy whose Mitigate cell runs `fix` (a test's own, {} to skip the step) instead of the one written there:
    the learner reads and edits the fix in that cell; a test gives its own without a parameter the learner sees."""
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and mitigate_call(c.source)]
    assert len(cells) == 1, f"{notebook.name}: one Mitigate cell `fixed = lesson.mitigate(result, ...)`"
    lines = cells[0].source.splitlines()
    call = mitigate_call(cells[0].source)
    lines[call.lineno - 1:call.end_lineno] = [f"fixed = lesson.mitigate(result, **{fix!r})"]
    cells[0].source = "\n".join(lines)
    nbformat.write(nb, into)
    return into


def with_exercises_tried(notebook: Path, into: Path, skip: tuple = ()) -> Path:
    """A copy with the exercises tried before its last cell stops the notebook's cluster, where a learner tries
    them: an experiment exercise runs on that cluster, as its lesson did."""
    nb = nbformat.read(notebook, as_version=4)
    stops = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip() == "lesson.end(cluster)"]
    at = stops[-1] if stops else len(nb.cells)
    nb.cells[at:at] = [nbformat.v4.new_code_cell(TRY_EXERCISES.format(root=str(ROOT), skip=tuple(skip)))]
    nbformat.write(nb, into)
    return into


@pytest.mark.parametrize("name, variant", runs())
def test_notebook(name: str, variant: str, tmp_path: Path, monkeypatch):
    expect = expectations(name)
    if variant == "control":
        assert hasattr(expect, "check_control"), f"tests/expectations for {name} has CONTROL but no check_control"
        parameters, check = expect.CONTROL, expect.check_control
    else:
        parameters, check = expect.PARAMETERS, expect.check
    notebook = NOTEBOOK_DIR / f"{name}.ipynb"
    if "FIX" in parameters:   # the test's own fix, in the Mitigate cell
        parameters = {k: v for k, v in parameters.items() if k != "FIX"}
        notebook = with_fix(notebook, (expect.CONTROL if variant == "control" else expect.PARAMETERS)["FIX"],
                            tmp_path / f"fix-{notebook.name}")
    if interactive(expect, variant):
        notebook = with_panel_clicks(notebook, expect.PANEL, tmp_path / f"input-{notebook.name}")
    # an exercise whose experiment is tried in one of the two runs only (TRIED_IN_<VARIANT>_ONLY) is skipped in the other
    only_in_other = "TRIED_IN_FAILURE_ONLY" if variant == "control" else "TRIED_IN_CONTROL_ONLY"
    notebook = with_exercises_tried(notebook, tmp_path / f"tried-{notebook.name}", skip=getattr(expect, only_in_other, ()))
    output = tmp_path / f"{name}.ipynb"
    in_room = ROOM_RUNS.get((name, variant))
    with contextlib.ExitStack() as stack:
        room = stack.enter_context(running_room(tmp_path / "room.sqlite")) if in_room == "up" else None
        if in_room:
            monkeypatch.setenv(ROOM_ENV, room.url if room else stack.enter_context(silent_room()))
        with headless_kernels(not interactive(expect, variant)):
            papermill.execute_notebook(
                str(notebook), str(output), parameters=parameters, kernel_name="python3",
                # written at its end (or its failing cell), not after every cell: a notebook grows to megabytes of
                # figures, and its saves cost the worker about 3 CPU-s a run
                request_save_on_cell_execute=False,
                cwd=str(NOTEBOOK_DIR), execution_timeout=CELL_TIMEOUT, log_output=True,
                stdout_file=sys.stdout, stderr_file=sys.stderr, progress_bar=False,
                kernel_manager_class=headless_kernel_manager())
        if room is not None:   # the kernel gave its last messages time to go at its exit
            assert_room_heard(room, read_results(output), notebook_entry(name.split("_")[0]).lesson.key)
    lines = room_lines(output)
    assert len(lines) == (1 if in_room == "lost" else 0), f"lines about the room: {lines}"
    if os.environ.get("KAFKA_LAB_KEEP_NOTEBOOKS"):   # keep the executed notebook (benchmarks read its results)
        keep = Path(os.environ["KAFKA_LAB_KEEP_NOTEBOOKS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(output, keep / f"{name}[{variant}].ipynb")
    results = read_results(output)
    assert results, f"{name} ({variant}) recorded no results"
    check(results)
    assert_panel_shown(output, interactive(expect, variant))
    if interactive(expect, variant):
        check_panel(results, expect.PANEL_FAILS)
    assert_quiet(output)


def assert_panel_shown(executed: Path, shown: bool) -> None:
    """The panel's cell (under "## Try it yourself") shows the panel's widget in a learner's run, nothing headless."""
    cells = nbformat.read(executed, as_version=4).cells
    at = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Try it yourself"))
    cell = next(c for c in cells[at:] if c.cell_type == "code")
    assert cell.source.startswith("panel(lesson, "), cell.source
    widgets = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    if shown:
        assert len(widgets) == 1, f"the panel's cell shows {len(widgets)} widgets: {cell.outputs}"
    else:
        assert not cell.outputs, f"a headless run showed something in the panel's cell: {cell.outputs}"


def check_panel(results: dict, fails: bool) -> None:
    """The panel's runs, clicked by with_panel_clicks: the verdict, the prediction beside the measurement in the
    panel's table, a Stop that stops, nothing left."""
    outcome = results["panel_cluster_up"]
    assert "error" not in outcome and outcome["status"].startswith("done:"), outcome
    assert outcome["failure_reproduced"] is fails, outcome
    assert outcome["left_running"] == 0, outcome
    row = outcome["history_row"]
    assert outcome["prediction"] is not None and row["predicted"] is not None, outcome
    if outcome["measured"] is not None:   # measured: the row says whether the prediction was right
        assert isinstance(outcome["prediction_right"], bool) and row["right"] is outcome["prediction_right"], outcome
    assert row["run"] == 1 and row["ended"].startswith("done:"), row
    stop = results["panel_stop"]
    assert stop["stopped"] is True and stop["status"].startswith("stopped"), stop
    assert stop["history_row"]["run"] == 2, stop
    assert stop["left_running"] == 0 and "nothing left running" in stop["status"], stop


def assert_quiet(executed: Path) -> None:
    """No Spark WARN, JVM warning or librdkafka `%N|` line in any cell output."""
    noisy = []
    for i, cell in enumerate(nbformat.read(executed, as_version=4).cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            noisy += [f"cell {i}: {line}" for line in text.splitlines() if NOISE.search(line)]
    assert not noisy, "noise in the notebook's outputs:\n" + "\n".join(noisy[:10])


# ---------------------------------------------------------------- fast: the notebooks' surface

def _cells(name: str) -> list[dict]:
    return json.loads((NOTEBOOK_DIR / f"{name}.ipynb").read_text())["cells"]


def test_the_course_notebooks_exist():
    missing = [n for n in NAMES if not (NOTEBOOK_DIR / f"{n}.ipynb").exists()]
    assert not missing, f"lab.notebook.COURSE lists notebooks that do not exist: {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_parameters_cell_is_readable_by_papermill(name: str):
    """papermill lists every UPPER_CASE name of the `parameters` cell (a " = " in a comment hides it)."""
    cells = [c for c in _cells(name) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{name} needs exactly one cell tagged 'parameters' (found {len(cells)})"
    source = "".join(cells[0]["source"])
    assigned = [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)]
    assert assigned and all(n.isupper() for n in assigned), f"{name}: parameters must be UPPER_CASE: {assigned}"
    inspected = papermill.inspect_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"))
    assert sorted(inspected) == sorted(assigned), (
        f"{name}: papermill reads {sorted(inspected)} from the parameters cell, which assigns {sorted(assigned)} "
        "(write no ' = ' inside comments)")
    assert "INTERACTIVE" not in assigned, f"{name}: the panel shows by itself; no flag to change for it"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_surface(name: str):
    """One level-1 heading (the title), then the course's sections in order (a `# comment` in a fenced code block is
    no heading)."""
    prose = [re.sub(r"^```.*?^```", "", "".join(c["source"]), flags=re.M | re.S) for c in _cells(name)
             if c["cell_type"] == "markdown"]
    headings = [line.rstrip() for text in prose for line in text.splitlines() if re.match(r"#{1,6} ", line)]
    titles = [h for h in headings if h.startswith("# ")]
    assert len(titles) == 1, f"{name}: exactly one level-1 heading, found {titles}"
    assert headings[0] == titles[0], f"{name}: the title comes first, before {headings[0]!r}"
    wanted = SECTIONS.get(name, LESSON_NOTEBOOK_SECTIONS)
    sections = [h for h in headings if h in wanted]
    missing = [s for s in wanted if s not in sections]
    assert not missing, f"{name}: missing sections {missing}"
    assert sections == wanted, f"{name}: sections out of order: {sections}"


@pytest.mark.parametrize("name", NAMES)
def test_solutions_stay_hidden_until_the_learner_asks(name: str):
    """No cell runs a solution (Run All would show it): each exercise has its check cell, left to the learner,
    and the prose under it offers `result.solution(n)`, which shows the solution and why when asked for."""
    code = "\n".join("".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code")
    prose = "\n".join("".join(c["source"]) for c in _cells(name) if c["cell_type"] == "markdown")
    checked = sorted({int(n) for n in re.findall(r"\b\w+\.check\((\d+),", code)})
    offered = sorted({int(n) for n in re.findall(r"\b\w+\.solution\((\d+)\)", prose)})
    assert checked and checked == offered, (name, checked, offered)
    assert "olution" not in code, f"{name}: a code cell holds a solution"


def _mitigates(name: str) -> bool:
    """Whether the notebook's lesson has a Mitigate step that the learner runs (lab.toolbox.mitigate)."""
    return any(re.search(r"^fixed = \w+\.mitigate\(", "".join(c["source"]), re.M) for c in _cells(name))


@pytest.mark.parametrize("name", [n for n in NAMES if _mitigates(n)])
def test_the_learner_writes_the_fix_in_the_cell_that_runs_it_and_its_verdict_is_recorded(name: str):
    """The Mitigate step: the fix is written as the lesson's parameters in the cell the learner runs (no FIX
    parameter at the top), after the failure's run; the cell prints its verdict, and the record keeps it."""
    code = ["".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code"]
    parameters = next("".join(c["source"]) for c in _cells(name) if "parameters" in c["metadata"].get("tags", []))
    assert not re.search(r"^FIX\w* = ", parameters, re.M), f"{name}: the fix belongs in the Mitigate cell"
    assert not any("FIX" in src for src in code), f"{name}: FIX is gone; the Mitigate cell holds the fix"
    fixed = [i for i, src in enumerate(code) if mitigate_call(src)]
    assert len(fixed) == 1 and "print(fixed.verdict())" in code[fixed[0]], (name, fixed)
    given = mitigate_call(code[fixed[0]]).keywords
    assert given and all(k.arg for k in given), f"{name}: the Mitigate cell names its fix: {code[fixed[0]]!r}"
    entry = notebook_entry(name)
    assert entry.lesson.mitigate.check(entry.lesson.spec.defaults, entry.written_fix()), name   # one it takes
    ran = [i for i, src in enumerate(code) if re.search(r"^result = lesson\.run\(", src, re.M)]
    assert len(ran) == 1 and ran[0] < fixed[0], (name, ran, fixed)
    assert any("**fixed.as_record()" in src for src in code), f"{name}: the fix's verdict is not recorded"


@pytest.mark.parametrize("name", NAMES)
def test_the_setup_cell_names_the_lesson_by_number_and_the_cluster_starts_after_the_parameters(name: str):
    """The Setup cell gets the lesson by the notebook's number (a module's name could name the failure, and the
    cell is read before the question); the cell after the parameters checks them and starts the cluster."""
    cells = _cells(name)
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    number = name.split("_")[0]
    assert code[0] == f'from lab.notebook import *\nlesson = setup("{number}")', (name, code[0])
    at = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    after = next("".join(c["source"]) for c in cells[at + 1:] if c["cell_type"] == "code")
    assert after == ("PARAMS = lesson.spec.from_notebook(globals())\n"
                     "cluster = kafka_cluster(**lesson.needs(PARAMS)).start()"), (name, after)


@pytest.mark.parametrize("name", NAMES)
def test_the_last_cell_ends_the_lesson_and_the_panel_shows_without_a_flag(name: str):
    """The notebook's last cell gives back what the lesson took (its broker, the kernel's Spark); the panel's cell
    just above the key points calls panel(lesson, ...) with no flag around it: it shows wherever a person runs it."""
    code = ["".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code"]
    assert code[-1] == "lesson.end(cluster)", (name, code[-1])
    panels = [src for src in code if re.search(r"^panel\(", src, re.M)]
    assert len(panels) == 1 and panels[0].startswith("panel(lesson, cluster=cluster, **PARAMS"), (name, panels)


@pytest.mark.parametrize("name", NAMES)
def test_the_learner_predicts_before_the_run_and_the_run_takes_the_answer(name: str):
    """A Predict cell comes before the run; the run takes the prediction as it starts and prints it beside its
    measurement; the recorded results keep both (tests/expectations assert them, with and without a given
    prediction; tests/test_experiment.py that a later answer does not count)."""
    code = ["".join(c["source"]) for c in _cells(name) if c["cell_type"] == "code"]
    asked = [i for i, src in enumerate(code) if src.strip() == "guess = lesson.predict(PARAMS, PREDICTION)"]
    ran = [i for i, src in enumerate(code) if src.strip() == "result = lesson.run(cluster=cluster, prediction=guess, "
                                                              "**PARAMS)"]
    assert len(asked) == 1 and len(ran) == 1 and asked[0] < ran[0], (name, asked, ran)
    assert any("**guess.as_record()" in src for src in code), f"{name}: the prediction is not recorded"


@pytest.mark.parametrize("name", NAMES)
def test_every_lesson_has_its_exercise_after_its_run_numbered_in_order(name: str):
    """Try: the notebook checks at least one exercise on its run's result, after the run, and the exercises are
    numbered in the order the learner meets them."""
    cells = _cells(name)
    sources = ["".join(c["source"]) for c in cells]
    checks = [(i, var, int(n)) for i, c in enumerate(cells) if c["cell_type"] == "code"
              for var, n in re.findall(r"^(\w+)\.check\((\d+),", sources[i], re.M)]
    at = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and re.search(r"^result = \w+\.run\(", sources[i], re.M)]
    assert len(at) == 1, (name, at)
    assert any(i > at[0] and v == "lesson" for i, v, _ in checks), f"{name}: no exercise on the lesson after its run"
    numbers = [n for _, _, n in checks]
    assert numbers and numbers == sorted(set(numbers)) and numbers[0] == 1, f"{name}: exercises numbered {numbers}"


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_answers_with_a_hint_then_a_closer_one_and_nothing_before_the_run(name: str, capsys):
    """Each exercise has a second, closer hint; before the lesson ran, a check says so in a line (no traceback)."""
    lesson = notebook_entry(name).lesson
    assert lesson.exercises, name
    for number, exercise in lesson.exercises.items():
        assert len(exercise.closer.split()) >= 5, f"{name}: exercise {number} has no closer hint"
    lesson.last = None
    checked = lesson.check(min(lesson.exercises), 0)
    assert not checked and "run the lesson first" in capsys.readouterr().out
