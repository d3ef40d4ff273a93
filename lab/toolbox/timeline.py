"""One timeline schema and one figure for the whole course.

An event is a point (`t`) or a span (`t` .. `end`) on a lane (an app, a broker,
a variant), in seconds since the run's t0, with a tone from one colour
vocabulary. A band is a span across every lane (the idle period, a broker
down). Every scenario's figure is `Timeline.figure()`, maybe with extra traces.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

# One colour vocabulary for every figure of the course.
TONES = {
    "failure": "#d62728",     # the failure under study: an exception, a duplicate, a stale read
    "mitigation": "#2ca02c",  # the mitigation working, a clean commit
    "fault": "#ff7f0e",       # what the lab did to the system: a kill, a stop, a quota
    "wait": "#bdbdbd",        # waiting: idle, downtime, retention
    "info": "#1f77b4",        # ordinary progress: start, ready, read
    "control": "#7f7f7f",     # the control run
    "standby": "#a6cee3",     # a passive role (a standby task)
}
SYMBOLS = {"failure": "x", "mitigation": "circle", "fault": "triangle-down", "wait": "line-ew-open",
           "info": "circle-open", "control": "square-open", "standby": "circle-open"}


@dataclass
class Event:
    t: float                 # seconds since the run's t0
    lane: str                # which row of the figure: an app, a broker, a variant
    kind: str                # what happened, short: "commit", "InvalidPidMappingException", "kill -9"
    detail: str = ""         # hover text: the evidence line, a count
    tone: str = "info"
    end: float | None = None  # a span when set

    def __post_init__(self):
        if self.tone not in TONES:
            raise ValueError(f"tone {self.tone!r} is not one of {list(TONES)}")


class Timeline:
    """Events and bands of one run, kept in epoch time and shown relative to t0."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.events: list[Event] = []
        self.bands: list[Event] = []

    def add(self, lane: str, kind: str, at: float | None = None, *, detail: str = "", tone: str = "info",
            end: float | None = None) -> Event:
        """`at`/`end` in epoch seconds (None = now)."""
        import time
        at = time.time() if at is None else at
        event = Event(round(at - self.t0, 3), lane, kind, detail, tone,
                      None if end is None else round(end - self.t0, 3))
        self.events.append(event)
        return event

    def band(self, label: str, start: float, end: float, tone: str = "wait") -> Event:
        band = Event(round(start - self.t0, 3), "", label, "", tone, round(end - self.t0, 3))
        self.bands.append(band)
        return band

    @classmethod
    def joined(cls, *timelines: "Timeline") -> "Timeline":
        """Several runs' timelines on one clock, from the earliest t0 (a notebook's lessons, each run alone)."""
        joined = cls(min((t.t0 for t in timelines), default=0))
        for t in timelines:
            by = t.t0 - joined.t0
            joined.events += [replace(e, t=round(e.t + by, 3), end=None if e.end is None else round(e.end + by, 3))
                              for e in t.events]
            joined.bands += [replace(b, t=round(b.t + by, 3), end=round(b.end + by, 3)) for b in t.bands]
        return joined

    def rows(self, lane: str | None = None, kind: str | None = None) -> list[Event]:
        return [e for e in self.events if (lane is None or e.lane == lane) and (kind is None or e.kind == kind)]

    def first(self, lane: str | None = None, kind: str | None = None) -> Event | None:
        found = sorted(self.rows(lane, kind), key=lambda e: e.t)
        return found[0] if found else None

    def frame(self):
        import pandas as pd
        return pd.DataFrame([asdict(e) for e in self.events],
                            columns=["t", "lane", "kind", "detail", "tone", "end"]).sort_values("t")

    def figure(self, title: str, lanes: list[str] | None = None, height: int | None = None):
        return timeline_figure(self.events, self.bands, title, lanes, height)


def timeline_figure(events: list[Event], bands: list[Event], title: str, lanes: list[str] | None = None,
                    height: int | None = None):
    """Lanes top to bottom, spans as bars, points as marks coloured by tone, bands shaded behind."""
    import plotly.graph_objects as go

    lanes = lanes or list(dict.fromkeys(e.lane for e in sorted(events, key=lambda e: e.t)))
    fig = go.Figure()
    shown = [e for e in events if e.lane in lanes]
    for tone in TONES:
        spans = [e for e in shown if e.tone == tone and e.end is not None]
        if spans:
            fig.add_trace(go.Bar(
                y=[e.lane for e in spans], x=[max(e.end - e.t, 0.05) for e in spans], base=[e.t for e in spans],
                orientation="h", marker_color=TONES[tone], opacity=0.55, name=tone, legendgroup=tone,
                text=[e.kind for e in spans], textposition="inside", insidetextanchor="start",
                customdata=[e.detail for e in spans],
                hovertemplate="%{y}: %{text} %{base:.1f}–%{x:.1f} s<br>%{customdata}<extra></extra>"))
        points = [e for e in shown if e.tone == tone and e.end is None]
        if points:
            fig.add_trace(go.Scatter(
                y=[e.lane for e in points], x=[e.t for e in points], mode="markers", name=tone,
                legendgroup=tone, showlegend=not spans,
                marker=dict(color=TONES[tone], size=11, symbol=SYMBOLS[tone], line=dict(width=2)),
                text=[e.kind for e in points], customdata=[e.detail[:200] for e in points],
                hovertemplate="%{y}: <b>%{text}</b> at %{x:.1f} s<br>%{customdata}<extra></extra>"))
    for b in bands:
        fig.add_vrect(x0=b.t, x1=b.end, fillcolor=TONES[b.tone], opacity=0.15, line_width=0,
                      annotation_text=b.kind, annotation_position="top left")
    fig.update_layout(title=title, xaxis_title="seconds since the run started", barmode="overlay",
                      height=height or 160 + 45 * len(lanes), margin=dict(l=10, r=10, t=60, b=40),
                      legend=dict(orientation="h", y=-0.25),
                      yaxis=dict(categoryorder="array", categoryarray=list(reversed(lanes))))
    return fig
