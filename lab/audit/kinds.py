"""The anomaly kinds of lab.audit (Jepsen's Kafka checker, adapted): their names, what each means and what
each check needs to run. Every failure notebook's verdict counts them; notebooks 01 and 08 expect RESET_KINDS.
"""
from __future__ import annotations

KINDS = ("duplicate", "lost", "reprocessed_after_reset", "skipped_after_reset", "aborted_read",
         "stale_value", "non_monotonic")
# what a restart after a reset of the committed offsets can do (notebooks 01 and 08)
RESET_KINDS = ["reprocessed_after_reset", "skipped_after_reset"]

MEANING = {
    "duplicate": "input id reflected more than once in committed output",
    "lost": "input id never reflected in committed output",
    "reprocessed_after_reset": "group re-read an offset it had already committed",
    "skipped_after_reset": "offset never read by a group that went on past it",
    "aborted_read": "aborted-transaction record visible to a reader",
    "stale_value": "aggregate went backwards or differs from the truth",
    "non_monotonic": "offsets not increasing within one consumer incarnation",
}

NEEDS = {
    "duplicate": "an output topic",
    "lost": "an output topic and 'produced' history",
    "reprocessed_after_reset": "'read' and 'committed' history",
    "skipped_after_reset": "'read' history and 'produced' history (or an input topic)",
    "aborted_read": "an output or input topic",
    "stale_value": "an output topic whose values carry {'key', 'value'}",
    "non_monotonic": "'read' history",
}
