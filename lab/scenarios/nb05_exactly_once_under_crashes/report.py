"""What notebook 05 shows of a run: a Crash per crash run and a Failing per handler, production-error or schema
run (summary, why, outcome), and EosCrashResult: verdict, tables, figures, the Spark audit, the broker's, the
markers' and the app's lines (lesson 1, the crashes), the handler, production-error and schema tables (lessons 2
to 4), each lesson's Predict answer, the closing note, the exercises and the recorded fields.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import LabError
from ...experiment import Result, Timeline, grep
from ...experiment.result import Exercise, called, expect, number
from ...experiment.evidence import short_line
from ...experiment.markers import describe
from ...history import History
from .streams_app import CRASH_POINTS, EPOCH_LINE, GUARANTEES, HANDLERS, SCHEMA_MODES, SHORT, WIPE_LINE

# What the broker's transaction markers say about a crash run (lab.experiment.markers.around).
MARKER_COUNTS = ("markers", "commit_markers", "abort_markers", "commits_before", "aborts_after", "aborted_by_markers",
                 "first_abort_after_s")
KINDS = ["duplicate", "lost", "aborted_read", "stale_value"]   # what the Spark audit checks
# Crash points where records processed since the last commit are in flight, so at-least-once redoes them.
IN_FLIGHT = ("before_read", "during_processing", "after_send_before_commit")


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
                "migrated", "errors", "wrappers", "watched_s", "guarantee", "output_bytes", "refused")
        return {"outcome": self.outcome, "poison": self.poison, "dead_letters": self.m.get("dead_letters"),
                "poison_lost": self.poison is not None and self.poison in self.m.get("lost_all", ()),
                **{k: self.m[k] for k in keep},
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}


OUTPUT_ANSWERS = ("every input exactly once", "some inputs twice", "some inputs missing")   # the Predict question


# What becomes of an app and its poison record (the handler and schema lessons' Predict questions), by Failing.outcome.
FATES = ("it stops (and again after each restart)", "it loops: the same record fails again and again",
         "it goes on without the record", "it goes on, and the record is kept aside",
         "nothing is lost: every input comes out")


def fate(outcome: str) -> str:
    """A Failing.outcome in the Predict question's words."""
    for start, answer in (("app stopped", FATES[0]), ("crash loop", FATES[1]), ("records dropped", FATES[2]),
                          ("clean: ", FATES[3]), ("clean", FATES[4])):
        if outcome.startswith(start):
            return answer
    raise ValueError(outcome)


def asked(runs: dict) -> str | None:
    """The run the handler, production-error and schema questions are about: Kafka's default (shutdown_client;
    fail for a production error), if it ran."""
    return next((k for k in ("shutdown_client", "fail") if k in runs), next(iter(runs), None))


def asked_point(points: list) -> str:
    """The crash point the Predict question is about: after the send, before the commit, if it runs."""
    return "after_send_before_commit" if "after_send_before_commit" in points else points[0]


@dataclass
class EosCrashResult(Result):
    crashes: dict = field(default_factory=dict)     # "point · EOS v2" -> Crash
    handlers: dict = field(default_factory=dict)    # handler -> Failing
    refused: dict = field(default_factory=dict)     # production exception handler -> Failing
    schema: dict = field(default_factory=dict)      # mode -> Failing
    bootstrap: str = ""
    broker_log: object = None
    peak_rss_mb: dict = field(default_factory=dict)   # "apps" (the Streams JVMs, at one instant), "brokers"
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

    def lesson_runs(self, lesson: str) -> dict:
        return {"handlers": self.handlers, "refused": self.refused, "schema": self.schema}[lesson]

    def measured_answer(self, lesson: str | None = None) -> str | None:
        """This run's answer to a lesson's Predict question (default: the first lesson that ran). Crashes: what the
        read_committed output held after the exactly-once run at the asked crash point; handlers and schema: what
        became of the asked run's app."""
        lesson = lesson or next((name for name, runs in (("crashes", self.crashes), ("handlers", self.handlers),
                                                         ("schema", self.schema), ("refused", self.refused))
                                 if runs), None)
        if lesson in ("handlers", "refused", "schema"):
            runs = self.lesson_runs(lesson)
            return fate(runs[asked(runs)].outcome) if runs else None
        point = asked_point(self.params["crash_points"]) if self.params["crash_points"] else None
        run = next((c for c in self.eos().values() if c.point == point), None)
        if run is None:
            return None
        return (OUTPUT_ANSWERS[1] if run.m["duplicates"] else OUTPUT_ANSWERS[2] if run.m["lost"]
                else OUTPUT_ANSWERS[0])

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

    def closing(self) -> str:
        """The notebook's closing note: the figures this run measured, one line per part."""
        lines = []
        for g in GUARANTEES:
            runs = [c for c in self.crashes.values() if c.guarantee == g and c.m["crashed"]]
            if not runs:
                continue
            points = ", ".join(f"{c.point} ({c.m['duplicates']} dup, {c.m['aborted_visible']} aborted)" for c in runs)
            lines.append(f"- **{g}**, {len(runs)} crash(es): {sum(c.m['duplicates'] for c in runs)} duplicate(s), "
                         f"{sum(c.m['lost'] for c in runs)} lost, counts off by "
                         f"{sum(c.m['overcount'] + c.m['undercount'] for c in runs)}; per point: {points}.")
        restores = [c.m["restore_s"] for c in self.crashes.values() if c.m["crashed"] and c.m["restore_s"] is not None]
        downs = [c.m["downtime_s"] for c in self.crashes.values() if c.m["downtime_s"] is not None]
        if downs:
            lines.append(f"- A restart took {min(downs)}-{max(downs)} s to run again, of which the store restore "
                         f"{min(restores, default=0)}-{max(restores, default=0)} s.")
        for f in self.failing():
            m = f.m
            rate = f", {m['failures_per_min']} failures/min" if m["failures_per_min"] else ""
            lines.append(f"- **{f.label}** (Kafka Streams {f.version}): {f.outcome}; {m['outputs']} of {m['produced']} "
                         f"inputs out, {m['lost']} lost, {m['uncaught']} uncaught exception(s), {m['deaths']} app "
                         f"death(s){rate}, dropped-records {m['dropped_records']}"
                         + (f", {m['migrated']} key(s) migrated on read" if m["migrated"] else "") + ".")
        return "\n".join(lines) or "Nothing ran."

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
        runs = self.lesson_runs(which)
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
        from ...spark import spark_session
        jobs = {}
        for c in self.crashes.values():
            clean = c.guarantee == "exactly_once_v2" or c.point not in IN_FLIGHT   # the mechanism's prediction
            jobs[c.label] = (c, dict(expect="clean" if clean else "anomalies", kinds=KINDS,
                                     aborted_reader="read_committed"))
        for f in self.failing():
            jobs[f.label] = (f, dict(expect="clean" if f.outcome == "clean" else "anomalies",
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
        return {"streams_version": self.params["streams_version"],
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
                "peak_rss_mb": self.peak_rss_mb}


def _total(values):
    """A sum over runs, None when the markers were not read (an external cluster)."""
    values = list(values)
    return None if None in values else sum(values)


def _audit_cell(verdict) -> str:
    if verdict is None:
        return "not audited"
    c = verdict.counts
    return "/".join(str(c.get(k)) for k in ("duplicate", "lost", "stale_value") if k in c)


# ---------------------------------------------------------------- the exercises

# where work is in flight when the app halts: processed (and sent) since the last commit, its offsets not committed
IN_FLIGHT = ("before_read", "during_processing", "after_send_before_commit")


def duplicates_after_crash(guarantee, point):
    # at-least-once redoes what was processed since the last commit; exactly-once aborts it instead
    return guarantee == "at_least_once" and point in IN_FLIGHT


def _all_fine(guarantee, point):
    """The post's reasoning, untested: "we're fine" at every point."""
    return False


def _check_duplicates_after_crash(result: EosCrashResult, fn) -> None:
    if not result.crashes:
        raise LabError("this lesson was not run in this run (CRASH_POINTS or GUARANTEES is empty): run it first.")
    measured = {(c.guarantee, c.point): bool(c.m["duplicates"]) for c in result.crashes.values()}
    rule = {(g, pt): duplicates_after_crash(g, pt) for g in GUARANTEES for pt in CRASH_POINTS}
    others = {k: truth for k, truth in rule.items() if k not in measured}
    for (guarantee, point), truth in {**measured, **others}.items():   # this run's rows first, then the others
        given = called(fn, f"duplicates_after_crash({guarantee!r}, {point!r})", guarantee, point)
        expect(isinstance(given, bool), f"duplicates_after_crash({guarantee!r}, {point!r}) returned {given!r}: "
                                        "return True or False")
        where = "in this run" if (guarantee, point) in measured else "by the mechanism"
        expect(given == truth, f"duplicates_after_crash({guarantee!r}, {point!r}) = {given}, but {where} it "
               + ("wrote duplicates" if truth else "wrote none") + ": was work in flight since the last commit "
               "when the app halted, and what does the guarantee do with it on restart?")


# What each handler or schema mode does with a record it cannot process: the mechanism, for answers not run here.
DOES = {"shutdown_client": "stops the app, and a restart meets the same record at the same offset again",
        "replace_thread": "starts a new thread, which meets the same record again: a crash loop",
        "continue": "goes on, and the record (or its update) is gone: only the dropped-records metric counts it",
        "deserialization": "skips an input that cannot be deserialized at all: it is not a poison record",
        "tolerant": None, "dead_letter": None}


def _judged(runs: dict, answer, right: str, kind: str, known: tuple) -> None:
    """The learner's choice among `known`: judged by what it did in this run when it ran, else by the mechanism."""
    if not runs:
        raise LabError(f"this lesson was not run in this run ({kind} is empty): add some of {', '.join(known)} and "
                       "run the lesson again")
    expect(isinstance(answer, str) and answer in known, f"answer one name of {kind}: {', '.join(known)}")
    if answer in runs:
        outcome = runs[answer].outcome
        print(f"Measured in this run: `{answer}` ended as: {outcome}.")
        expect(answer == right, f"in this run `{answer}` ended as: {outcome}; it {DOES[answer]}")
        expect(outcome.startswith("clean"), f"in this run `{answer}` ended as: {outcome}: see its row and why")
        return
    expect(answer == right, f"`{answer}` {DOES[answer]}")
    print(f"`{answer}` did not run in this run: add it to {kind} and run the lesson to see it measured.")


BATCH_HEADER = 61   # bytes of a record batch's header (format v2), before its records


def _refused_value_bytes(result: EosCrashResult) -> int:
    """The refused output's value in bytes, as the app made it, from any production-error run."""
    if not result.refused:
        raise LabError("this lesson was not run in this run (PRODUCTION_HANDLERS and PRODUCTION_COMPARE are empty): "
                       "give some of them and run the lesson again")
    sizes = [f.m["output_bytes"] for f in result.refused.values() if f.m.get("output_bytes")]
    if not sizes:
        raise LabError("no run of this lesson got as far as the large record: see the lesson's verdict")
    return max(sizes)


def _smallest_limit(result: EosCrashResult) -> int:
    """Exercise 4: a max.message.bytes just above one batch holding the refused record alone."""
    return _refused_value_bytes(result) + BATCH_HEADER + 40


def _check_smallest_limit(result: EosCrashResult, answer) -> None:
    value = _refused_value_bytes(result)
    number(answer, "a number of bytes")
    expect(answer > value, f"{answer:,.0f} bytes is not even the record's value ({value:,} bytes, the `output bytes` "
           "column): the broker would refuse it again")
    expect(answer >= value + BATCH_HEADER, "the broker checks the record batch, not the value: the value, its key, "
           "the record's own framing (a few bytes of lengths and deltas) and the batch's header (61 bytes)")
    expect(answer <= value + 1024, f"{answer:,.0f} bytes lets it through, but it is not near the smallest limit: "
           "what does one batch holding only this record weigh?")
    print(f"Try it: FIX_REFUSED = {{'output_max_bytes': {int(answer)}}} in the Mitigate step runs Kafka's default "
          "handler again with that limit.")


def _check_keep_aside(result: EosCrashResult, answer) -> None:
    _judged(result.handlers, answer, "dead_letter", "HANDLERS", HANDLERS)


def _check_carry_on(result: EosCrashResult, answer) -> None:
    _judged(result.schema, answer, "tolerant", "SCHEMA_MODES", SCHEMA_MODES)


EosCrashResult.exercises = {
    1: Exercise(
        check=_check_duplicates_after_crash,
        solution=lambda r: duplicates_after_crash,
        why="At-least-once sends each output as soon as its record is processed, and commits the input offsets "
            "only every `COMMIT_INTERVAL_MS`. When the app dies with work done since the last commit, those "
            "offsets were never committed: the restarted app reads the same records again and sends their outputs "
            "a second time. So duplicates come at the crash points where work is in flight since the last commit "
            "(before a read, while processing, after a send), not right after a commit (`after_commit`), nor "
            "without a crash. Exactly-once writes the outputs and the offsets in one transaction: the restart "
            "aborts the open one, and a `read_committed` reader never sees its outputs, at any point.",
        wrong=lambda r: _all_fine,
    ),
    2: Exercise(
        check=_check_keep_aside,
        solution=lambda r: "dead_letter",
        why="A poison record fails on every attempt, so every answer that tries it again fails again: "
            "`shutdown_client` stops the app, and a restart from outside meets the same record at the same offset; "
            "`replace_thread` starts a new thread that meets it too, a crash loop. `continue` (KIP-1033) goes on, but "
            "the record is gone, counted only by the dropped-records metric. `dead_letter` (KIP-1034, Kafka Streams "
            "4.2+) goes on and writes the record, with its exception, to a dead-letter topic, where someone can look "
            "at it and replay it. The handler table's `outcome` and `kept aside` columns show it measured.",
        wrong=lambda r: "continue",   # the app goes on: it looks like the fix, but the record is gone
    ),
    3: Exercise(
        check=_check_carry_on,
        solution=lambda r: "tolerant",
        why="Version 2's state is restored byte for byte from the changelog, in version 1's format, so the first "
            "`get()` of an old key fails, and it fails the same way on every attempt: like a poison record, but one "
            "per key. Handlers only choose how to fail: `shutdown_client` stops, `replace_thread` loops, and "
            "`continue` (KIP-1033) drops the record whose state cannot be read. Only a reader that understands "
            "version 1's format (`tolerant`: it reads the old format and rewrites it in the new one) carries on "
            "from the old counts. The schema table's `migrated on read` column counts the keys it converted.",
        wrong=lambda r: next((m for m, f in r.schema.items() if not f.outcome.startswith("clean")), "continue"),
    ),
    4: Exercise(
        check=_check_smallest_limit,
        solution=_smallest_limit,
        why="The broker compares `max.message.bytes` with the record batch it receives, after compression: the "
            "batch's header (61 bytes), then each record with its framing (a length, attributes, timestamp and "
            "offset deltas, the key's and the value's lengths: about a dozen bytes), its key and its value. The "
            "producer puts a record larger than `batch.size` in a batch of its own, and splits a refused batch of "
            "several records to try each alone; so the smallest limit that lets the record through is the value "
            "(the `output bytes` column) plus its key plus about 75 bytes. The solution rounds up a little.",
        wrong=_refused_value_bytes,   # the value alone: the batch around it is forgotten
    ),
}
