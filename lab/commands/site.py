"""The course as a static site: every notebook executed at its default parameters, then rendered to HTML.

    make site [SITE_DIR=site] [NOTEBOOKS="00 04"]      (python -m lab site DIR [--notebooks 00 04])

A teacher previews what each lesson shows, and an attendee whose laptop fails follows along, without running
anything. The notebooks run two at a time where the machine has room (else one), headless (papermill, as the tests
run them), on this machine: every figure, table, verdict and explanation on the site is one this machine measured. Rendering is nbconvert's: the
Jupyter project's own exporter, installed with JupyterLab (no other tool to install or keep), whose `lab` template
looks like the JupyterLab the learners use (without the scripts it fetches from the network: lab/site_template). The plotly figures stay interactive and work offline: the lab saves
them with plotly.js inside (lab.notebook.setup). Widgets need a live kernel, so their outputs are left out and the
panel's cell says how to get it. index.html lists the course; teaching.html is the teacher's guide (docs/teaching.md), setup.html the
attendees' set-up page (docs/setup.md), glossary.html the terms the lessons link to (docs/glossary.md), answers.html
the teachers' answer key (docs/answers.md). The cell that
records a notebook's results is left out of its page.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

from ..config import LAB_DIR

ROOT = LAB_DIR.parent
NOTEBOOK_DIR = ROOT / "notebooks"
CELL_TIMEOUT = 900   # seconds, one cell
WIDGET = "application/vnd.jupyter.widget-view+json"
TEMPLATE_DIR = LAB_DIR / "site_template"   # nbconvert's lab template, offline
PANEL_NOTE = ('<div class="lab-site-note" style="border-left:4px solid #1f77b4;padding:6px 12px;background:#f4f8fb">'
              "The panel (your values, your prediction, the lesson run again) needs a live kernel: open this notebook "
              "in the lab (<code>make lab</code>) and run it.</div>")
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}
code{{background:#f3f3f3;padding:0 3px}}</style></head>
<body>{body}</body></html>
"""


def names(numbers: list[str] | None = None) -> list[str]:
    """The course's notebooks, or those whose number is in `numbers` ("00", "4", "04_stale...", "07a" all work; a
    chapter's number, "07", gives its lessons)."""
    from ..errors import LabError
    from ..scenarios import COURSE
    course = [e.name for e in COURSE]
    if not numbers:
        return course
    wanted = {n.split("_")[0].zfill(2) for n in numbers}

    def chosen(name: str) -> bool:
        return name.split("_")[0] in wanted or name[:2] in wanted
    unknown = sorted(w for w in wanted if not any(c.split("_")[0] == w or c[:2] == w for c in course))
    if unknown:
        raise LabError(f"no notebook numbered {', '.join(unknown)} in the course ({', '.join(course)})")
    return [c for c in course if chosen(c)]


def headless_kernel_manager():
    """The kernel manager of a headless run: its kernel's sockets are files (IPC) in Jupyter's runtime folder, not TCP
    ports. A TCP kernel takes five ports that were free a moment before it binds them; with brokers and other kernels
    starting beside it, one can be taken by then, and the kernel's heartbeat dies with "Address already in use"."""
    import uuid

    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from jupyter_core.utils import ensure_dir_exists
    from traitlets import default

    class FileSocketKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:   # an absolute path: the kernel runs in the notebook's folder, not ours
            runtime = jupyter_runtime_dir()
            ensure_dir_exists(runtime, mode=0o700)   # a fresh machine has none until Jupyter's first start
            return str(Path(runtime) / f"kernel-{uuid.uuid4().hex[:12]}-ipc")

    return FileSocketKernelManager


def execute(name: str, into: Path, parameters: dict | None = None) -> Path:
    """Run one notebook headless, at its defaults unless `parameters` says otherwise; returns the executed copy."""
    import papermill

    from ..toolbox.panel import headless_kernels
    into.mkdir(parents=True, exist_ok=True)
    out = into / f"{name}.ipynb"
    with headless_kernels():   # no one to see a panel: its cell shows nothing, and the page says how to get it
        papermill.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(out), parameters=parameters or {},
                                   kernel_name="python3", cwd=str(NOTEBOOK_DIR), execution_timeout=CELL_TIMEOUT,
                                   progress_bar=False,
                                   kernel_manager_class=headless_kernel_manager())
    return out


# plotly's notebook renderer always loads MathJax from a CDN beside each figure; the lab's figures have no LaTeX
MATHJAX_FROM_CDN = re.compile(r'<script src="https://[^"]*/mathjax/[^"]*"></script>')


def for_the_page(nb) -> None:
    """In place: widget outputs out (no kernel behind the page), the panel's cell with its note, the cell that
    records the results out (machinery, not lesson), and nothing fetched from the network."""
    import nbformat
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and re.match(r"\s*record\(", c.source))]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.get("outputs", []) if WIDGET not in o.get("data", {})]
        for output in cell.outputs:
            if isinstance(output.get("data", {}).get("text/html"), str):
                output.data["text/html"] = MATHJAX_FROM_CDN.sub("", output.data["text/html"])
        if re.search(r"^\s*panel\(", cell.source, re.M):
            cell.outputs.append(nbformat.v4.new_output("display_data", data={"text/html": PANEL_NOTE}))


def render(executed: Path, page: Path) -> Path:
    """One executed notebook as a page; links to other notebooks of the course point at their pages."""
    import nbformat
    from nbconvert import HTMLExporter
    nb = nbformat.read(executed, as_version=4)
    for_the_page(nb)
    exporter = HTMLExporter(template_name="lab", template_file=str(TEMPLATE_DIR / "offline.html.j2"))
    body, _ = exporter.from_notebook_node(nb)
    body = re.sub(r'href="(\d\d[a-z]?_\w+)\.ipynb"', r'href="\1.html"', body)
    body = re.sub(r'href="\.\./docs/glossary\.md', 'href="glossary.html', body)   # the glossary is a page too
    page.write_text(body)
    return page


def _markdown(text: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune
    return markdown2html_mistune(text)


def index(site: Path, built: dict[str, dict]) -> Path:
    """index.html: the course table, each notebook linked to its page (or marked not built), and the guide."""
    from ..scenarios import COURSE
    rows = []
    for entry in COURSE:
        b = built.get(entry.name)
        link = (f'<a href="{entry.name}.html">{entry.name}</a>' if b else f"{entry.name} (not built)")
        took = f"{b['seconds']:.0f} s" if b else ""
        shows = re.sub(r"^<p>|</p>\s*$", "", _markdown(entry.shows()).strip())
        rows.append(f"<tr><td>{link}</td><td>{shows}</td><td>{took}</td></tr>")
    body = ("<h1>Kafka Failure Lab</h1><p>Every notebook of the course, executed at its default parameters on the "
            "machine that built this site, with its figures, tables and verdicts. The panels and the exercises' "
            "checks need a live kernel: run the lab itself for those (<code>make lab</code>).</p>"
            "<table><tr><th>notebook</th><th>what it shows</th><th>run time here</th></tr>" + "".join(rows)
            + '</table><p><a href="teaching.html">Teaching with Kafka Failure Lab</a>: lesson times and plans; '
            '<a href="setup.html">Before the course</a>: setting up a laptop, and what to do when it fails; '
            '<a href="glossary.html">Glossary</a>; <a href="answers.html">Answer key, for teachers</a>.</p>')
    page = site / "index.html"
    page.write_text(PAGE.format(title="Kafka Failure Lab", body=body))
    for doc, title in (("teaching", "Teaching with Kafka Failure Lab"), ("setup", "Before the course"),
                       ("glossary", "Glossary"), ("answers", "Answer key, for teachers")):
        html = _markdown((ROOT / "docs" / f"{doc}.md").read_text())
        # the pages link to each other as pages of the site; other links point into the repository
        html = re.sub(r'href="(teaching|setup|glossary|answers)\.md', r'href="\1.html', html)
        html = re.sub(r'href="\.\./notebooks/(\d\d[a-z]?_\w+)\.ipynb', r'href="\1.html', html)
        (site / f"{doc}.html").write_text(PAGE.format(title=title, body=html))
    return page


def build(site: Path, numbers: list[str] | None = None, parameters: dict[str, dict] | None = None,
          out=print, workers: int | None = None) -> dict[str, dict]:
    """Execute and render the notebooks (all, or `numbers`), `workers` at a time (default: two where the machine
    has the cores and memory for two lessons side by side, else one), then the index; returns {name: {"seconds":
    run time, "page": path}}, also written to build.json. `parameters`: {name: {...}} for smaller runs than the
    defaults (the tests). Each notebook runs in a process of its own: its kernel, brokers and ports are its own."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    site = Path(site)
    chosen = names(numbers)
    site.mkdir(parents=True, exist_ok=True)
    record = site / "build.json"
    built = json.loads(record.read_text()) if record.exists() else {}
    workers = max(1, min(workers or side_by_side(), len(chosen)))
    out(f"{len(chosen)} notebook(s), {workers} at a time, each at its "
        f"{'given' if parameters else 'default'} parameters ...")
    started = time.monotonic()
    # one: here, in this process; more: spawned, never forked (a fork of a process with threads, a test runner's,
    # can hang on a lock another thread held)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) if workers > 1 else None
    try:
        done = (f.result() for f in as_completed([pool.submit(_run_one, name, site, (parameters or {}).get(name))
                                                  for name in chosen])) if pool else \
            (_run_one(name, site, (parameters or {}).get(name)) for name in chosen)
        for name, seconds, page in done:
            built[name] = {"seconds": round(seconds, 1), "page": page}
            out(f"{name}: {seconds:.0f} s, {site / page}")
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
    record.write_text(json.dumps(built, indent=1) + "\n")
    out(f"Site: {index(site, built)} ({time.monotonic() - started:.0f} s in all)")
    return built


def side_by_side() -> int:
    """Two notebooks at a time on a machine with 2+ cores and 8 GiB free (two of the heaviest lessons peak near 3 GiB
    each), else one."""
    import os

    import psutil
    return 2 if (os.cpu_count() or 1) >= 2 and psutil.virtual_memory().available >= 8 * 2**30 else 1


def _run_one(name: str, site: Path, parameters: dict | None) -> tuple[str, float, str]:
    started = time.monotonic()
    executed = execute(name, site / "executed", parameters)
    seconds = time.monotonic() - started
    return name, seconds, render(executed, site / f"{name}.html").name
