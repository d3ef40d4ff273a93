"""Ground-truth input: N keyed records, each logged as "produced" once Kafka acknowledged it.

Every record's value is JSON {"id", "key", "seq"}; the history row adds where it
landed (partition and offset from the delivery report) and `true_value`, the
true running count of its key after it, over the records that reached the log. In transactional mode some transactions
can be aborted on purpose: their records are logged with aborted=True and do not
count towards true_value, because no read_committed reader should ever see them.
"""
from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer

from ..connection import kafka_config
from ..errors import LabError
from .history import History
from .logs import client_config


@dataclass
class Generated:
    produced: int = 0                 # records acknowledged (committed or plain)
    aborted: int = 0                  # records acknowledged inside a transaction that was then aborted
    failed: int = 0                   # delivery failures (not in the ground truth)
    injected_duplicates: int = 0      # records sent a second time on purpose
    seconds: float = 0.0
    aborted_ids: list = field(default_factory=list)


HOLD_S = 60   # the longest a hold waits: a reader that never gets there shows it in its own results


def generate(bootstrap: str, topic: str, n: int, history: History, *, keys: int = 10,
             rate: float | None = None, id_prefix: str | None = None,
             transactional: bool = False, transaction_size: int = 100, abort_transactions=(),
             duplicate: tuple | list = (), producer_config: dict | None = None, until=None,
             hold: tuple | None = None) -> Generated:
    """Produce records 0..n-1 with key `k<i % keys>` and log each acknowledged one as "produced".

    rate               records per second (None: as fast as the producer goes)
    transactional      wrap every `transaction_size` records in a transaction
    abort_transactions indices of the transactions (0, 1, ...) to abort instead of committing
    duplicate          record numbers to send a second time right after the first (an injected
                       duplicate: same id, logged as kind "injected", not as "produced")
    until              a threading.Event: produce until it is set (n=None: open-ended; no transactions)
    hold               (i, ready): before record i, wait until ready() is true (at most HOLD_S seconds), then go
                       on at `rate`: the rest arrives only once the reader reached a point of its own (notebook
                       05: its first commit), however slowly it started
    """
    if n is None and until is None or n is not None and n < 0 or keys < 1 or until is not None and transactional:
        raise LabError(f"generate needs n >= 0 (or until=, without transactions) and keys >= 1 (got n={n}, "
                       f"keys={keys}).")
    if transactional and transaction_size < 1:
        raise LabError("transaction_size must be at least 1.")
    if abort_transactions and not transactional:
        raise LabError("abort_transactions needs transactional=True.")
    aborts = set(abort_transactions)
    dups = set(duplicate)
    prefix = f"{history.run_id}-" if id_prefix is None else id_prefix
    config = {**kafka_config(bootstrap), "linger.ms": 5, "enable.idempotence": True,
              # murmur2 like the Java clients, so Kafka Streams apps agree on key -> partition
              "partitioner": "murmur2_random", **(producer_config or {})}
    if transactional:
        config.setdefault("transactional.id", f"lab-generator-{prefix}{topic}")
    producer = Producer(client_config(config))
    result = Generated()
    pending: list[dict] = []        # delivery reports waiting to be logged
    count: dict[str, int] = {}      # true running count per key (records in the log, aborted ones left out)
    seq: dict[str, int] = {}        # every attempt per key

    def delivered(row):
        def callback(err, msg):
            # An acknowledgement without an offset never reached the log (seen right after topic
            # creation): it is a failure, not ground truth.
            if err is None and (msg.offset() is None or msg.offset() < 0):
                err = "acknowledged without an offset"
            if err is not None:
                result.failed += 1
                history.log("produce_failed", id=row["id"], key=row["key"], topic=topic, error=str(err))
                return
            counted = {}
            if row["kind"] == "produced" and not row.get("aborted"):
                # Counted here, not when sent: a record that never reached the log must not shift the truth
                # of its key's later records (reports come in log order, partition by partition).
                count[row["key"]] = count.get(row["key"], 0) + 1
                counted = {"true_value": count[row["key"]]}
            pending.append({**row, **counted, "topic": msg.topic(), "partition": msg.partition(),
                            "offset": msg.offset(), "ts": time.time()})
        return callback

    def flush_log():
        done = [r for r in pending if r["kind"] == "produced"]
        result.aborted += sum(1 for r in done if r.get("aborted"))
        result.produced += sum(1 for r in done if not r.get("aborted"))
        extra = [r for r in pending if r["kind"] == "injected"]
        history.log_many("produced", [{k: v for k, v in r.items() if k != "kind"} for r in done])
        history.log_many("injected", [{k: v for k, v in r.items() if k != "kind"} for r in extra])
        pending.clear()

    start = time.monotonic()
    try:
        if transactional:
            producer.init_transactions(30)
        txn = -1
        for i in range(n) if n is not None else itertools.count():
            if until is not None and until.is_set() and i:
                break
            if hold is not None and i == hold[0]:
                held, deadline = time.monotonic(), time.monotonic() + HOLD_S
                while not hold[1]() and time.monotonic() < deadline:
                    producer.poll(0.1)
                start += time.monotonic() - held   # the pace goes on from here, no burst to catch up
            if transactional and i % transaction_size == 0:
                txn += 1
                producer.begin_transaction()
            aborting = transactional and txn in aborts
            key = f"k{i % keys}"
            seq[key] = seq.get(key, 0) + 1
            row = {"kind": "produced", "id": f"{prefix}{i}", "key": key, "seq": seq[key], "true_value": None}
            if aborting:
                row["aborted"] = True
                result.aborted_ids.append(row["id"])
            value = json.dumps({"id": row["id"], "key": key, "seq": seq[key]})
            _produce(producer, topic, key, value, delivered(row))
            if i in dups:
                _produce(producer, topic, key, value, delivered({**row, "kind": "injected", "what": "duplicate"}))
                result.injected_duplicates += 1
            producer.poll(0)
            last_in_txn = transactional and (i % transaction_size == transaction_size - 1 or i == n - 1)
            if last_in_txn:
                producer.flush(30)  # every delivery report before the decision
                if aborting:
                    producer.abort_transaction(30)
                else:
                    producer.commit_transaction(30)
                flush_log()
            elif len(pending) >= 1000:
                flush_log()
            if rate:
                ahead = (i + 1) / rate - (time.monotonic() - start)
                if ahead > 0:
                    until.wait(ahead) if until is not None else time.sleep(ahead)
        remaining = producer.flush(60)
        if remaining:
            raise LabError(f"{remaining} records to {topic} were still undelivered after 60 s: "
                           f"is the broker at {bootstrap} up?")
        flush_log()
    except KafkaException as exc:
        raise LabError(f"Producing to {topic} failed: {exc.args[0]}") from None
    finally:
        flush_log()
    result.seconds = time.monotonic() - start
    return result


def _produce(producer: Producer, topic: str, key: str, value: str, callback) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, on_delivery=callback)
            return
        except BufferError:  # local queue full: let deliveries drain
            producer.poll(0.1)
