"""Lesson 06b, a restart after a crash: the lesson's outcome as the notebook shows it: verdict, table, figure
(restore time and time back to processing, against the changelog's size) and explanation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .state_restore_analysis import CHECKPOINT_EVERY

LOG_LINES = ("wipe_line", "wipe_action")   # evidence quoted by explain(), not columns of the table


@dataclass
class Outcome:
    rows: list[dict]
    version: str
    shutdown: str
    standbys: int = 1
    notes: list = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A shutdown forced a full restore (the whole store replayed from the changelog) in this run."""
        return any(r["full_restore"] for r in self.rows)

    def of(self, mode: str) -> list[dict]:
        return [r for r in self.rows if r["mode"] == mode]

    def modes(self) -> list[str]:
        return list(dict.fromkeys(r["mode"] for r in self.rows))

    def rate(self, mode: str = "eos") -> dict:
        """The restore rate of a mode's largest restore: MB/s and records/s (None if nothing was restored)."""
        timed = [r for r in self.of(mode) if r["restore_s"] > 0 and r["restored_records"] > 0]
        best = max(timed, key=lambda r: r["restored_records"], default=None)
        return {"mb_s": best["restore_mb_s"] if best else None, "records_s": best["restore_records_s"] if best else None}

    def as_record(self) -> dict:
        first = next((r for r in self.rows if r["wiped"]), {})
        return {"restore_version": self.version, "restore_shutdown": self.shutdown, "restore_failed": self.failed,
                "restore_wiped": any(r["wiped"] for r in self.rows),
                "restore_full_restores": sum(r["full_restore"] for r in self.rows),
                "restore_rate": {m: self.rate(m) for m in self.modes()},
                "restore_runs": [{k: v for k, v in r.items() if k not in LOG_LINES} for r in self.rows],
                "restore_wipe_line": first.get("wipe_line", ""), "restore_wipe_action": first.get("wipe_action", "")}

    def verdict(self) -> str:
        parts = []
        for mode in self.modes():
            rows = self.of(mode)
            big = rows[-1]
            what = (f"full restore ({big['restored_records']:,} records, {big['restore_s']:.1f} s at "
                    f"{big['changelog_mb']:g} MB)" if big["full_restore"] else
                    f"restored {big['restored_records']:,} of {big['store_records']:,} records")
            wiped = " after a wipe" if any(r["wiped"] for r in rows) else ""
            parts.append(f"{mode}: {what}{wiped}, processing again after {big['down_s']:.1f} s")
        how = "kill -9" if self.shutdown == "kill" else "clean shutdown"
        return f"{how}, Kafka Streams {self.version}: " + "; ".join(parts)

    def table(self):
        import pandas as pd
        return pd.DataFrame([{k: v for k, v in r.items() if k not in LOG_LINES} for r in self.rows])

    def explain(self) -> str:
        how = "killed (kill -9)" if self.shutdown == "kill" else "stopped cleanly (SIGTERM, `close()`)"
        lines = [f"Each app was {how} and, but for the standby mode, restarted at once (Kafka Streams "
                 f"{self.version}); a `StateRestoreListener` timed every restore."]
        eos = self.of("eos")
        if eos:
            lines.append(self._explain_eos(eos))
        for r in self.of("alos"):
            lines.append(self._explain_alos(r))
        for r in self.of("standby"):
            lines.append(f"\n**standby** ({self.standbys} standby replica(s)): {r['instance']} went down; "
                         f"{r['took_over']} took its task over and restored {r['restored_records']:,} of "
                         f"{r['store_records']:,} records in {r['restore_s']:.2f} s (its standby's lag before: "
                         f"{r['standby_lag']}). Processing again after {r['down_s']:.1f} s: the group first has "
                         "to notice the loss (session.timeout.ms = 6 s here)"
                         + (", then the survivor restored everything: it had no copy of the store."
                            if r["full_restore"] else ", a survivor's standby copy did the rest."))
        lines.extend(self.notes)
        return "\n".join(lines)

    def _explain_eos(self, eos: list[dict]) -> str:
        wiped = [r for r in eos if r["wiped"]]
        out = []
        if wiped:
            reasons = {r["wipe_reason"] for r in wiped}
            why = []
            if "rocksdb" in reasons:
                why.append("the store keeps its committed changelog offset inside RocksDB (KIP-1035) with a mark "
                           "saying whether it was closed, and a store left open by a crash may hold uncommitted "
                           "writes")
            if "checkpoint" in reasons:
                why.append("the store held data but no committed changelog offset (kept in a `.checkpoint` file, "
                           "which exactly-once writes only at a clean close, or with KIP-1035 inside RocksDB, "
                           "where a crash can leave it unflushed)")
            out.append(f"\n**exactly_once_v2**: at {len(wiped)} of {len(eos)} restarts Kafka Streams threw the "
                       f"local store away before restoring it: {'; or '.join(why)}. From this run's log:\n\n```\n"
                       + wiped[0]["wipe_line"] + ("\n" + wiped[0]["wipe_action"] if wiped[0]["wipe_action"] else "")
                       + "\n```\n")
        elif self.shutdown == "kill":
            out.append(f"\n**exactly_once_v2**: Kafka Streams {self.version} did **not** wipe the store after the "
                       "kill -9 in this run (no wipe line in its log).")
        else:
            out.append("\n**exactly_once_v2**: the clean close left the store's offsets behind; nothing was wiped.")
        trusted = [r for r in eos if not r["wiped"] and r["checkpoint_file"] and (r["restore_from"] or 0) > 0]
        if self.shutdown == "kill" and trusted:
            out.append(f"A `.checkpoint` file was there after {len(trusted)} of the crashes: the state updater "
                       "writes one when a restore completes and, under exactly-once, nothing removed it once the "
                       "task ran, so the restart trusted it and replayed only the records since, instead of "
                       "wiping a store that may hold writes of an aborted transaction (KAFKA-20685, apache/kafka "
                       "PR #22548, fixed on the 4.2 branch; the 3.8 to 4.2 releases have it, and 4.3's stores, "
                       "which keep their own offsets under KIP-1035, do not).")
        for r in eos:
            out.append(f"- {r['changelog_mb']:g} MB ({r['store_records']:,} records): restored "
                       f"{r['restored_records']:,} from offset {r['restore_from']} in {r['restore_s']:.2f} s"
                       + (f" ({r['restore_mb_s']:g} MB/s, {r['restore_records_s']:,} records/s)"
                          if r["restore_mb_s"] else "")
                       + f"; processing again {r['down_s']:.1f} s after the shutdown.")
        rate = self.rate("eos")
        if rate["mb_s"] and any(r["full_restore"] for r in eos):
            out.append(f"\nAt {rate['mb_s']:g} MB/s, a 50 GB changelog would take "
                       f"{50 * 1024 / rate['mb_s'] / 60:.0f} minutes to restore: an extrapolation of this run's "
                       "rate, measured on a loopback network with the broker's log in the page cache; real "
                       "networks and disks are slower.")
        return "\n".join(out)

    def _explain_alos(self, r: dict) -> str:
        head = (f"\n**at_least_once**: restored {r['restored_records']:,} of {r['store_records']:,} records (from "
                f"offset {r['restore_from']}) in {r['restore_s']:.2f} s. ")
        if self.shutdown == "clean":
            return head + "The clean close wrote the store's offsets: nothing, or nearly nothing, to replay."
        if r["checkpoint_file"]:
            return head + (f"The `.checkpoint` file is written at a commit once {CHECKPOINT_EVERY:,} changelog "
                           "records have passed since the last one, and at a clean close; under at-least-once "
                           "the store is kept and only the tail after the checkpoint is replayed.")
        return head + ("There is no `.checkpoint` file in this version: the store keeps its changelog offset inside "
                       "RocksDB (KIP-1035), and Kafka Streams turns RocksDB's write-ahead log off, so after a "
                       "kill -9 only what RocksDB had flushed to disk (a memtable is flushed when full, 16 MB by "
                       "default) survives; the store is kept under at-least-once and the tail after that flush is "
                       "replayed.")

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        colours = {"eos": "#d62728", "alos": "#1f77b4", "standby": "#2ca02c"}
        for mode in self.modes():
            rows = self.of(mode)
            x = [r["changelog_mb"] for r in rows]
            fig.add_scatter(x=x, y=[r["restore_s"] for r in rows], mode="lines+markers", name=f"{mode}: restore",
                            line=dict(color=colours[mode]), marker=dict(size=10),
                            text=[f"{r['restored_records']:,} records restored" for r in rows])
            fig.add_scatter(x=x, y=[r["down_s"] for r in rows], mode="lines+markers",
                            name=f"{mode}: shutdown → processing again",
                            line=dict(color=colours[mode], dash="dot"), marker=dict(symbol="circle-open", size=10))
        how = "kill -9" if self.shutdown == "kill" else "clean shutdown"
        fig.update_layout(title=f"Restore time against changelog size ({how}, Kafka Streams {self.version})",
                          xaxis_title="changelog size (MB)", yaxis_title="seconds", template="plotly_white",
                          height=400)
        return fig
