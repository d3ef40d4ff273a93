"""The app of "Quotas and Kafka Streams EOS" rewritten as a confluent-kafka (librdkafka) exactly-once loop.

Per input record it writes `lab.state.bytes` random letters to a "changelog" topic and
{"id": <input id>} to the output topic, all inside a transaction committed with the
consumer's offsets every `lab.commit.interval.ms` (100 ms, like the Streams app). The
producer's client id is the one the quota is set on.

Everything it sees goes to stdout as evidence lines `LAB {json}` (lab.record.evidence.emit):
    start, commit (latency_ms, records), throttle (ms, from throttle_cb),
    stats (throttle_avg_ms / throttle_max_ms per second, from librdkafka statistics),
    abort / fatal / retriable / error (what a failed transaction call raised), stop.
Run: python -m lab.apps.quota_eos_loop SETTINGS.properties, written by Run.spawn_python and read by
lab.apps.settings: bootstrap.servers, lab.input, lab.output, lab.changelog, lab.group, lab.client.id, and optionally
lab.state.bytes=1024, lab.commit.interval.ms=100, lab.max.poll.records=30, lab.transaction.timeout.ms=10000,
lab.call.timeout.s=60.
"""
from __future__ import annotations

import argparse
import json
import random
import signal
import string
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer

from lab.apps import settings
from lab.connection import kafka_config
from lab.record.evidence import emit


def describe(exc: Exception) -> dict:
    err = exc.args[0] if exc.args else None
    if not hasattr(err, "code"):
        return {"error": str(exc)}
    return {"error": err.name(), "message": err.str(), "fatal": err.fatal(),
            "retriable": err.retriable(), "txn_requires_abort": err.txn_requires_abort()}


def on_stats(raw: str) -> None:
    stats = json.loads(raw)
    brokers = [b for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
    if brokers:  # librdkafka's window stats of broker throttle times, in milliseconds
        emit("stats", throttle_avg_ms=max(b["throttle"]["avg"] for b in brokers),
             throttle_max_ms=max(b["throttle"]["max"] for b in brokers),
             txn_state=stats.get("eos", {}).get("txn_state"))


def on_throttle(event) -> None:
    if event.throttle_time > 0:
        emit("throttle", ms=round(event.throttle_time * 1000, 1), broker=event.broker_name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("bootstrap", "input", "output", "changelog", "group"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--client-id", required=True, help="the producer's client.id (the quota's entity)")
    p.add_argument("--state-bytes", type=int, default=1024)
    p.add_argument("--commit-interval-ms", type=int, default=100)
    p.add_argument("--max-poll-records", type=int, default=30)
    p.add_argument("--transaction-timeout-ms", type=int, default=10000)
    p.add_argument("--call-timeout-s", type=float, default=60.0, help="like the Java max.block.ms")
    args = settings.parse(p, argv)

    stopping = []   # a signal number once SIGTERM / SIGINT arrived
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _: stopping.append(number))

    def new_producer() -> Producer:
        producer = Producer({
            **kafka_config(args.bootstrap), "client.id": args.client_id,
            "transactional.id": f"{args.group}-eos",
            "transaction.timeout.ms": args.transaction_timeout_ms,
            "statistics.interval.ms": 1000, "stats_cb": on_stats, "throttle_cb": on_throttle,
            "error_cb": lambda err: emit("client_error", error=err.name(), message=err.str(), fatal=err.fatal()),
        })
        producer.init_transactions(args.call_timeout_s)
        return producer

    consumer = Consumer({
        **kafka_config(args.bootstrap), "group.id": args.group, "client.id": f"{args.client_id}-consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    })
    consumer.subscribe([args.input])
    producer = new_producer()
    producer.begin_transaction()
    emit("start", client_id=args.client_id, transaction_timeout_ms=args.transaction_timeout_ms)

    def rewind():
        """Back to the last committed offsets: what the aborted transaction read is read again."""
        parts = consumer.assignment()
        if not parts:
            return
        for tp in consumer.committed(parts, timeout=30):
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            consumer.seek(tp)

    letters = string.ascii_lowercase
    pending, last_commit = 0, time.monotonic()
    while not stopping:
        try:
            for msg in consumer.consume(args.max_poll_records, timeout=0.05):
                if msg.error():
                    continue
                record_id = json.loads(msg.value())["id"]
                state = "".join(random.choices(letters, k=args.state_bytes))
                producer.produce(args.changelog, key=record_id, value=state)
                producer.produce(args.output, key=msg.key(), value=json.dumps({"id": record_id}))
                pending += 1
            producer.poll(0)
            if pending and (time.monotonic() - last_commit) * 1000 >= args.commit_interval_ms:
                started = time.monotonic()
                offsets = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(),
                                                     args.call_timeout_s)
                producer.commit_transaction(args.call_timeout_s)
                emit("commit", latency_ms=round((time.monotonic() - started) * 1000, 1), records=pending)
                pending, last_commit = 0, time.monotonic()
                producer.begin_transaction()
        except BufferError:
            producer.poll(0.1)
        except KafkaException as exc:
            info = describe(exc)
            if info.get("fatal"):      # fenced or otherwise unusable: a new producer bumps the epoch
                emit("fatal", **info)
                producer = new_producer()
            elif info.get("retriable") and not info.get("txn_requires_abort"):
                emit("retriable", **info)
                continue               # the same commit is tried again on the next turn
            else:
                emit("abort" if info.get("txn_requires_abort") else "error", **info)
                try:
                    producer.abort_transaction(args.call_timeout_s)
                except KafkaException as again:
                    emit("fatal", **describe(again))
                    producer = new_producer()
            rewind()
            pending, last_commit = 0, time.monotonic()
            producer.begin_transaction()
    try:
        producer.abort_transaction(10)  # leave nothing open: uncommitted work is redone by the next run
    except KafkaException:
        pass
    consumer.close()
    emit("stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
