"""Lesson 03b, load against quota, client by client ("Quotas and Kafka Streams EOS", KAFKA-17455)."""
from tests.expectations import exercises, prediction

# One point of 30 s, a client with the fix at 1.3x its quota; its control is the Mitigate step, the same point with
# headroom (0.7x its quota). No prediction given. The question's choices name the clients: "none of them" and
# "Kafka Streams 3.9.1" here.
PARAMETERS = {
    "SWEEP_RATIOS": [1.3],
    "SWEEP_VERSIONS": ["3.9.1"],
    "SWEEP_SECONDS": 30,
    "SWEEP_PARALLEL": 1,
    "FIX": {"sweep_ratios": [0.7]},
    "PREDICTION": None,
}


def check(r):
    assert len(r["sweep"]) == len(PARAMETERS["SWEEP_RATIOS"]) * len(PARAMETERS["SWEEP_VERSIONS"])
    # The answer is what its one point measured: 3.9.1 carries the fix, so fenced only by an oversized transaction if
    # at all (not asserted: the lab's measurement, which a loaded machine moves).
    fenced = [c["client_version"] for c in r["sweep"] if c["crashes"]]
    prediction(r, None, "Kafka Streams 3.9.1" if fenced else "none of them")
    assert r["fix_in_bytecode"]["3.9.1"] is True, r["fix_in_bytecode"]
    # The Mitigate step: the same client with headroom under its quota is not fenced.
    sweep = r["mitigation"]
    assert sweep["fix"] == {"sweep_ratios": [0.7]} and sweep["clean"] is True, sweep["verdict"]
    assert [(c["client_version"], c["ratio"]) for c in sweep["sweep"]] == [("3.9.1", 0.7)], sweep["sweep"]
    assert all(c["crashes"] == 0 for c in sweep["sweep"]) and sweep["failure_reproduced"] is False, sweep["sweep"]
    # The exercise asks for a function, the smallest quota that lets one transaction through, judged on this run's
    # fenced transactions and on record sizes and timeouts the run did not use. The tempting wrong answer treats a
    # client without the fix like one with it; what the notebook shows above it (the table's quotas, the Mitigate
    # step's, functions returning them or the run's transaction budget) is refused.
    answers = exercises(r, [1])
    assert answers[1] is None, answers
    tried = r["exercises"]["1"]
    assert "without the fix" in tried["wrong"], tried
    copies = {case: said for case, said in tried.items() if case.startswith("printed")}
    assert len(copies) == len(PARAMETERS["SWEEP_RATIOS"]) * len(PARAMETERS["SWEEP_VERSIONS"]) + 4, copies
    assert "correct" not in copies.values(), copies
