"""Notebook 08 (diagnose your cluster): every set-up's risk found by the read-only diagnosis, then proven."""
from tests.expectations import exercises, prediction

# The four set-ups on a broker whose offsets expire after a minute (Kafka's minimum) and transactional ids after
# 30 s: both waits overlap, so the verification costs about a retention plus a sweep.
PARAMETERS = dict(
    SETUPS=["consumer_leaves", "producer_idles", "streams_producer_quota", "old_client"],
    RETENTION_MINUTES=1,
    EXPIRATION_MS=30000,
    MESSAGES=40,
    FIX={"setups": []},        # the Mitigate step: every risk mitigated, on the same broker and retentions
    PREDICTION=0,              # a wrong guess: the verification measures the re-reads
)

# The control: nothing risky (the group stays a member, the producer commits twice a second, no quota, a current
# client) and the production default retentions (7 days), the diagnosis only: it finds nothing. The same
# verification after the same wait, on the failure's short retentions, is the failure run's Mitigate step.
CONTROL = dict(
    SETUPS=[],
    RETENTION_MINUTES=10080,
    EXPIRATION_MS=604800000,
    MESSAGES=40,
    VERIFY=False,
    FIX={},
)

# The panel, clicked in the CONTROL run: the diagnosis only, of a healthy cluster.
PANEL = {"setups": [], "verify": False}
PANEL_FAILS = False


def check(results: dict) -> None:
    rules = results["findings_by_rule"]
    prediction(results, 0, results["observed_rereads"])
    assert results["observed_rereads"] > 0 and results["prediction_right"] is False, results
    # Each set-up's risk is found, by its own rule.
    for rule in ("offsets-expire", "transactional-id-expires", "quota-on-streams-eos-producer", "client-version-bug"):
        assert rules.get(rule, 0) >= 1, (rule, rules)
    assert results["client_version"] == results["param_old_client"], results["client_version"]
    assert results["param_setups"] == PARAMETERS["SETUPS"], results["param_setups"]
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
    assert answers[1] is None and answers[2] is None, answers   # both functions
    # The Mitigate step: every risk mitigated, on the same broker with the same short retentions. The diagnosis finds
    # nothing of its own; after the same wait nothing was re-read, and the producer committed again without error.
    fixed = results["mitigation"]
    assert fixed["fix"] == {"setups": []} and fixed["clean"] is True, fixed["verdict"]
    assert fixed["param_retention_minutes"] == 1 and fixed["param_expiration_ms"] == 30000, fixed
    assert fixed["param_setups"] == [], fixed["param_setups"]
    assert fixed["findings"] == 0 and fixed["findings_by_rule"] == {} and fixed["verified"] is True, fixed["doctor"]
    assert fixed["waited_s"] >= 60 and fixed["observed_offsets_expiry_s"] is None, fixed
    assert fixed["observed_txn_expiry_s"] is None and fixed["observed_rereads"] == 0, fixed
    assert fixed["read_after_restart"] > 0, fixed   # it read on from its committed offsets: the new records
    assert fixed["producer_error"] == "" and fixed["producer_committed_after"] is True, fixed
    assert all(fixed["confirmed"].values()) and fixed["failure_reproduced"] is False, fixed["verdict"]


def check_control(results: dict) -> None:
    # No finding at all: the run's own subjects, and nothing else on the fresh cluster.
    assert results["findings"] == 0 and results["findings_by_rule"] == {}, results["doctor"]
    assert results["findings_all"] == 0 and results["unreadable"] == {}, results["doctor"]
    assert results["failure_reproduced"] is False, results["verdict"]
    assert results["param_retention_minutes"] == 10080 and results["verified"] is False, results
    prediction(results, None, None)   # not verified: nothing measured to compare with
    assert "not verified" in results["verdict"], results["verdict"]
    assert results["mitigation"] is None, results["mitigation"]
    # both exercises are functions, judged on this run (its group kept its member and never restarted) and on cases
    # the checks describe
    answers = exercises(results, [1, 2])
    assert answers[1] is None and answers[2] is None, answers
