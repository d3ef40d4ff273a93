"""Lesson 07a's exercise 2, an experiment: the smallest max.poll.interval.ms you would dare for a Java consumer of a
case no run of the lesson uses (CASE: another batch and another work per record), judged by running the lesson again
with the learner's interval, that consumer alone in its baseline."""
from __future__ import annotations

from ...toolbox.result import Exercise, count, expect, shown
from .. import written_fix
from .poll_loop_consumers import MIN_SESSION_MS, applies, batch_ms, interval_ms

# The case: up to 260 records a poll, 50 ms each: 13 s of work between two polls, on a topic of 400 records (about
# 20 s of work when nothing loops); watched at most 60 s, or until one loop has come round. Its 13 s puts every
# interval the page shows (6, 8, 9, 10 s below it, 20 and 30 s past half as long again) out of the right range.
CASE = {"poll_batch": 260, "poll_work_ms": 50, "poll_records": 400, "poll_watch_s": 60, "poll_repeats": 1}
# what the page says in words above the exercise: the Explain's 6 s interval and 10 s of work, the Mitigate step's 30 s
SAID = (6000, 10_000, 30_000)


def _bounds() -> tuple[float, int, int]:
    """The case's work between two polls, and the intervals that count as just enough for it: above that work (the
    broker's minimum session as the floor), at most half as long again."""
    work = batch_ms(CASE, "baseline")
    return work, max(MIN_SESSION_MS, int(work) + 1), max(MIN_SESSION_MS, int(1.5 * work))


def _just_enough(result) -> int:
    """A quarter more than the case's work, rounded up to a whole second."""
    work, low, _ = _bounds()
    return max(low, -(-int(1.25 * work) // 1000) * 1000)


def _too_short(result) -> int:
    """A tempting wrong answer: a second less than the case's work (the run then shows the loop)."""
    work, _, _ = _bounds()
    return int(work) - 1000


def _check(result, answer) -> None:
    """An experiment: the lesson runs again as the case, with the learner's interval, the Java consumer alone in its
    baseline, and what it measured decides. An interval far below the work, or past half as long again, is refused
    before anything runs."""
    work, low, high = _bounds()
    given = count(answer, "milliseconds")
    case = f"{CASE['poll_batch']} records x {CASE['poll_work_ms']} ms"
    expect(given >= MIN_SESSION_MS, f"max.poll.interval.ms = {given} is below {MIN_SESSION_MS} ms, the broker's "
           "minimum session in this lab: the lesson cannot run it")
    expect(given <= high, f"{given} ms would do, but it is more than half as long again as the work between two polls "
           f"({case}): the smallest interval you would dare to set is the question (a long interval also makes a "
           "consumer that really hangs take that long to leave its group)")
    expect(5 * given >= 4 * work, f"max.poll.interval.ms = {given} is far shorter than the work between two polls "
           f"({case}): the consumer would be out of its group long before it polls again")
    cluster = result.running_cluster()
    print(f"Exercise 2: running the lesson with max.poll.interval.ms = {given}, the Java consumer alone, "
          f"{case} a poll, on " + ("the notebook's cluster ..." if cluster else "a broker of its own ..."))
    again = result.lesson.run(cluster=cluster, remember=False, poll_clients=["java"], poll_variants=["baseline"],
                              poll_interval_ms=given, **CASE)
    row = again.outcome.by_variant()["java/baseline"]
    print(f"Measured: {row['reads']} reads of {row['distinct_offsets']} offsets, {row['commit_failures']} failed "
          f"commit(s), committed offset {row['committed_offset']} of {row['records']}.")
    expect(not row["looped"], f"with max.poll.interval.ms = {given} the Java consumer still looped (an offset read "
           f"{row['max_reads_per_offset']} times, {row['commit_failures']} failed commit(s)): the work between two "
           f"polls ({case}) outlasted the interval")


def _printed(result) -> list:
    """The table's `batch_ms` and `interval_ms`, the run's and the Mitigate cell's, the parameters, the intervals and
    work the page says in words, and the case's own numbers."""
    p = result.params
    variants = ["baseline", *written_fix("07a").get("poll_variants", [])]
    table = [(batch_ms(p, v, c), interval_ms(p, v)) for c in p["poll_clients"] for v in variants if applies(c, v)]
    return sorted(shown(table, [p[k] for k in ("poll_interval_ms", "poll_batch", "poll_work_ms", "poll_records",
                                               "poll_slow_record_ms", "poll_slow_offset", "poll_longer_interval_ms")],
                        SAID, [CASE[k] for k in ("poll_batch", "poll_work_ms", "poll_records")]))


INTERVAL = Exercise(
    check=_check,
    solution=_just_enough,
    why="In its baseline a Java consumer works through a whole batch between two polls: here 260 records x 50 ms = "
        "13 s. The interval must be longer than that, with a margin for the fetch and the commit and for a slower "
        "moment of the machine: a quarter more, 16.25 s, rounded up to a whole second. Much more than that also "
        "works, but a consumer that really hangs then keeps its partitions that long before the group moves on. "
        "Fewer records per poll (`max.poll.records`) shrink the work instead of stretching the interval.",
    wrong=_too_short,
    closer="Between two polls the consumer works through every record of one batch. The interval has to be longer "
           "than that work by a margin for the fetch, the commit and a slow moment of the machine: a fraction of the "
           "work, not a multiple of it.",
    printed=_printed,
)
