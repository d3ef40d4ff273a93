"""The broker's transaction markers around a fault: what the coordinator committed and aborted, for whom.

    markers = cluster.transaction_markers("out")          # lab.cluster: read from the log segments
    counts = around(markers, producer_ids={126}, at=crash_ts)
    draw(run.timeline, "app markers", markers)            # one mark per marker on the timeline
    versions = transaction_versions(run, client_of)         # which transaction version (KIP-890) each client ran on
"""
from __future__ import annotations

import re

from ..record.evidence import grep
from ..record.transaction_state import commit_epochs, finalized_level
from .consume import read_to_end

# A Java producer's transaction manager, when InitProducerId answers (the first start, and every epoch bump).
PRODUCER_ID_LINE = r"ProducerId set to (\d+) with epoch (\d+)"


def producer_ids(log, until: float | None = None) -> set[int]:
    """The producer ids a Java client's log says it got (before the epoch time `until`, when given)."""
    return {int(re.search(PRODUCER_ID_LINE, line).group(1)) for ts, line in grep(log, PRODUCER_ID_LINE)
            if until is None or ts is None or ts <= until}


def around(markers: list[dict], ids: set[int], at: float | None) -> dict:
    """Counts of one topic's markers: every COMMIT and ABORT, and when `at` (a fault, epoch s) is given, the
    COMMITs of producers `ids` before it, their ABORTs after it, and the records those ABORTs closed."""
    counts = {"markers": len(markers), "commit_markers": sum(m["marker"] == "COMMIT" for m in markers),
              "abort_markers": sum(m["marker"] == "ABORT" for m in markers),
              "commits_before": None, "aborts_after": None, "aborted_by_markers": None, "first_abort_after_s": None}
    if at is not None:
        mine = [m for m in markers if m["producer_id"] in ids]
        aborts = [m for m in mine if m["marker"] == "ABORT" and m["timestamp"] >= at]
        counts.update(commits_before=sum(m["marker"] == "COMMIT" and m["timestamp"] < at for m in mine),
                      aborts_after=len(aborts), aborted_by_markers=sum(m["records"] for m in aborts),
                      first_abort_after_s=round(min(m["timestamp"] for m in aborts) - at, 3) if aborts else None)
    return counts


def describe(m: dict) -> str:
    """One marker as a line of evidence."""
    return (f"{m['marker']} marker, partition {m['partition']} offset {m['offset']}: producer {m['producer_id']} "
            f"epoch {m['producer_epoch']}, closes {m['records']} record(s)")


def draw(timeline, lane: str, markers: list[dict]) -> list:
    """One point per marker on `lane`: COMMIT green, ABORT red; returns the events."""
    return [timeline.add(lane, f"{m['marker']} marker", m["timestamp"], detail=describe(m),
                         tone="mitigation" if m["marker"] == "COMMIT" else "failure") for m in markers]


def transaction_versions(run, client_of) -> dict | None:
    """Which transaction version (KIP-890) a run's commits ran on: the level the broker finalized, and per client
    (`client_of` maps a transactional id to its client, None for others) whether the coordinator bumped the epoch at
    each commit, version 2's mark. None on a cluster of your own: its transaction log is not read."""
    if not getattr(run.cluster, "owns_broker", False):
        return None
    log_path = getattr(run.cluster, "log_path", None)   # a ZooKeeper-era broker: none (and no version 2)
    return {"finalized": finalized_level(log_path() if log_path else None),
            "clients": commit_epochs(read_to_end(run.bootstrap, "__transaction_state"), client_of)}
