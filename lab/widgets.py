"""One small pattern for every notebook's "tune and re-run" panel."""
from __future__ import annotations


def panel(controls: dict, run, show, title: str = "Tune and re-run"):
    """controls: name -> ipywidget; run(**values) -> result; show(result) draws it.

    Run calls the same scenario function the notebook and the tests call.
    """
    import ipywidgets as w
    from IPython.display import display

    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.HTML()
    out = w.Output()

    def on_click(_):
        button.disabled = True
        status.value = "<i>running against the real broker…</i>"
        out.clear_output()
        with out:
            try:
                show(run(**{name: c.value for name, c in controls.items()}))
                status.value = "done"
            except Exception as exc:  # show the error in the panel, keep the panel usable
                status.value = f"<b>error:</b> {type(exc).__name__}: {exc}"
            finally:
                button.disabled = False

    button.on_click(on_click)
    box = w.VBox([w.HTML(f"<h4>{title}</h4>"), *controls.values(), w.HBox([button, status]), out])
    display(box)
    return box
