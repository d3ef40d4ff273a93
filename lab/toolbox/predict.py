"""A lesson's Predict step: the learner answers one question before the run; the answer is taken when the run
starts, and after it the run's own measurement is printed beside the answer.

    guess = lesson.predict(PARAMS, PREDICTION)
    result = lesson.run(cluster=cluster, prediction=guess, **PARAMS)   # takes the answer, then: You said ...
    record(**result.as_record(), **guess.as_record())

In Jupyter the question is a small widget (choices: radio buttons; a number: a text box), locked when the run
starts: an answer changed while the progress lines show what happens does not count. Headless there is no one to
click, so `given` (a notebook parameter) is the prediction; None means none was made.
"""
from __future__ import annotations

from ..errors import LabError


class Printed(str):
    """A line already printed: a str that Jupyter does not display again as a cell's value."""

    def _ipython_display_(self) -> None:
        pass


class Prediction:
    """One question, the learner's answer (given, or read from the widget when compared), and the comparison."""

    def __init__(self, question: str, choices: tuple | None, given, tolerance: float, widget=None):
        self.question, self.choices, self.given, self.tolerance = question, choices, given, tolerance
        self.widget = widget
        self.measured = None
        self.taken = False

    def take(self, quiet: bool = False) -> None:
        """The answer as it is now, kept: a run calls this when it starts, and locks the widget. `quiet`: say nothing
        (a panel shows the answer in its own table)."""
        if not self.taken:
            self.given, self.taken = self.answer, True
            if self.widget is not None:   # a given answer was printed with the question already
                self.widget.disabled = True
            if self.widget is not None and not quiet:
                print(f"Your prediction: {self._shown(self.given)}." if self.given is not None else
                      "No prediction made: the run shows what happens.")

    @property
    def answer(self):
        """What the learner predicted: the given (or taken) answer, else the widget's, else None."""
        if self.given is not None or self.taken:
            return self.given
        value = getattr(self.widget, "value", None)
        if self.choices:
            return value
        try:
            return float(value) if value not in (None, "") else None
        except ValueError:
            return None

    def right(self) -> bool | None:
        """Whether the prediction matched the measurement (None: no prediction, or nothing measured yet)."""
        if self.answer is None or self.measured is None:
            return None
        if self.choices:
            return self.answer == self.measured
        return abs(float(self.answer) - float(self.measured)) <= self.tolerance * max(abs(float(self.measured)), 1)

    def against(self, measured) -> str:
        """Print (and return) the prediction beside what this run measured. The line is returned as Printed: a
        notebook cell that ends with this call shows it once, not again as the cell's value."""
        line = self.compare(measured)
        print(line)
        return Printed(line)

    def compare(self, measured) -> str:
        """Keep what the run measured; the line that sets the prediction beside it."""
        self.measured = measured
        shown = shown_value(measured)
        if measured is None:
            line = "This run did not measure it: what the question asks about did not run (see the parameters)."
        elif self.answer is None:
            line = f"No prediction made; this run measured: {shown}."
        else:
            said = self._shown(self.answer)
            line = (f"You said: {said}. This run measured: {shown}. "
                    + ("As you predicted." if self.right() else "Not what you predicted: the cells below show why."))
        return line

    def _shown(self, answer) -> str:
        return str(answer) if self.choices else f"{float(answer):g}"

    def as_record(self) -> dict:
        """The prediction's fields for record(): what was predicted, what was measured, whether they matched."""
        return {"prediction": self.answer, "prediction_measured": self.measured, "prediction_right": self.right()}


def shown_value(value) -> str:
    """A measured answer as a learner reads it: a number without trailing zeros, anything else as it is."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def answer_widget(choices: tuple | None, value=None):
    """The widget a learner answers with: radio buttons for choices (none chosen), a text box for a number."""
    import ipywidgets as w
    if choices:
        return w.RadioButtons(options=list(choices), value=value if value in choices else None,
                              layout=w.Layout(width="max-content"))
    return w.Text(value="" if value is None else str(value), placeholder="your number",
                  layout=w.Layout(width="160px"))


def predict(question: str, choices=None, tolerance: float = 0.25, *, given=None, show: bool = True) -> Prediction:
    """Ask `question` before a run. choices: the possible answers (a list of strings), or None for a number
    (right within `tolerance`, relative: 0 for a count that must be exact). A question a lesson gives as
    (text, None, tolerance) carries its own. given: the prediction as a parameter (headless, or to skip the
    widget); a given answer that is not one of the choices, or not a number, is refused at once."""
    choices = tuple(choices) if choices else None
    if given is not None:
        if choices and given not in choices:
            raise LabError(f"PREDICTION={given!r} is not one of the answers: {list(choices)}.")
        if not choices and (isinstance(given, bool) or not isinstance(given, (int, float))):
            raise LabError(f"PREDICTION={given!r} is not a number.")
    widget = None
    if show and given is None:
        import ipywidgets as w
        from IPython.display import display
        widget = answer_widget(choices)
        display(w.VBox([w.HTML(f"<b>Predict:</b> {question}"), widget]))
    elif show:
        print(f"Predict: {question}\nYour prediction: {given} (taken when the run starts)")
    return Prediction(question, choices, given, tolerance, widget)


# A question that asks which of a lesson's runs showed something has a choice table: (label, frozenset of run names)
# pairs, in the order the question lists them. The question's choices are its labels, and a run's answer is the label
# whose set is the set of runs that showed it: both come from the one table.
def choice_table(choices) -> tuple:
    """The table of (label, runs) pairs, runs any iterable of run names; a set named again is kept once, first."""
    table: dict = {}
    for label, runs in choices:
        table.setdefault(frozenset(runs), label)
    return tuple((label, runs) for runs, label in table.items())


def labels(table) -> tuple:
    """A table's choices, as the question lists them."""
    return tuple(label for label, _ in table)


def which(measured, table) -> str | None:
    """The label of the choice whose set is the measured set of runs (None: no choice names that set)."""
    return next((label for label, runs in table if runs == frozenset(measured)), None)


def named(chosen, runs: list, name, *, none: str = "none of them", every: str | None = None, several=None) -> str:
    """The common words for `chosen` of `runs` (the lesson's runs, in order): `none`; `every` for all of them
    ("both", "all of them" unless given); "only A", "only A and B" for some, name(runs in order) naming them as the
    lesson does, or several(chosen, the rest) for more than one ("A and B, not C")."""
    chosen = [r for r in runs if r in set(chosen)]
    if not chosen:
        return none
    if len(chosen) == len(runs):
        return every or ("both" if len(runs) == 2 else "all of them")
    if several and len(chosen) > 1:
        return several(chosen, [r for r in runs if r not in chosen])
    return "only " + name(chosen)
