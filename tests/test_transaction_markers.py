"""The broker's transaction markers: parsed from DumpLogSegments output, and read from a real broker's
log segments while it runs."""
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from lab.cluster import KafkaCluster
from lab.cluster.segments import parse_markers, segment_files
from lab.toolbox import Timeline
from lab.toolbox.markers import around, describe, draw, producer_ids

# Lines as Kafka 4.3.1's DumpLogSegments --deep-iteration printed them for a notebook 05 run (shortened ids).
SEGMENT = "/data/out-0/00000000000000000000.log"
DUMP = f"""Dumping {SEGMENT}
Log starting offset: 0
baseOffset: 0 lastOffset: 5 count: 6 baseSequence: 0 lastSequence: 5 producerId: 126 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795464687183 size: 1390 magic: 2 compresscodec: none crc: 4276460033 isvalid: true
| offset: 0 CreateTime: 1795464687063 keySize: 2 valueSize: 210 sequence: 0 headerKeys: []
baseOffset: 6 lastOffset: 44 count: 39 baseSequence: 6 lastSequence: 44 producerId: 126 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 1390 CreateTime: 1795464688183 size: 9000 magic: 2 compresscodec: none crc: 1 isvalid: true
baseOffset: 45 lastOffset: 45 count: 1 baseSequence: -1 lastSequence: -1 producerId: 126 producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 11923 CreateTime: 1795464688655 size: 78 magic: 2 compresscodec: none crc: 2625635030 isvalid: true
| offset: 45 CreateTime: 1795464688655 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
baseOffset: 46 lastOffset: 48 count: 3 baseSequence: 45 lastSequence: 47 producerId: 126 producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 12000 CreateTime: 1795464688660 size: 700 magic: 2 compresscodec: none crc: 2 isvalid: true
baseOffset: 49 lastOffset: 49 count: 1 baseSequence: -1 lastSequence: -1 producerId: 126 producerEpoch: 2 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 12731 CreateTime: 1795464691076 size: 78 magic: 2 compresscodec: none crc: 771690854 isvalid: true
| offset: 49 CreateTime: 1795464691076 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0
"""
CRASH = 1795464688.666


def test_markers_are_parsed_with_the_records_they_close():
    markers = parse_markers(DUMP, {SEGMENT: ("out", 0)})
    assert [(m["marker"], m["offset"], m["producer_epoch"], m["records"]) for m in markers] == \
        [("COMMIT", 45, 1, 45), ("ABORT", 49, 2, 3)]
    assert markers[1] == {"topic": "out", "partition": 0, "offset": 49, "producer_id": 126, "producer_epoch": 2,
                          "marker": "ABORT", "timestamp": 1795464691.076, "records": 3}
    assert parse_markers(DUMP, {}) == []   # a segment not asked for


def test_counts_around_a_crash():
    markers = parse_markers(DUMP, {SEGMENT: ("out", 0)})
    c = around(markers, {126}, CRASH)
    assert (c["markers"], c["commit_markers"], c["abort_markers"]) == (2, 1, 1)
    assert (c["commits_before"], c["aborts_after"], c["aborted_by_markers"]) == (1, 1, 3)
    assert c["first_abort_after_s"] == pytest.approx(2.41, abs=0.001)
    assert around(markers, {7}, CRASH)["aborts_after"] == 0          # another producer's markers do not count
    assert around(markers, {126}, None)["aborts_after"] is None      # no crash: nothing to count around
    assert "ABORT marker, partition 0 offset 49: producer 126 epoch 2, closes 3 record(s)" == describe(markers[1])
    tl = Timeline(CRASH - 10)
    assert [(e.kind, e.tone) for e in draw(tl, "app markers", markers)] == \
        [("COMMIT marker", "mitigation"), ("ABORT marker", "failure")]


def test_producer_ids_from_the_clients_log():
    log = ("[2026-11-23 20:11:25,847] INFO [Producer clientId=a] ProducerId set to 126 with epoch 0 (TransactionManager)\n"
           "[2026-11-23 20:11:31,179] INFO [Producer clientId=a] ProducerId set to 127 with epoch 3 (TransactionManager)\n")
    assert producer_ids(log) == {126, 127}
    assert producer_ids(log, until=1795464688.666) == {126}


def test_segment_files_take_one_replica_per_partition(tmp_path):
    for node, size in (("n1", 10), ("n2", 30)):
        for name in ("out-0", "out-1", "out-extra-0", "other-0"):
            (tmp_path / node / name).mkdir(parents=True)
            (tmp_path / node / name / "00000000000000000000.log").write_bytes(b"x" * size)
    found = segment_files([tmp_path / "n1", tmp_path / "n2"], {"out"})
    assert sorted(found.values()) == [("out", 0), ("out", 1)]
    assert all("/n2/" in path for path in found)   # the most complete copy


def test_markers_of_a_running_broker():
    """One committed and one aborted transaction: the markers come back from the active segment at once."""
    with KafkaCluster(name="test-markers") as cluster:
        admin = cluster.admin()
        for future in admin.create_topics([NewTopic("txn", 2, 1), NewTopic("plain", 1, 1)]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "lab-test",
                             "log_level": 0})
        producer.init_transactions(30)
        started = time.time()
        for outcome in ("commit", "abort"):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("txn", value=b"v", partition=0)
            producer.produce("txn", value=b"v", partition=1)
            producer.flush(30)
            getattr(producer, f"{outcome}_transaction")(30)
        plain = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        plain.produce("plain", b"v")
        assert plain.flush(30) == 0
        markers = cluster.transaction_markers("txn", "plain")
        assert cluster.running
    by = {(m["partition"], m["marker"]): m for m in markers}
    assert sorted(by) == [(0, "ABORT"), (0, "COMMIT"), (1, "ABORT"), (1, "COMMIT")]
    assert (by[0, "COMMIT"]["records"], by[0, "ABORT"]["records"], by[1, "ABORT"]["records"]) == (3, 3, 1)
    assert by[0, "COMMIT"]["offset"] == 3 and by[0, "ABORT"]["offset"] == 7
    assert len({m["producer_id"] for m in markers}) == 1 and all(m["topic"] == "txn" for m in markers)
    assert started - 1 <= by[0, "COMMIT"]["timestamp"] <= by[0, "ABORT"]["timestamp"] <= time.time()
