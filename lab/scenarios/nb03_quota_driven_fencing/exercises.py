"""Chapter 03's exercises, by lesson: 03a's two on the app under study (the stall, a clean quota measured), 03b's on
the sweep (a transaction's budget)."""
from __future__ import annotations

from ...toolbox.result import Exercise, called, expect, is_number, number
from .quota_fencing_analysis import WIRE_OVERHEAD_BYTES, quota_for

# ---------------------------------------------------------------- the exercises

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


def _headroom_quota(r) -> int:
    return quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"])


def _check_clean_quota(r, answer) -> None:
    """An experiment: 03a's app under study runs again, alone, with the learner's quota, and what it measured
    decides. A quota below the load, or more than twice it, is refused before anything runs."""
    p = r.params
    given, rate, state = number(answer, "the quota in bytes/s"), p["send_rate"], p["record_bytes"]
    load = rate * (state + WIRE_OVERHEAD_BYTES)
    if given < load:
        expect(given < rate * state, "that covers the state bytes only: each record also puts a changelog key, an "
               f"output record and batch overhead on the wire (about {WIRE_OVERHEAD_BYTES} B a record here: the table's "
               "`load_ratio` x `quota_Bps` is the whole load), and the quota counts them all")
        expect(False, f"a quota of {given:,.0f} B/s is below this load (about {load:,.0f} B/s on the wire): the "
               "producer cannot send faster than its quota, so a backlog grows until one transaction holds more "
               "than the quota lets through within TRANSACTION_TIMEOUT_MS")
    expect(given <= 2 * load, f"{given:,.0f} B/s would do, but it is more than twice the load (about {load:,.0f} "
           "B/s on the wire): a quota that far above the load no longer protects the brokers. The question is the "
           "smallest quota you would dare to set")
    cluster = r.running_cluster()
    print(f"Exercise 2: running the lesson's app (Kafka Streams {p['streams_version']}) alone with QUOTA = "
          f"{given:,.0f} B/s (the load at {load / given:.2f}x it), for {p['duration_s']} s, on "
          + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = r.lesson.run(cluster=cluster, quota=int(given), compare=[], variants=[], remember=False,
                         **{k: p[k] for k in ("streams_version", "send_rate", "record_bytes", "transaction_timeout_ms",
                                              "duration_s")})
    row = again.row("app")
    print(f"Measured: throttled up to {row['throttle_max_ms'] or 0:g} ms, the longest transactional request "
          f"waited {row['longest_txn_wait_s'] or 0:g} s, {row['crashes']} fencing incident(s), "
          f"{row['output_records']} of {row['produced']} records in the read_committed output.")
    expect(row["crashes"] == 0, f"with QUOTA = {given:,.0f} B/s Kafka Streams {p['streams_version']} was fenced "
           f"({row['mechanism']}): a throttle, however short, makes a client without the fix wait out "
           "request.timeout.ms. Leave room above the load for its bursts")


def _top_quota(r) -> int:
    """The quota of the sweep's points at its highest ratio (the table's `quota_Bps`)."""
    p = r.params
    return quota_for(max(p["sweep_ratios"]), p["send_rate"], p["record_bytes"])


def _transaction_budget(r) -> float:
    """The bytes that quota lets through within one transaction timeout: more in one transaction, and it is
    aborted."""
    return _top_quota(r) * r.params["transaction_timeout_ms"] / 1000


def _check_transaction_budget(r, answer) -> None:
    given, right, quota = number(answer, "a number of bytes"), _transaction_budget(r), _top_quota(r)
    expect(abs(given - right * 1000) > 0.05 * right, "TRANSACTION_TIMEOUT_MS is in milliseconds and a quota in "
           "bytes per second: convert the timeout to seconds")
    expect(abs(given - quota) > 0.05 * right, "that is what the quota lets through in one second; a transaction may "
           "stay open for TRANSACTION_TIMEOUT_MS")
    expect(abs(given - right) <= 0.05 * right, f"{given:,.0f} B is not what the quota of the highest ratio "
           f"({quota:,} B/s, the table's `quota_Bps`) lets through within one TRANSACTION_TIMEOUT_MS")


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
    ),
    2: Exercise(
        check=_check_clean_quota,
        solution=_headroom_quota,
        why="The quota counts every byte a record puts on the wire: its state (`RECORD_BYTES`) plus the changelog "
            "key, the output record and batch overhead (about 140 B a record, measured: the table's `load_ratio` "
            "x `quota_Bps` is the whole load), at `SEND_RATE` "
            "records a second. Below that load the producer falls behind for good. Just above it, the load's "
            "bursts still meet a throttle, and any throttle makes a client without the fix wait out "
            "`request.timeout.ms`. This solution keeps 50 % headroom: a quota 1.5 times the load, "
            "the load at `1 / 1.5` of the quota: `round(1.5 * SEND_RATE * (RECORD_BYTES + 140))`. Where between the "
            "load and that a client without the fix starts to run clean depends on how bursty the load is: measured here, not "
            "documented. The real remedy is a client with the KAFKA-17455 fix (4.0 or later, or 3.9.1).",
        wrong=lambda r: quota_for(1.5, r.params["send_rate"], r.params["record_bytes"]),   # load 1.5x the quota
        closer="The quota is counted over short windows, and the load comes in bursts: a client without the fix is "
               "safe only if the broker never throttles it, so the quota must sit above the load's peaks, not its "
               "average. Count every byte a record puts on the wire.",
    ),
}, "sweep": {
    1: Exercise(
        check=_check_transaction_budget,
        solution=_transaction_budget,
        why="The coordinator aborts a transaction still open after `transaction.timeout.ms`. Behind a quota the "
            "producer cannot send faster than the quota, so a transaction whose bytes take longer than the timeout "
            "to get through is aborted, whatever the client version: the quota x TRANSACTION_TIMEOUT_MS / 1000 "
            "bytes, for the points of the highest ratio their `quota_Bps`. "
            "A backlog (after a stall, or at a high load / quota ratio) packs more than that into one transaction: "
            "that is the oversized transaction that fences fixed clients in the sweep.",
        wrong=lambda r: _top_quota(r) * r.params["transaction_timeout_ms"],   # milliseconds as seconds
        closer="Picture one transaction's bytes queued behind the quota: the broker lets them through at the "
               "quota's pace, and the coordinator stops waiting after TRANSACTION_TIMEOUT_MS. How many bytes get "
               "through before it stops?",
    ),
}}
