"""Notebook 00's exercises: two functions of `m` (records produced) and `a` (records in the aborted transaction),
each judged at this run's (m, a) against what it measured, then at other (m, a) against what the copier writes, so
that a function returning this run's numbers is refused with a hint. `printed` gives what a learner could copy from
the notebook above each exercise (the verdict's counts, the explanation's end offset): each check refuses it."""
from __future__ import annotations

from ...toolbox.result import Exercise, called, expect, whole
from .setup_check_report import DUPLICATES

OTHER_CASES = ((10, 0), (10, 3), (37, 4))   # (m, a) a learner's function is judged at, beside this run's own


def _cases(r, measured) -> list[tuple[int, int, object, bool]]:
    """(m, a, truth, measured?) for each case: this run's (m, a) first, with what it measured, then the others."""
    m, a = r.produced, r.aborted_injected
    return [(m, a, measured, True)] + [(mm, aa, None, False) for mm, aa in OTHER_CASES if (mm, aa) != (m, a)]


def _copied(r, shown) -> list:
    """Functions a learner could write from a value the notebook shows for this run: `shown` whatever m and a, and
    `shown` at this run's (m, a) only (None elsewhere)."""
    run = (r.produced, r.aborted_injected)
    return [lambda m, a: shown, lambda m, a: shown if (m, a) == run else None]


# ------------------------------------------------------------------ 1: what each reader sees

def counts(m, a):
    committed = m + 1                 # every input once, plus the one duplicate, committed with them
    return committed, committed + a   # read_uncommitted also sees the aborted transaction's a records


def _forgets_the_duplicate(m, a):
    return m, m + a


def _check_counts(r, fn) -> None:
    expect(callable(fn), f"{fn!r} is not a function: write counts(m, a), which returns the pair (read_committed, "
                         "read_uncommitted), and give the function itself: lesson.check(1, counts)")
    run = (r.spark_committed, r.spark_uncommitted)
    for m, a, truth, measured in _cases(r, run):
        call = f"counts({m}, {a})"
        given = called(fn, call, m, a)
        pair = tuple(whole(n) for n in given) if isinstance(given, (tuple, list)) else ()
        expect(len(pair) == 2 and None not in pair,
               f"{call} returned {given!r}: return a pair of whole numbers (read_committed, read_uncommitted)")
        if measured:
            expect(pair == truth, f"{call} = {pair}, but Spark counted {truth} in this run: which of the copier's "
                                  "writes does a read_committed reader see, and which does a read_uncommitted one "
                                  "see besides?")
        else:
            expect(pair != run or pair == counts(m, a), f"{call} = {pair}, this run's counts, but a copy of {m} "
                                                        f"records with {a} aborted is another copy: write the "
                                                        "counts from m and a")
            expect(pair == counts(m, a), f"{call} = {pair}, but that is not what this copier writes for m = {m}, "
                                         f"a = {a}: count its writes in each transaction, and who reads which")


def _counts_printed(r) -> list:
    """The verdict's two counts (read_committed, read_uncommitted), copied into a function."""
    return _copied(r, (r.spark_committed, r.spark_uncommitted))


# ------------------------------------------------------------------ 2: the copy's end offset

def end_offset(m, a):
    # one commit marker after the m + 1 committed records; an aborted transaction adds its a records and its abort
    # marker (none when a = 0: the copier starts no second transaction)
    return m + 1 + 1 + (a + 1 if a else 0)


def _records_only(m, a):
    return m + 1 + a   # every record a read_uncommitted reader sees, and nothing else


def _check_end_offset(r, fn) -> None:
    expect(callable(fn), f"{fn!r} is not a function: write end_offset(m, a) and give the function itself: "
                         "lesson.check(2, end_offset)")
    for m, a, truth, measured in _cases(r, r.copy_end_offset):
        truth = truth if measured else end_offset(m, a)
        call = f"end_offset({m}, {a})"
        given = called(fn, call, m, a)
        expect(whole(given) is not None, f"{call} returned {given!r}: return a whole number")
        expect(whole(given) >= m + DUPLICATES + a, f"{call} = {given}: fewer offsets than the records a "
                                                   "read_uncommitted reader sees; every record takes an offset")
        expect(whole(given) == truth, f"{call} = {given}, but " + (
            f"this run's copy ends at offset {truth}" if measured else "that is not what this copier writes") +
            ": a read_uncommitted reader sees every record, yet the log holds more. What does the broker write "
            "into the partition when a transaction ends, and does the copier end a transaction when a = 0?")


def _end_offset_printed(r) -> list:
    """The explanation's end offset, and the most records it says a reader sees, copied into a function."""
    return [*_copied(r, r.copy_end_offset), lambda m, a: r.spark_uncommitted]


EXERCISES = {
    1: Exercise(
        check=_check_counts, solution=lambda r: counts, wrong=lambda r: _forgets_the_duplicate, needs_failure=True,
        printed=_counts_printed,
        closer="Take the copier's transactions one at a time and list what each wrote. A `read_committed` reader "
               "leaves out whole transactions, never single records of a committed one; a `read_uncommitted` reader "
               "leaves out nothing that is in the log.",
        why="The copier writes every one of the `m` inputs once and the first one a second time, all in the "
            "transaction it commits: a `read_committed` reader sees `m + 1` records. The aborted transaction's `a` "
            "records stay in the log, marked aborted, and only a `read_uncommitted` reader sees them: `m + 1 + a`. "
            "The same function holds for any `MESSAGES` and `ABORTED`."),
    2: Exercise(
        check=_check_end_offset, solution=lambda r: end_offset, wrong=lambda r: _records_only, needs_failure=True,
        printed=_end_offset_printed,
        closer="Every entry of the log takes one offset, and not every entry is a record a consumer receives. Ending "
               "a transaction, by commit or by abort, adds one entry to each partition it wrote to: how many "
               "transactions did the copier end when `a` is 0, and when it is not?",
        why="Every record takes an offset, and so does each transaction's end: the transaction coordinator writes a "
            "control record (a commit or an abort marker) into every partition the transaction wrote to. No "
            "consumer ever receives a marker, whatever its isolation level, but it is in the log. The copier's "
            "committed transaction holds `m + 1` records and ends with a commit marker; its aborted transaction, "
            "when `a > 0`, holds `a` records and ends with an abort marker: `m + 2 + (a + 1 if a else 0)`. This is "
            "why a topic written by transactions has gaps in its offsets, and why counting offsets overcounts its "
            "records."),
}
