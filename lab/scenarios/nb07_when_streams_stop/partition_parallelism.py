"""Lesson 07b, more instances for a busy app: for each partition count, one app per instance count of
lab/java/ThroughputApp.java (one thread each, PAR_WORK_MS per record, its own application.id) reads the same backlog;
once every app has settled (throughput.start_and_settle), a window measures each instance's records per second and its
tasks. The instance counts of PAR_STREAMS_PROTOCOL then run the same way, after them, on the streams group protocol."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ...toolbox import Param
from ...toolbox.admin import group_offsets, topic_offsets
from ...record.generator import generate
from ...record.history import History
from ...toolbox.apps import check_jvms
from ...toolbox.lesson import Lesson
from ...toolbox.result import Exercise, count as whole_number, expect
from .throughput import StreamsApp, start_and_settle, stop_apps
from .. import written_fix

PARAMS = [
    Param("par_partitions", [2, 4], "partition counts of the input topic, one round each", lo=1, hi=12),
    Param("par_instances", [1, 2, 4], "instances per app: one app each, side by side", lo=1, hi=8),
    Param("par_work_ms", 10, "work per record", lo=1, hi=1000,
          unit="ms"),
    Param("par_streams_protocol", [], "instance counts run again, after the others, on the streams group protocol "
          "(KIP-1071, group.protocol=streams: the broker assigns the tasks)", lo=1, hi=8),
    Param("par_window_s", 10.0, "the measured window, once every app has settled", lo=3, hi=120, unit="s"),
]


def _fits(p: dict) -> str | None:
    return (check_jvms(sum(p["par_instances"]), f"PAR_INSTANCES={p['par_instances']} (all at once)") or
            check_jvms(sum(p["par_streams_protocol"]), f"PAR_STREAMS_PROTOCOL={p['par_streams_protocol']} (at once)"))


RULES = [_fits]


def question(p: dict) -> tuple:
    """Predict: how many of the most instances work, on the fewest partitions (a count: judged exactly)."""
    n, parts = max(p["par_instances"]), min(p["par_partitions"])
    return (f"{n} instances of one Kafka Streams app (one thread each) read a topic of {parts} "
            f"partition{'s' * (parts != 1)}. How many of the instances process records?", None, 0)


def measured_answer(record: dict, p: dict):
    row = record["parallelism"].get(f"p{min(p['par_partitions'])}_n{max(p['par_instances'])}")
    return None if row is None else row["busy_instances"]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


# k0..k511: murmur2 gives each partition, at 1 to 12 of them, at least FEWEST_SHARE of an even share of these keys
# (64 keys gave one partition of 4 only 4 of them: it ran dry within the measured window)
KEYS = 512
FEWEST_SHARE = 0.68


def backlog(p: dict, partitions: int, settle_s: float = 40) -> int:
    """Records enough that no partition runs dry before its window ends: the fastest app's rate x the time, over
    the smallest partition's share of the keys."""
    fastest = min(max(p["par_instances"]), partitions) * 1000 / p["par_work_ms"]
    return math.ceil(fastest * (settle_s + p["par_window_s"]) / FEWEST_SHARE)


def run_lesson(lab, p: dict) -> "Outcome":
    rows = []
    for partitions in p["par_partitions"]:
        topic = lab.topics(f"par-input-p{partitions}-{lab.id[-6:]}", partitions=partitions)[0]
        n = backlog(p, partitions)
        with lab.step(f"a backlog of {n} records on {partitions} partitions", lane="input"):
            generate(lab.bootstrap, topic, n, History(lab.folder / f"par-input-p{partitions}", lab.id),
                     keys=KEYS)
        # one wave per group protocol, one after the other: each app reads the backlog from its start
        for protocol, counts in (("classic", p["par_instances"]), ("streams", p["par_streams_protocol"])):
            if counts:
                rows += _wave(lab, p, topic, partitions, protocol, counts)
    return Outcome(rows, p["par_work_ms"])


def _wave(lab, p: dict, topic: str, partitions: int, protocol: str, counts: list[int]) -> list[dict]:
    """One app per instance count on `protocol`, side by side: settled, then measured over the window."""
    suffix = "" if protocol == "classic" else f"-{protocol}"
    apps = {count: StreamsApp(lab, f"p{partitions}-n{count}{suffix}", topic, instances=count,
                              work_ms=p["par_work_ms"], group_protocol=protocol) for count in counts}
    start_and_settle(lab, apps.values(), partitions,
                     f"{sum(counts)} instances ({protocol} protocol) to settle on {partitions} partitions")
    start = time.time()
    lab.countdown(f"measuring {partitions} partitions ({protocol} protocol)", p["par_window_s"])
    end = time.time()
    admin = lab.cluster.admin()
    ends = topic_offsets(admin, topic, partitions)
    committed = group_offsets(admin, {c: a.app_id for c, a in apps.items()}, topic)
    rows = []
    for count, app in apps.items():
        rates, tasks = app.rates(start, end), app.tasks()
        lag = sum(ends[q] - ((committed.get(count) or {}).get(q) or 0) for q in range(partitions))
        rows.append({"partitions": partitions, "instances": count, "protocol": protocol,
                     "records_per_s": round(sum(rates.values()), 1),
                     # busy: processed records in the window; idle: no task (its own report)
                     "busy_instances": sum(1 for i in rates if rates[i] > 0),
                     "idle_instances": sum(1 for i in tasks if not tasks[i]),
                     "idle_processed": round(sum(rates[i] for i in tasks if not tasks[i]) * (end - start)),
                     "tasks": {i: t for i, t in tasks.items()}, "lag_at_end": lag})
        lab.event("parallelism", f"P={partitions} N={count}{suffix}", detail=f"{sum(rates.values()):.0f} records/s")
    stop_apps(apps.values())
    return rows


@dataclass
class Outcome:
    rows: list[dict]
    work_ms: float

    @property
    def failed(self) -> bool:
        return any(r["idle_instances"] for r in self.rows)

    def as_record(self) -> dict:
        def keyed(protocol):
            return {f"p{r['partitions']}_n{r['instances']}": r for r in self.rows if r["protocol"] == protocol}
        streams = keyed("streams")   # the streams group protocol's rows apart: "parallelism" stays the classic's
        return {"parallelism": keyed("classic"), **({"streams_protocol": streams} if streams else {})}

    def verdict(self) -> str:
        idle = [f"{r['instances']} instances on {r['partitions']} partitions{_on(r)}: {r['idle_instances']} idle"
                for r in self.rows if r["idle_instances"]]
        return "; ".join(idle) if idle else "every instance had a partition to work on"

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows).drop(columns=["tasks"])

    def explain(self) -> str:
        lines = [f"One thread does at most {1000 / self.work_ms:.0f} records/s ({self.work_ms:g} ms each)."]
        for r in self.rows:
            line = (f"- {r['partitions']} partitions, {r['instances']} instance(s){_on(r)}: {r['records_per_s']:.0f} "
                    f"records/s, lag {r['lag_at_end']} at the end")
            if r["idle_instances"]:
                line += (f"; **{r['idle_instances']} instance(s) with no task** processed "
                         f"{r['idle_processed']} records in the window: a partition is one task, and tasks are "
                         "all there is to share")
            lines.append(line)
        return "\n".join(lines)

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        for partitions, protocol in sorted({(r["partitions"], r["protocol"]) for r in self.rows}):
            mine = sorted((r for r in self.rows if (r["partitions"], r["protocol"]) == (partitions, protocol)),
                          key=lambda r: r["instances"])
            fig.add_scatter(x=[r["instances"] for r in mine], y=[r["records_per_s"] for r in mine],
                            mode="lines+markers", name=f"{partitions} partitions{_on(mine[0])}")
        fig.update_layout(title="Throughput against instances: flat past the partition count",
                          xaxis_title="instances", yaxis_title="records per second", template="plotly_white",
                          height=380)
        return fig


def _on(row: dict) -> str:
    return "" if row["protocol"] == "classic" else f" (the {row['protocol']} protocol)"


# ------------------------------------------------------------------ the exercise

# Its case, another app that no run above uses: 20 ms a record (50 records/s a thread at most) and 260 records/s
# coming in, 5.2 threads' worth. A thread measured here does a little less than 1000 / work ms (96 records/s at
# 10 ms): six of them leave about a tenth of headroom over 260, five fall short whatever they measure.
CASE_WORK_MS = 20
CASE_RATE = 260


def _fewest_partitions(result) -> int:
    """The fewest partitions on which the case's app keeps up with CASE_RATE: one task per partition, one thread per
    task, 1000 / CASE_WORK_MS records/s each, however many instances."""
    return -(-CASE_RATE * CASE_WORK_MS // 1000)


def _check_fewest_partitions(result, answer) -> None:
    """An experiment: the lesson runs again on the learner's partition count, with one instance per partition, at
    the case's work time, and the records per second it measured against the case's rate, in threads' worth at the
    rate its threads measured, decide."""
    fewest, p, per_thread = _fewest_partitions(result), result.params, 1000 / CASE_WORK_MS
    given = whole_number(answer, "partitions")
    expect(given * per_thread >= CASE_RATE, f"{given} partition(s) are {given} task(s), each on one thread of "
           f"{per_thread:g} records/s at most at {CASE_WORK_MS} ms a record: {given * per_thread:g} records/s in all, "
           f"short of {CASE_RATE}, however many instances you start")
    expect(given <= fewest, f"{given} partitions would do, but fewer would too: the question is the fewest (each "
           "extra partition is an extra task to balance, and a stateful app's keys move when partitions are added)")
    cluster = result.running_cluster()
    print(f"Exercise 1: running the lesson on {given} partitions with {given} instances, at {CASE_WORK_MS} ms a "
          "record, on " + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = result.lesson.run(cluster=cluster, remember=False, par_partitions=[given], par_instances=[given],
                              par_work_ms=CASE_WORK_MS, par_window_s=p["par_window_s"])
    row = again.outcome.rows[0]
    # A busy machine slows every thread alike: the input is CASE_RATE / per_thread threads' worth, at the rate a
    # thread of this very run did (a laptop's 260 records/s is less on a loaded one).
    thread = row["records_per_s"] / row["busy_instances"] if row["busy_instances"] else 0.0
    needed = CASE_RATE / per_thread * thread
    print(f"Measured: {row['records_per_s']:g} records/s with {row['busy_instances']} busy instance(s), "
          f"{thread:.1f} records/s a thread: the input is {CASE_RATE / per_thread:g} threads' worth, {needed:.1f} "
          "records/s at that rate.")
    expect(thread > 0 and row["records_per_s"] >= needed, f"on {given} partitions the app measured "
           f"{row['records_per_s']:g} records/s, short of {needed or CASE_RATE:.1f} ({row['busy_instances']} of "
           f"{given} instances busy): measured here, the app did not keep up")


def _partitions_printed(result) -> list:
    """The table's partitions, instances and busy instances, the parameters, the Mitigate cell's partitions, and
    the case's own numbers."""
    p, fix = result.params, written_fix("07b")
    shown = {n for r in result.outcome.rows for n in (r["partitions"], r["instances"], r["busy_instances"])}
    shown |= {*p["par_partitions"], *p["par_instances"], p["par_work_ms"], p["par_window_s"],
              *fix.get("par_partitions", []), CASE_WORK_MS, CASE_RATE}
    return sorted(n for n in shown if n)


EXERCISES = {
    1: Exercise(
        check=_check_fewest_partitions,
        solution=_fewest_partitions,
        why="A partition is one task, and a task runs on one thread of one instance. However many instances you "
            "start, at most as many threads as the topic has partitions have work, each doing at most `1000 / "
            "work ms` records a second: the partitions times that is the app's ceiling (the table shows it: past "
            "the partitions, `records_per_s` stops growing and the extra instances are idle). At 20 ms a record one "
            "thread does at most 50 records a second, so 260 a second is 5.2 threads' worth: on five partitions the "
            "app does 250 at most and its lag grows for ever, whatever the instances; a sixth partition gives it "
            "300. A thread measured here does a little less than `1000 / work ms` (its polls and commits take time "
            "too), so six leave about a tenth of headroom. Adding partitions to a live topic moves a stateful app's "
            "keys: plan them ahead.",
        wrong=lambda r: _fewest_partitions(r) - 1,   # 5.2 threads' worth rounded down
        closer="Extra instances only help while each has something of its own to work on. Ask how the app's work "
               "is divided between its threads, and how many records a second one thread can take at 20 ms a "
               "record.",
        printed=_partitions_printed,
    ),
}


def instances_per_round(p: dict) -> int:
    # one round per partition count, one after the other: a round runs an app per instance count, all side by side,
    # then those of PAR_STREAMS_PROTOCOL
    return max(sum(p["par_instances"]), sum(p["par_streams_protocol"]))


lesson = Lesson("partitions", "More instances for a busy app", params=PARAMS, rules=RULES, needs=needs,
                body=run_lesson, question=question, measured_answer=measured_answer, exercises=EXERCISES,
                apps=("ThroughputApp",), apps_at_once=instances_per_round)
