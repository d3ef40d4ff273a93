"""Benchmark for `lab.doctor`: how long a read-only diagnosis takes on a small risky cluster and on a busy one.

    python benchmarks/bench_doctor.py [GROUPS] [TXN_IDS]       (default 1000 1000)

One embedded broker (JMX on). First a small risky cluster: a group that committed and left, an idle
transactional id, a quota on a Streams EOS producer's client id; `diagnose()` is timed (target <= 20 s).
Then the generator adds GROUPS groups (each commits once, with a standalone assign() consumer, and is gone)
and TXN_IDS transactional ids (one committed transaction each), from a few threads; then `diagnose()` and
`python -m lab doctor --json` are timed (target <= 60 s), and a diagnosis whose reads of the internal topics are
bounded to BOUNDED_MB (how far they got). Prints a Markdown table for benchmarks/RESULTS.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from lab.cluster import KafkaCluster  # noqa: E402
from lab.runtime.ports import free_port  # noqa: E402
from lab.doctor import diagnose  # noqa: E402

THREADS = 8
BROKER = {"offsets.retention.minutes": "60", "transactional.id.expiration.ms": "3600000",
          "offsets.topic.num.partitions": "10", "transaction.state.log.num.partitions": "10"}
QUIET = {"log_level": 0}
BOUNDED_MB = 0.05   # the busy cluster's internal topics hold more: the bounded read stops part way


def commit_once(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """A group that commits once and is gone: a standalone consumer (assign(), no membership)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **QUIET})
    c.commit(offsets=[TopicPartition(topic, p, 5 + p) for p in range(partitions)], asynchronous=False)
    c.close()


def one_transaction(bootstrap: str, txn_id: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **QUIET})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, txn_id.encode())
    p.commit_transaction(30)


def generate(bootstrap: str, groups: int, txn_ids: int) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        jobs = [pool.submit(commit_once, bootstrap, f"bench-group-{i}", "bench-orders", 4) for i in range(groups)]
        jobs += [pool.submit(one_transaction, bootstrap, f"bench-txn-{i}", "bench-invoices") for i in range(txn_ids)]
        for job in jobs:
            job.result()
    return time.monotonic() - started


def small_risky(kc: KafkaCluster) -> None:
    p = Producer({"bootstrap.servers": kc.bootstrap, **QUIET})
    for i in range(100):
        p.produce("bench-orders", str(i).encode(), partition=i % 4)
    p.flush(30)
    c = Consumer({"bootstrap.servers": kc.bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **QUIET})
    c.subscribe(["bench-orders"])
    seen = 0
    while seen < 100:
        seen += c.poll(1) is not None
    c.commit(asynchronous=False)
    c.close()
    one_transaction(kc.bootstrap, "invoicer", "bench-invoices")
    kc.set_quota("pricing-StreamThread-1-producer", producer_byte_rate=35000)


def main(groups: int = 1000, txn_ids: int = 1000) -> dict:
    load = os.getloadavg()
    with KafkaCluster(name="bench-doctor", broker_config=BROKER, jmx_port=free_port()) as kc:
        admin = kc.admin()
        for f in admin.create_topics([NewTopic("bench-orders", 4, 1), NewTopic("bench-invoices", 4, 1)]).values():
            f.result()
        small_risky(kc)
        diagnose(kc.bootstrap, jmx=kc.jmx)            # warm: compiles the collector once
        small = diagnose(kc.bootstrap, jmx=kc.jmx)
        print(f"small risky cluster: {small.seconds:.1f} s, {len(small.findings)} findings "
              f"({', '.join(sorted({f.rule for f in small.findings}))})", flush=True)
        generated_s = generate(kc.bootstrap, groups, txn_ids)
        print(f"generated {groups} groups and {txn_ids} transactional ids in {generated_s:.1f} s", flush=True)
        big = diagnose(kc.bootstrap, jmx=kc.jmx, timeout_s=60)
        facts = big.facts
        print(f"busy cluster: diagnose() {big.seconds:.1f} s: {len(facts['groups'])} groups, "
              f"{len(facts['transactions'])} transactional ids, {len(big.findings)} findings, "
              f"sections {({k: round(v, 2) for k, v in facts['section_seconds'].items()})}", flush=True)
        bounded = diagnose(kc.bootstrap, jmx=kc.jmx, timeout_s=60, max_read_mb=BOUNDED_MB)
        reads = bounded.facts["log_reads"]
        print(f"bounded to {BOUNDED_MB} MB a topic: {bounded.seconds:.1f} s, " + "; ".join(
            f"{topic} {len(r['complete'])}/{len(r['partitions'])} partitions, {r['bytes']:,} bytes, stopped: "
            f"{r['stopped']}, {r['unknown_count']} ids unknown" for topic, r in reads.items()), flush=True)
        started = time.monotonic()
        cli = subprocess.run([sys.executable, "-m", "lab", "doctor", "--bootstrap", kc.bootstrap, "--jmx", kc.jmx,
                              "--json", "--timeout", "60"], check=False, capture_output=True, text=True, cwd=ROOT)
        cli_s = time.monotonic() - started
        assert cli.returncode == 0, cli.stderr   # findings, but no --fail-on, and every check ran
    result = {"small_s": small.seconds, "small_findings": len(small.findings), "generate_s": generated_s,
              "bounded_s": bounded.seconds, "bounded_reads": reads,
              "big_s": big.seconds, "cli_s": cli_s, "groups": len(facts["groups"]),
              "txn_ids": len(facts["transactions"]), "big_findings": len(big.findings), "load": load}
    print("\n## lab doctor (one broker, JMX on; load before: " + " ".join(f"{x:.2f}" for x in load) + ")\n")
    print("| cluster | groups | transactional ids | findings | diagnose() (s) | `python -m lab doctor --json` (s) |")
    print("|---|---|---|---|---|---|")
    print(f"| small risky | 1 | 1 | {len(small.findings)} | **{small.seconds:.1f}** (target <= 20) | - |")
    print(f"| busy (generated in {generated_s:.0f} s) | {result['groups']} | {result['txn_ids']} | "
          f"{len(big.findings)} | {big.seconds:.1f} | **{cli_s:.1f}** (target <= 60) |")
    print(f"| busy, each internal topic's read bounded to {BOUNDED_MB} MB | | | {len(bounded.findings)} | "
          f"{bounded.seconds:.1f} | - |")
    return result


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
