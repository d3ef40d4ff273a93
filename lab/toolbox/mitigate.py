"""A lesson's Mitigate step: the failure's own run again, with the learner's fix written in the cell they run.

    fixed = lesson.mitigate(result, caching=False)     # the fix: parameters of the lesson, lowercase
    print(fixed.verdict())      # clean, or the failure again: judged by the same measurement as the failure
    fixed.table()               # anything else is the fixed run's own result

A fix that names no parameter of the lesson, gives a value it cannot take, or changes nothing at all is refused
before its run starts, with a hint (a value it repeats beside one it changes is fine); no fix at all skips the
step. The fixed run goes on the cluster the failure ran on, while it is up. A lesson (lab.toolbox.lesson) exposes
it as `lesson.mitigate`, a `Mitigate(run, spec, base={...})`, where `base` holds what every fixed run sets
regardless of the fix (for example: leave out the side-by-side variants the learner did not ask for).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import LabError
from .params import Spec
from .result import Result


def _named(fix: dict) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in fix.items())   # as the learner wrote it


SKIPPED = "No fix given: the Mitigate step did not run."


@dataclass
class Mitigation:
    """The run that failed and the same run with the fix: the verdict compares them; the rest is the fixed run's.
    With no fix given, nothing ran: each of its cells says so in one line."""
    fix: dict
    before: Result
    after: Result | None

    @property
    def clean(self) -> bool | None:
        return None if self.after is None else not self.after.failed

    def verdict(self) -> str:
        if self.after is None:
            return SKIPPED
        if not self.clean:
            return (f"With {_named(self.fix)}: the failure happened again, so this setting is no fix here. "
                    f"{self.after.verdict()}")
        before = ("the run before the fix was clean too" if not self.before.failed
                  else f"before the fix: {self.before.verdict()}")
        return f"With {_named(self.fix)}: clean. {self.after.verdict()} ({before})"

    def as_record(self) -> dict:
        """Under one key, so a notebook records it beside the failure's own record (None: no fix ran)."""
        if self.after is None:
            return {"mitigation": None}
        return {"mitigation": {"fix": self.fix, "clean": self.clean, **self.after.as_record()}}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self.after is None:   # table(), figure(), ...: one line saying nothing ran
            from IPython.display import Markdown
            return lambda *args, **kwargs: Markdown(f"*{SKIPPED}*")
        return getattr(self.after, name)   # table(), figure(), explain(), ... of the fixed run


class Mitigate:
    def __init__(self, run, spec: Spec, base: dict | None = None):
        self.run, self.spec, self.base = run, spec, dict(base or {})

    def check(self, params: dict, fix: dict | None) -> dict:
        """The fixed run's parameters; refused (LabError) when the fix names no parameter of this scenario, gives
        a value it cannot take, or changes nothing at all. An empty fix passes: the step is skipped."""
        if fix is None:
            fix = {}
        if not isinstance(fix, dict):
            raise LabError(f"A fix is parameters and their fixed values, like lesson.mitigate(result, caching=False); "
                           f"got {fix!r}.")
        fixed = self.spec.validate(**{**params, **self.base, **fix})   # unknown names, bad values: with a hint
        if fix and all(params[k] == fixed[k] for k in fix):
            raise LabError(f"{_named(fix)} {'is' if len(fix) == 1 else 'are'} what the run that failed already has: "
                           "a fix must change something.")
        return fixed

    def __call__(self, before: Result, cluster=None, progress: bool = True, **fix) -> Mitigation:
        """`before`'s parameters with the fix's values over them, run on `cluster` (default: the one `before` ran on,
        while it is up); no fix, no run."""
        fixed = self.check(before.params, fix)
        if not fix:
            return Mitigation({}, before, None)
        cluster = cluster if cluster is not None else before.running_cluster()
        return Mitigation(fix, before, self.run(cluster=cluster, progress=progress, remember=False, **fixed))
