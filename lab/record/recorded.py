"""Named results a notebook records and its papermill test reads back.

`record(name=value, ...)` displays a small JSON output with a lab-specific
MIME type; `read_results(notebook)` collects every such output of an executed
notebook into one dict.
"""
from __future__ import annotations

import json
from pathlib import Path

MIME = "application/vnd.kafka-failure-lab.results+json"


SAVED = "This run's results are saved in the notebook."   # all a learner sees of them (the site hides the cell)


def record(**results) -> dict:
    """Keep `results` in the cell's output (read_results reads them back); the cell shows one line."""
    from IPython.display import display
    clean = json.loads(json.dumps(results, default=str))
    display({MIME: clean, "text/plain": SAVED}, raw=True)
    return clean


def read_results(notebook: str | Path) -> dict:
    nb = json.loads(Path(notebook).read_text())
    found: dict = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if MIME in data:
                found.update(data[MIME])
    return found
