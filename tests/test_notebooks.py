"""Every numbered notebook, executed headless by papermill, and its recorded results asserted.

Each notebook `notebooks/NN_name.ipynb` has `tests/expectations/nbNN.py` with
PARAMETERS (small sizes injected through papermill, the failure must still
reproduce) and `check(results)`, which asserts what the notebook measured.
"""
import importlib
import sys
from pathlib import Path

import papermill
import pytest

from lab.results import read_results

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
CELL_TIMEOUT = 600  # seconds; papermill's default is "never"


def expectations(notebook: Path):
    number = notebook.name.split("_")[0]
    try:
        return importlib.import_module(f"tests.expectations.nb{number}")
    except ModuleNotFoundError:
        pytest.fail(f"{notebook.name} has no tests/expectations/nb{number}.py: every notebook's results are asserted")


@pytest.mark.notebook
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_notebook(notebook: Path, tmp_path: Path):
    expect = expectations(notebook)
    output = tmp_path / notebook.name
    papermill.execute_notebook(
        str(notebook), str(output), parameters=expect.PARAMETERS, kernel_name="python3",
        cwd=str(notebook.parent), execution_timeout=CELL_TIMEOUT, log_output=True,
        stdout_file=sys.stdout, stderr_file=sys.stderr, progress_bar=False)
    results = read_results(output)
    assert results, f"{notebook.name} recorded no results"
    expect.check(results)
