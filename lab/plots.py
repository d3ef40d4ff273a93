"""Figures shared by several notebooks."""
from __future__ import annotations

import plotly.graph_objects as go


def steps_figure(events: list[dict], title: str = "What ran, and when") -> go.Figure:
    """A Gantt-like bar per step: events are {step, start, end} in epoch seconds."""
    t0 = min(e["start"] for e in events)
    fig = go.Figure()
    for e in events:
        fig.add_trace(go.Bar(y=[e["step"]], x=[max(e["end"] - e["start"], 0.05)], base=[e["start"] - t0],
                             orientation="h", name=e["step"], showlegend=False,
                             hovertemplate=f"{e['step']}: %{{x:.2f}} s<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="seconds since start", barmode="overlay",
                      height=80 + 40 * len(events), margin=dict(l=10, r=10, t=50, b=40),
                      yaxis=dict(autorange="reversed"))
    return fig
