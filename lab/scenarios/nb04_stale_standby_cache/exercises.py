"""Lesson 04's exercises: which role histories can go stale (this run's, then others the source decides), and the
count written in a case the run did not play (two instances trading a task). `printed` gives what a learner could
copy from the notebook above each exercise: each check refuses it."""
from __future__ import annotations

from ...errors import LabError
from ...toolbox.result import Exercise, besides, expect, judge_rule, shown, whole
from .stale_standby_report import AFTER_READ_S, StaleStandbyResult, Variant


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
    # Kafka Streams 3.3.1: the thread's cache keeps the task's entries from its last active period here unless that
    # period ended in a close (the task left while active) or the instance stopped; recycling into a standby, and
    # closing a standby (whose stores use a stand-in cache), leave them. Back to active, get() finds them first.
    kept = False
    for was, now in zip(roles, roles[1:]):
        if now == "stopped":
            kept = False              # the process, and its cache, are gone
        elif was == "active":
            kept = now == "standby"   # recycled: kept; closed ("none"): removed
    return bool(roles) and roles[-1] == "active" and kept


# Role histories every answer is judged on besides this run's, by Kafka Streams 3.3.1's source (ThreadCache,
# CachingKeyValueStore.close, StandbyTaskCreator's 0-byte dummyCache, ProcessorStateManager.recycle): a second round
# trip, a standby that left and came back, a restart or a close in between, a promoted standby.
MECHANISM = [(["active", "standby", "active"], True), (["active", "standby", "active", "standby", "active"], True),
             (["active", "standby", "none", "active"], True),
             (["active", "standby", "none", "standby", "active"], True),
             (["standby", "active", "standby", "active"], True),
             (["active", "stopped", "active", "standby", "active"], True),
             (["standby", "active"], False), (["active", "none", "active"], False),
             (["active", "none", "standby", "active"], False),
             (["active", "standby", "stopped", "standby", "active"], False),
             (["active", "standby", "active", "none", "active"], False), (["active"], False)]
AFFECTED = "Kafka Streams 3.3.1 and the cache on"


def _check_goes_stale(r: StaleStandbyResult, fn) -> None:
    """The learner's goes_stale(roles): True on every role history this run read a stale value after (measured),
    on the others of this run as the mechanism decides them on 3.3.1 with the cache on (a read there can go right
    when the key was not written elsewhere meanwhile, or on a fixed version), then on MECHANISM, whose histories the
    Explain's "active -> standby -> active" does not settle."""
    seen = reads_by_roles(r.main)
    if not seen:
        raise LabError("this run read nothing, so there is nothing to judge the function on: run the lesson again "
                       "at its defaults.")
    ran = [(list(roles), bool(stale)) for (_, _, roles), (_, stale) in sorted(seen.items(), key=lambda kv: -kv[1][1])]
    cases = [(repr(roles), (roles,), True, None) if stale else (repr(roles), (roles,), goes_stale(roles), AFFECTED)
             for roles, stale in ran]
    cases += [(repr(roles), (list(roles),), truth, AFFECTED) for roles, truth in MECHANISM]
    judge_rule(fn, "goes_stale", cases, (("read a stale value", "read no stale value"),
                                         ("can read a stale value", "cannot read a stale value")),
               "follow the task's entries in that instance's thread cache, role by role: which change removes them?")


def _goes_stale_wrong(r: StaleStandbyResult):
    """The tempting theory: whatever happened in between, a task active again where it was active before finds
    its old entries (the close of an active task is forgotten)."""
    def comes_back(roles):
        since = roles[len(roles) - roles[::-1].index("stopped"):] if "stopped" in roles else roles
        return bool(since) and since[-1] == "active" and "active" in since[:-1]
    return comes_back


def _roles_printed(r: StaleStandbyResult) -> list:
    """What 04 shows above exercise 1, as functions of a role history: the Explain's path ("right after the task
    went active -> standby -> active there"); the verdict's stale reads (True whatever the history when it counted
    some, else False); the first stale read's task as `result.main.movements` lists it (its roles on the instance
    that read, or on every instance), looked up; and True, and False, whatever the history."""
    first, moved, stale = r.main.first_stale, r.main.movements, bool(r.main.counts["stale_reads"])
    listed = [] if first is None or moved is None or not len(moved) else [
        list(moved[moved["instance"] == first["instance"]]["role"]), list(moved["role"])]
    return [lambda roles: list(roles[-3:]) == ["active", "standby", "active"], lambda roles: stale,
            *(lambda roles, s=s: list(roles) == s for s in listed), lambda roles: True, lambda roles: False]


# Exercise 2's case, not this run's: one key of one task on two instances that keep running, one standby replica,
# Kafka Streams 3.3.1 with the cache on. Instance 1 counts the key to CASE_START, then the task moves: each move
# makes one instance active (it processes that many records of the key) and the other its standby.
CASE_START, CASE_MOVES = 120, [(2, 30), (1, 8), (2, 5)]


def played(start: int, moves: list, cache_kept: bool = True) -> list:
    """The count each move's instance writes last for the key. The store of either instance ends at the last write
    from anywhere (a standby restores the changelog into it); an instance's cache holds its own last write, kept
    through recycling when `cache_kept` (3.3.1), removed on every move otherwise (3.4.1 on, or no cache)."""
    store, cache, last = start, {1: start}, []
    for instance, records in moves:
        cache = cache if cache_kept else {}
        store = cache[instance] = cache.get(instance, store) + records   # get() finds the cache first
        last.append(store)
    return last


def _case_answer(r=None) -> int:
    return played(CASE_START, CASE_MOVES)[-1]


def _case_store_read(r=None) -> int:
    """The tempting answer: the returning instance 1 alone goes stale; instance 2, back, reads its store."""
    return played(CASE_START, CASE_MOVES)[-2] + CASE_MOVES[-1][1]


def _check_case_count(r: StaleStandbyResult, answer) -> None:
    """Judged by the mechanism on the case (played): no run needed, so a clean run judges it too."""
    said_none = isinstance(answer, str) and answer.strip().lower() == "none"
    expect(not said_none, "instance 2 writes a count for every record it processes: give the last one")
    n = whole(answer)
    expect(n is not None and n >= 1, "give the count instance 2 writes as a whole number (at least 1)")
    right, last = _case_answer(), CASE_MOVES[-1][1]
    expect(n != played(CASE_START, CASE_MOVES, cache_kept=False)[-1],
           f"{n} is the key's true count, every record counted once: but when the task came back to an instance, "
           "what did that instance's get() return?")
    expect(n != _case_store_read(), f"{n} is what instance 2's store held, plus {last}: its standby kept the store "
           "up to date, but what did its cache still hold for the key, and does get() look there first?")
    expect(n != right - last, f"{n} is what instance 2's first read of the key returns: it then counts {last} "
           "records on from it")
    expect(n == right, f"{n} is not what instance 2 writes last: follow each instance's cache move by move: what did "
           "it last write for the key, and did any move remove it?")


def _case_printed(r: StaleStandbyResult) -> list:
    """What 04 shows above exercise 2: this run's first stale read's row of `result.stale_rows()` (`prev`, which the
    Explain prints too as "found", `expected_prev`, `value`, `true_value`) and the production quote's 58 and 31,
    less any that equals the case's answer by chance (besides)."""
    first = r.main.first_stale or {}
    values = shown(first.get("found"), first.get("expected"), first.get("value"), first.get("true_value"), 58, 31)
    return besides(values, _case_answer())


EXERCISES = {
    1: Exercise(
        check=_check_goes_stale,
        solution=lambda r: goes_stale,
        why="Follow the task's entries in the instance's thread cache. They are put there only while the task is "
            "active there. Two things remove them: closing the active task (it leaves the instance while active: "
            "`active` then `none`) and the instance stopping. Recycling the task into a standby removes "
            "nothing, and neither does closing the standby later: a standby's stores were handed the 0-byte "
            "stand-in cache, so closing them clears the stand-in, not the thread's cache. So a read can be stale "
            "when the task is active now and its last active period on this instance ended in a standby, with no "
            "stop since: `active, standby, active`, but also `active, standby, none, active` or two round trips. "
            "A promoted standby that was never active there, a task closed while active, or one whose instance "
            "restarted starts with nothing cached. On 3.4.1 and later, recycling clears the cache, so none of "
            "these goes stale; the roles are the same.",
        wrong=_goes_stale_wrong,
        closer="Walk the history two roles at a time and keep one fact: does the thread's cache still hold entries "
               "from an active period of this task? Which pairs set it (the task stops being active: how?), which "
               "clear it, and which leave it as it was?",
        printed=_roles_printed,
    ),
    2: Exercise(
        check=_check_case_count,
        solution=_case_answer,
        why="Each instance's cache holds its own last write for the key, and on 3.3.1 a move that recycles the "
            "task (active to standby, standby to active) keeps it; the standby's store follows the changelog, past "
            "the cache. Move 1: instance 2 was only ever a standby, so nothing is cached: `get()` reads its store, "
            "120, and it writes 121 to 150. Move 2: instance 1's cache still holds its own 120: it writes 121 to "
            "128 (its store said 150). Move 3: instance 2's cache still holds its own 150 from move 1 (its store "
            "says 128): it writes 151 to 155. The true count is 163: instance 1's 8 records are lost from the count, "
            "with no error.",
        wrong=_case_store_read,
        closer="Keep, per instance, what its cache holds for the key and what its store holds. At each move, the "
               "instance that turns active reads its cache if that holds the key, else its store; what it writes "
               "goes into its own cache and store, and into the other instance's store through the changelog, "
               "never into the other's cache.",
        printed=_case_printed,
    ),
}
