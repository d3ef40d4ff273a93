"""Notebook 02, transactional-id expiry and UnknownProducerId.

    txn_expiry            the scenario: idle exactly-once clients whose transactional id expires
    txn_clients           the clients under test (Java, librdkafka, Kafka Streams WordCountDemo)
    txn_unknown_producer  part C: UnknownProducerIdException on brokers before 2.4
"""
