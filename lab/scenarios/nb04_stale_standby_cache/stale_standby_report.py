"""What a run of lesson 04 measured: each variant's role changes, round trips and committed output against the
generator's truth (pure functions of its history and logs), and the result around them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...cluster import parse_version
from ...toolbox import Result, Timeline, grep, lab_lines
from ...toolbox.predict import choice_table, named, which
from ...record.history import History

FIRST_AFFECTED, FIRST_FIXED = (2, 6, 0), (3, 4, 1)   # KAFKA-9501 recycling .. PR #13369
AFTER_READ_S = 2.0    # the worker polls its assignment every 100 ms: a role change is logged a little late
KINDS = ["stale_value", "duplicate", "lost"]          # what the Spark audit checks
# Kafka Streams' WARN when an app sets num.standby.replicas on the streams group protocol (KAFKA-19376, 4.1+)
STANDBY_SETTING_IGNORED = "Standby replicas are configured broker-side"


def is_affected(version: str) -> bool:
    """Whether this Kafka Streams version recycles tasks without clearing their caches."""
    return FIRST_AFFECTED <= parse_version(version) < FIRST_FIXED


# The Predict question: which of the versions that play the program serve a stale value. Its choices name versions,
# never whether a release carries a change: none, the releases from before PR #13369 (by release number), those
# after it, every one.
def _kafka_streams(versions) -> str:
    return "Kafka Streams " + " and ".join(versions)


def stale_label(stale, versions) -> str:
    """The versions of `stale` (a subset of `versions`, the versions asked about), named as the question names them."""
    every = {1: _kafka_streams(versions), 2: "both"}.get(len(versions), "every one of them")
    return named(stale, versions, _kafka_streams, every=every)


def stale_table(versions) -> tuple:
    """The question's choice table for these versions, each set distinct: none, those from before 3.4.1, those from
    3.4.1 on, every one."""
    before = [v for v in versions if parse_version(v) < FIRST_FIXED]
    since = [v for v in versions if v not in before]
    return choice_table((stale_label(stale, versions), stale) for stale in ([], before, since, versions))


def measured_answer(record: dict, p: dict) -> str:
    """This run's answer to the Predict question, from what it recorded: which of the versions that played the
    program with the run's cache setting (the run, and each of COMPARE_VERSIONS) served a stale value."""
    main = record.get("main") or {}
    runs = [(record["streams_version"], record["main_counts"]["stale_reads"])] + [
        (c["version"], c["stale_reads"]) for label, c in (record.get("compared") or {}).items()
        if label.startswith("version ") and c.get("caching") == main.get("caching", c.get("caching"))
        and c.get("protocol", "classic") == "classic"]   # the streams protocol's runs are not asked about
    versions, stale = list(dict.fromkeys(v for v, _ in runs)), {v for v, stale in runs if stale}
    return which(stale, stale_table(versions)) or stale_label(stale, versions)


# ------------------------------------------------------------------ what happened

def parse_assignments(logs: dict, toggles: list):
    """Role changes per (instance, task) from the workers' "assignment" lines and the stops: "none" when the task
    left an instance that kept running, "stopped" when the instance stopped (for every task it ever held: its cache
    went with the process)."""
    import pandas as pd
    snapshots = [{"ts": r["ts"], "instance": i, "roles": {**{t: "standby" for t in r["standby"]},
                                                         **{t: "active" for t in r["active"]}}}
                 for i, source in logs.items() for r in lab_lines(source, kind="assignment")]
    snapshots += [{"ts": t.get("done_ts", t["ts"]), "instance": t["instance"], "roles": None}
                  for t in toggles if t["action"] == "stop"]  # a stopped instance holds nothing
    rows, current, held = [], {}, {}
    for snap in sorted(snapshots, key=lambda s: s["ts"]):
        i, before = snap["instance"], current.get(snap["instance"], {})
        ever = held.setdefault(i, set())
        if snap["roles"] is None:   # the stop
            roles = {task: "stopped" for task in ever}
        else:
            roles = snap["roles"]
            ever |= set(roles)
        for task in sorted({t for t, role in before.items() if role != "stopped"} | set(roles)):
            old, new = before.get(task, "none"), roles.get(task, "none")
            if old != new:
                rows.append({"ts": snap["ts"], "instance": i, "task": task, "role": new, "was": old})
        current[i] = roles
    return pd.DataFrame(rows, columns=["ts", "instance", "task", "role", "was"])


def round_trips(assignments):
    """Tasks that went active -> standby -> active on one instance without leaving it in between:
    the recycling path whose cache the bug forgets to clear."""
    import pandas as pd
    rows = []
    for (instance, task), part in assignments.sort_values("ts").groupby(["instance", "task"]):
        left = None  # when the task went from active to standby here
        for change in part.itertuples():
            if (change.was, change.role) == ("active", "standby"):
                left = change.ts
            elif (change.was, change.role) == ("standby", "active") and left is not None:
                rows.append({"instance": instance, "task": task, "left_ts": left, "back_ts": change.ts})
            left = left if change.role == "standby" else None
    return pd.DataFrame(rows, columns=["instance", "task", "left_ts", "back_ts"]).astype(
        {"left_ts": float, "back_ts": float})   # numbers even with no round trip (the times are rounded next)


def movements(assignments, task: str, read_ts: float):
    """The task's role changes up to the stale read, and up to the first "active" logged just after it
    (the worker reports its assignment up to 100 ms late): the whole round trip that contains the read."""
    mine = assignments[assignments["task"] == task]
    after = mine[(mine["ts"] > read_ts) & (mine["ts"] <= read_ts + AFTER_READ_S) & (mine["role"] == "active")]
    return mine[mine["ts"] <= (after["ts"].min() if len(after) else read_ts)]


def outputs(records: list, produced, t0: float):
    """The committed output with each row's truth: stale reads, wrong values, values going backwards."""
    import pandas as pd
    out = pd.DataFrame(records, columns=["id", "key", "value", "prev", "instance", "task", "at", "partition",
                                         "offset"])
    out["instance"], out["ts"] = pd.to_numeric(out["instance"]), out["at"] / 1000
    truth = produced[["id", "true_value", "seq"]].drop_duplicates("id")
    out = out.merge(truth, on="id", how="left").sort_values(["partition", "offset"]).reset_index(drop=True)
    # Per key, in output order (one key -> one output partition): what the store should have returned.
    out["expected_prev"] = out.groupby("key")["value"].shift(1)
    out["stale_read"] = out["prev"].fillna(-1) != out["expected_prev"].fillna(-1)
    out["wrong_value"] = out["true_value"].notna() & (out["value"] != out["true_value"])
    out["backwards"] = out["expected_prev"].notna() & (out["value"] < out["expected_prev"])
    out["t_s"] = (out["ts"] - t0).round(2)
    return out, truth


def analyse(label, version, caching, protocol, t0, history, output_topic, workers, toggles, produced, records, rss):
    logs = {i: w.log_path for i, w in workers.items()}
    assignments = parse_assignments(logs, toggles)
    out, truth = outputs(records, produced, t0)
    trips = round_trips(assignments)
    trips = trips.assign(left_s=(trips["left_ts"] - t0).round(1), back_s=(trips["back_ts"] - t0).round(1))
    counts = {"produced": int(len(truth)), "outputs": int(len(out)),
              "missing": int(len(set(truth["id"]) - set(out["id"]))), "duplicates": int(out["id"].duplicated().sum()),
              "stale_reads": int(out["stale_read"].sum()), "wrong_values": int(out["wrong_value"].sum()),
              "backwards": int(out["backwards"].sum()), "round_trips": int(len(trips)),
              "undelivered": int(len(history.frame("produce_failed")))}   # sends that never reached the input
    first, moved, stale = None, assignments.iloc[0:0], out[out["stale_read"]].sort_values("ts")
    if len(stale):
        row = stale.iloc[0]
        # Evidence for the cache: the stale value is what this very instance last wrote for the key.
        own = out[(out["key"] == row["key"]) & (out["instance"] == row["instance"]) & (out["ts"] < row["ts"])]
        num = lambda v: None if v is None or v != v else int(v)  # noqa: E731  (NaN -> None)
        first = {"key": row["key"], "id": row["id"], "task": row["task"], "instance": int(row["instance"]),
                 "found": num(row["prev"]), "expected": num(row["expected_prev"]), "value": int(row["value"]),
                 "true_value": num(row["true_value"]), "t_s": float(row["t_s"]),
                 "last_value_this_instance_wrote": num(own.sort_values("ts")["value"].iloc[-1]) if len(own) else None,
                 "after_round_trip": bool(((trips["instance"] == row["instance"]) & (trips["task"] == row["task"])
                                           & (trips["back_ts"] <= row["ts"] + 1)).any())}
        moved = movements(assignments, row["task"], row["ts"])
    moved = moved.assign(t_s=(moved["ts"] - t0).round(2))[["t_s", "instance", "task", "was", "role"]]
    counts["standby_tasks"] = int(assignments[assignments["role"] == "standby"][["instance", "task"]]
                                  .drop_duplicates().shape[0])   # (instance, task) pairs ever held as a standby
    ignored = protocol == "streams" and any(grep(path, re.escape(STANDBY_SETTING_IGNORED)) for path in logs.values())
    return Variant(label, version, caching, history, output_topic, trips, out, counts, first,
                   moved.reset_index(drop=True), rss, logs, _timeline(t0, toggles, assignments, trips, out),
                   assignments=assignments, protocol=protocol, standby_setting_ignored=ignored)


def _timeline(t0, toggles, assignments, trips, out) -> Timeline:
    """Instances up, each task's role per instance (info: active, standby), round trips, stale reads."""
    tl = Timeline(t0)
    end = max([t0, *(t.get("done_ts", t["ts"]) for t in toggles), *out["ts"]])
    for t in (t for t in toggles if "step" in t):
        tl.add("program", f"{t['action']} {t['instance']}", t["ts"], tone="fault")
    for i in sorted({t["instance"] for t in toggles}):
        mine = [t for t in toggles if t["instance"] == i]
        for up, down in zip(mine[::2], mine[1::2] + [None]):
            tl.add(f"instance {i}", "up", up["ts"], end=down.get("done_ts", down["ts"]) if down else end, tone="wait")
    for (i, task), part in assignments.sort_values("ts").groupby(["instance", "task"]):
        for change, until in zip(part.itertuples(), [*part["ts"].iloc[1:], end]):
            if change.role in ("active", "standby"):
                tl.add(f"w{i} · {task}", change.role, change.ts, end=until,
                       tone="info" if change.role == "active" else "standby")
    for trip in trips.itertuples():
        tl.add(f"w{trip.instance} · {trip.task}", "back to active after standby here", trip.back_ts, tone="fault")
    for r in out[out["stale_read"]].itertuples():
        tl.add(f"w{r.instance} · {r.task}", "stale read", r.ts, tone="failure",
               detail=f"{r.key}: read {r.prev}, last written {r.expected_prev}")
    return tl



# ------------------------------------------------------------------ the result

@dataclass
class Variant:
    """One version x caching run of the program."""
    label: str
    version: str
    caching: bool
    history: History
    output_topic: str
    round_trips: object      # instance, task, left_ts, back_ts (left_s, back_s): active -> standby -> active
    output: object           # committed output, one row per record, with truth and checks
    counts: dict
    first_stale: dict | None
    movements: object        # the round trip that contains the first stale read
    peak_rss_mb: dict
    logs: dict               # instance -> log path
    timeline: Timeline
    audit: object = None     # lab.audit.Verdict once audited
    assignments: object = None   # every role change: ts, instance, task, role, was (parse_assignments)
    protocol: str = "classic"    # the group protocol: classic, or streams (KIP-1071)
    standby_setting_ignored: bool = False   # Kafka Streams logged that it ignores the app's num.standby.replicas

    def summary(self) -> dict:
        f = self.first_stale or {}
        return {"version": self.version, "caching": self.caching, "protocol": self.protocol,
                "standby_setting_ignored": self.standby_setting_ignored, "affected": is_affected(self.version),
                **self.counts, "first_stale_s": f.get("t_s"), "first_stale_key": f.get("key"),
                "peak_rss_mb_instances": self.peak_rss_mb.get("instances"),
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}

    def why(self) -> str:
        """The branch of the mechanism that matches this variant."""
        c, f, v = self.counts, self.first_stale, self.version
        if self.protocol == "streams":
            return self._why_streams_protocol()
        if f is not None:
            trip = "just back from active -> standby -> active there" if f["after_round_trip"] else "no round trip"
            own = f["last_value_this_instance_wrote"]
            cache = (", the value that instance itself wrote before the task left it: the cache outlived the recycle"
                     if f["after_round_trip"] and own == f["found"] else f" (that instance last wrote {own})")
            return (f"Kafka Streams {v}, caching {'on' if self.caching else 'off'}: {f['t_s']} s in, instance "
                    f"{f['instance']} read {f['key']} (task {f['task']}, {trip}) and found {f['found']} while the "
                    f"last value written was {f['expected']}{cache}.")
        if not c["round_trips"]:
            return (f"{v}: no task came back active to an instance where it had been standby (0 round trips), so "
                    "the recycled-cache path was never taken: this run proves nothing either way.")
        trips = f"{c['round_trips']} round trip(s) happened"
        if not self.caching:
            return f"{v}, caching off: {trips}, but every get() reads the store the standby kept up to date."
        if not is_affected(v):
            return f"{v} clears the caches when it recycles a task (fixed in 3.4.1 / 3.5.0): {trips}, none stale."
        return (f"{v} is affected and {trips}, yet no read went stale: no key that task's cache held was updated "
                "while it was a standby there.")

    def _why_streams_protocol(self) -> str:
        """On the streams group protocol: who placed the standbys, and what the reads did."""
        c, v = self.counts, self.version
        placed = (f"the broker placed {c['standby_tasks']} standby task(s) from the group's config "
                  "streams.num.standby.replicas" if c["standby_tasks"] else "no standby task was placed")
        ignored = (", and Kafka Streams logged that it ignores the app's own num.standby.replicas"
                   if self.standby_setting_ignored else "")
        reads = (f"{c['stale_reads']} stale read(s) after {c['round_trips']} round trip(s)" if c["round_trips"] else
                 f"{c['stale_reads']} stale read(s), and no task came back active to an instance where it had been "
                 "standby (0 round trips), so the recycled-cache path was not taken")
        return f"{v} on the streams group protocol (KIP-1071): {placed}{ignored}; {reads}."


@dataclass
class StaleStandbyResult(Result):
    variants: dict = field(default_factory=dict)   # label -> Variant, "main" first
    bootstrap: str = ""
    title = "Instances, task roles, stale reads"

    @property
    def main(self) -> Variant:
        return self.variants["main"]

    @property
    def failed(self) -> bool:
        return self.main.counts["stale_reads"] > 0

    @property
    def compared(self) -> dict:
        """The variants run beside the main one (COMPARE): caching off, other versions."""
        return {k: v for k, v in self.variants.items() if k != "main"}

    def verdict(self) -> str:
        m, c = self.main, self.main.counts
        return "; ".join([f"Kafka Streams {m.version}, caching {'on' if m.caching else 'off'}: {c['stale_reads']} "
                          f"stale read(s), {c['wrong_values']} wrong value(s) after {c['round_trips']} round trip(s), "
                          f"{c['outputs']} outputs of {c['produced']} inputs"]
                         + [f"{k}: {v.counts['stale_reads']} stale after {v.counts['round_trips']} round trip(s)"
                            for k, v in self.compared.items()])

    def explain(self) -> str:
        return "\n".join(f"- **{k}**: {v.why()}" for k, v in self.variants.items())

    def table(self):
        import pandas as pd
        rows = {k: {**v.summary(), "audit stale_value": v.audit.counts.get("stale_value") if v.audit else None}
                for k, v in self.variants.items()}
        return pd.DataFrame(rows).T[["version", "caching", "protocol", "standby_tasks", "round_trips", "stale_reads",
                                     "wrong_values", "audit stale_value", "missing", "duplicates", "first_stale_s",
                                     "peak_rss_mb_instances"]]

    def figure(self, label: str = "main"):
        v = self.variants[label]
        return v.timeline.figure(f"Kafka Streams {v.version}, caching {'on' if v.caching else 'off'}, program "
                                 f"'{self.params['program']}': {v.counts['stale_reads']} stale read(s), "
                                 f"{v.counts['wrong_values']} wrong value(s)")

    def stale_rows(self, label: str = "main"):
        out = self.variants[label].output
        return out[out["stale_read"]].sort_values("ts")

    def recycle_lines(self) -> list[str]:
        """Kafka Streams' own log lines (suspended, recycled, initialized) about the first stale read's task."""
        f = self.main.first_stale
        rx = (rf"(?:stream-task|standby-task|task) \[{re.escape(f['task'] if f else '')}\] "
              r"(?:Closed (?:clean )?and recycled state|Initialized|Closed clean|Suspended running)")
        return [] if f is None else [
            f"{line[1:24]}  {re.search(rx, line).group(0)}  ({'StandbyTask' if 'standby-task' in line else 'StreamTask'})"
            for _, line in grep(self.main.logs[f["instance"]], rx) if line.startswith("[")]

    def audit(self) -> dict:
        """The Spark audit of every variant's committed output against the generator's truth."""
        from ...audit import audit
        for v in self.variants.values():
            predicted = "anomalies" if is_affected(v.version) and v.caching else "clean"  # by the mechanism
            v.audit = audit(v.history, bootstrap=self.bootstrap, output_topic=v.output_topic, expect=predicted,
                            kinds=KINDS)
        return {k: v.audit for k, v in self.variants.items()}

    def record_fields(self) -> dict:
        m = self.main
        return {"streams_version": m.version, "compare_versions": self.params["compare_versions"],
                "program": self.params["program"], "main": m.summary(), "main_counts": m.counts,
                "first_stale": m.first_stale, "main_audit": m.audit.as_dict() if m.audit else None,
                "compared": {k: v.summary() for k, v in self.compared.items()}}
