"""Notebook 07's scenario ("07 · When streams stop moving"), on lab.experiment.lessons: four lessons, each its own
module and its own notebook section: poll_loop (section 1), partitions (partition_parallelism, section 2), lookups
(slow_lookups, section 3) and bounce (broker_bounce, section 4). The notebook runs each alone (run_lesson) on one
cluster; StreamsStopResult shows a lesson and checks the exercises. The bounce lesson needs 3 brokers, so a
notebook that chooses it runs every lesson on a 3-node cluster.
"""
from __future__ import annotations

import math

from ...config import KAFKA_VERSION
from ...experiment.lessons import Lessons, LessonsResult
from ...experiment.result import Exercise, count, expect, judge_rule
from . import broker_bounce, partition_parallelism, poll_loop, slow_lookups


class StreamsStopResult(LessonsResult):
    title = "When streams stop moving"


SCENARIO = Lessons("streams-stop", {
    "poll_loop": ("1 · the poll-interval loop", poll_loop),
    "partitions": ("2 · partitions bound parallelism", partition_parallelism),
    "lookups": ("3 · slow lookups", slow_lookups),
    "bounce": ("4 · broker bounce", broker_bounce),
}, apps=("PollLoopConsumer", "SlowRecordApp", "ThroughputApp", "BounceApp", "lab.apps.consumer_app"),
    result=StreamsStopResult)
SPEC, needs, run = SCENARIO.spec, SCENARIO.needs, SCENARIO.run
predict, run_lesson, together = SCENARIO.predict, SCENARIO.run_lesson, SCENARIO.together

# Each lesson's Mitigate step: the lesson again with the learner's setting (FIX_<LESSON>) over the notebook's. The
# poll lesson's runs only its consumers without a fix: the setting is the fix.
mitigate_poll_loop = SCENARIO.mitigate("poll_loop", poll_fixes=["none"])
mitigate_partitions = SCENARIO.mitigate("partitions")
mitigate_lookups = SCENARIO.mitigate("lookups")
mitigate_bounce = SCENARIO.mitigate("bounce")


# ---------------------------------------------------------------- the exercises

def loops(client, fix, p):
    # the work between two polls (Streams: its one slow record) against the interval; pause_resume keeps polling
    if fix == "pause_resume":
        return False
    work = p["poll_slow_record_ms"] if client == "streams" else \
        (1 if fix == "max_poll_records_1" else p["poll_batch"]) * p["poll_work_ms"]
    return work > (p["poll_longer_interval_ms"] if fix == "longer_interval" else p["poll_interval_ms"])


def _only_the_batch(client, fix, p):
    """A tempting wrong answer: every fix works for every client (max.poll.records=1 taken for a fix of Streams)."""
    return fix == "none" and (p["poll_slow_record_ms"] if client == "streams" else
                              p["poll_batch"] * p["poll_work_ms"]) > p["poll_interval_ms"]


# Exercise 1's other settings: each moves one side of the arithmetic (the interval, the batch, the slow record)
OTHER_SETTINGS = ({"poll_interval_ms": 60_000}, {"poll_batch": 10}, {"poll_slow_record_ms": 1000},
                  {"poll_slow_record_ms": 120_000}, {"poll_work_ms": 200, "poll_longer_interval_ms": 60_000})


def _ran(result: StreamsStopResult, lesson: str) -> bool:
    """True, or the LabError that asks to run that lesson first."""
    result.lesson(lesson).rows
    return True


def _setting(change: dict) -> str:
    return ", ".join(f"{k.upper()}={v:g}" if isinstance(v, float) else f"{k.upper()}={v!r}" for k, v in change.items())


def _check_loops(result: StreamsStopResult, fn) -> None:
    rows, p = result.lesson("poll_loop").rows, result.params   # a lesson that did not run asks to be run first
    cases = [(f"{r['client']!r}, {r['fix']!r}, p", (r["client"], r["fix"], dict(p)), r["looped"], None)
             for r in rows]
    for change in OTHER_SETTINGS:   # the same arithmetic at other settings
        q = {**p, **change}
        cases += [(f"{client!r}, {fix!r}, p", (client, fix, q), poll_loop.expected_to_loop(q, fix, client),
                   _setting(change))
                  for client in poll_loop.CLIENTS for fix in poll_loop.FIXES if poll_loop.applies(client, fix)]
    judge_rule(fn, "loops", cases, (("looped", "read on"), ("loops", "reads on")),
               "compare the work between two of its polls with its max.poll.interval.ms (for Kafka Streams, its one "
               "slow record), and ask what each fix changes")


def keeps_up(mode, p):
    # one call at a time per thread: 1000 / latency records a second, times the threads, or times a batch per call
    per_thread = 1000 / p["lookup_latency_ms"]
    capacity = per_thread * {"plain": 1, "threads": p["lookup_threads"], "batch": p["lookup_batch"]}[mode]
    return p["lookup_rate"] <= capacity


def _one_call_bounds_all(mode, p):
    """A tempting wrong answer: every mode is bound by one call's latency, as if threads and batches changed
    nothing."""
    return p["lookup_rate"] <= 1000 / p["lookup_latency_ms"]


JUDGED_MODES = ("plain", "threads", "batch")   # the cache's budget is its keys' first calls: not this arithmetic


def _clear(p: dict, mode: str) -> bool | None:
    """The budget's verdict where it is clear: True at half the capacity or less, False a quarter above it or more;
    None in between, where the threads' uneven share of the keys, or a slow moment of the machine, decides."""
    ratio = p["lookup_rate"] / slow_lookups.capacity(p, mode)
    return True if ratio <= 0.5 else False if ratio >= 1.25 else None


def _other_lookups(p: dict) -> list[dict]:
    """Exercise 4's other settings: a quarter and three times one thread's budget, one thread for twice it, batches
    of two for four times it."""
    per = 1000 / p["lookup_latency_ms"]
    return [{"lookup_rate": per / 4}, {"lookup_rate": 3 * per}, {"lookup_threads": 1, "lookup_rate": 2 * per},
            {"lookup_batch": 2, "lookup_rate": 4 * per}]


def _check_keeps_up(result: StreamsStopResult, fn) -> None:
    rows, p = result.lesson("lookups").rows, result.params   # a lesson that did not run asks to be run first
    cases = [(f"{r['mode']!r}, p", (r["mode"], dict(p)), r["keeps_up"], None) for r in rows
             if r["mode"] in JUDGED_MODES and _clear(p, r["mode"]) is not None]   # where the budget is clear
    for change in _other_lookups(p):
        q = {**p, **change}
        cases += [(f"{mode!r}, p", (mode, q), _clear(q, mode), f"{_setting(change)}, by the budget,")
                  for mode in JUDGED_MODES if _clear(q, mode) is not None]
    judge_rule(fn, "keeps_up", cases, (("kept up", "fell behind"), ("keeps up", "falls behind")),
               "how many calls can that mode have waiting at once, and how many records does one call answer for?")


def _interval_bounds(result: StreamsStopResult) -> tuple[float, int, int]:
    """Exercise 2: the Java consumer's work between two polls without a fix, and the intervals that count as just
    enough for it: above that work (the broker's minimum session as the floor), at most half as long again."""
    result.lesson("poll_loop").rows   # a lesson that did not run asks to be run first (LabError)
    work = poll_loop.batch_ms(result.params, "none")
    floor = poll_loop.MIN_SESSION_MS
    return work, max(floor, int(work) + 1), max(floor, int(1.5 * work))


def _just_enough_interval(result: StreamsStopResult) -> int:
    """Exercise 2: a quarter more than the work, rounded up to a whole second."""
    work, low, _ = _interval_bounds(result)
    return max(low, -(-int(1.25 * work) // 1000) * 1000)


def _interval_too_short(result: StreamsStopResult) -> int:
    """A tempting wrong answer to exercise 2: a second less than the work (the run then shows the loop); when that
    is below the broker's minimum session, half again too long."""
    work, low, high = _interval_bounds(result)
    return int(work) - 1000 if work - 1000 >= poll_loop.MIN_SESSION_MS else high + 1000


def _check_interval(result: StreamsStopResult, answer) -> None:
    """An experiment: the poll lesson runs again with the learner's interval, the Java consumer alone without a fix,
    and what it measured decides."""
    work, low, high = _interval_bounds(result)
    given = count(answer, "milliseconds")
    expect(given >= poll_loop.MIN_SESSION_MS, f"max.poll.interval.ms = {given} is below {poll_loop.MIN_SESSION_MS} "
           "ms, the broker's minimum session in this lab: the lesson cannot run it")
    expect(given <= high, f"{given} ms would do, but it is more than half as long again as the {work:g} ms of work "
           "between two polls: the smallest interval you would dare to set is the question (a long interval also "
           "makes a consumer that really hangs take that long to leave its group)")
    p, cluster = result.params, result.running_cluster()
    print(f"Exercise 2: running the poll lesson with max.poll.interval.ms = {given}, the Java consumer alone, on "
          + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = SCENARIO.run(cluster=cluster, lessons=["poll_loop"], poll_clients=["java"], poll_fixes=["none"],
                         poll_interval_ms=given, **{k: p[k] for k in ("poll_batch", "poll_work_ms", "poll_records",
                                                                      "poll_watch_s", "poll_loops")})
    row = again.lesson("poll_loop").by_variant()["java/none"]
    print(f"Measured: {row['reads']} reads of {row['distinct_offsets']} offsets, {row['commit_failures']} failed "
          f"commit(s), committed offset {row['committed_offset']} of {row['records']}.")
    expect(not row["looped"], f"with max.poll.interval.ms = {given} the Java consumer still looped (an offset read "
           f"{row['max_reads_per_offset']} times, {row['commit_failures']} failed commit(s)): its {work:g} ms of work "
           "between two polls (POLL_BATCH x POLL_WORK_MS) outlasted the interval")


TARGET_THREADS = 2.5   # exercise 3's input, in threads' worth of work: more than two threads can do, less than three


def target_rate(p: dict) -> float:
    """Exercise 3's input rate, in records per second: two and a half threads' worth at PAR_WORK_MS."""
    return TARGET_THREADS * 1000 / p["par_work_ms"]


def _fewest_partitions(result: StreamsStopResult) -> int:
    """Exercise 3: the fewest partitions on which the app can keep up with target_rate: one task per partition,
    one thread per task, 1000 / PAR_WORK_MS records/s each, however many instances."""
    result.lesson("partitions").rows   # a lesson that did not run asks to be run first (LabError)
    return math.ceil(TARGET_THREADS)


def _check_fewest_partitions(result: StreamsStopResult, answer) -> None:
    """An experiment: the partitions lesson runs again on the learner's partition count, with one instance per
    partition, and the records per second it measured decide."""
    fewest, p = _fewest_partitions(result), result.params
    given, target, per_thread = count(answer, "partitions"), target_rate(p), 1000 / p["par_work_ms"]
    expect(given * per_thread >= target, f"{given} partition(s) are {given} task(s), each on one thread of "
           f"{per_thread:g} records/s at most: {given * per_thread:g} records/s in all, short of {target:g}, however "
           "many instances you start")
    expect(given <= fewest, f"{given} partitions would do, but fewer would too: the question is the fewest (each "
           "extra partition is an extra task to balance, and a stateful app's keys move when partitions are added)")
    cluster = result.running_cluster()
    print(f"Exercise 3: running the partitions lesson on {given} partitions with {given} instances, at "
          f"{p['par_work_ms']:g} ms a record, on " + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = SCENARIO.run(cluster=cluster, lessons=["partitions"], par_partitions=[given], par_instances=[given],
                         par_work_ms=p["par_work_ms"], par_window_s=p["par_window_s"])
    row = again.lesson("partitions").rows[0]
    print(f"Measured: {row['records_per_s']:g} records/s with {row['busy_instances']} busy instance(s), against "
          f"{target:g} records/s coming in.")
    expect(row["records_per_s"] >= target, f"on {given} partitions the app measured {row['records_per_s']:g} "
           f"records/s, short of {target:g} ({row['busy_instances']} of {given} instances busy): measured here, "
           "the app did not keep up")


def dies(app, p):
    # no reachable leader: a send expires after delivery.timeout.ms; before 2.8 that kills the thread, from 2.8 on
    # the task is revived from its last commit (or a replace_thread handler replaces the thread)
    if p["bounce_replication"] > 1 or p["bounce_brokers"] == "all":
        return False   # a follower takes over, or the input is down too and nothing is sent
    major, minor = (int(x) for x in app.split("/")[0].split(".")[:2])
    return (major, minor) < (2, 8) and p["bounce_down_s"] * 1000 > p["bounce_delivery_timeout_ms"]


def _every_expired_send_kills(app, p):
    """A tempting wrong answer: any app dies once a send expires, as if 2.8 had changed nothing."""
    return p["bounce_replication"] == 1 and p["bounce_brokers"] != "all" \
        and p["bounce_down_s"] * 1000 > p["bounce_delivery_timeout_ms"]


def _other_bounces(p: dict) -> list[tuple[dict, tuple]]:
    """Exercise 5's other settings, each with the apps whose outcome there is certain, with a wide margin (a bounce
    also keeps the leader away while it restarts, about 10 s here): a delivery timeout four times the down time, three
    replicas, and three times the timeout down (where a 2.8+ app with shutdown_client is left out: KIP-572 says it
    dies after task.timeout.ms more, but this lab's runs on 4.3.1 saw its expired sends revive the task instead, and
    never reach that timeout)."""
    timeout_s, down_s = p["bounce_delivery_timeout_ms"] / 1000, max(p["bounce_down_s"], 1)
    every = ("2.7.2", "2.8.2/replace_thread", f"{KAFKA_VERSION}/shutdown_client")
    return [({"bounce_delivery_timeout_ms": int(4000 * down_s)}, every),
            ({"bounce_replication": 3}, every),
            ({"bounce_down_s": 3 * timeout_s}, ("2.7.2", "2.8.2/replace_thread"))]


def _check_dies(result: StreamsStopResult, fn) -> None:
    rows, p = result.lesson("bounce").rows, result.params   # a lesson that did not run asks to be run first
    cases = [(f"{r['app']!r}, p", (r["app"], dict(p)), r["died"], None) for r in rows]
    for change, apps in _other_bounces(p):
        q = {**p, **change}
        cases += [(f"{app!r}, p", (app, q), broker_bounce.expected_to_die(q, broker_bounce.parse_variant(app)),
                   _setting(change)) for app in apps]
    judge_rule(fn, "dies", cases, (("died", "lived"), ("dies", "lives")),
               "how long was the output without a leader it could reach, against which timeout, and what does that "
               "version do when a send expires?")


StreamsStopResult.exercises = {
    1: Exercise(
        check=_check_loops,
        solution=lambda result: _ran(result, "poll_loop") and loops,
        why="A consumer loops when the work between two of its polls lasts longer than `max.poll.interval.ms`: its "
            "own client drops it from the group, its commit fails, and the next poll rejoins at the last committed "
            "offset, the same batch again. The work is `max.poll.records` x the time per record for the plain "
            "clients; for Kafka Streams it is its one slow record, which `max.poll.records=1` does not shorten. A "
            "longer interval moves the bound; pause/resume keeps calling poll() while a worker processes, so no "
            "work counts against it. The table's `batch_ms` and `interval_ms` show the two sides for each variant.",
        wrong=lambda result: _ran(result, "poll_loop") and _only_the_batch,
    ),
    2: Exercise(
        check=_check_interval,
        solution=_just_enough_interval,
        why="Without a fix, the Java consumer works `POLL_BATCH x POLL_WORK_MS` between two polls. The interval must "
            "be longer than that, with a margin for the fetch and the commit and for a slower moment of the machine: "
            "a quarter more, rounded up to a whole second, is the answer here. Much more than that also works, but "
            "a consumer that really hangs then keeps its partitions that long before the group moves on. Fewer "
            "records per poll (`max.poll.records`) shrink the work instead of stretching the interval.",
        wrong=_interval_too_short,
    ),
    3: Exercise(
        check=_check_fewest_partitions,
        solution=_fewest_partitions,
        why="A partition is one task, and a task runs on one thread of one instance. However many instances you "
            "add, at most as many threads as the topic has partitions have work, each doing at most `1000 / "
            "PAR_WORK_MS` records a second: the partitions times that is the app's ceiling. Two and a half threads' "
            "worth of input needs a third partition: on two, the app does two threads' worth and its lag grows for "
            "ever, whatever the instances (the parallelism table shows it: past the partitions, `records_per_s` "
            "stops growing and the extra instances are idle). A thread measured here does a little less than "
            "`1000 / PAR_WORK_MS` (its polls and commits take time too), so three partitions leave some headroom "
            "but not much. Adding partitions to a live topic moves a stateful app's keys: plan them ahead.",
        wrong=lambda r: _fewest_partitions(r) - 1,   # two and a half rounded down
    ),
    4: Exercise(
        check=_check_keeps_up,
        solution=lambda result: _ran(result, "lookups") and keeps_up,
        why="With one call per record, a thread waits `LOOKUP_LATENCY_MS` for each record and does nothing else "
            "meanwhile: in a second, 1000 ms, it finishes `1000 / LOOKUP_LATENCY_MS` records. That is one thread's "
            "budget. `threads` has `LOOKUP_THREADS` calls waiting at once, so its budget is that many times larger "
            "(when the keys spread evenly over its partitions: the busiest one decides); `batch` answers "
            "`LOOKUP_BATCH` records with one call. A mode keeps up when `LOOKUP_RATE` is within its budget; past "
            "it, the lag grows for ever. The lookup table's `capacity_per_s` is that budget, and `keeps_up` what "
            "the run measured. Near the budget a run can go either way, so the check leaves that zone out.",
        wrong=lambda result: _ran(result, "lookups") and _one_call_bounds_all,
    ),
    5: Exercise(
        check=_check_dies,
        solution=lambda result: _ran(result, "bounce") and dies,
        why="An app dies when its output has no leader it can reach for longer than a send may wait: its producer "
            "gives up `delivery.timeout.ms` after the send (the leader stays away for `BOUNCE_DOWN_S` and its "
            "restart). Before 2.8 that expired send kills the stream thread, "
            "and with one thread the instance (`ERROR`). From 2.8 on the task is marked corrupted and revived from "
            "its last commit (KIP-572), so the app lives; with `replace_thread` (KIP-671) even a thread that dies is "
            "replaced. Measured here on 4.3.1, not documented: `task.timeout.ms` was never reached that way. With "
            "three replicas a follower takes over the leadership; with the whole cluster down the input is down "
            "too, nothing is sent and nothing expires (measured here with 15 s down). The bounce table's `died` "
            "and `died_after_s` show each app.",
        wrong=lambda result: _ran(result, "bounce") and _every_expired_send_kills,
    ),
}
