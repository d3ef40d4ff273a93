"""The documents attendees and teachers follow: every command they show exists as written, every figure they
quote is the one of the row of benchmarks/RESULTS.md's quoted table that defines it, the teacher's plans give each
lesson its minutes from the lesson table, and the Compose broker's wait gives up within its bound."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lab.commands import preflight

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "docs/setup.md", "docs/teaching.md", "docs/doctor.md"]
QUOTING = ["README.md", "docs/setup.md", "docs/teaching.md"]   # the documents whose figures are measured ones


def text(name: str) -> str:
    return (ROOT / name).read_text()


def commands(doc: str) -> list[str]:
    """Shell lines of the fenced bash blocks, and inline code that starts like a command."""
    found = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", doc, re.S):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    found += [c for c in re.findall(r"`([^`\n]+)`", doc)
              if re.match(r"(make|python3?|\.venv/bin/python|docker|conda)\b", c)]
    return [c for c in found if not c.startswith("#")]


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", text("Makefile"), re.M))


def lab_subcommands() -> set[str]:
    usage = subprocess.run([sys.executable, "-m", "lab", "--help"], capture_output=True, text=True, cwd=ROOT).stdout
    return set(re.search(r"\{([\w,-]+)\}", usage).group(1).split(","))


@pytest.mark.parametrize("name", DOCS)
def test_every_command_a_document_shows_exists_and_runs_as_written(name):
    shown = commands(text(name))
    assert shown, f"{name} shows no command"
    targets, subcommands = make_targets(), lab_subcommands()
    for line in shown:
        for target in re.findall(r"(?:^|[;&|]\s*)make\s+([a-z][\w-]*)", line):
            assert target in targets, f"{name}: `{line}` runs make {target}, which the Makefile does not have"
        for sub in re.findall(r"-m lab (\w[\w-]*)", line):
            assert sub in subcommands, f"{name}: `{line}` runs lab {sub}, which `python -m lab` does not have"
        # macOS and Ubuntu have no `python`, and their `python3` may be too old: the lab's own, or a make target
        assert not re.search(r"(?:^|[\s;&|(])python3?\s+(?!--version)", line), f"{name}: `{line}` uses a bare python"


def test_the_commands_an_attendee_runs_are_make_targets():
    assert {"lab", "test", "check", "fetch-all", "doctor", "reinstall", "prune", "kit", "site"} <= make_targets()


# ------------------------------------------------------------------------------------------- measured figures

def quoted() -> dict[str, str]:
    """benchmarks/RESULTS.md's table of the figures the documents quote: what -> figure."""
    section = text("benchmarks/RESULTS.md").split("## What the documents quote", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return {row[0]: row[1] for row in rows[1:]}


SIZE = re.compile(r"\b\d[\d,.]*\s?(?:KB|MB|GB|GiB)\b")
TIME = re.compile(r"\b\d+(?:\.\d+)? (?:s|min|minutes)(?: \d+ s)?\b")
FIGURE = re.compile(f"{SIZE.pattern}|{TIME.pattern}")

# Every place a document quotes a figure, tied to the row of RESULTS.md's quoted table that defines it: (the words
# around it, with {} where the row's figure goes, {0}, {1}, ... for each figure of a row of several; {what} for the
# figure the row's "what" names), the row's "what". Whitespace counts as one space.
QUOTES = {
    "README.md": [
        ("one cell that runs it ({} or less on a 2-core laptop)", "each lesson alone at its defaults"),
        ("`make lab` sets everything up the first time ({} to download;", "download of `make lab` from nothing"),
        ("to download; {} in the lab's own measurement", "`make lab`'s set-up, the first time"),
        ("(the jars of every lesson, {} more)", "download of `make fetch-all` after it"),
        ("`make check` ({}, offline)", "the pre-flight"),
        ("The lab needs {} of disk once installed", "disk once installed"),
        ("plus {} free for its runs", "free disk the pre-flight asks for"),
        ("and {} of free memory", "memory the pre-flight asks for"),
        ("the whole test suite ({} of tests on 2 cores", "the test suite"),
        ("writes an offline kit once ({} for every platform)", "the offline kit, every platform"),
        ("static pages to `site/` ({} here)", "the course as a site"),
        ("diagnoses every {} and serves Prometheus metrics", "the doctor as a monitor, in the README's example"),
        ("On an {what} laptop, give WSL2 more memory", "WSL2's memory on an 8 GB laptop"),
        ("write `[wsl2]` and `memory={}` on two lines", "WSL2's memory on an 8 GB laptop"),
    ],
    "docs/setup.md": [
        ("it downloads {} (the lab's own measurement", "download of `make lab` from nothing"),
        ("the lab's own measurement took {})", "`make lab`'s set-up, the first time"),
        ("On an {what} laptop, give WSL2 more memory", "WSL2's memory on an 8 GB laptop"),
        ("write `[wsl2]` and `memory={}` on two lines", "WSL2's memory on an 8 GB laptop"),
        ("(2 cores and {} are asked for)", "Codespaces' machine"),
        ("That downloads another {}.", "download of `make fetch-all` after it"),
        ("| at least {} free now |", "memory the pre-flight asks for"),
        ("| at least {} free where the lab's runs go", "free disk the pre-flight asks for"),
        ("| download, `make lab` from nothing | {} (", "download of `make lab` from nothing"),
        ("| download, `make fetch-all` after it | {} more |", "download of `make fetch-all` after it"),
        ("| disk, once installed | {} (", "disk once installed"),
        ("(the environment {},", "the environment on disk"),
        ("the jars {}), plus", "the jars of every lesson on disk"),
        ("plus the {} free that the pre-flight asks for", "free disk the pre-flight asks for"),
        ("| memory | {} free;", "memory the pre-flight asks for"),
        ("the heaviest lesson peaked at {} with", "memory the heaviest notebook peaked at"),
        ("| the offline kit | {} for the platform and Python that built it", "the offline kit, this machine's platform and Python"),
        ("built it, {} for every platform and Python", "the offline kit, every platform"),
        ("on an {what} laptop, give it more in", "WSL2's memory on an 8 GB laptop"),
        ("(`[wsl2]` then `memory={}`)", "WSL2's memory on an 8 GB laptop"),
        ("takes about {} and needs no network", "the pre-flight"),
        ("after at most {0} of start-up and 10 failed checks, {1} each) or after {2}.", "the Compose broker's wait"),
    ],
    "docs/teaching.md": [
        ("at home with the network ({},", "download of `make lab` from nothing"),
        (", then {}), how to read the pre-flight", "download of `make fetch-all` after it"),
        ("once, with the network ({} for every platform and Python", "the offline kit, every platform"),
        ("; {} for your own platform and Python alone", "the offline kit, this machine's platform and Python"),
        ("at their defaults peaked at {})", "memory the heaviest notebook peaked at"),
        ("laptops with less than {what} of memory", "WSL2's memory on an 8 GB laptop"),
        ("`make site` ({} here)", "the course as a site"),
        ("`make check` ({}, offline)", "the pre-flight"),
        ("`00_setup_check` to its end ({}).", "notebook 00, the setup check"),
        ("its `memory` line says whether {} is free", "memory the pre-flight asks for"),
        ("`make lab` shuts down a kernel idle for {} (its outputs stay;", "a kernel idle this long is shut down by `make lab`"),
    ],
}


def without_lessons_table(doc: str) -> str:
    return re.sub(r"<!-- lessons:.*?<!-- lessons: end -->", "", doc, flags=re.S)


def quoted_as(snippet: str, what: str) -> str:
    """The words of `snippet` with the figures of the row `what` in place."""
    rows = quoted()
    assert what in rows, f"benchmarks/RESULTS.md's quoted table has no row {what!r}"
    named = FIGURE.search(what)
    return snippet.format(*FIGURE.findall(rows[what]) or [rows[what]], what=named.group() if named else "")


@pytest.mark.parametrize("name", QUOTING)
def test_every_figure_a_document_quotes_is_the_one_of_the_row_that_defines_it(name):
    doc = re.sub(r"\s+", " ", without_lessons_table(text(name)))
    covered = set()
    for snippet, what in QUOTES[name]:
        words = re.sub(r"\s+", " ", quoted_as(snippet, what))
        spans = [m.span() for m in re.finditer(re.escape(words), doc)]
        assert spans, f"{name} does not say {words!r}: its figure is not the one of the row {what!r} (or the words changed)"
        covered |= {i for start, end in spans for i in range(start, end)}
    untied = [f"{m.group()} in …{doc[max(0, m.start() - 40):m.end() + 20]}…" for m in FIGURE.finditer(doc)
              if m.start() not in covered]
    assert not untied, f"{name} quotes figures tied to no row of benchmarks/RESULTS.md (add them to QUOTES): {untied}"


def test_the_pre_flight_asks_for_what_the_documents_say():
    figures = quoted()
    assert figures["memory the pre-flight asks for"] == f"{preflight.MEMORY_GB:g} GiB"
    assert figures["free disk the pre-flight asks for"] == f"{preflight.DISK_GB:g} GiB"


def lesson_rows(doc: str, column: int) -> dict[tuple[str, str], str]:
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) > column and re.fullmatch(r"\d\d[a-z]?", cells[0]):
            rows[(cells[0], cells[1])] = cells[column]
    return rows


def test_the_guide_has_a_row_for_every_notebook_of_the_course_in_its_order():
    from lab.scenarios import COURSE
    guide = re.search(r"<!-- lessons:.*?<!-- lessons: end -->", text("docs/teaching.md"), re.S).group(0)
    assert [number for number, _ in lesson_rows(guide, 4)] == [e.number for e in COURSE]


def test_the_guide_gives_each_lesson_its_measured_machine_time():
    guide = re.search(r"<!-- lessons:.*?<!-- lessons: end -->", text("docs/teaching.md"), re.S).group(0)
    section = text("benchmarks/RESULTS.md").split("## What the documents quote", 1)[1].split("\n## ", 1)[0]
    measured, planned = lesson_rows(section, 2), lesson_rows(guide, 4)
    assert planned and planned == measured, set(planned.items()) ^ set(measured.items())


# ------------------------------------------------------------------------------------------- docker-compose.yml

def test_the_compose_wait_gives_up_within_its_bound():
    """`docker compose up -d --wait --wait-timeout N`, as the documents show it, gives up after N seconds at most;
    the health check says unhealthy before that (start period, then retries x (interval + timeout)), so a broker
    that never becomes healthy fails the wait instead of holding it forever. No Docker engine runs here: this
    checks the bound the commands and the file set."""
    check = yaml.safe_load(text("docker-compose.yml"))["services"]["kafka"]["healthcheck"]
    seconds = {k: int(str(check[k]).rstrip("s")) for k in ("interval", "timeout", "start_period")}
    unhealthy_by = seconds["start_period"] + check["retries"] * (seconds["interval"] + seconds["timeout"])
    waits = set()
    for name in ["docker-compose.yml", *DOCS]:
        for line in re.findall(r"docker compose up[^\n`]*", text(name)):
            assert "--wait" in line and "--wait-timeout" in line, f"{name}: `{line}` waits with no bound"
            waits.add(int(re.search(r"--wait-timeout (\d+)", line).group(1)))
    assert waits and all(unhealthy_by < wait <= 300 for wait in waits), (unhealthy_by, waits)
    assert "docker-compose up" not in " ".join(text(n) for n in DOCS), "Compose v1 has no --wait"


def test_the_compose_file_cites_only_what_exists():
    for path in re.findall(r"\b((?:lab|docs|tests)/[\w/.-]+\.\w+)", text("docker-compose.yml")):
        assert (ROOT / path).exists(), f"docker-compose.yml cites {path}, which does not exist"


# ------------------------------------------------------------------------------------------- the teacher's plans

def plan(title: str) -> list[tuple[str, int, str]]:
    """A plan of docs/teaching.md, by its section's title: (clock, minutes, what) per row."""
    section = text("docs/teaching.md").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if re.match(r"\|\s*\d+:\d\d\s*\|", line)]
    return [(clock, int(minutes), what) for clock, minutes, what in rows]


def planned_notebooks(what: str, course: list[str]) -> list[str]:
    """The notebooks a plan's row teaches: those it starts with ("02a to 02c", "06a and 06e", "notebook 04: ...")."""
    found = re.match(r"(?:notebook )?(\d\d[a-z]?)(?:(?: to | and )(\d\d[a-z]?))?\b(?!')", what)
    if not found:
        return []
    first, last = found.group(1), found.group(2)
    if last and " to " in found.group(0):
        return course[course.index(first):course.index(last) + 1]
    return [first] + ([last] if last else [])


@pytest.mark.parametrize("title, length", [("A 90-minute session", 90), ("A day", 8 * 60)])
def test_each_plan_gives_a_lesson_the_minutes_of_the_table_and_its_clock_adds_up(title, length):
    guide = re.search(r"<!-- lessons:.*?<!-- lessons: end -->", text("docs/teaching.md"), re.S).group(0)
    table = {number: int(teach) + int(exercises) for line in guide.splitlines()
             if re.match(r"\|\s*\d\d[a-z]?\s*\|", line)
             for number, _, teach, exercises, *_ in [[c.strip() for c in line.strip().strip("|").split("|")]]}
    course, rows, seen = list(table), plan(title), []
    assert rows, f"no plan {title!r} in docs/teaching.md"
    for clock, minutes, what in rows:
        notebooks = planned_notebooks(what, course)
        if notebooks:
            assert minutes == sum(table[n] for n in notebooks), (
                f"{title}: {clock} gives {', '.join(notebooks)} {minutes} minutes; the lesson table says "
                f"{sum(table[n] for n in notebooks)}")
        else:   # a row of no lesson of its own must not count a lesson's exercise minutes again
            assert not (re.search(r"\b\d\d[a-z]?\b", what) and "exercise" in what), f"{title}: {clock} {what}"
        seen += notebooks
    assert len(seen) == len(set(seen)), f"{title}: a notebook is taught twice: {seen}"
    starts = [int(h) * 60 + int(m) for h, m in (clock.split(":") for clock, _, _ in rows)]
    for (clock, minutes, _), start, following in zip(rows, starts, starts[1:]):
        assert start + minutes == following, f"{title}: {clock} + {minutes} min is not the next row's clock"
    assert starts[-1] + rows[-1][1] - starts[0] == length, f"{title} is not {length} minutes long"
