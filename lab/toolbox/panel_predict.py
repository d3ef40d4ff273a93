"""The panel's Predict and the table of its runs.

Before each run the learner answers the lesson's own question for the values set in the panel (the question follows
the controls: "which of these releases ..." lists the releases chosen); the answer is locked while the run goes, and
each run adds a row that sets it beside what the run measured and how the run ended. Every text a row shows is
escaped: the panel renders no HTML it did not write.
"""
from __future__ import annotations

import html
from typing import Callable

from .predict import Prediction, answer_widget, shown_value


class PanelQuestion:
    """The lesson's question for the panel's current values, with a widget to answer it."""

    def __init__(self, lesson, values: Callable[[], dict]):
        import ipywidgets as w
        self.lesson, self.values = lesson, values
        self.text, self.holder = w.HTML(), w.Box()
        self.box = w.VBox([self.text, self.holder])
        self.box.add_class("lab-panel-predict")
        self.widget, self.asked, self.tolerance = None, None, 0.25
        self.refresh()

    def refresh(self, *_) -> None:
        """Ask again when the values change the question (a choice kept when it is still one of the answers)."""
        try:
            question, choices, *tolerance = self.lesson.question(self.lesson.spec.validate(**self.values()))
        except Exception:   # values the spec refuses: Run says why in one line
            self.text.value = "<b>Predict:</b> <i>the question comes back once the values above are valid.</i>"
            return
        asked = (question, tuple(choices) if choices else None)
        self.tolerance = tolerance[0] if tolerance else 0.25
        if asked == self.asked and self.widget is not None:
            return
        kept = self.widget.value if self.widget is not None and self.asked and \
            (self.asked[1] is None) == (asked[1] is None) else None
        self.asked = asked
        self.text.value = f"<b>Predict</b> before you run: {html.escape(question)}"
        self._new_widget(kept)

    def take(self) -> Prediction | None:
        """The answer as it is when Run is clicked, locked for the run (None: no question to answer)."""
        if self.asked is None or self.widget is None:
            return None
        prediction = Prediction(self.asked[0], self.asked[1], None, self.tolerance, self.widget)
        prediction.take(quiet=True)
        return prediction

    def next_run(self) -> None:
        """A fresh answer for the next run: each run is predicted on its own."""
        if self.asked is not None:
            self._new_widget(None)

    def answer(self, value) -> None:
        """Answer as a learner would (tests click the panel): a choice, or a number typed in."""
        self.widget.value = value if self.asked[1] else ("" if value is None else str(value))

    def _new_widget(self, value) -> None:
        self.widget = answer_widget(self.asked[1], value)
        self.holder.children = (self.widget,)


class RunHistory:
    """One row a run: the values that differ from the notebook's, the prediction, the measurement, the end."""

    def __init__(self, starting: dict):
        import ipywidgets as w
        self.starting, self.rows = dict(starting), []
        self.widget = w.HTML()
        self.widget.add_class("lab-panel-history")

    def add(self, values: dict, prediction: Prediction | None, ended: str) -> dict:
        changed = {k: v for k, v in values.items() if self.starting.get(k) != v}
        row = {"run": len(self.rows) + 1,
               "values": ", ".join(f"{k.upper()}={_short(v)}" for k, v in changed.items()) or "the notebook's",
               "predicted": None if prediction is None or prediction.answer is None else shown_value(prediction.answer),
               "measured": None if prediction is None or prediction.measured is None
               else shown_value(prediction.measured),
               "right": None if prediction is None else prediction.right(), "ended": ended}
        self.rows.append(row)
        self._draw()
        return row

    def _draw(self) -> None:
        mark = {True: "✓", False: "✗", None: ""}
        cells = ["<tr>" + "".join(f"<td style='padding:2px 8px'>{html.escape(str(x))}</td>" for x in (
            r["run"], r["values"], r["predicted"] or "no prediction", r["measured"] or "", mark[r["right"]],
            r["ended"])) + "</tr>" for r in self.rows]
        head = "".join(f"<th style='padding:2px 8px;text-align:left'>{h}</th>" for h in (
            "run", "values (changed)", "you predicted", "measured", "", "how it ended"))
        self.widget.value = ("<table style='border-collapse:collapse;margin-top:6px'>"
                             f"<tr>{head}</tr>{''.join(reversed(cells))}</table>")


def _short(value) -> str:
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
