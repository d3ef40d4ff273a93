"""What a lesson of chapter 03 shows of a run (QuotaResult): the verdict and the per-app explanation of what fenced
it, the tables of the main run and its variants (03a) and of the sweep (03b), the timeline and sweep figures and
the recorded fields. A lesson's result holds its own runs only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...toolbox import TONES, Result
from ...toolbox.predict import which
from .quota_fencing_analysis import (BASELINES, LOOP, STREAMS_CRASH_KINDS, VARIANTS, Measured, fenced_table,
                                     sweep_label)


def fenced_at_top(rows: list[dict]) -> list[str]:
    """The client versions of a sweep (its table's rows) fenced at its highest ratio."""
    top = max((r["ratio"] for r in rows), default=None)
    return [r["client_version"] for r in rows if r["ratio"] == top and r["crashes"] > 0]


# This run's answer to each lesson's Predict question, from what it recorded (None: it did not measure it).
def fencing_answer(record: dict, p: dict) -> str | None:
    """03a: which of the releases its question names were fenced (the app under study, and OTHER_VERSION's copy
    when it ran), named as the question's choices name them."""
    rows = [record[r] for r in ("app", "other_version") if record.get(r)]
    if not rows:
        return None
    versions = list(dict.fromkeys(r["version"] for r in rows))
    return _answer({r["version"] for r in rows if r["crashes"]}, versions)


def sweep_answer(record: dict, p: dict) -> str | None:
    """03b: which clients the sweep fenced at its highest ratio, named as its question's choices name them (a set
    that is none of the choices gets a name of its own: a prediction cannot have matched it)."""
    rows = record.get("sweep") or []
    if not rows:
        return None
    versions = p.get("sweep_versions") or list(dict.fromkeys(r["client_version"] for r in rows))
    return _answer(fenced_at_top(rows), versions)


def _answer(fenced, versions: list) -> str:
    """The choice of the questions' table whose clients are `fenced`; in the same words when no choice names them."""
    return which(fenced, fenced_table(versions)) or sweep_label(fenced, versions)


def _load(row: dict) -> str:
    return f"load {row['load_ratio']:.2f}x the quota" if row["load_ratio"] else "no quota"


@dataclass
class QuotaResult(Result):
    roles: dict = field(default_factory=dict)                   # role -> Variant
    main: Measured | None = field(default=None, repr=False)
    sweep: list = field(default_factory=list, repr=False)      # [Measured], one per wave
    fix_in_bytecode: dict = field(default_factory=dict)
    aborted_output_records: int = 0
    transaction_version: dict | None = None   # 03a: the finalized level, each role's commits (fencing)

    title = "Quota-driven fencing: x incident (hover: its mechanism), ▼ coordinator abort, bars: waits"

    def row(self, role: str) -> dict:
        """What an app of the main run (03a) measured."""
        return self.main.row(self.roles[role].name)

    def figure(self, roles=None):
        return self.timeline.figure(self.title, lanes=[self.roles[r].name for r in roles or self.roles])

    @property
    def failed(self) -> bool:
        if self.main is None:   # the sweep alone: fenced where the fix should have prevented it
            return any(r["crashes"] for r in self.sweep_table().to_dict("records"))
        return self.row("app")["crashes"] > 0

    def sweep_fenced(self) -> list[str]:
        """The client versions of the sweep fenced at its highest ratio."""
        return fenced_at_top(self.sweep_table().to_dict("records"))

    def verdict(self) -> str:
        if self.main is None:
            if not self.sweep:
                return "nothing ran in this section (its parameters are empty)"
            table = self.sweep_table()
            return f"sweep of {len(table)} apps: fenced at x{table['ratio'].max():g}: " + (
                ", ".join(self.sweep_fenced()) or "none") + "; " + "; ".join(
                f"{r['client_version']} x{r['ratio']:g}: {r['crashes']} fencing(s)" for r in table.to_dict("records"))
        rows = [self.main.row(v.name) for v in self.roles.values()]
        return "; ".join(f"{r['variant']} ({_load(r)}): " + (
            f"fenced {r['crashes']}x (first at {r['first_crash_s']:.0f} s) by {r['mechanism']}" if r["crashes"]
            else f"not fenced (throttled up to {r['throttle_max_ms'] or 0:.0f} ms)") for r in rows) + (
            f"; read_committed output of {rows[0]['variant']}: {rows[0]['output_records']} of {rows[0]['produced']} "
            f"records; {sum(self.main.duplicates.values())} duplicated in all")

    def explain(self) -> str:
        """Per app, the branch of the mechanism that matches what it measured."""
        out = []
        for role, v in self.roles.items():
            r = self.main.row(v.name)
            wait = (f"transactional wait was {r['longest_txn_wait_s']} s" if v.client == "streams" else
                    f"commit took {(r['commit_latency_max_ms'] or 0) / 1000:.1f} s")
            why = (f"fenced by {r['mechanism']}" if r["crashes"] else "no throttle, nothing waited, nothing fenced"
                   if not r["throttle_max_ms"] else f"throttled up to {r['throttle_max_ms']:.0f} ms, the longest {wait}"
                   f", and no transaction outlived transaction.timeout.ms ({v.txn_timeout_ms / 1000:g} s): not fenced")
            who = "the app under study" if role == "app" else role.replace("_", " ")
            out.append(f"- **{v.name}** ({who}, {_load(r)}): {why}.")
        return "\n".join(out)

    def fix_summary(self) -> str:
        """Which of this run's kafka-clients jars carry the KAFKA-17455 fix, as read from their bytecode."""
        has = [v for v, fixed in self.fix_in_bytecode.items() if fixed]
        lacks = [v for v, fixed in self.fix_in_bytecode.items() if not fixed]
        if not has:
            return f"None of the versions run carries the fix in its bytecode ({', '.join(lacks)})."
        return f"The fix is in the bytecode of {', '.join(has)}" + (f"; not in {', '.join(lacks)}." if lacks else ".")

    def table(self, roles=None) -> pd.DataFrame:
        if self.main is None:
            return self.sweep_table()
        return pd.DataFrame([self.row(r) for r in roles or self.roles if r in self.roles]).set_index("variant")

    def sweep_table(self) -> pd.DataFrame:
        rows = [{"client_version": v.version if v.client == "streams" else LOOP,
                 "ratio": float(v.name.rsplit("x", 1)[1]), **m.row(v.name)} for m in self.sweep for v in m.variants]
        return pd.DataFrame(rows)

    def sweep_figure(self):
        import plotly.express as px
        return px.line(self.sweep_table(), x="ratio", y="crashes_per_min", color="client_version", markers=True,
                       color_discrete_sequence=list(TONES.values()),
                       title="Sweep: fencing incidents per minute against the estimated load / quota")

    def record_fields(self) -> dict:
        p = self.params
        if self.main is None:
            return {"fix_in_bytecode": self.fix_in_bytecode,
                    "sweep": self.sweep_table().to_dict("records")}
        app = self.roles["app"]
        counts = self.main.during(app.name, STREAMS_CRASH_KINDS + ("rebalance",))
        base = {r: self.row(r) for r in ("app", *BASELINES) if r in self.roles}   # STREAMS_VERSION's and COMPARE's
        return {"quota": p["quota"], "send_rate": p["send_rate"], "record_bytes": p["record_bytes"],
                "duration_s": p["duration_s"], "load_ratio": round(app.load_ratio, 3), **base,
                "variants": {m: self.row(m) for m in VARIANTS if m in self.roles},
                "app_events": counts["kind"].value_counts().to_dict(),
                "app_coordinator_aborts": len(self.main.coordinator_aborts(app.name)),
                "aborted_output_records": self.aborted_output_records, "duplicates": self.main.duplicates,
                "audit": self.main.verdict.as_dict(), "producer_client_ids": self.main.client_ids,
                "quota_client_ids": self.main.quota_ids, "fix_in_bytecode": self.fix_in_bytecode,
                "transaction_version": self.transaction_version, "sweep": self.sweep_table().to_dict("records")}
