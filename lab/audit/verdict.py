"""The audit's Verdict and how it reads: PASS or FAIL against what the run expects, one row per anomaly kind, a
figure of anomalies over the run's seconds, a JSON-safe record. What every failure notebook shows after its
audit (`result.audit`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .kinds import KINDS, MEANING, NEEDS


@dataclass
class Verdict:
    counts: dict                      # kind -> int, or None when not checked
    examples: dict                    # kind -> pandas DataFrame (first few, by time)
    expect: str                       # "anomalies" or "clean"
    run_id: str = ""
    timeline: object = None           # pandas DataFrame: kind, second (epoch), count
    start: float | None = None        # epoch seconds the run began (t_s = 0)
    notes: list = field(default_factory=list)
    seconds: float = 0.0              # how long the audit took

    @property
    def checked(self) -> dict:
        return {k: v for k, v in self.counts.items() if v is not None}

    @property
    def total(self) -> int:
        return sum(self.checked.values())

    @property
    def passed(self) -> bool:
        """Anomalies found when the run expects them; none (and something checked) when it expects clean."""
        if not self.checked:
            return False
        return self.total > 0 if self.expect == "anomalies" else self.total == 0

    def summary(self) -> str:
        found = ", ".join(f"{k}={v}" for k, v in self.checked.items() if v) or "no anomalies"
        skipped = [k for k, v in self.counts.items() if v is None]
        tail = f" (not checked: {', '.join(skipped)})" if skipped else ""
        return f"{'PASS' if self.passed else 'FAIL'}: expected {self.expect}, found {found}{tail}"

    def table(self):
        """One compact row per anomaly kind."""
        import pandas as pd
        rows = []
        for kind in KINDS:
            if kind not in self.counts:
                continue
            count = self.counts[kind]
            ex = self.examples.get(kind)
            first = ex.iloc[0] if ex is not None and len(ex) else None
            rows.append({
                "anomaly": kind,
                "count": "not checked" if count is None else count,
                "first at (s)": None if first is None else first.get("t_s"),
                "first example": "" if first is None else _describe(first),
                "meaning": MEANING[kind] if count is not None else f"needs {NEEDS[kind]}",
            })
        return pd.DataFrame(rows)

    def figure(self, bucket: float | None = None):
        """Plotly: anomalies over time (seconds since the run began), one colour per kind."""
        import plotly.graph_objects as go
        fig = go.Figure()
        tl = self.timeline
        if tl is None or not len(tl):
            fig.add_annotation(text="no anomalies" if self.checked else "nothing checked",
                               showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font_size=18)
        else:
            start = self.start if self.start is not None else float(tl["second"].min())
            t = tl["second"] - math.floor(start)  # counted per whole second: align the buckets
            span = max(float(t.max() - t.min()), 1.0)
            bucket = bucket or _nice_bucket(span / 60)
            tl = tl.assign(t=(t // bucket) * bucket).groupby(["kind", "t"], as_index=False)["count"].sum()
            for kind in KINDS:
                part = tl[tl["kind"] == kind]
                if len(part):
                    fig.add_bar(x=part["t"], y=part["count"], name=f"{kind} ({self.counts[kind]})",
                                width=bucket * 0.9, offset=0)
            fig.update_layout(barmode="stack")
        fig.update_layout(title=self.summary(), xaxis_title="seconds since the run began",
                          yaxis_title="anomalies", legend_title="kind", height=380,
                          margin=dict(l=60, r=20, t=60, b=50), title_font_size=13)
        return fig

    def as_dict(self) -> dict:
        """JSON-safe, for lab.record.recorded.record()."""
        return {"expect": self.expect, "passed": self.passed, "counts": dict(self.counts),
                "total": self.total, "not_checked": [k for k, v in self.counts.items() if v is None],
                "notes": list(self.notes)}

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{n}</li>" for n in self.notes)
        return (f"<b>{self.summary()}</b>" + self.table().to_html(index=False, na_rep="")
                + (f"<ul>{notes}</ul>" if notes else ""))


def _describe(row) -> str:
    """A short human line for one example row."""
    skip = {"time", "t_s", "kind"}
    parts = [f"{k}={v}" for k, v in row.items() if k not in skip and v is not None and str(v) != "nan"]
    return ", ".join(parts)[:120]


def _nice_bucket(x: float) -> float:
    for b in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600):  # the timeline is counted per second
        if b >= x:
            return b
    return 3600



def _with_times(rows, start):
    """First example rows -> pandas, with `t_s` (seconds since the run began) and a UTC `time`."""
    import pandas as pd
    df = pd.DataFrame(rows or [])
    if not len(df):
        return df
    df.insert(0, "t_s", (df["time"] - start).round(3) if start is not None else None)
    for col in [c for c in df.columns if c.endswith("_ts")]:  # other moments, also relative
        df[col] = (df[col] - start).round(3) if start is not None else df[col]
    df["time"] = pd.to_datetime(df["time"], unit="s", utc=True).dt.round("ms")
    return df

