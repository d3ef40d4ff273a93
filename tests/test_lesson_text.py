"""What a learner reads in a lesson, and what it asks: objectives they can check (mirrored by the key points), the
class minutes the teacher's guide plans, a core path short enough to read in class, parameters that say what each
knob is and not which value fails, a question that is not a bet on "it fails", "which of these runs" questions whose
choices and measured answer come from one table, and the lines a developer writes in their own app under the Mitigate
step. No notebook runs here: these read the notebooks and the lessons.
"""
import importlib
import itertools
import json
import re
from pathlib import Path

import pytest

from lab.notebook import COURSE
from lab.scenarios.nb02_transactional_id_expiry import txn_expiry as tx
from lab.scenarios.nb03_quota_driven_fencing import quota_fencing as qf, quota_fencing_analysis as qa
from lab.scenarios.nb04_stale_standby_cache import stale_standby as ss
from lab.scenarios.nb05_exactly_once_under_crashes import answers as a05, production_errors as pe
from lab.scenarios.nb06_state_in_production import state_restore as sr
from lab.scenarios.nb07_when_streams_stop import poll_loop as pl
from lab.toolbox.predict import choice_table, labels, named, which

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


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_says_what_the_notebook_shows_above_it(name: str):
    """Exercise.printed: each notebook run tries those answers and refuses a pass (tests/expectations)."""
    exercises = next(e for e in COURSE if e.name == name).lesson.exercises
    missing = [n for n, e in exercises.items() if e.printed is None]
    assert exercises and not missing, f"{name}: exercise(s) {missing} without `printed`"


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


# ------------------------------------------------------------------ "which of these runs showed it?"

def _outcome(got_past: bool) -> str:
    return "records dropped" if got_past else "crash loop"


def _refused(p: dict) -> list:
    """05d's runs as it makes them: (handler, guarantee)."""
    other = next(g for g in pe.GUARANTEES if g != p["production_guarantee"])
    return [(h, p["production_guarantee"]) for h in p["production_handlers"]] + \
        [(h, other) for h in p["other_guarantee_handlers"]]


def _asked(run: tuple) -> tuple:
    """A 05d run as its question names it: `route` answers CONTINUE, after its note."""
    return ("continue" if run[0] == "route" else run[0], run[1])


# Per lesson whose question asks which of its runs showed something: its table at p, the runs it makes with p, and a
# record built so that exactly the runs of `shown` show it.
WHICH = {
    "02b": (tx.streams_table, tx.streams_versions, lambda shown, p: {"part_b": {
        f"streams-{v}": {"handling": "thread died" if v in shown else "task migrated", "error": "InvalidPidMapping"}
        for v in tx.streams_versions(p)}}),
    "02c": (tx.old_broker_table, tx.old_broker_versions, lambda shown, p: {"part_c": {
        v: {"reproduced": v in shown, "id_expired": False} for v in tx.old_broker_versions(p)}}),
    "03a": (lambda p: qa.fenced_table(qf.question_versions(p)), qf.question_versions, lambda shown, p: {
        role: {"version": v, "crashes": int(v in shown)} for role, v in (("app", p["streams_version"]),
                                                                        ("other_version", p["other_version"]))
        if role == "app" or role in p["compare"]}),
    # (the sweep's lower ratios the other way round: the answer is read at its highest)
    "03b": (lambda p: qa.fenced_table(p["sweep_versions"]), lambda p: p["sweep_versions"], lambda shown, p: {
        "sweep": [{"client_version": v, "ratio": r, "crashes": int((v in shown) == (r == max(p["sweep_ratios"])))}
                  for v in p["sweep_versions"] for r in p["sweep_ratios"]]}),
    "04": (lambda p: ss.stale_table(ss.question_versions(p)), lambda p: [v for _, v, _, _ in ss.variants(p)],
           lambda shown, p: {"streams_version": p["streams_version"], "main": {"caching": p["caching"]},
                             "main_counts": {"stale_reads": int(p["streams_version"] in shown)},
                             "compared": {label: {"version": v, "caching": c, "protocol": protocol,
                                                  "stale_reads": int(v in shown)}
                                          for label, v, c, protocol in ss.variants(p)[1:]}}),
    "05a": (lambda p: a05.DUPLICATE_POINTS, lambda p: p["crash_points"] if "at_least_once" in p["guarantees"] else [],
            lambda shown, p: {"crashes": {point: {"crash_point": point, "guarantee": "at_least_once", "crashed": True,
                                                  "duplicates": int(point in shown)} for point in p["crash_points"]}}),
    "05b": (lambda p: a05.GOT_PAST, lambda p: p["handlers"],
            lambda shown, p: {"handlers": {h: {"outcome": _outcome(h in shown)} for h in p["handlers"]}}),
    "05d": (lambda p: a05.REFUSED_PAST, lambda p: [_asked(run) for run in _refused(p)],
            lambda shown, p: {"refused": {pe.production_label(h, g, p): {"guarantee": g,
                                          "outcome": _outcome(_asked((h, g)) in shown)} for h, g in _refused(p)}}),
    "06b": (sr.restore_table, lambda p: p["restore_modes"], lambda shown, p: {"restore_runs": [
        {"mode": m, "full_restore": m in shown, "restored_records": 1} for m in p["restore_modes"]]}),
    "07a": (pl.looping_table, pl.asked_clients, lambda shown, p: {"poll_loop": {
        f"{c}/{pl.asked_variant(p)}": {"looped": c in shown} for c in pl.asked_clients(p)}}),
}
# The lessons whose two "none" choices both name no run: the run tells them apart by what else it met (the error).
NONE_TOLD_APART = {"02b", "02c"}


def _params(number: str, setting: str) -> dict:
    """A lesson's parameters at the notebook's defaults, or with its test's PARAMETERS over them."""
    entry = next(e for e in COURSE if e.number == number)
    p = entry.defaults()
    if setting == "PARAMETERS":
        given = importlib.import_module(f"tests.expectations.nb{number}").PARAMETERS
        p = entry.lesson.spec.validate(**{**p, **{k.lower(): v for k, v in given.items() if k.lower() in p}})
    return p


@pytest.mark.parametrize("number, setting", [(n, s) for n in WHICH for s in ("defaults", "PARAMETERS")])
def test_a_which_question_and_its_measured_answer_come_from_one_table(number: str, setting: str):
    """The question's choices are its table's labels; each names a distinct set of the runs the lesson makes; which()
    finds each label by its set; the measured answer of a record where exactly that set shows it is that label, and
    for a set no choice names it is never one of the choices (None, or the set in words)."""
    lesson, p = next(e for e in COURSE if e.number == number).lesson, _params(number, setting)
    table_of, runs_of, record = WHICH[number]
    table, runs = table_of(p), frozenset(runs_of(p))
    assert table and lesson.question(p)[1] == labels(table), (number, lesson.question(p)[1], table)
    sets = [s for _, s in table]
    twice = {s for s in sets if sets.count(s) > 1}
    assert not twice or (twice == {frozenset()} and number in NONE_TOLD_APART), (number, table)
    assert all(s <= runs for s in sets), (number, runs, table)
    assert all(which(s, table) == label for label, s in table if s not in twice), (number, table)
    for shown in (frozenset(c) for n in range(len(runs) + 1) for c in itertools.combinations(runs, n)):
        measured = lesson.measured_answer(record(shown, p), p)
        naming = [label for label, s in table if s == shown]
        assert measured in naming if naming else measured not in labels(table), (number, set(shown), measured)


def test_the_toolbox_words_the_choices_and_finds_the_measured_one():
    runs = ["a", "b", "c"]
    table = choice_table((named(s, runs, " and ".join), s) for s in ([], ["a"], ["a", "b"], ["b", "a"], runs))
    assert table == (("none of them", frozenset()), ("only a", frozenset("a")), ("only a and b", frozenset("ab")),
                     ("all of them", frozenset("abc")))   # a set given again is kept once
    assert labels(table) == ("none of them", "only a", "only a and b", "all of them")
    assert which({"b", "a"}, table) == "only a and b" and which(["c"], table) is None
    assert named(["b", "a"], ["a", "b"], ", ".join) == "both" and named(["b"], ["a", "b"], ", ".join) == "only b"
    assert named(["c", "a"], runs, " and ".join, several=lambda some, rest: f"{' and '.join(some)}, not "
                 f"{' nor '.join(rest)}") == "a and c, not b"
    assert named([], runs, str, none="none: each moves on") == "none: each moves on"
    assert named(runs, runs, str, every="all three") == "all three"
