"""Lesson 04's exercises: which role histories go stale, and the stale value itself, judged on this run.
`printed` gives what a learner could copy from the notebook above each exercise: each check refuses it."""
from __future__ import annotations

from ...errors import LabError
from ...toolbox.result import Exercise, called, expect, whole
from .stale_standby_report import AFTER_READ_S, StaleStandbyResult, Variant, is_affected


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
    trip that stayed right (the key unchanged meanwhile, or a fixed version or no cache) is judged by the mechanism.
    Then on the histories of MECHANISM (judged by the mechanism too), so that a rule this run cannot tell apart
    from the right one (a run with no read after a round trip) does not pass."""
    v = r.main
    seen = reads_by_roles(v)
    if not seen:
        raise LabError("this run read nothing, so there is nothing to judge the function on: run the lesson again "
                       "at its defaults.")
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
    for roles, truth in MECHANISM:
        call = f"goes_stale({roles!r})"
        given = called(fn, call, list(roles))
        expect(isinstance(given, bool), f"{call} returned {given!r}: return True or False")
        expect(given == truth, f"{call} = {given}, but on an affected version with the cache on a read after those "
               f"roles {'can return' if truth else 'cannot return'} an old value from the cache (a history this run "
               "did not read after): what did the cache see, role by role?")


# Role histories every answer is judged on besides this run's: the recycling path, and the paths that look like it
# but start with an empty cache (a promoted standby, a restarted instance, a task new to the instance).
MECHANISM = [(["active", "standby", "active"], True), (["standby", "active", "standby", "active"], True),
             (["active", "none", "active", "standby", "active"], True),
             (["standby", "active"], False), (["active", "none", "active"], False),
             (["active", "standby", "none", "standby", "active"], False), (["active"], False)]


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
        return "no stale read in this run: nothing to find (run the lesson at its defaults)"
    read, out = stale.iloc[0], r.main.output
    own = out[(out.key == read.key) & (out.instance == read.instance) & (out.ts < read.ts)].sort_values("ts")
    return int(own.value.iloc[-1]) if len(own) else r.main.first_stale["found"]


def _check_stale_value(r: StaleStandbyResult, answer) -> None:
    """Judged only on a run with a stale read (needs_failure): the value its store returned there."""
    first = r.main.first_stale
    if first is None or first["found"] is None:   # needs_failure keeps a clean run from here
        raise LabError("this run read no stale value, so there is none to find: run the lesson at its defaults.")
    said_none = isinstance(answer, str) and answer.strip().lower() == "none"
    expect(not said_none, "this run did read a stale value: look for the red x on the timeline")
    expect(whole(answer) is not None and whole(answer) >= 1,
           "give the stale value as a whole number of at least 1 (a count the store returned)")
    expect(whole(answer) == first["found"],
           f"{answer} is not what the store returned when instance {first['instance']} read {first['key']}: "
           "which of that key's writes could that instance's cache still hold?")


def _stale_value_wrong(r: StaleStandbyResult):
    """The value the read should have found (the key's last value, from any instance)."""
    first = r.main.first_stale
    if first is None:
        return 0   # nothing went stale: the check does not judge this run (needs_failure)
    return first["expected"] if first["expected"] is not None else (first["found"] or 0) + 1


def _roles_printed(r: StaleStandbyResult) -> list:
    """What 04 shows above exercise 1, as functions of a role history: the verdict's stale reads (True whatever the
    history when it counted some, else False), and the first stale read's task as `result.main.movements` lists it
    (its roles on the instance that read, or on every instance), looked up: True for that history, else False."""
    # NOT refused: look-up, see issue 52: the Explain states the rule (a stale value is read "right after the task
    # went active -> standby -> active there"), so `roles[-3:] == ["active", "standby", "active"]` is copied from it.
    first, moved, stale = r.main.first_stale, r.main.movements, bool(r.main.counts["stale_reads"])
    shown = [] if first is None or moved is None or not len(moved) else [
        list(moved[moved["instance"] == first["instance"]]["role"]), list(moved["role"])]
    return [lambda roles: stale, *(lambda roles, s=s: list(roles) == s for s in shown)]


def _value_printed(r: StaleStandbyResult) -> list:
    """What 04 shows above exercise 2 of the first stale read (its row of `result.stale_rows()`, the Explain's
    "the last value written was"): `expected_prev`, `value` and `true_value`."""
    # NOT refused: look-up, see issue 52: the row's `prev`, which the Explain prints too ("found N"), is the value
    # the check wants.
    # Left out: the production quote's 58 and 31: a count of this run may equal them by chance, which no check can
    # tell.
    first = r.main.first_stale
    return [] if first is None else sorted({v for v in (first["expected"], first["value"], first["true_value"]) if v})


EXERCISES = {
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
        closer="A read goes stale only when the instance's cache holds a value the store no longer has. Follow "
               "one task on one instance, role by role: when does its cache fill, when do newer values reach the "
               "store without passing the cache, and which role change would have emptied the cache?",
        printed=_roles_printed,
    ),
    2: Exercise(
        check=_check_stale_value,
        solution=_stale_value,
        why="The thread cache kept what the instance itself wrote for the key before the task left it; as a "
            "standby it received the newer values straight into the store, past the cache. So, in "
            "`result.main.output`, take the rows of the broken key written by that instance before the read: "
            "the last one's `value` is what the store answers.",
        wrong=_stale_value_wrong,
        closer="The cache filled while the task was active on the instance that read, and it never saw what "
               "came later from elsewhere: look at the key's rows written by that instance itself before the read.",
        needs_failure=True,
        printed=_value_printed,
    ),
}
