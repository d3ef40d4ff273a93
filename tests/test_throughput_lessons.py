"""Lessons 07b and 07c, more instances for a busy app and a lookup per record
(lab/scenarios/nb07_when_streams_stop/partition_parallelism.py, slow_lookups.py): their arithmetic, refusals and
exercises."""
import re

import pytest

from lab.errors import LabError
from lab.scenarios.nb07_when_streams_stop import partition_parallelism
from lab.scenarios.nb07_when_streams_stop import slow_lookups

PAR = partition_parallelism.lesson.spec
LOOKUP = slow_lookups.lesson.spec


@pytest.mark.parametrize("spec, values, message", [
    (PAR, dict(par_instances=[4, 4]), "twice"),
    (PAR, dict(par_instances=[3, 4, 5]), "JVMs at once"),
    (PAR, dict(par_partitions=[0]), "PAR_PARTITIONS"),
    (LOOKUP, dict(lookup_modes=["memoize"]), "LOOKUP_MODES"),
    (LOOKUP, dict(lookup_latency_ms=0), "LOOKUP_LATENCY_MS"),
])
def test_bad_parameters_are_refused_before_anything_starts(spec, values, message):
    with pytest.raises(LabError, match=message):
        spec.validate(**values)


def refused(checked, hint: str) -> None:
    """A wrong answer: a cross and expect()'s hint (lab.toolbox.result.Checked), not an exception."""
    assert not checked and re.search(hint, checked.said), checked


def test_the_lookup_arithmetic():
    p = LOOKUP.validate(lookup_latency_ms=50, lookup_threads=4, lookup_batch=50)
    assert slow_lookups.capacity(p, "direct") == 20 and slow_lookups.capacity(p, "threads") == 80
    assert slow_lookups.capacity(p, "batch") == 1000


# The live runs (Kafka Streams apps on a real broker) are lessons 07b's and 07c's tests: tests/expectations/nb07b.py
# and nb07c.py assert them, so they are not run a second time here.


def test_which_modes_keep_up_is_judged_where_the_budget_is_clear(capsys):
    def result(rate: float, kept: dict):
        rows = [{"mode": mode, "input_per_s": rate, "keeps_up": up} for mode, up in kept.items()]
        return slow_lookups.lesson.result(slow_lookups.Outcome(rows, {}, 50, 0), lookup_latency_ms=50,
                                          lookup_rate=rate, lookup_threads=4, lookup_batch=50)

    four = slow_lookups.lesson.exercises[1]
    # 50 records/s at 50 ms: direct's budget is 20 (behind), batch's 1000, threads' 80 (too close to judge)
    behind = result(50, {"direct": False, "cache": True, "batch": True, "threads": True})
    assert four.solution(behind) is slow_lookups.keeps_up and behind.check(1, slow_lookups.keeps_up)
    assert not behind.check(1, None) and "`lesson.solution(1)` shows" in capsys.readouterr().out
    for answer, hint in [(four.wrong(behind), "keeps_up('batch', p) = False, but in this run it kept up"),
                         (lambda mode, p: True, "keeps_up('direct', p) = True, but in this run it fell behind"),
                         (lambda mode, p: mode != "direct" or p["lookup_rate"] <= 20,
                          "LOOKUP_THREADS=1, LOOKUP_RATE=40"),
                         (lambda mode, p: None, "returned None"), (20, "is not a function"),
                         (0, "is not a function"), ("none", "is not a function")]:
        refused(behind.check(1, answer), f"^Not quite: .*{re.escape(hint)}")
    # A run that measured otherwise where the budget is close is not held against the function: threads at 50 of 80
    close = result(50, {"direct": False, "batch": True, "threads": False})
    assert close.check(1, slow_lookups.keeps_up)
    # The Run step's own run, the direct app alone and behind: the one-call theory is refused at another rate
    alone = result(50, {"direct": False})
    assert alone.check(1, slow_lookups.keeps_up)
    refused(alone.check(1, four.wrong(alone)), r"^Not quite: keeps_up\('batch', p\) = False, but with "
                                               "LOOKUP_RATE=60, by the budget, it keeps up")
    # Within one thread's budget (10 of 20) everything keeps up: the one-call theory is refused at other settings
    within = result(10, {"direct": True, "batch": True, "threads": True})
    assert within.check(1, slow_lookups.keeps_up)
    refused(within.check(1, four.wrong(within)), r"^Not quite: keeps_up\('batch', p\) = False, but with "
                                                 "LOOKUP_RATE=60, by the budget, it keeps up")
    # what the notebook prints above it: look-ups of the table (the Mitigate cell's modes kept up), the rate against
    # the table's capacity_per_s, True, False
    printed = slow_lookups.lesson.result(slow_lookups.Outcome([{"mode": "direct", "input_per_s": 50, "keeps_up": False,
                                                                "capacity_per_s": 20.0}], {}, 50, 0),
                                         lookup_latency_ms=50, lookup_rate=50, lookup_threads=4, lookup_batch=50)
    assert len(four.printed(printed)) == 5 and four.printed(printed)[1]("batch", {}) is True
    for run in (printed, alone, within):
        for copy in four.printed(run):
            refused(run.check(1, copy), "^Not quite: keeps_up")


def test_the_lookup_run_asked_about_is_direct_and_the_other_modes_are_the_mitigate_steps():
    """The Predict question's run has the direct app alone (the other modes, read beside it, would read as its
    fixes); the Mitigate step takes them as its fix."""
    p = LOOKUP.validate()
    assert p["lookup_modes"] == ["direct"] and slow_lookups.asked_mode(p) == "direct"
    fixed = slow_lookups.lesson.mitigate.check(p, {"lookup_modes": ["cache", "batch", "threads"], "lookup_threads": 6})
    assert fixed["lookup_modes"] == ["cache", "batch", "threads"] and fixed["lookup_threads"] == 6


def test_the_predict_questions_of_the_parallelism_and_lookup_lessons():
    p = PAR.validate(par_partitions=[2, 4], par_instances=[1, 3])
    text, choices, tolerance = partition_parallelism.question(p)
    assert text.startswith("3 instances") and "2 partitions" in text and choices is None and tolerance == 0
    record = {"parallelism": {"p2_n3": {"busy_instances": 2}, "p4_n3": {"busy_instances": 3}}}
    assert partition_parallelism.measured_answer(record, p) == 2
    q = LOOKUP.validate(lookup_modes=["cache", "direct"])
    text, choices, tolerance = slow_lookups.question(q)
    assert "(`direct`)" in text and "50 ms" in text and "50 a second" in text and choices is None, text
    # a number: the direct app's records a second. Its budget (1000 / 50 ms = 20) is right against what a run
    # measures (17.6 to 20.1 at these values); the input rate (no lag) and a stall (0) are refused
    lookups = {"lookups": {"direct": {"records_per_s": 17.6}, "cache": {"records_per_s": 50.1}}}
    assert slow_lookups.measured_answer(lookups, q) == 17.6
    assert slow_lookups.measured_answer(lookups, LOOKUP.validate(lookup_modes=["cache"])) == 50.1
    assert slow_lookups.measured_answer({"lookups": {}}, q) is None
    for answer, right in [(20, True), (50, False), (0, False), (80, False)]:
        assert (abs(answer - 17.6) <= tolerance * 17.6) is right, answer
    assert abs(20 - 10.0) > tolerance * 10.0   # within its budget the app reads what arrives, not 20 a second


def test_the_fewest_partitions_for_the_input_is_an_experiment(monkeypatch, capsys):
    """The exercise's case (20 ms a record, 260 records/s: 5.2 threads' worth) runs the lesson again on the
    learner's partition count at the case's work time; what it measured decides. Too few partitions (their threads
    cannot reach the case's rate) and more than the fewest are refused before anything runs."""
    lesson = partition_parallelism.lesson
    p = dict(par_partitions=[2, 4], par_instances=[1, 4], par_work_ms=10, par_window_s=5)
    r = lesson.result(partition_parallelism.Outcome([], 10), **p)
    calls, measured = [], {"records_per_s": 280.0, "busy": None}

    def rerun(**params):
        calls.append(params)
        busy = measured["busy"] or params["par_instances"][0]
        row = {"records_per_s": measured["records_per_s"], "busy_instances": busy}
        return lesson.result(partition_parallelism.Outcome([row], params["par_work_ms"]), run_id="run-2", **p)
    monkeypatch.setattr(lesson, "run", rerun)
    six = lesson.exercises[1]
    assert (partition_parallelism.CASE_WORK_MS, partition_parallelism.CASE_RATE) == (20, 260)
    assert six.solution(r) == 6 and six.wrong(r) == 5
    # 3, the fewest at the notebook's own 10 ms (260 / 100 a thread), is too few at the case's 20 ms
    for answer, hint in [(5, "short of 260"), (3, "short of 260"), (0, "short of 260"), (7, "fewer would too"),
                         (40, "fewer would too"), (260, "fewer would too"), ("6", "whole number"),
                         (5.2, "whole number"), ("none", "whole number"), ([], "whole number")]:
        refused(r.check(1, answer), f"^Not quite: .*{hint}")
    # what the notebook prints above it (the table's counts, the parameters, the Mitigate cell's partitions, the
    # case's numbers), all refused before anything runs: 3, the instances in the table, among them
    rows = [{"partitions": 2, "instances": n, "busy_instances": min(n, 2)} for n in (1, 2, 3)]
    shown = lesson.result(partition_parallelism.Outcome(rows, 10), **{**p, "par_instances": [1, 2, 3]})
    assert six.printed(shown) == [1, 2, 3, 4, 5, 10, 20, 260], six.printed(shown)
    for copy in six.printed(shown):
        refused(shown.check(1, copy), "^Not quite: ")
    assert calls == []   # refused before anything runs
    assert r.check(1, 6)
    assert calls == [{"cluster": None, "remember": False, "par_partitions": [6], "par_instances": [6],
                      "par_work_ms": 20, "par_window_s": 5}]
    assert "Measured: 280 records/s with 6 busy instance(s), 46.7 records/s a thread: the input is 5.2 threads' " \
           "worth, 242.7 records/s at that rate." in capsys.readouterr().out
    measured["records_per_s"] = 240.0   # a busy machine slows every thread: 5.2 threads' worth is less there too
    assert r.check(1, 6)
    measured["busy"] = 5                # one instance without a task: five threads cannot do 5.2 threads' work
    refused(r.check(1, 6), r"measured 240 records/s, short of 249.6 \(5 of 6 instances busy\)")
    measured.update(records_per_s=0.0, busy=None)   # nothing processed: never a pass
    refused(r.check(1, 6), "measured 0 records/s")


def test_the_backlog_outlasts_the_window_on_its_smallest_partition():
    """Every partition gets at least FEWEST_SHARE of an even share of the KEYS keys (murmur2, as the Java clients
    hash them), so the backlog lasts the settling and the window on its smallest partition too."""
    def murmur2(data: bytes) -> int:   # org.apache.kafka.common.utils.Utils.murmur2
        m, h = 0x5bd1e995, (0x9747b28c ^ len(data)) & 0xffffffff
        for i in range(len(data) // 4):
            k = int.from_bytes(data[4 * i:4 * i + 4], "little")
            k = (k * m) & 0xffffffff
            k = ((k ^ (k >> 24)) * m) & 0xffffffff
            h = ((h * m) & 0xffffffff) ^ k
        tail = data[len(data) & ~3:]
        if tail:
            h = ((h ^ int.from_bytes(tail, "little")) * m) & 0xffffffff
        h = ((h ^ (h >> 13)) * m) & 0xffffffff
        return h ^ (h >> 15)
    assert murmur2(b"foobar") - (1 << 32) == -790332482   # Kafka's UtilsTest
    for partitions in range(1, 13):
        keys = [(murmur2(f"k{i}".encode()) & 0x7fffffff) % partitions for i in range(partition_parallelism.KEYS)]
        fewest = min(keys.count(q) for q in range(partitions))
        assert fewest * partitions / partition_parallelism.KEYS >= partition_parallelism.FEWEST_SHARE, partitions
    p = PAR.validate(par_partitions=[6], par_instances=[6], par_work_ms=20, par_window_s=5)
    n = partition_parallelism.backlog(p, 6)
    assert n * partition_parallelism.FEWEST_SHARE / 6 >= 50 * 45   # 50 records/s a thread for 40 + 5 s
