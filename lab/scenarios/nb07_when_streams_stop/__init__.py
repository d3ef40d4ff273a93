"""Notebook 07, when Streams stop: one module per lesson, composed by streams_stop.

    poll_loop              the poll-interval loop
    partition_parallelism  partitions that bound parallelism
    slow_lookups           slow lookups
    broker_bounce          broker bounces
    throughput             the Streams app the parallelism and lookup lessons share
"""
