"""The documents attendees and teachers follow: every command they show exists as written, every figure they
quote is one measured in benchmarks/RESULTS.md, and the Compose broker's wait gives up within its bound."""
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


def without_lessons_table(doc: str) -> str:
    return re.sub(r"<!-- lessons:.*?<!-- lessons: end -->", "", doc, flags=re.S)


@pytest.mark.parametrize("name", QUOTING)
def test_every_size_and_time_a_document_quotes_is_a_measured_one(name):
    figures = " | ".join(quoted().values())
    doc = without_lessons_table(text(name))
    unknown = [figure for figure in SIZE.findall(doc) + TIME.findall(doc) if figure not in figures]
    assert not unknown, f"{name} quotes {unknown}, which benchmarks/RESULTS.md's quoted table lacks"


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
