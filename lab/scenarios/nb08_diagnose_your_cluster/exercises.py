"""Notebook 08's exercises: predict the re-reads from what the doctor read (1), then count them in the consumer's
history (2). Each check judges the learner's answer on the lesson's result (a LessonResult around a DiagnoseResult).
"""
from __future__ import annotations

from ...errors import LabError
from ...experiment.result import Exercise, called, count, expect, whole


def rereads_after_expiry(committed, log_start):
    # from the log start up to each committed offset: what retention still holds of what the group had read
    return sum(max(0, offset - log_start.get(p, 0)) for p, offset in committed.items())


def _every_committed(committed, log_start):
    return sum(committed.values())


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


def _rereads(result) -> int:
    """Exercise 2, from the consumer's history: (partition, offset) pairs incarnation 1 read that 0 had read."""
    reads = result.reads() if result.history is not None else None
    if reads is None or not len(reads):
        return 0
    first = set(zip(reads[reads.incarnation == 0].partition, reads[reads.incarnation == 0].offset))
    again = reads[reads.incarnation == 1]
    return sum((p, o) in first for p, o in zip(again.partition, again.offset))


def _check_rereads(result, answer) -> None:
    observed = result.observed_rereads()
    if observed is None:
        raise LabError("The verification was not run in this run (VERIFY = False): run the notebook with VERIFY = "
                       "True first.")
    expect(count(answer) == observed, "count the (partition, offset) pairs incarnation 1 read that incarnation 0 had "
                                      "read and committed")


def _read_after_restart(result) -> int:
    """Every record the restarted consumer read, the new ones included."""
    reads = result.reads() if result.history is not None else None
    return 0 if reads is None or not len(reads) else int((reads.incarnation == 1).sum())


EXERCISES = {
    1: Exercise(
        check=_check_rereads_after_expiry, solution=lambda result: rereads_after_expiry,
        wrong=lambda result: _every_committed,
        why="Once a group's offsets are gone, a consumer that restarts with `auto.offset.reset=earliest` starts at "
            "each partition's log start, the first offset retention still holds, and reads up to where the group "
            "had committed before reading anything new: `committed - log_start` per partition, never below 0. "
            "Offset 0 is only the log start on a topic that retention has not touched yet; on a real cluster it "
            "rarely is, so counting from 0 overestimates. The doctor computes this from the same two things it "
            "reads, and the verification counts it in the consumer's history (exercise 2)."),
    2: Exercise(
        check=_check_rereads, solution=lambda result: int(_rereads(result)), wrong=_read_after_restart,
        why="The restarted consumer (incarnation 1) read from where its group's committed offsets told it to: from "
            "the log start when they had expired, from where it left off when they had not. A record it read that "
            "incarnation 0 had read too, the same `(partition, offset)`, is a re-read; the records produced while it "
            "was down are new, not re-read. Compare the count with the diagnosis's prediction in `result.table()`."),
}
