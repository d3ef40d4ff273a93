"""Chapter 03, quota-driven fencing of a Kafka Streams exactly-once app: one lesson notebook each (03a, 03b), each
lesson module ending with its `lesson` (lab.toolbox.lesson.Lesson), its result a QuotaResult of its own runs.

    fencing                  03a, the report's load on every client at once
    sweep                    03b, load against quota, client by client
    quota_fencing            what the two share: parameters, the apps, measure(), the bytecode check, the questions
    quota_fencing_analysis   which of the two fencing mechanisms hit each app
    quota_fencing_report     QuotaResult: tables, figures, verdict
    exercises                each lesson's exercises
"""
