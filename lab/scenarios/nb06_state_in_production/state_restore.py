"""Seed 002, "The restore process": "You'll be amazed, or outraged, with the amount of time wasted on
restoring large changelogs". A crash under exactly-once throws the local state away, and the restart
replays the whole changelog before the app processes again.

One lesson of notebook 06 (the part interface: PARAMS, RULES, needs, run_lesson -> Outcome). A real Kafka
Streams app (lab/java/RestoreApp.java) puts every input record (unique keys, RESTORE_VALUE_BYTES each) into
a persistent RocksDB key-value store, so its changelog grows with the input. Each mode is its own app,
all started together and reading one input topic the lab fills to each size of RESTORE_SIZES_MB:
    eos       exactly_once_v2, one instance: at each size, shut down (RESTORE_SHUTDOWN) and restarted at once.
              After a kill -9 Streams wipes the store and restores the whole changelog from offset 0: 4.3.1
              says "... didn't find a valid state, since under EOS ..." (KIP-1035: the store keeps its offsets
              in RocksDB) or, with nothing flushed yet, the older "... did not find checkpoint offsets while
              stores are not empty, since under EOS ...". (3.8-4.1 trust a .checkpoint left by the previous
              restore instead, KAFKA-20685: measured on 3.9.1, no wipe after the first restore.)
    alos      at_least_once, one instance, at the largest size: the store is kept, only a tail is replayed
              (before KIP-1035: after the .checkpoint, written every 10,000 changelog records; in 4.3.1:
              after the offsets RocksDB last flushed, its WAL being off)
    standby   exactly_once_v2, RESTORE_INSTANCES instances and RESTORE_STANDBYS standbys, at the largest
              size: the instance with the active task goes down; a survivor's standby takes over
The restores are timed by Lab.restoreLogger() (a StateRestoreListener); "processing again" is when the
instance processes a probe record the lab writes right after the shutdown. The control, a clean shutdown
(SIGTERM: close() writes the store's offsets), restores next to nothing.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ...config import WORK_DIR
from ...connection import kafka_config
from ...errors import LabError
from ...experiment import Param, grep
from ...experiment.admin import group_offsets, topic_offsets
from ...experiment.checks import check_streams_program
from ...logs import client_config
from ...programs import JavaProgram

MAIN, SOURCES = "RestoreApp", ["RestoreApp.java", "Lab.java"]
MODES = ("eos", "alos", "standby")
GUARANTEE = {"eos": "exactly_once_v2", "alos": "at_least_once", "standby": "exactly_once_v2"}
OLDEST_SUPPORTED = (3, 0, 0)      # exactly_once_v2, the ThreadMetadata / TaskMetadata interfaces
DEFAULT_VERSION = "4.3.1"
KEY_BYTES = 10                    # "k%09d": unique keys
CHECKPOINT_EVERY = 10_000         # OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT: changelog records between checkpoints
FULL = 0.9                        # a restore of at least this share of the store's records is a full restore
HEAP = "256m"
MAX_RECORDS = 2_000_000           # records of the largest size: beyond, filling alone takes minutes here
MAX_MB_TOTAL = 2048               # filled once to the largest size + every eos restore: about 20 MB/s here
# Why the store is thrown away under EOS. Before KIP-1035 (and in 4.x when RocksDB had not flushed its offsets):
# no .checkpoint file. Since KIP-1035 (the store keeps its changelog offset in RocksDB, 4.x) the store was not
# closed cleanly. Then the action: the task is closed dirty, its state directory wiped and restored from scratch.
WIPE_CHECKPOINT = r"did not find checkpoint offsets while stores are not empty"
WIPE_ROCKSDB = r"didn't find a valid state, since under EOS"
WIPE = f"{WIPE_CHECKPOINT}|{WIPE_ROCKSDB}"
WIPE_ACTION = r"Will close the task as dirty and re-create and bootstrap from scratch"

PARAMS = [
    Param("restore_sizes_mb", [32, 64, 128], "changelog sizes: the eos mode is shut down and restarted at each",
          lo=1, hi=1024, unit="MB", why="the input, changelogs and stores must fit this machine's disk"),
    Param("restore_modes", list(MODES), "eos: exactly-once, one instance; alos: at-least-once; standby: "
          "exactly-once with standby replicas", choices=MODES),
    Param("restore_shutdown", "kill", "how the instance goes down: kill (kill -9, a crash) or clean "
          "(SIGTERM: close() writes the checkpoint), the control", choices=("kill", "clean")),
    Param("restore_version", DEFAULT_VERSION, "Kafka Streams version of the app (the wipe under EOS: 2.6+)",
          check=lambda v: check_streams_version(v)),
    Param("restore_value_bytes", 1000, "bytes of each value (keys are 10 bytes, all distinct)",
          lo=10, hi=100_000, unit="bytes", why="Kafka's default max.message.bytes is about 1 MB"),
    Param("restore_partitions", 1, "input partitions: tasks, each with its store and changelog partition",
          lo=1, hi=8),
    Param("restore_standbys", 1, "num.standby.replicas of the standby mode", lo=0, hi=3),
    Param("restore_instances", 2, "instances of the standby mode", lo=1, hi=4),
]


def check_streams_version(version: str, name: str = "RESTORE_VERSION") -> None:
    """Resolve (and compile the app against) the Kafka Streams jars of `version` now, before anything starts."""
    check_streams_program(version, name, MAIN, SOURCES, oldest=OLDEST_SUPPORTED,
                          why="exactly_once_v2 and the ThreadMetadata / TaskMetadata interfaces")


def records_for(size_mb: float, value_bytes: int) -> int:
    """Input records (one store entry and one changelog record each) for a changelog of `size_mb`."""
    return math.ceil(size_mb * 2**20 / (value_bytes + KEY_BYTES))


def _something_to_restore(p: dict) -> str | None:
    sizes = p["restore_sizes_mb"]
    if not sizes:
        return "RESTORE_SIZES_MB is empty: give at least one changelog size."
    if not p["restore_modes"]:
        return f"RESTORE_MODES={p['restore_modes']!r}: choose each of {list(MODES)} at most once, at least one."
    return None


def _fits_in_time(p: dict) -> str | None:
    largest = max(p["restore_sizes_mb"])
    records = records_for(largest, p["restore_value_bytes"])
    if records > MAX_RECORDS:
        return (f"{largest} MB of {p['restore_value_bytes']}-byte values is {records:,} records: more than "
                f"{MAX_RECORDS:,}, which this machine cannot fill in a sane time; use larger values or a smaller size.")
    total = largest + (sum(p["restore_sizes_mb"]) if "eos" in p["restore_modes"] else 0)
    if total > MAX_MB_TOTAL:
        return (f"RESTORE_SIZES_MB={p['restore_sizes_mb']} means filling {largest} MB and restoring "
                f"{total - largest} MB, {total} MB in all: more than {MAX_MB_TOTAL} MB, minutes of work on this "
                "machine (2 cores); use fewer or smaller sizes.")
    return None


def disk_needed_mb(p: dict) -> float:
    """The input, and per app its changelog and every instance's store (a standby keeps a copy)."""
    largest = max(p["restore_sizes_mb"]) * 1.2   # record and RocksDB overheads
    copies = sum({"eos": 2, "alos": 2, "standby": 2 + p["restore_standbys"]}[m] for m in p["restore_modes"])
    return largest * (1 + copies)


def _fits_on_disk(p: dict) -> str | None:
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(WORK_DIR).free / 2**20
    need = disk_needed_mb(p)
    if need > free / 2:
        return (f"RESTORE_SIZES_MB up to {max(p['restore_sizes_mb'])} MB needs about {need:.0f} MB of disk "
                f"(input, changelogs, stores) and {free:.0f} MB are free under {WORK_DIR}: keep it under half.")
    return None


def _standby_needs_instances(p: dict) -> str | None:
    if "standby" not in p["restore_modes"]:
        return None
    n, s = p["restore_instances"], p["restore_standbys"]
    if n < 2:
        return (f"The standby mode needs at least 2 instances (RESTORE_INSTANCES={n}): one goes down, "
                "another takes over its task.")
    if s > n - 1:
        return (f"RESTORE_STANDBYS={s} needs {s + 1} instances (a standby never sits on the instance of its "
                f"active task), and RESTORE_INSTANCES={n}.")
    return None


RULES = [_something_to_restore, _fits_in_time, _fits_on_disk, _standby_needs_instances]


def needs(p: dict) -> dict:
    return dict(nodes=1, broker_config={})


# ---------------------------------------------------------------------------------------------- the apps
class App:
    """One mode's Kafka Streams app: its instances (JVMs of RestoreApp) share one application.id."""

    def __init__(self, lab, mode: str, topic: str, p: dict):
        self.lab, self.mode, self.topic = lab, mode, topic
        self.app_id = f"restore-{mode}-{uuid.uuid4().hex[:4]}"
        count = p["restore_instances"] if mode == "standby" else 1
        self.programs = [lab.program(JavaProgram(
            f"restore-{mode}-{i}", p["restore_version"], MAIN, SOURCES, heap=HEAP,
            properties={"bootstrap.servers": lab.bootstrap, "application.id": self.app_id,
                        "processing.guarantee": GUARANTEE[mode],
                        # at-least-once commits every 30 s by default: 1 s keeps the checkpoint close behind
                        "commit.interval.ms": 100 if GUARANTEE[mode] != "at_least_once" else 1000,
                        "num.standby.replicas": p["restore_standbys"] if mode == "standby" else 0,
                        "state.dir": lab.folder / self.app_id / str(i),
                        # static membership: a restarted instance takes its tasks back at once (as a pod of a
                        # StatefulSet would), so the downtime measured is the JVM's start and the restore
                        "group.instance.id": f"{self.app_id}-{i}", "session.timeout.ms": 6000,
                        "heartbeat.interval.ms": 1500,
                        "lab.input.topic": topic, "lab.app": f"restore-{mode}-{i}"}))
            for i in range(count)]

    def start(self) -> None:
        for program in self.programs:
            program.start()

    def last(self, program) -> dict:
        rows = program.lab_lines(kind="progress")
        return rows[-1] if rows else {}

    def running(self) -> bool:
        for program in self.programs:
            if not program.alive():
                raise LabError(f"{program.name} exited: see {program.log_path}")
        return all(self.last(prog).get("state") == "RUNNING" for prog in self.programs)

    def committed(self, admin, partitions: int) -> int:
        """Input records whose offsets the app committed (all partitions)."""
        mine = group_offsets(admin, {self.mode: self.app_id}, self.topic).get(self.mode) or {}
        return sum(mine.get(q) or 0 for q in range(partitions))

    def holder(self):
        """The running instance with the most active tasks (the one whose loss hurts)."""
        alive = [prog for prog in self.programs if prog.alive()]
        return max(alive, key=lambda prog: len(self.last(prog).get("active") or []))


def _fill(bootstrap: str, topic: str, start: int, end: int, value_bytes: int) -> None:
    """Records start..end-1 of the input: unique keys, random values (a changelog that does not compress)."""
    from confluent_kafka import Producer
    producer = Producer(client_config(kafka_config(bootstrap, {
        "linger.ms": 20, "batch.size": 1_000_000, "partitioner": "murmur2_random", "log_level": 0})))
    pool = os.urandom(max(2 * value_bytes, 65_536))
    for i in range(start, end):
        at = (i * 7919) % (len(pool) - value_bytes)
        while True:
            try:
                producer.produce(topic, key=b"k%09d" % i, value=pool[at:at + value_bytes])
                break
            except BufferError:   # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise LabError(f"The input {topic} was not all delivered within 60 s: is the broker at {bootstrap} up?")


def _probe(bootstrap: str, topic: str, label: str, partitions: int) -> list[str]:
    """One probe record per partition: its processing is the moment the app works again."""
    from confluent_kafka import Producer
    producer = Producer(client_config(kafka_config(bootstrap, {"log_level": 0})))
    keys = [f"probe-{label}-{q}" for q in range(partitions)]
    for q, key in enumerate(keys):
        producer.produce(topic, key=key.encode(), value=b"probe", partition=q)
    producer.flush(30)
    return keys


def _short(line: str, width: int = 400) -> str:
    """A log4j line without its thread name: stamp, level, message."""
    m = re.match(r"^\[([^\]]+)\] (\w+) \[[^\]]*\] (.*)$", line)
    return (f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else line)[:width]


def _stamped(ts: float | None, line: str) -> str:
    """A log line as quoted evidence: a stack-trace line ("Caused by: ...") gets the stamp of its log line."""
    line = _short(line.strip())
    if ts is None or re.match(r"^\d{4}-\d\d-\d\d ", line):
        return line
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f",{int(ts * 1000) % 1000:03d} {line}"


def _restores(programs, since: float) -> list[dict]:
    """Restore rows (Lab.restoreLogger) of these instances since epoch time `since`."""
    return [dict(r, instance=prog.name) for prog in programs for r in prog.lab_lines(kind="restore")
            if r["ts"] >= since]


def _measure(lab, app: App, down, survivors, label: str, p: dict, admin, size_mb: float) -> dict:
    """Take `down` out (kill -9 or SIGTERM), restart it unless survivors take over, and time the way back."""
    partitions = p["restore_partitions"]
    before = app.last(down)
    records = app.committed(admin, partitions)
    changelog_bytes = sum(app.last(prog).get("changelog_bytes") or 0 for prog in [down]) or None
    kill = p["restore_shutdown"] == "kill"
    t_down = time.time()
    lab.event(app.mode, "kill -9" if kill else "SIGTERM", tone="fault", detail=f"{down.name} at {size_mb:g} MB")
    down.kill() if kill else down.stop(60)
    # where the offsets of the store were left: a .checkpoint file (before KIP-1035), else only inside RocksDB
    checkpoint_file = any(Path(down.properties["state.dir"]).rglob(".checkpoint"))
    watched = survivors or [down]
    if not survivors:
        down.start()
    keys = _probe(lab.bootstrap, app.topic, label, partitions)

    def probes_done():
        seen = {r["key"]: r["ts"] for prog in watched for r in prog.lab_lines(kind="probe") if r["key"] in keys}
        restores = _restores(watched, t_down)
        ends = [r for r in restores if r["phase"] == "end"]
        starts = [r for r in restores if r["phase"] == "start"]
        return seen if len(seen) == len(keys) and len(ends) >= len(starts) else None
    # what a restore can take at a slow 5 MB/s, on top of a JVM start and a rebalance
    seen = lab.wait(probes_done, 90 + size_mb / 5, f"{app.mode} to process again after the {label} shutdown",
                    evidence=lambda: [app.last(prog).get("state") for prog in watched],
                    child=None if survivors else down.process)
    restores = _restores(watched, t_down)
    starts = [r for r in restores if r["phase"] == "start"]
    ends = [r for r in restores if r["phase"] == "end"]
    restored = sum(r["total_restored"] for r in ends)
    restore_s = max(r["ts"] for r in ends) - min(r["ts"] for r in starts) if starts and ends else 0.0
    wiped = [_stamped(ts, line) for prog in watched for ts, line in grep(prog.log_path, WIPE, since=t_down - 1)]
    action = [_stamped(ts, line) for prog in watched for ts, line in grep(prog.log_path, WIPE_ACTION, since=t_down - 1)]
    per_record = changelog_bytes / records if changelog_bytes and records else p["restore_value_bytes"] + KEY_BYTES
    mb = restored * per_record / 2**20
    row = {"mode": app.mode, "size_mb": size_mb, "shutdown": p["restore_shutdown"], "instance": down.name,
           "took_over": ", ".join(sorted({r["instance"] for r in starts})) or ", ".join(x.name for x in watched),
           "store_records": records,
           "changelog_mb": round((changelog_bytes or records * per_record) / 2**20, 2),
           "changelog_measured": bool(changelog_bytes),
           "standby_lag": before.get("lag") if app.mode == "standby" else None,
           "checkpoint_file": checkpoint_file, "wiped": bool(wiped),
           "wipe_reason": ("rocksdb" if re.search(WIPE_ROCKSDB, wiped[0]) else "checkpoint") if wiped else "",
           "restore_from": min((r["start_offset"] for r in starts), default=None),
           "restored_records": restored, "restore_s": round(restore_s, 3),
           "restore_mb_s": round(mb / restore_s, 1) if restore_s > 0 else None,
           "restore_records_s": round(restored / restore_s) if restore_s > 0 else None,
           "down_s": round(min(seen.values()) - t_down, 2),
           "full_restore": records > 0 and restored >= FULL * records,
           "wipe_line": wiped[0] if wiped else "", "wipe_action": action[0] if action else ""}
    lab.event(app.mode, f"restored {restored} records in {restore_s:.1f} s",
              tone="failure" if row["full_restore"] else "mitigation",
              detail=f"processing again {row['down_s']} s after the shutdown")
    lab.say(f"{app.mode} at {size_mb:g} MB: restored {restored:,} of {records:,} records in {restore_s:.2f} s, "
            f"processing again after {row['down_s']} s{' (state wiped)' if wiped else ''}")
    return row


def run_lesson(lab, p: dict) -> "Outcome":
    partitions, sizes = p["restore_partitions"], sorted(p["restore_sizes_mb"])
    topic = lab.topics(f"restore-input-{lab.id[-6:]}", partitions=partitions)[0]
    admin = lab.cluster.admin()
    apps = {mode: App(lab, mode, topic, p) for mode in p["restore_modes"]}
    with lab.step("starting the apps", lane="apps"):
        for app in apps.values():
            app.start()
        lab.wait(lambda: all(a.running() for a in apps.values()), 120, "the restore apps to run",
                 evidence=lambda: {a.mode: [a.last(x).get("state") for x in a.programs] for a in apps.values()})
    produced, rows = 0, []

    def fill_to(size_mb: float) -> None:
        nonlocal produced
        target = records_for(size_mb, p["restore_value_bytes"])
        with lab.step(f"filling the input to {size_mb:g} MB ({target:,} records)", lane="input"):
            if target > produced:
                _fill(lab.bootstrap, topic, produced, target, p["restore_value_bytes"])
                produced = target
            end = sum(topic_offsets(admin, topic, partitions).values())
            for app in apps.values():
                lab.wait(lambda: app.committed(admin, partitions) >= end, 60 + target / 2000,
                         f"{app.mode} to process the input ({end:,} records)",
                         evidence=lambda: f"{app.committed(admin, partitions):,} committed")
            if "standby" in apps:   # a standby far behind would restore as much as a wiped store
                standby = apps["standby"]
                lab.wait(lambda: all(sum((standby.last(x).get("lag") or {}).values()) <= 10 * partitions
                                     for x in standby.programs if x.alive()), 60,
                         "the standbys to catch up with the changelog",
                         evidence=lambda: [standby.last(x).get("lag") for x in standby.programs])
            # one more progress line from each: the changelog's size as the brokers see it now
            caught_up = time.time()
            lab.wait(lambda: all(a.last(x).get("ts", 0) > caught_up for a in apps.values() for x in a.programs
                                 if x.alive()), 30, "a progress line from each app")

    for i, size in enumerate(sizes):
        fill_to(size)
        if "eos" in apps:
            rows.append(_measure(lab, apps["eos"], apps["eos"].programs[0], [], f"eos-{i}", p, admin, size))
    for mode in ("alos", "standby"):
        if mode in apps:
            app = apps[mode]
            down = app.holder()
            survivors = [x for x in app.programs if x is not down] if mode == "standby" else []
            rows.append(_measure(lab, app, down, survivors, mode, p, admin, sizes[-1]))
    for app in apps.values():
        for program in app.programs:
            program.stop()
    return Outcome(rows, p["restore_version"], p["restore_shutdown"], p["restore_standbys"])


# ---------------------------------------------------------------------------------------------- the outcome
LOG_LINES = ("wipe_line", "wipe_action")   # evidence quoted by explain(), not columns of the table


@dataclass
class Outcome:
    rows: list[dict]
    version: str
    shutdown: str
    standbys: int = 1
    notes: list = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A shutdown forced a full restore (the whole store replayed from the changelog) in this run."""
        return any(r["full_restore"] for r in self.rows)

    def of(self, mode: str) -> list[dict]:
        return [r for r in self.rows if r["mode"] == mode]

    def modes(self) -> list[str]:
        return list(dict.fromkeys(r["mode"] for r in self.rows))

    def rate(self, mode: str = "eos") -> dict:
        """The restore rate of a mode's largest restore: MB/s and records/s (None if nothing was restored)."""
        timed = [r for r in self.of(mode) if r["restore_s"] > 0 and r["restored_records"] > 0]
        best = max(timed, key=lambda r: r["restored_records"], default=None)
        return {"mb_s": best["restore_mb_s"] if best else None, "records_s": best["restore_records_s"] if best else None}

    def as_record(self) -> dict:
        first = next((r for r in self.rows if r["wiped"]), {})
        return {"restore_version": self.version, "restore_shutdown": self.shutdown, "restore_failed": self.failed,
                "restore_wiped": any(r["wiped"] for r in self.rows),
                "restore_full_restores": sum(r["full_restore"] for r in self.rows),
                "restore_rate": {m: self.rate(m) for m in self.modes()},
                "restore_runs": [{k: v for k, v in r.items() if k not in LOG_LINES} for r in self.rows],
                "restore_wipe_line": first.get("wipe_line", ""), "restore_wipe_action": first.get("wipe_action", "")}

    def verdict(self) -> str:
        parts = []
        for mode in self.modes():
            rows = self.of(mode)
            big = rows[-1]
            what = (f"full restore ({big['restored_records']:,} records, {big['restore_s']:.1f} s at "
                    f"{big['changelog_mb']:g} MB)" if big["full_restore"] else
                    f"restored {big['restored_records']:,} of {big['store_records']:,} records")
            wiped = " after a wipe" if any(r["wiped"] for r in rows) else ""
            parts.append(f"{mode}: {what}{wiped}, processing again after {big['down_s']:.1f} s")
        how = "kill -9" if self.shutdown == "kill" else "clean shutdown"
        return f"{how}, Kafka Streams {self.version}: " + "; ".join(parts)

    def table(self):
        import pandas as pd
        return pd.DataFrame([{k: v for k, v in r.items() if k not in LOG_LINES} for r in self.rows])

    def explain(self) -> str:
        how = "killed (kill -9)" if self.shutdown == "kill" else "stopped cleanly (SIGTERM, `close()`)"
        lines = [f"Each app was {how} and, but for the standby mode, restarted at once (Kafka Streams "
                 f"{self.version}); a `StateRestoreListener` timed every restore."]
        eos = self.of("eos")
        if eos:
            lines.append(self._explain_eos(eos))
        for r in self.of("alos"):
            lines.append(self._explain_alos(r))
        for r in self.of("standby"):
            lines.append(f"\n**standby** ({self.standbys} standby replica(s)): {r['instance']} went down; "
                         f"{r['took_over']} took its task over and restored {r['restored_records']:,} of "
                         f"{r['store_records']:,} records in {r['restore_s']:.2f} s (its standby's lag before: "
                         f"{r['standby_lag']}). Processing again after {r['down_s']:.1f} s: the group first has "
                         "to notice the loss (session.timeout.ms = 6 s here)"
                         + (", then the survivor restored everything: it had no copy of the store."
                            if r["full_restore"] else ", a survivor's standby copy did the rest."))
        lines.extend(self.notes)
        return "\n".join(lines)

    def _explain_eos(self, eos: list[dict]) -> str:
        wiped = [r for r in eos if r["wiped"]]
        out = []
        if wiped:
            reasons = {r["wipe_reason"] for r in wiped}
            why = []
            if "rocksdb" in reasons:
                why.append("the store keeps its committed changelog offset inside RocksDB (KIP-1035) with a mark "
                           "saying whether it was closed, and a store left open by a crash may hold uncommitted "
                           "writes")
            if "checkpoint" in reasons:
                why.append("the store held data but no committed changelog offset (kept in a `.checkpoint` file, "
                           "which exactly-once writes only at a clean close, or with KIP-1035 inside RocksDB, "
                           "where a crash can leave it unflushed)")
            out.append(f"\n**exactly_once_v2**: at {len(wiped)} of {len(eos)} restarts Kafka Streams threw the "
                       f"local store away before restoring it: {'; or '.join(why)}. From this run's log:\n\n```\n"
                       + wiped[0]["wipe_line"] + ("\n" + wiped[0]["wipe_action"] if wiped[0]["wipe_action"] else "")
                       + "\n```\n")
        elif self.shutdown == "kill":
            out.append(f"\n**exactly_once_v2**: Kafka Streams {self.version} did **not** wipe the store after the "
                       "kill -9 in this run (no wipe line in its log).")
        else:
            out.append("\n**exactly_once_v2**: the clean close left the store's offsets behind; nothing was wiped.")
        trusted = [r for r in eos if not r["wiped"] and r["checkpoint_file"] and (r["restore_from"] or 0) > 0]
        if self.shutdown == "kill" and trusted:
            out.append(f"A `.checkpoint` file was there after {len(trusted)} of the crashes: the state updater "
                       "writes one when a restore completes and, under exactly-once, nothing removed it once the "
                       "task ran, so the restart trusted it and replayed only the records since, instead of "
                       "wiping a store that may hold writes of an aborted transaction (KAFKA-20685, apache/kafka "
                       "PR #22548; stores that keep their own offsets, KIP-1035, do not have the problem).")
        for r in eos:
            out.append(f"- {r['changelog_mb']:g} MB ({r['store_records']:,} records): restored "
                       f"{r['restored_records']:,} from offset {r['restore_from']} in {r['restore_s']:.2f} s"
                       + (f" ({r['restore_mb_s']:g} MB/s, {r['restore_records_s']:,} records/s)"
                          if r["restore_mb_s"] else "")
                       + f"; processing again {r['down_s']:.1f} s after the shutdown.")
        rate = self.rate("eos")
        if rate["mb_s"] and any(r["full_restore"] for r in eos):
            out.append(f"\nAt {rate['mb_s']:g} MB/s, a 50 GB changelog would take "
                       f"{50 * 1024 / rate['mb_s'] / 60:.0f} minutes to restore: an extrapolation of this run's "
                       "rate, measured on a loopback network with the broker's log in the page cache; real "
                       "networks and disks are slower.")
        return "\n".join(out)

    def _explain_alos(self, r: dict) -> str:
        head = (f"\n**at_least_once**: restored {r['restored_records']:,} of {r['store_records']:,} records (from "
                f"offset {r['restore_from']}) in {r['restore_s']:.2f} s. ")
        if self.shutdown == "clean":
            return head + "The clean close wrote the store's offsets: nothing, or nearly nothing, to replay."
        if r["checkpoint_file"]:
            return head + (f"The `.checkpoint` file is written at a commit once {CHECKPOINT_EVERY:,} changelog "
                           "records have passed since the last one, and at a clean close; under at-least-once "
                           "the store is kept and only the tail after the checkpoint is replayed.")
        return head + ("There is no `.checkpoint` file in this version: the store keeps its changelog offset inside "
                       "RocksDB (KIP-1035), and Kafka Streams turns RocksDB's write-ahead log off, so after a "
                       "kill -9 only what RocksDB had flushed to disk (a memtable is flushed when full, 16 MB by "
                       "default) survives; the store is kept under at-least-once and the tail after that flush is "
                       "replayed.")

    def figure(self):
        import plotly.graph_objects as go
        fig = go.Figure()
        colours = {"eos": "#d62728", "alos": "#1f77b4", "standby": "#2ca02c"}
        for mode in self.modes():
            rows = self.of(mode)
            x = [r["changelog_mb"] for r in rows]
            fig.add_scatter(x=x, y=[r["restore_s"] for r in rows], mode="lines+markers", name=f"{mode}: restore",
                            line=dict(color=colours[mode]), marker=dict(size=10),
                            text=[f"{r['restored_records']:,} records restored" for r in rows])
            fig.add_scatter(x=x, y=[r["down_s"] for r in rows], mode="lines+markers",
                            name=f"{mode}: shutdown → processing again",
                            line=dict(color=colours[mode], dash="dot"), marker=dict(symbol="circle-open", size=10))
        how = "kill -9" if self.shutdown == "kill" else "clean shutdown"
        fig.update_layout(title=f"Restore time against changelog size ({how}, Kafka Streams {self.version})",
                          xaxis_title="changelog size (MB)", yaxis_title="seconds", template="plotly_white",
                          height=400)
        return fig
