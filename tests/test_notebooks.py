"""The course's notebooks, executed headless by papermill, and their recorded results asserted.

Only the course's own notebooks run (the names in `lab.notebook.COURSE`): a copy a student
saves in notebooks/ (`00_interactive.ipynb`) is not part of the suite.

Each notebook `NN_name` has `tests/expectations/nbNN.py` with
- PARAMETERS (small sizes injected through papermill; the failure must still reproduce) and
  `check(results)`, which asserts what the notebook measured;
- optionally CONTROL (parameters under which the failure must NOT happen) and
  `check_control(results)`, which asserts the clean verdict.
"""
import ast
import importlib
import json
import re
import sys
from pathlib import Path

import papermill
import pytest

from lab.notebook import COURSE
from lab.results import read_results

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NAMES = [name for name, _ in COURSE]
CELL_TIMEOUT = 600  # seconds; papermill's default is "never"
SECTIONS = ["## Setup", "## Parameters", "## Try it yourself", "## Exercises", "## Solutions",
            "## Recorded results"]


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


@pytest.mark.parametrize("name, variant", runs())
def test_notebook(name: str, variant: str, tmp_path: Path):
    expect = expectations(name)
    if variant == "control":
        assert hasattr(expect, "check_control"), f"tests/expectations for {name} has CONTROL but no check_control"
        parameters, check = expect.CONTROL, expect.check_control
    else:
        parameters, check = expect.PARAMETERS, expect.check
    notebook = NOTEBOOK_DIR / f"{name}.ipynb"
    output = tmp_path / notebook.name
    papermill.execute_notebook(
        str(notebook), str(output), parameters=parameters, kernel_name="python3",
        cwd=str(NOTEBOOK_DIR), execution_timeout=CELL_TIMEOUT, log_output=True,
        stdout_file=sys.stdout, stderr_file=sys.stderr, progress_bar=False)
    results = read_results(output)
    assert results, f"{name} ({variant}) recorded no results"
    check(results)


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
    assert assigned[-1] == "INTERACTIVE", f"{name}: INTERACTIVE = False comes last in the parameters cell"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_surface(name: str):
    """One level-1 heading (the title), then the course's sections in order."""
    headings = [line.rstrip() for c in _cells(name) if c["cell_type"] == "markdown"
                for line in "".join(c["source"]).splitlines() if re.match(r"#{1,6} ", line)]
    titles = [h for h in headings if h.startswith("# ")]
    assert len(titles) == 1, f"{name}: exactly one level-1 heading, found {titles}"
    assert headings[0] == titles[0], f"{name}: the title comes first, before {headings[0]!r}"
    sections = [h for h in headings if h in SECTIONS]
    missing = [s for s in SECTIONS if s not in sections]
    assert not missing, f"{name}: missing sections {missing}"
    assert sections == SECTIONS, f"{name}: sections out of order: {sections}"
