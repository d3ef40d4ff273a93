"""The "tune and re-run" panel of every notebook, generated from the scenario's parameter spec."""
from __future__ import annotations

from .params import Param, Spec


def control(p: Param, value):
    """The ipywidget for one parameter: its range and choices come from the spec."""
    import ipywidgets as w
    label = f"{p.name.upper()}" + (f" ({p.unit})" if p.unit else "")
    common = dict(description=label, description_tooltip=p.help, style={"description_width": "initial"},
                  layout=w.Layout(width="420px"))
    if p.choices and p.many:
        return w.SelectMultiple(options=list(p.choices), value=tuple(value), rows=len(p.choices), **common)
    if p.many:
        return w.Text(value=", ".join(map(str, value)), placeholder="comma-separated", **common)
    if p.choices:
        return w.Dropdown(options=list(p.choices), value=value, **common)
    if p.type is bool:
        return w.Checkbox(value=bool(value), indent=False, **common)
    if p.none or value is None:   # empty text = None
        return w.Text(value="" if value is None else str(value), placeholder=f"empty = {p.none}", **common)
    bounds = dict(min=p.lo if p.lo is not None else -1e12, max=p.hi if p.hi is not None else 1e12)
    if p.type is int:
        return w.BoundedIntText(value=value, **{k: int(v) for k, v in bounds.items()}, **common)
    if p.type is float:
        return w.BoundedFloatText(value=value, **bounds, **common)
    return w.Text(value=str(value), **common)


def panel(spec: Spec, scenario, *, show=None, title: str = "Try it yourself", only=None, **values):
    """Controls for the spec's parameters (`only` = a subset), a Run button, and the result below.

    scenario(**params) is the notebook's own scenario function; `values` are the starting
    values (the notebook's parameters) and fixed keyword arguments such as `cluster=`.
    `show(result)` draws the result (default: result.show()).
    """
    import ipywidgets as w
    from IPython.display import display

    names = [p.name for p in spec.params if only is None or p.name in only]
    fixed = {k: v for k, v in values.items() if k not in names}
    controls = {n: control(spec.by_name[n], values.get(n, spec.by_name[n].default)) for n in names}
    button = w.Button(description="Run", button_style="primary", icon="play")
    status, out = w.HTML(), w.Output()

    def read():
        params = {}
        for name, c in controls.items():
            v = c.value
            params[name] = None if isinstance(c, w.Text) and spec.by_name[name].none and v == "" else v
        return params

    def on_click(_):
        button.disabled = True
        status.value = "<i>running against the real broker…</i>"
        out.clear_output()
        with out:
            try:
                result = scenario(**fixed, **read())
                (show or (lambda r: r.show()))(result)
                status.value = f"done: {result.verdict()}"
                panel_box.last_result = result
            except Exception as exc:  # one clear line in the panel; the run already stopped what it started
                status.value = f"<b>{type(exc).__name__}:</b> {exc}"
            finally:
                button.disabled = False

    button.on_click(on_click)
    panel_box = w.VBox([w.HTML(f"<h4>{title}</h4>"), *controls.values(), w.HBox([button, status]), out])
    panel_box.controls, panel_box.button, panel_box.status, panel_box.last_result = controls, button, status, None
    display(panel_box)
    return panel_box
