"""Notebook 09, a queue of work: share_locks (the lesson: its parameters, run, question and exercises),
share_workers (the workers it starts, what they recorded, and the rules a run follows).
"""
