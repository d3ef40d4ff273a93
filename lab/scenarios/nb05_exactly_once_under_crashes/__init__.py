"""Notebook 05, exactly-once under crashes and exception handlers.
"""
