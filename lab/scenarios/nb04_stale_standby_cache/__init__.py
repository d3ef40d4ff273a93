"""Notebook 04, stale reads from a cached store after standby -> active.
"""
