"""What chapter 03's two lessons share: their parameters (each lesson takes its own), lineup() and sweep_points()
(the apps each runs), measure(), which runs apps side by side under their quotas and collects the evidence, the
bytecode check for the KAFKA-17455 fix, and the Predict questions. quota_fencing_analysis names which of the two
fencing mechanisms hit each app, quota_fencing_report presents the result.

    03a fencing   the report's load on every client at once (lesson key "over_quota")
    03b sweep     load against quota, client by client
"""
from __future__ import annotations

import re
import time

import pandas as pd

from ...audit import audit
from ...runtime.versions import parse_version
from ...config import KAFKA_VERSION
from ...errors import LabError
from ...toolbox import Param, Run, grep, lab_lines
from ...toolbox.apps import stop_together, streams_running
from ...toolbox.checks import check_streams_program
from ...record.generator import generate
from ...record.history import History
from ...audit.spark import read_topic, sized_session, spark_session
from ...runtime.programs import JavaProgram, streams_classpath
from .quota_fencing_analysis import (BASELINES, LOOP, VARIANTS, WIRE_OVERHEAD_BYTES, Measured,
                                     Variant, awaitready_polls_delay, quota_for, sweep_choices)

DEBUG_LOGGERS = ("org.apache.kafka.clients.producer.internals.Sender,"
                 "org.apache.kafka.clients.producer.internals.TransactionManager")
_ABORT_LINE = r"Completed rollback of ongoing transaction for transactionalId .* due to timeout"


SOURCES = ["QuotaStateApp.java", "Lab.java"]


def _streams_version(version: str, name: str) -> None:
    """A Kafka Streams version (or LOOP, the librdkafka loop): resolved, and the app compiled against it, now."""
    if version != LOOP:
        check_streams_program(version, name, "QuotaStateApp", SOURCES, oldest=(3, 3, 0),
                              why="its topology's KStream#process")


_ALL = (
    Param("streams_version", "3.8.1", "Kafka Streams version of the app under study (3.3.0 or later)",
          check=lambda v: _streams_version(v, "STREAMS_VERSION")),
    Param("other_version", "4.3.1", "a second Kafka Streams version, run beside it under the same quota when "
          "COMPARE has \"other_version\" (3.3.0 or later)", check=lambda v: _streams_version(v, "OTHER_VERSION")),
    Param("quota", 35000, "producer_byte_rate on the changelog producer's client id", lo=1024, hi=100_000_000,
          unit="B/s"),
    Param("send_rate", 33.0, "input records per second from the generator", lo=1, hi=500, unit="rec/s",
          why="one Python generator per app"),
    Param("record_bytes", 1024, "bytes of state written per input record", lo=16, hi=500_000, unit="B"),
    Param("transaction_timeout_ms", 10000, "the exactly-once producer's transaction.timeout.ms (Streams: 10000)",
          lo=1000, hi=900_000, unit="ms", why="the broker's transaction.max.timeout.ms is 900000"),
    Param("duration_s", 45, "seconds of load", lo=20, hi=1800, unit="s"),
    Param("compare", ["other_version", "no_quota"], "other apps run beside it: OTHER_VERSION under the same quota, "
          "STREAMS_VERSION without a quota, a confluent-kafka (librdkafka) loop", choices=BASELINES),
    Param("variants", ["headroom", "request_timeout"], "STREAMS_VERSION with one setting changed, run beside it: "
          "its quota (HEADROOM), its request.timeout.ms, its transaction.timeout.ms", choices=VARIANTS),
    Param("headroom", 1.5, "the headroom variant's quota: HEADROOM x the estimated load", lo=0.1, hi=100),
    Param("variant_request_timeout_ms", None, "the request_timeout variant's producer request.timeout.ms", lo=100,
          hi=110_000, unit="ms", none="a fifth of TRANSACTION_TIMEOUT_MS", why="below delivery.timeout.ms 120000"),
    Param("variant_transaction_timeout_ms", None, "the transaction_timeout variant's transaction.timeout.ms",
          lo=1000, hi=900_000, unit="ms", none="60000", why="transaction.max.timeout.ms"),
    Param("sweep_ratios", [0.9, 1.3], "estimated load / quota ratios, one app per ratio and client "
          "(empty: no sweep)", lo=0.05, hi=20),
    Param("sweep_versions", ["3.8.1", "4.3.1", LOOP], "the sweep's clients: Kafka Streams versions, or "
          f"{LOOP} (a librdkafka loop doing the same work)",
          check=lambda versions: [_streams_version(v, "SWEEP_VERSIONS") for v in versions] and None),
    Param("sweep_seconds", 45, "seconds of load per app", lo=20, hi=1800, unit="s"),
    Param("sweep_parallel", 8, "apps running at once", lo=1, hi=12,
          why="each is an app of its own on this machine"),
)
PARAMS = {param.name: param for param in _ALL}
# what both lessons take: the load each app gets, and its transaction timeout
LOAD = ("send_rate", "record_bytes", "transaction_timeout_ms")


def params(*names: str) -> list[Param]:
    return [PARAMS[name] for name in names]


def own_broker(lab: Run) -> None:
    """Quotas and the broker's log need the lab's own broker."""
    if not lab.cluster.owns_broker:
        raise LabError("Quotas and the broker's log need the embedded broker: unset KAFKA_LAB_BOOTSTRAP.")


def fixes(variants) -> dict:
    """version -> whether its kafka-clients carries the KAFKA-17455 fix, for the Streams apps of `variants`."""
    versions = {v.version for v in variants if v.client != LOOP}
    return {v: has_kafka_17455_fix(v) for v in sorted(versions, key=parse_version)}


def needs(p: dict) -> dict:
    """What the run needs of the cluster: one broker that the lab owns (quotas, broker log)."""
    return dict(nodes=1, version=KAFKA_VERSION, broker_config={})



def lineup(p: dict) -> dict:
    """role -> Variant: the app under study ("app"), the comparisons and the variants the parameters ask for."""
    a, txn = p["streams_version"], p["transaction_timeout_ms"]
    same = dict(rate=p["send_rate"], state_bytes=p["record_bytes"], txn_timeout_ms=txn)
    request = int(p["variant_request_timeout_ms"] or max(100, txn // 5))
    longer = int(p["variant_transaction_timeout_ms"] or 60000)
    roles = {"app": Variant(f"{a} quota", version=a, quota=p["quota"], **same),
             "other_version": Variant(f"{p['other_version']} quota", version=p["other_version"], quota=p["quota"],
                                      **same),
             "no_quota": Variant(f"{a} no quota", version=a, quota=None, **same),
             "librdkafka": Variant("librdkafka quota", client=LOOP, quota=p["quota"], **same),
             "headroom": Variant(f"{a} headroom x{p['headroom']:g}", version=a,
                                 quota=quota_for(1 / p["headroom"], p["send_rate"], p["record_bytes"]), **same),
             "request_timeout": Variant(f"{a} request.timeout {request / 1000:g}s", version=a, quota=p["quota"],
                                        request_timeout_ms=request, **same),
             "transaction_timeout": Variant(f"{a} txn.timeout {longer / 1000:g}s", version=a, quota=p["quota"],
                                            **{**same, "txn_timeout_ms": longer})}
    return {r: v for r, v in roles.items() if r == "app" or r in p["compare"] or r in p["variants"]}


def sweep_points(p: dict) -> list[Variant]:
    """One app per (version, ratio), its quota set to the estimated load / ratio."""
    return [Variant(f"{v} x{r:g}", client=LOOP if v == LOOP else "streams", version=v,
                    quota=quota_for(r, p["send_rate"], p["record_bytes"]), rate=p["send_rate"],
                    state_bytes=p["record_bytes"], txn_timeout_ms=p["transaction_timeout_ms"])
            for v in p["sweep_versions"] for r in p["sweep_ratios"]]


def question_versions(p: dict) -> list[str]:
    """The releases 03a's question asks about: STREAMS_VERSION, and OTHER_VERSION when it runs beside it (COMPARE)."""
    return list(dict.fromkeys([p["streams_version"]] + ([p["other_version"]] if "other_version" in p["compare"]
                                                          else [])))


def question(p: dict) -> tuple:
    """The Predict step: which of the releases that run under the quota are fenced (its choices name clients,
    sweep_choices: none, the releases from before KAFKA-17455's change, every one)."""
    ratio = p["send_rate"] * (p["record_bytes"] + WIRE_OVERHEAD_BYTES) / p["quota"]
    versions = question_versions(p)
    apps = (f"The same exactly-once app runs on Kafka Streams {' and on '.join(versions)}, side by side, each"
            if len(versions) > 1 else f"The exactly-once app runs on Kafka Streams {versions[0]},")
    return (f"{apps} writing about {ratio:.2f}x what its quota of {p['quota']:,} B/s lets through, for "
            f"{p['duration_s']} s. Which of them are fenced?", sweep_choices(versions))


def sweep_question(p: dict) -> tuple:
    """The sweep lesson's Predict step: which clients are fenced at the highest ratio of the sweep (its choices name
    clients, sweep_choices)."""
    ratio = max(p["sweep_ratios"] or [1.3])
    return (f"Every client of the sweep writes {ratio:g}x what its quota lets through, for {p['sweep_seconds']} s. "
            "Which of them are fenced?", sweep_choices(p["sweep_versions"]))


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
        return run.spawn_python(tag, "lab.apps.quota_eos_loop", {
            "bootstrap.servers": run.bootstrap, "lab.input": f"{tag}-in", "lab.output": f"{tag}-out",
            "lab.changelog": f"{tag}-changelog", "lab.group": tag, "lab.client.id": f"{tag}-producer",
            "lab.state.bytes": v.state_bytes, "lab.transaction.timeout.ms": v.txn_timeout_ms})
    props = {"application.id": tag, "client.id": tag, "bootstrap.servers": run.bootstrap,
             "processing.guarantee": "exactly_once_v2", "num.stream.threads": 1, "commit.interval.ms": 100,
             "max.poll.records": 30, "state.dir": run.folder / tag, "replication.factor": 1,
             "metrics.sample.window.ms": 1000, "producer.transaction.timeout.ms": v.txn_timeout_ms,
             "producer.request.timeout.ms": v.request_timeout_ms, "lab.input.topic": f"{tag}-in",
             "lab.output.topic": f"{tag}-out", "lab.state.bytes": v.state_bytes,
             "lab.debug.loggers": DEBUG_LOGGERS}   # "Enqueuing/Sending transactional request": the stall
    return run.program(JavaProgram(tag, v.version, "QuotaStateApp", SOURCES, props,
                                   heap="192m")).start()


def _audit(run: Run, got: Measured, history: History) -> None:
    """One Spark pass over every output topic: lab.audit's duplicate check, split per variant."""
    run.phase("auditing the read_committed output on Spark")
    spark = sized_session(spark_session(), sum(got.produced.values()))
    out = read_topic(run.bootstrap, ",".join(f"{t}-out" for t in got.tags.values()), "read_committed", spark=spark)
    got.verdict = audit(history, output_df=out, spark=spark, expect="clean", kinds=["duplicate"],
                        examples=1_000_000)
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


def has_kafka_17455_fix(version: str) -> bool:
    """Does kafka-clients `version` contain PR #17527 (awaitReady polls KafkaClient.pollDelayMs)? From its bytecode."""
    jar = next(j for j in streams_classpath(version) if j.name == f"kafka-clients-{version}.jar")
    return awaitready_polls_delay(jar)
