"""Notebook 01, offset expiry and reprocessing.

    offset_expiry        the scenario: consumer groups whose committed offsets expire, a reset policy each
    offset_expiry_spark  beside them, Spark Structured Streaming queries that keep offsets in a checkpoint
"""
