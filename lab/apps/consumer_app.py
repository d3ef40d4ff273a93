"""The app under test in notebook 01: a plain confluent-kafka consumer service.

    python -m lab.apps.consumer_app SETTINGS.properties     # written by Run.spawn_python, read by lab.apps.settings:
        bootstrap.servers, lab.topic, lab.group, lab.app, lab.history, lab.run.id, [lab.incarnation=0],
        [lab.reset=earliest|latest|error], [lab.protocol=classic|consumer], [lab.output.topic], [lab.dedupe.db],
        [lab.work.ms=0], [lab.batch=200], [lab.max.poll.interval.ms], [lab.pause=false]

It does what most services do: subscribe, process each record, commit after each batch
(at-least-once), and leave the group cleanly on SIGTERM (a redeploy). Every record read and
every commit goes to a lab.record.history.History folder ("read", "committed", "restart" rows: what the
audit checks). What it does is reported as evidence lines (lab.record.evidence.emit):
    LAB {"kind": "start", ...}      group, reset policy, protocol
    LAB {"kind": "commit", "records": N, "offsets": {"0": 123, ...}}   after each batch
    LAB {"kind": "no_offset", "topic", "partition", "error"}           the loud failure (exit 3)
    LAB {"kind": "stopped", "records": N}

lab.output.topic   write one JSON record {"id", "key", "app"} per processed input (the side
                   effect that reprocessing repeats)
lab.dedupe.db      the idempotent sink: a SQLite table of processed ids, kept across restarts;
                   an id already in it is not written again (dedupe by key)
lab.work.ms, lab.batch, lab.max.poll.interval.ms, lab.pause=true   notebook 07's slow consumer: each record
                   takes WORK_MS; consume() hands over up to BATCH records (librdkafka's max.poll.records);
                   lab.pause pauses the partitions and processes in a thread while consume() goes on.
                   A member dropped for exceeding the interval shows as `max_poll_exceeded` and
                   `commit_failed` lines, and it reads the same offsets again.
lab.reset=error    auto.offset.reset=error: when the group has no committed offset the client
                   delivers _AUTO_OFFSET_RESET instead of guessing; the app logs it and exits 3
"""
from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from lab.apps import settings
from lab.connection import kafka_config
from lab.record.evidence import emit
from lab.record.history import History

EXIT_NO_OFFSET = 3  # the loud failure: exit code when the reset policy is error and no offset exists


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--app", required=True, help="name in the history rows")
    p.add_argument("--history", required=True, help="lab.record.history.History folder")
    p.add_argument("--run-id", required=True)
    p.add_argument("--incarnation", type=int, default=0, help="0 on first start, +1 per restart")
    p.add_argument("--reset", choices=["earliest", "latest", "error"], default="earliest")
    p.add_argument("--protocol", choices=["classic", "consumer"], default="classic",
                   help="group.protocol: classic rebalance or KIP-848 'consumer'")
    p.add_argument("--output-topic")
    p.add_argument("--dedupe-db")
    p.add_argument("--work-ms", type=float, default=0, help="processing time per record")
    p.add_argument("--batch", type=int, default=200, help="records per consume() call")
    p.add_argument("--max-poll-interval-ms", type=int, help="max.poll.interval.ms (and session.timeout.ms "
                   "when it is shorter than 10 s: librdkafka needs session <= interval)")
    p.add_argument("--pause", action="store_true", help="pause, process in a thread, keep calling consume()")
    return settings.parse(p, argv)


class DedupeStore:
    """Processed ids in SQLite: `first_time(id)` is True once per id, across restarts."""

    def __init__(self, path: str):
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS processed (id TEXT PRIMARY KEY)")

    def first_time(self, record_id: str) -> bool:
        return self.db.execute("INSERT OR IGNORE INTO processed VALUES (?)", (record_id,)).rowcount == 1

    def save(self) -> None:
        self.db.commit()


def main(argv=None) -> int:
    args = parse_args(argv)
    history = History(args.history, args.run_id)
    who = {"app": args.app, "incarnation": args.incarnation}
    history.log("restart", **who)

    config = {**kafka_config(args.bootstrap), "group.id": args.group,
              "auto.offset.reset": args.reset,
              "enable.auto.commit": False,          # commit after processing: at-least-once
              "group.protocol": args.protocol}
    if args.protocol == "classic":
        config["session.timeout.ms"] = 10000    # KIP-848 groups take this from the broker instead
    if args.max_poll_interval_ms:
        config["max.poll.interval.ms"] = args.max_poll_interval_ms
        if args.protocol == "classic":
            config["session.timeout.ms"] = min(10000, args.max_poll_interval_ms)
    consumer = Consumer(config)
    producer = Producer({**kafka_config(args.bootstrap), "linger.ms": 5}) if args.output_topic else None
    dedupe = DedupeStore(args.dedupe_db) if args.dedupe_db else None

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    consumer.subscribe([args.topic])
    emit("start", **who, group=args.group, reset=args.reset, protocol=args.protocol)
    total = 0
    try:
        while not stopping:
            batch = consumer.consume(num_messages=args.batch, timeout=0.5)
            records = []
            for msg in batch:
                if msg.error():
                    if msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        # No committed offset and the policy forbids guessing: fail loudly.
                        history.log("app_error", **who, group=args.group, topic=msg.topic(),
                                    partition=msg.partition(), code="_AUTO_OFFSET_RESET",
                                    error=msg.error().str())
                        emit("no_offset", **who, topic=msg.topic(), partition=msg.partition(),
                             error=f"no committed offset for {msg.topic()}[{msg.partition()}] and "
                                   f"auto.offset.reset=error: {msg.error().str()}")
                        consumer.close()
                        return EXIT_NO_OFFSET
                    if msg.error().code() == KafkaError._MAX_POLL_EXCEEDED:   # dropped from the group
                        emit("max_poll_exceeded", **who, error=msg.error().str())
                        continue
                    emit("consumer_error", **who, error=str(msg.error()))
                    continue
                records.append(msg)
            if records:
                if args.pause:
                    finished = process_paused(consumer, records, args, who, history, producer, dedupe, stopping)
                else:
                    finished = process(records, args, who, history, producer, dedupe, stopping)
                total += len(records)
                if not finished:
                    break   # SIGTERM during slow work: the batch was not finished, so none of it is committed
                commit(consumer, args, who, history, len(records))
    finally:
        if not consumer_closed(consumer):
            consumer.close()  # leaves the group: for a classic group this starts the expiry clock
    emit("stopped", **who, records=total)
    return 0


def process_paused(consumer, records, args, who, history, producer, dedupe, stopping) -> bool:
    """Process in a worker thread while consume() keeps the member alive; paused partitions return nothing."""
    parts = list({(m.topic(), m.partition()): TopicPartition(m.topic(), m.partition()) for m in records}.values())
    consumer.pause(parts)
    finished = []
    worker = threading.Thread(target=lambda: finished.append(
        process(records, args, who, history, producer, dedupe, stopping)))
    worker.start()
    while worker.is_alive():
        for msg in consumer.consume(num_messages=1, timeout=0.1):
            if msg.error() is None:
                raise RuntimeError("a paused partition returned a record")
    consumer.resume(parts)
    return finished == [True]


def process(records, args, who, history, producer, dedupe, stopping=()) -> bool:
    """The batch's work; False when SIGTERM (`stopping`) came during slow work and cut it short: what was
    done is recorded, the rest is dropped, as a redeploy that does not wait for a 10 s batch would."""
    rows = []
    finished = True
    for msg in records:
        if args.work_ms:
            if stopping:
                finished = False
                break
            time.sleep(args.work_ms / 1000)   # the work: an external call, a slow computation
        value = json.loads(msg.value())
        rows.append({**who, "group": args.group, "topic": msg.topic(), "partition": msg.partition(),
                     "offset": msg.offset(), "id": value["id"]})
        if producer is not None and (dedupe is None or dedupe.first_time(value["id"])):
            out = json.dumps({"id": value["id"], "key": value.get("key"), "app": args.app})
            produce(producer, args.output_topic, value.get("key"), out)
    history.log_many("read", rows)
    if producer is not None:
        if producer.flush(30):
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "output not delivered in 30 s"))
        if dedupe is not None:
            dedupe.save()  # after the output is delivered: a crash in between re-sends, never loses
    return finished


def produce(producer, topic, key, value) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value)
            return
        except BufferError:
            producer.poll(0.1)


def commit(consumer, args, who, history, records: int) -> None:
    """Synchronous commit of what was just processed, logged with Kafka's meaning (next offset to read)."""
    try:
        committed = consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError._NO_OFFSET:  # nothing new to commit
            return
        if args.work_ms:   # notebook 07: a member dropped from the group cannot commit; it goes on
            emit("commit_failed", **who, error=exc.args[0].str(), code=exc.args[0].name())
            return
        raise
    done = [tp for tp in committed or [] if tp.offset >= 0 and tp.error is None]
    history.log_many("committed", [{**who, "group": args.group, "topic": tp.topic,
                                    "partition": tp.partition, "offset": tp.offset} for tp in done])
    emit("commit", **who, records=records, offsets={tp.partition: tp.offset for tp in done})


def consumer_closed(consumer) -> bool:
    try:
        consumer.assignment()
        return False
    except RuntimeError:  # "Consumer closed"
        return True


if __name__ == "__main__":
    sys.exit(main())
