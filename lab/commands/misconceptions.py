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
        # Kafka's documentation of offsets.retention.minutes (KIP-211, since 2.1): offsets expire when "this retention
        # period has elapsed after the consumer group loses all its consumers (i.e. becomes empty)", read for both
        # protocols; so say Redpanda's `rpk group delete` page ("brokers expire offsets only when the group is empty
        # for offset.retention.minutes") and NAIS's offsets page ("Once the group is empty, Kafka retains the offsets")
        "both about 60 s after the stop": "the retention counts from when the group loses its last member, whatever "
                                          "its group protocol",
        # Kafka before 2.1 (KIP-211): a commit carried its retention and expired one retention after it, "for a group
        # that was still active" (Redpanda's `rpk group delete` page); ApsaraMQ for Kafka's FAQ "Why are expired
        # consumer offsets retained?" still says the period "starts from the point in time when the consumer offset
        # is committed"
        "both about 50 s after the stop": "a committed offset expires one retention after it was committed, "
                                          "whatever the group does",
        "`idle-classic` about 60 s after the stop, `idle-consumer` about 50 s": "the consumer protocol (KIP-848) "
            "counts the retention from the last commit once the group stops reading, the classic one from when the "
            "group loses its last member",
        # the same pre-2.1 rule kept for the classic protocol, and KIP-848, the newer design, read as the fix
        "`idle-classic` about 50 s after the stop, `idle-consumer` about 60 s": "the classic protocol keeps the old "
            "clock from the last commit; the consumer protocol, the newer design, waits for the group to empty",
        # the seed post "Some kafka retention lessons (we learned the hard way)": "the retention on the offsets and
        # the retention on the messages is not necessarily the same" was their discovery
        "neither: both groups' offsets are still there when they come back": "a group's committed offsets are kept "
                                                                              "as long as its topic keeps its records",
    },
    "02a": {
        # a reading of transactional.id.expiration.ms's documentation ("wait before proactively expire a producer's
        # transactional ID without receiving any transaction status updates from it", as the seed post "Some kafka
        # retention lessons" quotes it) as a clean-up of dead producers' ids; the team found it only after the error
        "committed once, processed once": "a transactional id stays valid while its producer runs, however long it "
                                          "sits idle",
        # KIP-98 (Exactly Once Delivery and Transactional Messaging): the output and the input's offsets commit
        # together or not at all
        "committed once, processed twice": "the failed transaction is never committed, and the restarted client "
                                           "reads its input again from the committed offsets",
        # the same seed post: "to process the same message again(!) ... it was a violation of our "exactly-once"
        # constraint"
        "committed twice": "a crash after the processing keeps its output, and the restart writes it again",
        # librdkafka's INTRODUCTION.md, "Transactional Producer > Error handling": after an abortable error the app
        # "must call rd_kafka_abort_transaction(), rewind its input to the point before the current transaction
        # started" (examples/transactions.c: rewind_consumer()); an app that does not skips the batch
        "never committed: lost": "a transaction that fails takes the input it was processing with it",
    },
    "02b": {
        # the seed post "Some kafka retention lessons (we learned the hard way)", Java client 1.1: "This would cause
        # the Kafka stream to shut down, the app to restart"
        "both": "an expired transactional id stops a Kafka Streams app on every release, until restarted",
        # KAFKA-16699, its fix "Have Streams treat InvalidPidMappingException like a ProducerFencedException"
        # (3.8.0): the error handled as a TaskMigratedException
        "only 3.7.0": "from 3.8.0 Kafka Streams handles the expired id like a fencing; before, the error reaches "
                      "the uncaught exception handler, whose default stops the client",
        # KAFKA-16699's title read the other way: a fenced producer is a zombie (the glossary's fencing, the
        # ProducerFencedException doc), so the release that treats the expired id as a fencing is taken to stop
        "only 3.8.0": "from 3.8.0 Kafka Streams takes the expired id for a fencing, and a fenced client is a "
                      "zombie that stops; before, the error was retried",
        # TaskMigratedException's javadoc: thrown "when the thread gets fenced (either by the consumer coordinator or
        # by the transaction coordinator)", read as covering every error of the transaction coordinator
        "none: each carries on by itself, as after a fencing": "Kafka Streams has always recovered from an expired "
                                                               "id by itself, as from a fencing",
        # commit.interval.ms's doc: under exactly_once_v2 "the default value is 100", read as a transaction every
        # 100 ms, input or not
        "none: Kafka Streams' own commits keep the id alive, no error": "Kafka Streams' periodic commits keep its "
                                                                        "transactional id in use while no input "
                                                                        "arrives",
    },
    "02c": {
        # the broker's own message (ProducerStateManager up to 2.4, quoted in the seed post "Some kafka retention
        # lessons"): "removed due to hitting the retention limit", read as true of every release
        "both": "a broker drops a producer's state once retention deleted all of its records, on every release",
        # KAFKA-7190, its fix "Retain producer state until transactionalIdExpiration time passes" (2.4.0), "as
        # described in KIP-360"; KIP-360's epoch bump (KAFKA-8710) came in 2.5.0
        "only 2.0.1": "before 2.4 a broker dropped a producer with its last records; from 2.4.0 it keeps it until "
                      "the transactional id expires",
        # the newer brokers' producer.id.expiration.ms doc (apache/kafka PR #12501): "producer ids may expire sooner
        # if the last write from the producer id is deleted due to the topic's retention settings"
        "only 4.3.1": "a newer broker expires producer ids on a clock of its own, and drops one at once when "
                      "retention deletes its last write",
        # the transaction coordinator keeps an id 7 days (transactional.id.expiration.ms, 604800000), taken to hold
        # for the partitions' producer state too
        "none: each still knows the producer, and the commit succeeds": "a broker keeps a producer's state while "
                                                                        "its transactional id lives, whatever "
                                                                        "retention deletes",
        # the seed post's team tied the two errors to one cause ("what seems to be a related error") and looked to
        # transactional.id.expiration.ms
        "none: each answers INVALID_PRODUCER_ID_MAPPING, the id expired with the records": "retention deleting a "
                                                                                           "producer's records "
                                                                                           "expires its "
                                                                                           "transactional id",
    },
    "03a": {
        # the seed report "Quotas and Kafka Streams EOS": "low throughput (<35KB/s) ... we should NOT expect
        # `InvalidProducerEpochException`s"
        "none of them": "a quota only slows a client down; it cannot break its transactions",
        # KAFKA-17455, fixed by apache/kafka PR #17527 "fixes stuck producer by polling again after pollDelayMs in
        # NetworkUtils#awaitReady()" (4.0; 3.9.1 by the lab's bytecode check): before it a throttled connection
        # holds a transactional request for request.timeout.ms
        "only Kafka Streams 3.8.1": "an older client waits out its whole request timeout behind a throttle, longer "
                                    "than the transaction may stay open; a newer one waits only the throttle",
        # lesson 02a's own measurement read as a rule: the Java producer from 4.0 calls INVALID_PRODUCER_ID_MAPPING
        # fatal where earlier releases aborted and went on, so a newer client is taken for the stricter one
        "only Kafka Streams 4.3.1": "a newer client is stricter with a transaction that a throttle holds up, and "
                                    "gives it up where an older one waits",
        # the seed report's title and first reading, "Quotas and Kafka Streams EOS": quotas themselves break EOS
        "every Kafka Streams version": "any exactly-once app held back by a quota falls behind until a transaction "
                                       "outlives transaction.timeout.ms, whatever its release",
    },
    "03b": {
        # the seed report "Quotas and Kafka Streams EOS": "we should NOT expect `InvalidProducerEpochException`s" at
        # a modest load
        "none of them": "a quota only slows clients down; it never fences one",
        # KAFKA-17455 read as the whole story: its fix (apache/kafka PR #17527, by the seed report's team) taken to
        # end quota fencing
        "only Kafka Streams 3.8.1": "only the release with the bug is fenced, whatever the load",
        # the same reading as 03a's: the Java producer from 4.0 calls more errors fatal (lesson 02a), so the newer
        # release is taken for the one that gives up first
        "only Kafka Streams 4.3.1": "a newer Kafka Streams release gives up on a held-up transaction sooner, and "
                                    "an older one waits",
        # a common reading of transaction.timeout.ms's doc, "a transaction will remain open before the coordinator
        # proactively aborts it": the coordinator aborts a slow transaction of any Java client
        "every Kafka Streams version": "past some load even a fixed Kafka Streams release is fenced, and a plain "
                                       "client is not",
        # the seed report's title, "Quotas and Kafka Streams EOS": any transactional client over its quota
        "every client, confluent-kafka too": "any transactional client whose load outgrows its quota is fenced, "
                                             "whatever its library",
    },
    "04": {
        # the Streams docs: standby replicas are "fully replicated copies of the state" (Architecture), exactly-once
        # reflects each record "in the state stores" (Core Concepts); the record cache "does not impact correctness"
        # (Memory Management); PR #12540, KAFKA-14172's reproduction, expected the output exact "due to the
        # exactly-once semantics"
        "none of them": "exactly-once and standby replicas keep every value a store serves right, in any release",
        # KAFKA-14624 (the seed README "kafka-streams-multi-runner": "the restoration doesn't invalidate the cache")
        # and KAFKA-14172: a recycled task kept its cache until PR #13369 "Should clear cache when active recycled
        # from standby" (3.4.1, 3.5.0)
        "only Kafka Streams 3.3.1": "an older release keeps a task's cache when the task turns standby and back; a "
                                    "current one clears it",
        # KIP-441 (Smooth Scaling Out for Kafka Streams, 2.6): warm-up replicas and probing rebalances move tasks
        # between instances after a change, read as a current release's tasks moving more, each move a chance to
        # serve from a stale copy
        "only Kafka Streams 4.3.1": "a current release moves tasks between instances more (warm-up replicas and "
                                    "probing rebalances), and serves from copies left behind",
        # the seed README "kafka-streams-multi-runner", "The interaction between caching and standby tasks is the cause
        # of this bug", read as inherent to a cache, in any release (no doc says so)
        "both": "a store's cache can serve a value from before its task left the instance and came back, in any "
                "release",
    },
    "05a": {
        # the post's section "How to handle runtime exceptions in Kafka Streams", point by point: "If we failed before
        # reading it, we're fine [...] If we failed after sending it – again, we're fine"
        "none of them": "a crash before the offsets are committed loses nothing and redoes nothing",
        # Kafka's design docs (Message Delivery Semantics) on at-least-once: the consumer "crashes after processing
        # messages but before saving its position"
        "only after_send_before_commit": "only an output already sent, its offset not yet committed, comes out twice",
        # the post's per-record reasoning: only the record in hand is at stake
        "during_processing and after_send_before_commit": "a crash before the record is processed has nothing to "
                                                          "redo",
        # the mechanism: at-least-once commits the offsets after the outputs (commit.interval.ms's doc: "For
        # at-least-once processing, committing means to save the position (ie, offsets) of the processor")
        "before_read, during_processing and after_send_before_commit": "everything processed since the last commit "
                                                                       "is redone, whichever record is in hand; "
                                                                       "right after a commit there is nothing",
        # the "at-least-once means duplicates" shorthand, as in Kafka's design docs: "At least once—Messages are
        # never lost but may be redelivered"
        "all four": "any crash under at-least-once writes duplicates, even right after a commit",
    },
    "05b": {
        # the expectation of spring-kafka issue #711 (also asked on Stack Overflow, "Kafka streams exactly once
        # delivery"): a record whose processing throws "keeps being consumed" as its offset is not committed
        "none of them": "Kafka Streams retries a record that failed, so no answer gets the app past it",
        # KIP-1033, "Add Kafka Streams exception handler for exceptions occurring during processing" (3.9): before
        # it, an exception in a processor kills the thread
        "only continue": "SHUTDOWN_CLIENT and REPLACE_THREAD only choose what happens after the thread dies; the "
                         "record's offset was never committed, so it is read again",
        # KIP-671 (Introduce Kafka Streams Specific Uncaught Exception Handler), whose motivation says it "would help
        # recover form errors" such as "Serialization or Deserialization failures"; the Stack Overflow question
        # "Kafka StreamsUncaughtExceptionHandler REPLACE_THREAD vs SHUTDOWN_CLIENT": "processing continues"
        "replace_thread and continue": "a replaced thread starts after the record that killed the old one",
        # the post's section "How to handle runtime exceptions in Kafka Streams": "letting the deployment service take
        # care of starting the app again"
        "shutdown_client and continue": "a restart moves past the record that made the app stop",
        # a common reading of the uncaught exception handler as a recovery tool, each answer included (no doc says
        # so: StreamsUncaughtExceptionHandler's javadoc only says "respond with an action")
        "all three": "any of the three answers makes the app recover and go on",
    },
    "05c": {
        # the deserialization handler's docs cover input records only ("manage record exceptions that fail to
        # deserialize", Kafka Streams Configs); read as true of every handler
        "none: it is stuck at the first input whose key has old state, again at every attempt":
            "a processing exception handler does not cover a value read from the store",
        # the seed post "Tales from running Kafka Streams in Production": "it will probably lead to lost data if you
        # ignore the event", read as one event per key
        "all but the first input of each key that has old state": "CONTINUE skips the one failing input, and the "
                                                                  "key starts afresh with the next",
        # KIP-1033 (LogAndContinueProcessingExceptionHandler): CONTINUE drops the record and goes on; nothing
        # rewrites the key's state
        "only the inputs of keys without old state: every input of a key that has old state is dropped":
            "the old value stays in the store, so every later input of that key fails the same way",
        # a common assumption about JSON: a field that is not there reads as empty (no source found)
        "all of them, but each key that has old state counts again from zero": "state the app cannot read is "
                                                                               "treated as missing",
        # the assumption that a restore goes through the new version's serde (it copies the changelog's bytes; no
        # source found)
        "all of them, each key's count carrying on from version 1's": "Kafka Streams converts a store's old format "
                                                                      "to the new one",
    },
    "05d": {
        # KIP-210's motivation (MailChimp, before any production handler), of records too large: "they cause our
        # entire application to fall over"; the post's section "How to handle runtime exceptions in Kafka Streams" let
        # the app die and restart (no Stack Overflow thread found saying "the stream dies")
        "none of them": "the broker refuses the record at every attempt, and no handler answer takes it out of the "
                        "way",
        # KAFKA-15259: CONTINUE under exactly_once does not continue (apache/kafka PR #16332, "Processing must
        # continue with flush() + commitTnx(commitOption)", was to let a transaction commit "even if the latest
        # send(ProducerRecord) failed"); KafkaProducer.commitTransaction's javadoc: after a failed send "the
        # transaction will not be committed"
        "only CONTINUE under at_least_once": "CONTINUE drops the refused record; under exactly-once a transaction "
                                             "with a failed send cannot commit, and the thread dies anyway",
        # the handler's javadoc (CONTINUE: "continue processing") and the Kafka Streams Configs doc ("CONTINUE will
        # signal that Streams should ignore the issue and continue processing", with an IgnoreRecordTooLargeHandler
        # example and no word on the guarantee); KAFKA-15259 reported it does not hold under exactly_once
        "CONTINUE under both guarantees": "the handler's answer decides, whatever the guarantee",
        # the post's section "How to handle runtime exceptions in Kafka Streams" was "still not sure when exactly you
        # would want" one; LogAndContinue is a deserialization handler, which the Kafka Streams Configs table lists as
        # the default (the code's default is LogAndFailExceptionHandler)
        "all three": "Kafka's default production handler logs the refused record and goes on",
    },
    "06b": {
        # RocksDB stores are persistent, on local disk: the seed post "Tales from running Kafka Streams in
        # Production": "make sure you have persistent storage, otherwise these restore processes will kill your
        # SLAs"; the docs (Running Streams Applications): "If a local state store exists, the changelog is replayed
        # from the previously checkpointed offset"
        "none of them: their stores are still on local disk": "a store on local disk survives a crash and is reused "
                                                              "as it is",
        # Kafka Streams' ProcessorStateManager, no checkpoint after an unclean stop: "under EOS it has the risk of
        # getting uncommitted data in stores we have to treat it as a task corruption error and wipe out the local
        # state" (no user-facing doc says it)
        "only the exactly-once app": "after a crash under exactly-once the store has no valid checkpoint, so it is "
                                     "wiped and restored from the start",
        # the seed post "Tales from running Kafka Streams in Production": "Every time the application starts, or in
        # the worst case restarts, the states stores will be restored using the corresponding changelog", read as a
        # full replay whatever the guarantee
        "the exactly-once app and the at-least-once app": "a crash leaves no store's checkpoint valid, whatever the "
                                                          "guarantee",
        # the same reading, with a standby read as a copy that is only rebuilt from the changelog when it takes over
        # (the post: standbys "may minimize the restore process")
        "all of them": "every instance that takes over a task rebuilds its store from the changelog, even from a "
                       "standby",
    },
    "06c": {
        # Kafka Streams' record cache is one budget for the whole instance (statestore.cache.max.bytes: "Maximum
        # number of memory bytes to be used for statestore cache across all threads"): read as RocksDB's too
        "at most 98 MB": "RocksDB's memory in an app is one fixed budget, whatever the number of stores and "
                         "partitions",
        # RocksDBConfigSetter.setConfig(storeName, options, configs) is called with a store's name: read as one
        # RocksDB per store of the topology
        "98 to 196 MB": "each store of the topology has one RocksDB, shared by its partitions",
        # the Kafka Streams Memory Management docs: "Each instance of RocksDB allocates off-heap memory for a block
        # cache, index and filter blocks, and memtable"; the sizing guide the seed post "Tales from running Kafka
        # Streams in Production" quotes counts it per partition ("40 * 3 * estimate per store")
        "more than 196 MB": (
            "each store of each task (one per partition) has its own cache and write buffers, so the memory grows "
            "with stores times partitions"),
    },
    "06d": {
        # the seed post "Tales from running Kafka Streams in Production" warns against it ("Don't rely on internal
        # changelogs for downstream processing"): a changelog topic per store, read as a stable topic to subscribe to
        "all of them": "a changelog topic keeps its name when the topology changes",
        # a rolling deploy read as a gradual switch, old and new instances writing to the old topic for a while (no
        # source found)
        "some of them": "the new version writes part of its counts to the old changelog topic",
        # the Kafka Streams docs "Naming Operators in a Kafka Streams DSL Application" (KIP-307): "if you add/remove
        # or shift the order of operations, the position of the processor shifts, which shifts the name"
        "none of them": "a generated store name, and with it its changelog topic's name, changes when a step is "
                        "added before the store",
    },
    "06e": {
        # RocksDB's wiki ("Compaction": leveled compaction "minimizes space amplification") presents compaction as
        # what reclaims space, which it does only of overwritten and deleted keys; read as any
        "RocksDB's compaction shrinks the files to make room, and it takes every key": "compaction makes room for "
                                                                                       "new keys by shrinking the "
                                                                                       "files",
        # the seed post "Tales from running Kafka Streams in Production", its section "State Stores don't have TTL"
        # answers it: stores were expected to forget old keys
        "the oldest keys are evicted to make room, as in a cache, and it goes on": "a state store evicts its oldest "
                                                                                   "keys, as a cache does",
        # RocksDB's sst_file_manager.h ("writes to RocksDB will fail") and wiki "Managing Disk Space Utilization":
        # an SST file past the limit sets a Status::SpaceLimit() background error, the DB goes read-only
        "its writes fail and the stream thread dies: the app stops": "a store without a TTL keeps every key, and "
                                                                     "its files cannot grow past the limit",
        # a size limit read as a soft one, as the broker's retention.bytes is (checked every
        # log.retention.check.interval.ms); no source found
        "nothing: the limit is only a warning, and the files grow past it": "a space limit only reports the "
                                                                            "excess, as a monitoring threshold does",
        # RocksDB's wiki "Write Stalls": when flushes and compaction fall behind, RocksDB slows down and then stops
        # writes until they catch up; a full disk read as one more such stall
        "its writes wait for compaction to free room: it falls behind, but runs on": "RocksDB holds writes back "
            "until compaction catches up, as it does in a write stall, and lets them through once there is room",
    },
    "07a": {
        # the seed post "Tales from running Kafka Streams in Production", of Kafka Streams apps: "Often it's caused by
        # processing very large batches of messages that take more than the five minutes threshold to commit"
        "all three": "all the work on a poll's batch counts against max.poll.interval.ms, for Kafka Streams as for "
                     "the plain clients",
        # KIP-62 (Allow consumer to send heartbeats from a background thread) read as keeping a slow consumer in its
        # group; heartbeat.interval.ms's doc: "Heartbeats are used to ensure that the consumer's session stays
        # active"
        "none of them: each moves on": "the background heartbeat thread (KIP-62) keeps each consumer in its group "
                                       "however long it works",
        # StreamThread.runOnce in Kafka's source polls again once half of max.poll.interval.ms has passed since
        # the last poll, between two records
        "the Java consumer and the librdkafka consumer, not Kafka Streams": "Kafka Streams polls again between two "
                                                                            "records of a batch, the plain clients "
                                                                            "only when the app calls poll()",
        # the post's story, of Kafka Streams apps, read as Kafka Streams' alone: a plain consumer's late commit taken
        # for one the broker still accepts (the Java consumer's CommitFailedException says otherwise)
        "only Kafka Streams": "only Kafka Streams is held to the interval; a plain client's late commit still goes "
                              "through",
    },
    "07d": {
        # "Kafka Streams retries until the broker is back": a common reading of the producer's retries doc ("resend
        # any record whose send fails with a potentially transient error"), overlooking delivery.timeout.ms
        "both ride it out and lose nothing": "Kafka Streams waits out a broker bounce in every release and carries "
                                             "on from its last commit",
        # KIP-572 (Improve timeouts and retries in Kafka Streams, 2.7/2.8) and KIP-671 (2.8) read as the whole fix:
        # a revived task replays from its last commit
        "2.7.2 stops for good; 4.3.1 rides it out and loses nothing": "from 2.8 on an expired send revives its "
                                                                      "task from its last commit, and "
                                                                      "at-least-once replays what was not written",
        "2.7.2 stops for good; 4.3.1 rides it out but loses records": "from 2.8 on the task is revived, but since "
                                                                      "3.8 (KAFKA-16903) a thread's tasks share one "
                                                                      "send error, so its other tasks commit past "
                                                                      "their failed sends",
        # StreamsConfig's doc of task.timeout.ms (KIP-572, 2.8): "The maximum amount of time in milliseconds a task
        # might stall due to internal errors and retries until an error is raised", read as a deadline that stops the
        # app, and a release without it as one that retries for ever (two student readers' doubt before the run)
        "2.7.2 rides it out and loses nothing; 4.3.1 stops for good": "task.timeout.ms (20 s here, shorter than the "
            "bounce) raises an error that stops the newer release; 2.7.2 has no such timeout and retries",
        # the seed post "Tales from running Kafka Streams in Production" (2019), its log line "All stream threads have
        # died", taken for every release
        "both stop for good": "an expired send kills the stream thread in every release",
    },
}

# A lesson whose answer is a number: (the slip, the belief behind it).
NUMBERS: dict[str, list[tuple[str, str]]] = {
    # an offset read as "a sequential ID number assigned to each message" (Confluent's "Guide to Consumer Offsets"),
    # so end minus start offset as a count of records, as lag and record-count dashboards compute it; the Q&A "In
    # kafka, When producing message with transactional, Consumer offset doubled up" is the surprise it leads to
    "00": [("every record the copier wrote, committed or aborted, and nothing else", "each offset holds a record: "
            "a topic's end offset counts the records written to it"),
           ("the committed records only", "an aborted transaction's records are taken out of the log"),
           ("every record and a commit marker, but no abort marker", "only a commit writes a marker; an abort "
            "just drops the transaction")],
    # the seed post "Tales from running Kafka Streams in Production" on the changelog's compaction, "so that old
    # data can be purged", read as the store's too; and statestore.cache.max.bytes or the memtable read as the store
    "06a": [("fewer keys than it was given", "a state store forgets old keys by itself, as a cache, a retention or "
                                             "a TTL would"),
            ("about what fits in a cache or a memtable", "the store holds only what its cache or memtable holds")],
    "07b": [("every instance", "each instance added takes a share of the work, whatever the number of partitions")],
    # 07c's source: the seed post "Tales from running Kafka Streams in Production"
    # The source post's heading: "It's ok to do external lookups". Or Kafka Streams' docs, "Parallelism Model": a
    # topic's partitions are "the unit of parallelism", and each partition gets a task, read as a thread per task
    "07c": [("the input rate (50 at the defaults)", "a call per record adds latency, not a limit on how many records "
             "a second get through; or each partition's task calls the service at the same time as the others' "
             "(four at once: 80 a second at the defaults)"),
            ("about 0: the app stalls",   # a slow dependency read as a hung app (no source found)
             "a thread waiting on a slow service stops processing altogether")],
    # KIP-932 (Queues for Kafka) likens a share group to a queue whose records a consumer holds while it works, and
    # its lock to a visibility timeout (a queue's per-message clock, as in a message broker's ack deadline): read as a
    # clock that starts when the worker gets to the record, only the slow one outlasts it
    # Or, from classic work queues, which hand a worker one message at a time until it acknowledges (a prefetch of
    # one, as RabbitMQ's work-queue tutorial sets): the records behind the slow one are not locked to it yet
    "09": [("1: only the slow record", "each record's lock starts when the worker starts on it, or a poll hands a "
            "worker one record at a time"),
           # the consumer group's way, read into the share group: a partition's records stay with the member that
           # owns it while it is alive (the KafkaShareConsumer javadoc contrasts this with share groups)
           ("0", "a worker keeps the records it was given while it is alive and polling"),
           # a poll taken for a unit, as a transaction or a batch acknowledgement would be
           ("40: the whole poll", "a poll's records are delivered again together, those already acknowledged too")],
    "08": [("none", "a group comes back to its committed offsets however long it was away"),
           ("only what arrived while it was away", "a group whose offsets expired starts at the end of its topic")],
}
