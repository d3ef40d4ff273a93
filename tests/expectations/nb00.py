"""Notebook 00: the setup check and the audit on a real topic with injected faults."""
from tests.expectations import exercises

# predicted: the records a read_uncommitted reader sees (120 + the duplicate + 5 aborted), the markers left out
PARAMETERS = {"MESSAGES": 120, "KEYS": 4, "ABORTED": 5, "PREDICTION": 126}

# The panel (clicked by the harness; see tests/test_notebooks.py): a smaller copy with its own faults.
PANEL = {"messages": 40, "aborted": 3}
PANEL_FAILS = True   # the injected duplicate and aborted records are found


def check(r):
    # A lesson notebook: its panel borrows the notebook's cluster while it is up (the click after lesson.end(cluster)
    # starts one of its own, see check_panel's Stop)
    assert r["panel_cluster_up"]["own_cluster"] is False, r["panel_cluster_up"]
    assert 17 <= r["java"] <= 21 and r["java_from"]
    assert r["produced"] == r["consumed"] == 120
    # the copy: every input once + 1 injected duplicate; the aborted txn is visible only uncommitted
    assert r["spark_committed"] == 121
    assert r["spark_uncommitted"] == 121 + 5
    counts = r["audit"]["counts"]
    assert counts["duplicate"] == 1
    assert counts["aborted_read"] == 5
    assert counts["lost"] == 0
    assert r["audit"]["passed"] is True
    # the injected faults, and only those, were found; the parameters injected are the ones recorded
    assert r["failure_reproduced"] is True, r["verdict"]
    assert r["param_messages"] == 120 and r["param_aborted"] == 5 == r["aborted_injected"]
    # the copy's log: 121 committed records and a commit marker, 5 aborted records and an abort marker
    assert r["copy_end_offset"] == 121 + 1 + 5 + 1, r["copy_end_offset"]
    # the Predict step: the end offset, measured; the prediction that counts records and no marker is judged wrong
    assert r["prediction"] == 126 and r["prediction_measured"] == r["copy_end_offset"], r
    assert r["prediction_right"] is False, r
    # the exercises: 1 asks for a function (m, a) -> counts, 2 for a function (m, a) -> the copy's end offset
    answers = exercises(r, [1, 2])
    assert answers == {1: None, 2: None}, answers
