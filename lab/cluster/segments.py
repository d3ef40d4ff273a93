"""A topic's log segments as the broker wrote them, read back by Kafka's own DumpLogSegments.

Pure parts, no JVM: which segment files hold a topic's partitions, and the transaction markers
(control records: COMMIT / ABORT) in the tool's `--deep-iteration` output, whose lines look like

    Dumping /.../topic-0/00000000000000000000.log
    baseOffset: 41 lastOffset: 41 count: 1 baseSequence: -1 lastSequence: -1 producerId: 126 producerEpoch: 1
      partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty
      position: 5130 CreateTime: 1795464688671 size: 78 magic: 2 compresscodec: none crc: 0 isvalid: true
    | offset: 41 CreateTime: 1795464688671 keySize: 4 valueSize: 6 sequence: -1 headerKeys: []
      endTxnMarker: ABORT coordinatorEpoch: 0

(each on one line). A marker's timestamp is when the broker wrote it for the transaction coordinator.
"""
from __future__ import annotations

import re
from pathlib import Path

# Kafka 4.3 ships the tool in kafka-tools (Java); 3.x in the broker's own jar (Scala): the first found wins.
DUMP_LOG_SEGMENTS = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")

_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*?producerId: (-?\d+) "
                    r"producerEpoch: (-?\d+) .*?isTransactional: (\w+) isControl: (\w+) .*?"
                    r"(?:CreateTime|LogAppendTime): (-?\d+)")
_MARKER = re.compile(r"^\| offset: (\d+) .*endTxnMarker: (\w+)")


def segment_files(data_dirs: list[Path], topics) -> dict[str, tuple[str, int]]:
    """{segment path: (topic, partition)} of `topics`, one replica per partition: the copy with the most
    bytes (on one node, the only one; on three, the most complete)."""
    best: dict[tuple[str, int], tuple[int, Path]] = {}
    for data in data_dirs:
        for folder in data.glob("*-*"):
            topic, _, partition = folder.name.rpartition("-")
            if topic in topics and partition.isdigit():
                size = sum(f.stat().st_size for f in folder.glob("*.log"))
                key = (topic, int(partition))
                if key not in best or size > best[key][0]:
                    best[key] = (size, folder)
    return {str(seg): key for key, (_, folder) in sorted(best.items()) for seg in sorted(folder.glob("*.log"))}


def parse_markers(text: str, segments: dict[str, tuple[str, int]]) -> list[dict]:
    """The transaction markers in DumpLogSegments output: topic, partition, offset, producer_id,
    producer_epoch, marker ("COMMIT" / "ABORT"), timestamp (epoch s) and records: how many transactional
    records of that producer in that partition the marker closes (commits or aborts)."""
    markers, open_records, where, batch = [], {}, None, None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            where, batch = segments.get(line[len("Dumping "):].strip()), None
        elif (b := _BATCH.search(line)) is not None:
            batch = {"count": int(b[3]), "producer_id": int(b[4]), "producer_epoch": int(b[5]),
                     "transactional": b[6] == "true", "control": b[7] == "true", "timestamp": int(b[8]) / 1000}
            if batch["transactional"] and not batch["control"] and where is not None:
                key = (where, batch["producer_id"])
                open_records[key] = open_records.get(key, 0) + batch["count"]
        elif (m := _MARKER.search(line)) is not None and batch and batch["control"] and where is not None:
            markers.append({"topic": where[0], "partition": where[1], "offset": int(m[1]),
                            "producer_id": batch["producer_id"], "producer_epoch": batch["producer_epoch"],
                            "marker": m[2], "timestamp": batch["timestamp"],
                            "records": open_records.pop((where, batch["producer_id"]), 0)})
    return markers
