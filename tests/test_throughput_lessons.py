"""Notebook 07's parallelism and lookup lessons (lab/scenarios/nb07_when_streams_stop/partition_parallelism.py, slow_lookups.py): their
arithmetic and their refusals."""
import pytest

from lab.errors import LabError
from lab.experiment import Spec
from lab.scenarios.nb07_when_streams_stop import partition_parallelism
from lab.scenarios.nb07_when_streams_stop import slow_lookups

PAR = Spec(*partition_parallelism.PARAMS, rules=partition_parallelism.RULES)
LOOKUP = Spec(*slow_lookups.PARAMS, rules=slow_lookups.RULES)


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


def test_the_lookup_arithmetic():
    p = LOOKUP.validate(lookup_latency_ms=50, lookup_threads=4, lookup_batch=50)
    assert slow_lookups.capacity(p, "plain") == 20 and slow_lookups.capacity(p, "threads") == 80
    assert slow_lookups.capacity(p, "batch") == 1000


# The live runs (Kafka Streams apps on a real broker) are notebook 07's test: tests/expectations/nb07.py asserts
# them, failure and CONTROL, so they are not run a second time here.


def test_notebook_07_refuses_only_what_its_chosen_lessons_cannot_take():
    from lab.scenarios.nb07_when_streams_stop import streams_stop
    with pytest.raises(LabError, match="LESSONS is empty"):
        streams_stop.SPEC.validate(lessons=[])
    with pytest.raises(LabError, match="JVMs at once"):
        streams_stop.SPEC.validate(lessons=["partitions"], par_instances=[3, 4, 5])
    # The same instances are no concern when the parallelism lesson does not run.
    assert streams_stop.SPEC.validate(lessons=["poll_loop"], par_instances=[3, 4, 5])["lessons"] == ["poll_loop"]


def test_a_lesson_that_did_not_run_says_so_and_an_exercise_about_it_asks_to_run_it_first():
    from lab.experiment import Timeline
    from lab.scenarios.nb07_when_streams_stop import streams_stop
    from lab.scenarios.nb07_when_streams_stop.streams_stop import StreamsStopResult
    ran = StreamsStopResult("streams_stop", streams_stop.SPEC.validate(lessons=["partitions"]), "run-1", Timeline(0.0),
                            outcomes={}, titles=dict(streams_stop.SCENARIO.titles))
    missing = ran.lesson("poll_loop")
    assert "not run in this run" in missing.figure().data and "not run" in missing.explain()
    assert missing.audits == {}
    with pytest.raises(LabError, match="not run in this run"):
        ran.check(1, ["java/none"])
    with pytest.raises(LabError, match="no lesson 'polling'"):
        ran.lesson("polling")
