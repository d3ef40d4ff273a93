"""The course registry: its chapters in order, each with its notebooks, and where their code lives.

A chapter is one source's theme; a notebook is one lesson (Predict, run, observe, explain, Mitigate, Try), keyed by
its number: `notebooks/07a_poll_loop.ipynb` <-> module `poll_loop` of the chapter's package
`lab/scenarios/nb07_when_streams_stop/` (its `lesson`, a lab.toolbox.lesson.Lesson) <-> `tests/expectations/nb07a.py`.
A chapter of one lesson has one notebook, `notebooks/04_store_reads.ipynb`, whose module (`stale_standby`, in its
`folder`) ends with its `lesson` too: the setup check and the doctor's notebook alike. A notebook's name and what it
is about are read before its question, so neither names the failure.
No chapter's package imports another's: what two share lives in the toolbox (lab/toolbox and the rooms under it).
Notebook 00's course table, the README's course table, `python -m lab params` and the tests read this list.
"""
from __future__ import annotations

import ast
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"

# The production reports the course reproduces, by their own titles.
RETENTION = "“Some kafka retention lessons (we learned the hard way)”"
STREAMS_TALES = "“Tales from running Kafka Streams in Production” (2019)"
QUOTAS = "“Quotas and Kafka Streams EOS”"
MULTI_RUNNER = "the kafka-streams-multi-runner repository"


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
        """Its lab.toolbox.lesson.Lesson."""
        return self.module().lesson

    @property
    def path(self) -> Path:
        return NOTEBOOK_DIR / f"{self.name}.ipynb"

    def written_fix(self) -> dict | None:
        """The fix as its Mitigate cell writes it (`fixed = lesson.mitigate(result, caching=False)`: {"caching":
        False}), None when it has no Mitigate step. What the learner runs, and what a benchmark times."""
        for cell in json.loads(self.path.read_text())["cells"]:
            if cell["cell_type"] == "code" and (call := mitigate_call("".join(cell["source"]))):
                return {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        return None

    def defaults(self) -> dict:
        """The lesson's parameters as the notebook's parameters cell sets them (where it differs from the spec's
        defaults, the notebook's value is the one a learner runs), validated."""
        for cell in json.loads(self.path.read_text())["cells"]:
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                tree = ast.parse("".join(cell["source"]))
                values = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                          for t in node.targets if isinstance(t, ast.Name)}
                return self.lesson.spec.from_notebook(values)
        return self.lesson.spec.validate()

    def shows(self) -> str:
        """What it is about, with where it was reported."""
        return self.failure + (f" (from {' and '.join(self.sources)})" if self.sources else "")


def mitigate_call(source: str) -> ast.Call | None:
    """The `fixed = lesson.mitigate(result, ...)` call in a cell's source (its keywords: the fix), or None."""
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["fixed"]
                and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "lesson.mitigate"
                and [ast.unparse(a) for a in node.value.args] == ["result"]):
            return node.value
    return None


def chapter(number: str, slug: str, title: str, sources: tuple, *lessons: tuple) -> list[Notebook]:
    """A chapter of lesson notebooks `<number><letter>_<name>`, each (name, module, what it is about)."""
    return [Notebook(f"{number}{chr(ord('a') + i)}_{name}", module, about, sources, folder=f"nb{number}_{slug}",
                     chapter=title)
            for i, (name, module, about) in enumerate(lessons)]


COURSE = [
    Notebook("00_setup_check", "setup_check",
             "Java, the embedded broker, clients, Spark and the audit, checked on your machine"),
    Notebook("01_quiet_service", "offset_expiry",
             "consumer groups that stop reading for a while, then come back", (RETENTION,),
             folder="nb01_offset_expiry_reprocessing"),
    *chapter("02", "transactional_id_expiry", "Exactly-once apps that go quiet", (RETENTION,),
             ("idle_clients", "idle_clients", "exactly-once clients that sit idle, then send again"),
             ("idle_streams", "idle_streams", "a Kafka Streams app under exactly-once that sits idle as long"),
             ("old_brokers", "old_brokers", "a producer whose records retention deleted")),
    *chapter("03", "quota_driven_fencing", "Exactly-once under a producer quota", (QUOTAS,),
             ("over_quota", "fencing", "an exactly-once Kafka Streams app over its producer quota"),
             ("sweep", "sweep", "several clients against one producer quota")),
    Notebook("04_store_reads", "stale_standby",
             "reads from a Kafka Streams store while its instances start and stop", (MULTI_RUNNER,),
             folder="nb04_stale_standby_cache"),
    *chapter("05", "exactly_once_under_crashes", "Exactly-once under crashes", (RETENTION, STREAMS_TALES),
             ("crash_points", "crash_points", "a crash at every point of the processing, under exactly-once and "
              "at-least-once"),
             ("exception_handlers", "exception_handlers", "a record the processing cannot take, under each exception "
              "handler"),
             ("state_schema", "schema_change", "version 2 of an app meets version 1's state"),
             ("refused_record", "production_errors", "an output record the broker refuses, under the production "
              "exception handler")),
    *chapter("06", "state_in_production", "What state costs in production", (STREAMS_TALES,),
             ("store_growth", "state_growth", "ever-new keys in a state store"),
             ("restore", "state_restore", "a restart after a crash, under exactly-once, at-least-once and with standbys"),
             ("rocksdb_memory", "rocksdb_memory", "the memory RocksDB takes for an app's stores"),
             ("changelog_reader", "changelog_api", "a downstream team reading an app's changelog"),
             ("disk_space", "disk_space", "how much disk a store takes")),
    *chapter("07", "when_streams_stop", "Work between polls, more instances, a broker bounce", (STREAMS_TALES,),
             ("poll_loop", "poll_loop", "work between two polls, in the Java client, librdkafka and Kafka Streams"),
             ("partitions", "partition_parallelism", "more instances for a busy Kafka Streams app"),
             ("lookups", "slow_lookups", "a call to an external service for every record"),
             ("broker_bounce", "broker_bounce", "a broker bounce under a Kafka Streams app")),
    Notebook("08_diagnose_your_cluster", "diagnose",
             "a read-only diagnosis of a cluster (`make doctor`), each finding then tested "
             "on a cluster of the lab's own"),
    Notebook("09_work_queue", "share_locks",
             "workers sharing a queue of records on Kafka 4 (share groups, KIP-932)", folder="nb09_share_groups"),
]


def notebook(name: str) -> Notebook:
    """The entry of a notebook, by its name ("07a_poll_loop") or number ("07a")."""
    for entry in COURSE:
        if name in (entry.name, entry.number):
            return entry
    raise KeyError(f"no notebook {name!r} in the course: {', '.join(e.name for e in COURSE)}")


def written_fix(name: str) -> dict:
    """The fix notebook `name`'s Mitigate cell writes, {} without one: what a learner sees above its exercises."""
    return notebook(name).written_fix() or {}


def course_table(link: str = "{name}.ipynb") -> str:
    """The course as a markdown table: each notebook and what it is about, a chapter's lessons under a row of its
    own that names it and its source (notebook 00 and the README)."""
    rows = ["| notebook | what it is about |", "|---|---|"]
    for i, e in enumerate(COURSE):
        if e.chapter and (i == 0 or COURSE[i - 1].chapter != e.chapter):
            rows.append(f"| **{e.number[:2]} · {e.chapter}** | from {' and '.join(e.sources)} |")
        rows.append(f"| [`{e.name}`]({link.format(name=e.name)}) | {e.failure if e.chapter else e.shows()} |")
    return "\n".join(rows)
