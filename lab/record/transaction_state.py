"""Which transaction version (KIP-890) a run's transactions ran on, from the broker's own records.

The controller finalizes `transaction.version` when the cluster is formatted (Kafka 4's default: 2) and logs it.
A client uses version 2 only if it knows it (kafka-clients 4.x: when the broker's finalized level is 2 or more).
Under version 2 the coordinator bumps the producer epoch at every commit, so in `__transaction_state` a
COMPLETE_COMMIT carries one epoch more than the ONGOING record of its transaction; under version 0 the two are equal.

    level = finalized_level(broker_log)
    per_client = commit_epochs(read_to_end(bootstrap, "__transaction_state"), {txn_id: "client"}.get)
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable

from .evidence import grep

FINALIZED = r"Replayed a FeatureLevelRecord setting feature transaction\.version to (\d+)"
ONGOING, COMPLETE_COMMIT = 1, 4   # TransactionState ids in a TransactionLogValue


def finalized_level(broker_log) -> int | None:
    """The last transaction.version the controller replayed, from its log; None without a log or such a line (an
    external cluster, a broker before 4.0)."""
    found = grep(Path(broker_log), FINALIZED) if broker_log is not None else []
    return int(found[-1][1].rsplit(" to ", 1)[1].split()[0]) if found else None


def _state(key: bytes | None, value: bytes | None) -> tuple | None:
    """(transactional id, producer id, epoch, state) of one record: the key is (int16 version, int16 length, id);
    the value (int16 version, int64 producer id, int16 epoch, int32 timeout, int8 state, ...) in v0 and v1 alike:
    the flexible version's tagged fields come last."""
    if not key or len(key) < 4 or value is None or len(value) < 17:
        return None
    producer_id, epoch = struct.unpack(">qh", value[2:12])
    return key[4:].decode(errors="replace"), producer_id, epoch, value[16]


def commit_epochs(records, client_of: Callable[[str], str | None]) -> dict:
    """client -> {"commits": its COMPLETE_COMMITs, "bumped": those one epoch above their transaction's ONGOING,
    "on_tv2": every commit bumped (None: no commit)}. `records`: (key, value, ts) of __transaction_state in log
    order (consume.read_to_end); `client_of` maps a transactional id to its client, None for others."""
    ongoing: dict = {}
    found: dict = {}
    for key, value, _ in records:
        row = _state(key, value)
        client = row and client_of(row[0])
        if client is None:
            continue
        txn_id, producer_id, epoch, state = row
        counts = found.setdefault(client, {"commits": 0, "bumped": 0})
        if state == ONGOING:
            ongoing[txn_id] = (producer_id, epoch)
        elif state == COMPLETE_COMMIT and txn_id in ongoing:
            began = ongoing.pop(txn_id)
            counts["commits"] += 1
            counts["bumped"] += began == (producer_id, epoch - 1)
    return {client: {**c, "on_tv2": c["bumped"] == c["commits"] if c["commits"] else None}
            for client, c in found.items()}
