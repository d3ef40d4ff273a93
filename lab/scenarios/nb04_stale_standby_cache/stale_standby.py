"""Lesson 04, reads while tasks move between instances: PROGRAM's instance toggles played on real Kafka Streams JVMs
(lab/java/StaleStandbyWorker.java: a per-key count, cached or not, with standbys and exactly-once) while the
generator logs each key's true count, once per variant (the run, then each version of COMPARE_VERSIONS with the
same cache setting, then, with COMPARE, caching off, then each version of STREAMS_PROTOCOL on Kafka 4's streams group
protocol). What it measured is in stale_standby_report; its exercises in exercises.
The worker needs Kafka Streams 3.0.0 or later.
"""
from __future__ import annotations

import re
import threading
import time

from ...cluster import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param, Run, lab_lines
from ...toolbox.admin import set_group_config
from ...toolbox.apps import stop_together
from ...toolbox.checks import check_streams_program
from ...toolbox.consume import read_committed
from ...toolbox.lesson import Lesson
from ...toolbox.memory import child_pids, peak_rss
from ...toolbox.predict import labels
from ...record.generator import generate
from ...record.history import History
from ...runtime.programs import JavaProgram
from .exercises import EXERCISES
from .stale_standby_report import StaleStandbyResult, Variant, analyse, measured_answer, stale_table

MAIN, SOURCES = "StaleStandbyWorker", ["StaleStandbyWorker.java", "Lab.java"]
OLDEST_SUPPORTED = (3, 0, 0)                          # the worker's TaskMetadata / exactly_once_v2 API
STREAMS_PROTOCOL_FROM = (4, 2, 0)                     # KIP-1071's streams group protocol, production-ready (4.1: early access)
MAX_BROKER_STANDBYS = 2                               # the broker's group.streams.max.standby.replicas (its default)
MAX_INSTANCES = 4                                     # JVMs this machine holds next to a broker


def parse_program(program) -> list[int]:
    """'1 2 3' (or [1, 2, 3]) -> [1, 2, 3]; each number toggles that instance."""
    tokens = program.replace(",", " ").split() if isinstance(program, str) else list(program)
    try:
        steps = [int(t) for t in tokens]
    except (TypeError, ValueError):
        raise LabError(f"PROGRAM is instance numbers separated by spaces, like '1 2 3'; got {program!r}.") from None
    if not steps or any(not 1 <= s <= MAX_INSTANCES for s in steps):
        raise LabError(f"PROGRAM={program!r}: give instance numbers 1..{MAX_INSTANCES} (the JVMs this machine "
                       "holds), like '1 2 3'.")
    return steps


def check_streams_version(version: str, name: str = "STREAMS_VERSION") -> None:
    """Resolve (and compile the worker against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="its TaskMetadata / exactly_once_v2 API")


def check_streams_protocol_version(version: str) -> None:
    check_streams_version(version, "STREAMS_PROTOCOL")
    if parse_version(version) < STREAMS_PROTOCOL_FROM:
        raise LabError(f"STREAMS_PROTOCOL: Kafka Streams {version} has no production-ready streams group protocol "
                       "(KIP-1071): give 4.2.0 or later, like 4.3.1.")


def _standbys_the_broker_allows(p: dict) -> str | None:
    if p["streams_protocol"] and p["standby_replicas"] > MAX_BROKER_STANDBYS:
        return (f"STANDBY_REPLICAS={p['standby_replicas']} with STREAMS_PROTOCOL: the broker refuses a streams group "
                f"more than {MAX_BROKER_STANDBYS} standby replicas (group.streams.max.standby.replicas): give "
                f"{MAX_BROKER_STANDBYS} or fewer.")
    return None


def _leaves_one_running(p: dict) -> str | None:
    running: set[int] = set()
    for s in parse_program(p["program"]):
        running ^= {s}
    return None if running else (f"PROGRAM={p['program']!r} ends with every instance stopped, so the last inputs "
                                 "would never be processed: leave one running (e.g. add a start).")


PARAMS = [
    Param("streams_version", "3.3.1", "Kafka Streams version of the run (3.0.0 or later)",
          check=check_streams_version),
    Param("compare_versions", ["4.3.1"], "other Kafka Streams versions, each playing the same program after it, "
          "its cache set as CACHING (3.0.0 or later; empty: none)",
          check=lambda versions: [check_streams_version(v, "COMPARE_VERSIONS") for v in versions]),
    Param("compare", False, "also play the program with caching off, after the others"),
    Param("streams_protocol", [], "Kafka Streams versions (4.2.0 or later) that play the program once more, after the "
          "others, on the streams group protocol (KIP-1071, group.protocol=streams), the cache on (empty: none)",
          check=lambda versions: [check_streams_protocol_version(v) for v in versions]),
    Param("caching", True, "the store's cache in the run"),
    Param("program", "1 2 3", "instance toggles, one per step: each number starts that instance if it is stopped, "
          "stops it if it runs (every instance starts stopped; the source's: 1 2 3)", check=parse_program),
    Param("step_seconds", 8.0, "time between toggles, from when the previous one took effect", lo=3, hi=300,
          unit="s"),
    Param("settle_seconds", 8.0, "inputs keep coming this long after the last toggle", lo=0, hi=600, unit="s"),
    Param("standby_replicas", 1, "num.standby.replicas", lo=0, hi=3),
    Param("partitions", 6, "input partitions, i.e. the tasks that move", lo=1, hi=48),
    Param("keys", 30, "distinct keys the generator increments", lo=1, hi=100_000),
    Param("rate", 50.0, "input records per second", lo=1, hi=2000, unit="records/s"),
]


def needs(p: dict) -> dict:
    """One broker at the lab's version: only the Streams clients change version."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={})


def variants(p: dict) -> list[tuple[str, str, bool, str]]:
    """(label, Kafka Streams version, caching, group protocol): the run, each other version with the same cache
    setting, then, with COMPARE, caching off, all on the classic protocol; then each version of STREAMS_PROTOCOL with
    the cache on (the setting the question is about) on the streams group protocol."""
    others = [(f"version {v}", v, p["caching"], "classic") for v in dict.fromkeys(p["compare_versions"])
              if v != p["streams_version"]]
    off = [("caching off", p["streams_version"], False, "classic")] if p["compare"] and p["caching"] else []
    kafka4 = [(f"version {v}, streams protocol", v, True, "streams") for v in dict.fromkeys(p["streams_protocol"])]
    return [("main", p["streams_version"], p["caching"], "classic")] + others + off + kafka4


def describe_program(program) -> str:
    """What a program does, step by step, from every instance stopped: '1 2 1' -> 'instance 1 starts, then instance 2
    starts, then instance 1 stops'."""
    up: set[int] = set()
    steps = []
    for i in parse_program(program):
        steps.append(f"instance {i} {'stops' if i in up else 'starts'}")
        up ^= {i}
    return ", then ".join(steps)


def _standbys(n: int) -> str:
    return "no standby replica" if n == 0 else f"{n} standby replica" + ("s" if n > 1 else "")


def question_versions(p: dict) -> list[str]:
    """The versions the question asks about: each that plays the program with the run's cache setting."""
    return [version for _, version, caching, protocol in variants(p)
            if caching == p["caching"] and protocol == "classic"]


def question(p: dict) -> tuple:
    """The Predict step: which of the versions that play the program serve a stale value (stale_table)?"""
    versions = question_versions(p)
    store = "a store with its cache on" if p["caching"] else "a store without a cache"
    plays = (f"The same program plays on Kafka Streams {', then on '.join(versions)}" if len(versions) > 1
             else f"The program plays on Kafka Streams {versions[0]}")
    return (f"{plays}: {_standbys(p['standby_replicas'])} per task, {store}; {describe_program(p['program'])}, "
            "while inputs keep coming. Which of them serve a stale value?", labels(stale_table(versions)))


def every_variant(lab: Run, p: dict) -> StaleStandbyResult:
    """Every variant of the program on one broker, one after the other."""
    measured = {label: _variant(lab, label, version, caching, protocol, p)
                for label, version, caching, protocol in variants(p)}
    return StaleStandbyResult("store_reads", p, lab.id, measured["main"].timeline, variants=measured,
                              bootstrap=lab.bootstrap)


def _variant(lab: Run, label: str, version: str, caching: bool, protocol: str, p: dict) -> "Variant":
    steps, app = parse_program(p["program"]), f"{lab.id}-{re.sub(r'[^a-z0-9]+', '-', label)}"
    lab.phase(f"{label}: Kafka Streams {version}, caching "
              f"{'on' if caching else 'off'}, {p['standby_replicas']} standby, {protocol} protocol, "
              f"program {p['program']!r}")
    history = History(lab.folder / app / "history", app)
    topics = lab.topics(f"{app}-input", f"{app}-output", partitions=p["partitions"])
    config = {"lab.input.topic": topics[0], "lab.output.topic": topics[1], "lab.caching": str(caching).lower(),
              "application.id": app, "bootstrap.servers": lab.bootstrap, "processing.guarantee": "exactly_once_v2",
              "num.standby.replicas": p["standby_replicas"], "commit.interval.ms": 100,
              "num.stream.threads": 1,   # one thread cache per instance, as in the reproducer
              # Streams does not leave the group on close: a stopped instance's tasks move once its
              # session expires, so keep that short (the broker's minimum is 6 s).
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 1500}
    if protocol == "streams":
        # KIP-1071: the broker assigns the tasks, and its group config places the standbys (the app's own
        # num.standby.replicas stays in its properties: Kafka Streams says it ignores it). A member leaves the group
        # when it closes, so no short session is needed (the broker's minimum is 45 s).
        del config["session.timeout.ms"], config["heartbeat.interval.ms"]
        config["group.protocol"] = "streams"
        set_group_config(lab.cluster.admin(), app, **{"streams.num.standby.replicas": str(p["standby_replicas"])})
    workers = {i: lab.program(JavaProgram(
        f"{label.replace(' ', '-')}-worker-{i}", version, MAIN, SOURCES, heap="256m",
        properties={**config, "lab.instance": i, "state.dir": lab.folder / app / f"state-{i}"}))
        for i in sorted(set(steps))}
    t0, toggles, stop, up = time.time(), [], threading.Event(), set()
    generator = lab.background(generate, lab.bootstrap, topics[0], None, history, keys=p["keys"], rate=p["rate"],
                               until=stop)  # open-ended: the program's length depends on how fast JVMs join
    pids = lambda: [w.process.pid for w in workers.values() if w.alive()]  # noqa: E731
    rss = lab.background(peak_rss, stop, lambda: {"instances": pids(), "brokers": child_pids("kafka.Kafka"),
                                                  "all_up": pids() if len(pids()) == len(workers) else []})
    try:
        for k, instance in enumerate(steps):
            worker, since = workers[instance], time.time()
            action = "stop" if worker.alive() else "start"
            toggles.append({"ts": since, "instance": instance, "action": action, "step": k})
            lab.say(f"[{k}] {action} instance {instance}")
            up ^= {instance}
            if action == "start":
                worker.start()
                lab.wait(lambda: any(r["ts"] >= since for r in lab_lines(worker.log_path, kind="assignment",
                                                                             state="RUNNING")),
                         120, f"{worker.name} (Kafka Streams {version}) to reach RUNNING", child=worker.process)
            else:
                worker.stop()
                toggles[-1]["done_ts"] = time.time()  # it logged until here
            last = k == len(steps) - 1
            lab.countdown("inputs keep coming" if last else f"step {k + 1} of {len(steps)}",
                          p["settle_seconds"] if last else p["step_seconds"],
                          done=lambda: any(not workers[i].alive() for i in up))
            for i in (i for i in up if not workers[i].alive()):  # a broken run, not a result
                raise LabError(f"Instance {i} (Kafka Streams {version}) exited; last lines of {workers[i].log_path}:"
                               "\n" + "\n".join(workers[i].process.log().splitlines()[-15:]))
        stop.set()
        generator.result(120)
        produced = history.frame("produced")
        ids = set(produced["id"])
        records = read_committed(lab, topics[1], lambda rows: ids <= {r["id"] for r in rows},
                                 what=f"all {len(ids)} inputs in the committed output")
    finally:
        stop.set()
        running = [i for i, w in workers.items() if w.alive()]
        stop_together([workers[i].process for i in running], timeout=30)   # each closes its Streams client
        toggles += [{"ts": time.time(), "done_ts": time.time(), "instance": i, "action": "stop"} for i in running]
    return analyse(label, version, caching, protocol, t0, history, topics[1], workers, toggles, produced, records,
                   rss.result(10))


def instances_at_once(p: dict) -> int:
    # the most instances PROGRAM has up at one time (each variant runs it, one variant after the other)
    up, most = set(), 0
    for i in parse_program(p["program"]):
        up ^= {i}
        most = max(most, len(up))
    return most


# The Mitigate step: the same program again, alone (no other version, no caching-off copy), with the learner's fix
# (caching off, or another version), and any STREAMS_PROTOCOL version the learner adds to it after it.
# Its key names its runs and is printed while a run goes (a run's folder, its topics): it names the setting only.
lesson = Lesson("store_reads", "Reads while tasks move between instances", params=PARAMS,
                rules=[_leaves_one_running, _standbys_the_broker_allows], needs=needs, body=every_variant, question=question,
                measured_answer=measured_answer, exercises=EXERCISES, apps=(MAIN,), spark_audit=True,
                apps_at_once=instances_at_once,
                mitigate_base={"compare": False, "compare_versions": []})
