"""Chapter 02, an idle exactly-once app loses its transactional id: one lesson notebook each (02a to 02c), each
lesson module ending with its `lesson` (lab.toolbox.lesson.Lesson), its result a TxnExpiryResult of its own runs.

    idle_clients          02a, Python and Java clients idle past the expiration
    idle_streams          02b, Kafka Streams idle as long, before and after 3.8
    old_brokers           02c, UnknownProducerIdException on brokers before 2.4
    txn_expiry            what the three share: parameters, the broker, the questions, the idle round, the result
    txn_clients           the clients under test (Java, librdkafka, Kafka Streams WordCountDemo)
    txn_unknown_producer  02c's steps on each broker
    exercises             each lesson's exercises
"""
