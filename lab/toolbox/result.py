"""The result contract every scenario returns.

    result = scenario.run(cluster=cluster, **PARAMS)
    result.verdict()        # one line: what happened in THIS run
    result.explain()        # the mechanism, the branch that matches this run (markdown)
    result.table()          # the measured rows
    result.figure()         # the timeline, built on lab.toolbox.timeline
    record(**result.as_record())   # the flat schema the tests assert
    result.check(1, answer)        # exercise checks (Exercise): a tick, or a cross and a hint
    result.solution(1)             # the hidden solution, asked for: why, and the answer for this run

Subclasses are dataclasses that add their measured fields and override
`record_fields()`, `table()` and `explain()`.
"""
from __future__ import annotations

import inspect
import numbers
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from ..errors import LabError
from .room import tell_room
from .timeline import Timeline


@dataclass
class Result:
    scenario: str
    params: dict
    run_id: str
    timeline: Timeline
    notes: list[str] = field(default_factory=list)   # what the run noticed along the way (said, not hidden)
    cluster: object = field(default=None, repr=False, compare=False)   # the notebook's cluster it ran on, if any
    _wrong_answers: dict = field(default_factory=dict, init=False, repr=False, compare=False)   # by exercise

    def running_cluster(self):
        """The notebook's cluster this run borrowed, while it still runs (an experiment exercise runs there too,
        as the lesson did), else None: the experiment starts a broker of its own."""
        return self.cluster if getattr(self.cluster, "running", False) else None

    # what an exercise that needs the failure says when this run did not show it (a result may word it its way)
    not_reproduced: ClassVar[str] = "this run did not reproduce the failure"

    # ---- what every scenario defines
    @property
    def failed(self) -> bool:
        """True when the failure under study happened in this run."""
        raise NotImplementedError

    def verdict(self) -> str:
        raise NotImplementedError

    def record_fields(self) -> dict:
        return {}

    def table(self):
        return self.timeline.frame()

    def explain(self) -> str:
        return ""

    title: ClassVar[str] = "What happened, and when"
    exercises: ClassVar[dict] = {}   # number -> Exercise

    # ---- shared
    def as_record(self) -> dict:
        return {"scenario": self.scenario, "run_id": self.run_id, "failure_reproduced": self.failed,
                "verdict": self.verdict(), **{f"param_{k}": v for k, v in self.params.items()},
                **self.record_fields()}

    def figure(self):
        return self.timeline.figure(self.title)

    def check(self, number: int, answer) -> "Checked":
        """Judge `answer` to exercise `number` on this run: a tick and one line when right, a cross and a hint when
        wrong (a closer hint from the second wrong answer on), never a traceback. Returns a Checked, false unless
        right, so a headless run can tell."""
        exercise = self._exercise(number)
        if answer is None:
            return Checked.say(False, f"Exercise {number}: not answered yet. Stuck? `lesson.solution({number})` "
                                      "shows a solution and why.", "not answered")
        if exercise.needs_failure and not self.failed:
            return Checked.say(False, f"Exercise {number}: {self.not_reproduced}, so it has nothing to judge your "
                                      "answer on. Run the lesson at its defaults, then try again.",
                               "did not reproduce the failure")
        hints = self._wrong_answers.get(number, 0)   # wrong answers so far: each was shown a hint
        try:
            exercise.check(self, answer)
        except (AssertionError, LabError) as exc:
            wrong = self._wrong_answers[number] = hints + 1
            hint = str(exc) or "Not quite."
            closer = f"\n  Closer: {exercise.closer}" if wrong > 1 and exercise.closer else ""
            tell_room("exercise", self.scenario, number=number, right=False, hints=min(hints, 100))
            return Checked.say(False, f"✗ Exercise {number}. {hint}{closer}", hint)
        tell_room("exercise", self.scenario, number=number, right=True, hints=min(hints, 100))
        return Checked.say(True, f"✓ Exercise {number}: right.", "correct")

    def solution(self, number: int, display=None) -> None:
        """The solution of exercise `number`, shown only when asked for: why, then the answer for this run."""
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        exercise = self._exercise(number)
        if exercise.needs_failure and not self.failed:
            print(f"Exercise {number}: {self.not_reproduced}, so it has no solution to show. Run the lesson at "
                  "its defaults first.")
            return
        try:
            answer = exercise.solution(self)
        except LabError as exc:   # what this run cannot answer (a lesson it left out): said in a line
            print(f"Exercise {number}: {exc}")
            return
        shown = (f"\n\n```python\n{textwrap.dedent(inspect.getsource(answer)).rstrip()}\n```" if callable(answer)
                 else f" `{answer!r}`")
        display(Markdown(f"**Exercise {number}, a solution.** {exercise.why}\n\nFor this run:{shown}"))

    def _exercise(self, number: int) -> "Exercise":
        if number not in self.exercises:
            raise LookupError(f"There is no exercise {number} here (exercises: {sorted(self.exercises)}).")
        return self.exercises[number]

    def show(self, display=None) -> None:
        """Verdict, explanation, table and figure: what a notebook cell or a panel displays.

        `display` draws one object (default IPython's; a panel passes its Output's
        append_display_data, which works from the panel's worker thread).
        """
        from IPython.display import Markdown
        if display is None:
            from IPython.display import display
        display(Markdown(f"**{'Failure reproduced' if self.failed else 'No failure'}:** {self.verdict()}"))
        if self.explain():
            display(Markdown(self.explain()))
        display(self.table())
        display(self.figure())

    def _repr_markdown_(self) -> str:
        return f"**{self.scenario}** ({self.run_id}): {self.verdict()}"


class Checked:
    """What check() returns: true when the answer was right, with what it said (`message`, printed already, so a
    notebook cell shows it once) and `said`, the verdict alone ("correct", "not answered", or the hint)."""

    def __init__(self, ok: bool, message: str = "", said: str = ""):
        self.ok, self.message, self.said = ok, message, said

    @classmethod
    def say(cls, ok: bool, message: str, said: str) -> "Checked":
        print(message)
        return cls(ok, message, said)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"Checked({self.ok}, {self.said!r})"

    def _ipython_display_(self) -> None:
        pass


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook.

    check(result, answer)  raises AssertionError with a hint (expect()) when the answer is wrong (or LabError
                           when this run cannot judge it); an empty, zero or trivially large answer must not pass
    solution(result)       the right answer for this run (a value, or a function when the exercise asks for one)
    why                    how to get there, from the mechanism (markdown): shown with the answer by solution(n)
    wrong(result)          a tempting wrong answer (the look-up, the guess that skips the mechanism): the check
                           must refuse it, which the notebook tests prove on every run
    closer                 a second hint, nearer the mechanism, shown from the second wrong answer on (never the
                           answer: that is solution(n)'s, when asked for)
    needs_failure          judged only on a run that reproduced the failure (else the check says so)
    printed(result)        the answers a learner could copy from what the notebook shows above the exercise (a
                           table's column, the Mitigate call's values, a function that looks the table up): the
                           check must refuse each, which the notebook tests prove on every run
    """

    check: Callable[[Any, Any], None]
    solution: Callable[[Any], Any]
    why: str
    wrong: Callable[[Any], Any]
    closer: str = ""
    needs_failure: bool = False
    printed: Callable[[Any], list] | None = None


def expect(ok: bool, hint: str) -> None:
    """What an exercise check raises when the answer is wrong: an AssertionError with a hint."""
    if not ok:
        raise AssertionError(f"Not quite: {hint}" + ("" if hint.endswith(("?", ".", "!")) else "."))


def called(fn, call: str, *args):
    """The learner's function called as an exercise's check calls it: fn(*args), or expect()'s hint when it is not
    a function, raises or returns nothing. `call` names the call in the hint, like "loops('java', 'none', p)"."""
    expect(callable(fn), f"{fn!r} is not a function: write {call.split('(')[0]}")
    try:
        out = fn(*args)
    except Exception as exc:
        expect(False, f"{call} raised {type(exc).__name__}: {exc}")
    expect(out is not None, f"{call} returned None")
    return out


def judge_rule(fn, name: str, cases, outcomes: tuple, question: str) -> None:
    """A learner's rule `fn` (True or False for one case), judged case by case, the run's own first: each case is
    (shown, args, truth, setting), `shown` the arguments as the hint prints them (like "'java', 'none', p"),
    `setting` None for what this run measured, else the other setting (like "POLL_INTERVAL_MS=60000") whose truth
    the mechanism gives. `outcomes`: what True and False are, measured and predicted, like
    (("looped", "read on"), ("loops", "reads on")). expect()'s hint, with `question`, at the first wrong case."""
    measured, predicted = outcomes
    for shown, args, truth, setting in cases:
        call = f"{name}({shown})"
        given = called(fn, call, *(dict(a) if isinstance(a, dict) else a for a in args))   # each call its own p
        expect(isinstance(given, bool), f"{call} returned {given!r}: return True or False")
        said = f"in this run it {measured[not truth]}" if setting is None else \
            f"with {setting} it {predicted[not truth]}"
        expect(given == truth, f"{call} = {given}, but {said}: {question}")


def judge_count(fn, name: str, cases, measured: str, predicted: str, question: str) -> None:
    """A learner's rule `fn` that returns a whole number for one case, judged case by case, the run's own first: each
    case as judge_rule's (shown, args, truth, setting). `measured` and `predicted` word the truth, with {n} for it,
    like ("this run wrote {n} record(s) more than once", "the app writes {n} record(s) more than once")."""
    for shown, args, truth, setting in cases:
        call = f"{name}({shown})"
        given = whole(called(fn, call, *(dict(a) if isinstance(a, dict) else a for a in args)))
        expect(given is not None, f"{call} must return a whole number")
        said = measured.format(n=truth) if setting is None else f"with {setting} {predicted.format(n=truth)}"
        expect(given == truth, f"{call} = {given}, but {said}: {question}")


def setting(change: dict) -> str:
    """Parameters as a hint names them: "POLL_INTERVAL_MS=60000, POLL_BATCH=10"."""
    return ", ".join(f"{k.upper()}={v:g}" if isinstance(v, float) else f"{k.upper()}={v!r}" for k, v in change.items())


def is_number(x) -> bool:
    """A real number: not a bool (True is 1 to Python, not to a learner), not NaN."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and x == x


def whole(x) -> int | None:
    """x as an int when it is a whole number (not a bool), else None."""
    return int(x) if is_number(x) and float(x).is_integer() else None


def shown(*values) -> list:
    """The distinct answers among `values` that a notebook shows (lists opened), in order: numbers (a whole float
    as an int) and names. None, zero, NaN, booleans and empty names are left out: every exercise check tries those
    trivial answers on their own (Exercise.printed)."""
    out = []
    for value in values:
        if isinstance(value, (list, tuple, set)):
            out += [v for v in shown(*value) if v not in out]
            continue
        if is_number(value):
            value = whole(value) if whole(value) is not None else float(value)
        elif not isinstance(value, str) or not value.strip():
            continue
        if value and value not in out:
            out.append(value)
    return out


def besides(values: list, answer, tolerance: float = 0.0) -> list:
    """`values` without those within `tolerance` (a fraction) of this run's `answer`: a number shown above an
    exercise that equals the answer by chance (a rate that happens to match) is not a copy of it."""
    if not is_number(answer):
        return values
    return [v for v in values if not (is_number(v) and abs(float(v) - answer) <= tolerance * abs(answer))]


def count(answer, what: str = "records") -> int:
    """The learner's answer as a whole number, or expect()'s hint that it must be one."""
    expect(whole(answer) is not None, f"{answer!r} is not a whole number of {what}")
    return whole(answer)


def number(answer, what: str) -> float:
    """The learner's answer as a float, or expect()'s hint that it must be a number."""
    expect(is_number(answer), f"give {what} as a number")
    return float(answer)


def names(answer, known, what: str, example: str) -> set:
    """The learner's answer as a set of names, each one of `known`, or expect()'s hint: a list of strings like
    `example`, none of them other than `what` (for example "a crash point of this run")."""
    expect(isinstance(answer, (list, tuple, set)) and all(isinstance(a, str) for a in answer),
           f"give a list of names (strings), like {example}, or [] if none")
    unknown = sorted(set(answer) - set(known))
    expect(not unknown, f"{', '.join(map(repr, unknown))}: not {what} ({', '.join(map(repr, known)) or 'none ran'})")
    return set(answer)
