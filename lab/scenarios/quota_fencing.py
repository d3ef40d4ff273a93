"""Seed 000: an exactly-once Kafka Streams app slightly over a producer byte-rate quota gets fenced.

One scenario function, `run_quota_fencing(variants, ...)`, runs several apps side by side on
one real broker, each with its own topics, client id and quota:

    Variant(client="streams", version="3.8.1", quota=35000, rate=33, state_bytes=1024, ...)
        the seed's topology (lab/java/QuotaStateApp.java) on real Kafka Streams at `version`
    Variant(client="confluent-kafka", ...)
        the same work as a librdkafka exactly-once loop (lab/apps/quota_eos_loop.py)

A Python generator feeds each app at `rate` records/s. The run returns what was measured:
fencing / corruption events parsed from the logs, throttle time, commit latency, how long each
transactional request waited inside the producer before it was sent, consumer lag, and a Spark
audit of the read_committed output (no input id may appear twice). `sweep(...)` is the same
function over a grid of quota/load ratios and client versions.

Mechanism (KAFKA-17455, fixed by apache/kafka PR #17527): the broker answers an over-quota
produce with a throttle time; the Java client marks the connection not ready until then; the
producer's sender thread then waits for the transaction coordinator in
NetworkClientUtils.awaitReady with a poll timeout of request.timeout.ms (30 s) instead of the
throttle delay. Nothing wakes it while the Streams thread is blocked in
sendOffsetsToTransaction, so AddOffsetsToTxn leaves ~30 s late, after the coordinator has
aborted the transaction (transaction.timeout.ms = 10 s under Streams EOS) and bumped the epoch.
"""
from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..cluster import ExternalCluster, kafka_cluster, parse_version
from ..config import KAFKA_VERSION, WORK_DIR
from ..errors import LabError
from ..generator import generate
from ..history import History
from ..processes import java_executable, spawn_python
from ..streams import JavaProgram, parse_java_log, streams_classpath

# Bytes on the wire per input record besides the state value: the changelog key, the output
# record {"id": ...} and batch/request overhead. Measured on this topology with Kafka 3.8.1 and
# 4.3.1 (producer outgoing-byte-total / input records ~ state_bytes + 140); used to turn a
# quota/load ratio into a quota.
WIRE_OVERHEAD_BYTES = 140

# Events that mean the exactly-once producer was fenced or its task state thrown away.
STREAMS_CRASH_KINDS = ("AddOffsetsToTxn timeout", "InvalidProducerEpochException", "ProducerFencedException",
                       "TaskCorruptedException", "TaskMigratedException", "InvalidTxnStateException",
                       "InvalidPidMappingException", "UnknownProducerIdException", "thread died")
LOOP_CRASH_KINDS = ("abort", "fatal", "error")
INCIDENT_GAP_S = 5.0   # events closer than this belong to one crash (one exception logs several lines)
DEBUG_LOGGERS = "org.apache.kafka.clients.producer.internals.Sender,org.apache.kafka.clients.producer.internals.TransactionManager"
_TXN_LINE = re.compile(r"(Enqueuing|Sending) transactional request (\w+?)(?:RequestData|Request)?\(")


@dataclass(frozen=True)
class Variant:
    """One app under test and the load and quota it gets."""

    name: str
    client: str = "streams"              # "streams" (Kafka Streams at `version`) or "confluent-kafka"
    version: str = "3.8.1"               # Kafka Streams / kafka-clients version (streams only)
    quota: int | None = 35000            # producer_byte_rate on the app's producer client id; None = no quota
    rate: float = 33.0                   # input records per second (the seed: send, sleep 30 ms)
    state_bytes: int = 1024              # bytes written to the state store (changelog) per input record
    transaction_timeout_ms: int | None = None   # None = the EOS default (Streams: 10000; the loop uses 10000 too)
    request_timeout_ms: int | None = None       # producer request.timeout.ms; None = the default (30000)

    @property
    def load_bytes(self) -> float:
        """Estimated producer bytes per second for this rate and record size."""
        return self.rate * (self.state_bytes + WIRE_OVERHEAD_BYTES)

    @property
    def load_ratio(self) -> float | None:
        """Estimated load / quota (> 1: over the quota)."""
        return None if not self.quota else self.load_bytes / self.quota

    @property
    def txn_timeout_ms(self) -> int:
        return self.transaction_timeout_ms or 10000


def quota_for(ratio: float, rate: float = 33.0, state_bytes: int = 1024) -> int:
    """The producer_byte_rate that puts the estimated load at `ratio` x the quota."""
    if ratio <= 0:
        raise LabError(f"The load/quota ratio must be positive, not {ratio}.")
    return int(round(rate * (state_bytes + WIRE_OVERHEAD_BYTES) / ratio))


MITIGATIONS = ("headroom", "request_timeout", "transaction_timeout")


def seed_variants(affected: str = "3.8.1", fixed: str = "4.3.1", *, quota: int = 35000, rate: float = 33.0,
                  state_bytes: int = 1024, transaction_timeout_ms: int = 10000, mitigations=MITIGATIONS,
                  headroom: float = 1.5, request_timeout_ms: int = 2000,
                  mitigation_transaction_timeout_ms: int = 60000) -> dict:
    """The notebook's line-up, role -> Variant: the seed on the affected and the fixed client, the
    affected client without a quota, the librdkafka loop, and each mitigation on the affected client."""
    unknown = [m for m in mitigations if m not in MITIGATIONS]
    if unknown:
        raise LabError(f"Unknown mitigation(s) {unknown}; choose from {list(MITIGATIONS)}.")
    if headroom <= 1:
        raise LabError(f"headroom={headroom}: the headroom quota is headroom x the load, so use more than 1.")
    same = dict(rate=rate, state_bytes=state_bytes)
    txn = None if transaction_timeout_ms == 10000 else transaction_timeout_ms
    roles = {
        "affected": Variant(f"{affected} quota", version=affected, quota=quota, transaction_timeout_ms=txn, **same),
        "fixed": Variant(f"{fixed} quota", version=fixed, quota=quota, transaction_timeout_ms=txn, **same),
        "no_quota": Variant(f"{affected} no quota", version=affected, quota=None, transaction_timeout_ms=txn, **same),
        "librdkafka": Variant("librdkafka quota", client="confluent-kafka", quota=quota,
                              transaction_timeout_ms=txn, **same),
    }
    if "headroom" in mitigations:
        roles["headroom"] = Variant(f"{affected} headroom x{headroom:g}", version=affected,
                                    quota=quota_for(1 / headroom, rate, state_bytes),
                                    transaction_timeout_ms=txn, **same)
    if "request_timeout" in mitigations:
        roles["request_timeout"] = Variant(f"{affected} request.timeout {request_timeout_ms / 1000:g}s",
                                           version=affected, quota=quota, transaction_timeout_ms=txn,
                                           request_timeout_ms=request_timeout_ms, **same)
    if "transaction_timeout" in mitigations:
        roles["transaction_timeout"] = Variant(
            f"{affected} txn.timeout {mitigation_transaction_timeout_ms / 1000:g}s", version=affected,
            quota=quota, transaction_timeout_ms=mitigation_transaction_timeout_ms, **same)
    return roles


# ------------------------------------------------------------------ validation

def validate(variants, duration_s: float) -> list[Variant]:
    """Every parameter checked before anything starts: a LabError says what to change."""
    variants = list(variants)
    if not variants:
        raise LabError("Give at least one Variant to run.")
    if not 20 <= duration_s <= 1800:
        raise LabError(f"duration_s={duration_s}: use 20..1800 seconds of load (the seed crashes within ~90 s).")
    for v in variants:
        if not isinstance(v, Variant):
            raise LabError(f"{v!r} is not a lab.scenarios.quota_fencing.Variant.")
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise LabError(f"Variant names must be unique: {names}.")
    for v in variants:
        where = f"Variant {v.name!r}"
        if not re.fullmatch(r"[A-Za-z0-9._ x-]{1,40}", v.name):
            raise LabError(f"{where}: names use letters, digits, '.', '_', '-', ' ' (at most 40).")
        if v.client not in ("streams", "confluent-kafka"):
            raise LabError(f"{where}: client must be 'streams' or 'confluent-kafka', not {v.client!r}.")
        if v.client == "streams":
            if parse_version(v.version) < (3, 3, 0):
                raise LabError(f"{where}: Kafka Streams {v.version} is too old for this topology "
                               "(it uses the KStream#process API of 3.3+; EOS v2 needs 2.8+).")
        if v.quota is not None and not 1024 <= v.quota <= 100_000_000:
            raise LabError(f"{where}: quota={v.quota} bytes/s; use 1024..100000000, or None for no quota.")
        if not 1 <= v.rate <= 500:
            raise LabError(f"{where}: rate={v.rate} records/s; use 1..500 (one Python generator per app).")
        if not 16 <= v.state_bytes <= 500_000:
            raise LabError(f"{where}: state_bytes={v.state_bytes}; use 16..500000 bytes per record.")
        if v.transaction_timeout_ms is not None and not 1000 <= v.transaction_timeout_ms <= 900_000:
            raise LabError(f"{where}: transaction_timeout_ms={v.transaction_timeout_ms}; use 1000..900000 "
                           "(the broker's transaction.max.timeout.ms is 900000 by default).")
        if v.request_timeout_ms is not None and not 1000 <= v.request_timeout_ms <= 300_000:
            raise LabError(f"{where}: request_timeout_ms={v.request_timeout_ms}; use 1000..300000.")
        if v.client == "confluent-kafka" and v.request_timeout_ms is not None:
            raise LabError(f"{where}: request_timeout_ms applies to the Java producer only "
                           "(librdkafka's transactional calls take their own timeouts).")
    return variants


# ------------------------------------------------------------------ the run's data

@dataclass
class QuotaRun:
    """Everything one run measured. Times `t_s` are seconds since the load started."""

    variants: list
    duration_s: float
    bootstrap: str
    load_start: float                       # epoch seconds
    tags: dict                              # variant name -> topic/app prefix
    client_ids: dict                        # variant name -> producer client ids seen (measured)
    quota_client_ids: dict                  # variant name -> client ids the quota was set on
    events: pd.DataFrame                    # variant, t_s, kind, level, line
    metrics: pd.DataFrame                   # variant, t_s, throttle_avg_ms, throttle_max_ms, commit_latency_ms, state
    txn_waits: pd.DataFrame                 # variant, t_s (sent), request, wait_s (enqueued -> sent)
    lag: pd.DataFrame                       # variant, t_s, lag
    broker_aborts: pd.DataFrame             # variant, t_s, line: the coordinator aborting a timed-out transaction
    stopped_s: float = 0.0                  # when the apps were told to stop (later events are shutdown)
    verdict: object = None                  # lab.audit.Verdict over every audited output topic (duplicates)
    duplicates: dict = field(default_factory=dict)  # variant name -> input ids seen more than once (audited ones)
    folder: Path | None = None
    seconds: float = 0.0                    # wall time of the whole run

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise LabError(f"No variant {name!r}; this run has {[v.name for v in self.variants]}.")

    def history(self) -> History:
        """The generators' ground truth for every variant of this run (what lab.audit checks against)."""
        return History(self.folder / "history", self.folder.name)

    def output_topic(self, name: str) -> str:
        return f"{self.tags[name]}-out"

    def input_topic(self, name: str) -> str:
        return f"{self.tags[name]}-in"

    def crashes(self, name: str) -> pd.DataFrame:
        """Fencing / corruption events of one variant during the load, one row per incident."""
        v = self.variant(name)
        kinds = STREAMS_CRASH_KINDS if v.client == "streams" else LOOP_CRASH_KINDS
        return _incidents(self._during_load(name, kinds))

    def rebalances(self, name: str) -> pd.DataFrame:
        return _incidents(self._during_load(name, ("rebalance",)))

    def coordinator_aborts(self, name: str) -> pd.DataFrame:
        """The coordinator's timeout aborts of this variant's transactions while the load ran
        (after the stop, a transaction left open by the shutdown times out too: not counted)."""
        ab = self.broker_aborts
        return ab[(ab["variant"] == name) & (ab["t_s"] >= 0) & (ab["t_s"] < self.stopped_s)]

    def _during_load(self, name: str, kinds) -> pd.DataFrame:
        """Events of some kinds between the load start and the stop (a clean shutdown is not a crash)."""
        ev = self.events
        return ev[(ev["variant"] == name) & ev["kind"].isin(kinds) & (ev["t_s"] >= 0)
                  & (ev["t_s"] < self.stopped_s)].sort_values("t_s")

    def summary(self) -> pd.DataFrame:
        rows = []
        for v in self.variants:
            crashes = self.crashes(v.name)
            m = self.metrics[self.metrics["variant"] == v.name]
            w = self.txn_waits[self.txn_waits["variant"] == v.name] if len(self.txn_waits) else self.txn_waits
            lag = self.lag[self.lag["variant"] == v.name]
            minutes = self.duration_s / 60
            rows.append({
                "variant": v.name, "client": v.client,
                "version": v.version if v.client == "streams" else _librdkafka_version(),
                "quota_Bps": v.quota, "rate_rps": v.rate, "state_bytes": v.state_bytes,
                "load_ratio": None if v.load_ratio is None else round(v.load_ratio, 2),
                "txn_timeout_ms": v.txn_timeout_ms, "request_timeout_ms": v.request_timeout_ms or 30000,
                "crashes": len(crashes),
                "crashes_per_min": round(len(crashes) / minutes, 2),
                "first_crash_s": None if crashes.empty else round(float(crashes["t_s"].iloc[0]), 1),
                "fencing_events": len(self._during_load(v.name, STREAMS_CRASH_KINDS + LOOP_CRASH_KINDS)),
                "rebalances": len(self.rebalances(v.name)),
                "coordinator_aborts": len(self.coordinator_aborts(v.name)),
                "throttle_avg_ms": _round(m["throttle_avg_ms"].mean()) if len(m) else None,
                "throttle_max_ms": _round(m["throttle_max_ms"].max()) if len(m) else None,
                "commit_latency_max_ms": _round(m["commit_latency_ms"].max()) if len(m) else None,
                "longest_txn_wait_s": _round(w["wait_s"].max(), 2) if len(w) else None,
                "lag_end": int(lag["lag"].iloc[-1]) if len(lag) else None,
                "lag_max": int(lag["lag"].max()) if len(lag) else None,
                "duplicates": self.duplicates.get(v.name),
            })
        return pd.DataFrame(rows)

    def result(self, name: str) -> dict:
        """One variant's summary row as a plain dict (for record())."""
        row = self.summary().set_index("variant").loc[name].to_dict()
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}


def _round(x, digits=1):
    return None if x is None or x != x else round(float(x), digits)


def _incidents(ev: pd.DataFrame) -> pd.DataFrame:
    """Collapse events into incidents: a new one starts after INCIDENT_GAP_S of quiet."""
    if ev.empty:
        return pd.DataFrame(columns=["t_s", "kinds", "line"])
    rows, last = [], None
    for _, e in ev.iterrows():
        if last is None or e["t_s"] - last > INCIDENT_GAP_S:
            rows.append({"t_s": e["t_s"], "kinds": {e["kind"]}, "line": e["line"]})
        else:
            rows[-1]["kinds"].add(e["kind"])
        last = e["t_s"]
    for r in rows:
        r["kinds"] = ", ".join(sorted(r["kinds"]))
    return pd.DataFrame(rows)


def _librdkafka_version() -> str:
    import confluent_kafka
    return f"librdkafka {confluent_kafka.libversion()[0]}"


# ------------------------------------------------------------------ the scenario

def run_quota_fencing(variants, *, duration_s: float = 90, cluster=None, audit=True,
                      broker_version: str = KAFKA_VERSION, drain_s: float = 5,
                      progress: bool = True, spark=None) -> QuotaRun:
    """Run every variant side by side for `duration_s` seconds of load; return what was measured.

    cluster: a running lab cluster (reused) or None (one is started and stopped here).
    audit:   True (every variant), a list of variant names, or False: read those output topics
             read_committed on Spark (lab.audit) and count input ids that appear more than once.
    """
    variants = validate(variants, duration_s)
    parse_version(broker_version)
    if audit not in (True, False, None):
        unknown = [n for n in audit if n not in {v.name for v in variants}]
        if unknown:
            raise LabError(f"audit names {unknown} are not variants of this run.")
    for version in sorted({v.version for v in variants if v.client == "streams"}):
        streams_classpath(version)  # fetched (once) before anything starts: a missing release fails here
    if cluster is None:
        with kafka_cluster(version=broker_version, name="quota-fencing") as own:
            return run_quota_fencing(variants, duration_s=duration_s, cluster=own, audit=audit,
                                     drain_s=drain_s, progress=progress, spark=spark)
    if isinstance(cluster, ExternalCluster):
        raise LabError("This scenario sets client quotas and reads the broker's log, which the lab can only do "
                       "on the embedded broker it launches: unset KAFKA_LAB_BOOTSTRAP.")
    started = time.monotonic()
    stamp = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    folder = WORK_DIR / f"quota-fencing-{stamp}"
    tags = {v.name: f"qf-{_slug(v.name)}-{stamp}" for v in variants}
    say = print if progress else (lambda *a, **k: None)

    # Kafka Streams creates its own changelog (<application.id>-state-changelog); the loop needs one.
    _create_topics(cluster, [f"{tags[v.name]}-{s}" for v in variants
                             for s in (("in", "out", "changelog") if v.client == "confluent-kafka" else ("in", "out"))])
    expected = {v.name: _producer_client_id(v, tags[v.name]) for v in variants}
    quota_ids = {v.name: [expected[v.name]] if v.quota else [] for v in variants}
    _parallel([lambda v=v: cluster.set_quota(expected[v.name], producer_byte_rate=v.quota)
               for v in variants if v.quota])

    apps, load_start = {}, None
    try:
        for v in variants:  # sequential: each Streams version compiles once, then starts
            apps[v.name] = _start_app(v, tags[v.name], cluster.bootstrap, folder)
        say(f"Started {len(apps)} app(s); waiting until each is running ...")
        for v in variants:
            _wait_running(v, apps[v.name])
        say(f"All running {time.monotonic() - started:.0f} s after the start.")

        # One history for the run; each generator appends with its own descriptors (O_APPEND lines).
        histories = {v.name: History(folder / "history", folder.name) for v in variants}
        gens, failures = {}, {}

        def feed(v: Variant):  # one generator thread per app; its error is re-raised below
            try:
                generate(cluster.bootstrap, f"{tags[v.name]}-in", int(v.rate * duration_s), histories[v.name],
                         rate=v.rate, id_prefix=f"{tags[v.name]}-")
            except Exception as exc:
                failures[v.name] = exc

        load_start = time.time()
        for v in variants:
            gens[v.name] = threading.Thread(target=feed, args=(v,), daemon=True, name=f"generator-{v.name}")
            gens[v.name].start()
        say(f"Load started: {duration_s:.0f} s at " +
            ", ".join(f"{v.name}: {v.rate:g} rec/s x {v.state_bytes} B"
                      + (f" vs quota {v.quota} B/s" if v.quota else " (no quota)") for v in variants))

        lag_rows = _monitor(cluster, variants, tags, apps, gens, expected, quota_ids, load_start,
                            duration_s, say)
        if failures:
            name, exc = next(iter(failures.items()))
            raise LabError(f"The generator feeding {name!r} failed: {exc}")
        time.sleep(drain_s)  # let the last transactions commit before stopping
    finally:
        stopped_s = time.time() - load_start if load_start else 0.0
        stopping = time.monotonic()
        _stop_all(apps)
        say(f"Apps stopped in {time.monotonic() - stopping:.0f} s.")

    events, metrics, waits, client_ids = _collect(variants, apps, load_start)
    run = QuotaRun(variants=variants, duration_s=duration_s, bootstrap=cluster.bootstrap,
                   load_start=load_start, tags=tags, client_ids=client_ids, quota_client_ids=quota_ids,
                   events=events, metrics=metrics, txn_waits=waits,
                   lag=pd.DataFrame(lag_rows, columns=["variant", "t_s", "lag"]), folder=folder,
                   stopped_s=stopped_s, broker_aborts=_broker_aborts(cluster, tags, load_start))
    to_audit = [v for v in variants if audit is True or (audit and v.name in audit)]
    if to_audit:
        auditing = time.monotonic()
        say(f"Auditing {len(to_audit)} output topic(s) read_committed on Spark ...")
        _audit(run, to_audit, spark)
        say(f"Audit took {time.monotonic() - auditing:.0f} s: {run.verdict.summary()}")
    run.seconds = time.monotonic() - started
    say(f"Done in {run.seconds:.0f} s.")
    return run


def sweep_cells(ratios, versions, *, rate: float = 33.0, state_bytes: int = 1024, duration_s: float = 60,
                parallel: int = 6) -> list[Variant]:
    """The sweep's apps, one per (version, ratio), each quota set to the estimated load / ratio; validated."""
    ratios, versions = list(ratios), list(versions)
    if not ratios or not versions:
        raise LabError("The sweep needs at least one ratio and one version.")
    if any(not 0.1 <= r <= 5 for r in ratios):
        raise LabError(f"ratios {ratios}: use load/quota ratios between 0.1 and 5 (1.0 = exactly at the quota).")
    if not 1 <= parallel <= 12:
        raise LabError(f"parallel={parallel}: use 1..12 apps at a time (each Streams app is a JVM).")
    cells = []
    for version in versions:
        loop = version == "confluent-kafka"
        for r in ratios:
            cells.append(Variant(name=f"{version} x{r:g}", client="confluent-kafka" if loop else "streams",
                                 version="3.8.1" if loop else version,   # (ignored by the librdkafka loop)
                                 quota=quota_for(r, rate, state_bytes), rate=rate, state_bytes=state_bytes))
    return validate(cells, duration_s)


def sweep(ratios, versions, *, rate: float = 33.0, state_bytes: int = 1024, duration_s: float = 60,
          cluster=None, parallel: int = 6, progress: bool = True, broker_version: str = KAFKA_VERSION):
    """Crashes per minute, throttle time and lag for every (quota/load ratio, client version).

    versions: Kafka Streams versions, and/or "confluent-kafka" for the librdkafka loop.
    Cells run `parallel` at a time, each with its own quota. Returns (DataFrame, [QuotaRun]).
    """
    cells = sweep_cells(ratios, versions, rate=rate, state_bytes=state_bytes, duration_s=duration_s,
                        parallel=parallel)
    if cluster is None:
        with kafka_cluster(version=broker_version, name="quota-sweep") as own:
            return sweep(ratios, versions, rate=rate, state_bytes=state_bytes, duration_s=duration_s,
                         cluster=own, parallel=parallel, progress=progress)
    runs = []
    for i in range(0, len(cells), parallel):
        batch = cells[i:i + parallel]
        if progress:
            print(f"Sweep wave {i // parallel + 1}/{-(-len(cells) // parallel)}: {[c.name for c in batch]}")
        runs.append(run_quota_fencing(batch, duration_s=duration_s, cluster=cluster, audit=False,
                                      progress=progress))
    table = pd.concat([r.summary() for r in runs], ignore_index=True)
    grid = {f"{version} x{r:g}": (version, r) for version in versions for r in ratios}
    table.insert(1, "ratio", [grid[n][1] for n in table["variant"]])
    table.insert(2, "client_version", [grid[n][0] for n in table["variant"]])
    return table, runs


def _audit(run: QuotaRun, variants, spark) -> None:
    """One Spark pass over every output topic: lab.audit's duplicate check, split per variant."""
    from ..audit import audit
    from ..spark import read_topic
    topics = ",".join(run.output_topic(v.name) for v in variants)
    out = read_topic(run.bootstrap, topics, "read_committed", spark=spark)
    run.verdict = audit(run.history(), output_df=out, expect="clean", kinds=["duplicate"], spark=spark,
                        examples=1_000_000)   # every duplicated id comes back, so it can be split
    dup = run.verdict.examples.get("duplicate")
    for v in variants:
        prefix = f"{run.tags[v.name]}-"
        run.duplicates[v.name] = 0 if dup is None or not len(dup) else int(dup["id"].str.startswith(prefix).sum())


# ------------------------------------------------------------------ apps

def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24]


def _producer_client_id(v: Variant, tag: str) -> str:
    # Kafka Streams names its EOS v2 producer <client.id>-StreamThread-<n>-producer; the run
    # checks this against the client ids the app's metrics report.
    return f"{tag}-StreamThread-1-producer" if v.client == "streams" else f"{tag}-producer"


def _start_app(v: Variant, tag: str, bootstrap: str, folder: Path):
    app_folder = folder / tag
    if v.client == "confluent-kafka":
        args = ["--bootstrap", bootstrap, "--input", f"{tag}-in", "--output", f"{tag}-out",
                "--changelog", f"{tag}-changelog", "--group", tag, "--client-id", f"{tag}-producer",
                "--state-bytes", str(v.state_bytes), "--transaction-timeout-ms", str(v.txn_timeout_ms)]
        return spawn_python(f"eos-loop-{tag}", "lab.apps.quota_eos_loop", args, app_folder / "eos-loop.log")
    props = {
        "application.id": tag, "client.id": tag, "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2", "num.stream.threads": 1,
        "commit.interval.ms": 100, "max.poll.records": 30,
        "state.dir": app_folder / "state", "replication.factor": 1,
        "metrics.sample.window.ms": 1000,   # throttle / commit-latency windows of ~1 s for the plots
        "lab.input.topic": f"{tag}-in", "lab.output.topic": f"{tag}-out", "lab.state.bytes": v.state_bytes,
        "lab.debug.loggers": DEBUG_LOGGERS,  # "Enqueuing/Sending transactional request" lines: the stall
    }
    if v.transaction_timeout_ms:
        props["producer.transaction.timeout.ms"] = v.transaction_timeout_ms
    if v.request_timeout_ms:
        props["producer.request.timeout.ms"] = v.request_timeout_ms
    program = JavaProgram(name="streams", version=v.version, main_class="QuotaStateApp",
                          sources=["QuotaStateApp.java"], properties=props, folder=app_folder, heap="192m")
    program.start()
    return program


def _wait_running(v: Variant, app, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    marker = "State transition from REBALANCING to RUNNING" if v.client == "streams" else '"kind": "start"'
    proc = app.process if isinstance(app, JavaProgram) else app
    while True:
        text = app.log_path.read_text(errors="replace") if app.log_path.exists() else ""
        if marker in text:
            return
        if not proc.alive():
            tail = "\n".join(text.splitlines()[-15:])
            raise LabError(f"{v.name} exited before it was running (log {app.log_path}):\n{tail}")
        if time.monotonic() > deadline:
            raise LabError(f"{v.name} was not running after {timeout:.0f} s (log {app.log_path}).")
        time.sleep(0.5)


def _stop_all(apps: dict) -> None:
    procs = [a.process if isinstance(a, JavaProgram) else a for a in apps.values()]
    procs = [p for p in procs if p is not None]
    for p in procs:
        p.terminate()
    for p in procs:
        p.stop(timeout=20)


def _create_topics(cluster, names: list[str]) -> None:
    from confluent_kafka.admin import NewTopic
    admin = cluster.admin()  # keep a reference: the futures die with their client
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=30)
    for name, f in futures.items():
        try:
            f.result()
        except Exception as exc:
            raise LabError(f"Could not create topic {name}: {exc}") from None


def _parallel(calls) -> None:
    """Run a few slow calls (each ConfigCommand is a JVM) at once; re-raise the first error."""
    calls = list(calls)
    if calls:
        with ThreadPoolExecutor(max_workers=min(4, len(calls))) as pool:
            for f in [pool.submit(c) for c in calls]:
                f.result()


def _monitor(cluster, variants, tags, apps, gens, expected, quota_ids, load_start, duration_s, say):
    """While the load runs: sample consumer lag, quota any new producer client id, print progress."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka import Consumer
    admin = cluster.admin()
    probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lab-quota-probe", "log_level": 0})
    rows, next_print, pending_quota = [], 15.0, []
    read_upto = {v.name: 0 for v in variants}  # how far each app log was scanned for client ids
    try:
        while any(g.is_alive() for g in gens.values()):
            now = time.time() - load_start
            for v in variants:
                tag = tags[v.name]
                try:
                    _, high = probe.get_watermark_offsets(TopicPartition(f"{tag}-in", 0), timeout=5)
                    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(tag)])[tag].result(10)
                    committed = [tp.offset for tp in res.topic_partitions if tp.topic == f"{tag}-in"]
                    done = committed[0] if committed and committed[0] >= 0 else 0
                    rows.append((v.name, round(now, 1), max(high - done, 0)))
                except Exception:
                    pass  # a missed sample is a gap in the plot, not a failure
                if v.client == "streams" and v.quota:
                    # A replaced stream thread gets a new producer client id: give it the same quota.
                    ids, read_upto[v.name] = _producer_ids(apps[v.name].log_path, read_upto[v.name])
                    for cid in ids:
                        if cid not in quota_ids[v.name]:
                            quota_ids[v.name].append(cid)
                            pending_quota.append(threading.Thread(
                                target=cluster.set_quota, args=(cid,), kwargs={"producer_byte_rate": v.quota},
                                daemon=True))
                            pending_quota[-1].start()
            if now >= next_print:
                counts = []
                for v in variants:
                    n = _count_crashes(v, apps[v.name], load_start)
                    counts.append(f"{v.name}: {n}")
                say(f"  {now:4.0f}/{duration_s:.0f} s  fencing/corruption incidents so far: " + ", ".join(counts))
                next_print += 15
            time.sleep(2)
    finally:
        probe.close()
        for t in pending_quota:
            t.join(30)
    return rows


def _count_crashes(v: Variant, app, load_start: float) -> int:
    text = app.log_path.read_text(errors="replace") if app.log_path.exists() else ""
    if v.client == "streams":
        ev = [{"t_s": e["ts"] - load_start, "kind": e["kind"], "line": e["line"]}
              for e in parse_java_log(text) if e["kind"] in STREAMS_CRASH_KINDS]
    else:
        ev = [{"t_s": e["ts"] - load_start, "kind": e["kind"], "line": ""}
              for e in _loop_lines(text) if e["kind"] in LOOP_CRASH_KINDS]
    ev = [e for e in ev if e["t_s"] >= 0]
    return len(_incidents(pd.DataFrame(ev))) if ev else 0


def _producer_ids(log_path: Path, start: int = 0) -> tuple[set[str], int]:
    """Producer client ids in LAB_METRICS lines from byte `start` on; returns them and where it stopped."""
    ids = set()
    if not log_path.exists():
        return ids, start
    with open(log_path, "rb") as f:
        f.seek(start)
        chunk = f.read()
    end = start + chunk.rfind(b"\n") + 1  # only whole lines; the rest is read next time
    for line in chunk[:end - start].decode(errors="replace").splitlines():
        if "LAB_METRICS " in line:
            ids.update(_metrics_json(line).get("producers", {}))
    return ids, end


def _metrics_json(line: str) -> dict:
    body = line.split("LAB_METRICS ", 1)[1]
    body = body[:body.rfind("}") + 1]
    try:
        return json.loads(body)
    except ValueError:
        return {}


def _loop_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


# ------------------------------------------------------------------ parsing

_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _log_ts(line: str) -> float | None:
    m = _TS.match(line)
    if not m:
        return None
    return pd.Timestamp(m.group(1).replace(",", "."), tz="UTC").timestamp()


def _collect(variants, apps, load_start):
    events, metrics, waits, client_ids = [], [], [], {}
    for v in variants:
        app = apps[v.name]
        text = app.log_path.read_text(errors="replace") if app.log_path.exists() else ""
        if v.client == "streams":
            for e in parse_java_log(text):
                events.append({"variant": v.name, "t_s": e["ts"] - load_start, "kind": e["kind"],
                               "level": e["level"], "line": e["line"]})
            m, ids = _streams_metrics(text, load_start)
            waits += [{"variant": v.name, **w} for w in _txn_waits(text, load_start)]
        else:
            m, ids = _loop_metrics(text, load_start, v.name, events)
        metrics += [{"variant": v.name, **row} for row in m]
        client_ids[v.name] = sorted(ids)
    ev = pd.DataFrame(events, columns=["variant", "t_s", "kind", "level", "line"])
    cols = ["variant", "t_s", "throttle_avg_ms", "throttle_max_ms", "commit_latency_ms", "state"]
    return (ev, pd.DataFrame(metrics, columns=cols),
            pd.DataFrame(waits, columns=["variant", "t_s", "request", "wait_s"]), client_ids)


def _streams_metrics(text: str, load_start: float):
    """LAB_METRICS lines -> per-second throttle, commit latency and producer byte rate."""
    rows, ids = [], set()
    for line in text.splitlines():
        if "LAB_METRICS " not in line:
            continue
        ts, data = _log_ts(line), _metrics_json(line)
        if ts is None or not data:
            continue
        producers = data.get("producers", {})
        ids.update(producers)
        throttle_avg = max((p.get("produce-throttle-time-avg") or 0 for p in producers.values()), default=0)
        throttle_max = max((p.get("produce-throttle-time-max") or 0 for p in producers.values()), default=0)
        commit = max((t.get("commit-latency-max") or 0 for t in data.get("threads", {}).values()), default=0)
        rows.append({"t_s": ts - load_start, "throttle_avg_ms": throttle_avg, "throttle_max_ms": throttle_max,
                     "commit_latency_ms": commit or None, "state": data.get("state")})
    return rows, ids


def _txn_waits(text: str, load_start: float) -> list[dict]:
    """How long each transactional request sat in the producer between enqueue and send (DEBUG lines)."""
    queued: dict[str, list[float]] = {}
    out = []
    for line in text.splitlines():
        m = _TXN_LINE.search(line)
        if not m:
            continue
        ts = _log_ts(line)
        if ts is None:
            continue
        what, request = m.group(1), m.group(2)
        if what == "Enqueuing":
            queued.setdefault(request, []).append(ts)
        elif queued.get(request):
            # A request can be enqueued twice (re-enqueued after a coordinator lookup): the wait
            # counts from the first time, and one send settles them all.
            enq = queued.pop(request)[0]
            out.append({"t_s": ts - load_start, "request": request, "wait_s": round(ts - enq, 3)})
    return out


def _loop_metrics(text: str, load_start: float, name: str, events: list):
    rows = []
    for e in _loop_lines(text):
        t = e["ts"] - load_start
        kind = e.get("kind")
        if kind == "stats":
            rows.append({"t_s": t, "throttle_avg_ms": e.get("throttle_avg_ms"),
                         "throttle_max_ms": e.get("throttle_max_ms"), "commit_latency_ms": None,
                         "state": e.get("txn_state")})
        elif kind == "commit":
            rows.append({"t_s": t, "throttle_avg_ms": None, "throttle_max_ms": None,
                         "commit_latency_ms": e["latency_ms"], "state": None})
        if kind in LOOP_CRASH_KINDS + ("retriable", "client_error", "start", "stop"):
            detail = {k: v for k, v in e.items() if k not in ("ts", "kind")}
            events.append({"variant": name, "t_s": t, "kind": kind,
                           "level": "ERROR" if kind in LOOP_CRASH_KINDS else "INFO",
                           "line": json.dumps(detail)[:400]})
    start = next((e for e in _loop_lines(text) if e.get("kind") == "start"), None)
    return rows, {start["client_id"]} if start else set()


# ------------------------------------------------------------------ evidence

_BROKER_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d),(\d{3})\]")


def _broker_aborts(cluster, tags: dict, load_start: float) -> pd.DataFrame:
    """The transaction coordinator's own word that it aborted a transaction for taking too long."""
    from datetime import datetime
    rows = []
    for line in cluster.grep_log(r"Completed rollback of ongoing transaction for transactionalId .* due to timeout"):
        m = _BROKER_TS.match(line)
        if not m:
            continue
        # the broker logs in the machine's local time, which datetime.timestamp() assumes too
        ts = datetime.strptime(f"{m.group(1)} {m.group(2)}.{m.group(3)}", "%Y-%m-%d %H:%M:%S.%f").timestamp()
        for name, tag in tags.items():
            if f"transactionalId {tag}-" in line:
                rows.append({"variant": name, "t_s": round(ts - load_start, 3), "line": line[:300]})
    return pd.DataFrame(rows, columns=["variant", "t_s", "line"])


def has_kafka_17455_fix(version: str) -> bool:
    """Does kafka-clients `version` contain PR #17527? Read from its bytecode with javap:
    the fix makes NetworkClientUtils.awaitReady call KafkaClient.pollDelayMs."""
    parse_version(version)
    # the Kafka Streams classpath (cached for the runs anyway) carries the matching kafka-clients jar
    jar = next((j for j in streams_classpath(version) if j.name == f"kafka-clients-{version}.jar"), None)
    if jar is None:
        raise LabError(f"kafka-clients-{version}.jar was not resolved.")
    javap = Path(java_executable()).with_name("javap")
    if not javap.exists():
        raise LabError("javap not found next to java: install a JDK (openjdk-17-jdk-headless).")
    out = subprocess.run([str(javap), "-c", "-cp", str(jar), "org.apache.kafka.clients.NetworkClientUtils"],
                         capture_output=True, text=True).stdout
    body = out.split("awaitReady(", 1)[1] if "awaitReady(" in out else ""
    body = body.split("\n\n", 1)[0]
    return "pollDelayMs" in body


# ------------------------------------------------------------------ figures

def timeline_figure(run: QuotaRun, names=None, title: str | None = None):
    """Throttle time, transactional waits vs the transaction timeout, lag, and crash/rebalance marks."""
    from plotly.subplots import make_subplots
    names = list(names or [v.name for v in run.variants])
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        row_heights=[0.26, 0.32, 0.2, 0.22],
                        subplot_titles=("producer throttle time (ms, max per ~1 s window)",
                                        "transactional request wait before send (>= 0.1 s) / librdkafka commit latency (s)",
                                        "consumer lag (records)", "fencing / corruption and rebalances"))
    for i, name in enumerate(names):
        c = colors[i % len(colors)]
        m = run.metrics[run.metrics["variant"] == name]
        th = m.dropna(subset=["throttle_max_ms"])
        fig.add_scatter(x=th["t_s"], y=th["throttle_max_ms"], mode="lines", name=name, line_color=c,
                        legendgroup=name, row=1, col=1)
        w = run.txn_waits
        w = w[(w["variant"] == name) & (w["wait_s"] >= 0.1)] if len(w) else w   # shorter waits are just noise
        if len(w):
            fig.add_scatter(x=w["t_s"], y=w["wait_s"], mode="markers", marker=dict(color=c, size=6),
                            name=f"{name}: txn request wait", legendgroup=name, showlegend=False,
                            hovertext=w["request"], row=2, col=1)
        cl = m.dropna(subset=["commit_latency_ms"])
        if run.variant(name).client == "confluent-kafka" and len(cl):
            fig.add_scatter(x=cl["t_s"], y=cl["commit_latency_ms"] / 1000, mode="markers",
                            marker=dict(color=c, size=5, symbol="x"), legendgroup=name, showlegend=False,
                            name=f"{name}: commit latency", row=2, col=1)
        lag = run.lag[run.lag["variant"] == name]
        fig.add_scatter(x=lag["t_s"], y=lag["lag"], mode="lines", line=dict(color=c, dash="dot"),
                        legendgroup=name, showlegend=False, name=f"{name}: lag", row=3, col=1)
        crashes, rebal = run.crashes(name), run.rebalances(name)
        fig.add_scatter(x=crashes["t_s"], y=[name] * len(crashes), mode="markers",
                        marker=dict(color=c, size=13, symbol="x"), hovertext=crashes.get("kinds"),
                        legendgroup=name, showlegend=False, name=f"{name}: crash", row=4, col=1)
        aborts = run.coordinator_aborts(name)
        fig.add_scatter(x=aborts["t_s"], y=[name] * len(aborts), mode="markers",
                        marker=dict(color="black", size=8, symbol="triangle-down"), legendgroup=name,
                        showlegend=False, name=f"{name}: coordinator aborted (timeout)", row=4, col=1)
        fig.add_scatter(x=rebal["t_s"], y=[name] * len(rebal), mode="markers",
                        marker=dict(color=c, size=9, symbol="circle-open"), legendgroup=name,
                        showlegend=False, name=f"{name}: rebalance", row=4, col=1)
    timeouts = sorted({run.variant(n).txn_timeout_ms for n in names})
    for t in timeouts:
        fig.add_hline(y=t / 1000, line_dash="dash", line_color="black", row=2, col=1,
                      annotation_text=f"transaction.timeout.ms = {t / 1000:g} s", annotation_position="top left")
    fig.add_hline(y=30, line_dash="dot", line_color="grey", row=2, col=1,
                  annotation_text="request.timeout.ms default = 30 s", annotation_position="bottom right")
    fig.update_xaxes(title_text="seconds since the load started", row=4, col=1)
    fig.update_layout(height=900, title=title or ("Quota-driven fencing: x = fencing/corruption in the app, "
                                    "▼ = coordinator aborted a timed-out transaction, o = rebalance"),
                      legend_title="variant", margin=dict(l=60, r=20, t=80, b=50))
    return fig


def sweep_figure(table: pd.DataFrame):
    """Crashes per minute, throttle time and final lag against load/quota, one line per client version."""
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=1, cols=3, subplot_titles=("fencing/corruption incidents per minute",
                                                        "mean throttle time (ms)", "consumer lag at the end (records)"))
    for i, (version, part) in enumerate(table.sort_values("ratio").groupby("client_version", sort=False)):
        for col, y in enumerate(("crashes_per_min", "throttle_avg_ms", "lag_end"), start=1):
            fig.add_scatter(x=part["ratio"], y=part[y], mode="lines+markers", name=version, legendgroup=version,
                            showlegend=col == 1, row=1, col=col)
    for col in (1, 2, 3):
        fig.add_vline(x=1.0, line_dash="dot", line_color="grey", row=1, col=col)
        fig.update_xaxes(title_text="estimated load / quota", row=1, col=col)
    fig.update_layout(height=380, title="Sweep: load over quota x client version", legend_title="client")
    return fig
