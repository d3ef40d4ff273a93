"""What lesson 06d measured (a downstream reader of a changelog, its audit
verdict by Spark): the Spark audit (lost / stale_value / duplicate against the generator's history) of what each
downstream reader saw and of a late re-read, one row per variant, the broker's cleaner report and Kafka Streams'
unnamed-topic warning. Outcome is the lesson's outcome (lab.toolbox.lesson); changelog_api_report presents it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...toolbox import grep
from ...toolbox.admin import topic_offsets
from ...toolbox.consume import read_to_end
from ...record.history import History
from .changelog_api_report import OutcomeReport

AUDITED = ["duplicate", "lost", "stale_value"]
# Who reads what: the downstream consumer live, a late reader (the same topic from the start, at the end),
# and a consumer of the changelog version 2 really wrote (internal only)
LIVE, LATE, NEW = "downstream reader", "late re-reader", "v2 changelog reader"
VIEWS = (LIVE, LATE, NEW)


@dataclass
class Outcome(OutcomeReport):
    rows: list[dict]                  # one per variant
    views: list[dict]                 # one per reader of a topic, with the audit's counts
    curves: dict                      # name -> [(t_s, records so far)]
    deploy_t: float | None            # when version 2 reached RUNNING (seconds since the run began)
    evidence: dict = field(default_factory=dict)   # stores, changelogs, topologies (per variant), cleaner_lines
    audits: dict = field(default_factory=dict)     # "variant/view" -> lab.audit Verdict

    @classmethod
    def measure(cls, lab, p: dict, variants: dict, readers: dict, history: History, waited: float,
                spark) -> "Outcome":
        from ...toolbox.streaming import audit_many
        from ...audit.spark import sized_session
        admin = lab.cluster.admin()
        partitions = p["changelog_partitions"]
        produced = history.rows("produced")
        spark = sized_session(spark, len(produced) + sum(len(reader.rows) for reader in readers.values()))
        jobs, views = {}, []
        for (name, view), reader in readers.items():
            # the live readers: what they really read; the changelog nobody reads is expected to be wrong
            expect = "clean" if variants[name].output and view == LIVE else "anomalies"
            jobs[f"{name}/{view}"] = dict(history=history, output_df=reader.frame(spark), spark=spark,
                                          expect=expect, kinds=AUDITED)
            views.append({"variant": name, "view": view, "topic": reader.topic, "read": len(reader.rows)})
        for name, v in variants.items():   # a late reader: the downstream topic read from the start, now
            jobs[f"{name}/{LATE}"] = dict(history=history, bootstrap=lab.bootstrap, output_topic=v.downstream_topic,
                                          expect="clean" if v.output else "anomalies", kinds=AUDITED)
            views.append({"variant": name, "view": LATE, "topic": v.downstream_topic,
                          "read": _records(lab, v.downstream_topic)})
        with lab.step("the Spark audit of what each reader saw", lane="audit"):
            audits = audit_many(jobs)
        for view in views:
            verdict = audits[f"{view['variant']}/{view['view']}"]
            view["written"] = sum(topic_offsets(admin, view["topic"], partitions).values())
            view.update({k: verdict.counts.get(k) for k in AUDITED})
        views.sort(key=lambda x: (list(variants).index(x["variant"]), VIEWS.index(x["view"])))
        rows = []
        for name, v in variants.items():
            live, late = (next(x for x in views if x["variant"] == name and x["view"] == w) for w in (LIVE, LATE))
            new = next((x for x in views if x["variant"] == name and x["view"] == NEW), None)
            compactable = v.output is None
            rows.append({
                "variant": name, "change": p["changelog_change"], "downstream_topic": v.downstream_topic,
                "store_v1": ", ".join(v.stores[1]), "store_v2": ", ".join(v.stores[2]),
                "store_renamed": v.stores[1] != v.stores[2],
                "changelog_v1": v.changelogs[1], "changelog_v2": v.changelogs[2],
                "inputs": len(produced), "inputs_v1": v.inputs_v1, "inputs_v2": len(produced) - v.inputs_v1,
                "downstream_written": live["written"],
                "live_read": live["read"], "live_lost": live["lost"], "live_stale": live["stale_value"],
                "live_duplicate": live["duplicate"],
                "late_read": late["read"], "late_lost": late["lost"], "late_stale": late["stale_value"],
                "late_duplicate": late["duplicate"],
                # what the late re-reader misses beyond the live one: intermediate values compacted away
                "late_missed_extra": (late["lost"] or 0) - (live["lost"] or 0),
                "compacted_away": late["written"] - late["read"] if compactable else None,
                "cleaner_ran": late["read"] < late["written"] if compactable else None,
                "cleaner_wait_s": round(waited, 1) if compactable else None,
                "v2_changelog_written": new["written"] if new else None,
                "v2_changelog_stale": new["stale_value"] if new else None,
                "missed": bool(live["lost"] or live["stale_value"] or late["lost"] or late["stale_value"]),
            })
        evidence = {"stores": {n: {f"v{k}": s for k, s in v.stores.items()} for n, v in variants.items()},
                    "changelogs": {n: {f"v{k}": t for k, t in v.changelogs.items()} for n, v in variants.items()},
                    "topologies": {n: {f"v{k}": d[:1500] for k, d in v.descriptions.items()}
                                   for n, v in variants.items()},
                    "cleaner_lines": _cleaner_lines(lab, [v.changelogs[1] for v in variants.values()
                                                          if v.output is None])[:6],
                    "unnamed_warning": {n: _unnamed_warning(v.programs[2]) for n, v in variants.items()}}
        for row in rows:
            lab.event(f"changelog-{row['variant']}", "downstream missed updates" if row["missed"] else "clean",
                      tone="failure" if row["missed"] else "mitigation",
                      detail=f"live reader lost {row['live_lost']}, late reader lost {row['late_lost']}")
        curves = {"input produced": _cumulative(lab, [r["ts"] for r in produced])}
        for (name, view), r in readers.items():
            curves[f"{name}: {view}"] = _cumulative(lab, [x["read_ts"] for x in r.rows])
        deploys = [v.running_at[2] for v in variants.values()]
        return cls(rows, views, curves, lab.elapsed(min(deploys)) if deploys else None, evidence, audits)

    @property
    def failed(self) -> bool:
        """The downstream reader missed updates (lost, or counts unlike the truth), measured by the audit."""
        return any(r["missed"] for r in self.rows)

    def by_variant(self) -> dict:
        return {r["variant"]: r for r in self.rows}

    def as_record(self) -> dict:
        return {"changelog": self.by_variant(),
                "changelog_views": {f"{v['variant']}/{v['view']}": v for v in self.views},
                "changelog_evidence": {k: self.evidence.get(k) for k in ("stores", "changelogs", "cleaner_lines",
                                                                          "unnamed_warning")}}


def _records(lab, topic: str) -> int:
    return len(read_to_end(lab.bootstrap, topic))


def _cleaner_lines(lab, topics: list) -> list[str]:
    """The broker's own report of each cleaning of these topics, one line each: "Log cleaner thread 0 cleaned
    log <topic>-0 (dirty section = [0, 26]): Start size: 0.0 MB (26 messages) -> End size: 0.0 MB (5 messages)".
    None from a cluster the lab does not run."""
    try:
        text = lab.cluster.log_path().read_text(errors="replace").splitlines()
    except Exception:  # an external cluster: no broker log to quote
        return []
    found = []
    for i, line in enumerate(text):
        if "cleaned log" in line and any(f"cleaned log {t}-" in line for t in topics):
            sizes = [x.strip() for x in text[i + 1:i + 9] if x.strip().startswith(("Start size", "End size"))]
            found.append(" -> ".join([line.strip(), *sizes]) if sizes else line.strip())
    return found


def _unnamed_warning(program) -> str | None:
    """Kafka Streams' own warning (4.1+) about internal topics it named itself."""
    lines = grep(program.log_path, r"has not been named")
    return lines[0][1].split("] ", 1)[-1].strip()[:600] if lines else None


def _cumulative(lab, times: list) -> list:
    return [(lab.elapsed(t), i + 1) for i, t in enumerate(sorted(times))]
