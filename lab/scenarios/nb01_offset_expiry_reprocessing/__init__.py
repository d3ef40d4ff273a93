"""Notebook 01, offset expiry and reprocessing.

    offset_expiry         the lesson: consumer groups whose committed offsets expire, a reset policy each
    offset_expiry_spark   beside them, Spark Structured Streaming queries that keep offsets in a checkpoint
    offset_expiry_report  what a run measured: facts, audits, the expiry clocks
    exercises             the lesson's exercises
"""
