"""The course registry: its chapters in order, each with its notebooks, and where their code lives.

A chapter is one source's theme; a notebook is one lesson (Predict, run, observe, explain, Mitigate, Try), keyed by
its number: `notebooks/07a_poll_loop.ipynb` <-> module `poll_loop` of the chapter's package
`lab/scenarios/nb07_when_streams_stop/` (its `lesson`, a lab.experiment.lesson.Lesson) <-> `tests/expectations/nb07a.py`.
A chapter of one lesson has one notebook named after it, `notebooks/04_stale_standby_cache.ipynb`, whose module
(`stale_standby`) ends with its `lesson` too: the setup check and the doctor's notebook alike.
No chapter's package imports another's: what two share lives in the toolbox (lab/experiment, lab/*).
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
    scenario: str      # the module of its chapter's package that the notebook runs
    failure: str       # what it is about, for the course tables (never its answer)
    sources: tuple = ()
    folder: str = ""   # its chapter's package under lab/scenarios (default: nb<name>)
    chapter: str = ""  # the chapter's title, for a lesson notebook of a chapter of several

    @property
    def number(self) -> str:
        return self.name.split("_")[0]

    @property
    def package(self) -> str:
        return f"{__name__}.{self.folder or 'nb' + self.name}"

    def module(self) -> ModuleType:
        return importlib.import_module(f"{self.package}.{self.scenario}")

    @property
    def lesson(self):
        """Its lab.experiment.lesson.Lesson."""
        return self.module().lesson

    def shows(self) -> str:
        """What it is about, with where it was reported."""
        return self.failure + (f" (from {' and '.join(self.sources)})" if self.sources else "")


def chapter(number: str, slug: str, title: str, sources: tuple, *lessons: tuple) -> list[Notebook]:
    """A chapter of lesson notebooks `<number><letter>_<name>`, each (name, module, what it is about)."""
    return [Notebook(f"{number}{chr(ord('a') + i)}_{name}", module, about, sources, folder=f"nb{number}_{slug}",
                     chapter=title)
            for i, (name, module, about) in enumerate(lessons)]


COURSE = [
    Notebook("00_setup_check", "setup_check",
             "Java, the embedded broker, clients, Spark, and the audit finding an injected duplicate and an "
             "aborted transaction"),
    Notebook("01_offset_expiry_reprocessing", "offset_expiry",
             "consumers re-read (or silently skip) a topic after their committed offsets expired", (RETENTION,)),
    *chapter("02", "transactional_id_expiry", "An idle exactly-once app loses its transactional id", (RETENTION,),
             ("idle_clients", "idle_clients", "exactly-once clients idle past their transactional id's expiration"),
             ("idle_streams", "idle_streams", "a Kafka Streams app under exactly-once, idle as long"),
             ("old_brokers", "old_brokers", "a producer whose records retention deleted, on old and new brokers")),
    *chapter("03", "quota_driven_fencing", "Quota-driven fencing of a Kafka Streams exactly-once app", (QUOTAS,),
             ("fencing", "fencing", "an exactly-once Kafka Streams app a little over its producer quota, beside a "
              "later release and the mitigations"),
             ("sweep", "sweep", "load against quota, client version by client version")),
    Notebook("04_stale_standby_cache", "stale_standby",
             "stale reads from a cached store after standby -> active, KAFKA-14624", (MULTI_RUNNER,)),
    *chapter("05", "exactly_once_under_crashes", "Exactly-once under crashes", (RETENTION, STREAMS_TALES),
             ("crash_points", "crash_points", "a crash at every point of the processing, under exactly-once and "
              "at-least-once"),
             ("exception_handlers", "exception_handlers", "a record the processing cannot take, under each exception "
              "handler"),
             ("state_schema", "schema_change", "version 2 of an app meets version 1's state"),
             ("refused_record", "production_errors", "an output record the broker refuses, under the production "
              "exception handler")),
    *chapter("06", "state_in_production", "What state costs in production", (STREAMS_TALES,),
             ("store_growth", "state_growth", "ever-new keys in a plain, a windowed and a TTL store"),
             ("restore", "state_restore", "a restart after a crash, under exactly-once, at-least-once and with standbys"),
             ("rocksdb_memory", "rocksdb_memory", "RocksDB's memory as the partitions grow"),
             ("changelog_reader", "changelog_api", "a downstream team reading an app's changelog"),
             ("disk_space", "disk_space", "a store on a volume of fixed size")),
    *chapter("07", "when_streams_stop", "When streams stop moving", (STREAMS_TALES,),
             ("poll_loop", "poll_loop", "slow work between two polls, in the Java client, librdkafka and Kafka Streams"),
             ("partitions", "partition_parallelism", "more instances for a busy Kafka Streams app"),
             ("lookups", "slow_lookups", "a call to an external service for every record"),
             ("broker_bounce", "broker_bounce", "a broker bounce under Kafka Streams 2.7 and 4.3")),
    Notebook("08_diagnose_your_cluster", "diagnose",
             "is MY cluster exposed? A read-only diagnosis (`make doctor`), each prediction then proven "
             "on a risky cluster and a healthy control"),
]


def notebook(name: str) -> Notebook:
    """The entry of a notebook, by its name ("07a_poll_loop") or number ("07a")."""
    for entry in COURSE:
        if name in (entry.name, entry.number):
            return entry
    raise KeyError(f"no notebook {name!r} in the course: {', '.join(e.name for e in COURSE)}")


def course_table(link: str = "{name}.ipynb") -> str:
    """The course as a markdown table: each notebook and what it is about, a chapter's lessons under a row of its
    own that names it and its source (notebook 00 and the README)."""
    rows = ["| notebook | what it is about |", "|---|---|"]
    for i, e in enumerate(COURSE):
        if e.chapter and (i == 0 or COURSE[i - 1].chapter != e.chapter):
            rows.append(f"| **{e.number[:2]} · {e.chapter}** | from {' and '.join(e.sources)} |")
        rows.append(f"| [`{e.name}`]({link.format(name=e.name)}) | {e.failure if e.chapter else e.shows()} |")
    return "\n".join(rows)
