"""What chapter 06's notebooks show above their exercises, as a learner could copy it (each lesson's
Exercise.printed lists its own): the fix its Mitigate cell writes, and the distinct answers among what is shown."""
from __future__ import annotations

from ...toolbox.result import is_number


def written_fix(name: str) -> dict:
    """The fix the notebook's Mitigate cell writes, as the learner sees it above the exercise."""
    from .. import notebook   # the course registry, read when asked: it imports this package's lessons
    return notebook(name).written_fix() or {}


def shown(*values) -> list:
    """The distinct answers among `values` (lists opened), in order: numbers, a whole float as an int, and names.
    None, zero, NaN, booleans and empty names are left out: the trivial answers are tried on their own."""
    out = []
    for value in values:
        if isinstance(value, (list, tuple)):
            out += [v for v in shown(*value) if v not in out]
            continue
        if is_number(value):
            value = int(value) if float(value).is_integer() else float(value)
        elif not isinstance(value, str) or not value.strip():
            continue
        if value and value not in out:
            out.append(value)
    return out


def besides(values: list, answer, tolerance: float = 0.0) -> list:
    """`values` without those within `tolerance` (a fraction) of this run's `answer`: a number shown above the
    exercise that equals the answer by chance (a rate that happens to match) is not a copy of it."""
    if not is_number(answer):
        return values
    return [v for v in values if not (is_number(v) and abs(float(v) - answer) <= tolerance * abs(answer))]
