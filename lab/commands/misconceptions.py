"""The belief behind each answer of every lesson's Predict question, for the teachers' answer key (docs/answers.md,
written by lab.commands.answers).

A lesson whose question has choices: each choice, word for word as the question gives it at the notebook's
defaults, and the belief that picks it. Whether a belief holds is what the run measures: the answer key sets the
measured answer beside them, and every other choice is a misconception to talk about. A lesson whose answer is a
number: the tempting slips, each with the belief behind it. tests/test_answers.py checks that every choice of every
lesson has its belief here, and that no belief names a choice the question no longer has.
"""
from __future__ import annotations

CHOICES: dict[str, dict[str, str]] = {
    "01": {
        "it resumes where it stopped": "a group's committed offsets are kept as long as its topic keeps its records",
        "it re-reads what it had already processed": "once the group's offsets are gone, `earliest` sends it back to "
                                                     "the oldest record its topic still holds",
        "it skips what arrived while it was down": "a group that lost its offsets starts at the end of its topic, "
                                                   "whatever auto.offset.reset says",
        "it stops with an error": "a consumer whose offsets are gone fails instead of resetting them",
    },
    "02a": {
        "it commits normally": "a transactional id stays valid however long its producer sits idle",
        "it fails, and the input is processed again": "the failed transaction is never committed, and the restarted "
                                                      "client reads its input again from the committed offsets",
        "it fails, and the input is lost": "a transaction that fails takes the input it was processing with it",
    },
    "02b": {
        "the stream thread dies: the client goes to ERROR": "this release lets the expired id's error through to the "
                                                            "uncaught exception handler, whose default shuts the "
                                                            "client down",
        "the task migrates: the thread carries on": "Kafka Streams treats an expired id like a lost task and recovers "
                                                    "by itself",
        "no error: Kafka Streams' own commits kept the id alive": "Kafka Streams' periodic commits keep its "
                                                                  "transactional id in use while no input arrives",
    },
    "02c": {
        "the broker has forgotten the producer: UNKNOWN_PRODUCER_ID": "an old broker drops a producer's state once "
                                                                      "retention deleted all of its records, and says "
                                                                      "so",
        "no error: the broker still knows the producer": "a broker keeps a producer's state after retention deleted "
                                                         "every record it wrote",
        "the transactional id has expired: INVALID_PRODUCER_ID_MAPPING": "retention deleting a producer's records "
                                                                         "expires its transactional id",
    },
    "03a": {
        "yes, it is fenced": "a quota's throttling can hold an exactly-once app's transaction until the app is fenced",
        "no, it runs clean": "a quota only slows a client down; it cannot break its transactions",
    },
    "03b": {
        "none of them": "a quota only slows clients down; it never fences one",
        "only Kafka Streams 3.8.1": "only the release with the bug is fenced, whatever the load",
        "every Kafka Streams version": "past some load even a fixed Kafka Streams release is fenced, and a plain "
                                       "client is not",
        "every client, confluent-kafka too": "any transactional client whose load outgrows its quota is fenced, "
                                             "whatever its library",
    },
    "04": {
        "yes, it serves a stale value": "a store's cache can keep a value from before its task left the instance and "
                                        "came back",
        "no, every value is right": "exactly-once and standby replicas keep every value a store serves right",
    },
    "05a": {
        "every input exactly once": "what the crash interrupted is aborted and done again, and read_committed never "
                                    "shows the aborted output",
        "some inputs twice": "the output sent before the crash stays, and the restarted app sends it again",
        "some inputs missing": "what the app processed since its last commit is lost in the crash",
    },
    "05b": {
        "it is stuck: the same record fails again at every attempt (each new thread, each restart)":
            "a record the processor cannot parse fails the same way each time, and every restart reads it again",
        "it stops once; restarted, it carries on past that record": "a restart moves past the record that made the "
                                                                    "app stop",
        "it keeps going, without that record": "Kafka Streams drops a record its processor cannot take, by default",
        "it keeps going, and that record is kept aside where someone can find it": "Kafka Streams puts such a record "
                                                                                   "in a dead-letter topic by default",
        "it keeps going: Kafka Streams retries that record until it goes through": "Kafka Streams retries a record "
                                                                                   "that failed until it succeeds",
    },
    "05c": {
        "it is stuck: it fails at the first input whose key has old state, again at every attempt":
            "the restarted app restores the old state unchanged from the changelog, so it fails the same way each time",
        "it stops once; restarted, it carries on with every key": "a restart rebuilds the store in the new format",
        "it keeps going, without the inputs of keys that have old state": "Kafka Streams skips an input whose state "
                                                                          "it cannot read",
        "it keeps going, but each key that has old state counts again from zero": "state the app cannot read is "
                                                                                  "treated as missing",
        "it keeps going, and every key's count carries on from version 1's": "Kafka Streams converts a store's old "
                                                                             "format to the new one",
    },
    "05d": {
        "it is stuck: the broker refuses the same record again at every restart": "at-least-once commits no input "
                                                                                  "past the refused output, so every "
                                                                                  "restart sends it again",
        "it stops once; restarted, it carries on past that record": "a restart moves past the output the broker "
                                                                    "refused",
        "it keeps going, without that record": "the default production exception handler drops a record the broker "
                                               "refuses",
        "it keeps going, and that record is noted where someone can find it": "Kafka Streams puts a refused record "
                                                                              "in a dead-letter topic by default",
        "it keeps going: the producer retries that record until the broker takes it": "the producer retries a "
                                                                                      "refused record until it goes "
                                                                                      "through",
    },
    "06b": {
        "the whole changelog, from its first offset": "after a crash under exactly-once the store has no valid "
                                                      "checkpoint, so it is wiped and restored from the start",
        "only what its checkpoint does not cover": "a store's checkpoint survives a crash and limits what it restores",
    },
    "06c": {
        "yes, within 128 MB": "RocksDB's memory in an app is one fixed budget, whatever the number of stores and "
                              "partitions",
        "no, it grows past 128 MB": "each store of each task (one per partition) has its own cache and write buffers, "
                                    "so the memory grows with stores times partitions",
    },
    "06d": {
        "all of them": "a changelog topic keeps its name when the topology changes",
        "some of them": "the new version writes part of its counts to the old changelog topic",
        "none of them": "a generated store name, and with it its changelog topic's name, changes when a step is "
                        "added before the store",
    },
    "06e": {
        "no: the app stops once its files reach the limit": "a store without a TTL keeps every key, and its files "
                                                            "cannot grow past the limit",
        "yes: RocksDB's compaction shrinks its files to make room": "compaction makes room for new keys by shrinking "
                                                                    "the files",
        "yes: the oldest keys are evicted to make room, as in a cache": "a state store evicts its oldest keys, as a "
                                                                        "cache does",
        "yes: every key fits within the limit": "the store's keys take less room than the limit",
    },
    "07a": {
        "yes, it keeps reading the same batch": "work between two polls longer than max.poll.interval.ms makes the "
                                                "consumer leave its group, so its commit fails and it reads the "
                                                "batch again",
        "no, it moves on": "a consumer that polls late only falls behind; it still commits and moves on",
    },
    "07c": {
        "yes, it keeps up": "a call per record adds latency, not a limit on how many records a second get through",
        "no, its lag keeps growing": "one thread that waits for every call finishes at most 1,000 ms / the call's "
                                     "latency records a second",
    },
    "07d": {
        "its stream threads stop and it stops processing for good": "in this release, sends that time out while the "
                                                                    "leader is away kill the stream threads",
        "it resumes processing after the bounce": "Kafka Streams waits out a broker bounce and carries on by itself",
    },
}

# A lesson whose answer is a number: (the slip, the belief behind it).
NUMBERS: dict[str, list[tuple[str, str]]] = {
    "00": [("the records produced, without the copier's duplicate", "a transaction removes a duplicate the app "
                                                                    "wrote itself"),
           ("the aborted records counted too", "read_committed hides only transactions still open, not aborted ones"),
           ("a record for each transaction marker", "the markers that end transactions are records a reader sees")],
    "06a": [("fewer keys than it was given", "a state store forgets old keys by itself, as a cache, a retention or "
                                             "a TTL would"),
            ("about what fits in a cache or a memtable", "the store holds only what its cache or memtable holds")],
    "07b": [("every instance", "each instance added takes a share of the work, whatever the number of partitions")],
    "08": [("none", "a group comes back to its committed offsets however long it was away"),
           ("only what arrived while it was away", "a group whose offsets expired starts at the end of its topic")],
}
