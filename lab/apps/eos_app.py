"""An exactly-once consume-transform-produce app on confluent-kafka, shaped like a Streams task.

Loop: read a batch (read_committed), transform every record to {"id", "key", "app",
"incarnation"} on the output topic, `send_offsets_to_transaction`, `commit_transaction`.
It logs the shared history (lab.record.history): "restart" once at start, "read" per record,
"committed" per partition after each commit (the next offset to read).

What it does when a transaction call fails (lab.on.error):
    crash     log the error and exit 3, like a Kafka Streams thread that dies; whoever
              supervises the app starts it again (the source's "crashed and processed it again")
    abort     by the book: txn_requires_abort -> abort_transaction; fatal -> a new producer;
              then rewind the consumer to the last committed offsets, so the aborted batch is
              read and processed again
    recreate  like abort, but INVALID_PRODUCER_ID_MAPPING is treated as fatal too: a new
              producer (init_transactions gets a fresh producer id), then rewind
    naive     abort (or a new producer) but NO rewind: the consumer position is already past
              the aborted batch, so that batch is never written (lost)
lab.heartbeat.ms N: while idle, run a transaction every N ms that only re-commits the current
positions (AddOffsetsToTxn + EndTxn): the coordinator sees the transactional id in use.
lab.skip.heartbeats N: the first N heartbeats due are not sent (an app stalled by a long GC pause or a slow
deploy): the id then goes N + 1 intervals without a transaction.
lab.offsets.first: call send_offsets_to_transaction before producing (which call sees the error).

What it does goes to stdout as evidence lines `LAB {json}` (lab.record.evidence.emit;
librdkafka's own log lines, which start with '%', stay as they are): start, heartbeat, read,
commit, error (call, error, code, fatal, retriable, txn_requires_abort, handling, message), abort,
recreate, rewind, delivery_error, client_error, exit.
Run: python -m lab.apps.eos_app SETTINGS.properties, written by Run.spawn_python and read by lab.apps.settings:
bootstrap.servers, lab.input, lab.output, lab.group, lab.transactional.id, lab.app, lab.history, lab.run.id, and
optionally lab.incarnation=0, lab.on.error=abort, lab.heartbeat.ms=0, lab.skip.heartbeats=0, lab.offsets.first=false,
lab.transaction.timeout.ms=10000, lab.call.timeout.s=30, lab.debug (librdkafka debug contexts, e.g. eos).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from lab.apps import settings
from lab.connection import kafka_config
from lab.record.evidence import emit
from lab.record.history import History


def describe(exc: Exception) -> dict:
    """The error as the app sees it: name, code, librdkafka's flags, and the handling they mean."""
    err = exc.args[0] if exc.args else None
    if not hasattr(err, "code"):
        return {"error": type(exc).__name__, "code": None, "message": str(exc), "fatal": None,
                "retriable": None, "txn_requires_abort": None, "handling": "other"}
    handling = "fatal" if err.fatal() else "abortable" if err.txn_requires_abort() else \
        "retriable" if err.retriable() else "other"
    return {"error": err.name(), "code": err.code(), "message": err.str(), "fatal": err.fatal(),
            "retriable": err.retriable(), "txn_requires_abort": err.txn_requires_abort(), "handling": handling}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--transactional-id", required=True)
    p.add_argument("--app", required=True, help="name in the history")
    p.add_argument("--incarnation", type=int, default=0, help="restart counter (the supervisor's)")
    p.add_argument("--history", required=True, help="history folder")
    p.add_argument("--run-id", required=True)
    p.add_argument("--on-error", choices=("crash", "abort", "recreate", "naive"), default="abort")
    p.add_argument("--heartbeat-ms", type=int, default=0, help="0: no heartbeat transactions")
    p.add_argument("--skip-heartbeats", type=int, default=0, help="the first N heartbeats due are not sent")
    p.add_argument("--offsets-first", action="store_true")
    p.add_argument("--transaction-timeout-ms", type=int, default=10000)
    p.add_argument("--call-timeout-s", type=float, default=30.0)
    p.add_argument("--debug", default="", help="librdkafka debug contexts for the producer, e.g. eos")
    args = settings.parse(p, argv)

    history = History(Path(args.history), args.run_id)
    running = True

    def stop(*_):
        nonlocal running
        running = False
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def on_delivery(err, msg):
        if err is not None:
            emit("delivery_error", name=err.name(), code=err.code(), message=err.str())

    def new_producer() -> Producer:
        producer = Producer({
            **kafka_config(args.bootstrap), "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms, "linger.ms": 5,
            **({"debug": args.debug} if args.debug else {}),
            "error_cb": lambda err: emit("client_error", name=err.name(), code=err.code(),
                                         message=err.str(), fatal=err.fatal()),
        })
        producer.init_transactions(args.call_timeout_s)
        return producer

    consumer = Consumer({
        **kafka_config(args.bootstrap), "group.id": args.group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
    })
    consumer.subscribe([args.input])
    # Like a Streams task: the producer is created once partitions are assigned, so the
    # transactional id is not left idle while the group forms.
    pending = []
    while running and not consumer.assignment():
        pending += [m for m in consumer.consume(100, timeout=0.2) if not m.error()]
    producer = new_producer()
    history.log("restart", app=args.app, incarnation=args.incarnation)
    emit("start", app=args.app, incarnation=args.incarnation, on_error=args.on_error,
         transactional_id=args.transactional_id, heartbeat_ms=args.heartbeat_ms)

    def rewind():
        """Back to the last committed offsets: the aborted batch is read (and processed) again."""
        parts = consumer.assignment()
        if not parts:
            return
        committed = consumer.committed(parts, timeout=args.call_timeout_s)
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
            consumer.seek(tp)
        emit("rewind", offsets={f"{tp.topic}-{tp.partition}": tp.offset for tp in committed})

    def send_offsets(offsets):
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), args.call_timeout_s)

    last_txn = time.monotonic()
    skipped = 0
    exit_code = 0
    while running:
        call = "consume"
        try:
            msgs = pending or [m for m in consumer.consume(100, timeout=0.1) if not m.error()]
            pending = []
            producer.poll(0)
            if not msgs:
                if args.heartbeat_ms and (time.monotonic() - last_txn) * 1000 >= args.heartbeat_ms:
                    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                    if positions and skipped < args.skip_heartbeats:
                        skipped += 1
                        emit("heartbeat_skipped", n=skipped)
                    elif positions:
                        call = "begin_transaction"
                        producer.begin_transaction()
                        call = "send_offsets_to_transaction"
                        send_offsets(positions)
                        call = "commit_transaction"
                        producer.commit_transaction(args.call_timeout_s)
                        emit("heartbeat", offsets={f"{tp.topic}-{tp.partition}": tp.offset for tp in positions})
                    last_txn = time.monotonic()
                continue
            call = "begin_transaction"
            producer.begin_transaction()
            next_offsets: dict = {}
            for m in msgs:
                record_id = json.loads(m.value())["id"]
                history.log("read", app=args.app, incarnation=args.incarnation, group=args.group,
                            topic=m.topic(), partition=m.partition(), offset=m.offset(), id=record_id)
                next_offsets[(m.topic(), m.partition())] = m.offset() + 1
            emit("read", ids=[json.loads(m.value())["id"] for m in msgs])
            offsets = [TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
            if args.offsets_first:
                call = "send_offsets_to_transaction"
                send_offsets(offsets)
            call = "produce"
            for m in msgs:
                value = json.loads(m.value())
                out = {"id": value["id"], "key": value.get("key"), "app": args.app,
                       "incarnation": args.incarnation}
                producer.produce(args.output, key=m.key(), value=json.dumps(out), on_delivery=on_delivery)
            if not args.offsets_first:
                call = "send_offsets_to_transaction"
                send_offsets(offsets)
            call = "commit_transaction"
            producer.commit_transaction(args.call_timeout_s)
            for (topic, partition), offset in next_offsets.items():
                history.log("committed", app=args.app, incarnation=args.incarnation, group=args.group,
                            topic=topic, partition=partition, offset=offset)
            emit("commit", records=len(msgs), offsets={f"{t}-{p}": o for (t, p), o in next_offsets.items()})
            last_txn = time.monotonic()
        except BufferError:
            producer.poll(0.1)
        except KafkaException as exc:
            info = describe(exc)
            emit("error", call=call, **info)
            if args.on_error == "crash":
                exit_code = 3
                break
            recreate = info["fatal"] or (args.on_error == "recreate" and info["error"] == "INVALID_PRODUCER_ID_MAPPING")
            if not recreate:
                try:
                    producer.abort_transaction(args.call_timeout_s)
                    emit("abort", after=call)
                except KafkaException as again:
                    emit("error", call="abort_transaction", **describe(again))
                    recreate = True
            if recreate:
                # This producer instance is done: a new one (same transactional.id) gets a fresh
                # producer id from init_transactions and fences whatever the old one left open.
                producer = None  # destroy the old instance first
                producer = new_producer()
                emit("recreate", after=call)
            if args.on_error != "naive":
                rewind()
            last_txn = time.monotonic()
    consumer.close()  # leave the group, so a restarted incarnation is assigned at once
    emit("exit", code=exit_code)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
