"""Lesson 09's pure parts: when the run has seen all it will see of the workers (Tally.settled)."""
import collections

from lab.scenarios.nb09_share_groups.share_workers import Tally, tries

P = {"share_records": 3, "share_failing_offset": 1, "share_on_failure": "release", "share_delivery_limit": 3}


def tally(deliveries: int, answers: int, refused: int = 0) -> Tally:
    """Records 0 and 2 accepted; the failing record 1 delivered and answered so many times."""
    return Tally(deliveries={1: [("w1", n + 1) for n in range(deliveries)]}, written=collections.Counter({0: 1, 2: 1}),
                 accepted={0, 2}, answered={1: ["release"] * answers} if answers else {},
                 refused=[{"kind": "ack_refused", "offset": 1, "answer": "RELEASE"}] * refused, first_poll=3)


def test_the_failing_record_is_delivered_up_to_the_limit_when_released_and_once_when_rejected():
    assert tries(P) == 3 and tries({**P, "share_on_failure": "reject"}) == 1
    assert tries({**P, "share_failing_offset": None}) == 0


def test_the_run_is_settled_once_every_delivery_of_the_failing_record_has_its_answer():
    """A worker logs a delivery before it answers it: the last delivery seen without its answer is not the end
    (a run stopped there once recorded four answers for five deliveries)."""
    assert not tally(deliveries=2, answers=2).settled(P)          # one delivery still to come
    assert not tally(deliveries=3, answers=2).settled(P)          # the last answer not written yet
    assert tally(deliveries=3, answers=3).settled(P)
    assert tally(deliveries=3, answers=2, refused=1).settled(P)   # a refused answer is an answer too
    assert tally(deliveries=3, answers=2, refused=1).refused_answers(1) == ["release"]
    unwritten = tally(deliveries=3, answers=3)
    unwritten.accepted.discard(2)                                 # record 2 neither accepted nor written twice
    assert not unwritten.settled(P)
    healthy = tally(deliveries=0, answers=0)
    assert not healthy.settled({**P, "share_failing_offset": None})   # with no failing record, 1 is to be accepted
    healthy.accepted.add(1)
    assert healthy.settled({**P, "share_failing_offset": None})
