"""What notebook 03 shows of a run (QuotaResult): the verdict and the per-app explanation of what fenced it, the
tables of the main run and its mitigations (lesson 1) and of the sweep (lesson 2), the timeline and sweep figures,
the recorded fields and the exercises' checks. A result whose lesson did not run says so instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...errors import LabError
from ...experiment import TONES, Result
from ...experiment.result import Exercise, called, expect, is_number, number
from .quota_fencing_analysis import (BASELINES, FENCING_ANSWERS, LOOP, MITIGATIONS, STREAMS_CRASH_KINDS,
                                     SWEEP_ANSWERS, WIRE_OVERHEAD_BYTES, Measured, quota_for)


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

    def lesson_ran(self, lesson: str) -> bool:
        return self.main is not None if lesson == "fencing" else bool(self.sweep)

    def _needs(self, lesson: str) -> None:
        """A look at a lesson this run left out asks for the lesson first."""
        if not self.lesson_ran(lesson):
            key = "AFFECTED_RUN" if lesson == "fencing" else "SWEEP_RATIOS"
            raise LabError(f"The lesson {lesson!r} was not run in this run ({key}="
                           f"{self.params[key.lower()]!r}): run its section first.")

    def row(self, role: str) -> dict:
        self._needs("fencing")
        return self.main.row(self.roles[role].name)

    def figure(self, roles=None):
        return self.timeline.figure(self.title, lanes=[self.roles[r].name for r in roles or self.roles])

    @property
    def failed(self) -> bool:
        if self.main is None:   # the sweep alone: fenced where the fix should have prevented it
            return any(r["crashes"] for r in self.sweep_table().to_dict("records"))
        return self.row("affected")["crashes"] > 0

    def sweep_fenced(self) -> list[str]:
        """The client versions of the sweep fenced at its highest ratio."""
        table = self.sweep_table()
        if not len(table):
            return []
        top = table[table["ratio"] == table["ratio"].max()]
        return list(top.loc[top["crashes"] > 0, "client_version"])

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
            out.append(f"- **{v.name}** ({role}, {_load(r)}): {why}.")
        return "\n".join(out)

    def measured_answer(self, lesson: str | None = None) -> str | None:
        """This run's answer to a lesson's Predict question (default: the one lesson that ran); None when that
        lesson did not run."""
        ran = [name for name in ("fencing", "sweep") if self.lesson_ran(name)]
        lesson = lesson or (ran[0] if len(ran) == 1 else None)
        if lesson not in ran:
            return None
        if lesson == "fencing":
            return FENCING_ANSWERS[0] if self.row("affected")["crashes"] else FENCING_ANSWERS[1]
        fenced = set(self.sweep_fenced())
        unfixed = {v for v, fix in self.fix_in_bytecode.items() if not fix} & set(self.sweep_table()["client_version"])
        if not fenced:
            return SWEEP_ANSWERS[0]
        if fenced == unfixed:
            return SWEEP_ANSWERS[1]
        if unfixed <= fenced and LOOP not in fenced:
            return SWEEP_ANSWERS[2]
        return SWEEP_ANSWERS[3]

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
            return {"affected_version": p["affected_version"], "fix_in_bytecode": self.fix_in_bytecode,
                    "sweep": self.sweep_table().to_dict("records")}
        counts = self.main.during(self.roles["affected"].name, STREAMS_CRASH_KINDS + ("rebalance",))
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

def stall_s(request_timeout_ms, transaction_timeout_ms, throttle_ms):
    # KAFKA-17455: a client without the fix waits out its whole request.timeout.ms, whatever the throttle asked
    return request_timeout_ms / 1000


def _throttle_only(request_timeout_ms, transaction_timeout_ms, throttle_ms):
    """A tempting wrong answer: the wait the broker asked for, which a fixed client keeps to."""
    return throttle_ms / 1000


def _stuck(r: QuotaResult) -> list[tuple]:
    """This run's stuck requests: per Streams app whose longest transactional wait was far beyond any throttle,
    (its request.timeout.ms, its transaction.timeout.ms, its longest throttle, that wait)."""
    out = []
    for v in r.roles.values():
        row = r.main.row(v.name)
        wait, throttle = row["longest_txn_wait_s"] or 0, row["throttle_max_ms"] or 0
        if v.client == "streams" and wait > max(3.0, 3 * throttle / 1000):
            out.append((v.request_timeout_ms, v.txn_timeout_ms, throttle, wait))
    return out


def _check_stall(r: QuotaResult, fn) -> None:
    r._needs("fencing")
    cases = [(*args, wait, "a request of this run") for *args, wait in _stuck(r)]
    cases += [(30000, 10000, 1500, 30.0, "the report's client, throttled 1.5 s"),
              (5000, 60000, 800, 5.0, "a client with request.timeout.ms 5 s and transaction.timeout.ms 60 s")]
    for request_ms, txn_ms, throttle_ms, truth, what in cases:
        call = f"stall_s({request_ms}, {txn_ms}, {throttle_ms:g})"
        given = called(fn, call, request_ms, txn_ms, throttle_ms)
        expect(is_number(given), f"{call} returned {given!r}: return a number of seconds")
        expect(abs(given - truth) <= max(1.0, 0.1 * truth),
               f"{call} = {given:g} s, but {what} waited {truth:g} s: which producer setting bounds the wait of a "
               "request the client believes it may not send yet? (seconds, not milliseconds)")


def _headroom_quota(r: QuotaResult) -> int:
    return quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"])


def _check_clean_quota(r: QuotaResult, answer) -> None:
    """An experiment: lesson 1's affected app runs again, alone, with the learner's quota, and what it measured
    decides. A quota below the load, or more than twice it, is refused before anything runs."""
    r._needs("fencing")
    p = r.params
    given, rate, state = number(answer, "the quota in bytes/s"), p["send_rate"], p["record_bytes"]
    load = rate * (state + WIRE_OVERHEAD_BYTES)
    if given < load:
        expect(given < rate * state, "that covers the state bytes only: each record also puts a changelog key, an "
               "output record and batch overhead on the wire (WIRE_OVERHEAD_BYTES), and the quota counts them all")
        expect(False, f"a quota of {given:,.0f} B/s is below this load (about {load:,.0f} B/s on the wire): the "
               "producer cannot send faster than its quota, so a backlog grows until one transaction holds more "
               "than the quota lets through within TRANSACTION_TIMEOUT_MS")
    expect(given <= 2 * load, f"{given:,.0f} B/s would do, but it is more than twice the load (about {load:,.0f} "
           "B/s on the wire): a quota that far above the load no longer protects the brokers. The question is the "
           "smallest quota you would dare to set")
    cluster = r.running_cluster()
    print(f"Exercise 2: running lesson 1's affected app (Kafka Streams {p['affected_version']}) alone with QUOTA = "
          f"{given:,.0f} B/s (the load at {load / given:.2f}x it), for {p['duration_s']} s, on "
          + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    from . import quota_fencing   # the scenario imports this module: import it when the check runs
    again = quota_fencing.run(cluster=cluster, quota=int(given), compare=[], mitigations=[], sweep_ratios=[],
                **{k: p[k] for k in ("affected_version", "send_rate", "record_bytes", "transaction_timeout_ms",
                                     "duration_s")})
    row = again.row("affected")
    print(f"Measured: throttled up to {row['throttle_max_ms'] or 0:g} ms, the longest transactional request "
          f"waited {row['longest_txn_wait_s'] or 0:g} s, {row['crashes']} fencing incident(s), "
          f"{row['output_records']} of {row['produced']} records in the read_committed output.")
    expect(row["crashes"] == 0, f"with QUOTA = {given:,.0f} B/s the affected client was fenced again "
           f"({row['mechanism']}): a throttle, however short, makes a client without the fix wait out "
           "request.timeout.ms. Leave room above the load for its bursts")


def _transaction_budget(r: QuotaResult) -> float:
    """The bytes the quota lets through within one transaction timeout: more in one transaction, and it is aborted."""
    return r.params["quota"] * r.params["transaction_timeout_ms"] / 1000


def _check_transaction_budget(r: QuotaResult, answer) -> None:
    r._needs("sweep")
    given, right, p = number(answer, "a number of bytes"), _transaction_budget(r), r.params
    expect(abs(given - right * 1000) > 0.05 * right, "TRANSACTION_TIMEOUT_MS is in milliseconds and QUOTA in bytes "
           "per second: convert the timeout to seconds")
    expect(abs(given - p["quota"]) > 0.05 * right, "that is what the quota lets through in one second; a "
           "transaction may stay open for TRANSACTION_TIMEOUT_MS")
    expect(abs(given - right) <= 0.05 * right, f"{given:,.0f} B is not what QUOTA lets through within one "
           "TRANSACTION_TIMEOUT_MS")


QuotaResult.exercises = {
    1: Exercise(
        check=_check_stall,
        solution=lambda r: stall_s,
        why="Over its quota, the broker answers with a throttle time and the client marks the connection not ready "
            "until then. Before the fix (KAFKA-17455), `NetworkClientUtils.awaitReady` polled with the whole "
            "request timeout instead of the throttle delay, so a transactional request waits out "
            "`request.timeout.ms` (30 s by default), however short the throttle, and however long the transaction "
            "may stay open. The affected app's `wait_s` in `fencing.main.waits` shows it; a fixed client waits "
            "about the throttle time.",
        wrong=lambda r: _throttle_only,
    ),
    2: Exercise(
        check=_check_clean_quota,
        solution=_headroom_quota,
        why="The quota counts every byte a record puts on the wire: its state (`RECORD_BYTES`) plus the changelog "
            "key, the output record and batch overhead (`quota_fencing.WIRE_OVERHEAD_BYTES`), at `SEND_RATE` "
            "records a second. Below that load the producer falls behind for good. Just above it, the load's "
            "bursts still meet a throttle, and any throttle makes a client without the fix wait out "
            "`request.timeout.ms`. This solution keeps 50 % headroom: a quota 1.5 times the load, "
            "`quota_fencing.quota_for(1 / 1.5, SEND_RATE, RECORD_BYTES)`. Where between the load and that the "
            "affected client starts to run clean depends on how bursty the load is: measured here, not "
            "documented. The real remedy is a client with the KAFKA-17455 fix (lesson 1's fixed client).",
        wrong=lambda r: quota_for(1.5, r.params["send_rate"], r.params["record_bytes"]),   # load 1.5x the quota
    ),
    3: Exercise(
        check=_check_transaction_budget,
        solution=_transaction_budget,
        why="The coordinator aborts a transaction still open after `transaction.timeout.ms`. Behind a quota the "
            "producer cannot send faster than the quota, so a transaction whose bytes take longer than the timeout "
            "to get through is aborted, whatever the client version: QUOTA x TRANSACTION_TIMEOUT_MS / 1000 bytes. "
            "A backlog (after a stall, or at a high load / quota ratio) packs more than that into one transaction: "
            "that is the oversized transaction that fences fixed clients in the sweep.",
        wrong=lambda r: r.params["quota"] * r.params["transaction_timeout_ms"],   # milliseconds as seconds
    ),
}
