"""The course as a static site (lab.commands.site, `make site`): notebook 00 executed, rendered, and opened in chromium.

The whole site (every notebook at its defaults) is `make site`, timed in benchmarks/RESULTS.md: too long here.
"""
import re
import shutil
from pathlib import Path

import pytest

from lab.commands import site
from lab.errors import LabError
from lab.record.recorded import read_results
from lab.scenarios import COURSE
from tests.expectations import nb00

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_notebooks_are_chosen_by_number_and_an_unknown_one_is_refused():
    assert site.names(["0", "04"]) == ["00_setup_check", "04_store_reads"]
    assert site.names(["07b"]) == ["07b_partitions"] and len(site.names(["07"])) == 4   # a chapter: its lessons
    assert site.names() == [e.name for e in COURSE]   # every lesson of the course, in its order
    with pytest.raises(LabError, match="no notebook numbered 42"):
        site.names(["42"])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    report = site.build(root, ["00"], parameters={"00_setup_check": nb00.PARAMETERS}, out=lambda _line: None)
    return root, report


def test_the_page_shows_what_the_notebook_measured_and_no_widget(built):
    root, report = built
    assert list(report) == ["00_setup_check"] and report["00_setup_check"]["seconds"] > 0
    page = (root / "00_setup_check.html").read_text()
    results = read_results(root / "executed" / "00_setup_check.ipynb")
    assert results["verdict"] in page.replace("&#39;", "'").replace("&quot;", '"'), results["verdict"]
    assert page.count('class="plotly-graph-div"') >= 1 and "Plotly.newPlot" in page
    assert site.WIDGET not in page and "needs a live kernel: open this notebook in the lab" in page
    assert "INTERACTIVE" not in page   # nothing to switch on: the panel shows wherever the notebook runs live
    assert not re.search(r'src="https?://', page), re.findall(r'src="https?://[^"]*"', page)   # works offline
    assert 'href="01_quiet_service.html"' in page          # the course's links point at pages
    assert "as_record()" not in page and "results are saved" not in page   # the recording cell is not on the page
    assert "../docs/glossary.md" not in page and (root / "glossary.html").exists()
    index = (root / "index.html").read_text()
    assert 'href="00_setup_check.html"' in index and "04_store_reads (not built)" in index
    guide = (root / "teaching.html").read_text()
    assert "Teaching with Kafka Failure Lab" in guide and 'href="setup.html#when-something-fails"' in guide
    assert "When something fails" in (root / "setup.html").read_text()


def open_in_browser(pages: list[Path]) -> dict[str, dict]:
    """Each page in chromium (headless, Playwright): {page name: {"figures": n, "drawn": n, "errors": [...]}},
    its console errors and page errors included. Also used by benchmarks/site_check.py on a whole site."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    seen = {}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            for path in pages:
                errors = []
                page = browser.new_page()
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(path.as_uri())
                figures = page.locator(".plotly-graph-div").count()
                if figures:
                    page.wait_for_function(f"document.querySelectorAll('.plotly-graph-div .main-svg').length "
                                           f">= {figures}", timeout=60000)
                seen[path.name] = {"figures": figures, "errors": errors,
                                   "drawn": page.locator(".plotly-graph-div:has(.main-svg)").count()}
                page.close()
        finally:
            browser.close()
    return seen


def test_every_figure_draws_in_a_browser_and_the_page_logs_no_error(built):
    if not CHROMIUM:
        pytest.skip("chromium is not installed (`make test` installs it when run as root with apt-get)")
    root, _ = built
    seen = open_in_browser([root / "00_setup_check.html", root / "index.html", root / "teaching.html",
                            root / "setup.html"])
    page = seen["00_setup_check.html"]
    assert page["figures"] >= 1 and page["drawn"] == page["figures"], page
    assert all(not s["errors"] for s in seen.values()), seen
