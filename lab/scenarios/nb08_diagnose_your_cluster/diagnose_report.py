"""Notebook 08's result: what the read-only diagnosis found about what the run built, and what the verification then
measured (DiagnoseResult), with the pure parts that read the diagnosis (predictions). Nothing here runs anything.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ...toolbox import Result
from ...record.history import History

# the error each expiry predicts for the producer's next transaction (an expired idempotent producer id meets none:
# since 2.5 the broker takes its next batch as a new producer's)
EXPECTED_ERROR = {"transactional-id-expires": "InvalidPidMappingException"}


def predictions(d, group: str, txn_id: str) -> dict:
    """rule -> predicted epoch ms, for the findings about the group and the transactional id this run built."""
    out = {}
    for f in d.findings:
        about = f"{f.subject} {f.evidence}"
        if f.when_ms and ((f.rule == "offsets-expire" and group in about) or
                          (f.rule == "transactional-id-expires" and txn_id in about)):
            out[f.rule] = min(out.get(f.rule, f.when_ms), f.when_ms)
    return out


@dataclass
class DiagnoseResult(Result):
    """One run of lesson 08: the diagnosis, the findings about what the run built, and (VERIFY) what was observed."""
    diagnosis: object = None                                # lab.doctor.Diagnosis
    verified: dict = field(default_factory=dict)            # what the verification measured (VERIFY)
    mine: list = field(default_factory=list)                # the findings about what this run built
    subjects: dict = field(default_factory=dict)            # the group, transactional id, quota client id, version
    history: History | None = None                          # the consumer's reads and commits
    title: ClassVar[str] = "Predicted by the diagnosis, then observed"

    def rules(self) -> list[str]:
        return list(dict.fromkeys(f.rule for f in self.mine))

    failed = property(lambda self: bool(self.mine), doc="The diagnosis found what this run built exposed.")

    def predicted(self, rule: str):
        return self.verified.get("predicted_ms", {}).get(rule)

    def predicted_rereads(self) -> int | None:
        f = next((f for f in self.mine if f.rule == "offsets-expire"
                  and self.subjects["group"] in f"{f.subject} {f.evidence}"), None)
        return None if f is None else f.rereads

    def observed_rereads(self) -> int | None:
        a = self.verified.get("audit")
        return None if a is None else a.counts.get("reprocessed_after_reset")

    def producer_error(self) -> str:
        return (self.verified.get("producer_errors") or [""])[0]

    def predicted_error(self) -> str:
        return EXPECTED_ERROR["transactional-id-expires"] if self.predicted("transactional-id-expires") else ""

    def confirmed(self) -> dict:
        """prediction -> whether the verification saw it (None: not verified)."""
        if not self.verified:
            return {}
        rereads, observed = self.predicted_rereads(), self.observed_rereads()
        return {"re-reads": (observed == rereads if rereads is not None else observed > 0)
                if self.predicted("offsets-expire") else observed == 0,
                "producer error": self.producer_error() == self.predicted_error()}

    def offsets_at_diagnosis(self) -> dict:
        """What the doctor read of this run's group and topic, by partition: the group's committed offsets and
        the topic's log start offsets (the first offset still retained)."""
        from ...doctor.rules import section, split_partition
        facts, gid, topic = self.diagnosis.facts, self.subjects["group"], self.subjects["topic"]
        committed = ((section(facts, "groups") or {}).get(gid) or {}).get("offsets") or {}
        logs = section(facts, "topic_offsets") or {}
        parts = {split_partition(tp)[1]: tp for tp in logs if split_partition(tp)[0] == topic}
        return {"committed": {p: committed[tp] for p, tp in sorted(parts.items()) if tp in committed},
                "log_start": {p: logs[tp].get("earliest") for p, tp in sorted(parts.items())}}

    def verdict(self) -> str:
        d = self.diagnosis
        others = len(d.findings) - len(self.mine)
        found = (f"{len(self.mine)} finding(s) ({', '.join(self.rules())})" if self.mine else "no finding") + \
            f" in {d.seconds:.1f} s" + (f" (and {others} about what earlier runs left on this cluster)"
                                        if others else "")
        if not self.verified:
            return f"the diagnosis read the cluster: {found}; not verified (VERIFY = False)"
        v, ok = self.verified, self.confirmed()
        seen = (f"after {v['waited_s']:.0f} s the restarted consumer re-read {self.observed_rereads()} record(s) "
                f"(predicted {self.predicted_rereads() if self.predicted('offsets-expire') else 0}), the producer got "
                f"{self.producer_error() or 'no error'} (predicted {self.predicted_error() or 'none'})")
        return f"{found}; {seen}: " + ("every prediction confirmed" if all(ok.values()) else
                                       "NOT confirmed: " + ", ".join(k for k, good in ok.items() if not good))

    def explain(self) -> str:
        lines = []
        for f in self.mine:
            lines.append(f"- **{f.rule}** ({f.severity}) `{f.subject}`: {f.consequence} Evidence: {f.evidence}"
                         + (f" See notebook [{f.notebook}]({f.notebook})." if f.notebook else ""))
        if not self.mine:
            lines.append("- No finding: every group with offsets still has members, the transactional id commits every "
                         "second, no quota names a Streams producer, and every Java client is current.")
        if self.verified:
            v = self.verified
            lines.append(f"\nThe proof, after waiting {v['waited_s']:.0f} s: the group's committed offsets "
                         + (f"vanished at {v['offsets_expired_at'] - self.timeline.t0:.1f} s" if v["offsets_expired_at"]
                            else "were still there") + f", the restarted consumer re-read {self.observed_rereads()} "
                         "record(s) (Spark audit); the transactional id was " +
                         (f"expired at {v['txn_expired_at'] - self.timeline.t0:.1f} s (a tombstone in "
                          "`__transaction_state`)" if v["txn_expired_at"] else "never expired") +
                         f", and the producer's next transaction got {self.producer_error() or 'no error'}"
                         + (f" (`{v['producer_messages'][0][:160]}`)" if v["producer_messages"] else "") + ".")
        return "\n".join(lines)

    def findings(self):
        """The findings about what this run built (the doctor's whole table: result.diagnosis.table())."""
        import pandas as pd
        t0 = self.timeline.t0
        return pd.DataFrame([{"rule": f.rule, "severity": f.severity, "subject": f.subject, "evidence": f.evidence,
                              "consequence": f.consequence, "when (s)": None if f.when_ms is None else
                              round(f.when_ms / 1000 - t0, 1), "notebook": f.notebook} for f in self.mine],
                            columns=["rule", "severity", "subject", "evidence", "consequence", "when (s)", "notebook"])

    def table(self):
        """Prediction against observation, one row per verifiable finding."""
        import pandas as pd
        t0, v = self.timeline.t0, self.verified

        def s(epoch):
            return None if epoch is None else round(epoch - t0, 1)
        rows = [{"prediction": "offsets-expire", "predicted at (s)": s((self.predicted("offsets-expire") or 0) / 1000
                                                                         or None),
                 "observed at (s)": s(v.get("offsets_expired_at")), "predicted": self.predicted_rereads()
                 if self.predicted("offsets-expire") else 0, "observed": self.observed_rereads(),
                 "what": "records re-read after the restart (Spark audit)"},
                {"prediction": "transactional-id-expires", "predicted at (s)": s(
                    (self.predicted("transactional-id-expires") or 0) / 1000 or None),
                 "observed at (s)": s(v.get("txn_expired_at")), "predicted": self.predicted_error() or "no error",
                 "observed": self.producer_error() or "no error", "what": "the producer's next transaction"}]
        return pd.DataFrame(rows if v else []).astype(object)

    def figure(self):
        return self.timeline.figure(f"{self.title}: {'exposed' if self.failed else 'healthy'}",
                                    lanes=[l for l in ("run", "consumer group", "transactional id", "quota", "client",
                                                       "doctor") if self.timeline.rows(l)])

    def evidence(self) -> str:
        """What each finding read, in the doctor's words."""
        return "\n".join(f"{f.rule} ({f.subject}): {f.evidence}" for f in self.mine) or "(no finding)"

    def reads(self):
        """The consumer's history: every record it read, per incarnation (0: before, 1: after the restart)."""
        return self.history.frame("read")

    def record_fields(self) -> dict:
        d, v = self.diagnosis, self.verified
        by_rule = {r: sum(f.rule == r for f in self.mine) for r in self.rules()}
        out = {"findings": len(self.mine), "findings_all": len(d.findings), "findings_by_rule": by_rule,
               "unreadable": dict(d.unreadable),
               "diagnosis_seconds": round(d.seconds, 2), "verified": bool(v),
               "client_version": self.subjects.get("client_version")}
        if v:
            t0 = self.timeline.t0
            out.update({
                "predicted_rereads": self.predicted_rereads() if self.predicted("offsets-expire") else 0,
                "observed_rereads": self.observed_rereads(), "read_after_restart": v["read_after_restart"],
                "predicted_error": self.predicted_error(), "producer_error": self.producer_error(),
                "producer_committed_after": v["committed_after"], "waited_s": v["waited_s"],
                "predicted_offsets_expiry_s": round(self.predicted("offsets-expire") / 1000 - t0, 1)
                if self.predicted("offsets-expire") else None,
                "observed_offsets_expiry_s": round(v["offsets_expired_at"] - t0, 1) if v["offsets_expired_at"]
                else None,
                "predicted_txn_expiry_s": round(self.predicted("transactional-id-expires") / 1000 - t0, 1)
                if self.predicted("transactional-id-expires") else None,
                "observed_txn_expiry_s": round(v["txn_expired_at"] - t0, 1) if v["txn_expired_at"] else None,
                "confirmed": self.confirmed(), "audit": v["audit"].as_dict()})
        doctor = {key: val for key, val in d.as_record().items() if key != "facts"}   # facts: result.diagnosis
        return {**out, "doctor": doctor}
