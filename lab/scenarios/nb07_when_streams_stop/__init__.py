"""Notebook 07, when Streams stop: one module per lesson, composed by streams_stop.

    poll_loop              the poll-interval loop
    partition_parallelism  partitions that bound parallelism
    slow_lookups           slow lookups
    broker_bounce          broker bounces (broker_bounce_apps runs the apps, broker_bounce_analysis reads their
                           evidence, broker_bounce_report presents it)
    throughput             the Streams app the parallelism and lookup lessons share
"""
