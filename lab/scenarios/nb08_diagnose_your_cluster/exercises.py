"""Notebook 08's exercises: predict the re-reads from what the doctor read (1), then count them in a consumer's
history (2), both functions, judged on this run (a LessonResult around a DiagnoseResult) and on cases whose answer
is known: an answer copied from this run's numbers does not pass. `printed` gives what a learner could copy from the
notebook above each exercise (the verdict's and the table's re-reads, MESSAGES): each check refuses it.
"""
from __future__ import annotations

from ...toolbox.result import Exercise, called, expect, shown, whole


def rereads_after_expiry(committed, log_start):
    # from the log start up to each committed offset: what retention still holds of what the group had read
    return sum(max(0, offset - log_start.get(p, 0)) for p, offset in committed.items())


def _every_committed(committed, log_start):
    return sum(committed.values())


def _shown_counts(result) -> list:
    """The counts of records the notebook shows: the predicted and observed re-reads (verdict, table), MESSAGES."""
    counts = (result.predicted_rereads(), result.observed_rereads(), result.params.get("messages"))
    return shown(*counts)


def _rereads_printed(result) -> list:
    """Each count whatever the offsets, and the count at this run's offsets only (0 elsewhere)."""
    seen = result.offsets_at_diagnosis()
    at_run = lambda c, s: (c, s) == (seen["committed"], seen["log_start"])   # noqa: E731
    return [f for n in _shown_counts(result)
            for f in (lambda c, s, n=n: n, lambda c, s, n=n: n if at_run(c, s) else 0)]


def _check_rereads_after_expiry(result, fn) -> None:
    seen = result.offsets_at_diagnosis()
    # this run's group, then a topic whose retention already deleted part of what the group read
    cases = [(seen["committed"], seen["log_start"], result.predicted_rereads(), "this run's group"),
             ({0: 250, 1: 300}, {0: 100, 1: 0}, 450, "a group at 250 and 300, the topic's log starting at 100 and 0"),
             ({0: 50}, {0: 100}, 0, "a group at 50, the log starting at 100 (retention deleted all it had read)")]
    for committed, log_start, truth, what in cases:
        if truth is None:   # no prediction: the group kept its member, so its offsets never expire
            truth = rereads_after_expiry(committed, log_start)
        given = called(fn, f"rereads_after_expiry({committed}, {log_start})", dict(committed), dict(log_start))
        expect(whole(given) is not None, f"for {what} it returned {given!r}: return a whole number of records")
        expect(whole(given) == truth, f"for {what} it returned {given}, the doctor's rule says {truth}: a restart "
                                      "with `earliest` starts at the log start, not at offset 0, and re-reads what "
                                      "lies before the committed offset")


def count_rereads(reads):
    # a re-read: a (partition, offset) the restarted consumer (incarnation 1) read that incarnation 0 had read
    first = set(zip(reads[reads.incarnation == 0].partition, reads[reads.incarnation == 0].offset))
    again = reads[reads.incarnation == 1]
    return sum((p, o) in first for p, o in zip(again.partition, again.offset))


def _every_read_after_restart(reads):
    """A tempting wrong answer: every record the restarted consumer read, the new ones included."""
    return int((reads.incarnation == 1).sum())


def _reads_frame(rows: list[tuple]):
    """A history like result.reads(): one row per record read, (incarnation, partition, offset)."""
    import pandas as pd
    return pd.DataFrame([{"run_id": "example", "kind": "read", "ts": float(i), "incarnation": inc,
                          "partition": part, "offset": off, "id": f"r-{part}-{off}"}
                         for i, (inc, part, off) in enumerate(rows)])


# Exercise 2's other histories, each (what it is, rows, re-reads)
OTHER_HISTORIES = (
    ("a history where incarnation 0 read offsets 0 to 4 of partition 0 and 0 to 2 of partition 1, and incarnation 1 "
     "read 0 to 6 of partition 0 and 3 to 4 of partition 1",
     [(0, 0, o) for o in range(5)] + [(0, 1, o) for o in range(3)] + [(1, 0, o) for o in range(7)]
     + [(1, 1, o) for o in (3, 4)], 5),
    ("a history where incarnation 0 read offsets 0 to 3 of partition 0 and incarnation 1 offsets 0 to 3 of "
     "partition 1", [(0, 0, o) for o in range(4)] + [(1, 1, o) for o in range(4)], 0),
)


def _this_runs_reads(result):
    reads = result.reads() if result.history is not None else None
    return reads if reads is not None and len(reads) and "incarnation" in reads else None


def _count_printed(result) -> list:
    """Each count whatever the history, and the count on a history as long as this run's only (0 elsewhere)."""
    mine = _this_runs_reads(result)
    size = 0 if mine is None else len(mine)
    return [f for n in _shown_counts(result)
            for f in (lambda reads, n=n: n, lambda reads, n=n: n if len(reads) == size else 0)]


def _check_count_rereads(result, fn) -> None:
    """Judged on this run's history (when it has one) and on histories whose count is known."""
    cases = []
    mine = _this_runs_reads(result)
    if mine is not None:
        cases.append(("this run's history", mine, count_rereads(mine)))
    cases += [(what, _reads_frame(rows), truth) for what, rows, truth in OTHER_HISTORIES]
    for what, reads, truth in cases:
        given = called(fn, "count_rereads(reads)", reads.copy())
        expect(whole(given) is not None, f"for {what} it returned {given!r}: return a whole number of records")
        expect(whole(given) == truth, f"for {what} it returned {given}, but {truth} of incarnation 1's reads are "
                                      "records incarnation 0 had read: count only those, not the new ones")


EXERCISES = {
    1: Exercise(
        check=_check_rereads_after_expiry, solution=lambda result: rereads_after_expiry,
        wrong=lambda result: _every_committed, printed=_rereads_printed,
        why="Once a group's offsets are gone, a consumer that restarts with `auto.offset.reset=earliest` starts at "
            "each partition's log start, the first offset retention still holds, and reads up to where the group "
            "had committed before reading anything new: `committed - log_start` per partition, never below 0. "
            "Offset 0 is only the log start on a topic that retention has not touched yet; on a real cluster it "
            "rarely is, so counting from 0 overestimates. The doctor computes this from the same two things it "
            "reads, and the verification counts it in the consumer's history (exercise 2).",
        closer="Work partition by partition, then add them up. On each partition the restarted consumer starts at "
               "the first offset the log still holds and reads again up to the committed offset; where the log "
               "already starts past the committed offset, there is nothing left to read again."),
    2: Exercise(
        check=_check_count_rereads, solution=lambda result: count_rereads,
        wrong=lambda result: _every_read_after_restart, printed=_count_printed,
        why="The restarted consumer (incarnation 1) read from where its group's committed offsets told it to: from "
            "the log start when they had expired, from where it left off when they had not. A record it read that "
            "incarnation 0 had read too, the same `(partition, offset)`, is a re-read; the records produced while it "
            "was down are new, not re-read. This run's count is `count_rereads(result.reads())`; compare it with "
            "the diagnosis's prediction in `result.table()`.",
        closer="A record is a partition and an offset together: offset 3 of partition 0 and offset 3 of partition 1 "
               "are two records. Collect the records incarnation 0 read, then count the rows of incarnation 1 that "
               "are among them."),
}
