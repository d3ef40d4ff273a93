"""The audit on synthetic histories (each anomaly alone, and a clean run), then once against a real broker."""
from __future__ import annotations

import json
import uuid

import pytest

from lab.audit import KINDS, audit
from lab.errors import LabError
from lab.record.history import History

T0 = 1_700_000_000.0
OUTPUT_SCHEMA = "key STRING, value STRING, `partition` INT, `offset` LONG, timestamp TIMESTAMP"


@pytest.fixture(scope="module")
def spark():
    from lab.audit.spark import spark_session
    session = spark_session()
    yield session
    stop_spark_jvm()


def stop_spark_jvm():
    from lab.audit.spark import stop_spark
    stop_spark()  # the session and its py4j JVM


class Run:
    """A clean synthetic run: 40 inputs over 2 partitions, one app reading and committing every 5,
    one output record per input carrying the true running count of its key."""

    def __init__(self, n: int = 40):
        self.produced, self.read, self.committed, self.restart = [], [], [], []
        self.output, self.uncommitted_extra = [], []
        counts, next_offset, t = {}, {0: 0, 1: 0}, T0
        self.restart.append(dict(app="a", incarnation=0, ts=t))
        for i in range(n):
            key = f"k{i % 4}"
            p = i % 4 % 2
            counts[key] = counts.get(key, 0) + 1
            t += 0.01
            self.produced.append(dict(id=f"r-{i}", key=key, seq=counts[key], topic="in", partition=p,
                                      offset=next_offset[p], true_value=counts[key], ts=t))
            next_offset[p] += 1
        for p in (0, 1):
            for row in [r for r in self.produced if r["partition"] == p]:
                t += 0.01
                self.read.append(dict(app="a", incarnation=0, group="g", topic="in", partition=p,
                                      offset=row["offset"], id=row["id"], ts=t))
                if row["offset"] % 5 == 4:
                    self.committed.append(dict(app="a", incarnation=0, group="g", topic="in", partition=p,
                                               offset=row["offset"] + 1, ts=t + 0.001))
                self.output.append(dict(id=row["id"], key=row["key"], value=row["true_value"], t=t + 0.002))

    def history(self, folder, run_id="run-1") -> History:
        h = History(folder, run_id)
        for kind in ("produced", "read", "committed", "restart"):
            h.log_many(kind, getattr(self, kind))
        return h

    def frames(self, spark):
        """(committed view, uncommitted view) of the output topic, shaped like lab.audit.spark.read_topic."""
        import datetime as dt

        def rows(records):
            return [(r["key"], json.dumps({k: v for k, v in r.items() if k != "t"}), 0, offset,
                     dt.datetime.fromtimestamp(r["t"], dt.timezone.utc)) for offset, r in records]
        committed = list(enumerate(self.output))
        uncommitted = sorted(committed + self.uncommitted_extra, key=lambda x: x[0])
        return (spark.createDataFrame(rows(committed), OUTPUT_SCHEMA),
                spark.createDataFrame(rows(uncommitted), OUTPUT_SCHEMA))

    def audit(self, spark, folder, **kwargs):
        committed, uncommitted = self.frames(spark)
        return audit(self.history(folder), output_df=committed, output_uncommitted_df=uncommitted,
                     spark=spark, **kwargs)


# One mutation per anomaly kind -> the count it must produce.
def add_duplicate(run):
    run.output.insert(4, dict(run.output[3]))                   # r-6 reflected twice, right after itself
    return 1


def lose_two(run):
    del run.output[7], run.output[20]
    return 2


def reset_to_earliest(run):
    t = run.read[-1]["ts"] + 1                                   # restart, committed offsets gone: from 0
    run.restart.append(dict(app="a", incarnation=1, ts=t))
    for row in [r for r in run.produced if r["partition"] == 0][:3]:
        t += 0.01
        run.read.append(dict(app="a", incarnation=1, group="g", topic="in", partition=0,
                             offset=row["offset"], id=row["id"], ts=t))
    return 3


def reset_to_latest(run):
    gone = [r for r in run.read if r["partition"] == 1 and 6 <= r["offset"] <= 9]  # jumped over 6..9
    run.read = [r for r in run.read if r not in gone]
    return len(gone)


def abort_transaction(run):
    # Two records visible only to read_uncommitted (an aborted transaction) in the middle of the topic.
    base = len(run.output)
    run.uncommitted_extra = [(base + 1, dict(id="x-1", key="k0", value=99, t=T0 + 1)),
                             (base + 2, dict(id="x-2", key="k1", value=99, t=T0 + 1))]
    return 2


def stale_count(run):
    run.output[30] = {**run.output[30], "value": run.output[30]["value"] - 2}  # behind the truth and backwards
    return 1


def rewind_without_restart(run):
    i = next(j for j, r in enumerate(run.read) if r["partition"] == 0 and r["offset"] == 3)
    again = {**run.read[1], "ts": run.read[i]["ts"] + 0.001}   # offset 1 again, before any commit
    run.read.insert(i + 1, again)
    return 1


MUTATIONS = {"duplicate": add_duplicate, "lost": lose_two, "reprocessed_after_reset": reset_to_earliest,
             "skipped_after_reset": reset_to_latest, "aborted_read": abort_transaction,
             "stale_value": stale_count, "non_monotonic": rewind_without_restart}


def test_clean_history_is_silent(spark, tmp_path):
    verdict = Run().audit(spark, tmp_path, expect="clean")
    assert verdict.counts == {k: 0 for k in KINDS}, verdict.notes
    assert verdict.passed and verdict.total == 0
    assert all(len(df) == 0 for df in verdict.examples.values())
    assert verdict.notes == []
    assert verdict.figure().layout.annotations[0].text == "no anomalies"


@pytest.mark.parametrize("kind", KINDS)
def test_each_check_fires_alone(spark, tmp_path, kind):
    run = Run()
    expected = MUTATIONS[kind](run)
    verdict = run.audit(spark, tmp_path, expect="anomalies")
    assert verdict.counts == {k: (expected if k == kind else 0) for k in KINDS}, verdict.examples[kind]
    assert verdict.passed
    examples = verdict.examples[kind]
    assert len(examples) == min(expected, 5)
    assert examples["time"].notna().all() and examples["t_s"].is_monotonic_increasing
    assert list(verdict.timeline["kind"].unique()) == [kind]
    table = verdict.table().set_index("anomaly")
    assert table.loc[kind, "count"] == expected
    assert len(verdict.figure().data) == 1
    json.dumps(verdict.as_dict())


def test_examples_say_what_happened(spark, tmp_path):
    run = Run()
    add_duplicate(run)
    reset_to_earliest(run)
    verdict = run.audit(spark, tmp_path)
    dup = verdict.examples["duplicate"].iloc[0]
    assert dup["id"] == "r-6" and dup["copies"] == 2        # output[3] is the 4th input read: r-6
    again = verdict.examples["reprocessed_after_reset"]
    assert set(again["incarnation"]) == {1} and (again["offset"] < again["committed_before"]).all()
    assert again["restart_ts"].notna().all()


def test_aborted_records_in_committed_output_count_for_both_readers(spark, tmp_path):
    run = Run()
    abort_transaction(run)                                      # 2 records only read_uncommitted sees
    run.produced.append(dict(id="a-1", key="k0", seq=99, topic="in", partition=0, offset=99,
                             true_value=None, aborted=True, ts=T0 + 5))
    run.output.append(dict(id="a-1", key="k0", t=T0 + 6))       # an aborted input reached committed output
    both = run.audit(spark, tmp_path / "1", kinds=["aborted_read", "lost"])
    assert both.counts == {"aborted_read": 3, "lost": 0}       # an aborted input is not owed to the output
    committed_only = run.audit(spark, tmp_path / "2", kinds=["aborted_read"], aborted_reader="read_committed")
    assert committed_only.counts == {"aborted_read": 1}
    assert committed_only.examples["aborted_read"]["seen_by"].tolist() == ["read_committed"]


def test_kinds_restricts_and_missing_inputs_are_not_checked(spark, tmp_path):
    run = Run()
    add_duplicate(run)
    committed, _ = run.frames(spark)
    h = History(tmp_path, "run-1")
    h.log_many("produced", run.produced)
    verdict = audit(h, output_df=committed, spark=spark, expect="anomalies")
    assert verdict.counts["duplicate"] == 1 and verdict.counts["lost"] == 0
    # no read/committed history, no uncommitted view: not checked, and said so (None, not 0)
    for kind in ("reprocessed_after_reset", "skipped_after_reset", "non_monotonic", "aborted_read"):
        assert verdict.counts[kind] is None
    assert (verdict.table().set_index("anomaly").loc["aborted_read", "count"]) == "not checked"
    only = audit(h, output_df=committed, spark=spark, kinds=["lost"], expect="clean")
    assert only.counts == {"lost": 0} and only.passed
    with pytest.raises(LabError, match="non_monotonic check needs 'read' history"):
        audit(h, output_df=committed, spark=spark, kinds=["non_monotonic"])


def test_bad_input_is_a_clear_message(spark, tmp_path):
    run = Run()
    h = run.history(tmp_path / "a", run_id="run-1")
    History(h.folder, "run-0").log("read", app="a", incarnation=0, group="g", topic="in",
                                   partition=0, offset=0, id="r-0")
    with pytest.raises(LabError, match="mixes runs.*'run-0' \\(1 lines\\)"):
        audit(h, spark=spark)
    with pytest.raises(LabError, match="Nothing to audit"):
        audit(History(tmp_path / "empty", "run-1"), spark=spark)
    with pytest.raises(LabError, match="Unknown anomaly kind"):
        audit(h, kinds=["duplicates"], spark=spark)
    with pytest.raises(LabError, match="expect must be"):
        audit(h, expect="pass", spark=spark)
    no_ids = spark.createDataFrame([("k", "plain text", 0, 0, None)], OUTPUT_SCHEMA)
    with pytest.raises(LabError, match="no JSON 'id' field"):
        audit(History(tmp_path / "b", "run-1"), output_df=no_ids, spark=spark)


def test_a_small_audit_runs_on_a_twin_session_with_small_data_settings(spark, tmp_path, monkeypatch):
    """A few hundred rows: a twin session (same SparkContext, its own SQL settings) for small data; the lab's
    session keeps its settings for a learner's large audits, and the verdict is the same either way."""
    import lab.audit.spark
    from lab.audit.spark import SMALL_DATA_CONF, SMALL_DATA_ROWS, sized_session
    twin = sized_session(spark, 10)
    assert twin is not spark and twin.sparkContext is spark.sparkContext and sized_session(spark, 10) is twin
    assert sized_session(spark, SMALL_DATA_ROWS + 1) is spark
    assert {key: twin.conf.get(key) for key in SMALL_DATA_CONF} == SMALL_DATA_CONF
    assert twin.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"    # local[2]: two per core
    run = Run()
    expected = reset_to_earliest(run)
    small = audit(run.history(tmp_path / "small"), spark=spark)
    monkeypatch.setattr(lab.audit.spark, "SMALL_DATA_ROWS", -1)           # the same history, as if it were large
    large = audit(run.history(tmp_path / "large"), spark=spark)
    assert small.counts == large.counts and small.counts["reprocessed_after_reset"] == expected, small.counts


def _append_lines(history, start):
    for i in range(start, start + 2000):
        history.log("read", app="p", incarnation=0, group="g", topic="in", partition=0, offset=i, id="x" * 300)


def test_history_lines_from_many_processes_never_interleave(tmp_path):
    import multiprocessing
    h = History(tmp_path, "run-1")
    procs = [multiprocessing.get_context("fork").Process(target=_append_lines, args=(h, k * 2000))
             for k in range(3)]
    for p in procs:
        p.start()
    _append_lines(h, 6000)
    for p in procs:
        p.join(60)
    reads = h.frame("read")
    assert len(reads) == 8000 and sorted(reads["offset"]) == list(range(8000))
    assert h.kinds() == ["read"] and h.run_ids() == {"run-1": 8000}


# ------------------------------------------------------------------ a real broker

@pytest.fixture(scope="module")
def cluster():
    from lab.cluster import KafkaCluster
    with KafkaCluster(name="audit-test") as c:
        yield c


def test_real_topic_with_duplicate_and_aborted_transaction(spark, cluster, tmp_path):
    from confluent_kafka.admin import NewTopic
    from lab.record.generator import generate
    topic = f"audit-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()  # keep a reference: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    h = History(tmp_path, "real-1")
    made = generate(cluster.bootstrap, topic, 120, h, keys=6, transactional=True, transaction_size=20,
                    abort_transactions=[2], duplicate=[70])
    assert (made.produced, made.aborted, made.injected_duplicates) == (100, 20, 1)

    verdict = audit(h, bootstrap=cluster.bootstrap, output_topic=topic, spark=spark, expect="anomalies")
    assert verdict.counts["duplicate"] == 1
    assert verdict.counts["aborted_read"] == made.aborted
    assert verdict.counts["lost"] == 0
    assert verdict.counts["stale_value"] is None        # the generator's records carry no aggregate
    assert verdict.passed
    assert verdict.examples["duplicate"].iloc[0]["id"] == f"{h.run_id}-70"
    assert set(verdict.examples["aborted_read"]["id"]) <= set(made.aborted_ids)
    assert set(verdict.examples["aborted_read"]["seen_by"]) == {"read_uncommitted"}

    # A transaction still open at audit time is not an aborted one: reported, not counted.
    from confluent_kafka import Producer
    open_txn = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"open-{topic}"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    for i in range(3):
        open_txn.produce(topic, key="k0", value=json.dumps({"id": f"open-{i}"}))
    open_txn.flush(30)
    again = audit(h, bootstrap=cluster.bootstrap, output_topic=topic, spark=spark, kinds=["aborted_read"])
    assert again.counts == {"aborted_read": made.aborted}
    assert any("3 record(s)" in n and "still open" in n for n in again.notes), again.notes
    open_txn.abort_transaction(30)

    with pytest.raises(LabError, match="does not exist"):
        audit(h, bootstrap=cluster.bootstrap, output_topic="no-such-topic", spark=spark)
    empty = f"empty-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(empty, 1, 1)])[empty].result(30)
    with pytest.raises(LabError, match="is empty"):
        audit(h, bootstrap=cluster.bootstrap, output_topic=empty, spark=spark)


def test_a_hold_keeps_the_rest_of_the_input_until_the_reader_is_ready(cluster, tmp_path):
    """generate(hold=(i, ready)): records from the i-th on are produced only once ready() is true (notebook 05:
    the app's first commit), at the same pace and with the same running counts as without the hold."""
    import time

    from confluent_kafka.admin import NewTopic
    from lab.record.generator import generate
    topic = f"held-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    asked = []

    def ready():   # true from 1.5 s after the generator first asked
        asked.append(time.monotonic())
        return asked[-1] - asked[0] >= 1.5
    h = History(tmp_path, "held-1")
    made = generate(cluster.bootstrap, topic, 20, h, keys=2, rate=100, hold=(10, ready))
    assert made.produced == 20
    rows = h.frame("produced").sort_values("offset")
    assert list(rows.id.map(lambda i: int(i.rsplit("-", 1)[1]))) == list(range(20))
    created = _create_times(cluster.bootstrap, topic, 20)   # when each record was produced (ms), by offset
    assert len(asked) > 2 and created[10] - created[9] >= 1400, created   # held between the 10th and 11th
    # then at 100/s again (90 ms for these nine gaps), not in a burst that catches up the 1.5 s hold (a few ms);
    # half the pace's span: on a loaded machine a late wake-up of the generator shortens the gaps after it
    assert created[19] - created[10] >= 45, created
    assert sorted(rows.true_value[rows.key == "k0"]) == list(range(1, 11))   # one running count across the hold


def _create_times(bootstrap: str, topic: str, n: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"times-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        while len(got) < n:
            got += [m.timestamp()[1] for m in consumer.consume(n, timeout=10) if m.error() is None]
        return got
    finally:
        consumer.close()


def test_the_spark_driver_runs_c1_alone_unless_a_large_audit_asks_for_the_full_jit(monkeypatch):
    from lab.config import SPARK_FULL_JIT_ENV
    from lab.audit.spark import _jit_option
    monkeypatch.delenv(SPARK_FULL_JIT_ENV, raising=False)
    assert _jit_option() == "-XX:TieredStopAtLevel=1 "
    monkeypatch.setenv(SPARK_FULL_JIT_ENV, "1")
    assert _jit_option() == ""


def test_a_record_that_never_reached_the_log_does_not_count_towards_the_truth(monkeypatch, tmp_path):
    """The truth is what a correct reader of the log computes: a send whose delivery failed (or came back
    without an offset) leaves the running count of its key's later records as it was. The producer is a
    stand-in that fails one delivery: the failure cannot be caused on demand on a real broker."""
    import lab.record.generator as generator

    class OneLost:
        def __init__(self, config):
            self.queued, self.offsets = [], {}

        def produce(self, topic, key, value, on_delivery):
            self.queued.append((topic, key, value, on_delivery))

        def poll(self, timeout=0):
            for topic, key, value, report in self.queued:
                lost = json.loads(value)["id"].endswith("-2")   # k0's second record
                offset = None if lost else self.offsets.setdefault(key, 0)
                self.offsets[key] = self.offsets.get(key, 0) + (not lost)
                report(("timed out" if lost else None), _Message(topic, key, offset))
            self.queued.clear()
            return 0

        def flush(self, timeout=0):
            self.poll()
            return 0

    monkeypatch.setattr(generator, "Producer", OneLost)
    h = History(tmp_path, "lost-1")
    made = generator.generate("localhost:1", "t", 8, h, keys=2)
    assert (made.produced, made.failed) == (7, 1)
    rows = h.frame("produced")
    assert list(rows[rows.key == "k0"].true_value) == [1, 2, 3]    # records 0, 4, 6: record 2 is not counted
    assert list(rows[rows.key == "k1"].true_value) == [1, 2, 3, 4]


class _Message:
    def __init__(self, topic, key, offset):
        self._topic, self._key, self._offset = topic, key, offset

    def topic(self):
        return self._topic

    def partition(self):
        return 0

    def offset(self):
        return self._offset
