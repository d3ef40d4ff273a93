"""How lesson 06d (a downstream reader of a changelog) reads: the verdict, the explanation per variant, the table
of what each reader saw and the figure of the updates a downstream consumer received. OutcomeReport is the
presentation side of changelog_api_analysis.Outcome.
"""
from __future__ import annotations


class OutcomeReport:
    """The verdict, explanation, table and figure of an Outcome (its rows, views, curves, deploy_t, evidence)."""

    def verdict(self) -> str:
        parts = []
        for r in self.rows:
            if r["variant"] == "internal":
                parts.append(f"internal: the downstream reader of the {r['store_v1']} changelog missed "
                             f"{r['live_lost']} of {r['inputs']} updates after the {r['change']} change (version 2 "
                             f"wrote the {r['store_v2']} changelog); a late re-reader misses {r['late_lost']}"
                             + (f" ({r['compacted_away']} records compacted away)" if r["cleaner_ran"] else
                                " (the cleaner had not run)"))
            else:
                parts.append(f"{r['variant']}: " + ("clean, the output topic got every update" if not r["missed"]
                                                    else f"missed updates: lost {r['live_lost']}, stale "
                                                         f"{r['live_stale']}"))
        return "; ".join(parts)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.views)

    def explain(self) -> str:
        lines = []
        for r in self.rows:
            if r["variant"] == "internal":
                lines.append(
                    f"- **internal**: version 1 printed the store `{r['store_v1']}` (changelog `{r['changelog_v1']}`); "
                    f"version 2, with `{r['change']}` inserted before the aggregation, printed `{r['store_v2']}` "
                    f"(changelog `{r['changelog_v2']}`)"
                    + (": the generated name moved with the processor numbering." if r["store_renamed"] else
                       ": the same name, so nothing moved.")
                    + f" The downstream consumer, configured with `{r['changelog_v1']}`, read {r['live_read']} "
                    f"records and reached its end: no error, no lag"
                    + (f" (the cleaner removed {r['downstream_written'] - r['live_read']} records before it could "
                       "read them)" if r["live_read"] < r["downstream_written"] else "")
                    + ". The Spark audit of what it read counts "
                    f"**{r['live_lost']} of {r['inputs']} inputs lost** and {r['live_stale']} stale counts.")
                warning = (self.evidence.get("unnamed_warning") or {}).get(r["variant"])
                if warning:
                    lines.append(f"  Kafka Streams said so as version 2 started: `{warning}`")
                if r["v2_changelog_written"] is not None:
                    lines.append(
                        f"  Version 2's {r['v2_changelog_written']} updates went to `{r['changelog_v2']}`, which the "
                        f"downstream consumer never subscribed to. Even a consumer that followed it live gets "
                        f"{r['v2_changelog_stale']} counts unlike the truth (the audit's stale_value): the renamed "
                        "store is a new, empty store, and version 1's state stays behind in the old one.")
                if r["cleaner_ran"]:
                    lines.append(
                        f"  Compaction: `{r['changelog_v1']}` holds {r['late_read']} records for its "
                        f"{r['downstream_written']} offsets: the cleaner removed {r['compacted_away']} older values "
                        f"(only the last per key survives in a cleaned segment; the active segment is never cleaned). "
                        f"A reader that re-reads it now misses {r['late_lost']} inputs, {r['late_missed_extra']} more "
                        "than the live reader: intermediate values it can never see.")
                    if self.evidence.get("cleaner_lines"):
                        lines.append(f"  The broker said: `{self.evidence['cleaner_lines'][0]}`")
                else:
                    lines.append(
                        f"  The log cleaner had not compacted `{r['changelog_v1']}` within the {r['cleaner_wait_s']} s "
                        f"waited ({r['late_read']} records for {r['downstream_written']} offsets), so the late reader "
                        "misses no more than the live one in this run: compaction hides intermediate values only "
                        "once a segment has rolled (segment.ms) and the cleaner has passed (log.cleaner.backoff.ms).")
            else:
                lines.append(
                    f"- **{r['variant']}**: the store is named `{r['store_v1']}` in both versions (changelog "
                    f"`{r['changelog_v1']}`, restored into version 2); the downstream consumer reads the output "
                    f"topic `{r['downstream_topic']}` (cleanup.policy=delete), written with to(): {r['live_read']} "
                    f"records for {r['inputs']} inputs. The audit: lost {r['live_lost']}, stale {r['live_stale']}, "
                    f"duplicate {r['live_duplicate']}; a late re-reader: lost {r['late_lost']}, stale "
                    f"{r['late_stale']}. It ran with ensure.explicit.internal.resource.naming=true (Kafka 4.1+), "
                    "under which Kafka Streams refuses to start a topology with an unnamed internal topic.")
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for name, series in self.curves.items():
            fig.add_scatter(x=[t for t, _ in series], y=[n for _, n in series], mode="lines", name=name,
                            line={"dash": "dot"} if name == "input produced" else {})
        for r in self.rows:
            if r["late_read"] is not None and self.curves:
                end = max((s[-1][0] for s in self.curves.values() if s), default=0)
                fig.add_scatter(x=[end], y=[r["late_read"]], mode="markers", marker={"size": 11, "symbol": "x"},
                                name=f"{r['variant']}: a late re-reader finds")
        if self.deploy_t is not None:
            fig.add_vline(x=self.deploy_t, line_dash="dash", line_color="#7f7f7f",
                          annotation_text="version 2 running", annotation_position="top left")
        fig.update_layout(title="Updates a downstream consumer receives, before and after a harmless change",
                          xaxis_title="seconds since the run began", yaxis_title="records so far",
                          template="plotly_white", height=420)
        return fig
