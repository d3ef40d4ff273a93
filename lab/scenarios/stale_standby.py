"""Seed 003 / KAFKA-14624: stale reads from a cached store after a task goes standby -> active.

A coordinator (this module) runs a "program" of instance toggles like the seed's Scala one:
"1 2 3" = start instance 1, after one step start 2, after another start 3; a number that is
already running is stopped instead. Each instance is a real Kafka Streams JVM (lab/java/
StaleStandbyWorker.java) counting per key in a key-value store, cached or not, with standby
replicas and exactly-once. Meanwhile a generator produces keyed increments whose true
running count per key is logged as ground truth (lab.history "produced" rows with true_value).

Why values go stale (Kafka 2.6.0 - 3.4.0): when a task moves active -> standby on an instance,
Kafka Streams recycles it without closing its stores, so the entries its thread cache held stay
there. As a standby, changelog records go straight to the inner store, past the cache. When the
task comes back as active on that instance, `get()` answers from the stale cache. The fix
(KAFKA-14172, apache/kafka PR #13369, in 3.4.1 and 3.5.0) clears the caches on recycle.

`run(...)` is the one scenario function the notebook, widgets, tests and benchmarks call.
"""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..cluster import kafka_cluster, parse_version
from ..config import WORK_DIR
from ..errors import LabError
from ..history import History
from ..processes import wait_until
from ..streams import JAVA_DIR, JavaProgram, compile_sources, streams_classpath

MAIN = "StaleStandbyWorker"
SOURCES = ["StaleStandbyWorker.java"]
FIRST_AFFECTED, FIRST_FIXED = (2, 6, 0), (3, 4, 1)   # KAFKA-9501 recycling .. PR #13369
OLDEST_SUPPORTED = (3, 0, 0)                          # the worker's TaskMetadata / exactly_once_v2 API
MAX_INSTANCES = 4                                     # JVMs on a laptop (2 cores in CI)


def is_affected(version: str) -> bool:
    """Whether this Kafka Streams version recycles tasks without clearing their caches."""
    return FIRST_AFFECTED <= parse_version(version) < FIRST_FIXED


def parse_program(program) -> list[int]:
    """'1 2 3' (or [1, 2, 3]) -> [1, 2, 3]; each number toggles that instance."""
    tokens = program.replace(",", " ").split() if isinstance(program, str) else list(program)
    try:
        steps = [int(t) for t in tokens]
    except (TypeError, ValueError):
        raise LabError(f"A program is instance numbers separated by spaces, like '1 2 3'; got {program!r}.") from None
    if not steps:
        raise LabError("The program is empty: give at least one instance number, like '1 2 3'.")
    bad = [s for s in steps if not 1 <= s <= MAX_INSTANCES]
    if bad:
        raise LabError(f"Instance numbers must be 1..{MAX_INSTANCES}; the program has {bad}.")
    return steps


def validate(*, version, program, step_seconds, standby_replicas, caching, partitions, keys, rate,
             settle_seconds) -> list[int]:
    """Every parameter checked before anything starts; returns the parsed program."""
    steps = parse_program(program)
    numbers = dict(step_seconds=step_seconds, settle_seconds=settle_seconds, partitions=partitions, keys=keys,
                   rate=rate)
    wrong = [k for k, v in numbers.items() if isinstance(v, bool) or not isinstance(v, (int, float))]
    if wrong:
        raise LabError(f"{', '.join(wrong)} must be numeric; got {', '.join(repr(numbers[k]) for k in wrong)}.")
    v = parse_version(str(version))
    if v < OLDEST_SUPPORTED:
        raise LabError(f"Kafka Streams {version} is older than the worker supports "
                       f"({'.'.join(map(str, OLDEST_SUPPORTED))}+); the bug itself exists since 2.6.0.")
    running: set[int] = set()
    for s in steps:
        running ^= {s}
    if not running:
        raise LabError(f"The program {program!r} ends with every instance stopped, so the last inputs would "
                       "never be processed: leave at least one instance running (e.g. add a start).")
    if not 3 <= step_seconds <= 300:
        raise LabError(f"step_seconds must be 3..300 (the seed uses 15); got {step_seconds}.")
    if not 0 <= settle_seconds <= 600:
        raise LabError(f"settle_seconds must be 0..600; got {settle_seconds}.")
    if not isinstance(standby_replicas, int) or not 0 <= standby_replicas <= 3:
        raise LabError(f"standby_replicas must be an integer 0..3 (the seed uses 1); got {standby_replicas!r}.")
    if not isinstance(caching, bool):
        raise LabError(f"caching must be True or False; got {caching!r}.")
    if not 1 <= partitions <= 48:
        raise LabError(f"partitions must be 1..48 (the tasks that move); got {partitions}.")
    if not 1 <= keys <= 100_000:
        raise LabError(f"keys must be 1..100000; got {keys}.")
    if not 1 <= rate <= 2000:
        raise LabError(f"rate must be 1..2000 records/s; got {rate}.")
    return steps


@dataclass
class StaleStandbyRun:
    """Everything one run measured; the frames are pandas DataFrames."""
    params: dict
    affected: bool
    t0: float                      # epoch seconds the program started
    bootstrap: str
    input_topic: str
    output_topic: str
    history: History
    toggles: object                # ts, done_ts (a stop finished), instance, action (start / stop), step
    assignments: object            # ts, instance, task, role (active / standby / none): one row per change
    round_trips: object            # instance, task, left_ts, back_ts: active -> standby -> active in one JVM
    output: object                 # committed output, one row per record, with truth and checks
    counts: dict                   # produced, outputs, missing, duplicates, stale_reads, wrong_values,
                                   # backwards, round_trips
    first_stale: dict | None       # the first stale read: key, task, instance, found, expected, ...
    movements: object              # the first stale task's role changes before it
    peak_rss_mb: dict              # instances (all up), each instance, broker(s)
    logs: dict = field(default_factory=dict)   # instance -> log path
    seconds: float = 0.0

    @property
    def stale(self) -> bool:
        """Whether the store answered at least one read with something other than its last write."""
        return self.counts["stale_reads"] > 0

    @property
    def first_stale_seconds(self) -> float | None:
        return None if self.first_stale is None else self.first_stale["t_s"]

    def summary(self) -> dict:
        """JSON-safe numbers for record() and benchmarks."""
        return {"version": self.params["version"], "caching": self.params["caching"],
                "program": self.params["program"], "standby_replicas": self.params["standby_replicas"],
                "affected_version": self.affected, **self.counts,
                "first_stale_s": self.first_stale_seconds,
                "first_stale_key": None if self.first_stale is None else self.first_stale["key"],
                "peak_rss_mb_instances": self.peak_rss_mb.get("instances"),
                "run_seconds": round(self.seconds, 1)}

    def figure(self):
        return timeline_figure(self)

    def stale_rows(self):
        return self.output[self.output["stale_read"]]


# ------------------------------------------------------------------ the scenario

def run(cluster=None, *, version: str = "3.3.1", program="1 2 3", step_seconds: float = 15,
        standby_replicas: int = 1, caching: bool = True, partitions: int = 6, keys: int = 30,
        rate: float = 50, settle_seconds: float | None = None, drain_timeout: float = 90,
        folder: Path | None = None, quiet: bool = False) -> StaleStandbyRun:
    """Run `program` against Kafka Streams `version` and return what happened.

    cluster         a started lab cluster (None: start a one-node cluster for this run)
    program         instance toggles, one per step ("1 2 3": start 1, start 2, start 3)
    step_seconds    time between toggles (the seed: 15)
    settle_seconds  how long inputs keep coming after the last toggle took effect (default: one step)
    partitions      input partitions = tasks that move between instances
    keys, rate      the generator: distinct keys, records per second
    """
    settle_seconds = step_seconds if settle_seconds is None else settle_seconds
    steps = validate(version=version, program=program, step_seconds=step_seconds,
                     standby_replicas=standby_replicas, caching=caching, partitions=partitions,
                     keys=keys, rate=rate, settle_seconds=settle_seconds)
    if cluster is None:
        with kafka_cluster(name="stale-standby") as own:
            return run(own, version=version, program=program, step_seconds=step_seconds,
                       standby_replicas=standby_replicas, caching=caching, partitions=partitions, keys=keys,
                       rate=rate, settle_seconds=settle_seconds, drain_timeout=drain_timeout,
                       folder=folder, quiet=quiet)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    started = time.monotonic()
    run_id = f"stale-{version}-{'cache' if caching else 'nocache'}-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    folder = Path(folder or WORK_DIR / "stale-standby") / run_id
    history = History(folder / "history", run_id)
    input_topic, output_topic = f"{run_id}-input", f"{run_id}-output"
    # Fetch and compile before the clock starts (cached; an unknown version fails here).
    compile_sources([JAVA_DIR / s for s in SOURCES], streams_classpath(version), label=f"{MAIN}-{version}")
    _create_topics(cluster.bootstrap, [input_topic, output_topic], partitions)

    workers = {i: JavaProgram(
        name=f"worker-{i}", version=version, main_class=MAIN, sources=SOURCES, folder=folder, heap="256m",
        properties=_streams_properties(i, run_id, cluster.bootstrap, input_topic, output_topic, caching,
                                       standby_replicas, folder))
        for i in sorted(set(steps))}
    toggles: list[dict] = []
    sampler = _RssSampler(workers)
    stop_producing = threading.Event()
    gen_error: list[BaseException] = []

    def produce():
        try:
            produce_until(stop_producing, cluster.bootstrap, input_topic, history, keys=keys, rate=rate)
        except BaseException as exc:  # reported by the coordinator
            gen_error.append(exc)

    say(f"Kafka Streams {version} ({'affected' if is_affected(version) else 'fixed'}), caching "
        f"{'on' if caching else 'off'}, {standby_replicas} standby, {partitions} tasks; program "
        f"{' '.join(map(str, steps))} every {step_seconds:g}s, then {settle_seconds:g}s more")
    t0 = time.time()
    producer = threading.Thread(target=produce, name="generator", daemon=True)
    try:
        producer.start()
        sampler.start()
        next_step = t0
        for k, instance in enumerate(steps):
            _sleep_until(next_step)
            worker = workers[instance]
            action = "stop" if worker.alive() else "start"
            toggles.append({"ts": time.time(), "instance": instance, "action": action, "step": k})
            say(f"  t+{time.time() - t0:5.1f}s  [{k}] {'starting' if action == 'start' else 'stopping'} "
                f"instance {'+' if action == 'start' else '-'}{instance}")
            if action == "start":
                _start_and_wait_running(worker)
                history.log("restart", app=worker.name, incarnation=worker.starts)
            else:
                worker.stop()
                toggles[-1]["done_ts"] = time.time()  # it logged until here
            _check_alive(workers, toggles)
            # A step counts from when its toggle took effect, so a slow JVM start does not eat it.
            next_step = time.time() + step_seconds
        end = time.time() + settle_seconds  # after the last toggle: inputs keep coming this long
        while time.time() < end:  # a countdown while inputs keep coming
            say(f"  t+{time.time() - t0:5.1f}s  inputs keep coming for {end - time.time():.0f}s more")
            _sleep_until(min(end, time.time() + 10))
            _check_alive(workers, toggles)
        stop_producing.set()
        producer.join(timeout=120)
        if gen_error:
            raise LabError(f"The generator failed: {gen_error[0]}")
        produced = history.frame("produced")
        say(f"  {len(produced)} inputs produced; waiting for their committed output ...")
        records = _read_output(cluster.bootstrap, output_topic, set(produced["id"]), drain_timeout, say)
    finally:
        stop_producing.set()
        sampler.stop()
        running = [w for w in workers.values() if w.alive()]
        for w in running:
            w.process.terminate()  # all at once: each closes its Streams client
        for w in running:
            w.stop()
            toggles.append({"ts": time.time(), "done_ts": time.time(), "instance": int(w.name.split("-")[1]),
                            "action": "stop", "step": None})
    return _analyse(params=dict(version=version, program=" ".join(map(str, steps)), step_seconds=step_seconds,
                                standby_replicas=standby_replicas, caching=caching, partitions=partitions,
                                keys=keys, rate=rate, settle_seconds=settle_seconds),
                    t0=t0, bootstrap=cluster.bootstrap, input_topic=input_topic, output_topic=output_topic,
                    history=history, workers=workers, toggles=toggles, produced=produced, records=records,
                    peak=sampler.peak(), seconds=time.monotonic() - started)


def produce_until(stop: threading.Event, bootstrap: str, topic: str, history: History, *, keys: int,
                  rate: float) -> int:
    """Keyed increments at `rate`/s until `stop` is set; each acknowledged one logged as "produced".

    Same records and history rows as lab.generator.generate (value {"id","key","seq"}, true_value =
    the key's running count), but open-ended: the program's length depends on how fast instances join.
    """
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         "partitioner": "murmur2_random"})  # like the Java clients
    rows, failed, count = [], [], {}

    def delivered(row):
        def callback(err, msg):
            if err is not None or msg.offset() is None or msg.offset() < 0:  # no offset: not in the log
                failed.append(f"{row['id']}: {err or 'acknowledged without an offset'}")
            else:
                rows.append({**row, "topic": topic, "partition": msg.partition(), "offset": msg.offset(),
                             "ts": time.time()})
        return callback

    start, i = time.monotonic(), 0
    while not stop.is_set() or i == 0:
        key = f"k{i % keys}"
        count[key] = count.get(key, 0) + 1
        row = {"id": f"{history.run_id}-{i}", "key": key, "seq": count[key], "true_value": count[key]}
        producer.produce(topic, key=key, value=json.dumps({k: row[k] for k in ("id", "key", "seq")}),
                         on_delivery=delivered(row))
        producer.poll(0)
        if len(rows) >= 200:
            history.log_many("produced", rows[:])
            rows.clear()
        i += 1
        ahead = i / rate - (time.monotonic() - start)
        if ahead > 0:
            stop.wait(ahead)
    if producer.flush(60) or failed:
        raise LabError(f"Producing to {topic} failed ({len(failed)} errors, e.g. {failed[:1]}): is the broker up?")
    history.log_many("produced", rows)
    return i


def _streams_properties(instance, run_id, bootstrap, input_topic, output_topic, caching, standby, folder):
    return {
        "lab.instance": instance, "lab.input.topic": input_topic, "lab.output.topic": output_topic,
        "lab.caching": str(caching).lower(),
        "application.id": run_id,
        "bootstrap.servers": bootstrap,
        "state.dir": folder / f"state-{instance}",
        "num.stream.threads": 1,             # one thread cache per instance, as in the seed
        "num.standby.replicas": standby,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        # Streams does not leave the group on close: a stopped instance's tasks move once its session
        # expires, so keep that short (the broker's minimum is 6 s).
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1500,
    }


def _create_topics(bootstrap: str, topics: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=30)
    for topic, f in futures.items():
        try:
            f.result(30)
        except Exception as exc:
            raise LabError(f"Could not create topic {topic}: {exc}") from None
    # "Created" means the controller agreed; the broker may still be creating the partitions. Records
    # produced before that were seen acknowledged without an offset and never written (librdkafka
    # with a 4.3 broker), so wait until every partition answers an offsets query.
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    wanted = [TopicPartition(t, p) for t in topics for p in range(partitions)]

    def ready():
        try:
            futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in wanted}, request_timeout=5)
            return all(f.result().offset >= 0 for f in futures.values())
        except Exception:
            return False

    wait_until(ready, 60, f"the partitions of {', '.join(topics)} to be ready", interval=0.3)


def _sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        time.sleep(delay)


def _start_and_wait_running(worker: JavaProgram, timeout: float = 120) -> None:
    """Start one instance and wait until its Kafka Streams client is RUNNING (it joined the group)."""
    offset = worker.log_path.stat().st_size if worker.log_path.exists() else 0
    worker.start()

    def running():
        with open(worker.log_path, "rb") as f:
            f.seek(offset)
            return b"state=RUNNING" in f.read()

    wait_until(running, timeout, f"{worker.name} (Kafka Streams {worker.version}) to reach RUNNING",
               interval=0.1, child=worker.process)


def _check_alive(workers: dict, toggles: list) -> None:
    """An instance that should run but exited is a broken run, not a result."""
    for i, w in workers.items():
        should_run = sum(1 for t in toggles if t["instance"] == i) % 2 == 1
        if should_run and w.process is not None and not w.alive():
            tail = "\n".join(w.process.log().splitlines()[-15:])
            raise LabError(f"Instance {i} (Kafka Streams {w.version}) exited with {w.process.returncode()}; "
                           f"last lines of {w.log_path}:\n{tail}")


def _read_output(bootstrap: str, topic: str, ids: set, timeout: float, say) -> list[dict]:
    """Every committed output record (read_committed), waiting until each produced id appears."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lab-audit-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 0})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        records, seen = [], set()
        deadline = last_note = time.monotonic()
        deadline += timeout
        while time.monotonic() < deadline and not ids <= seen:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error():
                    continue
                row = json.loads(msg.value())
                row.update(partition=msg.partition(), offset=msg.offset())
                records.append(row)
                seen.add(row["id"])
            if time.monotonic() - last_note > 10:
                say(f"  ... {len(ids & seen)}/{len(ids)} inputs in the committed output")
                last_note = time.monotonic()
        # whatever else is already committed (duplicates, late copies)
        while True:
            batch = consumer.consume(1000, timeout=1.0)
            if not batch:
                break
            for msg in batch:
                if not msg.error():
                    records.append({**json.loads(msg.value()), "partition": msg.partition(), "offset": msg.offset()})
        return records
    finally:
        consumer.close()


# ------------------------------------------------------------------ what happened

_ASSIGNMENT = re.compile(r"LAB-ASSIGNMENT at=(\d+) instance=(\d+) state=(\w+) active=(\S*) standby=(\S*)")


def parse_assignments(workers: dict, toggles: list) -> "pd.DataFrame":
    """Role changes per (instance, task) from the workers' LAB-ASSIGNMENT lines and the stops."""
    import pandas as pd
    snapshots = []
    for i, w in workers.items():
        text = w.log_path.read_text(errors="replace") if w.log_path.exists() else ""
        for m in _ASSIGNMENT.finditer(text):
            active = [t for t in m.group(4).split(",") if t]
            standby = [t for t in m.group(5).split(",") if t]
            snapshots.append({"ts": int(m.group(1)) / 1000, "instance": i,
                              "roles": {**{t: "standby" for t in standby}, **{t: "active" for t in active}}})
    for t in toggles:  # a stopped instance holds nothing, whatever it logged while closing
        if t["action"] == "stop":
            snapshots.append({"ts": t.get("done_ts", t["ts"]), "instance": t["instance"], "roles": {}})
    rows, current = [], {}
    for snap in sorted(snapshots, key=lambda s: s["ts"]):
        i = snap["instance"]
        before = current.get(i, {})
        for task in sorted(set(before) | set(snap["roles"])):
            old, new = before.get(task, "none"), snap["roles"].get(task, "none")
            if old != new:
                rows.append({"ts": snap["ts"], "instance": i, "task": task, "role": new, "was": old})
        current[i] = snap["roles"]
    return pd.DataFrame(rows, columns=["ts", "instance", "task", "role", "was"])


def round_trips(assignments) -> "pd.DataFrame":
    """Tasks that went active -> standby -> active on one instance without leaving it in between:
    the recycling path whose cache the bug forgets to clear."""
    import pandas as pd
    rows = []
    for (instance, task), part in assignments.sort_values("ts").groupby(["instance", "task"]):
        left = None  # when the task went from active to standby here
        for _, change in part.iterrows():
            if change["was"] == "active" and change["role"] == "standby":
                left = change["ts"]
            elif change["was"] == "standby" and change["role"] == "active" and left is not None:
                rows.append({"instance": instance, "task": task, "left_ts": left, "back_ts": change["ts"]})
                left = None
            elif change["role"] == "none":
                left = None
    return pd.DataFrame(rows, columns=["instance", "task", "left_ts", "back_ts"])


_RECYCLE = r"(?:stream-task|standby-task|task) \[{task}\] (?:Closed (?:clean )?and recycled state|Initialized|Closed clean|Suspended running)"


def recycle_log_lines(result: "StaleStandbyRun", instance: int, task: str) -> list[str]:
    """Kafka Streams' own log lines about one task on one instance: suspended, recycled, initialized."""
    path = Path(result.logs[instance])
    rx = re.compile(_RECYCLE.format(task=re.escape(task)))
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        m = rx.search(line)
        if m and line.startswith("["):
            kind = "StandbyTask" if "standby-task" in line else "StreamTask"
            lines.append(f"{line[1:24]}  {m.group(0)}  ({kind})")
    return lines


def _analyse(*, params, t0, bootstrap, input_topic, output_topic, history, workers, toggles, produced, records,
             peak, seconds) -> StaleStandbyRun:
    import pandas as pd
    toggles_df = pd.DataFrame(toggles, columns=["ts", "done_ts", "instance", "action", "step"])
    assignments = parse_assignments(workers, toggles)
    out = pd.DataFrame(records, columns=["id", "key", "value", "prev", "instance", "task", "at", "partition",
                                         "offset"])
    out["instance"] = pd.to_numeric(out["instance"])
    out["ts"] = out["at"] / 1000
    truth = produced[["id", "true_value", "seq"]].drop_duplicates("id")
    out = out.merge(truth, on="id", how="left").sort_values(["partition", "offset"]).reset_index(drop=True)
    # Per key, in output order (one key -> one output partition): what the store should have returned.
    out["expected_prev"] = out.groupby("key")["value"].shift(1)
    out["stale_read"] = out["prev"].fillna(-1) != out["expected_prev"].fillna(-1)
    out["wrong_value"] = out["true_value"].notna() & (out["value"] != out["true_value"])
    out["backwards"] = out["expected_prev"].notna() & (out["value"] < out["expected_prev"])
    counts = {
        "produced": int(len(truth)),
        "outputs": int(len(out)),
        "missing": int(len(set(truth["id"]) - set(out["id"]))),
        "duplicates": int(out["id"].duplicated().sum()),
        "stale_reads": int(out["stale_read"].sum()),
        "wrong_values": int(out["wrong_value"].sum()),
        "backwards": int(out["backwards"].sum()),
    }
    trips = round_trips(assignments)
    counts["round_trips"] = int(len(trips))
    first, movements = None, pd.DataFrame(columns=["t_s", "instance", "task", "was", "role"])
    stale = out[out["stale_read"]].sort_values("ts")
    if len(stale):
        row = stale.iloc[0]
        # Evidence for the cache: the stale value is what this very instance last wrote for the key.
        earlier = out[(out["key"] == row["key"]) & (out["instance"] == row["instance"]) & (out["ts"] < row["ts"])]
        last_own = earlier.sort_values("ts")["value"].iloc[-1] if len(earlier) else None
        first = {"key": row["key"], "id": row["id"], "task": row["task"], "instance": int(row["instance"]),
                 "found": None if pd.isna(row["prev"]) else int(row["prev"]),
                 "expected": None if pd.isna(row["expected_prev"]) else int(row["expected_prev"]),
                 "value": int(row["value"]), "true_value": None if pd.isna(row["true_value"]) else int(row["true_value"]),
                 "last_value_this_instance_wrote": None if last_own is None else int(last_own),
                 "t_s": round(float(row["ts"] - t0), 2),
                 "after_round_trip": bool(((trips["instance"] == row["instance"]) & (trips["task"] == row["task"])
                                           & (trips["back_ts"] <= row["ts"] + 1)).any())}
        movements = assignments[(assignments["task"] == row["task"]) & (assignments["ts"] <= row["ts"])].copy()
        movements.insert(0, "t_s", (movements["ts"] - t0).round(2))
        movements = movements[["t_s", "instance", "task", "was", "role"]].reset_index(drop=True)
    return StaleStandbyRun(params=params, affected=is_affected(params["version"]), t0=t0, bootstrap=bootstrap,
                           input_topic=input_topic, output_topic=output_topic, history=history,
                           toggles=toggles_df, assignments=assignments, round_trips=trips, output=out, counts=counts,
                           first_stale=first, movements=movements, peak_rss_mb=peak,
                           logs={i: str(w.log_path) for i, w in workers.items()}, seconds=seconds)


class _RssSampler:
    """Peak resident memory of the instance JVMs (and the brokers this kernel started) every 0.5 s."""

    def __init__(self, workers: dict):
        self.workers, self._stop = workers, threading.Event()
        self.values = {"instances": 0.0, "all_up": None, "brokers": 0.0}
        self._thread = threading.Thread(target=self._loop, name="rss", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(5)

    def peak(self) -> dict:
        return {k: (None if v is None else round(v, 1)) for k, v in self.values.items()}

    def _loop(self):
        import psutil
        me = psutil.Process()
        while not self._stop.wait(0.5):
            total, up = 0.0, 0
            for i, w in self.workers.items():
                if w.alive():
                    try:
                        rss = psutil.Process(w.process.pid).memory_info().rss / 2**20
                    except psutil.Error:
                        continue
                    total, up = total + rss, up + 1
                    self.values[f"instance-{i}"] = max(self.values.get(f"instance-{i}", 0.0), rss)
            self.values["instances"] = max(self.values["instances"], total)
            if up == len(self.workers):
                self.values["all_up"] = max(self.values["all_up"] or 0.0, total)
            brokers = 0.0
            for child in me.children(recursive=True):
                try:
                    if "kafka.Kafka" in child.cmdline():
                        brokers += child.memory_info().rss / 2**20
                except psutil.Error:
                    continue
            self.values["brokers"] = max(self.values["brokers"], brokers)


# ------------------------------------------------------------------ figures and widgets

ROLE_COLOURS = {"active": "#2a7ab0", "standby": "#a6cee3"}


def timeline_figure(result: StaleStandbyRun):
    """Instances up/down, each task's role per instance over time, and the stale reads on top."""
    import pandas as pd
    import plotly.graph_objects as go
    t0, fig = result.t0, go.Figure()
    end = max([result.toggles["ts"].max() if len(result.toggles) else t0, result.output["ts"].max()
               if len(result.output) else t0]) - t0
    rows = []  # category labels, top to bottom
    # instances up
    for i in sorted(result.toggles["instance"].unique()):
        label = f"instance {i} up"
        rows.append(label)
        ups = result.toggles[result.toggles["instance"] == i].sort_values("ts")
        since = None
        for _, t in ups.iterrows():
            if t["action"] == "start":
                since = t["ts"] - t0
            elif since is not None:
                fig.add_bar(x=[(t["done_ts"] if pd.notna(t["done_ts"]) else t["ts"]) - t0 - since], base=[since], y=[label], orientation="h",
                            marker_color="#999", showlegend=False, hovertemplate=f"{label}<extra></extra>")
                since = None
        if since is not None:
            fig.add_bar(x=[end - since], base=[since], y=[label], orientation="h", marker_color="#999",
                        showlegend=False)
    # roles: one row per (instance, task)
    a = result.assignments.sort_values("ts")
    shown = set()
    for (i, task), part in a.groupby(["instance", "task"]):
        label = f"w{i} · {task}"
        rows.append(label)
        part = part.sort_values("ts")
        times = list(part["ts"] - t0) + [end]
        for (_, change), stop in zip(part.iterrows(), times[1:]):
            if change["role"] == "none":
                continue
            fig.add_bar(x=[stop - (change["ts"] - t0)], base=[change["ts"] - t0], y=[label], orientation="h",
                        marker_color=ROLE_COLOURS[change["role"]], name=change["role"],
                        legendgroup=change["role"], showlegend=change["role"] not in shown,
                        hovertemplate=f"{label}: {change['role']}<extra></extra>")
            shown.add(change["role"])
    trips = result.round_trips
    if len(trips):
        fig.add_scatter(x=trips["back_ts"] - t0, y=[f"w{i} · {t}" for i, t in zip(trips["instance"], trips["task"])],
                        mode="markers", marker=dict(symbol="triangle-right", size=9, color="#ff7f0e"),
                        name=f"back to active after standby here ({len(trips)})",
                        hovertemplate="active again after standby on this instance<extra></extra>")
    stale = result.stale_rows()
    if len(stale):
        fig.add_scatter(x=stale["ts"] - t0, y=[f"w{i} · {t}" for i, t in zip(stale["instance"], stale["task"])],
                        mode="markers", marker=dict(symbol="x", size=9, color="#d62728"),
                        name=f"stale read ({len(stale)})",
                        text=[f"{k}: read {p:.0f}, last written {e:.0f}" for k, p, e in
                              zip(stale["key"], stale["prev"].fillna(-1), stale["expected_prev"].fillna(-1))],
                        hovertemplate="%{text}<extra></extra>")
    for _, t in result.toggles.dropna(subset=["step"]).iterrows():
        fig.add_vline(x=t["ts"] - t0, line_dash="dot", line_color="#bbb")
    p = result.params
    fig.update_layout(
        title=f"Kafka Streams {p['version']}, caching {'on' if p['caching'] else 'off'}, program '{p['program']}': "
              f"{result.counts['stale_reads']} stale read(s), {result.counts['wrong_values']} wrong value(s)",
        barmode="overlay", xaxis_title="seconds since the program started", height=180 + 22 * len(rows),
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(rows))), bargap=0.25,
        margin=dict(l=110, r=20, t=60, b=50), title_font_size=13, legend_orientation="h", legend_y=-0.15)
    return fig


def panel(cluster, versions=("3.3.1", "3.4.0", "3.4.1", "3.5.2", "4.3.1"), **defaults):
    """ipywidgets: program, step, standby count, caching, version -> run() -> figure and counts."""
    import ipywidgets as w
    from IPython.display import display
    program = w.Text(value=defaults.get("program", "1 2 3"), description="program")
    step = w.IntSlider(value=defaults.get("step_seconds", 15), min=5, max=60, description="step (s)")
    standby = w.IntSlider(value=defaults.get("standby_replicas", 1), min=0, max=2, description="standbys")
    caching = w.Checkbox(value=defaults.get("caching", True), description="caching")
    version = w.Dropdown(options=list(versions), value=defaults.get("version", versions[0]), description="version")
    button, out = w.Button(description="Run", button_style="primary"), w.Output()

    def go(_):
        out.clear_output()
        with out:
            try:
                r = run(cluster, version=version.value, program=program.value, step_seconds=step.value,
                        standby_replicas=standby.value, caching=caching.value,
                        **{k: v for k, v in defaults.items()
                           if k not in ("program", "step_seconds", "standby_replicas", "caching", "version")})
            except LabError as exc:
                print(f"LabError: {exc}")
                return
            print(r.summary())
            r.figure().show()

    button.on_click(go)
    display(w.VBox([w.HBox([program, version]), w.HBox([step, standby, caching]), button, out]))


# ------------------------------------------------------------------ exercises

def check_exercise(number: int, result: StaleStandbyRun, **answer) -> bool:
    """Check an exercise answer against what `result` measured; prints why and returns True/False."""
    first = result.first_stale
    if first is None:
        print("This run had no stale read, so there is nothing to explain: re-run the failing configuration.")
        return False
    if any(v is None for v in answer.values()):
        print("Not answered yet: fill in the answer cell (or run the solution).")
        return False
    if number == 1:
        inst, task = answer["instance"], answer["task"]
        trip = ((result.round_trips["instance"] == inst) & (result.round_trips["task"] == task)).any()
        ok = (inst, task) == (first["instance"], first["task"]) and bool(trip)
        print(("Right: " if ok else "Not quite: ") + f"instance {inst}, task {task} "
              + ("made the active -> standby -> active round trip and then read a stale value." if ok else
                 "is not where the first stale read happened after a round trip."))
        return ok
    if number == 2:
        ok = int(answer["value"]) == first["found"]
        print(("Right: " if ok else "Not quite: ") + f"you predicted {answer['value']}; the store returned "
              f"{first['found']} while the last value written for {first['key']} was {first['expected']}.")
        return ok
    raise LabError(f"There is no exercise {number}; the exercises are 1 and 2.")
