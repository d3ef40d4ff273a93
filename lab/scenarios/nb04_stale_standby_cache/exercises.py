"""Lesson 04's exercises: which role histories go stale, and the stale value itself, judged on this run."""
from __future__ import annotations

from ...experiment.result import Exercise, called, expect, is_number
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
