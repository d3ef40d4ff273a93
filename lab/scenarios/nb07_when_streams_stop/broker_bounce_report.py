"""Lesson 07d, a broker bounce under Kafka Streams: the lesson's outcome as the notebook shows it:
verdict, table, figure (records processed while the broker bounces, dead clients marked) and explanation, with the
apps' own log lines.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .broker_bounce_analysis import APPS_LISTENER, _windows, has_kip_671


@dataclass
class Outcome:
    rows: list[dict]                   # one per app
    series: dict                       # app -> [(t_s, processed, state, threads)]
    bounce: dict                       # what the lab did to the brokers, seconds since the run began
    evidence: dict = field(default_factory=dict)   # app -> {what: {"count", "first"}} from its log
    audits: dict = field(default_factory=dict)     # app -> the Spark audit's Verdict

    @property
    def failed(self) -> bool:
        return any(r["died"] or (r["audit_lost"] or 0) > 0 for r in self.rows)

    def by_app(self) -> dict:
        return {r["app"]: r for r in self.rows}

    def as_record(self) -> dict:
        return {"bounce": self.by_app(), "bounce_brokers": self.bounce,
                "bounce_evidence": {app: {k: v["first"] for k, v in found.items()}
                                    for app, found in self.evidence.items()}}

    def verdict(self) -> str:
        died = [f"{r['app']} ({r['final_state']} {r['died_after_s']:g} s after the bounce began)"
                for r in self.rows if r["died"]]
        rode = [r["app"] + (f" ({r['threads_replaced']} thread(s) replaced)" if r["threads_replaced"] else "")
                for r in self.rows if not r["died"]]
        lost = [f"{r['app']}: {r['audit_lost']}" for r in self.rows if r["audit_lost"]]
        return "; ".join(filter(None, [f"died: {', '.join(died)}" if died else "",
                                       f"rode it out: {', '.join(rode)}" if rode else "",
                                       f"records lost: {', '.join(lost)}" if lost else ""]))

    def table(self):
        import pandas as pd
        return pd.DataFrame([{k: v for k, v in r.items() if k != "states"} for r in self.rows])

    def explain(self) -> str:
        b = self.bounce
        if b["down_at"] is None:
            lines = ["No bounce (BOUNCE_DOWN_S = 0): the apps ran undisturbed, the control."]
        else:
            kept = ("the whole cluster was down, the input with it: nothing new to read, so nothing to send"
                    if b["brokers"] == "all"
                    else f"replication {b['replication']}: their leadership moved to a follower" if b["replication"] > 1
                    else f"no leader while it was down; back at {b['listener_lost_at']:g} s without the listener "
                         f"{APPS_LISTENER}, it led them again but answered nothing to the apps: their metadata said "
                         "LISTENER_NOT_FOUND until its restart with the listener" if b["listener_lost_at"] is not None
                    else "no leader while it was down")
            lines = [f"Broker node(s) {b['nodes']} went down at {b['bounce_at']:g} s and were back at {b['up_at']:g} s "
                     f"({b['outage_s']:g} s without them, restart included). The apps' output partitions led there "
                     f"({kept})."]
        for r in self.rows:
            ev = self.evidence.get(r["app"], {})
            head = (f"- **{r['app']}**: {r['processed_before']} records before the bounce, {r['processed']} at the "
                    f"end; lag at the end {r['lag_end']}; audit: lost {r['audit_lost']}, duplicate "
                    f"{r['audit_duplicate']}.")
            if r["died"]:
                head += (f" **Died** {r['died_after_s']:g} s after the bounce began (states "
                         f"{' -> '.join(r['states'])}); it stays dead although the broker came back.")
            elif r["threads_replaced"]:
                head += f" Its handler replaced {r['threads_replaced']} dead thread(s): the client stayed up."
            else:
                head += " It rode the bounce out."
            if r["expired_sends"]:
                head += f" {r['expired_sends']} expired send(s) (delivery.timeout.ms)."
            lines.append(head)
            if r["exception"]:
                lines.append(f"  The thread died of: `{r['exception'][:300]}`")
            if r["audit_lost"] and has_kip_671(r["version"]):
                lines.append(
                    f"  At-least-once did not hold: it committed input offsets whose output was never written. Its "
                    f"log reports {r['send_errors_reported']} failed send(s) and {r['tasks_corrupted']} "
                    "TaskCorruptedException(s), one task at a time, each revived from its last commit (KIP-572's "
                    "retry, which never reached task.timeout.ms); the expired batches of the other task on the same "
                    "thread were not reported, and that task committed past them. Why, read in 4.3.1's source "
                    "(RecordCollectorImpl): since KAFKA-16903 (3.8) a thread's tasks share one send error, kept by "
                    "their one StreamsProducer; the send callback returns at once while an error is kept, and the "
                    "TaskCorruptedException names only the task whose error came first. This is the lab's own "
                    "measurement, not a documented Kafka bug, and it needs sends that expire while the leader is "
                    f"away: delivery.timeout.ms was {self.bounce.get('delivery_timeout_ms', '?')} ms here (the Java "
                    "producer's default is 120000 ms).")
            if r["audit_lost"] and r["acks"] == "1" and self.bounce["replication"] > 1:
                lines.append(
                    f"  With acks=1 (its default before 3.0, KIP-679) the leader acknowledged records its followers "
                    f"had not copied yet; the follower that took over never had them, and the old leader truncated "
                    f"them when it came back ({r['truncations']} truncation(s) of its output partitions in the brokers' "
                    f"logs): acknowledged, committed past, and gone. Replicas protect a write only with acks=all.")
            for what in ("listener_not_found", "all_threads_died", "handler", "task_timeout", "expired"):
                if what in ev:
                    lines.append(f"  Its log: `{ev[what]['first'][:300]}`")
            if r["died"] != r["expected_to_die"]:
                lines.append(f"  (The arithmetic of down time against its timeouts expected it to "
                             f"{'die' if r['expected_to_die'] else 'survive'}; this run measured otherwise.)")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        b = self.bounce
        if b["down_at"] is not None:
            for label, start, end, unreachable in _windows(b["bounce_at"], b["listener_lost_at"], b["restart_at"],
                                                           b["up_at"]):
                fig.add_vrect(x0=start, x1=end, fillcolor="#d62728" if unreachable else "#bdbdbd",
                              opacity=0.15 if unreachable else 0.3, line_width=0, annotation_text=label,
                              annotation_position="top left")
        for name, points in self.series.items():
            fig.add_scatter(x=[t for t, *_ in points], y=[n for _, n, *_ in points], mode="lines", name=name,
                            text=[f"{s} {' '.join(th)}" for _, _, s, th in points], hoverinfo="x+y+text+name")
        for r in self.rows:
            if r["died"]:
                t = b["bounce_at"] + r["died_after_s"]
                y = max((n for tt, n, *_ in self.series[r["app"]] if tt <= t), default=0)
                fig.add_scatter(x=[t], y=[y], mode="markers", marker={"symbol": "x", "size": 14, "color": "#d62728"},
                                name=f"{r['app']} dead ({r['final_state']})")
        fig.update_layout(title="Records processed while a broker bounces: a flat line that never resumes is a "
                          "dead client", xaxis_title="seconds since the run began", yaxis_title="records processed",
                          template="plotly_white", height=420)
        return fig
