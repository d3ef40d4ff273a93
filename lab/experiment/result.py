"""The result contract every scenario returns.

    result = scenario.run(cluster=cluster, **PARAMS)
    result.verdict()        # one line: what happened in THIS run
    result.explain()        # the mechanism, the branch that matches this run (markdown)
    result.table()          # the measured rows
    result.figure()         # the timeline, built on lab.experiment.timeline
    record(**result.as_record())   # the flat schema the tests assert
    result.check(1, answer)        # exercise checks

Subclasses are dataclasses that add their measured fields and override
`record_fields()`, `table()` and `explain()`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .timeline import Timeline


@dataclass
class Result:
    scenario: str
    params: dict
    run_id: str
    timeline: Timeline
    notes: list[str] = field(default_factory=list)   # what the run noticed along the way (said, not hidden)

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

    def measured_answer(self):
        """This run's answer to its notebook's Predict question (lab.experiment.predict), in the question's terms;
        None when the run did not measure it."""
        return None

    title: ClassVar[str] = "What happened, and when"
    exercises: ClassVar[dict] = {}   # number -> fn(result, answer) raising AssertionError when wrong

    # ---- shared
    def as_record(self) -> dict:
        return {"scenario": self.scenario, "run_id": self.run_id, "failure_reproduced": self.failed,
                "verdict": self.verdict(), **{f"param_{k}": v for k, v in self.params.items()},
                **self.record_fields()}

    def figure(self):
        return self.timeline.figure(self.title)

    def check(self, number: int, answer) -> "Checked":
        """Raise AssertionError with a hint when `answer` is wrong; say so when it is right."""
        if answer is None:
            print(f"Exercise {number}: not answered yet (the solution is below).")
            return Checked(False)
        self.exercises[number](self, answer)
        print(f"Exercise {number}: correct.")
        return Checked(True)

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
    """What check() returns: true when the answer was right. A notebook cell shows nothing for it (check() has
    printed its message already), so an exercise cell does not end with a stray True or False."""

    def __init__(self, ok: bool):
        self.ok = ok

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"Checked({self.ok})"

    def _ipython_display_(self) -> None:
        pass


def expect(ok: bool, hint: str) -> None:
    """What an exercise check raises when the answer is wrong: an AssertionError with a hint."""
    if not ok:
        raise AssertionError(f"Not quite: {hint}.")
