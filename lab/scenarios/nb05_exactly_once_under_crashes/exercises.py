"""Chapter 05's exercises, one per lesson: each check reads the lesson's result (its crashes, handlers, schema or
refused runs) and judges the learner's answer by what that run measured, then by the mechanism."""
from __future__ import annotations

from ...errors import LabError
from ...toolbox.result import Exercise, called, expect, number
from .answers import IN_FLIGHT
from .streams_app import CRASH_POINTS, GUARANTEES, HANDLERS, SCHEMA_MODES

# ---------------------------------------------------------------- the exercises



def duplicates_after_crash(guarantee, point):
    # at-least-once redoes what was processed since the last commit; exactly-once aborts it instead
    return guarantee == "at_least_once" and point in IN_FLIGHT


def _all_fine(guarantee, point):
    """The post's reasoning, untested: "we're fine" at every point."""
    return False


def _check_duplicates_after_crash(result, fn) -> None:
    if not result.crashes:
        raise LabError("this lesson was not run in this run (CRASH_POINTS or GUARANTEES is empty): run it first.")
    measured = {(c.guarantee, c.point): bool(c.m["duplicates"]) for c in result.crashes.values()}
    rule = {(g, pt): duplicates_after_crash(g, pt) for g in GUARANTEES for pt in CRASH_POINTS}
    others = {k: truth for k, truth in rule.items() if k not in measured}
    for (guarantee, point), truth in {**measured, **others}.items():   # this run's rows first, then the others
        given = called(fn, f"duplicates_after_crash({guarantee!r}, {point!r})", guarantee, point)
        expect(isinstance(given, bool), f"duplicates_after_crash({guarantee!r}, {point!r}) returned {given!r}: "
                                        "return True or False")
        where = "in this run" if (guarantee, point) in measured else "by the mechanism"
        expect(given == truth, f"duplicates_after_crash({guarantee!r}, {point!r}) = {given}, but {where} it "
               + ("wrote duplicates" if truth else "wrote none") + ": was work in flight since the last commit "
               "when the app halted, and what does the guarantee do with it on restart?")


# What each handler or schema mode does with a record it cannot process: the mechanism, for answers not run here.
DOES = {"shutdown_client": "stops the app, and a restart meets the same record at the same offset again",
        "replace_thread": "starts a new thread, which meets the same record again: a crash loop",
        "continue": "goes on, and the record (or its update) is gone: only the dropped-records metric counts it",
        "deserialization": "skips an input that cannot be deserialized at all: it is not a poison record",
        "tolerant": None, "dead_letter": None}


def _judged(runs: dict, answer, right: str, kind: str, known: tuple) -> None:
    """The learner's choice among `known`: judged by what it did in this run when it ran, else by the mechanism."""
    if not runs:
        raise LabError(f"this lesson was not run in this run ({kind} is empty): add some of {', '.join(known)} and "
                       "run the lesson again")
    expect(isinstance(answer, str) and answer in known, f"answer one name of {kind}: {', '.join(known)}")
    if answer in runs:
        outcome = runs[answer].outcome
        print(f"Measured in this run: `{answer}` ended as: {outcome}.")
        expect(answer == right, f"in this run `{answer}` ended as: {outcome}; it {DOES[answer]}")
        expect(outcome.startswith("clean"), f"in this run `{answer}` ended as: {outcome}: see its row and why")
        return
    expect(answer == right, f"`{answer}` {DOES[answer]}")
    print(f"`{answer}` did not run in this run: add it to {kind} and run the lesson to see it measured.")


BATCH_HEADER = 61   # bytes of a record batch's header (format v2), before its records


def _refused_value_bytes(result) -> int:
    """The refused output's value in bytes, as the app made it, from any production-error run."""
    if not result.refused:
        raise LabError("this lesson was not run in this run (PRODUCTION_HANDLERS and OTHER_GUARANTEE_HANDLERS are empty): "
                       "give some of them and run the lesson again")
    sizes = [f.m["output_bytes"] for f in result.refused.values() if f.m.get("output_bytes")]
    if not sizes:
        raise LabError("no run of this lesson got as far as the large record: see the lesson's verdict")
    return max(sizes)


def _smallest_limit(result) -> int:
    """The exercise: a max.message.bytes just above one batch holding the refused record alone."""
    return _refused_value_bytes(result) + BATCH_HEADER + 40


def _check_smallest_limit(result, answer) -> None:
    value = _refused_value_bytes(result)
    number(answer, "a number of bytes")
    expect(answer > value, f"{answer:,.0f} bytes is not even the record's value ({value:,} bytes, the `output bytes` "
           "column): the broker would refuse it again")
    expect(answer >= value + BATCH_HEADER, "the broker checks the record batch, not the value: the value, its key, "
           "the record's own framing (a few bytes of lengths and deltas) and the batch's header (61 bytes)")
    expect(answer <= value + 1024, f"{answer:,.0f} bytes lets it through, but it is not near the smallest limit: "
           "what does one batch holding only this record weigh?")
    print(f"Try it: `fixed = lesson.mitigate(result, output_max_bytes={int(answer)})` runs Kafka's default "
          "handler again with that limit.")


def _check_keep_aside(result, answer) -> None:
    _judged(result.handlers, answer, "dead_letter", "HANDLERS", HANDLERS)


def _check_carry_on(result, answer) -> None:
    _judged(result.schema, answer, "tolerant", "SCHEMA_MODES", SCHEMA_MODES)


# Each lesson's exercise, by lesson
EXERCISES = {
    "crashes": Exercise(
        check=_check_duplicates_after_crash,
        solution=lambda r: duplicates_after_crash,
        why="At-least-once sends each output as soon as its record is processed, and commits the input offsets "
            "only every `COMMIT_INTERVAL_MS`. When the app dies with work done since the last commit, those "
            "offsets were never committed: the restarted app reads the same records again and sends their outputs "
            "a second time. So duplicates come at the crash points where work is in flight since the last commit "
            "(before a read, while processing, after a send), not right after a commit (`after_commit`), nor "
            "without a crash. Exactly-once writes the outputs and the offsets in one transaction: the restart "
            "aborts the open one, and a `read_committed` reader never sees its outputs, at any point.",
        wrong=lambda r: _all_fine,
        closer="For each crash point ask two things: had the app sent outputs since its last commit when it "
               "halted, and can a read_committed reader still see those outputs after the restart? The second "
               "depends on whether the guarantee commits the outputs and the input offsets together.",
    ),
    "handlers": Exercise(
        check=_check_keep_aside,
        solution=lambda r: "dead_letter",
        why="A poison record fails on every attempt, so every answer that tries it again fails again: "
            "`shutdown_client` stops the app, and a restart from outside meets the same record at the same offset; "
            "`replace_thread` starts a new thread that meets it too, a crash loop. `continue` (KIP-1033) goes on, but "
            "the record is gone, counted only by the dropped-records metric. `dead_letter` (KIP-1034, Kafka Streams "
            "4.2+) goes on and writes the record, with its exception, to a dead-letter topic, where someone can look "
            "at it and replay it. The handler table's `outcome` and `kept aside` columns show it measured.",
        wrong=lambda r: "continue",   # the app goes on: it looks like the fix, but the record is gone
        closer="Two things must hold at once: the app neither stops nor loops on the record, and the record "
               "ends up in a topic you can read later. Compare the `outcome` and `kept aside` columns of each "
               "handler, and what each handler does with the record it gives up on.",
    ),
    "schema": Exercise(
        check=_check_carry_on,
        solution=lambda r: "tolerant",
        why="Version 2's state is restored byte for byte from the changelog, in version 1's format, so the first "
            "`get()` of an old key fails, and it fails the same way on every attempt: like a poison record, but one "
            "per key. Handlers only choose how to fail: `shutdown_client` stops, `replace_thread` loops, and "
            "`continue` (KIP-1033) drops the record whose state cannot be read. Only a reader that understands "
            "version 1's format (`tolerant`: it reads the old format and rewrites it in the new one) carries on "
            "from the old counts. The schema table's `migrated on read` column counts the keys it converted.",
        wrong=lambda r: next((m for m, f in r.schema.items() if not f.outcome.startswith("clean")), "continue"),
        closer="The old bytes in the store fail the same way at every attempt, whichever handler is asked: a "
               "handler only picks how to fail. What would have to change for the first read of an old key to "
               "succeed?",
    ),
    "refused": Exercise(
        check=_check_smallest_limit,
        solution=_smallest_limit,
        why="The broker compares `max.message.bytes` with the record batch it receives, after compression: the "
            "batch's header (61 bytes), then each record with its framing (a length, attributes, timestamp and "
            "offset deltas, the key's and the value's lengths: about a dozen bytes), its key and its value. The "
            "producer puts a record larger than `batch.size` in a batch of its own, and splits a refused batch of "
            "several records to try each alone; so the smallest limit that lets the record through is the value "
            "(the `output bytes` column) plus its key plus about 75 bytes. The solution rounds up a little.",
        wrong=_refused_value_bytes,   # the value alone: the batch around it is forgotten
        closer="The limit applies to what the producer sends the broker: a record batch, here holding this one "
               "record. Which parts of that batch are not the value, and roughly how many bytes does each add?",
    ),
}
