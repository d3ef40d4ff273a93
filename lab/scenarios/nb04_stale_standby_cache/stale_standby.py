"""Notebook 04's scenario ("04 · Stale values from a cached store after a task comes back"): SPEC, needs() and run(),
which plays PROGRAM's instance toggles on real Kafka Streams JVMs (lab/java/StaleStandbyWorker.java: a per-key count,
cached or not, with standbys and exactly-once) while the generator logs each key's true count, once per variant (the
main run, then, when asked, caching off and each fixed version); mitigate() reruns it with the learner's fix.
StaleStandbyResult shows the lesson and checks the exercises.
Affected versions are 2.6.0 - 3.4.0 (fixed in 3.4.1 and 3.5.0); the worker needs Kafka Streams 3.0.0 or later.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from ...cluster import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import Param, Result, Run, Spec, Timeline, grep, lab_lines
from ...experiment.apps import stop_together
from ...experiment.checks import check_streams_program
from ...experiment.consume import read_committed
from ...experiment.memory import child_pids, peak_rss
from ...experiment.mitigate import Mitigate
from ...experiment.result import Exercise, called, expect, is_number
from ...generator import generate
from ...history import History
from ...programs import JavaProgram

MAIN, SOURCES = "StaleStandbyWorker", ["StaleStandbyWorker.java", "Lab.java"]
FIRST_AFFECTED, FIRST_FIXED = (2, 6, 0), (3, 4, 1)   # KAFKA-9501 recycling .. PR #13369
OLDEST_SUPPORTED = (3, 0, 0)                          # the worker's TaskMetadata / exactly_once_v2 API
MAX_INSTANCES = 4                                     # JVMs this machine holds next to a broker
AFTER_READ_S = 2.0    # the worker polls its assignment every 100 ms: a role change is logged a little late
KINDS = ["stale_value", "duplicate", "lost"]          # what the Spark audit checks


def is_affected(version: str) -> bool:
    """Whether this Kafka Streams version recycles tasks without clearing their caches."""
    return FIRST_AFFECTED <= parse_version(version) < FIRST_FIXED


def parse_program(program) -> list[int]:
    """'1 2 3' (or [1, 2, 3]) -> [1, 2, 3]; each number toggles that instance."""
    tokens = program.replace(",", " ").split() if isinstance(program, str) else list(program)
    try:
        steps = [int(t) for t in tokens]
    except (TypeError, ValueError):
        raise LabError(f"PROGRAM is instance numbers separated by spaces, like '1 2 3'; got {program!r}.") from None
    if not steps or any(not 1 <= s <= MAX_INSTANCES for s in steps):
        raise LabError(f"PROGRAM={program!r}: give instance numbers 1..{MAX_INSTANCES} (the JVMs this machine "
                       "holds), like '1 2 3'.")
    return steps


def check_streams_version(version: str, name: str = "AFFECTED_VERSION") -> None:
    """Resolve (and compile the worker against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="its TaskMetadata / exactly_once_v2 API; the bug itself exists since 2.6.0")


def _leaves_one_running(p: dict) -> str | None:
    running: set[int] = set()
    for s in parse_program(p["program"]):
        running ^= {s}
    return None if running else (f"PROGRAM={p['program']!r} ends with every instance stopped, so the last inputs "
                                 "would never be processed: leave one running (e.g. add a start).")


SPEC = Spec(
    Param("affected_version", "3.3.1", "Kafka Streams version of the main run (affected: 2.6.0 - 3.4.0)",
          check=check_streams_version),
    Param("fixed_versions", ["3.5.2", "4.3.1"], "versions run with caching on as mitigations (fix: 3.4.1, 3.5.0)",
          check=lambda versions: [check_streams_version(v, "FIXED_VERSIONS") for v in versions]),
    Param("mitigations", False, "also run the mitigations beside it: caching off, then each fixed version"),
    Param("caching", True, "the store's cache in the main run"),
    Param("program", "1 2 3", "instance toggles, one per step (the reproducer's: 1 2 3)", check=parse_program),
    Param("step_seconds", 10.0, "time between toggles, from when the previous one took effect", lo=3, hi=300,
          unit="s"),
    Param("settle_seconds", 10.0, "inputs keep coming this long after the last toggle", lo=0, hi=600, unit="s"),
    Param("standby_replicas", 1, "num.standby.replicas", lo=0, hi=3),
    Param("partitions", 6, "input partitions, i.e. the tasks that move", lo=1, hi=48),
    Param("keys", 30, "distinct keys the generator increments", lo=1, hi=100_000),
    Param("rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
    rules=(_leaves_one_running,),
)


def needs(p: dict) -> dict:
    """One broker at the lab's version: only the Streams clients change version."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={})


def variants(p: dict) -> list[tuple[str, str, bool]]:
    """(label, Kafka Streams version, caching): the main run, then the mitigations."""
    rest = [("caching off", p["affected_version"], False)] if p["caching"] else []
    rest += [(f"fixed {v}", v, True) for v in p["fixed_versions"]]
    return [("main", p["affected_version"], p["caching"])] + (rest if p["mitigations"] else [])


# ------------------------------------------------------------------ the scenario

STALE_ANSWERS = ("yes, it serves a stale value", "no, every value is right")


def question(p: dict) -> tuple:
    """The Predict step: does the cached store serve a stale value during the program?"""
    store = "a cache-enabled store" if p["caching"] else "a store without cache"
    return (f"Kafka Streams {p['affected_version']}, {p['standby_replicas']} standby replica(s), {store}, instances "
            f"toggled by the program '{p['program']}': does the store answer with a stale value?", STALE_ANSWERS)


def run(cluster=None, progress: bool = True, **params) -> "StaleStandbyResult":
    """Every variant of the program on one broker; returns what each measured."""
    p = SPEC.validate(**params)
    with Run("stale-standby", cluster=cluster, progress=progress, spark_audit=True, **needs(p)) as lab:
        measured = {label: _variant(lab, label, version, caching, p) for label, version, caching in variants(p)}
        bootstrap = lab.bootstrap
    return StaleStandbyResult("stale_standby", p, lab.id, measured["main"].timeline, variants=measured,
                              bootstrap=bootstrap)


# The Mitigate step: the same program again, alone, with the fix (caching=False, or a fixed affected_version).
mitigate = Mitigate(run, SPEC, base={"mitigations": False})


def _variant(lab: Run, label: str, version: str, caching: bool, p: dict) -> "Variant":
    steps, app = parse_program(p["program"]), f"{lab.id}-{re.sub(r'[^a-z0-9]+', '-', label)}"
    lab.phase(f"{label}: Kafka Streams {version} ({'affected' if is_affected(version) else 'fixed'}), caching "
              f"{'on' if caching else 'off'}, {p['standby_replicas']} standby, program {p['program']!r}")
    history = History(lab.folder / app / "history", app)
    topics = lab.topics(f"{app}-input", f"{app}-output", partitions=p["partitions"])
    config = {"lab.input.topic": topics[0], "lab.output.topic": topics[1], "lab.caching": str(caching).lower(),
              "application.id": app, "bootstrap.servers": lab.bootstrap, "processing.guarantee": "exactly_once_v2",
              "num.standby.replicas": p["standby_replicas"], "commit.interval.ms": 100,
              "num.stream.threads": 1,   # one thread cache per instance, as in the reproducer
              # Streams does not leave the group on close: a stopped instance's tasks move once its
              # session expires, so keep that short (the broker's minimum is 6 s).
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 1500}
    workers = {i: lab.program(JavaProgram(
        f"{label.replace(' ', '-')}-worker-{i}", version, MAIN, SOURCES, heap="256m",
        properties={**config, "lab.instance": i, "state.dir": lab.folder / app / f"state-{i}"}))
        for i in sorted(set(steps))}
    t0, toggles, stop, up = time.time(), [], threading.Event(), set()
    generator = lab.background(generate, lab.bootstrap, topics[0], None, history, keys=p["keys"], rate=p["rate"],
                               until=stop)  # open-ended: the program's length depends on how fast JVMs join
    pids = lambda: [w.process.pid for w in workers.values() if w.alive()]  # noqa: E731
    rss = lab.background(peak_rss, stop, lambda: {"instances": pids(), "brokers": child_pids("kafka.Kafka"),
                                                  "all_up": pids() if len(pids()) == len(workers) else []})
    try:
        for k, instance in enumerate(steps):
            worker, since = workers[instance], time.time()
            action = "stop" if worker.alive() else "start"
            toggles.append({"ts": since, "instance": instance, "action": action, "step": k})
            lab.say(f"[{k}] {action} instance {instance}")
            up ^= {instance}
            if action == "start":
                worker.start()
                lab.wait(lambda: any(r["ts"] >= since for r in lab_lines(worker.log_path, kind="assignment",
                                                                             state="RUNNING")),
                         120, f"{worker.name} (Kafka Streams {version}) to reach RUNNING", child=worker.process)
            else:
                worker.stop()
                toggles[-1]["done_ts"] = time.time()  # it logged until here
            last = k == len(steps) - 1
            lab.countdown("inputs keep coming" if last else f"step {k + 1} of {len(steps)}",
                          p["settle_seconds"] if last else p["step_seconds"],
                          done=lambda: any(not workers[i].alive() for i in up))
            for i in (i for i in up if not workers[i].alive()):  # a broken run, not a result
                raise LabError(f"Instance {i} (Kafka Streams {version}) exited; last lines of {workers[i].log_path}:"
                               "\n" + "\n".join(workers[i].process.log().splitlines()[-15:]))
        stop.set()
        generator.result(120)
        produced = history.frame("produced")
        ids = set(produced["id"])
        records = read_committed(lab, topics[1], lambda rows: ids <= {r["id"] for r in rows},
                                 what=f"all {len(ids)} inputs in the committed output")
    finally:
        stop.set()
        running = [i for i, w in workers.items() if w.alive()]
        stop_together([workers[i].process for i in running], timeout=30)   # each closes its Streams client
        toggles += [{"ts": time.time(), "done_ts": time.time(), "instance": i, "action": "stop"} for i in running]
    return _analyse(label, version, caching, t0, history, topics[1], workers, toggles, produced, records,
                    rss.result(10))


# ------------------------------------------------------------------ what happened

def parse_assignments(logs: dict, toggles: list):
    """Role changes per (instance, task) from the workers' "assignment" lines and the stops."""
    import pandas as pd
    snapshots = [{"ts": r["ts"], "instance": i, "roles": {**{t: "standby" for t in r["standby"]},
                                                         **{t: "active" for t in r["active"]}}}
                 for i, source in logs.items() for r in lab_lines(source, kind="assignment")]
    snapshots += [{"ts": t.get("done_ts", t["ts"]), "instance": t["instance"], "roles": {}}
                  for t in toggles if t["action"] == "stop"]  # a stopped instance holds nothing
    rows, current = [], {}
    for snap in sorted(snapshots, key=lambda s: s["ts"]):
        before = current.get(snap["instance"], {})
        for task in sorted(set(before) | set(snap["roles"])):
            old, new = before.get(task, "none"), snap["roles"].get(task, "none")
            if old != new:
                rows.append({"ts": snap["ts"], "instance": snap["instance"], "task": task, "role": new, "was": old})
        current[snap["instance"]] = snap["roles"]
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
    return pd.DataFrame(rows, columns=["instance", "task", "left_ts", "back_ts"])


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


def _analyse(label, version, caching, t0, history, output_topic, workers, toggles, produced, records, rss):
    logs = {i: w.log_path for i, w in workers.items()}
    assignments = parse_assignments(logs, toggles)
    out, truth = outputs(records, produced, t0)
    trips = round_trips(assignments)
    trips = trips.assign(left_s=(trips["left_ts"] - t0).round(1), back_s=(trips["back_ts"] - t0).round(1))
    counts = {"produced": int(len(truth)), "outputs": int(len(out)),
              "missing": int(len(set(truth["id"]) - set(out["id"]))), "duplicates": int(out["id"].duplicated().sum()),
              "stale_reads": int(out["stale_read"].sum()), "wrong_values": int(out["wrong_value"].sum()),
              "backwards": int(out["backwards"].sum()), "round_trips": int(len(trips))}
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
    return Variant(label, version, caching, history, output_topic, trips, out, counts, first,
                   moved.reset_index(drop=True), rss, logs, _timeline(t0, toggles, assignments, trips, out),
                   assignments=assignments)


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
            if change.role != "none":
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

    def summary(self) -> dict:
        f = self.first_stale or {}
        return {"version": self.version, "caching": self.caching, "affected_version": is_affected(self.version),
                **self.counts, "first_stale_s": f.get("t_s"), "first_stale_key": f.get("key"),
                "peak_rss_mb_instances": self.peak_rss_mb.get("instances"),
                **({"audit": self.audit.as_dict()} if self.audit is not None else {})}

    def why(self) -> str:
        """The branch of the mechanism that matches this variant."""
        c, f, v = self.counts, self.first_stale, self.version
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
    def mitigations(self) -> dict:
        return {k: v for k, v in self.variants.items() if k != "main"}

    def measured_answer(self) -> str:
        return STALE_ANSWERS[0] if self.main.counts["stale_reads"] else STALE_ANSWERS[1]

    def verdict(self) -> str:
        m, c = self.main, self.main.counts
        return "; ".join([f"Kafka Streams {m.version}, caching {'on' if m.caching else 'off'}: {c['stale_reads']} "
                          f"stale read(s), {c['wrong_values']} wrong value(s) after {c['round_trips']} round trip(s), "
                          f"{c['outputs']} outputs of {c['produced']} inputs"]
                         + [f"{k}: {v.counts['stale_reads']} stale after {v.counts['round_trips']} round trip(s)"
                            for k, v in self.mitigations.items()])

    def explain(self) -> str:
        return "\n".join(f"- **{k}**: {v.why()}" for k, v in self.variants.items())

    def table(self):
        import pandas as pd
        rows = {k: {**v.summary(), "audit stale_value": v.audit.counts.get("stale_value") if v.audit else None}
                for k, v in self.variants.items()}
        return pd.DataFrame(rows).T[["version", "caching", "round_trips", "stale_reads", "wrong_values",
                                     "audit stale_value", "missing", "duplicates", "first_stale_s",
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
        return {"affected_version": m.version, "fixed_versions": self.params["fixed_versions"],
                "program": self.params["program"], "main": m.summary(), "main_counts": m.counts,
                "first_stale": m.first_stale, "main_audit": m.audit.as_dict() if m.audit else None,
                "mitigations": {k: v.summary() for k, v in self.mitigations.items()},
                "peak_rss_mb": m.peak_rss_mb}


# ------------------------------------------------------------------ the exercises

def reads_by_roles(v: Variant) -> dict:
    """Every place a task was read (instance, task) and the roles it had taken there up to each read, oldest first
    (a role logged up to AFTER_READ_S after the read counts: the worker reports its assignment a little late) ->
    (reads, stale reads) with that history."""
    seen = {}
    changes = v.assignments.sort_values("ts")
    for (instance, task), reads in v.output.groupby(["instance", "task"]):
        mine = changes[(changes["instance"] == instance) & (changes["task"] == task)]
        for read in reads.itertuples():
            roles = list(mine[mine["ts"] <= read.ts]["role"])
            if not roles or roles[-1] != "active":
                late = mine[(mine["ts"] > read.ts) & (mine["ts"] <= read.ts + AFTER_READ_S)
                            & (mine["role"] == "active")]
                roles += ["active"] if len(late) else []
            key = (int(instance), str(task), tuple(roles))
            n, stale = seen.get(key, (0, 0))
            seen[key] = (n + 1, stale + bool(read.stale_read))
    return seen


def goes_stale(roles):
    # recycled, not closed: the task was active here, went standby here and came back, its cache never cleared
    return roles[-3:] == ["active", "standby", "active"]


def _check_goes_stale(r: StaleStandbyResult, fn) -> None:
    """The learner's goes_stale(roles), on every role history this run read after: True wherever it read a stale
    value (measured), False wherever nothing went stale and no round trip preceded the read; a read after a round
    trip that stayed right (the key unchanged meanwhile, or a fixed version or no cache) is judged by the mechanism."""
    v = r.main
    seen = reads_by_roles(v)
    expect(bool(seen), "this run read nothing, so there is nothing to judge the function on: run the lesson first")
    for (instance, task, roles), (n, stale) in sorted(seen.items(), key=lambda kv: -kv[1][1]):   # the stale first
        call = f"goes_stale({list(roles)!r})"
        given = called(fn, call, list(roles))
        expect(isinstance(given, bool), f"{call} returned {given!r}: return True or False")
        if stale:
            expect(given, f"{call} = False, but instance {instance} read {stale} stale value(s) of task {task} "
                   "after exactly those roles in this run (the red x on the timeline)")
        elif goes_stale(list(roles)):
            expect(given, f"{call} = False, but those roles are the recycling path (in this run {n} read(s) of task "
                   f"{task} on instance {instance} followed them and stayed right: "
                   + ("a fixed version or no cache" if not (is_affected(v.version) and v.caching)
                      else "the key was not written elsewhere meanwhile") + "); on an affected version with the "
                   "cache on, what would that cache still hold?")
        else:
            expect(not given, f"{call} = True, but instance {instance} read task {task} {n} time(s) after exactly "
                   "those roles in this run and nothing it read was stale: what must have happened to the task on "
                   "that instance, before, for its cache to hold an old value?")


def _goes_stale_wrong(r: StaleStandbyResult):
    """The tempting theories, the first this run refutes: "a promoted standby is behind", "any move", "always"."""
    for theory in (lambda roles: roles[-2:] == ["standby", "active"], lambda roles: len(roles) > 1,
                   lambda roles: True):
        try:
            _check_goes_stale(r, theory)
        except AssertionError:
            return theory
    return lambda roles: None   # refused by any check: not a bool


def _stale_value(r: StaleStandbyResult):
    """The last value the stale instance wrote for the broken key before the read: its cache still held it."""
    stale = r.stale_rows()
    if not len(stale):
        return "none"
    read, out = stale.iloc[0], r.main.output
    own = out[(out.key == read.key) & (out.instance == read.instance) & (out.ts < read.ts)].sort_values("ts")
    return int(own.value.iloc[-1]) if len(own) else r.main.first_stale["found"]


def _check_stale_value(r: StaleStandbyResult, answer) -> None:
    first = r.main.first_stale
    said_none = isinstance(answer, str) and answer.strip().lower() == "none"
    if first is None:
        expect(said_none, "this run had no stale read, so there is no stale value to predict: answer \"none\"")
        return
    expect(not said_none, "this run did read a stale value: look for the red x on the timeline")
    expect(is_number(answer) and float(answer).is_integer(),
           "give the stale value as a whole number (a count the store returned)")
    expect(answer == first["found"],
           f"{answer} is not what the store returned: find the last value instance {first['instance']} itself "
           f"wrote for {first['key']} before the read, not the last value written by anyone")


def _stale_value_wrong(r: StaleStandbyResult):
    """The value the read should have found (the key's last value, from any instance), or a value although nothing
    went stale."""
    first, out = r.main.first_stale, r.main.output
    if first is None:
        return int(out["value"].iloc[-1]) if len(out) else 0
    return first["expected"] if first["expected"] is not None else (first["found"] or 0) + 1


StaleStandbyResult.exercises = {
    1: Exercise(
        check=_check_goes_stale,
        solution=lambda r: goes_stale,
        why="The thread cache is only wrong when the task was **recycled** on that instance: active there (its cache "
            "filled with what it wrote), then standby there (stores and cache kept open, newer values written "
            "straight into the store, past the cache), then active again there. A task new to the instance, a "
            "promoted standby that was never active there, or one that came back after the instance restarted "
            "starts with an empty cache. So only the last three roles matter: active, standby, active. On a fixed "
            "version the recycling clears the cache and nothing goes stale, but the roles are the same.",
        wrong=_goes_stale_wrong,
    ),
    2: Exercise(
        check=_check_stale_value,
        solution=_stale_value,
        why="The thread cache kept what the instance itself wrote for the key before the task left it; as a "
            "standby it received the newer values straight into the store, past the cache. So, in "
            "`result.main.output`, take the rows of the broken key written by that instance before the read: "
            "the last one's `value` is what the store answers. With no stale read the answer is `\"none\"`.",
        wrong=_stale_value_wrong,
    ),
}
