"""Chapter 02's exercises, by lesson: 02a's three on the idle clients, 02b's on Kafka Streams, 02c's on ZooKeeper-era
brokers.
Each check judges the learner's answer by what the lesson's run measured, then by the mechanism.
`printed` gives what a learner could copy from the notebook above each exercise: each check refuses it."""
from __future__ import annotations

import math
import random

from ...cluster import parse_version
from ...toolbox.result import Exercise, called, expect, is_number
from .. import written_fix

# ------------------------------------------------------------------ the exercises

def idle_bounds(expiration_ms, cleanup_ms):
    # not yet expired below the expiration; expired at the first sweep after it: at most one interval later
    return expiration_ms / 1000, (expiration_ms + cleanup_ms) / 1000


def needed_new_producer(table):
    # a producer is reused only after an abortable error the app aborted and went on from; not when the client
    # called the error fatal, or when the app replaced its producer or exited
    if not len(table):
        return set()
    lost = (table["handling"] == "fatal") | table["then"].fillna("").str.contains(r"\b(?:recreate|exit)")
    return set(table[lost]["client"])


def heartbeat_ms(expiration_ms):
    # one missed heartbeat leaves the id two intervals without a transaction: under the expiration, with room
    return expiration_ms // 3


PRODUCTION = (604800000, 3600000)   # the defaults: ids expire after 7 days, swept every hour


def _check_idle_bounds(r, fn) -> None:
    for expiration_ms, cleanup_ms in [(r.params["expiration_ms"], r.params["cleanup_interval_ms"]), PRODUCTION]:
        exp, sweep = expiration_ms / 1000, cleanup_ms / 1000
        call = f"idle_bounds({expiration_ms}, {cleanup_ms})"
        bounds = called(fn, call, expiration_ms, cleanup_ms)
        expect(isinstance(bounds, (tuple, list)) and len(bounds) == 2 and all(map(is_number, bounds)),
               f"{call} returned {bounds!r}: return (shortest, longest), in seconds")
        lo, hi = bounds
        expect(lo <= exp + 0.5, f"an id idle {lo:g} s may already be gone: it expires after {exp:g} s, at a sweep")
        expect(hi >= exp + sweep - 0.5,
               f"an id idle {hi:g} s may still be there: the sweep runs every {sweep:g} s")
        expect(hi - lo <= sweep + 0.5, f"({lo:g}, {hi:g}) is looser than one sweep interval ({sweep:g} s)")
    # The measured idle times (result.expiry()) are shown beside the bounds, not checked against them: a sweep or
    # a transaction's completion delayed by a loaded machine moves them by more than any fixed tolerance.


def _expiration_alone(expiration_ms, cleanup_ms):
    return expiration_ms / 1000, expiration_ms / 1000


def _just_short_of_the_expiration(r):
    """The tempting answer: a heartbeat just short of the expiration, one sweep interval before it (keeps the id
    while none is missed)."""
    cleanup = r.params["cleanup_interval_ms"]
    return lambda expiration_ms: expiration_ms - cleanup


# the expirations a heartbeat function is also tried on, by the arithmetic: a minute, and Kafka's default (7 days)
OTHER_EXPIRATIONS = (60000, PRODUCTION[0])


def _interval(fn, expiration_ms) -> float:
    """The learner's heartbeat_ms(expiration_ms), a positive number shorter than the expiration, with a hint."""
    call = f"heartbeat_ms({expiration_ms})"
    given = called(fn, call, expiration_ms)
    expect(is_number(given), f"{call} returned {given!r}: return the milliseconds between two heartbeats")
    expect(given < expiration_ms, f"{call} = {given:g}: a heartbeat that far apart leaves the id idle at least the "
           f"{expiration_ms / 1000:g} s expiration between two transactions even when none is missed")
    expect(given >= expiration_ms / 4, f"{call} = {given:g}: that keeps the id with room for more than two missed "
           "heartbeats; the question is the longest interval that still has room for one")
    return float(given)


def _check_heartbeat(r, fn) -> None:
    """The learner's heartbeat_ms(expiration_ms), tried on other expirations by the arithmetic (a function that
    returns one number for every expiration is refused before anything runs), then an experiment: the `heartbeat`
    client alone with the interval it gives for this run's expiration, its first heartbeat skipped, idle until two
    intervals and a sweep have passed; what the coordinator did with its id decides. Then, for the other
    expirations, the same rule the experiment measured: two intervals under the expiration."""
    exp, sweep = r.params["expiration_ms"], r.params["cleanup_interval_ms"]
    others = {e: _interval(fn, e) for e in OTHER_EXPIRATIONS if e != exp}
    given = _interval(fn, exp)
    idle_s = math.ceil((2 * given + sweep) / 1000) + 2   # the skipped heartbeat, the next one, a sweep after it
    cluster = r.running_cluster()
    print(f"Exercise 2: the `heartbeat` client alone, a transaction every {given:g} ms while idle {idle_s} s, its "
          "first heartbeat skipped, " + ("on the notebook's cluster ..." if cluster else "on a broker of its own ..."))
    again = r.lesson.run(cluster=cluster, remember=False, **{
        **r.params, "python_modes": ["heartbeat"], "java_clients": [], "heartbeat_ms": int(given),
        "heartbeat_misses": 1, "idle_s": idle_s, "observe_s": 20})
    beat = again.clients["python-heartbeat"]
    gap = beat["longest_idle_s"]
    print(f"Measured: at most {gap:.1f} s without a transaction; the coordinator "
          f"{'expired the id' if beat['expired'] else 'kept the id'}.")
    expect(not beat["expired"], f"with a heartbeat every {given:g} ms and one missed, the id was to go "
           f"{2 * given / 1000:g} s without a transaction, past the {exp / 1000:g} s expiration: a sweep removed it "
           f"before the next heartbeat, which failed ({gap:.1f} s without a transaction that succeeded)")
    expect(gap is not None and gap < exp / 1000, f"the id lived, but it went {gap:.1f} s without a transaction, "
           f"past the {exp / 1000:g} s expiration: it lived because no sweep (every {sweep / 1000:g} s) came in "
           "the few moments it was expired; in production that is a lottery")
    for e, interval in others.items():
        expect(2 * interval < e, f"heartbeat_ms({e}) = {interval:g}: with one missed, that id goes "
               f"{2 * interval / 1000:g} s without a transaction, past its {e / 1000:g} s expiration")


def _other_deployment(table):
    """The run's table as another deployment would show it: its rows under other names, in another order, with a
    client of each kind lesson 02a runs (so a run with few clients is judged on every kind): a crash, a new producer
    on the error, a Java producer that aborted and one whose error was fatal, an abort that went on, no error."""
    import pandas as pd
    error = {"error": "INVALID_PRODUCER_ID_MAPPING", "code": 49, "call": "send_offsets_to_transaction",
             "handling": "abortable", "errors": 1, "recovered": True}
    java = {**error, "error": "InvalidPidMappingException", "call": "commitTransaction"}
    more = [{**error, "client": "crash", "then": "exit -> restarted by the supervisor"},
            {**error, "client": "recreate", "then": "recreate -> rewind"},
            {**error, "client": "abort", "then": "abort -> rewind"},
            {**java, "client": "java-aborted", "then": "aborted"},
            {**java, "client": "java-fatal", "handling": "fatal", "then": "recreated"},
            {"client": "quiet", "error": None, "code": None, "call": None, "handling": None, "then": None,
             "errors": 0, "recovered": True}]
    rows = [*table.to_dict("records"), *more]
    order = list(range(len(rows)))
    random.Random(len(rows)).shuffle(order)   # another order, the same for the same table
    return pd.DataFrame([{**rows[i], "client": f"app-{n + 1}"} for n, i in enumerate(order)],
                        columns=list(table.columns) or None)


def _names(answer, call: str) -> set:
    try:
        names = None if isinstance(answer, (str, dict)) else set(answer)
    except TypeError:
        names = None
    expect(names is not None and all(isinstance(n, str) for n in names),
           f"{call} returned {answer!r}: return a set of client names")
    return names


def _check_needed_new_producer(r, fn) -> None:
    """Judged on this run's table (needs_failure: a run where no client met the error has nothing to judge), then
    on another deployment's (_other_deployment): a function that names this run's clients without reading their
    columns fails there."""
    expect(r.clients, "this run had no client (PYTHON_MODES and JAVA_CLIENTS are empty), so there is no table to "
           "judge the function on: run the lesson with some first")
    table = r.table()
    call = "needed_new_producer(result.table())"
    answer, truth = _names(called(fn, call, table.copy()), call), needed_new_producer(table)
    expect(answer == truth, f"{sorted(answer)}: read each client's `handling` (was the error fatal, did the thread "
                            "die?) and `then` (did the app recreate its producer or exit?)" + (
                                f"; {sorted(answer - truth)} carried on with the same producer" if answer - truth
                                else ""))
    other = _other_deployment(table)
    call = "needed_new_producer(other)"
    answer, truth = _names(called(fn, call, other.copy()), call), needed_new_producer(other)
    expect(answer == truth, "right on this run's table, but on another one (the same rows under other names, "
                            "shuffled, with a few clients of other kinds) it returned " + (
                                f"{sorted(answer)}" if len(answer) < 8 else f"{len(answer)} names") +
           ": decide from each row's columns, not from the client's name or position")


def _every_client(r):
    """Every client of the table, as if error 49 always needed a new producer (one fewer when that happens to be
    right)."""
    every = set(r.clients)
    wrong = every if every != needed_new_producer(r.table()) else set(sorted(every)[1:])
    return lambda table: wrong


def _judged(fn, name: str, versions: dict, why: str) -> None:
    """fn(version) against the truth for each version: a hint naming the first version it gets wrong."""
    for version, truth in versions.items():
        answer = called(fn, f"{name}({version!r})", version)
        expect(isinstance(answer, bool), f"{name}({version!r}) returned {answer!r}: return True or False")
        expect(answer == truth, f"{name}({version!r}) returned {answer}, but {why(version, truth)}")


def survives(version):
    # from 3.8.0 (KAFKA-16699) Streams handles the error like a fencing: the task migrates, the thread goes on
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (3, 8)


def _streams_truth(r) -> dict:
    """Measured: each Streams version of this run that met the error; then releases on either side of 3.8.0."""
    measured = {n.split("-", 1)[1]: c["handling"] == "task migrated" for n, c in r.clients.items()
                if n.startswith("streams") and c["error"]}
    releases = ("2.8.2", "3.6.2", "3.7.2", "3.8.0", "3.8.1", "3.9.1", "4.1.0")
    return {**measured, **{v: parse_version(v) >= (3, 8) for v in releases}}


def _check_survives(r, fn) -> None:
    measured = {n for n, c in r.clients.items() if n.startswith("streams") and c["error"]}
    _judged(fn, "survives", _streams_truth(r), lambda v, truth: (
        f"Kafka Streams {v} " + ("carried on here (the `handling` column: task migrated)" if truth and f"streams-{v}"
                                 in measured else "went to ERROR here (the thread died)" if f"streams-{v}" in measured
                                 else "handles the error like a fencing (task migrated)" if truth
                                 else "lets the exception kill the stream thread") + "; which release changed it?"))


def _old_broker_truth(r) -> dict:
    """Measured: each broker of this run; then releases on either side of 2.4.0."""
    return {**{v: c["reproduced"] for v, c in r.part_c.items()},
            **{v: parse_version(v) < (2, 4) for v in ("1.1.1", "2.3.1", "2.4.0", "2.4.1", "2.8.2", "3.9.1")}}


def forgets(version):
    # brokers before 2.4 drop a producer's state with its last records (KAFKA-7190, fixed in 2.4.0)
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) < (2, 4)


def _check_forgets(r, fn) -> None:
    expect(r.part_c, "this run ran the steps on no broker (ZOOKEEPER_BROKERS is empty): add one and run the lesson "
           "again")
    _judged(fn, "forgets", _old_broker_truth(r), lambda v, truth: (
        f"a broker {v} " + ((("forgot" if truth else "kept") + " the producer in this run") if v in r.part_c else
                            ("forgets" if truth else "keeps") + " the producer") + ": see `log_start_offset`, and "
        "which release stopped dropping producer state with the records"))


# ------------------------------------------------------------------ what the notebooks show above the exercises

def _bounds_printed(r) -> list:
    """What 02a shows above exercise 1, each returned whatever the function is given: the Explain's bounds for this
    run's settings ("idle up to E s never, from E + S s always"), EXPIRATION_MS and IDLE_S in seconds, and the
    shortest and longest `idle when expired (s)` of `result.expiry()`. Kafka's defaults refuse each."""
    p = r.params
    exp, sweep = p["expiration_ms"] / 1000, p["cleanup_interval_ms"] / 1000
    idle = [round(c["sweep"] - c["last_txn"], 2) for c in r.clients.values() if c["sweep"] and c["last_txn"]]
    shown = [(exp, exp + sweep), (exp, p["idle_s"]), *([(min(idle), max(idle))] if idle else [])]
    return [lambda expiration_ms, cleanup_ms, b=b: b for b in shown]


def _heartbeat_printed(r) -> list:
    """What 02a shows above exercise 2, as functions: EXPIRATION_MS, CLEANUP_INTERVAL_MS and IDLE_S in ms whatever
    the expiration, and the expiration itself (the In your app note: "shorter than the expiration"). The arithmetic
    on other expirations refuses each before any experiment runs."""
    p = r.params
    shown = sorted({p["expiration_ms"], p["cleanup_interval_ms"], p["idle_s"] * 1000} - {0})
    return [*(lambda expiration_ms, v=v: v for v in shown), lambda expiration_ms: expiration_ms]


def _new_producer_printed(r) -> list:
    """What 02a shows above exercise 3, as functions of a table: this run's answer read off `result.table()` (the
    same names whatever the table, or those of its names the table holds), every client that met the error, and the
    clients the Mitigate cell runs."""
    table = r.table()
    here = needed_new_producer(table) if len(table) else set()
    hit = {n for n, c in r.clients.items() if c["error"]}
    mitigate = {f"python-{m}" for m in written_fix("02a").get("python_modes", [])}
    return [lambda t: set(here), lambda t: set(t["client"]) & here, lambda t: set(hit), lambda t: set(mitigate)]


def _survives_printed(r) -> list:
    """What 02b shows above its exercise, as functions of a version: the `handling` column looked up (None, False or
    True for the releases it lacks), and "only the release the Mitigate cell runs"."""
    # NOT refused: look-up, see issue 52: the Explain ("From 3.8.0 ...") and the Mitigate cell name the first
    # release that carries on, so "at least the Mitigate cell's release" is the answer; compared as text too
    # (`v >= "3.8.0"`): no release the check tries tells text from numbers.
    shown = {n.split("-", 1)[1]: c["handling"] == "task migrated" for n, c in r.clients.items()
             if n.startswith("streams") and c["error"]}
    fixed = written_fix("02b").get("streams_versions", [])
    return [lambda v: shown.get(v), lambda v: shown.get(v, False), lambda v: shown.get(v, True),
            lambda v: v in fixed]


def _forgets_printed(r) -> list:
    """What 02c shows above its exercise, as functions of a version: the `reproduced` column looked up (None, False
    or True for the brokers it lacks), and "older than the release the Mitigate cell upgrades to"."""
    # NOT refused: look-up, see issue 52: the Explain names the release ("Brokers before 2.4 dropped a producer's
    # state ...; 2.4.0 keeps it"), so "older than 2.4" is the answer; compared as text too (`v < "2.4"`): no
    # release the check tries tells text from numbers.
    shown = {v: c["reproduced"] for v, c in r.part_c.items()}
    upgrades = [parse_version(v) for v in written_fix("02c").get("zookeeper_brokers", [])]
    return [lambda v: shown.get(v), lambda v: shown.get(v, False), lambda v: shown.get(v, True),
            *(lambda v, u=u: parse_version(v) < u for u in upgrades)]


# Each lesson's exercises, numbered as its notebook numbers them
EXERCISES = {"clients": {
    1: Exercise(
        check=_check_idle_bounds, solution=lambda r: idle_bounds, wrong=lambda r: _expiration_alone,
        why="The coordinator does not forget an id the moment it has been idle `transactional.id.expiration.ms`: it "
            "looks at each sweep, every `transaction.remove.expired.transaction.cleanup.interval.ms`. An id idle less "
            "than the expiration is certainly still there; one idle the expiration plus one sweep interval has "
            "certainly met a sweep after its expiration. In between, when the sweep comes decides.",
        closer="Ask two questions: how long can an id sit idle and be sure that no sweep has found it past its "
               "expiration yet, and how long must it sit idle so that at least one sweep surely came after its "
               "expiration?",
        printed=_bounds_printed),
    2: Exercise(
        check=_check_heartbeat, solution=lambda r: heartbeat_ms, wrong=_just_short_of_the_expiration,
        why="Any transaction, even one that only re-commits the offsets, resets the id's idle clock. After one "
            "missed heartbeat the id goes two intervals without a transaction, so two intervals must stay under "
            "the expiration: at most half of it, and a third leaves room for a heartbeat that comes late as well. "
            "A heartbeat just short of the expiration keeps the id only while none is ever missed, and the sweep "
            "interval gives no room: a sweep may come any moment after the expiration.",
        closer="Picture the heartbeat that does not come: count how long the id then goes between two transactions "
               "that do happen, and compare that stretch with the expiration, leaving some room for a heartbeat "
               "that is late.",
        printed=_heartbeat_printed),
    3: Exercise(
        check=_check_needed_new_producer, solution=lambda r: needed_new_producer, wrong=_every_client,
        why="Error 49 is abortable for most of librdkafka's transaction calls (the table of requests in the deep "
            "dive) and for the Java producer before 4.0: abort, and the same producer goes on. A new producer (or a "
            "new process) was needed where the client called the error fatal (the Java producer from 4.0), or where "
            "the app itself recreated its producer or exited: the `handling` and `then` columns of `result.table()` "
            "say which, whatever the client is called.",
        closer="One column says how the client classed the error, another what the app did next. A producer "
               "instance survives only an error it could abort and carry on from; the clients' names tell you "
               "nothing.",
        needs_failure=True, printed=_new_producer_printed),
}, "streams": {
    1: Exercise(
        check=_check_survives, solution=lambda r: survives, wrong=lambda r: (lambda v: False),
        why="Before 3.8.0 Kafka Streams let the error through to the uncaught exception handler, and the default "
            "one stops the client: the source's app shut down. From 3.8.0 (KAFKA-16699) Streams treats it like a "
            "fencing: it closes the task dirty, recreates the producer, rejoins the group and goes on from the "
            "committed offsets. This run's `handling` column shows both.",
        closer="Compare the `handling` column of each release you ran, then find the release whose Kafka Streams "
               "started treating this error like a fencing; compare versions as numbers (major, minor), not as "
               "text.",
        printed=_survives_printed),
}, "old_brokers": {
    1: Exercise(
        check=_check_forgets, solution=lambda r: forgets, wrong=lambda r: (lambda v: parse_version(v) < (2, 5)),
        why="A broker keeps a producer's state in its producer-state snapshots, per partition. Before 2.4 it dropped "
            "that state as soon as retention deleted the producer's last records, so the next transaction met "
            "UNKNOWN_PRODUCER_ID; 2.4.0 keeps it until the transactional id expires (KAFKA-7190, the first change of "
            "KIP-360). KIP-360's other changes came in 2.5: the broker stops answering UNKNOWN_PRODUCER_ID there "
            "(KAFKA-8710), and the producer can bump its epoch and go on. A 2.4 broker already keeps the state.",
        closer="Every broker of the run deleted the producer's records (`log_start_offset`); what differs is whether "
               "it kept the producer's state without them. Find the release that stopped dropping it, and compare "
               "versions as numbers (major, minor).",
        printed=_forgets_printed),
}}
