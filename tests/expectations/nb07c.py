"""Lesson 07c, a lookup per record ("Tales from running Kafka Streams in Production")."""
from tests.expectations import exercises, prediction

# A 50 ms lookup against 50 records/s: 2.5 calls waiting at once.
PARAMETERS = {
    "LOOKUP_MODES": ["plain", "cache", "batch", "threads"],
    "LOOKUP_LATENCY_MS": 50,
    "LOOKUP_RATE": 50,
    "LOOKUP_KEYS": 20,
    "LOOKUP_BATCH": 50,
    "LOOKUP_THREADS": 4,
    "LOOKUP_WINDOW_S": 8,
    "FIX": {"lookup_modes": ["threads"], "lookup_threads": 6},
    "PREDICTION": None,   # the widget's path: no prediction made
    "INTERACTIVE": False,
}

# The control: 10 records/s x 50 ms, half of one thread's second: every mode keeps up, plain too.
CONTROL = {**PARAMETERS, "LOOKUP_RATE": 10, "FIX": {}, "PREDICTION": "yes, it keeps up"}

# The panel, clicked in the CONTROL run: the lesson with a cache only.
PANEL = {"lookup_modes": ["cache"]}
PANEL_FAILS = False


def check(results):
    assert results["failure_reproduced"] is True
    prediction(results, None, "no, its lag keeps growing")
    lookups = results["lookups"]
    assert not lookups["plain"]["keeps_up"] and lookups["plain"]["lag_growth"] > 0, lookups["plain"]
    for mode in ("cache", "batch", "threads"):
        assert lookups[mode]["keeps_up"], lookups[mode]
    assert lookups["cache"]["calls_per_s"] < lookups["plain"]["calls_per_s"], lookups
    assert results["lookup_service_calls"] > 0
    # 50 records/s at 50 ms a call: the six threads keep up where the plain app fell behind
    fixed = results["mitigation"]
    assert fixed["clean"] is True and list(fixed["lookups"]) == ["threads"], fixed["verdict"]
    assert fixed["lookups"]["threads"]["keeps_up"] is True and fixed["param_lookup_threads"] == 6, fixed["lookups"]
    # The exercise: plain fell behind, batch kept up: the wrong theory, one call's budget for every mode, is
    # refused by batch.
    answers = exercises(results, [1])
    assert answers[1] is None and "keeps_up('batch', p) = False, but in this run it kept up" in \
        results["exercises"]["1"]["wrong"], results["exercises"]["1"]


def check_control(results):
    assert results["failure_reproduced"] is False
    prediction(results, CONTROL["PREDICTION"], "yes, it keeps up")
    assert sorted(results["lookups"]) == ["batch", "cache", "plain", "threads"], results["lookups"]
    for mode, row in results["lookups"].items():
        assert row["keeps_up"], (mode, row)      # plain too: a lookup per record is fine within the budget
    assert results["mitigation"] is None
    answers = exercises(results, [1])
    assert answers[1] is None, answers
