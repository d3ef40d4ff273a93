"""Chapter 03's exercises, by lesson: 03a's two on the app under study (the stall, a clean quota measured for larger
records), 03b's on the sweep (the smallest quota that lets one transaction through, on clients with and without the
fix). Each exercise's `printed` lists what a learner could copy from above it: the check refuses every one."""
from __future__ import annotations

import math

from ...toolbox.result import Exercise, called, expect, is_number, number
from .quota_fencing_analysis import WIRE_OVERHEAD_BYTES, quota_for

# ---------------------------------------------------------------- 03a

def stall_s(request_timeout_ms, transaction_timeout_ms, throttle_ms):
    # KAFKA-17455: a client without the fix waits out its whole request.timeout.ms, whatever the throttle asked
    return request_timeout_ms / 1000


def _throttle_only(request_timeout_ms, transaction_timeout_ms, throttle_ms):
    """A tempting wrong answer: the wait the broker asked for, which a fixed client keeps to."""
    return throttle_ms / 1000


def _stuck(r) -> list[tuple]:
    """This run's stuck requests: per Streams app whose longest transactional wait was far beyond any throttle,
    (its request.timeout.ms, its transaction.timeout.ms, its longest throttle, that wait)."""
    out = []
    for v in r.roles.values():
        row = r.main.row(v.name)
        wait, throttle = row["longest_txn_wait_s"] or 0, row["throttle_max_ms"] or 0
        if v.client == "streams" and wait > max(3.0, 3 * throttle / 1000):
            out.append((v.request_timeout_ms, v.txn_timeout_ms, throttle, wait))
    return out


def _check_stall(r, fn) -> None:
    cases = [(*args, wait, "a request of this run") for *args, wait in _stuck(r)]
    cases += [(30000, 10000, 1500, 30.0, "the report's client, throttled 1.5 s"),
              (5000, 60000, 800, 5.0, "a client with request.timeout.ms 5 s and transaction.timeout.ms 60 s")]
    for request_ms, txn_ms, throttle_ms, truth, what in cases:
        call = f"stall_s({request_ms}, {txn_ms}, {throttle_ms:g})"
        given = called(fn, call, request_ms, txn_ms, throttle_ms)
        expect(is_number(given), f"{call} returned {given!r}: return a number of seconds")
        expect(abs(given - truth) <= max(1.0, 0.1 * truth),
               f"{call} = {given:g} s, but {what} waited {truth:g} s: which producer setting bounds the wait of a "
               "request the client believes it may not send yet? (seconds, not milliseconds)")


def _stall_printed(r) -> list:
    """What 03a shows above exercise 1: the app's longest wait and throttle (its table), and functions that return
    them whatever they are given."""
    row = r.row("app")
    wait, throttle = row["longest_txn_wait_s"] or 0, (row["throttle_max_ms"] or 0) / 1000
    return [wait, lambda *_: wait, lambda *_: throttle]


def _bigger_records(p: dict) -> int:
    """Exercise 2's record size: twice the run's, so no quota the run showed answers it."""
    return 2 * p["record_bytes"]


def _headroom_quota(r) -> int:
    return quota_for(1 / 1.5, r.params["send_rate"], _bigger_records(r.params))


def _check_clean_quota(r, answer) -> None:
    """An experiment: 03a's app under study runs again, alone, with records twice the run's and the learner's quota,
    and what it measured decides. A quota below that load, or more than twice it, is refused before anything runs."""
    p = r.params
    given, rate, state = number(answer, "the quota in bytes/s"), p["send_rate"], _bigger_records(p)
    load, run_load = rate * (state + WIRE_OVERHEAD_BYTES), rate * (p["record_bytes"] + WIRE_OVERHEAD_BYTES)
    if given < load:
        expect(given < rate * state, "that covers the state bytes only: each record also puts a changelog key, an "
               f"output record and batch overhead on the wire (about {WIRE_OVERHEAD_BYTES} B a record here: the "
               "table's `load_ratio` x `quota_Bps` is the run's whole load), and the quota counts them all")
        expect(given < run_load, f"{given:,.0f} B/s would carry the run's records (about {run_load:,.0f} B/s on the "
               f"wire), but these hold {state} B of state each, twice as much: work the load out for them")
        expect(False, f"a quota of {given:,.0f} B/s is below this load (about {load:,.0f} B/s on the wire): the "
               "producer cannot send faster than its quota, so a backlog grows until one transaction holds more "
               "than the quota lets through within TRANSACTION_TIMEOUT_MS")
    expect(given <= 2 * load, f"{given:,.0f} B/s would do, but it is more than twice the load (about {load:,.0f} "
           "B/s on the wire): a quota that far above the load no longer protects the brokers. The question is the "
           "smallest quota you would dare to set")
    cluster = r.running_cluster()
    print(f"Exercise 2: running the lesson's app (Kafka Streams {p['streams_version']}) alone, {state} B of state a "
          f"record, with QUOTA = {given:,.0f} B/s (the load at {load / given:.2f}x it), for {p['duration_s']} s, on "
          + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = r.lesson.run(cluster=cluster, quota=int(given), record_bytes=state, compare=[], variants=[],
                         remember=False, **{k: p[k] for k in ("streams_version", "send_rate", "transaction_timeout_ms",
                                                               "duration_s")})
    row = again.row("app")
    print(f"Measured: throttled up to {row['throttle_max_ms'] or 0:g} ms, the longest transactional request "
          f"waited {row['longest_txn_wait_s'] or 0:g} s, {row['crashes']} fencing incident(s), "
          f"{row['output_records']} of {row['produced']} records in the read_committed output.")
    expect(row["crashes"] == 0, f"with QUOTA = {given:,.0f} B/s Kafka Streams {p['streams_version']} was fenced "
           f"({row['mechanism']}): a throttle, however short, makes a client without the fix wait out "
           "request.timeout.ms. Leave room above the load for its bursts")


def _quota_printed(r) -> list:
    """What 03a shows above exercise 2: every quota of its tables (the headroom variant's among them, at the
    notebook's defaults) and the Mitigate call's value."""
    p = r.params
    shown = [r.row(role)["quota_Bps"] for role in r.roles] + [p["quota"], 60000]
    return [q for q in shown if q] + [quota_for(1 / p["headroom"], p["send_rate"], p["record_bytes"])]


# ---------------------------------------------------------------- 03b

def smallest_quota(records, record_bytes, transaction_timeout_ms, fixed):
    # without the fix, once throttled, its next transactional request waits out request.timeout.ms (30 s): past
    # every timeout tried here, whatever the quota
    if not fixed:
        return float("inf")
    # with the fix: the transaction's bytes on the wire get through at the quota's pace, before the coordinator aborts
    return records * (record_bytes + 140) / (transaction_timeout_ms / 1000)


def _every_client_alike(records, record_bytes, transaction_timeout_ms, fixed):
    """A tempting wrong answer: the bytes' budget alone, as if no client stalled."""
    return records * (record_bytes + 140) / (transaction_timeout_ms / 1000)


def _fenced_transactions(r) -> list[tuple]:
    """This run's transactions fenced behind a quota, one per Streams point (its first incident with records open
    before it): (what, records, state bytes, transaction timeout, fixed). A fixed client's counts only when an
    oversized transaction fenced it: a stall it cannot have had."""
    out = []
    for m in r.sweep:
        for v in [v for v in m.variants if v.client == "streams" and v.quota]:
            fixed = bool(r.fix_in_bytecode.get(v.version))
            for _, crash in m.crashes(v.name).iterrows():
                t, timeout = crash["t_s"], v.txn_timeout_ms / 1000   # the window mechanism() reads
                mine = m.metrics[(m.metrics["variant"] == v.name) & m.metrics["t_s"].between(t - timeout - 2, t + 1)]
                records = mine["open_records"].max() if len(mine) else 0
                if records == records and records >= 1 and (not fixed or crash["mechanism"].startswith(
                        "transaction larger")):
                    out.append((f"this run's point {v.name}, fenced with its quota of {v.quota:,} B/s", int(records),
                                v.state_bytes, v.txn_timeout_ms, fixed))
                    break
    return out


def _check_smallest_quota(r, fn) -> None:
    """The rule, tried on this run's fenced transactions, then on record sizes and timeouts the run did not use."""
    cases = _fenced_transactions(r) + [
        ("a backlog of small records", 2000, 200, 4000, True), ("a 5 s transaction timeout", 300, 4096, 5000, True),
        ("records of 100 KB and a 30 s timeout", 60, 100_000, 30000, True),
        ("a small transaction", 10, 512, 15000, False)]
    for what, records, state, timeout_ms, fixed in cases:
        call = f"smallest_quota({records}, {state}, {timeout_ms}, {fixed})"
        given = called(fn, call, records, state, timeout_ms, fixed)
        expect(is_number(given), f"{call} returned {given!r}: return bytes per second, or float('inf')")
        if not fixed:
            expect(math.isinf(given), f"{call} = {given:,.0f} B/s, but for {what}: on a client without the fix, once "
                   "throttled, how long does the next transactional request wait, and how long may the transaction "
                   f"stay open ({timeout_ms} ms)?")
            continue
        wire, seconds = records * (state + WIRE_OVERHEAD_BYTES), timeout_ms / 1000
        truth = wire / seconds
        if abs(given - truth) <= 0.05 * truth:
            continue
        near = lambda x: abs(given - x) <= 0.05 * x   # noqa: E731
        expect(not math.isinf(given), f"{call} = inf, but for {what}: a client with the fix waits only the throttle "
               "time, so some quota lets the transaction through in time")
        expect(not near(truth / 1000), f"{call}: transaction_timeout_ms is in milliseconds, a quota in bytes per "
               "second")
        expect(not near(records * state / seconds), f"{call}, for {what}: the quota counts every byte a record "
               f"puts on the wire, its state plus about {WIRE_OVERHEAD_BYTES} B (key, output record, batch headers)")
        expect(given > truth, f"{call} = {given:,.0f} B/s, but for {what}: at that pace the records take longer "
               f"to get through than the {seconds:g} s the coordinator lets the transaction stay open")
        expect(False, f"{call} = {given:,.0f} B/s lets the transaction through in time for {what}, but so does a "
               "smaller quota: the question is the smallest")


def _sweep_printed(r) -> list:
    """What 03b shows above exercise 1: the table's quotas, the Mitigate step's (in its "In your app"), and
    functions that return the top quota or the bytes it passes within the run's transaction timeout."""
    p = r.params
    table, mitigated = [int(q) for q in r.sweep_table()["quota_Bps"]], quota_for(0.7, p["send_rate"], p["record_bytes"])
    top, seconds = max(table), p["transaction_timeout_ms"] / 1000
    return [*table, mitigated, lambda *_: top, lambda *_: top * seconds, lambda *_: mitigated]


# Each lesson's exercises, numbered as its notebook numbers them
EXERCISES = {"over_quota": {
    1: Exercise(
        check=_check_stall,
        solution=lambda r: stall_s,
        why="Over its quota, the broker answers with a throttle time and the client marks the connection not ready "
            "until then. Before the fix (KAFKA-17455), `NetworkClientUtils.awaitReady` polled with the whole "
            "request timeout instead of the throttle delay, so a transactional request waits out "
            "`request.timeout.ms` (30 s by default), however short the throttle, and however long the transaction "
            "may stay open. The stuck request's `wait_s` in `result.main.waits` shows it; a fixed client waits "
            "about the throttle time.",
        wrong=lambda r: _throttle_only,
        closer="Put the stuck request's `wait_s` (in `result.main.waits`) beside the app's row of `result.table()`: "
               "which of its timeouts lasts as long, and does the throttle (`throttle_max_ms`) change the wait at "
               "all?",
        printed=_stall_printed,
    ),
    2: Exercise(
        check=_check_clean_quota,
        solution=_headroom_quota,
        why="The quota counts every byte a record puts on the wire: its state, here `2 * RECORD_BYTES`, plus the "
            "changelog key, the output record and batch overhead (about 140 B a record, measured: the table's "
            "`load_ratio` x `quota_Bps` is the run's whole load), at `SEND_RATE` records a second. Below that load "
            "the producer falls behind for good. Just above it, the load's bursts still meet a throttle, and any "
            "throttle makes a client without the fix wait out `request.timeout.ms`. This solution keeps 50 % "
            "headroom: a quota 1.5 times the load, the load at `1 / 1.5` of the quota: "
            "`round(1.5 * SEND_RATE * (2 * RECORD_BYTES + 140))`. The run's headroom quota does not carry over: the "
            "140 B a record stay, the state doubles. Where between the load and that a client without the fix "
            "starts to run clean depends on how bursty the load is: measured here, not documented. The real remedy "
            "is a client with the KAFKA-17455 fix (4.0 or later, or 3.9.1).",
        wrong=lambda r: quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"]),   # the run's records
        closer="The quota is counted over short windows, and the load comes in bursts: a client without the fix is "
               "safe only if the broker never throttles it, so the quota must sit above the load's peaks, not its "
               "average. Count every byte a record of this size puts on the wire.",
        printed=_quota_printed,
    ),
}, "sweep": {
    1: Exercise(
        check=_check_smallest_quota,
        solution=lambda r: smallest_quota,
        why="Behind a quota a producer cannot send faster than the quota, and the coordinator aborts a transaction "
            "still open after `transaction.timeout.ms`, then fences the producer. A transaction of `records` records "
            "puts `records * (record_bytes + 140)` bytes on the wire; they get through in time only if the quota is "
            "at least those bytes / (transaction_timeout_ms / 1000). A client with the fix waits just the throttle "
            "time on top (a second or so, left out here: leave headroom). A client without it, once throttled, "
            "holds its next transactional request for `request.timeout.ms` (30 s), longer than every timeout "
            "tried here: no quota that throttles it keeps it unfenced, only one it never meets, or a newer client. "
            "The sweep's fenced points show both: the `mechanism` column names a stuck request or an oversized "
            "transaction.",
        wrong=lambda r: _every_client_alike,
        closer="Two things keep a transaction open behind a quota: its bytes, which get through no faster than the "
               "quota, and, on a client without the fix, the wait of its next transactional request. The "
               "coordinator aborts it once it has been open for transaction_timeout_ms.",
        printed=_sweep_printed,
    ),
}}
