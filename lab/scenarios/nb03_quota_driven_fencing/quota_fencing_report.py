"""What notebook 03 shows of a run (QuotaResult): the verdict and the per-app explanation of what fenced it (section 4,
"The mechanism, with evidence"), the tables of the main run, the mitigations and the sweep (sections 1, 5 and 6), the
timeline and sweep figures (sections 2 and 6), the recorded fields and the exercises' checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...experiment import TONES, Result
from ...experiment.result import Exercise, expect, number
from .quota_fencing_analysis import (BASELINES, FENCING_ANSWERS, LOOP, MITIGATIONS, STREAMS_CRASH_KINDS,
                                     WIRE_OVERHEAD_BYTES, Measured, quota_for)


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


# ---------------------------------------------------------------- the exercises

def _longest_wait_s(r: QuotaResult) -> float:
    """The longest a transactional request of the affected app waited inside the producer (0 when none waited)."""
    waits = r.main.waits
    mine = waits.loc[waits["variant"] == r.roles["affected"].name, "wait_s"]
    return float(mine.max()) if len(mine) else 0.0


def _check_longest_wait(r: QuotaResult, answer) -> None:
    given = number(answer, "the wait in seconds")
    expect(abs(given - _longest_wait_s(r)) <= 0.01,
           f"{given:g} s is not the affected app's longest wait: take the largest `wait_s` of its rows in "
           "result.main.waits (seconds, not milliseconds)")


def _headroom_quota(r: QuotaResult) -> int:
    return quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"])


def _check_headroom_quota(r: QuotaResult, answer) -> None:
    given, rate, state = number(answer, "the quota in bytes/s"), r.params["send_rate"], r.params["record_bytes"]
    right = _headroom_quota(r)
    if abs(given - right) <= 1:
        return
    expect(given > rate * (state + WIRE_OVERHEAD_BYTES),
           f"a quota of {given:,.0f} B/s is below this load: with headroom the quota is above the load, "
           "so load / quota is below 1")
    expect(abs(given - 1.5 * rate * state) > 1,
           "that covers the state bytes only: each record also puts a changelog key, an output record and batch "
           "overhead on the wire (WIRE_OVERHEAD_BYTES), and the quota counts them all")
    expect(False, "50 % headroom: the quota is 1.5 times the bytes the load puts on the wire each second")


def _clean_mitigations(r: QuotaResult) -> list:
    return [v.name for role, v in r.roles.items() if role in r.params["mitigations"] and not r.row(role)["crashes"]]


def _check_clean_mitigations(r: QuotaResult, answer) -> None:
    expect(isinstance(answer, (list, tuple, set)) and all(isinstance(a, str) for a in answer),
           "give a list of app names (strings), like the index of the mitigation table")
    ran = [v.name for role, v in r.roles.items() if role in r.params["mitigations"]]
    unknown = sorted(set(answer) - set(ran))
    expect(not unknown, f"{', '.join(map(repr, unknown))}: not the name of a mitigation app in this run; name the "
           f"apps as the mitigation table's index does ({', '.join(map(repr, ran)) or 'here no mitigation ran'})")
    expect(sorted(answer) == sorted(_clean_mitigations(r)),
           "compare the mitigations' crashes in the mitigation table: a mitigation worked when its app was "
           "never fenced")


QuotaResult.exercises = {
    1: Exercise(
        check=_check_longest_wait,
        solution=lambda r: round(_longest_wait_s(r), 2),
        why="The producer logs each transactional request twice: when it is queued and when it finally leaves; "
            "`result.main.waits` holds the gap, `wait_s`, per request. The answer is the largest `wait_s` of the "
            "affected app's rows. A request stuck by KAFKA-17455 waits about `request.timeout.ms` (30 s): "
            "before the fix the producer polled with the whole request timeout instead of the throttle delay. "
            "A throttled request that is not stuck waits about the throttle time; with no throttle, a fraction "
            "of a second.",
        wrong=lambda r: max(_longest_wait_s(r) * 1000, _longest_wait_s(r) + 1),   # the same wait in milliseconds
    ),
    2: Exercise(
        check=_check_headroom_quota,
        solution=_headroom_quota,
        why="50 % headroom means the quota is 1.5 times the load, so load / quota is 1 / 1.5. The load is "
            "`SEND_RATE` records per second times the bytes each record puts on the wire: its state "
            "(`RECORD_BYTES`) plus the changelog key, the output record and batch overhead "
            "(`quota_fencing.WIRE_OVERHEAD_BYTES`). `quota_fencing.quota_for(1 / 1.5, SEND_RATE, RECORD_BYTES)` "
            "does that arithmetic. Whether it was enough shows in the headroom row of the mitigation table: a "
            "catch-up burst above the quota can still be throttled.",
        wrong=lambda r: quota_for(1.5, r.params["send_rate"], r.params["record_bytes"]),   # load 1.5x the quota
    ),
    3: Exercise(
        check=_check_clean_mitigations,
        solution=_clean_mitigations,
        why="A mitigation worked when its app was never fenced: in the mitigation table (step 5), the rows of the "
            "mitigations this run had (`MITIGATIONS`) whose `crashes` is 0, named as the table's index names "
            "them. With no mitigation run, or none clean, the list is empty.",
        wrong=lambda r: list(MITIGATIONS),   # every mitigation the notebook describes, by its parameter name
    ),
}
