"""Notebook 04, a task comes back: stale_standby (the lesson), stale_standby_report (what a run measured), exercises.
"""
