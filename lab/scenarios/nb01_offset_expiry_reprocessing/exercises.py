"""Lesson 01's exercises: what a `latest` group skips after an outage, and when a group's offsets vanish.
`printed` gives what a learner could copy from the notebook above each exercise: each check refuses it."""
from __future__ import annotations

from ...toolbox.result import Exercise, called, expect, is_number, shown
from .offset_expiry_report import OffsetExpiryResult, expires_after_stop, skipped_by_latest
from .. import written_fix


HOUR, DAY = 3600, 86400


def _other_outages(retention_s: float) -> list[tuple]:
    """Exercise 1's cases the run did not use, by the mechanism (downtime_s, retention_s, rate_per_s): the source's
    24-hour retention and the 7-day default, back well after or well before the expiry (no sweep near); this
    broker's retention, back after three of them and after half of one."""
    return [(30 * HOUR, DAY, 50), (20 * HOUR, DAY, 50), (10 * DAY, 7 * DAY, 2), (3 * DAY, 7 * DAY, 200),
            (3 * retention_s, retention_s, 5), (retention_s / 2, retention_s, 5)]


def _span(seconds: float) -> str:
    """A duration as the hint words it: days (two or more), hours or seconds."""
    for unit, size in (("days", DAY), ("h", HOUR)):
        if seconds >= 2 * size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def _measured_outage(result: OffsetExpiryResult) -> tuple | None:
    """The run's own case for exercise 1: the `latest` group's downtime, the retention, and the records that
    arrived while it was away as a rate (what it skipped over its downtime, or, back in time, what was produced
    while it was down), with what it skipped. None when no `latest` group ran, or when its offsets and its
    downtime disagree on the expiry (a KIP-848 clock, or a sweep not yet come): the rule has no clear case there."""
    if "latest" not in result.facts or result.counts("latest")["skipped"] is None:
        return None
    down, retention = result.facts["latest"]["downtime_s"], result.retention_s
    skipped = result.counts("latest")["skipped"]
    expired = "latest" in result.expired
    if expired != (down >= retention) or down <= 0:
        return None
    arrived = skipped if expired else result.params["messages_while_down"]
    return down, retention, arrived / down, skipped


def _check_skipped_by_latest(result: OffsetExpiryResult, fn) -> None:
    def predicted(down, retention, rate) -> float:
        call = f"skipped_by_latest({down:g}, {retention:g}, {rate:g})"
        records = called(fn, call, down, retention, rate)
        expect(is_number(records), f"{call} returned {records!r}, not a number of records")
        return float(records)

    if measured := _measured_outage(result):
        down, retention, rate, skipped = measured
        given = predicted(down, retention, rate)
        expect(abs(given - skipped) <= 1,
               f"{given:g} records, but in this run `latest` was down {down:g} s with a {retention} s retention, "
               f"{rate:.3g} records a second arrived while it was away, and it skipped {skipped}")
    for down, retention, rate in _other_outages(result.retention_s):
        given, truth = predicted(down, retention, rate), skipped_by_latest(down, retention, rate)
        expect(abs(given - truth) <= 1,
               f"skipped_by_latest({down:g}, {retention:g}, {rate:g}) = {given:g} for a group down {_span(down)} "
               f"with a {_span(retention)} retention, {rate:g} records a second arriving: where does it start "
               "reading when it comes back, and which records were produced before that point?")


def _skipped_after_the_expiry_only(downtime_s, retention_s, rate_per_s):
    """A tempting wrong answer: only what arrived after the offsets expired is skipped."""
    return rate_per_s * max(0, downtime_s - retention_s)


def _check_expires_after_stop(result: OffsetExpiryResult, fn) -> None:
    def predicted(protocol, idle_s, retention_s) -> float:
        seconds = called(fn, f"expires_after_stop({protocol!r}, {idle_s}, {retention_s})", protocol, idle_s,
                         retention_s)
        expect(is_number(seconds),
               f"expires_after_stop({protocol!r}, {idle_s}, {retention_s}) returned {seconds!r}, not a number of "
               "seconds")
        return float(seconds)

    slack, week, day = result.params["check_interval_ms"] / 1000 + 2, 7 * 86400, 86400
    for r in result.clock().to_dict("records"):   # this run's measurements
        seconds = predicted(r["protocol"], r["idle_before_stop_s"], result.retention_s)
        expect(abs(seconds - r["expired_after_stop_s"]) <= slack,
               f"{r['variant']} ({r['protocol']}, idle {r['idle_before_stop_s']:.0f} s before the stop): predicted "
               f"{seconds:g} s, its offsets went {r['expired_after_stop_s']:.1f} s after the stop")
    expect(predicted("consumer", 3 * day, week) == 4 * day,
           "a KIP-848 group idle 3 days before the stop, with a 7-day retention: its clock started at its last commit")
    expect(predicted("consumer", 8 * day, week) == 0,
           "a KIP-848 group idle 8 days before the stop: its retention has run out before the stop")
    expect(predicted("classic", 8 * day, week) == week,
           "a classic group idle 8 days before the stop: its clock starts when the group empties")


def _classic_clock_for_all(protocol, idle_s, retention_s):
    return retention_s


def _skipped_printed(result: OffsetExpiryResult) -> list:
    """What notebook 01 shows above exercise 1, as functions: each count of `result.table()` (the `latest` row's
    `skipped`, which the verdict prints too, among them), MESSAGES_BEFORE, MESSAGES_WHILE_DOWN and the Mitigate
    cell's downtime returned whatever the function is given; and the `latest` row looked up: its `skipped` when
    the downtime passes the retention, else 0."""
    counts = [v for n in result.verdicts for v in result.counts(n).values()]
    reads = [f["read_after_restart"] for f in result.facts.values()]
    values = shown(*counts, *reads, result.params.get("messages_before"), result.params.get("messages_while_down"),
                   written_fix("01").get("downtime_s"))
    skipped = result.counts("latest")["skipped"] if "latest" in result.facts else None
    looked_up = [lambda down, retention, rate: skipped if down >= retention else 0] if skipped else []
    return [*(lambda *_, v=v: v for v in values), *looked_up]


def _clock_printed(result: OffsetExpiryResult) -> list:
    """What notebook 01 shows above exercise 2, as functions: the clock table looked up (a measured row's
    `expired_after_stop_s`, None for the rest; or its protocol's, the retention for a protocol it lacks), and the
    retention and the Mitigate cell's downtime returned whatever the function is given."""
    rows = result.clock().to_dict("records") if result.expired else []
    seen = {(r["protocol"], round(r["idle_before_stop_s"])): r["expired_after_stop_s"] for r in rows}
    by_protocol = {r["protocol"]: r["expired_after_stop_s"] for r in rows}
    shown = [result.retention_s, written_fix("01").get("downtime_s")]
    return [lambda protocol, idle_s, retention_s: seen.get((protocol, round(idle_s))),
            lambda protocol, idle_s, retention_s: by_protocol.get(protocol, retention_s),
            *(lambda *_, s=s: s for s in shown if s)]


EXERCISES = {
    1: Exercise(
        check=_check_skipped_by_latest, solution=lambda result: skipped_by_latest,
        wrong=lambda result: _skipped_after_the_expiry_only,
        closer="Two questions: are the offsets still there when the group comes back (a classic group's clock starts "
               "at the stop)? And if not, where does `auto.offset.reset=latest` put it: which of the records "
               "produced while it was down lie before that point, the ones produced before the expiry too?",
        why="A classic group's offsets expire one retention after the stop (the group empties then). Back before "
            "that, the group finds its committed offsets and resumes where it stopped: it skips nothing, whatever "
            "its `auto.offset.reset`. Back after it, it finds none, and `latest` starts at the end of each "
            "partition: every record produced while it was down lies before that point, those produced before "
            "the expiry as much as those after, so it skips `rate_per_s * downtime_s` of them. This run's "
            "`latest` group measured the same: it skipped what arrived while it was away, the records produced "
            "just after the stop among them. On the source's cluster (24 hours), 50 records a second, back after "
            "30 hours: 5,400,000 records skipped; after 20 hours, none.",
        printed=_skipped_printed),
    2: Exercise(
        check=_check_expires_after_stop, solution=lambda result: expires_after_stop,
        wrong=lambda result: _classic_clock_for_all,
        closer="There are two clocks: one starts when the group becomes empty (the stop), the other at the group's "
               "last commit, `idle_s` before the stop. The clock table says which protocol uses which; and a clock "
               "that ran out before the stop leaves nothing to wait for.",
        why="A classic group's offsets wait one retention from the moment the group becomes empty, however long it "
            "sat idle before (KIP-211; in Kafka's source, `ClassicGroup.offsetExpirationCondition()` counts from "
            "the time the group entered the Empty state). A KIP-848 group's clock is each offset's commit time "
            "(`ConsumerGroup.offsetExpirationCondition()` counts from `commitTimestampMs`), and its offsets are "
            "swept once the group no longer subscribes to their topic, that is once it is empty: one retention "
            "after the last commit, at once if that has passed when the group empties. This run's clock table "
            "measured the same. So a KIP-848 service idle 3 days before a redeploy, with the 7-day default, has 4 "
            "days left; idle 8 days, none.",
        printed=_clock_printed),
}
