"""Lesson 05a, a crash at every point ("Some kafka retention lessons (we learned the hard way)")."""
from lab.scenarios.nb05_exactly_once_under_crashes.answers import DUPLICATE_ANSWERS, IN_FLIGHT
from tests.expectations import exercises, on_transaction_versions, prediction

# The four crash points under both guarantees (the question asks after which points at-least-once wrote
# duplicates); the crash comes after the first commit (80 records at 50/s, commits every second), with work in
# flight since that commit but at after_commit. Its control is the Mitigate step: exactly-once again at the point
# the post reasons about.
PARAMETERS = {
    "CRASH_POINTS": ["before_read", "during_processing", "after_send_before_commit", "after_commit"],
    "GUARANTEES": ["exactly_once_v2", "at_least_once"],
    "RECORDS": 150,
    "CRASH_AT": 80,
    "COMMIT_INTERVAL_MS": 1000,
    "FIX": {"guarantees": ["exactly_once_v2"], "crash_points": ["after_send_before_commit"]},
    "PREDICTION": DUPLICATE_ANSWERS[1],   # wrong: before_read and during_processing redo the work in flight too
}

# The panel: one exactly-once run without a crash.
PANEL = {"crash_points": ["none"], "guarantees": ["exactly_once_v2"]}
PANEL_FAILS = False


def check(results):
    assert results["failure_reproduced"] is True, results["verdict"]
    crashes = results["crashes"]
    assert len(crashes) == 8, list(crashes)
    # at-least-once wrote duplicates after every crash point but after_commit
    prediction(results, PARAMETERS["PREDICTION"], DUPLICATE_ANSWERS[3])
    for label, run in crashes.items():
        assert run["crashed"], (label, "the app never reached its crash point: the run proves nothing", run)
        assert run["audit"] is not None, label
        if run["crash_point"] not in IN_FLIGHT:
            # after_commit: the halt comes at the first record after a commit, so (at most) next to nothing is in
            # flight: nothing twice, nothing lost, under either guarantee
            assert run["duplicates"] == 0 and run["lost"] == 0 and run["outputs"] == run["produced"], (label, run)
            if run["guarantee"] == "exactly_once_v2":
                assert run["wrong_values"] == 0 and run["overcount"] == 0 and run["undercount"] == 0, (label, run)
            else:
                assert run["aborted_visible"] == 0 and run["markers"] == 0, (label, run)
            a = run["audit"]["counts"]
            assert a["duplicate"] == 0 and a["lost"] == 0, (label, a)
        elif run["guarantee"] == "exactly_once_v2":
            # The source's claim, measured: no duplicate, nothing lost, exact counts, after a kill -9 mid-transaction.
            assert run["duplicates"] == 0 and run["lost"] == 0, (label, run)
            assert run["wrong_values"] == 0 and run["overcount"] == 0 and run["undercount"] == 0, (label, run)
            assert run["outputs"] == run["produced"], (label, run)
            # ... because the killed transaction was aborted: a read_uncommitted reader sees its records,
            assert run["aborted_visible"] > 0, (label, run)
            # and the store, written before the crash, was wiped and rebuilt from the (committed) changelog.
            assert run["state_wiped"], (label, run)
            # The broker's own record of it, read from the output topic's log segments: the killed producer
            # committed before the halt, and after it the coordinator wrote ABORT markers for that producer id,
            # closing exactly the records read_uncommitted saw as aborted.
            assert run["producer_ids"] and run["commits_before"] >= 1, (label, run)
            assert run["aborts_after"] >= 1 and run["first_abort_after_s"] >= 0, (label, run)
            assert run["aborted_by_markers"] == run["aborted_visible"], (label, run)
            a = run["audit"]["counts"]
            assert a["duplicate"] == 0 and a["lost"] == 0 and a["stale_value"] == 0 and a["aborted_read"] == 0, (label, a)
        else:
            # At-least-once redoes what was processed since the last commit: duplicates, and over-counts.
            assert run["duplicates"] > 0 and run["lost"] == 0, (label, run)
            assert run["overcount"] > 0, (label, run)
            assert run["aborted_visible"] == 0, (label, run)
            # no transactions, so no transaction marker at all on the output topic
            assert run["markers"] == 0 and run["abort_markers"] == 0 and run["commit_markers"] == 0, (label, run)
            a = run["audit"]["counts"]
            assert a["duplicate"] == run["duplicates"] and a["stale_value"] > 0, (label, a, run)
    assert results["eos_duplicates"] == 0 and results["eos_lost"] == 0 and results["eos_count_errors"] == 0
    assert results["eos_aborted_visible"] > 0, results["eos_aborted_visible"]
    assert results["eos_aborts_after"] >= 3 and results["alos_markers"] == 0, results
    # Kafka 4's transaction protocol (KIP-890, transaction version 2), which the Explain cell's line reports: the
    # broker finalized level 2, and every commit of every exactly-once run bumped the epoch (Kafka Streams 4.3 ran
    # on it); exactly-once still left each input once (asserted above). At-least-once has no transaction.
    on_transaction_versions(results, eos_runs(results))

    # Exactly-once again after the send, before the commit: nothing twice, nothing lost, counts right.
    fixed = results["mitigation"]
    assert fixed["clean"] is True and len(fixed["crashes"]) == 1, fixed["verdict"]
    for label, run in fixed["crashes"].items():
        assert run["guarantee"] == "exactly_once_v2" and run["crashed"], (label, run)
        assert run["crash_point"] == "after_send_before_commit", (label, run)
        assert run["duplicates"] == 0 and run["lost"] == 0 and run["outputs"] == run["produced"], (label, run)
        assert run["wrong_values"] == 0 and run["overcount"] == 0 and run["undercount"] == 0, (label, run)
    on_transaction_versions(fixed, eos_runs(fixed))

    # The exercise: how many inputs at-least-once writes twice at a rate and a time since the last commit this run
    # did not use (200 records/s, 1.2 s), judged by the rule; the look-up of this run's duplicates refused.
    answers = exercises(results, [1])
    assert answers[1] == 240, answers
    assert sum(case.startswith("printed") for case in results["exercises"]["1"]) >= 3, results["exercises"]["1"]
    assert "what this run wrote twice" in results["exercises"]["1"]["wrong"], results["exercises"]["1"]


def eos_runs(results) -> set:
    """The exactly-once runs (at least one): each commits in transactions, at-least-once has none."""
    eos = {label for label, run in results["crashes"].items() if run["guarantee"] == "exactly_once_v2"}
    assert eos, results["crashes"]
    return eos
