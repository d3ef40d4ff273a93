"""Lesson 06b, a restart after a crash (its `lesson`; run_lesson -> Outcome): one lab/java/RestoreApp.java per mode
(eos, alos, standby) on one input the lab fills to each of RESTORE_SIZES_MB; eos goes down (RESTORE_SHUTDOWN) at each
size, alos and standby at the largest. Where a restore starts depends on the version: a .checkpoint file before
KIP-1035, offsets inside RocksDB in 4.3.1. This module holds the parameters, the refusals and the run's order;
state_restore_apps runs the apps and one shutdown, state_restore_analysis turns what they logged into rows,
state_restore_report presents them."""
from __future__ import annotations

import time

from ...toolbox.checks import half_the_free_disk
from ...toolbox import Param
from ...toolbox.lesson import Lesson
from ...toolbox.predict import choice_table, labels, named, which
from ...errors import LabError
from ...toolbox.result import Exercise, besides, expect, number, shown
from ...toolbox.admin import topic_offsets
from ...toolbox.checks import check_streams_program
from ...toolbox.streams_app import stop_all, wait_running
from .state_restore_analysis import FULL, _stamped, records_for
from .state_restore_apps import MAIN, SOURCES, App, fill, measure
from .state_restore_report import Outcome

# the lesson, and what its tests read here
__all__ = ["lesson", "PARAMS", "RULES", "needs", "run_lesson", "Outcome", "records_for", "disk_needed_mb", "FULL",
           "_stamped"]

MODES = ("eos", "alos", "standby")
OLDEST_SUPPORTED = (3, 0, 0)      # exactly_once_v2, the ThreadMetadata / TaskMetadata interfaces
DEFAULT_VERSION = "4.3.1"
MAX_RECORDS = 2_000_000           # records of the largest size: beyond, filling alone takes minutes here
MAX_MB_TOTAL = 2048               # filled once to the largest size + every eos restore: about 20 MB/s here

PARAMS = [
    Param("restore_sizes_mb", [32, 64, 128], "changelog sizes: the eos app goes down and comes back at each",
          lo=1, hi=1024, unit="MB", why="the input, changelogs and stores must fit this machine's disk"),
    Param("restore_modes", list(MODES), "the apps side by side: eos, exactly-once, one instance; alos, "
          "at-least-once, one instance; standby, exactly-once with standby replicas on RESTORE_INSTANCES instances",
          choices=MODES),
    Param("restore_shutdown", "kill", "how the instance goes down: kill (kill -9) or clean (SIGTERM, then "
          "KafkaStreams.close())", choices=("kill", "clean")),
    Param("restore_version", DEFAULT_VERSION, "Kafka Streams version of the apps (3.0.0 or later)",
          check=lambda v: check_streams_version(v)),
    Param("restore_value_bytes", 1000, "bytes of each value (keys are 10 bytes, all distinct)",
          lo=10, hi=100_000, unit="bytes", why="Kafka's default max.message.bytes is about 1 MB"),
    Param("restore_partitions", 1, "input partitions: tasks, each with its store and changelog partition",
          lo=1, hi=8),
    Param("restore_standbys", 1, "num.standby.replicas of the standby app", lo=0, hi=3),
    Param("restore_instances", 2, "instances of the standby app", lo=1, hi=4),
]


def check_streams_version(version: str, name: str = "RESTORE_VERSION") -> None:
    """Resolve (and compile the app against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="exactly_once_v2 and the ThreadMetadata / TaskMetadata interfaces")


def _something_to_restore(p: dict) -> str | None:
    sizes = p["restore_sizes_mb"]
    if not sizes:
        return "RESTORE_SIZES_MB is empty: give at least one changelog size."
    if not p["restore_modes"]:
        return f"RESTORE_MODES={p['restore_modes']!r}: choose each of {list(MODES)} at most once, at least one."
    return None


def _fits_in_time(p: dict) -> str | None:
    largest = max(p["restore_sizes_mb"])
    records = records_for(largest, p["restore_value_bytes"])
    if records > MAX_RECORDS:
        return (f"{largest} MB of {p['restore_value_bytes']}-byte values is {records:,} records: more than "
                f"{MAX_RECORDS:,}, which this machine cannot fill in a sane time; use larger values or a smaller size.")
    total = largest + (sum(p["restore_sizes_mb"]) if "eos" in p["restore_modes"] else 0)
    if total > MAX_MB_TOTAL:
        return (f"RESTORE_SIZES_MB={p['restore_sizes_mb']} means filling {largest} MB and restoring "
                f"{total - largest} MB, {total} MB in all: more than {MAX_MB_TOTAL} MB, minutes of work on this "
                "machine (2 cores); use fewer or smaller sizes.")
    return None


def disk_needed_mb(p: dict) -> float:
    """The input, and per app its changelog and every instance's store (a standby keeps a copy)."""
    largest = max(p["restore_sizes_mb"]) * 1.2   # record and RocksDB overheads
    copies = sum({"eos": 2, "alos": 2, "standby": 2 + p["restore_standbys"]}[m] for m in p["restore_modes"])
    return largest * (1 + copies)


def _fits_on_disk(p: dict) -> str | None:
    return half_the_free_disk(disk_needed_mb(p) * 2**20, f"RESTORE_SIZES_MB up to {max(p['restore_sizes_mb'])} MB "
                              "(the input, changelogs and stores)")


def _standby_needs_instances(p: dict) -> str | None:
    if "standby" not in p["restore_modes"]:
        return None
    n, s = p["restore_instances"], p["restore_standbys"]
    if n < 2:
        return (f"The standby mode needs at least 2 instances (RESTORE_INSTANCES={n}): one goes down, "
                "another takes over its task.")
    if s > n - 1:
        return (f"RESTORE_STANDBYS={s} needs {s + 1} instances (a standby never sits on the instance of its "
                f"active task), and RESTORE_INSTANCES={n}.")
    return None


RULES = [_something_to_restore, _fits_in_time, _fits_on_disk, _standby_needs_instances]

# The apps the question names, in the order it names them
NAMED = {"eos": "the exactly-once app", "alos": "the at-least-once app", "standby": "the app with a standby replica"}
DESCRIBED = {"eos": "exactly-once on one instance", "alos": "at-least-once on one instance",
             "standby": "exactly-once with a standby replica on a second instance"}
HOW_DOWN = {"kill": "is killed (kill -9)", "clean": "is shut down cleanly"}
NONE = "none of them: their stores are still on local disk"


def _modes(p: dict) -> list:
    return [m for m in MODES if m in p["restore_modes"]]


def _apps(modes: list) -> str:
    return " and ".join(NAMED[m] for m in modes)


# One app alone: what it replays, each a distinct belief too
ALONE = ("nothing: its store is still on local disk", "only what its checkpoint does not cover",
         "the whole changelog, from its first offset")
COUNTS = {2: "Two", 3: "Three"}


def restore_table(p: dict) -> tuple | None:
    """Several apps: none of them; or the first one, two, three in the order exactly-once, at-least-once, standby,
    each set the belief of one reading of a restart (see lab/commands/misconceptions.py). One app: None (ALONE)."""
    modes = _modes(p)
    if len(modes) == 1:
        return None
    every = f"both: {_apps(modes)}" if len(modes) == 2 else "all of them"
    firsts = [modes[:n] for n in range(len(modes) + 1)]
    # "only" before one app alone, not before two of three
    return choice_table((named(apps, modes, _apps, none=NONE, every=every, several=lambda some, _: _apps(some)), apps)
                        for apps in firsts)


def question(p: dict) -> tuple:
    modes, size, down = _modes(p), max(p["restore_sizes_mb"]), HOW_DOWN[p["restore_shutdown"]]
    if len(modes) == 1:
        return (f"An app, {DESCRIBED[modes[0]]}, holds a store whose changelog reaches {size} MB. The instance that "
                f"runs the store {down} and restarted. What does it replay before it processes again?", ALONE)
    apps = "; ".join(DESCRIBED[m] for m in modes)
    return (f"{COUNTS[len(modes)]} apps ({apps}) each hold a store whose changelog reaches {size} MB. In each, the "
            f"instance that runs the store {down} and restarted. Which of them replay the whole changelog before "
            "they process again?", labels(restore_table(p)))


def measured_answer(record: dict, p: dict):
    """Several apps: those whose last shutdown replayed the whole changelog, as the choice that names them (a set
    no choice names, in words). One app: nothing, part or the whole of its changelog."""
    last = {r["mode"]: r for r in record["restore_runs"]}
    modes = _modes(p)
    if any(m not in last for m in modes):
        return None
    if len(modes) == 1:
        row = last[modes[0]]
        return ALONE[2] if row["full_restore"] else ALONE[1] if row["restored_records"] > 0 else ALONE[0]
    full = [m for m in modes if last[m]["full_restore"]]
    return which(full, restore_table(p)) or _apps(full)


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


def run_lesson(lab, p: dict) -> Outcome:
    partitions, sizes = p["restore_partitions"], sorted(p["restore_sizes_mb"])
    topic = lab.topics(f"restore-input-{lab.id[-6:]}", partitions=partitions)[0]
    admin = lab.cluster.admin()
    apps = {mode: App(lab, mode, topic, p) for mode in p["restore_modes"]}
    with lab.step("starting the apps", lane="apps"):
        for app in apps.values():
            app.start()
        wait_running(lab, apps.values(), 120, "the restore apps to run",
                     evidence=lambda: {a.mode: [a.last(x).get("state") for x in a.programs] for a in apps.values()})
    produced, rows = 0, []

    def fill_to(size_mb: float) -> None:
        nonlocal produced
        target = records_for(size_mb, p["restore_value_bytes"])
        with lab.step(f"filling the input to {size_mb:g} MB ({target:,} records)", lane="input"):
            if target > produced:
                fill(lab.bootstrap, topic, produced, target, p["restore_value_bytes"])
                produced = target
            end = sum(topic_offsets(admin, topic, partitions).values())
            for app in apps.values():
                lab.wait(lambda: app.committed_records(admin, partitions) >= end, 60 + target / 2000,
                         f"{app.mode} to process the input ({end:,} records)",
                         evidence=lambda: f"{app.committed_records(admin, partitions):,} committed")
            if "standby" in apps:   # a standby far behind would restore as much as a wiped store
                standby = apps["standby"]
                lab.wait(lambda: all(sum((standby.last(x).get("lag") or {}).values()) <= 10 * partitions
                                     for x in standby.programs if x.alive()), 60,
                         "the standbys to catch up with the changelog",
                         evidence=lambda: [standby.last(x).get("lag") for x in standby.programs])
            # one more progress line from each: the changelog's size as the brokers see it now
            caught_up = time.time()
            lab.wait(lambda: all(a.last(x).get("ts", 0) > caught_up for a in apps.values() for x in a.programs
                                 if x.alive()), 30, "a progress line from each app")

    for i, size in enumerate(sizes):
        fill_to(size)
        if "eos" in apps:
            rows.append(measure(lab, apps["eos"], apps["eos"].programs[0], [], f"eos-{i}", p, admin, size))
    for mode in ("alos", "standby"):
        if mode in apps:
            app = apps[mode]
            down = app.holder()
            survivors = [x for x in app.programs if x is not down] if mode == "standby" else []
            rows.append(measure(lab, app, down, survivors, mode, p, admin, sizes[-1]))
    stop_all(apps.values(), timeout=30)
    return Outcome(rows, p["restore_version"], p["restore_shutdown"], p["restore_standbys"])


# ------------------------------------------------------------------ the exercise

# The exercise's instance: six tasks on one stream thread, each a store whose changelog holds 8 GiB. At any restore
# rate from 20 to 200 MB/s its answer (246 to 2,458 s) stays far from every size the page shows (at most 128 MB at
# the defaults, 48 MB in the small test), so those sizes are refused whatever rate a machine measures.
STORES, STORE_MB = 6, 8 * 1024


def _restore_stores_s(result) -> float:
    """The exercise: seconds for one stream thread to restore STORES stores of STORE_MB each at this run's
    exactly-once restore rate. Judged only on a run whose exactly-once restarts replayed the whole changelog (the
    exercise needs the failure): a run that replayed nothing has no rate to give, and no answer, not even 0, is
    right for it."""
    restore = result.outcome
    eos = restore.of("eos")
    if not eos:
        raise LabError(f"this run has no exactly-once restart (RESTORE_MODES={result.params['restore_modes']}): "
                       "add 'eos' to RESTORE_MODES and run again")
    if not any(r["wiped"] or r["full_restore"] for r in eos):
        raise LabError("this run's exactly-once restarts replayed no changelog, so it measured no restore rate: "
                       "run the lesson with RESTORE_SHUTDOWN = \"kill\"")
    rate = restore.rate("eos")["mb_s"]
    if not rate:
        raise LabError("this run's exactly-once restore was not timed (no restore end in the app's log): run again")
    return round(STORES * STORE_MB / rate, 1)


def _check_restore_stores_s(result, answer) -> None:
    given, right = number(answer, "the seconds"), _restore_stores_s(result)
    expect(given > 0, "a restore that replays a changelog takes time: how long at the measured rate?")
    expect(abs(given * 1024 - right) > 0.1 * right, "8 GiB is 8,192 MB, not 8")
    expect(abs(given * 60 - right) > 0.1 * right, "in seconds, not minutes")
    expect(abs(given * STORES - right) > 0.1 * right,
           f"that is one store's restore; the instance has {STORES}, and after this shutdown which of them are "
           "replayed, by how many threads?")
    expect(abs(given - right) <= 0.1 * right, f"{given:g} s: how many MB does the instance replay in all before it "
                                              "processes again, and how fast did this run restore?")


def _restore_printed(result) -> list:
    """What the notebook shows above the exercise: the sizes (RESTORE_SIZES_MB, the table's size_mb and
    changelog_mb), refused whatever the rate (see STORES); the table's records, times and rates, the 50 GB
    extrapolation (in whole minutes, as the evidence prints it) and RESTORE_VALUE_BYTES, but for those that equal
    this run's answer by chance."""
    restore = result.outcome
    rate = restore.rate("eos")["mb_s"]
    sizes = shown(result.params["restore_sizes_mb"], *(r.get(k) for r in restore.rows for k in ("size_mb",
                                                                                                 "changelog_mb")))
    values = shown(*(r.get(k) for r in restore.rows for k in ("store_records", "restored_records", "restore_s",
                                                              "restore_mb_s", "restore_records_s", "down_s")),
                   result.params["restore_value_bytes"], round(50 * 1024 / rate / 60) if rate else None)
    try:
        answer = _restore_stores_s(result)
    except LabError:   # a run with no restore rate: no answer to be near
        answer = None
    # a rate-dependent value (a restore time, 1000 value bytes at 49 MB/s) can equal the answer by chance: left out
    # then, as no copy of it, within the check's 10 %
    return sizes + [v for v in besides(values, answer, 0.1) if v not in sizes]


EXERCISES = {
    1: Exercise(
        check=_check_restore_stores_s,
        solution=_restore_stores_s,
        why="Under exactly-once a crash leaves each store without a valid checkpoint, so Kafka Streams wipes every "
            "one of them and replays each whole changelog from offset 0: the restore time grows with the total "
            "size of the instance's changelogs. One stream thread restores all of its tasks' stores through one "
            "restore consumer, so six stores take six times as long as one, at the rate this run measured for "
            "the largest exactly-once restore (`restore_mb_s`, MB/s): 6 x 8,192 = 49,152 MB divided by that rate "
            "is the seconds the instance stays down restoring (more threads would share the work).",
        wrong=lambda r: round(_restore_stores_s(r) / STORES, 1),   # the stores taken as restored side by side
        closer="After a crash under exactly-once every store of the instance is wiped and its whole changelog "
               "replayed, and one thread does all the replaying: add up the changelogs, then use the rate the "
               "table's `restore_mb_s` column shows for the largest exactly-once restart.",
        needs_failure=True,
        printed=_restore_printed,
    ),
}


def instances_side_by_side(p: dict) -> int:
    # every mode's app runs through the whole lesson: eos and alos one instance each, standby RESTORE_INSTANCES
    return sum(p["restore_instances"] if mode == "standby" else 1 for mode in p["restore_modes"])


lesson = Lesson("restore", "A restart after a crash", params=PARAMS, rules=RULES, needs=needs, body=run_lesson,
                question=question, measured_answer=measured_answer, exercises=EXERCISES, apps=("RestoreApp",),
                apps_at_once=instances_side_by_side)
