"""Chapter 07, when streams stop moving: one lesson notebook each (07a to 07d), one module per lesson, each ending
with its `lesson` (lab.toolbox.lesson.Lesson).

    poll_loop              07a, work between two polls (poll_loop_consumers starts the consumers,
                           poll_loop_interval is its exercise 2)
    partition_parallelism  07b, more instances for a busy app
    slow_lookups           07c, a lookup per record
    broker_bounce          07d, a broker bounce under Kafka Streams (broker_bounce_apps runs the apps,
                           broker_bounce_analysis reads their evidence, broker_bounce_report presents it)
    throughput             the Streams app 07b and 07c share
"""
