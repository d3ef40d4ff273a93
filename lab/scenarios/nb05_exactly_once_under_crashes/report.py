"""What a lesson of chapter 05 shows of a run: a Crash per crash run and a Failing per handler, production-error or
schema run (summary, why, outcome), and EosCrashResult: verdict, tables, figures, the Spark audit, the broker's, the
markers' and the app's lines (05a, the crashes), the handler, production-error and schema tables (05b to 05d), each
lesson's Predict answer and the recorded fields. A lesson's result holds only its own runs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...toolbox import Result, Timeline, grep
from ...record.evidence import short_line
from ...toolbox.markers import describe
from ...record.history import History
from .answers import CARRIED_ON, IN_FLIGHT
from .streams_app import EPOCH_LINE, GUARANTEES, SHORT, WIPE_LINE

# What the broker's transaction markers say about a crash run (lab.toolbox.markers.around).
MARKER_COUNTS = ("markers", "commit_markers", "abort_markers", "commits_before", "aborts_after", "aborted_by_markers",
                 "first_abort_after_s")
KINDS = ["duplicate", "lost", "aborted_read", "stale_value"]   # what the Spark audit checks


@dataclass
class Crash:
    """One crash point x guarantee run."""
    label: str
    point: str
    guarantee: str
    version: str
    app_id: str
    history: History
    topics: list
    m: dict
    log: object
    timeline: Timeline
    audit: object = None
    markers: list = field(default_factory=list)   # the broker's COMMIT / ABORT markers on the output topic

    @property
    def anomalies(self) -> int:
        return self.m["duplicates"] + self.m["lost"] + self.m["overcount"] + self.m["undercount"]

    def summary(self) -> dict:
        m = self.m
        keep = ("crashed", "crash_t_s", "produced", "outputs", "duplicates", "lost", "wrong_values", "overcount",
                "undercount", "aborted_visible", "restored", "restore_s", "downtime_s", "state_wiped", "commits",
                "producer_ids", *MARKER_COUNTS)
        return {"crash_point": self.point, "guarantee": self.guarantee, "version": self.version,
                **{k: m.get(k) for k in keep},
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}

    def why(self) -> str:
        m, g = self.m, self.guarantee
        if not m["crashed"]:
            if self.point == "none":
                return (f"no crash (the control): {m['outputs']} outputs for {m['produced']} inputs, "
                        f"{m['duplicates']} duplicate(s), {m['lost']} lost, counts off by {m['overcount'] + m['undercount']}.")
            return (f"the app never reached its crash point ({self.point} at record N): "
                    + ("no commit covered record N while input still flowed (the next commit came with the last "
                       "records): give more RECORDS or a shorter COMMIT_INTERVAL_MS. " if self.point == "after_commit"
                       else "fewer records than CRASH_AT, or no commit before the input ended? ")
                    + f"{m['duplicates']} duplicate(s), {m['lost']} lost.")
        c = m["crash"] or {}
        at = f"halted at {self.point} ({c.get('processed', '?')} processed, {c.get('acked', '?')} acked)"
        if g == "exactly_once_v2":
            base = (f"{at}; the restart fenced the killed producer and its open transaction was aborted: "
                    f"read_uncommitted saw {m['aborted_visible']} aborted record(s), read_committed "
                    f"{m['duplicates']} duplicate(s), {m['lost']} lost, counts off by {m['overcount'] + m['undercount']}")
            if m.get("aborts_after") is not None:
                base += (f"; the broker wrote {m['aborts_after']} ABORT marker(s) for producer "
                         f"{', '.join(map(str, m['producer_ids']))} {m['first_abort_after_s']} s after the halt, "
                         f"closing {m['aborted_by_markers']} record(s)")
            return base + (" (the state was wiped and restored from the changelog: "
                           f"{m['restored']} records in {m['restore_s']} s)." if m["state_wiped"] else ".")
        if m["duplicates"]:
            return (f"{at}; the offsets of the records processed since the last commit were not committed, so the "
                    f"restart processed them again: {m['duplicates']} duplicate output(s), and their increments "
                    f"were already in the changelog, so counts over-count by {m['overcount']}.")
        return (f"{at}; nothing was in flight since the last commit, so nothing was redone: 0 duplicates"
                + (", counts exact." if not m["overcount"] else f", yet counts over-count by {m['overcount']}."))


@dataclass
class Failing:
    """One handler, production-error or schema-change run. `poison`: the input its app cannot take (for a
    production-error run: the input whose output the broker refuses); `aside`: where a handler keeps it."""
    label: str
    app_id: str
    version: str
    history: History
    topics: list
    m: dict
    logs: dict
    timeline: Timeline
    poison: str | None = None
    audit: object = None
    aside: str = "the poison record is in the dead-letter topic"

    @property
    def outcome(self) -> str:
        m = self.m
        if m["uncaught"] >= 2 and "REPLACE_THREAD" in m["responses"]:
            return "crash loop (threads replaced)"
        if m["deaths"] == 1 and m.get("carried_on"):   # restarted, it got every input out without failing again
            return CARRIED_ON
        if m["deaths"]:
            return "app stopped" + (" (restarted, died again)" if m["deaths"] > 1 else "")
        if m["lost"]:   # what is missing from the output may be in a dead-letter topic
            kept = {d["id"] for d in m.get("dead_letters", ())}
            in_dlq = bool(kept) and set(m.get("lost_all", ())) <= kept
            return f"clean: {self.aside}" if in_dlq else "records dropped"
        return "clean"

    def summary(self) -> dict:
        keep = ("version", "produced", "outputs", "duplicates", "lost", "lost_ids", "wrong_values", "overcount",
                "aborted_visible", "uncaught", "deaths", "restarts", "failures_per_min", "dropped_records",
                "migrated", "errors", "wrappers", "watched_s", "guarantee", "output_bytes", "refused", "lost_keys")
        return {"outcome": self.outcome, "poison": self.poison, "dead_letters": self.m.get("dead_letters"),
                "poison_lost": self.poison is not None and self.poison in self.m.get("lost_all", ()),
                "carried_on": self.m.get("carried_on"),
                **{k: self.m[k] for k in keep},
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}


@dataclass
class EosCrashResult(Result):
    crashes: dict = field(default_factory=dict)     # "point · EOS v2" -> Crash
    handlers: dict = field(default_factory=dict)    # handler -> Failing
    refused: dict = field(default_factory=dict)     # production exception handler -> Failing
    schema: dict = field(default_factory=dict)      # mode -> Failing
    bootstrap: str = ""
    broker_log: object = None
    peak_rss_mb: dict = field(default_factory=dict)   # "apps" (the Streams JVMs, at one instant), "brokers"
    transaction_version: dict | None = None   # 05a: the finalized level, each run's commits (crash_points)
    title = "Crashes, restarts, commits, aborted transactions"

    @property
    def failed(self) -> bool:
        """Something went wrong that a user would notice: a duplicate, a lost record, a wrong count, an app
        that stopped or loops."""
        return (any(c.anomalies for c in self.crashes.values())
                or any(not f.outcome.startswith("clean") for f in self.failing()))

    def failing(self) -> list:
        """Every handler, production-error and schema run, in the lessons' order."""
        return [*self.handlers.values(), *self.schema.values(), *self.refused.values()]

    def eos(self) -> dict:
        return {k: c for k, c in self.crashes.items() if c.guarantee == "exactly_once_v2"}

    def verdict(self) -> str:
        parts = []
        for g in GUARANTEES:
            runs = [c for c in self.crashes.values() if c.guarantee == g]
            if runs:
                crashed = sum(c.m["crashed"] for c in runs)
                parts.append(f"{SHORT[g]}: {crashed} crash(es) in {len(runs)} run(s), "
                             f"{sum(c.m['duplicates'] for c in runs)} duplicate(s), {sum(c.m['lost'] for c in runs)} lost, "
                             f"counts off by {sum(c.m['overcount'] + c.m['undercount'] for c in runs)}, "
                             f"{sum(c.m['aborted_visible'] for c in runs)} aborted record(s) seen by read_uncommitted")
        parts += [f"{f.label}: {f.outcome}" for f in self.failing()]
        return "; ".join(parts) or "nothing ran"

    def explain(self) -> str:
        return "\n".join(f"- **{k}**: {c.why()}" for k, c in self.crashes.items())

    def table(self):
        """Crash point x guarantee: duplicates, lost, wrong counts, aborted records, restore."""
        import pandas as pd
        rows = [{"crash point": c.point, "guarantee": c.guarantee, "crashed": c.m["crashed"],
                 "duplicates": c.m["duplicates"], "lost": c.m["lost"], "overcount": c.m["overcount"],
                 "aborted seen by read_uncommitted": c.m["aborted_visible"],
                 "COMMIT markers": c.m.get("commit_markers"), "ABORT markers after crash": c.m.get("aborts_after"),
                 "audit (dup/lost/stale)": _audit_cell(c.audit), "restored records": c.m["restored"],
                 "restore (s)": c.m["restore_s"], "down (s)": c.m["downtime_s"], "state wiped": c.m["state_wiped"]}
                for c in self.crashes.values()]
        return pd.DataFrame(rows)

    def handler_table(self, which: str = "handlers"):
        """One row per run of a lesson: "handlers", "refused" (the production errors) or "schema"."""
        import pandas as pd
        runs = getattr(self, which)   # the field of that lesson's runs
        rows = [{"run": k, "Kafka Streams": f.version, "outcome": f.outcome, "outputs": f.m["outputs"],
                 "of inputs": f.m["produced"], "lost (not in output)": f.m["lost"],
                 "dropped-records": f.m["dropped_records"], "uncaught": f.m["uncaught"], "app deaths": f.m["deaths"],
                 "failures / min": f.m["failures_per_min"], "migrated on read": f.m["migrated"],
                 "audit (dup/lost)": _audit_cell(f.audit),
                 "kept aside": ", ".join(f"{d['id']} ({(d['exception'] or '').rsplit('.', 1)[-1]})"
                                         for d in f.m.get("dead_letters", [])) or None,
                 **({"guarantee": f.m["guarantee"], "duplicates": f.m["duplicates"],
                     "output bytes": f.m.get("output_bytes")} if which == "refused" else {})}
                for k, f in runs.items()]
        return pd.DataFrame(rows)

    def refused_evidence(self) -> str:
        """Per production-error run: what the handler was told and answered, and what the thread died of."""
        lines = []
        for name, f in self.refused.items():
            m = f.m
            told = "; ".join(f"{r['error'].split(':')[0]} for a {r['bytes']:,}-byte record"
                             f"{' (' + r['id'].rsplit('-', 1)[-1] + ')' if r['id'] else ' (no id: not an output)'}"
                             f" → {r['response']}" for r in m.get("refused", [])[:3])
            died = "; ".join(m["wrappers"]) or "; ".join(m["errors"])
            size = f"{m['output_bytes']:,}" if m.get("output_bytes") else "?"   # never reached: no size
            lines.append(f"- **{name}** (output of {size} bytes): "
                         + (f"the handler was asked: {told}. " if told
                            else "Kafka's default handler, no line of ours. ")
                         + (f"The thread died of: {died}." if m["uncaught"] else "No thread died."))
        return "\n".join(lines) or "No production-error run in this run."

    def figure(self, label: str | None = None):
        if label is None:
            label = next((k for k, c in self.crashes.items() if c.m["crashed"]), next(iter(self.crashes), None))
        runs = {r.label: r for r in [*self.crashes.values(), *self.failing()]}
        run = runs.get(label) or self.handlers.get(label) or self.refused.get(label) or self.schema.get(label)
        if run is None:
            return self.timeline.figure(self.title)
        return run.timeline.figure(f"{run.label}: {getattr(run, 'outcome', None) or run.why()[:90]}")

    def broker_lines(self, label: str | None = None, limit: int = 6) -> list[str]:
        """The broker's transaction coordinator lines about a run's transactional ids (aborts, epochs)."""
        if self.broker_log is None:
            return []
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return []
        return [short_line(line) for _, line in grep(self.broker_log, re.escape(run.app_id))
                if re.search(r"TransactionCoordinator|[Rr]ollback", line)][-limit:]

    def marker_lines(self, label: str, before: int = 2) -> list[str]:
        """The killed producer's last COMMIT markers before the halt and every marker after it."""
        run = self.crashes[label]
        if not run.markers:
            return ["(no markers read: an external cluster, or no transaction)"]
        at = run.m["crash"]["ts"] if run.m["crashed"] else float("inf")
        mine = sorted((mk for mk in run.markers if mk["producer_id"] in run.m["producer_ids"]),
                      key=lambda mk: mk["timestamp"])
        shown = [mk for mk in mine if mk["timestamp"] < at][-before:] + [mk for mk in mine if mk["timestamp"] >= at]
        return [f"{mk['timestamp'] - at:+.2f} s {describe(mk)}" if at != float("inf") else describe(mk)
                for mk in shown]

    def streams_lines(self, label: str | None = None, limit: int = 8) -> list[str]:
        """Kafka Streams' own lines of the restart: the fencing epoch and the wiped state."""
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return []
        return [short_line(line) for _, line in grep(run.log, f"{EPOCH_LINE}|{WIPE_LINE}|lab: start")][:limit]

    def evidence(self, label: str | None = None) -> str:
        """The broker's and the restarted app's own lines about the first crashed exactly-once run."""
        run = self.crashes.get(label) if label else next((c for c in self.eos().values() if c.m["crashed"]), None)
        if run is None:
            return "No exactly-once run crashed in this run (the control): no fencing, no aborted transaction to show."
        broker = self.broker_lines(run.label) or ["(no broker log: an external cluster)"]
        return (f"{run.label}, the broker's transaction coordinator:\n" + "\n".join(broker)
                + "\n\nthe transaction markers it wrote on the output topic, around the halt:\n"
                + "\n".join(self.marker_lines(run.label))
                + "\n\nthe app, first start and restart:\n" + "\n".join(self.streams_lines(run.label)))

    def audit(self) -> dict:
        """The Spark audit of every run's committed (and uncommitted) output against the generator's truth."""
        from concurrent.futures import ThreadPoolExecutor

        from ...audit import audit
        from ...audit.spark import spark_session
        jobs = {}
        for c in self.crashes.values():
            clean = c.guarantee == "exactly_once_v2" or c.point not in IN_FLIGHT   # the mechanism's prediction
            jobs[c.label] = (c, dict(expect="clean" if clean else "anomalies", kinds=KINDS,
                                     aborted_reader="read_committed"))
        for f in self.failing():
            clean = f.outcome in ("clean", CARRIED_ON) and not f.m.get("duplicates")
            jobs[f.label] = (f, dict(expect="clean" if clean else "anomalies",
                                     kinds=["duplicate", "lost"], allow_empty=True))
        if not jobs:
            return {}
        spark = spark_session()   # one session, several small audits at once: each is mostly waiting on Kafka
        with ThreadPoolExecutor(4) as pool:
            futures = {k: pool.submit(audit, run.history, bootstrap=self.bootstrap, output_topic=run.topics[1],
                                      spark=spark, **kw) for k, (run, kw) in jobs.items()}
            for k, future in futures.items():
                jobs[k][0].audit = future.result()
        return {k: run.audit for k, (run, _) in jobs.items()}

    def record_fields(self) -> dict:
        eos = list(self.eos().values())
        alos = [c for c in self.crashes.values() if c.guarantee == "at_least_once"]
        return {"streams_version": self.params.get("streams_version"),
                "crashes": {k: c.summary() for k, c in self.crashes.items()},
                "eos_runs": len(eos), "eos_crashed": sum(c.m["crashed"] for c in eos),
                "eos_duplicates": sum(c.m["duplicates"] for c in eos), "eos_lost": sum(c.m["lost"] for c in eos),
                "eos_count_errors": sum(c.m["overcount"] + c.m["undercount"] for c in eos),
                "eos_aborted_visible": sum(c.m["aborted_visible"] for c in eos),
                "eos_aborts_after": _total(c.m.get("aborts_after") for c in eos if c.m["crashed"]),
                "alos_markers": _total(c.m.get("markers") for c in alos),
                "alos_duplicates": {c.point: c.m["duplicates"] for c in alos},
                "alos_overcount": {c.point: c.m["overcount"] for c in alos},
                "handlers": {k: f.summary() for k, f in self.handlers.items()},
                "refused": {k: f.summary() for k, f in self.refused.items()},
                "schema": {k: f.summary() for k, f in self.schema.items()},
                "peak_rss_mb": self.peak_rss_mb, "transaction_version": self.transaction_version}


def _total(values):
    """A sum over runs, None when the markers were not read (an external cluster)."""
    values = list(values)
    return None if None in values else sum(values)


def _audit_cell(verdict) -> str:
    if verdict is None:
        return "not audited"
    c = verdict.counts
    return "/".join(str(c.get(k)) for k in ("duplicate", "lost", "stale_value") if k in c)
