"""The layout CONTRIBUTING.md describes: one package per chapter, named after it, none importing another's; one
notebook per lesson, its module in its chapter's package."""
import ast
import json
import re
from pathlib import Path

from lab.toolbox.lesson import Lesson
from lab.scenarios import COURSE, course_table, notebook

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "lab" / "scenarios"


def _folder(entry) -> Path:
    return SCENARIOS / entry.package.rsplit(".", 1)[-1]


def test_every_notebook_has_its_package_its_expectations_and_its_lesson():
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    assert [e.name for e in COURSE] == notebooks
    for entry in COURSE:
        assert (_folder(entry) / "__init__.py").exists()
        assert (ROOT / "tests" / "expectations" / f"nb{entry.number}.py").exists()
        assert isinstance(entry.lesson, Lesson), f"{entry.package}.{entry.scenario}: every notebook is one Lesson"
        assert not {"SPEC", "run", "mitigate"} & set(vars(entry.module())), f"{entry.scenario}: a second shape"


def test_a_chapters_lessons_are_lettered_in_order():
    chaptered = [e for e in COURSE if e.chapter]
    assert chaptered, "no chapter of lesson notebooks"
    for entry in chaptered:
        siblings = [e.number for e in COURSE if e.chapter == entry.chapter]
        assert siblings == [f"{entry.number[:2]}{chr(ord('a') + i)}" for i in range(len(siblings))], siblings


def test_the_doctor_names_notebooks_that_exist():
    from lab.doctor.rules import NOTEBOOKS
    missing = [name for name in NOTEBOOKS.values() if not (ROOT / "notebooks" / name).exists()]
    assert not missing, missing


def test_scenarios_holds_the_registry_and_one_entry_per_chapter_only():
    entries = sorted(p.name for p in SCENARIOS.iterdir() if p.name != "__pycache__")
    assert entries == sorted({"__init__.py", *(_folder(e).name for e in COURSE)})


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in a file: level 0 absolute, n for n leading dots."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
        elif isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
    return found


def test_no_notebook_package_imports_another():
    for entry in COURSE:
        for path in _folder(entry).glob("*.py"):
            for level, module in _imports(path):
                absolute = module if level == 0 else None
                assert not (level == 2 and re.match(r"nb\d\d_", module)), f"{path.name} imports ..{module}"
                assert not (absolute or "").startswith("lab.scenarios."), f"{path.name} imports {absolute}"
    for path in (ROOT / "lab").rglob("*.py"):   # nor does the toolbox reach into a notebook's package
        if SCENARIOS in path.parents:
            continue
        for level, module in _imports(path):
            assert "scenarios.nb" not in module and not re.match(r"nb\d\d_", module), f"{path} imports {module}"


def test_the_registry_finds_notebooks_and_cites_sources_by_title():
    assert notebook("03a").scenario == "fencing" and notebook("04").scenario == "stale_standby"
    assert notebook("07a").package == notebook("07d_broker_bounce").package == "lab.scenarios.nb07_when_streams_stop"
    table = course_table()
    assert "seed" not in table.lower() and "issue" not in table.lower()
    assert "Tales from running Kafka Streams in Production" in table


# Words of the lab's own workshop that a learner should not meet: source documents by an internal number, the
# tools that run the course headless, the project's issues and notes.
INTERNAL = re.compile(r"\bseeds?\b|papermill|failures\.md|\bCI\b|\bissue \d+|\bpytest\b|\bUNCONFIRMED\b|"
                      r"\bthe tests?'s?\b|\bunder test\b", re.I)


def _learner_text():
    """(where, text) of every notebook cell a learner reads, every parameter description the panels show and every
    exercise's solution (what `result.solution(n)` shows)."""
    from lab.toolbox import Result
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            yield f"{path.name} cell {i}", "".join(cell["source"])
    for entry in COURSE:
        spec = entry.lesson.spec if entry.lesson else entry.module().SPEC
        for param in spec.params:
            yield f"{entry.scenario}.{param.name}", param.help
    results = {cls for entry in COURSE if not entry.lesson for cls in vars(entry.module()).values()
               if isinstance(cls, type) and issubclass(cls, Result) and cls.exercises}
    lessons = [entry.lesson for entry in COURSE if entry.lesson and entry.lesson.exercises]
    assert len(results) + len(lessons) == len(COURSE), results   # every notebook's exercises are read
    for where, exercises in [*((c.__name__, c.exercises) for c in results), *((l.key, l.exercises) for l in lessons)]:
        for number, exercise in exercises.items():
            yield f"{where} exercise {number}", exercise.why


def test_learner_text_has_no_internal_words():
    found = [f"{where}: {m.group(0)!r}" for where, text in _learner_text() for m in INTERNAL.finditer(text)]
    assert not found, found


def _imports_of_lab() -> dict:
    """Each module of lab/ -> the modules of lab/ it imports, at module level or inside a function."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in (ROOT / "lab").rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
                stem = ".".join([*base, *(node.module.split(".") if node.module else [])])
                found |= {f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_import_circle_in_lab_at_module_or_function_level():
    graph, done, circles = _imports_of_lab(), set(), []

    def visit(node, path):
        if node in path:
            circles.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        done.add(node)
    for node in sorted(graph):
        visit(node, [])
    # a package's __init__ that re-exports its own modules is its face, not a circle
    real = [c for c in circles if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert not real, real


# The rooms under the toolbox, lowest first: each may import only itself, the rooms below it and the base files.
BASE = {"lab", "lab.config", "lab.errors", "lab.connection"}
ROOMS_BELOW = {"lab.record": (), "lab.runtime": ("lab.record",)}


def test_the_record_and_runtime_rooms_import_nothing_above_them():
    graph = _imports_of_lab()
    assert set(ROOMS_BELOW) <= set(graph)
    for room, below in ROOMS_BELOW.items():
        for module, imported in graph.items():
            if module == room or module.startswith(room + "."):
                upward = sorted(m for m in imported if m not in BASE and not m.startswith((room, *below)))
                assert not upward, f"{module} imports {upward}: above its room"


def test_at_most_six_modules_loose_at_the_top_of_lab():
    loose = sorted(p.name for p in (ROOT / "lab").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 6, loose


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in [*(ROOT / "lab").rglob("*.py"), *(ROOT / "lab").rglob("*.java")]
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_notebooks_are_committed_clean_each_cell_with_its_own_id():
    """No outputs, no execution counts (`python -m lab clean-notebooks`), and an id on every cell, none twice (nbformat
    4.5 requires them, and a notebook without them is rewritten each time it is opened)."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert not [c for c in code if c["outputs"] or c["execution_count"] is not None], path.name
        ids = [c.get("id") for c in cells]
        assert None not in ids and len(set(ids)) == len(ids), f"{path.name}: cells without an id, or one id twice"
