"""What a learner reads in a lesson, and what it asks: objectives they can check (mirrored by the key points), the
class minutes the teacher's guide plans, a core path short enough to read in class, parameters that say what each
knob is and not which value fails, a question that is not a bet on "it fails", and the lines a developer writes in
their own app under the Mitigate step. No notebook runs here: these read the notebooks and the lessons.
"""
import json
import re
from pathlib import Path

import pytest

from lab.notebook import COURSE

ROOT = Path(__file__).resolve().parent.parent
CORE_WORDS = 900   # a lesson's core markdown, outside its folded deep dives
CLASS_MINUTES = 25   # teaching and exercises of one lesson, at most (docs/teaching.md)
MINUTES = re.compile(r"^Teaching (\d+) min · Exercises (\d+) min$", re.M)
# A question a learner answers yes or no: its sentence opens with the verb ("Does it ...?", "Is it ...?").
YES_NO_VERB = re.compile(r"(?:^|[.:;]\s+)(does|do|is|are|will|would|can|could|has|have|did)\s[^.?]*\?\s*$", re.I)


# What a parameter's comment must not say above the question: which value fails, which is the fix or the control,
# which versions are affected, an example answer.
GIVE_AWAY = re.compile(r"\b(affected|fixed|fix|fixes|control|fails?|failure|broken|e\.g\.)\b", re.I)
NAMES = [e.name for e in COURSE]


def _cells(name: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]]


def _markdown(name: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def bullets(text: str) -> list[str]:
    """The items of a markdown list (an item's wrapped lines joined)."""
    return [" ".join(item.split()) for item in re.findall(r"^- (.+(?:\n  .+)*)", text, re.M)]


def objectives(cell0: str) -> list[str]:
    """The list under "After this lesson you can:" in a notebook's first cell."""
    _, found, after = cell0.partition("After this lesson you can:")
    assert found, "no 'After this lesson you can:' in the first cell"
    return bullets(after.strip().split("\n\n")[0])


def guide_minutes() -> dict[str, tuple[int, int]]:
    """docs/teaching.md's lesson table: notebook number -> (teach, exercises) minutes."""
    table = (ROOT / "docs" / "teaching.md").read_text().split("<!-- lessons: machine seconds")[1]
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^\| (\w+) \| [^|]+ \| (\d+) \| (\d+) \|", table, re.M)}


@pytest.mark.parametrize("name", NAMES)
def test_each_lesson_opens_with_objectives_and_minutes_and_its_key_points_mirror_them(name: str):
    """Cell 0: two or three things a learner can do after the lesson, then "Teaching N min · Exercises M min",
    at most CLASS_MINUTES in all and the same as the teacher's guide plans; as many key points, in the same order."""
    markdown = _markdown(name)
    goals = objectives(markdown[0])
    assert 2 <= len(goals) <= 3, (name, goals)
    minutes = MINUTES.search(markdown[0])
    assert minutes, f"{name}: no 'Teaching N min · Exercises M min' line in its first cell"
    teach, exercises = int(minutes[1]), int(minutes[2])
    assert teach + exercises <= CLASS_MINUTES, f"{name}: {teach} + {exercises} class minutes"
    assert guide_minutes()[name.split("_")[0]] == (teach, exercises), f"{name}: docs/teaching.md plans otherwise"
    key = next(m for m in markdown if m.startswith("## Key points"))
    assert len(bullets(key)) == len(goals), (name, goals, bullets(key))


def test_objectives_and_minutes_are_read_from_the_first_cell_as_written():
    cell = ("# 99 · A lesson\n\nAfter this lesson you can:\n\n- predict one thing\n  over two lines\n"
            "- read another\n\nTeaching 12 min · Exercises 8 min")
    assert objectives(cell) == ["predict one thing over two lines", "read another"]
    assert MINUTES.search(cell).groups() == ("12", "8")
    with pytest.raises(AssertionError):
        objectives("# 99 · A lesson\n\nYou will run a thing.")


def asks_yes_or_no(question: str, choices) -> bool:
    """A question whose answer is yes or no, whatever its wording: two choices, a choice that opens with yes or
    no, or a closing sentence that opens with its verb. In a course about failures "yes, it fails" is the bet."""
    if not choices:
        return bool(YES_NO_VERB.search(question))
    return len(choices) < 3 or any(re.match(r"(yes|no)\s*([,:;.]|$)", c, re.I) for c in choices) \
        or bool(YES_NO_VERB.search(question))


def test_the_yes_or_no_detector_knows_both_kinds():
    assert asks_yes_or_no("A consumer works 10 s per poll. Does it keep reading the same batch?",
                          ("yes, it loops", "no, it moves on"))
    assert asks_yes_or_no("What happens?", ("it fails", "it runs clean"))
    assert asks_yes_or_no("A store gets 60,000 keys. Does the app take every key?",
                          ("no: it stops", "yes: compaction", "yes: eviction", "yes: it fits"))
    assert asks_yes_or_no("Is the group's lag growing?", None)
    assert not asks_yes_or_no("Which of these consumers keep reading the same batch?", ("all", "none", "the Java one"))
    assert not asks_yes_or_no("The group comes back. How many records does it read again?", None)
    assert not asks_yes_or_no("What does the broker answer?", ("no error", "UNKNOWN_PRODUCER_ID", "it times out"))


@pytest.mark.parametrize("name", NAMES)
def test_no_question_is_a_yes_or_no_bet(name: str):
    """At the notebook's defaults, the Predict question asks which, how many or how long: never yes or no."""
    entry = next(e for e in COURSE if e.name == name)
    question, choices, *_ = entry.lesson.question(entry.defaults())
    assert not asks_yes_or_no(question, choices), f"{name}: {question} {choices}"


@pytest.mark.parametrize("name", [e.name for e in COURSE if e.written_fix() is not None])
def test_under_each_mitigate_step_the_lines_a_developer_writes_in_their_own_app(name: str):
    """After the Mitigate step's cells and before the exercises: a folded "In your app" block with a code block
    (the properties, command or class that make the same fix in the learner's own app or cluster)."""
    cells = _cells(name)
    mitigate = next(i for i, c in enumerate(cells) if c.startswith("## Mitigate"))
    end = next(i for i, c in enumerate(cells) if c.startswith("## Exercises"))
    blocks = [c for c in cells[mitigate:end] if "<summary>In your app</summary>" in c]
    assert len(blocks) == 1, f"{name}: {len(blocks)} 'In your app' blocks between Mitigate and the exercises"
    assert re.search(r"^```\w*\n.+?\n```", blocks[0], re.M | re.S), f"{name}: its 'In your app' holds no code"


def core_words(markdown: str) -> int:
    """Words a learner reads on a lesson's core path: its markdown outside folded `<details>` deep dives."""
    return len(re.sub(r"<details>.*?</details>", " ", markdown, flags=re.S).split())


@pytest.mark.parametrize("name", NAMES)
def test_a_lesson_reads_short_with_its_depth_folded_and_its_terms_in_the_glossary(name: str):
    """At most CORE_WORDS words of core markdown; three key points at the end; every link to the glossary lands on
    one of its entries."""
    prose = "\n".join(_markdown(name))
    assert core_words(prose) <= CORE_WORDS, f"{name}: {core_words(prose)} words outside its deep dives"
    key = next(m for m in _markdown(name) if m.startswith("## Key points"))
    assert len(re.findall(r"^[-*] ", key, re.M)) == 3, f"{name}: three key points"
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    entries = set(re.findall(r'<a id="([\w-]+)"></a>', glossary))
    linked = set(re.findall(r"\]\(\.\./docs/glossary\.md#([\w-]+)\)", prose))
    assert linked <= entries, f"{name}: glossary links without an entry: {sorted(linked - entries)}"


@pytest.mark.parametrize("name", NAMES)
def test_the_parameters_cell_says_what_each_knob_is_not_which_value_fails(name: str):
    cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
    cell = next("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", []))
    said = [line for line in cell.splitlines() if GIVE_AWAY.search(line)]
    assert not said, f"{name}: the parameters cell hints at the answer: {said}"
