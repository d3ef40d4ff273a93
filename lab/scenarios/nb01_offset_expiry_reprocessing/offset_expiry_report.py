"""What a run of lesson 01 measured: each consumer group's facts, the Spark audit's verdicts, the expiry clocks,
and the result around them. expires_after_stop() and clock_for() are the pure, unit-tested parts."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from ...toolbox import Result
from .offset_expiry_spark import SPARK_VARIANTS


@dataclass(frozen=True)
class Variant:
    """One consumer group under test."""
    name: str
    reset: str                    # auto.offset.reset
    protocol: str | None          # None: the run's group_protocol
    restart: str                  # "window": after DOWNTIME_S (or the expiry); "early": after EARLY_DOWNTIME_S
    claim: str                    # what it shows when its offsets expired
    idle: bool = False            # quiet for idle_s before the stop (the expiry-clock probes)
    sink: str | None = None       # None, "plain" or "idempotent" output topic


VARIANTS = {v.name: v for v in [
    Variant("earliest", "earliest", None, "window", "re-reads everything still retained, writes it again", sink="plain"),
    Variant("latest", "latest", None, "window", "silently skips what arrived while it was down"),
    Variant("error", "error", None, "window", "fails loudly; an operator resets the offsets"),
    Variant("early", "earliest", None, "early", "back after EARLY_DOWNTIME_S: nothing re-read if < retention"),
    Variant("id-table", "earliest", None, "window", "re-reads, but its sink writes an id only when its table of ids "
            "lacks it: nothing twice", sink="idempotent"),
    Variant("idle-classic", "earliest", "classic", "window", "expiry clock of a quiet classic group", idle=True),
    Variant("idle-consumer", "earliest", "consumer", "window", "expiry clock of a quiet KIP-848 group", idle=True),
]}



IDLE_PROBES = ("idle-classic", "idle-consumer")
# The Predict when both idle probes run: when each probe's offsets are gone, by the clock the run finds for each
# (clock_for: one retention after the stop, "group empty", or after the last commit, IDLE_S before the stop, "last
# commit"; None: still there when it came back). The choices, by (idle-classic's clock, idle-consumer's): see
# clock_answers.
CLOCKS = (("group empty", "group empty"), ("last commit", "last commit"), ("group empty", "last commit"),
          ("last commit", "group empty"), (None, None))
# The Predict when they do not (the control, the panel): where the `earliest` group starts when it comes back.
RESTART_ANSWERS = ("where it stopped", "at the oldest record the topic still holds", "at the end of the topic",
                   "nowhere: it stops with an error")


def asks_clocks(p: dict) -> bool:
    """Whether the Predict asks about the expiry clock: both idle probes run."""
    return all(name in p["variants"] for name in IDLE_PROBES)


def clock_answers(p: dict) -> dict:
    """The clock question's choices at these parameters, by (idle-classic's clock, idle-consumer's clock)."""
    stop, commit = p["retention_minutes"] * 60, max(0.0, p["retention_minutes"] * 60 - p["idle_s"])
    at = {"group empty": f"about {stop:g} s", "last commit": f"about {commit:g} s"}
    return {(classic, consumer): (f"both {at[classic]} after the stop" if at[classic] == at[consumer] else
                                  f"`idle-classic` {at[classic]} after the stop, `idle-consumer` {at[consumer]}")
            if classic else "neither: both groups' offsets are still there when they come back"
            for classic, consumer in CLOCKS}


def measured_answer(record: dict, p: dict):
    """This run's answer to the Predict question, from what it recorded. The clocks: the choice of the clock the run
    found for each idle probe (None: a clock it could not tell, or one probe's offsets gone and not the other's).
    Otherwise what the `earliest` group did when it came back (None: it did not run)."""
    if asks_clocks(p):
        gone = [record.get(f"{n.replace('-', '_')}_offsets_expired") for n in IDLE_PROBES]
        clocks = tuple(record.get(f"{n.replace('-', '_')}_clock") for n in IDLE_PROBES) if all(gone) else (
            (None, None) if gone == [False, False] else None)
        return clock_answers(p).get(clocks)
    if "earliest_error" not in record:
        return None
    if record["earliest_error"]:
        return RESTART_ANSWERS[3]
    if record.get("earliest_reprocessed"):
        return RESTART_ANSWERS[1]
    return RESTART_ANSWERS[2] if record.get("earliest_skipped") else RESTART_ANSWERS[0]


# ------------------------------------------------------------------ pure parts (unit-tested)

def expires_after_stop(protocol: str, idle_s: float, retention_s: float) -> float:
    """Seconds from the stop to the expiry (no sweep): classic from the stop, KIP-848 from the last commit."""
    return retention_s if protocol == "classic" else max(0.0, retention_s - idle_s)


def skipped_by_latest(downtime_s: float, retention_s: float, rate_per_s: float) -> float:
    """Records a classic `latest` group never reads. Back after its offsets expired (one retention after the stop,
    the sweep ignored), it starts at the end of the topic, past everything produced while it was down, before the
    expiry too; back earlier, it resumes where it stopped."""
    return rate_per_s * downtime_s if downtime_s >= retention_s else 0


def clock_for(idle_before_stop_s: float, expired_after_stop_s: float, retention_s: float, sweep_s: float) -> str:
    """Which clock explains when a group's offsets vanished, given how long it sat idle before the stop."""
    slack, seen = sweep_s + 2, expired_after_stop_s
    if_empty, if_commit = float(retention_s), max(0.0, retention_s - idle_before_stop_s)
    if abs(if_empty - if_commit) < slack:
        return "either (idle too short to tell)"
    if abs(seen - if_commit) < abs(seen - if_empty):
        return "last commit" if abs(seen - if_commit) <= slack else "neither (closer to last commit)"
    return "group empty" if abs(seen - if_empty) <= slack else "neither (closer to group empty)"


# ------------------------------------------------------------------ the result

@dataclass
class OffsetExpiryResult(Result):
    topic: str = ""
    stop_t: float = 0.0                                   # seconds since t0: every app stopped
    facts: dict = field(default_factory=dict)             # consumer variant -> what was measured
    verdicts: dict = field(default_factory=dict)          # variant -> lab.audit Verdict
    errors: dict = field(default_factory=dict)            # variant -> the error it reported
    operator: dict = field(default_factory=dict)          # variant -> offsets an operator set after its failure
    snapshots: list = field(default_factory=list)         # committed offsets before the stop / the restart
    broker_log: list = field(default_factory=list)        # coordinator lines about these groups' offsets
    histories: dict = field(default_factory=dict)         # variant -> lab.record.history.History
    title: ClassVar[str] = "Offset expiry: every variant through the same window"

    retention_s = property(lambda self: self.params["retention_minutes"] * 60)

    @property
    def expired(self) -> dict:
        return {n: f for n, f in self.facts.items() if f["expired_after_stop_s"] is not None}

    failed = property(lambda self: bool(self.expired), doc="A group came back after its offsets were gone.")

    def counts(self, name: str) -> dict:
        c = self.verdicts[name].counts if name in self.verdicts else {}
        return {"reprocessed": c.get("reprocessed_after_reset"), "skipped": c.get("skipped_after_reset"),
                "duplicates": c.get("duplicate"), "lost": c.get("lost")}

    def downtime(self) -> float:
        """The main variants' downtime (the `early` group's if it ran alone)."""
        main = [f["downtime_s"] for n, f in self.facts.items() if VARIANTS[n].restart == "window"]
        return min(main or [f["downtime_s"] for f in self.facts.values()] or [0])

    def _did(self, n: str) -> str:
        c = self.counts(n)
        return ("failed loudly" if n in self.errors else f"re-read {c['reprocessed']}, skipped {c['skipped']}"
                + (f", duplicates {c['duplicates']}" if c["duplicates"] is not None else "")
                if c["reprocessed"] is not None else "not audited (a clock probe)")

    def verdict(self) -> str:
        if not self.facts:
            return "no consumer group ran; Spark: " + (", ".join(f"{k}: {v}" for k, v in self.errors.items()) or "clean")
        d, R, early = self.downtime(), self.retention_s, self.facts.get("early")
        tail = (f"; early back after {early['downtime_s']:.0f} s: offsets "
                + ("expired too" if "early" in self.expired else "still there")) if early and len(self.facts) > 1 else ""
        if self.expired:
            return (f"downtime {d:.0f} s vs retention {R} s: the committed offsets of {len(self.expired)} group(s) "
                    "expired before the restart: " + "; ".join(f"{n} {self._did(n)}" for n in self.expired) + tail)
        odd = [f"{n} {self._did(n)}" for n in self.facts if any(self.counts(n)[k] for k in ("reprocessed", "skipped"))]
        return (f"downtime {d:.0f} s < retention {R} s: the offsets were still there" if d < R else
                f"downtime {d:.0f} s >= retention {R} s, but no sweep had removed the offsets yet") + (
            "; yet the audit found " + "; ".join(odd) if odd else ", nothing re-read") + tail

    def explain(self) -> str:
        R, d = self.retention_s, self.downtime()
        lines = [f"In this run the coordinator swept every {self.params['check_interval_ms'] / 1000:g} s, with "
                 f"`offsets.retention.minutes` = {R} s."]
        for n, f in self.facts.items():
            reset = f"`auto.offset.reset={VARIANTS[n].reset}`"
            lines.append(f"- **{n}**: " + (
                f"offsets gone {f['expired_after_stop_s']:.1f} s after the stop; at the restart OffsetFetch found "
                f"nothing and {reset} decided: {self._did(n)}" + (
                    f" (`{self.errors[n][:120]}`), then an operator set the group to {self.operator.get(n)}"
                    if n in self.errors else "") if n in self.expired else
                f"down {f['downtime_s']:.0f} s; at the restart OffsetFetch still found its offsets, so it resumed "
                f"where it stopped ({reset} never applied): read {f['read_after_restart']} record(s) after the "
                f"restart, re-read {self.counts(n)['reprocessed']}") + ".")
        if not self.expired:
            lines.append(f"\nDown {d:.0f} s {'<' if d < R else '>='} {R} s: no sweep removed the offsets before the "
                         "restart, so no reset policy was consulted; nothing re-read, nothing skipped.")
        return "\n".join(lines)

    def table(self, names=None):
        """One row per variant: what it measured (names: only these, if they ran)."""
        import pandas as pd
        rows = [{"variant": n, "group.protocol": f.get("protocol", "(checkpoint)"),
                 "auto.offset.reset": f.get("reset", "(checkpoint)"), "downtime_s": f.get("downtime_s"),
                 "offsets_expired": n in self.expired if f else None, **self.counts(n),
                 "read_after_restart": f.get("read_after_restart"), "error": self.errors.get(n, ""),
                 "claim": VARIANTS[n].claim if n in VARIANTS else SPARK_VARIANTS[n]}
                for n in [*self.facts, *[s for s in SPARK_VARIANTS if s in self.verdicts]]
                for f in [self.facts.get(n, {})]]
        df = pd.DataFrame(rows).convert_dtypes()
        return df[df["variant"].isin(names)] if names is not None and len(df) else df

    def spark_table(self):
        """The Spark Structured Streaming queries' rows (empty when SPARK was off)."""
        return self.table(list(SPARK_VARIANTS))

    def mitigations_table(self):
        """The groups that were mitigations of this run, and the checkpointed query."""
        return self.table(["early", "error", "id-table", "spark-checkpoint"])

    def offsets_table(self):
        import pandas as pd
        df = pd.DataFrame(self.snapshots, columns=["moment", "variant", "partition", "committed_offset"])
        return df.pivot_table(index=["variant", "partition"], columns="moment", values="committed_offset",
                              aggfunc="first", dropna=False)

    def broker_lines(self, limit: int = 40) -> str:
        lines = [l[:230] for l in self.broker_log if re.search(r"Expired offset|tombstone|left|now empty", l)]
        return "\n".join(lines[:limit]) or "(no broker log lines: " + (
            "; ".join(self.notes) or "no offset of these groups expired") + ")"

    def clock(self):
        """For each group whose offsets vanished: which clock explains when, given how long it sat idle."""
        import pandas as pd
        R, sweep = self.retention_s, self.params["check_interval_ms"] / 1000
        return pd.DataFrame([{
            "variant": n, "protocol": f["protocol"], "idle_before_stop_s": f["idle_before_stop_s"],
            "expired_after_stop_s": f["expired_after_stop_s"],
            "predicted_if_clock_is_group_empty_s": expires_after_stop("classic", f["idle_before_stop_s"], R),
            "predicted_if_clock_is_last_commit_s": expires_after_stop("consumer", f["idle_before_stop_s"], R),
            "clock": clock_for(f["idle_before_stop_s"], f["expired_after_stop_s"], R, sweep)}
            for n, f in self.expired.items()])

    def explain_clock(self) -> str:
        probes = {n: f for n, f in self.facts.items() if VARIANTS[n].idle}
        clocks = {r["variant"]: r["clock"] for r in self.clock().to_dict("records")}
        return "\n".join(
            f"- **{n}** ({f['protocol']}): idle {f['idle_before_stop_s']:.0f} s before the stop, offsets gone "
            f"{f['expired_after_stop_s']:.1f} s after it: clock = **{clocks[n]}**" if n in clocks else
            f"- **{n}** ({f['protocol']}): idle {f['idle_before_stop_s']:.0f} s, back after {f['downtime_s']:.0f} s "
            f"with its offsets still there: a classic clock would have needed {self.retention_s} s down, a "
            f"last-commit clock {expires_after_stop('consumer', f['idle_before_stop_s'], self.retention_s):.0f} s "
            "(plus a sweep)" for n, f in probes.items()) or "No idle-* probe ran (VARIANTS): no clock to compare."

    def audit_table(self):
        import pandas as pd
        return pd.DataFrame([{"audited": k, "verdict": v.summary()} for k, v in self.verdicts.items()])

    def first_reprocessing(self) -> float | None:
        """Seconds from the stop to the first re-read of an already committed offset (any variant)."""
        times = [float(v.examples["reprocessed_after_reset"]["time"].min().timestamp()) for v in self.verdicts.values()
                 if v.counts.get("reprocessed_after_reset") and len(v.examples.get("reprocessed_after_reset", []))]
        return round(min(times) - self.timeline.t0 - self.stop_t, 1) if times else None

    def frames(self, name: str):
        """(read, produced to the input topic) of one variant's history; empty if it did not run."""
        import pandas as pd
        if name not in self.histories:
            return pd.DataFrame(columns=["partition", "offset"]), pd.DataFrame(columns=["partition", "offset"])
        produced = self.histories[name].frame("produced")
        return self.histories[name].frame("read"), produced[produced["topic"] == self.topic] if len(produced) else produced

    def skipped_in_history(self, name: str) -> int:
        """A group's skipped records counted from its own history, beside the audit's count: the produced offsets
        of each partition between two offsets it read that it never read itself."""
        reads, produced = self.frames(name)
        if not len(reads) or not len(produced):
            return 0
        seen = set(zip(reads["partition"], reads["offset"]))
        lo, hi = reads.groupby("partition")["offset"].min(), reads.groupby("partition")["offset"].max()
        return sum(1 for p, o in zip(produced["partition"], produced["offset"])
                   if p in lo and lo[p] < o < hi[p] and (p, o) not in seen)

    def record_fields(self) -> dict:
        out = {"downtime_s": self.downtime(), "retention_s": self.retention_s}
        if "latest" in self.facts:
            out["latest_skipped_in_history"] = self.skipped_in_history("latest")
        for n in [*self.facts, *[s for s in SPARK_VARIANTS if s in self.verdicts or s in self.errors]]:
            key = n.replace("-", "_")
            out.update({f"{key}_{k}": int(v) for k, v in self.counts(n).items() if v is not None})
            out[f"{key}_error"] = self.errors.get(n, "")
        out.update({f"{n.replace('-', '_')}_{k}": v for n, f in self.facts.items() for k, v in
                    {**f, "offsets_expired": n in self.expired}.items() if k not in ("protocol", "reset")})
        out.update({f"{r['variant'].replace('-', '_')}_clock": r["clock"] for r in self.clock().to_dict("records")})
        if (first := self.first_reprocessing()) is not None:
            out["first_reprocessing_after_stop_s"] = first
        return out
