"""Seed 000: an exactly-once Kafka Streams app slightly over a producer byte-rate quota gets fenced.

Mechanism (KAFKA-17455, fixed by apache/kafka PR #17527): the broker answers an over-quota produce
with a throttle time; the Java client marks the connection not ready until then; the sender thread
then waits for the coordinator in NetworkClientUtils.awaitReady with a poll timeout of
request.timeout.ms (30 s) instead of the throttle delay. Nothing wakes it while the stream thread is
blocked in sendOffsetsToTransaction, so AddOffsetsToTxn leaves ~30 s late, after the coordinator has
aborted the transaction (transaction.timeout.ms = 10 s under Streams EOS) and bumped the epoch.
A second way to be fenced, on fixed clients too: a backlog packs more bytes into one transaction than
the quota lets through within transaction.timeout.ms. Each run says which of the two fenced each app.
"""
from __future__ import annotations

import re
import struct
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pandas as pd

from ...audit import audit
from ...cluster.versions import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...experiment import TONES, Param, Result, Run, Spec, grep, java_events, lab_lines
from ...experiment.apps import stop_together, streams_running
from ...experiment.evidence import incidents, txn_waits
from ...experiment.result import expect
from ...generator import generate
from ...history import History
from ...spark import read_topic
from ...programs import JavaProgram, streams_classpath

# Bytes on the wire per input record besides the state value (changelog key, output record, batch
# overhead), measured with Kafka 3.8.1 and 4.3.1: turns a load/quota ratio into a quota.
WIRE_OVERHEAD_BYTES = 140
LOOP = "confluent-kafka"
BASELINES = ("fixed", "no_quota", "librdkafka")
MITIGATIONS = ("headroom", "request_timeout", "transaction_timeout")
STREAMS_CRASH_KINDS = ("AddOffsetsToTxn timeout", "InvalidProducerEpochException", "ProducerFencedException",
                       "TaskCorruptedException", "TaskMigratedException", "InvalidTxnStateException",
                       "InvalidPidMappingException", "UnknownProducerIdException", "thread died")
LOOP_CRASH_KINDS = ("abort", "fatal", "error")
DEBUG_LOGGERS = ("org.apache.kafka.clients.producer.internals.Sender,"
                 "org.apache.kafka.clients.producer.internals.TransactionManager")
_ABORT_LINE = r"Completed rollback of ongoing transaction for transactionalId .* due to timeout"


def _streams_version(version: str) -> None:
    if version != LOOP and parse_version(version) < (3, 3, 0):
        raise LabError(f"Kafka Streams {version} is too old for this topology (KStream#process needs 3.3+).")
    if version != LOOP:
        streams_classpath(version)   # resolved from Maven Central now: an unknown release fails before anything starts


SPEC = Spec(
    Param("affected_version", "3.8.1", "Kafka Streams version of the seed (suspected affected)",
          check=_streams_version),
    Param("fixed_version", "4.3.1", "a Kafka Streams release after apache/kafka PR #17527", check=_streams_version),
    Param("quota", 35000, "producer_byte_rate on the changelog producer's client id", lo=1024, hi=100_000_000,
          unit="B/s"),
    Param("send_rate", 33.0, "input records per second from the generator", lo=1, hi=500, unit="rec/s",
          why="one Python generator per app"),
    Param("record_bytes", 1024, "bytes of state written per input record", lo=16, hi=500_000, unit="B"),
    Param("transaction_timeout_ms", 10000, "the EOS producer's transaction.timeout.ms (Streams: 10000)",
          lo=1000, hi=900_000, unit="ms", why="the broker's transaction.max.timeout.ms is 900000"),
    Param("duration_s", 90, "seconds of load in the main run", lo=20, hi=1800, unit="s"),
    Param("compare", list(BASELINES), "apps run beside the affected one", choices=BASELINES),
    Param("mitigations", list(MITIGATIONS), "mitigations run on the affected client", choices=MITIGATIONS),
    Param("headroom", 1.5, "headroom mitigation: the quota is HEADROOM x the estimated load", lo=0.1, hi=100),
    Param("mitigation_request_timeout_ms", None, "request_timeout mitigation: producer request.timeout.ms", lo=100,
          hi=110_000, unit="ms", none="a fifth of the transaction timeout", why="below delivery.timeout.ms 120000"),
    Param("mitigation_transaction_timeout_ms", None, "transaction_timeout mitigation: transaction.timeout.ms",
          lo=1000, hi=900_000, unit="ms", none="60000, twice the 30 s stall", why="transaction.max.timeout.ms"),
    Param("sweep_ratios", [0.9, 1.1, 1.3], "estimated load / quota ratios of the sweep (empty: no sweep)",
          lo=0.05, hi=20),
    Param("sweep_versions", ["3.8.1", "3.9.0", "3.9.1", "4.3.1", LOOP], "client versions of the sweep",
          check=lambda versions: [_streams_version(v) for v in versions] and None),
    Param("sweep_seconds", 60, "seconds of load per sweep cell", lo=20, hi=1800, unit="s"),
    Param("sweep_parallel", 8, "sweep cells running at once", lo=1, hi=12, why="each Streams cell is a JVM"),
)


def needs(p: dict) -> dict:
    """What the run needs of the cluster: one broker that the lab owns (quotas, broker log)."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={})


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


def lineup(p: dict) -> dict:
    """role -> Variant: the affected client, the comparisons and the mitigations the parameters ask for."""
    a, txn = p["affected_version"], p["transaction_timeout_ms"]
    same = dict(rate=p["send_rate"], state_bytes=p["record_bytes"], txn_timeout_ms=txn)
    request = int(p["mitigation_request_timeout_ms"] or max(100, txn // 5))
    longer = int(p["mitigation_transaction_timeout_ms"] or 60000)
    roles = {"affected": Variant(f"{a} quota", version=a, quota=p["quota"], **same),
             "fixed": Variant(f"{p['fixed_version']} quota", version=p["fixed_version"], quota=p["quota"], **same),
             "no_quota": Variant(f"{a} no quota", version=a, quota=None, **same),
             "librdkafka": Variant("librdkafka quota", client=LOOP, quota=p["quota"], **same),
             "headroom": Variant(f"{a} headroom x{p['headroom']:g}", version=a,
                                 quota=quota_for(1 / p["headroom"], p["send_rate"], p["record_bytes"]), **same),
             "request_timeout": Variant(f"{a} request.timeout {request / 1000:g}s", version=a, quota=p["quota"],
                                        request_timeout_ms=request, **same),
             "transaction_timeout": Variant(f"{a} txn.timeout {longer / 1000:g}s", version=a, quota=p["quota"],
                                            **{**same, "txn_timeout_ms": longer})}
    return {r: v for r, v in roles.items() if r == "affected" or r in p["compare"] or r in p["mitigations"]}


def sweep_cells(p: dict) -> list[Variant]:
    """One app per (version, ratio), its quota set to the estimated load / ratio."""
    return [Variant(f"{v} x{r:g}", client=LOOP if v == LOOP else "streams", version=v,
                    quota=quota_for(r, p["send_rate"], p["record_bytes"]), rate=p["send_rate"],
                    state_bytes=p["record_bytes"]) for v in p["sweep_versions"] for r in p["sweep_ratios"]]


def run(cluster=None, progress: bool = True, **params) -> "QuotaResult":
    """The main line-up side by side, the Spark audit, the bytecode check, then the sweep."""
    p = SPEC.validate(**params)
    roles = lineup(p)
    with Run("quota-fencing", cluster=cluster, progress=progress, **needs(p)) as r:
        if not r.cluster.owns_broker:
            raise LabError("Quotas and the broker's log need the embedded broker: unset KAFKA_LAB_BOOTSTRAP.")
        main = measure(r, list(roles.values()), p["duration_s"], audit=True)
        aborted = audit(History(r.folder / "history", r.id), bootstrap=r.bootstrap, kinds=["aborted_read"],
                        output_topic=f"{main.tags[roles['affected'].name]}-out", allow_empty=True)
        versions = {v.version for v in [*roles.values(), *sweep_cells(p)] if v.client != LOOP}
        fix = {v: has_kafka_17455_fix(v) for v in sorted(versions, key=parse_version)}
        cells, n = sweep_cells(p), p["sweep_parallel"]
        sweep = [measure(r, cells[i:i + n], p["sweep_seconds"], audit=False) for i in range(0, len(cells), n)]
        return QuotaResult("quota_fencing", p, r.id, r.timeline, roles=roles, main=main, sweep=sweep,
                           fix_in_bytecode=fix, aborted_output_records=aborted.counts["aborted_read"])


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
            return (f"stuck transactional request (KAFKA-17455: {longest['request']} waited {longest['wait_s']:.1f}"
                    f" s behind throttles of at most {throttle / 1000:.1f} s; transaction.timeout.ms {timeout:g} s)")
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


def measure(run: Run, variants: list, duration_s: float, audit: bool) -> Measured:
    """Start every variant's app on its own topics and quota, feed it, stop it, collect the evidence."""
    cluster, stamp = run.cluster, run.id[-6:]
    tags = {v.name: f"qf-{re.sub(r'[^a-z0-9]+', '-', v.name.lower()).strip('-')[:24]}-{stamp}" for v in variants}
    run.topics(*[f"{tags[v.name]}-{s}" for v in variants
                 for s in (("in", "out", "changelog") if v.client == LOOP else ("in", "out"))])
    # Kafka Streams names its EOS v2 producer <client.id>-StreamThread-<n>-producer (checked against its metrics)
    quota_ids = {v.name: [f"{tags[v.name]}-{'StreamThread-1-' if v.client == 'streams' else ''}producer"]
                 if v.quota else [] for v in variants}
    for task in [run.background(cluster.set_quota, quota_ids[v.name][0], producer_byte_rate=v.quota)
                 for v in variants if v.quota]:
        task.result(120)
    run.phase(f"starting {len(variants)} app(s): {', '.join(v.name for v in variants)}")
    apps = {v.name: _start(run, v, tags[v.name]) for v in variants}
    for v in variants:
        log = apps[v.name].log_path
        run.wait(lambda: streams_running(log) if v.client == "streams" else lab_lines(log, kind="start"), 180,
                 f"{v.name} to be running", child=apps[v.name])
    load_start = time.time()   # one History per generator thread: each appends with its own descriptors
    feeds = {v.name: run.background(generate, cluster.bootstrap, f"{tags[v.name]}-in", int(v.rate * duration_s),
                                    History(run.folder / "history", run.id), rate=v.rate,
                                    id_prefix=f"{tags[v.name]}-") for v in variants}
    run.phase(f"load: {duration_s:g} s of {variants[0].rate:g} rec/s x {variants[0].state_bytes} B per app")
    requota = _requota(run, variants, apps, quota_ids)
    run.countdown("load", until=load_start + duration_s, done=requota)
    run.wait(lambda: all(f.done for f in feeds.values()), 60, "the generators to finish")
    run.countdown("the last transactions to commit", seconds=5, done=requota)
    stopped = time.time()
    stop_together(apps.values(), timeout=30)
    aborts = [{"variant": n, "t_s": round(ts - load_start, 3), "line": line[:300]}
              for ts, line in grep(cluster.log_path(), _ABORT_LINE, since=load_start)
              for n, tag in tags.items() if f"transactionalId {tag}-" in line]
    got = Measured(variants, duration_s, load_start, stopped - load_start, tags, {n: a.log_path for n, a in
                   apps.items()}, quota_ids, pd.DataFrame(aborts, columns=["variant", "t_s", "line"]),
                   produced={n: f.result().produced for n, f in feeds.items()})
    if audit:
        _audit(run, got, History(run.folder / "history", run.id))
    _mark(run, got)
    return got


def _requota(run: Run, variants, apps, quota_ids):
    """For the load countdown: a replaced stream thread has a new producer client id; give it the quota too."""
    def check() -> bool:
        for v in [v for v in variants if v.client == "streams" and v.quota]:
            new = {c for row in lab_lines(apps[v.name].log_path, kind="metrics")[-3:] for c in row["producers"]}
            for cid in new - set(quota_ids[v.name]):
                quota_ids[v.name].append(cid)
                run.cluster.set_quota(cid, producer_byte_rate=v.quota)
        return False
    return check


def _start(run: Run, v: Variant, tag: str):
    if v.client == LOOP:
        return run.spawn_python(tag, "lab.apps.quota_eos_loop", [
            "--bootstrap", run.bootstrap, "--input", f"{tag}-in", "--output", f"{tag}-out", "--changelog",
            f"{tag}-changelog", "--group", tag, "--client-id", f"{tag}-producer", "--state-bytes", v.state_bytes,
            "--transaction-timeout-ms", v.txn_timeout_ms])
    props = {"application.id": tag, "client.id": tag, "bootstrap.servers": run.bootstrap,
             "processing.guarantee": "exactly_once_v2", "num.stream.threads": 1, "commit.interval.ms": 100,
             "max.poll.records": 30, "state.dir": run.folder / tag, "replication.factor": 1,
             "metrics.sample.window.ms": 1000, "producer.transaction.timeout.ms": v.txn_timeout_ms,
             "producer.request.timeout.ms": v.request_timeout_ms, "lab.input.topic": f"{tag}-in",
             "lab.output.topic": f"{tag}-out", "lab.state.bytes": v.state_bytes,
             "lab.debug.loggers": DEBUG_LOGGERS}   # "Enqueuing/Sending transactional request": the stall
    return run.program(JavaProgram(tag, v.version, "QuotaStateApp", ["QuotaStateApp.java"], props, heap="192m")).start()


def _audit(run: Run, got: Measured, history: History) -> None:
    """One Spark pass over every output topic: lab.audit's duplicate check, split per variant."""
    run.phase("auditing the read_committed output on Spark")
    out = read_topic(run.bootstrap, ",".join(f"{t}-out" for t in got.tags.values()), "read_committed")
    got.verdict = audit(history, output_df=out, expect="clean", kinds=["duplicate"], examples=1_000_000)
    dup = got.verdict.examples.get("duplicate")
    for name, tag in got.tags.items():
        got.duplicates[name] = 0 if dup is None or not len(dup) else int(dup["id"].str.startswith(f"{tag}-").sum())
        got.output_records[name] = out.filter(out.value.contains(f'"{tag}-')).count()


def _mark(run: Run, got: Measured) -> None:
    """The run's evidence on its timeline: load, long transactional waits, coordinator aborts, incidents."""
    at = lambda t: got.load_start + t
    for v, n in [(v, v.name) for v in got.variants]:
        run.event(n, "load", at(0), end=at(got.stopped_s), tone="wait", detail=f"quota {v.quota} B/s")
        for _, w in got.waits[(got.waits["variant"] == n) & (got.waits["wait_s"] >= 1)].iterrows():
            run.event(n, f"{w.request} waited {w.wait_s:.1f} s", at(w.t_s - w.wait_s), end=at(w.t_s), tone="fault")
        for _, a in got.coordinator_aborts(n).iterrows():
            run.event(n, "coordinator aborted (timeout)", at(a["t_s"]), detail=a["line"], tone="fault")
        for _, c in got.crashes(n).iterrows():
            run.event(n, c["kinds"], at(c["t_s"]), detail=c["mechanism"], tone="failure")


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


def has_kafka_17455_fix(version: str) -> bool:
    """Does kafka-clients `version` contain PR #17527 (awaitReady polls KafkaClient.pollDelayMs)? From its bytecode."""
    jar = next(j for j in streams_classpath(version) if j.name == f"kafka-clients-{version}.jar")
    return awaitready_polls_delay(jar)


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


def _load(row: dict) -> str:
    return f"load {row['load_ratio']:.2f}x the quota" if row["load_ratio"] else "no quota"


@dataclass
class QuotaResult(Result):
    roles: dict = field(default_factory=dict)                   # role -> Variant
    main: Measured | None = field(default=None, repr=False)
    sweep: list = field(default_factory=list, repr=False)      # [Measured], one per wave
    fix_in_bytecode: dict = field(default_factory=dict)
    aborted_output_records: int = 0

    title = "Quota-driven fencing: x incident (hover: its mechanism), ▼ coordinator abort, bars: waits"

    def row(self, role: str) -> dict:
        return self.main.row(self.roles[role].name)

    def figure(self, roles=None):
        return self.timeline.figure(self.title, lanes=[self.roles[r].name for r in roles or self.roles])

    @property
    def failed(self) -> bool:
        return self.row("affected")["crashes"] > 0

    def verdict(self) -> str:
        rows = [self.main.row(v.name) for v in self.roles.values()]
        return "; ".join(f"{r['variant']} ({_load(r)}): " + (
            f"fenced {r['crashes']}x (first at {r['first_crash_s']:.0f} s) by {r['mechanism']}" if r["crashes"]
            else f"not fenced (throttled up to {r['throttle_max_ms'] or 0:.0f} ms)") for r in rows) + (
            f"; read_committed output of {rows[0]['variant']}: {rows[0]['output_records']} of {rows[0]['produced']} "
            f"records; {sum(self.main.duplicates.values())} duplicated in all")

    def explain(self) -> str:
        """Per app, the branch of the mechanism that matches what it measured."""
        out = []
        for role, v in self.roles.items():
            r = self.main.row(v.name)
            wait = (f"transactional wait was {r['longest_txn_wait_s']} s" if v.client == "streams" else
                    f"commit took {(r['commit_latency_max_ms'] or 0) / 1000:.1f} s")
            why = (f"fenced by {r['mechanism']}" if r["crashes"] else "no throttle, nothing waited, nothing fenced"
                   if not r["throttle_max_ms"] else f"throttled up to {r['throttle_max_ms']:.0f} ms, the longest {wait}"
                   f", and no transaction outlived transaction.timeout.ms ({v.txn_timeout_ms / 1000:g} s): not fenced")
            out.append(f"- **{v.name}** ({role}, {_load(r)}): {why}.")
        return "\n".join(out)

    def table(self, roles=None) -> pd.DataFrame:
        return pd.DataFrame([self.row(r) for r in roles or self.roles if r in self.roles]).set_index("variant")

    def sweep_table(self) -> pd.DataFrame:
        rows = [{"client_version": v.version if v.client == "streams" else LOOP,
                 "ratio": float(v.name.rsplit("x", 1)[1]), **m.row(v.name)} for m in self.sweep for v in m.variants]
        return pd.DataFrame(rows)

    def sweep_figure(self):
        import plotly.express as px
        return px.line(self.sweep_table(), x="ratio", y="crashes_per_min", color="client_version", markers=True,
                       color_discrete_sequence=list(TONES.values()),
                       title="Sweep: fencing incidents per minute against the estimated load / quota")

    def record_fields(self) -> dict:
        p, counts = self.params, self.main.during(self.roles["affected"].name, STREAMS_CRASH_KINDS + ("rebalance",))
        base = {r: self.row(r) for r in ("affected", *BASELINES) if r in self.roles}
        return {"affected_version": p["affected_version"], "fixed_version": p["fixed_version"],
                "quota": p["quota"], "send_rate": p["send_rate"], "record_bytes": p["record_bytes"],
                "duration_s": p["duration_s"], "load_ratio": round(self.roles["affected"].load_ratio, 3), **base,
                "mitigations": {m: self.row(m) for m in MITIGATIONS if m in self.roles},
                "affected_events": counts["kind"].value_counts().to_dict(),
                "affected_coordinator_aborts": len(self.main.coordinator_aborts(self.roles["affected"].name)),
                "aborted_output_records": self.aborted_output_records, "duplicates": self.main.duplicates,
                "audit": self.main.verdict.as_dict(), "producer_client_ids": self.main.client_ids,
                "quota_client_ids": self.main.quota_ids, "fix_in_bytecode": self.fix_in_bytecode,
                "sweep": self.sweep_table().to_dict("records")}

    exercises = {
        1: lambda r, a: expect(abs(a - r.main.waits.groupby("variant")["wait_s"].max()[r.roles["affected"].name])
                               <= 0.01, "look at result.main.waits for the affected app"),
        2: lambda r, a: expect(abs(a - quota_for(1 / 1.5, r.params["send_rate"], r.params["record_bytes"])) <= 1,
                               "50 % headroom is load / quota = 1 / 1.5: quota_fencing.quota_for(1 / 1.5, ...)"),
        3: lambda r, a: expect(sorted(a) == sorted(v.name for m, v in r.roles.items() if m in MITIGATIONS
                                                   and not r.row(m)["crashes"]), "compare the mitigations' crashes"),
    }
