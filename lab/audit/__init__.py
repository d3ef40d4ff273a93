"""One verdict for every failure notebook, computed on Spark from what actually landed in Kafka.

The checks follow Jepsen's Kafka checker, adapted to what a single laptop run records:

    duplicate                one input id reflected more than once in committed output
    lost                     an input id never reflected in committed output
    reprocessed_after_reset  a group re-read an offset it had already committed
    skipped_after_reset      an offset a group never read although it went on past it
    aborted_read             records of aborted transactions visible to read_uncommitted
                             (or, worse, to read_committed)
    stale_value              a per-key aggregate that goes backwards or differs from the truth
    non_monotonic            a consumer's offsets not increasing within one partition, same incarnation

Inputs: a History (lab.record.history) plus, optionally, the output and input topics (read
through the official Spark connector, read_committed and read_uncommitted). Every
check is a Spark DataFrame of anomaly rows with a `time` column (epoch seconds);
only counts, per-second counts and the first few rows come back to pandas.
A check whose inputs are missing is not run and reports None, never 0.

The package, by job (every name below stays importable from lab.audit):

    kinds     the anomaly kinds, what each means and what each check needs
    inputs    what a check reads: the history files, the topics (both isolation levels), their offsets
    checks    the checks, one Spark DataFrame function each over those inputs
    runner    audit() and warm_up(): the inputs read once, the checks run, counted and sampled in two jobs
    verdict   the Verdict: pass/fail, its table, its figure, its record
"""
from .checks import _aborted, _duplicates, _lost, _match, _non_monotonic, _reprocessed, _skipped, _stale
from .inputs import (HISTORY_KINDS, HISTORY_SCHEMA, OUTPUT_VALUE_SCHEMA, _is_empty, _load_history, _parse_output,
                     _read_both, _topic_offsets)
from .kinds import KINDS, MEANING, NEEDS, RESET_KINDS
from .runner import _add_notes, _as_anomalies, _collect, _run, _wanted_kinds, audit, warm_up
from .verdict import Verdict, _describe, _nice_bucket, _with_times

__all__ = ["audit", "warm_up", "Verdict", "KINDS", "RESET_KINDS", "MEANING", "NEEDS", "HISTORY_SCHEMA",
           "HISTORY_KINDS", "OUTPUT_VALUE_SCHEMA",
           # the module's helpers, where they were before the split
           "_aborted", "_duplicates", "_lost", "_match", "_non_monotonic", "_reprocessed", "_skipped", "_stale",
           "_is_empty", "_load_history", "_parse_output", "_read_both", "_topic_offsets", "_add_notes",
           "_as_anomalies", "_collect", "_run", "_wanted_kinds", "_describe", "_nice_bucket", "_with_times"]
