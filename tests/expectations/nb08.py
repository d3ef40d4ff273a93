"""Notebook 08 (diagnose your cluster): every risk found by the read-only diagnosis, then proven."""
from tests.expectations import exercises, prediction

# The four risks on a broker whose offsets expire after a minute (Kafka's minimum) and transactional ids after
# 30 s: both waits overlap, so the verification costs about a retention plus a sweep.
PARAMETERS = dict(
    RISKS=["expiring_offsets", "idle_transactional_id", "quota_on_streams_producer", "old_client"],
    RETENTION_MINUTES=1,
    EXPIRATION_MS=30000,
    MESSAGES=40,
    PREDICTION=0,              # a wrong guess: the verification measures the re-reads
    INTERACTIVE=False,
)

# The control: nothing risky (the group stays a member, the producer commits every second, no quota, a current
# client) and the production default retentions (7 days); the same verification waits as long and must see nothing.
CONTROL = dict(
    RISKS=[],
    RETENTION_MINUTES=10080,
    EXPIRATION_MS=604800000,
    MESSAGES=40,
    INTERACTIVE=False,
)

# The panel, clicked in the CONTROL run: the diagnosis only, of a healthy cluster.
PANEL = {"risks": [], "verify": False}
PANEL_FAILS = False


def check(results: dict) -> None:
    rules = results["findings_by_rule"]
    prediction(results, 0, results["observed_rereads"])
    assert results["observed_rereads"] > 0 and results["prediction_right"] is False, results
    # Each risk built is found, by its own rule.
    for rule in ("offsets-expire", "transactional-id-expires", "quota-on-streams-eos-producer", "client-version-bug"):
        assert rules.get(rule, 0) >= 1, (rule, rules)
    assert results["client_version"] == results["param_old_client"], results["client_version"]
    assert results["unreadable"] == {}, results["unreadable"]
    # The predictions, proven: the group re-read what the diagnosis said it would, after its offsets vanished ...
    assert results["verified"] is True, results
    assert results["observed_offsets_expiry_s"] is not None, results
    assert results["observed_rereads"] == results["param_messages"], results
    assert results["predicted_rereads"] == results["observed_rereads"], results
    assert results["read_after_restart"] > results["observed_rereads"], results   # and the new records too
    # ... and the idle producer's next transaction got the predicted error, after a tombstone expired its id.
    assert results["observed_txn_expiry_s"] is not None, results
    assert results["producer_error"] == results["predicted_error"] == "InvalidPidMappingException", results
    # A prediction never comes after what it predicts (the expiry happens at the first sweep after it).
    assert results["predicted_offsets_expiry_s"] <= results["observed_offsets_expiry_s"], results
    assert results["predicted_txn_expiry_s"] <= results["observed_txn_expiry_s"], results
    assert all(results["confirmed"].values()), results["confirmed"]
    assert results["failure_reproduced"] is True, results["verdict"]
    assert "every prediction confirmed" in results["verdict"], results["verdict"]
    answers = exercises(results, [1, 2])
    assert answers[1] == sorted(rules), (answers, results)
    assert answers[2] == results["observed_rereads"], (answers, results)


def check_control(results: dict) -> None:
    # No finding at all: the run's own subjects, and nothing else on the fresh cluster.
    assert results["findings"] == 0 and results["findings_by_rule"] == {}, results["doctor"]
    assert results["findings_all"] == 0 and results["unreadable"] == {}, results["doctor"]
    assert results["failure_reproduced"] is False, results["verdict"]
    prediction(results, None, 0)
    assert results["verified"] is True, results
    # The same wait (at least Kafka's minimum retention), then nothing re-read and no error.
    assert results["waited_s"] >= 60, results["waited_s"]
    assert results["observed_offsets_expiry_s"] is None and results["observed_txn_expiry_s"] is None, results
    assert results["observed_rereads"] == 0 and results["predicted_rereads"] == 0, results
    assert results["read_after_restart"] > 0, results   # it did read on: the new records, from its committed offsets
    assert results["producer_error"] == "" and results["producer_committed_after"] is True, results
    assert all(results["confirmed"].values()), results["confirmed"]
    answers = exercises(results, [1, 2])
    assert answers[1] == [], (answers, results)
    assert answers[2] == 0, (answers, results)
