"""A scenario's parameters, declared once: validation, panel controls and docs come from here.

    SPEC = Spec(
        Param("downtime_s", 90, "how long the apps stay down", lo=1, hi=3600, unit="s"),
        Param("reset", "earliest", "auto.offset.reset after expiry", choices=("earliest", "latest", "error")),
    )
    p = SPEC.validate(**params)        # a LabError naming the parameter, its range and why

Ranges say what Kafka or this machine can take, never "the failure would not
happen": a value inside the range is a valid experiment, whatever its outcome.
A notebook's parameters cell uses the same names in UPPER_CASE.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import LabError


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    help: str                       # one line: what it is, in the user's words
    lo: float | None = None         # inclusive bounds for numbers
    hi: float | None = None
    unit: str = ""
    choices: tuple = ()             # allowed values, for strings (or anything enumerable)
    none: str = ""                  # if set, None is allowed and this says what it means
    check: Callable[[Any], None] | None = None  # extra check raising LabError (e.g. a version Maven has)
    why: str = ""                   # why the range is what it is (Kafka's minimum, the machine's memory)

    @property
    def many(self) -> bool:
        """A list parameter (a default that is a list): `choices` and `lo`..`hi` apply to each item, and no
        item may come twice (each names one app, run or round)."""
        return isinstance(self.default, list)

    @property
    def type(self) -> type:
        return type(self.default) if self.default is not None else (float if self.lo is not None else str)

    def validate(self, value):
        if value is None:
            if self.none or self.default is None:
                return None
            raise LabError(f"{self.name.upper()} needs a value ({self.help}).")
        value = self._coerce(value)
        if self.choices and any(v not in self.choices for v in (value if self.many else [value])):
            raise LabError(f"{self.name.upper()}={value!r} is not {'a subset' if self.many else 'one'} of "
                           f"{list(self.choices)} ({self.help}).")
        outside = [v for v in (value if self.many else [value])
                   if self.lo is not None and v < self.lo or self.hi is not None and v > self.hi]
        if outside:
            why = f": {self.why}" if self.why else ""
            where = f"has {outside[0]!r}, outside" if self.many else "is outside"
            raise LabError(f"{self.name.upper()}={value!r} {where} {self.range_text()}{why}.")
        if self.many and any(v in value[:i] for i, v in enumerate(value)):
            raise LabError(f"{self.name.upper()}={value!r} names a value twice.")
        if self.check is not None:
            self.check(value)
        return value

    def _coerce(self, value):
        t = self.type
        try:
            if t is bool:
                if not isinstance(value, bool):
                    raise TypeError
                return value
            if t is int:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise TypeError
                return int(float(value))
            if t is float:
                if isinstance(value, bool):
                    raise TypeError
                return float(value)
            if t is list:   # text "a, b" (a panel's text box) is a list too
                value = [x.strip() for x in value.split(",") if x.strip()] if isinstance(value, str) else value
                if isinstance(value, (bytes, dict)):
                    raise TypeError
                return [type(self.default[0])(v) if self.default else v for v in value]
            return t(value)
        except (TypeError, ValueError):
            raise LabError(f"{self.name.upper()}={value!r} must be {t.__name__} ({self.help}).") from None

    def range_text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        # whole numbers in full (2,147,483,647 ms, not 2.14748e+09 ms; 3600 s), fractions as short as they go
        def n(x) -> str:
            if not float(x).is_integer():
                return f"{x:g}"
            return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
        if self.choices:
            return ", ".join(map(str, self.choices))
        if self.lo is not None and self.hi is not None:
            return f"{n(self.lo)}..{n(self.hi)}{unit}"
        if self.lo is not None:
            return f">= {n(self.lo)}{unit}"
        if self.hi is not None:
            return f"<= {n(self.hi)}{unit}"
        return ""


@dataclass
class Spec:
    """The parameters of one scenario, plus rules that involve several of them."""

    params: tuple[Param, ...]
    # rules(values) -> None, or a message: refusals of what Kafka or the machine cannot take
    rules: tuple[Callable[[dict], str | None], ...] = field(default=())

    def __init__(self, *params: Param, rules=()):
        self.params, self.rules = tuple(params), tuple(rules)
        self.by_name = {p.name: p for p in self.params}

    @property
    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    def validate(self, **values) -> dict:
        """Every parameter checked (defaults filled in), before anything starts."""
        unknown = [k for k in values if k not in self.by_name]
        if unknown:
            hints = [f"{k!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(
                k, list(self.by_name), 1)) else "") for k in unknown]
            raise LabError(f"Unknown parameter(s) {', '.join(hints)}; this scenario takes {list(self.by_name)}.")
        checked = {p.name: p.validate(values.get(p.name, p.default)) for p in self.params}
        for rule in self.rules:
            message = rule(checked)
            if message:
                raise LabError(message)
        return checked

    def from_notebook(self, namespace: dict) -> dict:
        """The UPPER_CASE names of a notebook's parameters cell that this spec knows, validated."""
        return self.validate(**{p.name: namespace[p.name.upper()] for p in self.params
                                if p.name.upper() in namespace})

    def markdown(self) -> str:
        """A parameters table for docs/parameters.md or a notebook."""
        rows = ["| parameter | default | range | meaning |", "|---|---|---|---|"]
        for p in self.params:
            meaning = p.help + (f" (None: {p.none})" if p.none else "")
            rows.append(f"| `{p.name.upper()}` | `{p.default!r}` | {p.range_text()} | {meaning} |")
        return "\n".join(rows)


def something_to_run(*names: str, every: bool = False):
    """A rule for a Spec: the lesson has something to run, one of the lists `names` given (every: each of them)."""
    def rule(p: dict) -> str | None:
        given = [n for n in names if p[n]]
        if given and (not every or len(given) == len(names)):
            return None
        return f"Nothing to run: give {(' and ' if every else ' or ').join(n.upper() for n in names)}."
    return rule
