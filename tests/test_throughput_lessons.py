"""Notebook 07's parallelism and lookup lessons (lab/scenarios/partition_parallelism.py, slow_lookups.py):
real Kafka Streams apps on a real broker, measured over a window."""
import pytest

from lab.errors import LabError
from lab.experiment import Run, Spec
from lab.scenarios import partition_parallelism, slow_lookups

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


@pytest.mark.timeout(300)
def test_instances_beyond_the_partitions_sit_idle():
    p = PAR.validate(par_partitions=[2], par_instances=[1, 2, 3], par_work_ms=10, par_window_s=5)
    with Run("test-parallelism", progress=False, **partition_parallelism.needs(p)) as lab:
        outcome = partition_parallelism.run_lesson(lab, p)
    rows = {r["instances"]: r for r in outcome.rows}
    assert outcome.failed
    # 3 instances on 2 partitions: one has no task and processed nothing; the others all worked.
    assert rows[3]["idle_instances"] == 1 and rows[3]["busy_instances"] == 2 and rows[3]["idle_processed"] == 0
    # The control, N <= P: every instance has a task and processed records in the window.
    for n in (1, 2):
        assert rows[n]["idle_instances"] == 0 and rows[n]["busy_instances"] == n, rows[n]
        assert rows[n]["records_per_s"] > 0, rows[n]
    assert outcome.figure().data


@pytest.mark.timeout(300)
def test_a_slow_lookup_falls_behind_and_each_fix_keeps_up():
    p = LOOKUP.validate(lookup_latency_ms=50, lookup_rate=50, lookup_keys=20, lookup_batch=50, lookup_threads=4,
                        lookup_window_s=12)
    with Run("test-lookups", progress=False, **slow_lookups.needs(p)) as lab:
        outcome = slow_lookups.run_lesson(lab, p)
    rows = {r["mode"]: r for r in outcome.rows}
    assert outcome.failed
    # One call per record on one thread: the lag grows (20 calls/s for 50 records/s in).
    assert not rows["plain"]["keeps_up"] and rows["plain"]["lag_growth"] > 0, rows["plain"]
    for mode in ("cache", "batch", "threads"):
        assert rows[mode]["keeps_up"], rows[mode]
    # The cache calls once per key; batching makes fewer calls than records.
    assert rows["cache"]["calls_per_s"] < rows["plain"]["calls_per_s"], rows
    assert rows["batch"]["calls_per_s"] < rows["batch"]["records_per_s"], rows["batch"]
    assert outcome.calls > 0   # the service answered calls
