"""Notebook 03, quota-driven fencing of exactly-once Kafka Streams.

    quota_fencing           the scenario: affected and fixed Streams apps over a producer quota, the sweep
    quota_fencing_analysis  its variants, metrics and evidence parsers, the bytecode check of the fix
    quota_fencing_report    QuotaResult: tables, figures, verdict
"""
