"""Chapter 02's exercises, by lesson: 02a's three on the idle clients, 02b's on Kafka Streams, 02c's on ZooKeeper-era
brokers.
Each check judges the learner's answer by what the lesson's run measured, then by the mechanism.
`printed` gives what a learner could copy from the notebook above each exercise: each check refuses it."""
from __future__ import annotations

import math
import random

from ...cluster import parse_version
from ...toolbox.result import Exercise, called, expect, is_number, judge_rule
from .. import written_fix
from .txn_unknown_producer import RETENTION_CHECK_MS

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
    more = [{**error, "client": "plain", "then": "exit -> restarted by the supervisor"},
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


def stops(version, idle_s, expiration_ms, cleanup_ms):
    # the id is surely forgotten once it sat idle the expiration and one sweep interval; then Kafka Streams before
    # 3.8.0 lets InvalidPidMappingException kill the stream thread (from 3.8.0, KAFKA-16699: the task migrates)
    forgotten = idle_s * 1000 >= expiration_ms + cleanup_ms
    major, minor = (int(x) for x in version.split(".")[:2])
    return forgotten and (major, minor) < (3, 8)


def _span(seconds: float) -> str:
    """A duration as a hint says it: "90 s", "30 min", "3 h", "1 day", "8 days"."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds // size
            return f"{n:g} {unit}" + ("s" if unit == "day" and n != 1 else "")
    return f"{seconds:g} s"


def _certain(idle_s, after_ms, interval_ms) -> bool:
    # outside the band where a periodic task (the coordinator's sweep, the retention check) decides
    return idle_s * 1000 < after_ms or idle_s * 1000 >= after_ms + interval_ms


# 02b's other settings, (idle_s, expiration_ms, cleanup_ms), outside the band; releases on either side of 3.8.0
STREAMS_SETTINGS = ((6 * 86400, *PRODUCTION), (8 * 86400, *PRODUCTION), (20 * 3600, 86400000, 600000),
                    (25 * 3600, 86400000, 600000))
STREAMS_RELEASES = ("2.8.2", "3.6.2", "3.7.1", "3.8.0", "3.8.1", "3.9.1", "4.3.1")


def _stops_cases(r) -> list:
    """This run's Streams apps (what each did), when its idle time is outside the sweep's band; then the other
    settings with releases on either side, their truth by the rule: the id surely gone, and a release before 3.8."""
    p = r.params
    idle, exp, sweep = p["idle_s"], p["expiration_ms"], p["cleanup_interval_ms"]
    cases = [(f"{n.split('-', 1)[1]!r}, {idle:g}, {exp}, {sweep}", (n.split("-", 1)[1], idle, exp, sweep),
              c["handling"] == "thread died", None)
             for n, c in r.clients.items() if n.startswith("streams") and _certain(idle, exp, sweep)]
    return cases + _other_settings(STREAMS_SETTINGS, STREAMS_RELEASES, (3, 8), lambda v, idle_s, exp_ms, sweep_ms: (
        f"Kafka Streams {v} (idle {_span(idle_s)}, ids expiring after {_span(exp_ms / 1000)}, swept every "
        f"{_span(sweep_ms / 1000)})"))


def _other_settings(settings, releases, fixed_in: tuple, what) -> list:
    """judge_rule's cases for settings the run did not use: each (idle_s, window_ms, every_ms) with each release,
    true when the window surely passed (idle at least the window plus one interval) on a release before
    `fixed_in`; `what(release, *setting)` names the case in a hint."""
    return [(f"{v!r}, {idle}, {window}, {every}", (v, idle, window, every),
             idle * 1000 >= window + every and parse_version(v) < fixed_in, what(v, idle, window, every))
            for idle, window, every in settings for v in releases]


def _check_stops(r, fn) -> None:
    judge_rule(fn, "stops", _stops_cases(r), (("stopped", "carried on"), ("stops", "carries on")),
               "had the coordinator surely forgotten the id by the first input, and what does that release of Kafka "
               "Streams do with InvalidPidMappingException?")


def _every_release_stops(version, idle_s, expiration_ms, cleanup_ms):   # the clock alone, as if 3.8 changed nothing
    return idle_s * 1000 >= expiration_ms + cleanup_ms


def forgets(broker_version, idle_s, retention_ms, check_ms):
    # retention deleted every record of the producer: its newest is older than retention.ms, and a check came since
    # (certain one check interval after); brokers before 2.4 drop its state with them (KAFKA-7190, fixed in 2.4.0)
    records_gone = idle_s * 1000 >= retention_ms + check_ms
    major, minor = (int(x) for x in broker_version.split(".")[:2])
    return records_gone and (major, minor) < (2, 4)


# 02c's other settings, (idle_s, retention_ms, check_ms), outside the band and idle at most a day (ids live 7
# days); releases on either side of 2.4.0, from 1.0.0 (the first with UnknownProducerIdException)
BROKER_SETTINGS = ((1800, 3600000, 300000), (3 * 3600, 3600000, 300000), (4 * 3600, 21600000, 300000),
                   (900, 600000, 60000), (20 * 3600, 43200000, 300000))
BROKER_RELEASES = ("1.0.2", "1.1.1", "2.3.1", "2.4.0", "2.4.1", "2.8.2", "3.7.1", "4.3.1")


def _forgets_cases(r) -> list:
    """This run's brokers (what each answered), when the producer's measured idle time is outside the retention
    check's band; then the other settings with releases on either side, their truth by the rule: records surely
    gone, and a broker before 2.4."""
    retention, check = r.params["retention_ms"], RETENTION_CHECK_MS
    cases = [(f"{v!r}, {c['idle_s']:g}, {retention}, {check}", (v, c["idle_s"], retention, check), c["reproduced"],
              None) for v, c in r.part_c.items() if c.get("idle_s") is not None
             and _certain(c["idle_s"], retention, check)]
    return cases + _other_settings(BROKER_SETTINGS, BROKER_RELEASES, (2, 4), lambda v, idle_s, retention_ms, check_ms: (
        f"broker {v} (idle {_span(idle_s)}, retention.ms {_span(retention_ms / 1000)}, checked every "
        f"{_span(check_ms / 1000)})"))


def _check_forgets(r, fn) -> None:
    expect(r.part_c, "this run ran the steps on no broker (ZOOKEEPER_BROKERS is empty): add one and run the lesson "
           "again")
    judge_rule(fn, "forgets", _forgets_cases(r), (("forgot the producer", "kept it"), ("forgets it", "keeps it")),
               "were the producer's records surely gone by its next commit, and does that release drop a producer's "
               "state with its records?")


def _forgets_before_2_5(broker_version, idle_s, retention_ms, check_ms):   # as if 2.4 forgot too (KIP-360 ended in 2.5)
    return idle_s * 1000 >= retention_ms + check_ms and parse_version(broker_version) < (2, 5)


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


def _stops_printed(r) -> list:
    """What 02b shows above its exercise, as functions of (version, idle_s, expiration_ms, cleanup_ms): the `handling`
    column looked up (None, False or True for the releases it lacks); "all but the release the Mitigate cell runs";
    the Explain's release alone ("From 3.8.0 ..."), as numbers and as text; and the verdict's clock alone ("idle ...
    >= expiration ... + one sweep"), every release stopping."""
    shown = {n.split("-", 1)[1]: c["handling"] == "thread died" for n, c in r.clients.items()
             if n.startswith("streams") and c["error"]}
    fixed = written_fix("02b").get("streams_versions", [])
    return [lambda v, *_: shown.get(v), lambda v, *_: shown.get(v, False), lambda v, *_: shown.get(v, True),
            lambda v, *_: v not in fixed, lambda v, *_: parse_version(v) < (3, 8), lambda v, *_: v < "3.8.0",
            _every_release_stops]


def _forgets_printed(r) -> list:
    """What 02c shows above its exercise, as functions of (broker_version, idle_s, retention_ms, check_ms): the
    `reproduced` column looked up (None, False or True for the brokers it lacks); "older than the release the
    Mitigate cell upgrades to"; the Explain's release alone ("Brokers before 2.4 dropped ..."), as numbers and as
    text; and retention alone (the Key points: retention deletes a producer's records), every release forgetting."""
    shown = {v: c["reproduced"] for v, c in r.part_c.items()}
    upgrades = [parse_version(v) for v in written_fix("02c").get("zookeeper_brokers", [])]
    return [lambda v, *_: shown.get(v), lambda v, *_: shown.get(v, False), lambda v, *_: shown.get(v, True),
            *(lambda v, *_, u=u: parse_version(v) < u for u in upgrades), lambda v, *_: parse_version(v) < (2, 4),
            lambda v, *_: v < "2.4", lambda v, idle_s, retention_ms, check_ms: idle_s * 1000 >= retention_ms + check_ms]


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
        check=_check_stops, solution=lambda r: stops, wrong=lambda r: _every_release_stops,
        why="Two things decide. First the clock: the coordinator forgets an id left idle longer than "
            "`transactional.id.expiration.ms` at its next sweep, every "
            "`transaction.remove.expired.transaction.cleanup.interval.ms`. An app idle shorter than the expiration "
            "meets no error at all, whatever its release; one idle the expiration plus one sweep interval surely "
            "meets INVALID_PRODUCER_ID_MAPPING at its first commit. Then the release: before 3.8.0 Kafka Streams let "
            "the error through to the uncaught exception handler, and the default one stops the client; from 3.8.0 "
            "(KAFKA-16699) Streams treats it like a fencing: it closes the task dirty, recreates the producer, "
            "rejoins the group and goes on from the committed offsets. An app stops for good only when both hold. "
            "Compare versions as numbers (major, minor).",
        closer="Ask two questions of each case: had a sweep surely found the id idle past its expiration when the "
               "input came (count the expiration and the sweep interval against the idle time), and if so, which "
               "releases of Kafka Streams let that error kill the stream thread? Either answer alone is not enough.",
        printed=_stops_printed),
}, "old_brokers": {
    1: Exercise(
        check=_check_forgets, solution=lambda r: forgets, wrong=lambda r: _forgets_before_2_5,
        why="Two things decide. First retention: it deletes whole segments, the active one too, once the newest "
            "record in them is older than `retention.ms`, and the broker looks every "
            "`log.retention.check.interval.ms`. A producer that alone writes to the topic still has its records "
            "when it sat idle shorter than `retention.ms`, and surely has none left after `retention.ms` plus one "
            "check interval. Then the release: a broker keeps a producer's state in its producer-state snapshots, "
            "per partition. Before 2.4 it dropped that state as soon as retention deleted the producer's last "
            "records, so the next transaction met UNKNOWN_PRODUCER_ID; 2.4.0 keeps it until the transactional id "
            "expires (KAFKA-7190, the first change of KIP-360). KIP-360's other changes came in 2.5: the broker "
            "stops answering UNKNOWN_PRODUCER_ID there (KAFKA-8710), and the producer can bump its epoch and go on. "
            "A 2.4 broker already keeps the state. The broker forgets the producer only when both hold.",
        closer="Ask two questions of each case: was every record of the producer surely gone when it committed "
               "again (its idle time against retention.ms and the check interval), and if so, which releases drop "
               "a producer's state with its records? Compare versions as numbers (major, minor).",
        printed=_forgets_printed),
}}
