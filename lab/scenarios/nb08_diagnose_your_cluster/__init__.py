"""Notebook 08, diagnose your own cluster: one lesson notebook.

    diagnose         the lesson (its parameters, its broker with JMX, its question, the run that builds its set-ups,
                     diagnoses and verifies) and your_cluster(), the read-only diagnosis of the learner's own cluster
    diagnose_report  its outcome, DiagnoseResult: the findings, each prediction against what was observed
    exercises        its exercises
"""
