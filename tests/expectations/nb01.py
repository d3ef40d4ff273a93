"""Notebook 01 (offset expiry): small batches, the one-minute retention is the floor of its run time."""
from tests.expectations import exercises, prediction

PARAMETERS = dict(
    MESSAGES_BEFORE=60,        # still enough for every group to commit on both partitions
    MESSAGES_WHILE_DOWN=30,
    IDLE_S=15,                 # > the sweep interval + polling slack, so the two clocks stay distinguishable
    EARLY_DOWNTIME_S=10,
    # a wrong prediction (the run says what it measured instead): one retention is the classic group's clock; the
    # consumer protocol counts from the last commit, IDLE_S before the stop
    PREDICTION="both about 60 s after the stop",
    FIX={"downtime_s": 20},    # the Mitigate cell's fix here: the earliest and latest groups back within the 60 s retention
)

# The control: down 20 s < the 60 s retention, so no group loses its offsets. Three groups (the seed's
# earliest among them) and no Spark queries keep it short; the audit still reads what each group read.
CONTROL = dict(
    MESSAGES_BEFORE=60,
    MESSAGES_WHILE_DOWN=30,
    DOWNTIME_S=20,
    VARIANTS=["earliest", "latest", "error"],
    SPARK=False,
    FIX={},                    # nothing to mitigate: the Mitigate cell runs no fix
)

# The panel, clicked in the CONTROL run: one group, back after 5 s, long before the retention.
PANEL = {"downtime_s": 5, "variants": ["earliest"], "spark": False}
PANEL_FAILS = False


def check(results: dict) -> None:
    before, down = results["param_messages_before"], results["param_messages_while_down"]
    # The seed's symptom: earliest re-reads everything it had committed, and writes it all again.
    assert results["earliest_reprocessed"] == before, results
    assert results["earliest_skipped"] == 0, results
    assert results["earliest_duplicates"] > 0, results
    # The question asks when each idle probe's offsets went (both ran): `idle-consumer`'s one retention after its last
    # commit, IDLE_S (as the question says) before the stop, so about 45 s after the stop; `idle-classic`'s one
    # retention after the stop, 60 s (their clocks are asserted below)
    quiet, gone = results["idle_consumer_idle_before_stop_s"], results["idle_consumer_expired_after_stop_s"]
    assert PARAMETERS["IDLE_S"] <= quiet <= PARAMETERS["IDLE_S"] + 3, quiet
    assert 0 <= gone - (results["retention_s"] - quiet) <= 3, (quiet, gone)
    prediction(results, PARAMETERS["PREDICTION"], "`idle-classic` about 60 s after the stop, `idle-consumer` about 45 s")
    # latest: no re-reads, but at least everything produced while it was down was skipped.
    assert results["latest_skipped"] >= down and results["latest_reprocessed"] == 0, results
    # The early group (downtime < retention) and the loud failure + operator reset: nothing repeated or lost.
    assert results["early_reprocessed"] == 0 and results["early_skipped"] == 0, results
    assert results["error_error"] and "offset" in results["error_error"], results   # seen, and about the offset
    assert results["error_reprocessed"] == 0 and results["error_skipped"] == 0, results
    # The id-table sink re-reads too, yet its output has no duplicate and loses nothing.
    assert results["id_table_reprocessed"] > 0, results
    assert results["id_table_duplicates"] == 0 and results["id_table_lost"] == 0, results
    # Spark keeps offsets in its checkpoint: resumes exactly; failOnDataLoss true fails, false skips.
    assert results["spark_checkpoint_reprocessed"] == 0 and results["spark_checkpoint_skipped"] == 0, results
    assert "Some data may have been lost" in results["spark_strict_error"], results
    assert results["spark_lenient_skipped"] > 0, results
    # The expiry clocks measured on the broker: classic from when the group emptied, KIP-848 from the last commit.
    assert results["idle_classic_clock"] == "group empty", results
    assert results["idle_consumer_clock"] == "last commit", results
    # The Mitigate step: the seed's two groups back within the retention: their offsets were there, nothing re-read
    # or skipped, and they read on from where they had stopped.
    fixed = results["mitigation"]
    assert fixed["fix"] == PARAMETERS["FIX"] and fixed["clean"] is True, fixed["verdict"]
    assert fixed["param_variants"] == ["earliest", "latest"] and fixed["downtime_s"] < fixed["retention_s"], fixed
    for v in ("earliest", "latest"):
        assert fixed[f"{v}_offsets_expired"] is False and fixed[f"{v}_committed_before_restart"] is True, (v, fixed)
        assert fixed[f"{v}_reprocessed"] == 0 and fixed[f"{v}_skipped"] == 0, (v, fixed)
        assert fixed[f"{v}_read_after_restart"] >= fixed["param_messages_while_down"], (v, fixed)
    # The skipped records counted from `latest`'s own history match the audit's.
    assert results["latest_skipped_in_history"] == results["latest_skipped"], results
    # The exercises ask for functions, judged on this run's `latest` group and on outages it did not have.
    assert exercises(results, [1, 2]) == {1: None, 2: None}
    assert results["failure_reproduced"] is True, results


def check_control(results: dict) -> None:
    assert results["failure_reproduced"] is False, results
    assert results["downtime_s"] < results["retention_s"], results
    assert "offsets were still there, nothing re-read" in results["verdict"], results
    prediction(results, None, "where it stopped")    # no idle probe, so the `earliest` question; no prediction given
    variants = results["param_variants"]
    assert "earliest" in variants, results
    for v in variants:
        # Nothing expired, nothing re-read or skipped, the loud failure never came ...
        assert results[f"{v}_offsets_expired"] is False, (v, results)
        assert results[f"{v}_reprocessed"] == 0 and results[f"{v}_skipped"] == 0, (v, results)
        assert results[f"{v}_error"] == "", (v, results)
        # ... because the offsets were still committed when the group came back, and it really did read on.
        assert results[f"{v}_committed_before_restart"] is True, (v, results)
        assert results[f"{v}_read_after_restart"] >= results["param_messages_while_down"], (v, results)
    assert results["mitigation"] is None   # no fix given: the Mitigate step did not run
    # Nothing skipped, by the audit and by `latest`'s own history; exercise 1's function is judged on this run's
    # `latest` group (back in time: 0) and on outages it did not have, exercise 2's on the clocks the mechanism gives
    assert results["latest_skipped"] == 0 and results["latest_skipped_in_history"] == 0, results
    assert exercises(results, [1, 2]) == {1: None, 2: None}
