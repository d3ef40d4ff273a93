"""The teachers' answer key (docs/answers.md) stays in step with the lessons: it is what `python -m lab answers
--write` writes now, it has every exercise of every lesson and a belief for every choice of every Predict question,
and its measured answers are read from executed notebooks as their lessons read them. Fast: no broker."""
import json
from types import SimpleNamespace

import pytest

from lab.commands import answers
from lab.commands.misconceptions import CHOICES, NUMBERS
from lab.record.recorded import MIME
from lab.scenarios import COURSE


def test_the_answer_key_is_what_the_lessons_write_now():
    assert answers.ANSWERS_DOC.read_text() == answers.markdown(), (
        "docs/answers.md is behind the lessons: run `.venv/bin/python -m lab answers --write`")


@pytest.mark.parametrize("entry", COURSE, ids=[e.number for e in COURSE])
def test_every_exercise_of_the_lesson_is_in_the_key_as_its_notebook_words_it(entry):
    key = answers.ANSWERS_DOC.read_text()
    part = key.split(f"\n## {entry.number} · ", 1)[1].split("\n## ", 1)[0]
    assert entry.lesson.exercises, f"{entry.name} has no exercise"
    for number, exercise in entry.lesson.exercises.items():
        statement = answers.exercise_statement(entry.path, number)
        assert statement, f"{entry.name}.ipynb has no markdown cell with **Exercise {number}"
        assert answers._relinked(statement) in part and exercise.why.strip().split("\n")[0] in part, (entry.name, number)


@pytest.mark.parametrize("entry", COURSE, ids=[e.number for e in COURSE])
def test_every_answer_of_the_predict_question_has_the_belief_behind_it(entry):
    lesson = entry.lesson
    _, choices, *_ = lesson.question(entry.defaults())
    if choices:
        assert set(CHOICES.get(entry.number, {})) == set(choices), (
            f"{entry.number}: lab/commands/misconceptions.py's beliefs name other choices than the question's")
        assert entry.number not in NUMBERS
    else:
        assert NUMBERS.get(entry.number) and entry.number not in CHOICES, entry.number


def test_no_belief_is_written_for_a_lesson_the_course_lacks():
    assert set(CHOICES) | set(NUMBERS) <= {e.number for e in COURSE}


def executed(folder, name: str, results: dict, end_time: str = "2026-12-01T10:00:00") -> None:
    nb = {"cells": [{"cell_type": "code", "source": "record(...)", "metadata": {},
                     "outputs": [{"output_type": "display_data", "data": {MIME: results}}]}],
          "metadata": {"papermill": {"end_time": end_time}}}
    (folder / f"{name}.ipynb").write_text(json.dumps(nb))


def test_measured_answers_come_from_executed_notebooks_at_their_defaults(tmp_path):
    growth = next(e for e in COURSE if e.number == "06a")
    defaults = {f"param_{k}": v for k, v in json.loads(json.dumps(growth.lesson.spec.defaults)).items()}
    executed(tmp_path, growth.name, {**defaults, "growth": {"kv": {"keys_end": 40000}}})
    restore = next(e for e in COURSE if e.number == "06b")
    other = {f"param_{k}": v for k, v in restore.lesson.spec.defaults.items()}
    changed = next(k for k, v in other.items() if isinstance(v, int) and not isinstance(v, bool))
    executed(tmp_path, restore.name, {**other, changed: other[changed] + 1})
    said = []
    found = answers.measured_from(tmp_path, out=said.append)
    assert found == {growth.name: {"answer": 40000, "measured_on": f"2026-12-01, {tmp_path.name}/{growth.name}.ipynb"}}
    assert any(line.startswith(f"{restore.name}: run at other values") for line in said), said
    assert any(line.startswith("07a_poll_loop: no executed notebook") for line in said), said
    assert "**40000** (2026-12-01" in answers.markdown(found) and answers.NOT_MEASURED in answers.markdown({})


def test_the_subcommand_writes_the_measured_file_then_the_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(answers, "MEASURED", tmp_path / "answers-measured.json")
    monkeypatch.setattr(answers, "ANSWERS_DOC", tmp_path / "answers.md")
    monkeypatch.setattr(answers, "ROOT", tmp_path)
    growth = next(e for e in COURSE if e.number == "06a")
    folder = tmp_path / "executed"
    folder.mkdir()
    defaults = {f"param_{k}": v for k, v in growth.lesson.spec.defaults.items()}
    executed(folder, growth.name, {**defaults, "growth": {"kv": {"keys_end": 40000}}})
    answers.answers(SimpleNamespace(write=True, measured_from=str(folder)))
    assert json.loads((tmp_path / "answers-measured.json").read_text())[growth.name]["answer"] == 40000
    assert "**40000**" in (tmp_path / "answers.md").read_text()


def test_the_site_renders_the_key_with_its_links_to_the_lessons_pages(tmp_path):
    from lab.commands.site import index
    index(tmp_path, {})   # the pages of the documents only: no notebook is run
    page = (tmp_path / "answers.html").read_text()
    assert 'href="02a_idle_clients.html"' in page and "../notebooks/" not in page and 'href="teaching.html"' in page
    assert 'href="answers.html"' in (tmp_path / "index.html").read_text()
    assert 'href="answers.html"' in (tmp_path / "teaching.html").read_text()
