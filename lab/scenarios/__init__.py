"""The course registry: one entry per notebook, in order, and where its code lives.

Notebook `notebooks/NN_name.ipynb` <-> package `lab/scenarios/nbNN_name/` (its scenario module and, for notebooks
of several lessons, one module per lesson) <-> `tests/expectations/nbNN.py` <-> `benchmarks/bench_NN.py`.
No notebook's package imports another's: what two notebooks share lives in the toolbox (lab/experiment, lab/*).
Notebook 00's course table, the README's course table, `python -m lab params` and the tests read this list.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

# The production reports the course reproduces, by their own titles.
RETENTION = "“Some kafka retention lessons (we learned the hard way)”"
STREAMS_TALES = "“Tales from running Kafka Streams in Production” (2019)"
QUOTAS = "“Quotas and Kafka Streams EOS”"
MULTI_RUNNER = "the kafka-streams-multi-runner reproducer"


@dataclass(frozen=True)
class Notebook:
    name: str          # notebooks/<name>.ipynb
    scenario: str      # the module of its package that the notebook runs (SPEC, run, ...)
    failure: str       # what it shows, for the course tables
    sources: tuple = ()

    @property
    def number(self) -> str:
        return self.name[:2]

    @property
    def package(self) -> str:
        return f"{__name__}.nb{self.name}"

    def module(self) -> ModuleType:
        return importlib.import_module(f"{self.package}.{self.scenario}")

    def shows(self) -> str:
        """The failure, with where it was reported."""
        return self.failure + (f" (from {' and '.join(self.sources)})" if self.sources else "")


COURSE = [
    Notebook("00_setup_check", "setup_check",
             "Java, the embedded broker, clients, Spark, and the audit finding an injected duplicate and an "
             "aborted transaction"),
    Notebook("01_offset_expiry_reprocessing", "offset_expiry",
             "consumers re-read (or silently skip) a topic after their committed offsets expired", (RETENTION,)),
    Notebook("02_transactional_id_expiry", "txn_expiry",
             "\"The producer attempted to use a producer id which is not currently assigned to its transactional "
             "id\", UnknownProducerIdException", (RETENTION,)),
    Notebook("03_quota_driven_fencing", "quota_fencing",
             "slightly exceeding a producer quota fences exactly-once Kafka Streams", (QUOTAS,)),
    Notebook("04_stale_standby_cache", "stale_standby",
             "stale reads from a cached store after standby -> active, KAFKA-14624", (MULTI_RUNNER,)),
    Notebook("05_exactly_once_under_crashes", "eos_crashes",
             "does exactly-once survive a crash at every point? Exception handlers, crash loops, a changed "
             "state schema and an output the broker refuses (the production exception handler)",
             (RETENTION, STREAMS_TALES)),
    Notebook("06_state_in_production", "state_in_production",
             "state stores without TTL, the restore after a crash (the exactly-once wipe, standbys), RocksDB memory "
             "against a bounded config, changelogs that are not an API, a store that runs out of disk space",
             (STREAMS_TALES,)),
    Notebook("07_when_streams_stop", "streams_stop",
             "poll-interval rebalance loops (Java, librdkafka, Kafka Streams), partitions that bound parallelism, "
             "slow lookups, broker bounces and a leader without the apps' listener, `LISTENER_NOT_FOUND` (Streams "
             "2.7.2 against 4.3.1)", (STREAMS_TALES,)),
    Notebook("08_diagnose_your_cluster", "diagnose",
             "is MY cluster exposed? A read-only diagnosis (`make doctor`), each prediction then proven "
             "on a risky cluster and a healthy control"),
]


def notebook(name: str) -> Notebook:
    """The entry of a notebook, by its name ("03_quota_driven_fencing") or number ("03")."""
    for entry in COURSE:
        if name in (entry.name, entry.number):
            return entry
    raise KeyError(f"no notebook {name!r} in the course: {', '.join(e.name for e in COURSE)}")


def course_table(link: str = "{name}.ipynb") -> str:
    """The course as a markdown table: each notebook and what it shows (notebook 00 and the README)."""
    rows = ["| notebook | what it shows |", "|---|---|"]
    rows += [f"| [`{e.name}`]({link.format(name=e.name)}) | {e.shows()} |" for e in COURSE]
    return "\n".join(rows)
