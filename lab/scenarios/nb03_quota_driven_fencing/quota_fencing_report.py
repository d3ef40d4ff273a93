"""What notebook 03 shows of a run (QuotaResult): the verdict and the per-app explanation of what fenced it (section 4,
"The mechanism, with evidence"), the tables of the main run, the mitigations and the sweep (sections 1, 5 and 6), the
timeline and sweep figures (sections 2 and 6), the recorded fields and the exercises' checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...experiment import TONES, Result
from ...experiment.result import expect
from .quota_fencing_analysis import (BASELINES, FENCING_ANSWERS, LOOP, MITIGATIONS, STREAMS_CRASH_KINDS, Measured,
                                     quota_for)


def _load(row: dict) -> str:
    return f"load {row['load_ratio']:.2f}x the quota" if row["load_ratio"] else "no quota"


@dataclass
class QuotaResult(Result):
    roles: dict = field(default_factory=dict)                   # role -> Variant
    main: Measured | None = field(default=None, repr=False)
    sweep: list = field(default_factory=list, repr=False)      # [Measured], one per wave
    fix_in_bytecode: dict = field(default_factory=dict)
    aborted_output_records: int = 0

    title = "Quota-driven fencing: x incident (hover: its mechanism), ▼ coordinator abort, bars: waits"

    def row(self, role: str) -> dict:
        return self.main.row(self.roles[role].name)

    def figure(self, roles=None):
        return self.timeline.figure(self.title, lanes=[self.roles[r].name for r in roles or self.roles])

    @property
    def failed(self) -> bool:
        return self.row("affected")["crashes"] > 0

    def verdict(self) -> str:
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
            out.append(f"- **{v.name}** ({role}, {_load(r)}): {why}.")
        return "\n".join(out)

    def measured_answer(self) -> str:
        return FENCING_ANSWERS[0] if self.row("affected")["crashes"] else FENCING_ANSWERS[1]

    def fix_summary(self) -> str:
        """Which of this run's kafka-clients jars carry the KAFKA-17455 fix, as read from their bytecode."""
        has = [v for v, fixed in self.fix_in_bytecode.items() if fixed]
        lacks = [v for v, fixed in self.fix_in_bytecode.items() if not fixed]
        if not has:
            return f"None of the versions run carries the fix in its bytecode ({', '.join(lacks)})."
        return f"The fix is in the bytecode of {', '.join(has)}" + (f"; not in {', '.join(lacks)}." if lacks else ".")

    def table(self, roles=None) -> pd.DataFrame:
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
        p, counts = self.params, self.main.during(self.roles["affected"].name, STREAMS_CRASH_KINDS + ("rebalance",))
        base = {r: self.row(r) for r in ("affected", *BASELINES) if r in self.roles}
        return {"affected_version": p["affected_version"], "fixed_version": p["fixed_version"],
                "quota": p["quota"], "send_rate": p["send_rate"], "record_bytes": p["record_bytes"],
                "duration_s": p["duration_s"], "load_ratio": round(self.roles["affected"].load_ratio, 3), **base,
                "mitigations": {m: self.row(m) for m in MITIGATIONS if m in self.roles},
                "affected_events": counts["kind"].value_counts().to_dict(),
                "affected_coordinator_aborts": len(self.main.coordinator_aborts(self.roles["affected"].name)),
                "aborted_output_records": self.aborted_output_records, "duplicates": self.main.duplicates,
                "audit": self.main.verdict.as_dict(), "producer_client_ids": self.main.client_ids,
                "quota_client_ids": self.main.quota_ids, "fix_in_bytecode": self.fix_in_bytecode,
                "sweep": self.sweep_table().to_dict("records")}

    exercises = {
        1: lambda r, a: expect(abs(a - r.main.waits.groupby("variant")["wait_s"].max()[r.roles["affected"].name])
                               <= 0.01, "look at result.main.waits for the affected app"),
        2: lambda r, a: expect(abs(a - quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"])) <= 1,
                               "50 % headroom is load / quota = 1 / 1.5: quota_fencing.quota_for(1 / 1.5, ...)"),
        3: lambda r, a: expect(sorted(a) == sorted(v.name for m, v in r.roles.items() if m in MITIGATIONS
                                                   and not r.row(m)["crashes"]), "compare the mitigations' crashes"),
    }
