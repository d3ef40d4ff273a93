"""What a learner sees in a cell when something they did is refused: one line that says what to do, no traceback.

A real kernel (nbclient, as JupyterLab's runs a cell), no broker: the refusals come before anything starts.
"""
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from lab.commands.site import headless_kernel_manager

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

CELLS = [
    'from lab.notebook import *\nlesson = setup("07c")',
    # the failure's run as the notebook made it (its outcome is not needed: the fix is refused before any run)
    "result = lesson.result(None, **lesson.spec.defaults)",
    # a fix that changes one value and repeats another: a fix (not run here: it would start a broker)
    'lesson.mitigate.check(result.params, {"lookup_modes": ["threads"], "lookup_threads": 4})["lookup_modes"]',
    # the Mitigate cell edited wrongly: nothing changed
    'fixed = lesson.mitigate(result, lookup_modes=["direct"])',
    # a parameter out of range
    'lesson.spec.from_notebook({"LOOKUP_THREADS": 10**6})',
    # any other error keeps its traceback
    "1 / 0",
]


def test_a_lab_error_in_a_cell_is_one_line_and_any_other_error_keeps_its_traceback(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True,
                   resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
                   kernel_manager_class=headless_kernel_manager()).execute()
    outputs = [cell.outputs for cell in nb.cells]
    assert not [o for o in outputs[1] if o.output_type == "error"], outputs[1]
    assert outputs[2][0].data["text/plain"] == "['threads']"   # the fix is taken
    for at, words in ((3, "a fix must change something"), (4, "LOOKUP_THREADS")):
        shown = outputs[at]
        assert len(shown) == 1 and shown[0].output_type == "error" and shown[0].ename == "LabError", shown
        assert words in shown[0].evalue   # what Jupyter and papermill report
        text = "\n".join(shown[0].traceback)   # what the cell shows: the message alone, no frames
        assert len(text.strip().splitlines()) == 1 and words in text and "Traceback" not in text, text
    errors = [o for o in outputs[5] if o.output_type == "error"]
    assert errors and errors[0].ename == "ZeroDivisionError" and len("\n".join(errors[0].traceback).splitlines()) > 3
