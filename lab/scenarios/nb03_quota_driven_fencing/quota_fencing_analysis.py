"""Notebook 03's analysis of a run, without a broker (tests/test_quota_fencing.py): the apps under test and their load
against the quota (Variant, quota_for), what each app's log says and which mechanism fenced each incident
(Measured), and whether a kafka-clients jar holds the KAFKA-17455 fix, read from its bytecode. Serves lesson 1 (the
main run, its evidence) and lesson 2 (the sweep).
"""
from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pandas as pd

from ...runtime.versions import parse_version
from ...errors import LabError
from ...toolbox import java_events, lab_lines
from ...toolbox.predict import choice_table, labels, named
from ...record.evidence import incidents, txn_waits

# Bytes on the wire per input record besides the state value (changelog key, output record, batch
# overhead), measured with Kafka 3.8.1 and 4.3.1: turns a load/quota ratio into a quota.
WIRE_OVERHEAD_BYTES = 140
LOOP = "confluent-kafka"
BASELINES = ("other_version", "no_quota", "librdkafka")              # 03a's COMPARE: other apps beside it
VARIANTS = ("headroom", "request_timeout", "transaction_timeout")   # 03a's VARIANTS: one setting changed
STREAMS_CRASH_KINDS = ("AddOffsetsToTxn timeout", "InvalidProducerEpochException", "ProducerFencedException",
                       "TaskCorruptedException", "TaskMigratedException", "InvalidTxnStateException",
                       "InvalidPidMappingException", "UnknownProducerIdException", "thread died")
LOOP_CRASH_KINDS = ("abort", "fatal", "error")


# Both lessons' Predict questions: which clients are fenced (03a: the releases of its main run; 03b: the sweep's
# clients at its highest ratio). Their choice table (fenced_table) names clients, never whether a release carries a
# change: nobody, the releases from before KAFKA-17455's change, those after it, every Kafka Streams release, every
# client. A measured set that is none of them is named the same way (sweep_label).
def _clients(clients: list) -> str:
    """Clients in words: the Kafka Streams releases among them (in order), then the loop."""
    streams = [v for v in clients if v != LOOP]
    return " and ".join(([f"Kafka Streams {' and '.join(streams)}"] if streams else [])
                        + ([LOOP] if LOOP in clients else []))


def sweep_label(fenced, versions) -> str:
    """The clients of `fenced` (a subset of `versions`, the clients asked about), named as the questions name them."""
    streams = [v for v in versions if v != LOOP]
    every = (f"every client, {LOOP} too" if streams and LOOP in versions else
             "every Kafka Streams version" if len(streams) > 1 else _clients(versions))

    def several(some, rest):   # every Kafka Streams release and not the loop is a choice of its own
        return "every Kafka Streams version" if set(rest) == {LOOP} else "only " + _clients(some)
    return named(fenced, versions, _clients, every=every, several=several)


def fenced_table(versions) -> tuple:
    """The questions' choice table for these clients, each set distinct: nobody fenced, the Kafka Streams releases
    from before 3.9.1 (by release number), those from 3.9.1 on, every Kafka Streams version, every client."""
    streams = [v for v in versions if v != LOOP]
    before = [v for v in streams if parse_version(v) < (3, 9, 1)]
    since = [v for v in streams if v not in before]
    return choice_table((sweep_label(fenced, versions), fenced) for fenced in ([], before, since, streams, versions))


def sweep_choices(versions) -> tuple:
    """The questions' choices for these clients: their table's labels."""
    return labels(fenced_table(versions))


@dataclass(frozen=True)
class Variant:
    """One app under test: Kafka Streams at `version` or the librdkafka loop (client LOOP), its load and quota."""
    name: str
    client: str = "streams"
    version: str = "3.8.1"
    quota: int | None = 35000            # producer_byte_rate on its producer client id; None: no quota
    rate: float = 33.0
    state_bytes: int = 1024
    txn_timeout_ms: int = 10000
    request_timeout_ms: int = 30000      # the Java producer's request.timeout.ms

    @property
    def load_ratio(self) -> float | None:   # estimated load / quota (> 1: over the quota)
        return None if not self.quota else self.rate * (self.state_bytes + WIRE_OVERHEAD_BYTES) / self.quota


def quota_for(ratio: float, rate: float = 33.0, state_bytes: int = 1024) -> int:
    """The producer_byte_rate that puts the estimated load at `ratio` x the quota."""
    return int(round(rate * (state_bytes + WIRE_OVERHEAD_BYTES) / ratio))


@dataclass
class Measured:
    """One side-by-side run of some variants. `t_s` columns are seconds since its load started."""
    variants: list
    duration_s: float
    load_start: float
    stopped_s: float
    tags: dict                    # variant name -> topic / app prefix
    logs: dict                    # variant name -> log path
    quota_ids: dict               # variant name -> client ids the quota was set on
    broker_aborts: pd.DataFrame   # variant, t_s, line
    produced: dict = field(default_factory=dict)
    duplicates: dict = field(default_factory=dict)
    output_records: dict = field(default_factory=dict)
    verdict: object = None

    def __post_init__(self):   # the evidence in every app's log: events, metrics, transactional waits
        found = {v.name: (_streams_evidence if v.client == "streams" else _loop_evidence)(self.logs[v.name])
                 for v in self.variants}
        self.client_ids = {n: sorted(f[3]) for n, f in found.items()}
        frame = lambda i, *cols: pd.DataFrame([{"variant": n, **x} for n, f in found.items() for x in f[i]],
                                              columns=["variant", "t_s", *cols]).assign(
            t_s=lambda d: d["t_s"].astype(float) - self.load_start)
        self.events = frame(0, "kind", "line")
        self.metrics = frame(1, "throttle_max_ms", "commit_latency_ms", "open_records", "state")
        self.waits = frame(2, "request", "wait_s")

    def during(self, name: str, kinds) -> pd.DataFrame:
        ev = self.events
        return ev[(ev["variant"] == name) & ev["kind"].isin(kinds) & (ev["t_s"] >= 0)
                  & (ev["t_s"] < self.stopped_s)].sort_values("t_s")

    def crashes(self, name: str) -> pd.DataFrame:
        """Fencing / corruption incidents of one variant during the load, each with its mechanism."""
        v = next(v for v in self.variants if v.name == name)
        found = incidents(self.during(name, STREAMS_CRASH_KINDS if v.client == "streams" else LOOP_CRASH_KINDS))
        found["mechanism"] = pd.Series([self.mechanism(v, i) for _, i in found.iterrows()], found.index, "string")
        return found

    def coordinator_aborts(self, name: str) -> pd.DataFrame:   # (after the stop, an open transaction times out too)
        return self.broker_aborts.query("variant == @name and 0 <= t_s < @self.stopped_s")

    def mechanism(self, v: Variant, incident) -> str:
        """Which mechanism fenced this incident, from the evidence in the transaction timeout before it."""
        if v.client != "streams":
            return f"librdkafka {incident['kinds']}: {incident['line'][:160]}"
        t, timeout = incident["t_s"], v.txn_timeout_ms / 1000
        # requests sent in the transaction timeout before the fence (a stuck one is sent just before it)
        w = self.waits[(self.waits["variant"] == v.name) & self.waits["t_s"].between(t - timeout, t + 1)]
        m = self.metrics[(self.metrics["variant"] == v.name) & self.metrics["t_s"].between(t - timeout - 2, t + 1)]
        longest = w.loc[w["wait_s"].idxmax()] if len(w) else None
        open_bytes = (m["open_records"].max() if len(m) else 0) * (v.state_bytes + WIRE_OVERHEAD_BYTES)
        passes, throttle = (v.quota or float("inf")) * timeout, (m["throttle_max_ms"].max() if len(m) else 0) or 0
        # stuck: a wait of half the transaction timeout or more, far longer than any throttle it sat behind
        if longest is not None and longest["wait_s"] >= max(timeout / 2, 2 * throttle / 1000):
            # the throttles the app reported from a transaction timeout before the request was queued (its send
            # time t_s minus its wait) until it was sent
            queued = longest["t_s"] - longest["wait_s"]
            mine = self.metrics[(self.metrics["variant"] == v.name) & self.metrics["t_s"].between(
                queued - timeout - 2, longest["t_s"])]
            before = (mine["throttle_max_ms"].max() if len(mine) else 0) or 0
            behind = (f"the longest throttle recorded before it was {before / 1000:.1f} s" if before else
                      "no throttle was recorded before it, so what held the connection (a retry's backoff, or a "
                      "throttle between the app's metric samples) is not measured here")
            return (f"stuck transactional request (KAFKA-17455: {longest['request']} waited {longest['wait_s']:.1f}"
                    f" s; {behind}; transaction.timeout.ms {timeout:g} s)")
        if open_bytes > passes:
            return (f"transaction larger than the quota passes within transaction.timeout.ms (~{open_bytes / 1e3:.0f}"
                    f" KB open, {v.quota:,} B/s x {timeout:g} s = {passes / 1e3:.0f} KB)")
        if len(w) and w["wait_s"].sum() >= timeout / 2:
            return (f"throttled transactional requests adding up ({len(w)} waits, {w['wait_s'].sum():.1f} s in all,"
                    f" each at most {longest['wait_s']:.1f} s)")
        return f"fenced with throttles up to {throttle:.0f} ms and no stuck request ({incident['kinds']})"

    def row(self, name: str) -> dict:
        """One variant's measured summary (the flat dict the tests assert)."""
        v, crashes = next(v for v in self.variants if v.name == name), self.crashes(name)
        m, w = self.metrics[self.metrics["variant"] == name], self.waits[self.waits["variant"] == name]
        return {"variant": name, "client": v.client,
                "version": v.version if v.client == "streams" else f"librdkafka {confluent_kafka.libversion()[0]}",
                "quota_Bps": v.quota, "load_ratio": _round(v.load_ratio, 2), "txn_timeout_ms": v.txn_timeout_ms,
                "request_timeout_ms": v.request_timeout_ms, "crashes": len(crashes),
                "crashes_per_min": round(len(crashes) / (self.duration_s / 60), 2),
                "first_crash_s": _round(crashes["t_s"].iloc[0]) if len(crashes) else None,
                "mechanism": "; ".join(f"{len(g)}x {g.iloc[0]}" for _, g in crashes["mechanism"].groupby(
                    crashes["mechanism"].str.split(" [(:]", regex=True).str[0], sort=False)) or "not fenced",
                "fencing_events": len(self.during(name, STREAMS_CRASH_KINDS + LOOP_CRASH_KINDS)),
                "rebalances": len(incidents(self.during(name, ("rebalance",)))),
                "coordinator_aborts": len(self.coordinator_aborts(name)),
                "throttle_max_ms": _round(m["throttle_max_ms"].max()) if len(m) else None,
                "commit_latency_max_ms": _round(m["commit_latency_ms"].max()) if len(m) else None,
                "longest_txn_wait_s": _round(w["wait_s"].max(), 2) if len(w) else None,
                "produced": self.produced.get(name), "output_records": self.output_records.get(name),
                "not_in_output": self.produced[name] - self.output_records[name] if self.output_records else None,
                "duplicates": self.duplicates.get(name)}


def streams_metrics(source) -> tuple[list[dict], set]:
    """`LAB` metrics rows -> throttle, commit latency and the records in the open transaction; producer ids."""
    rows, ids, at_commit = [], set(), (None, 0)
    for row in lab_lines(source, kind="metrics"):
        producers, threads = row.get("producers", {}), row.get("threads", {}).values()
        ids.update(producers)
        processed = sum(t.get("process-total") or 0 for t in threads)
        commits = sum(t.get("commit-total") or 0 for t in threads)
        if commits != at_commit[0]:
            at_commit = (commits, processed)
        throttle = max((p.get("produce-throttle-time-max") or 0 for p in producers.values()), default=0)
        rows.append({"t_s": row["ts"], "state": row.get("state"), "throttle_max_ms": throttle,
                     "commit_latency_ms": max((t.get("commit-latency-max") or 0 for t in threads), default=0) or None,
                     "open_records": max(processed - at_commit[1], 0)})
    return rows, ids


def _streams_evidence(log: Path):
    metrics, ids = streams_metrics(log)
    events = [{"t_s": e.pop("ts"), **e} for e in java_events(log) if e["ts"] is not None]
    return events, metrics, txn_waits(log), ids


def _loop_evidence(log: Path):
    rows = lab_lines(log)
    events = [{"t_s": e["ts"], "kind": e["kind"], "line": str({k: v for k, v in e.items() if k not in ("ts", "kind")})}
              for e in rows if e["kind"] in LOOP_CRASH_KINDS]
    metrics = [{"t_s": e["ts"], "state": e.get("txn_state"), "throttle_max_ms": e.get("throttle_max_ms"),
                "commit_latency_ms": e.get("latency_ms"), "open_records": e.get("records")}
               for e in rows if e["kind"] in ("stats", "commit")]
    return events, metrics, [], {e["client_id"] for e in rows if e["kind"] == "start"}


def awaitready_polls_delay(jar: Path) -> bool:
    """Does NetworkClientUtils in this kafka-clients jar call KafkaClient.pollDelayMs? Disassembled, 3.8.1 and 3.9.0
    (affected) reference no pollDelayMs anywhere in the class, 3.9.1 and 4.3.1 (fixed) call it once, in awaitReady:
    so a method reference in the class's constant pool is the answer, read from the class file itself."""
    with zipfile.ZipFile(jar) as z:
        return "pollDelayMs" in called_methods(z.read("org/apache/kafka/clients/NetworkClientUtils.class"))


# Constant pool entries (JVM spec 4.4): tag -> bytes after the tag, for the tags whose size is fixed.
_CONSTANT_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4,
                   19: 2, 20: 2}


def called_methods(class_file: bytes) -> set[str]:
    """The names of the methods a class file references: its constant pool's Methodref and InterfaceMethodref."""
    if class_file[:4] != b"\xca\xfe\xba\xbe":
        raise LabError("Not a Java class file (no CAFEBABE magic).")
    count = struct.unpack_from(">H", class_file, 8)[0]
    utf8, name_of, refs = {}, {}, []
    index, at = 1, 10
    while index < count:
        tag = class_file[at]
        if tag == 1:                                   # Utf8: u2 length, then the bytes
            length = struct.unpack_from(">H", class_file, at + 1)[0]
            utf8[index] = class_file[at + 3:at + 3 + length].decode("utf-8", "replace")
            at += 3 + length
        elif tag in _CONSTANT_SIZES:
            if tag in (10, 11):                        # (Interface)Methodref: u2 class, u2 name_and_type
                refs.append(struct.unpack_from(">H", class_file, at + 3)[0])
            elif tag == 12:                            # NameAndType: u2 name, u2 descriptor
                name_of[index] = struct.unpack_from(">H", class_file, at + 1)[0]
            at += 1 + _CONSTANT_SIZES[tag]
        else:
            raise LabError(f"Unknown constant pool tag {tag} at byte {at} of a class file.")
        index += 2 if tag in (5, 6) else 1             # a long or a double takes two entries
    return {utf8[name_of[r]] for r in refs}


def _round(x, digits=1):
    return None if x is None or x != x else round(float(x), digits)
