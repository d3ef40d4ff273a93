"""Lesson 02a, an idle transactional id (INVALID_PRODUCER_ID_MAPPING; "Some kafka retention lessons (we learned the
hard way)")."""
from tests.expectations import exercises, prediction

# Small idle times: ids expire after 5 s, the clients idle 8 s. The Mitigate step: an expiration of twice the idle
# time plus 10 s, on a broker of its own.
PARAMETERS = {"EXPIRATION_MS": 5000, "CLEANUP_INTERVAL_MS": 1000, "IDLE_S": 8, "OBSERVE_S": 40,
              "FIX": {"expiration_ms": 26000}, "PREDICTION": "it commits normally"}   # wrong

# The control: the same clients idle 3 s, well short of the 10 s expiration; no fix to run.
CONTROL = {"EXPIRATION_MS": 10000, "CLEANUP_INTERVAL_MS": 1000, "IDLE_S": 3, "OBSERVE_S": 30, "FIX": {},
           "PREDICTION": "it commits normally"}

# The exercise 2's experiment runs the heartbeat client alone on the run's own expiration: tried once, in the
# failure run (the CONTROL's expiration differs, not the mechanism).
TRIED_IN_FAILURE_ONLY = (2,)

SOURCE_MESSAGE = "The producer attempted to use a producer id which is not currently assigned to its transactional id"

# The panel, clicked in the CONTROL run: one Python client idle 3 s < the 10 s expiration.
PANEL = {"idle_s": 3, "python_modes": ["crash"], "java_clients": []}
PANEL_FAILS = False


def check(r):
    assert r["failure_reproduced"] is True, r["verdict"]
    a = r["part_a"]
    # librdkafka: error 49 on every Python client, abortable, reported by send_offsets_to_transaction
    for mode in ("crash", "abort", "recreate", "naive"):
        c = a[f"python-{mode}"]
        assert c["expired"], (mode, c)
        assert c["error"] == "INVALID_PRODUCER_ID_MAPPING" and c["code"] == 49, (mode, c)
        assert c["handling"] == "abortable", (mode, c)
    # the source's app: crashed, restarted, read the input twice, committed it once
    crash = a["python-crash"]
    assert crash["restarts"] == 1 and crash["recovered"] and crash["reads_per_input"] >= 2, crash
    prediction(r, PARAMETERS["PREDICTION"], "it fails; after its restart the input is processed again")
    assert a["python-recreate"]["recovered"], a["python-recreate"]
    assert not a["python-naive"]["recovered"], a["python-naive"]
    audit = r["part_a_audit"]
    for ok in ("python-crash", "python-recreate"):
        assert audit[ok]["duplicate"] == 0 and audit[ok]["lost"] == 0, (ok, audit[ok])
    assert audit["python-naive"]["lost"] >= 1 and audit["python-naive"]["duplicate"] == 0, audit["python-naive"]
    # the Java producer 3.9 abortable, 4.x fatal
    b = r["part_b"]
    assert b["java-3.9.1"]["error"] == "InvalidPidMappingException" and b["java-3.9.1"]["handling"] == "abortable", b
    assert b["java-4.3.1"]["error"] == "InvalidPidMappingException" and b["java-4.3.1"]["handling"] == "fatal", b
    assert all(b[j]["recovered"] for j in ("java-3.9.1", "java-4.3.1")), b
    assert SOURCE_MESSAGE in b["java-3.9.1"]["message"] and r["source_message_seen"], b["java-3.9.1"]
    # by-the-book aborts when only AddOffsetsToTxn reached the coordinator: no epoch bump, stuck
    stuck = r["stuck_abort"]
    assert stuck["error"] == "INVALID_PRODUCER_ID_MAPPING" and stuck["errors"] >= 5 and not stuck["recovered"], stuck
    # The fixes beside the failure: the heartbeat prevents the error; recreate recovers
    rows = {m["client"]: m for m in r["mitigations"]}
    assert rows["python-heartbeat"]["errors"] == 0 and not rows["python-heartbeat"]["expired"], rows
    assert rows["python-heartbeat"]["duplicate"] == 0 and rows["python-heartbeat"]["lost"] == 0, rows
    assert rows["python-recreate"]["recovered"] and rows["python-recreate"]["lost"] == 0, rows

    # The Mitigate step: the same clients with an expiration longer than the idle time, on a broker of its own:
    # no id expired, no client met an error, every one committed its input, and the audit found the data whole.
    fixed = r["mitigation"]
    assert fixed["fix"] == {"expiration_ms": 26000} and fixed["clean"] is True, fixed
    assert fixed["param_expiration_ms"] == 26000 and fixed["param_idle_s"] == 8, fixed
    assert set(fixed["part_a"]) == set(a), (sorted(fixed["part_a"]), sorted(a))
    for name, m in fixed["part_a"].items():
        assert m["errors"] == 0 and not m["expired"] and m["recovered"], (name, m)
    for name, counts in fixed["part_a_audit"].items():
        assert counts == {"duplicate": 0, "lost": 0, "aborted_read": 0}, (name, counts)
    # 1 and 3 ask for a function. 2 is an experiment: the heartbeat client alone, its first heartbeat skipped; a
    # third of the 5 s expiration kept the id, the tempting 4 s (just short of expiration plus sweep) lost it.
    answers = exercises(r, [1, 2, 3])
    assert answers[2] == 1666, answers
    assert "a sweep removed it" in r["exercises"]["2"]["wrong"], r["exercises"]["2"]


def check_control(r):
    assert r["failure_reproduced"] is False, r["verdict"]
    prediction(r, "it commits normally", "it commits normally")
    assert r["mitigation"] is None, r
    assert r["param_idle_s"] < r["param_expiration_ms"] / 1000, r["verdict"]
    a = r["part_a"]
    # the run really happened: every client of the failing run, each with its post-idle input
    assert {f"python-{m}" for m in ("crash", "abort", "recreate", "naive")} | {"java-3.9.1", "java-4.3.1"} <= set(a), a
    for name, c in a.items():
        assert c["error"] is None and c["code"] != 49 and c["errors"] == 0, (name, c)   # no INVALID_PRODUCER_ID_MAPPING
        assert not c["expired"], (name, c)
        assert c["recovered"], (name, c)   # the post-idle commit succeeded
        assert c["restarts"] == 0, (name, c)
        if name.startswith("python"):
            assert c["reads_per_input"] == 1, (name, c)   # read once, committed once
    assert r["part_a_audit"] and set(r["part_a_audit"]) == {n for n in a if n.startswith("python")}, r["part_a_audit"]
    for name, counts in r["part_a_audit"].items():
        assert counts == {"duplicate": 0, "lost": 0, "aborted_read": 0}, (name, counts)
    assert not r["source_message_seen"] and r["idle_when_expired_s"] == [], r
    # no client needed a new producer: the right answer to 3 is the empty set
    exercises(r, [1, 2, 3], skipped=TRIED_IN_FAILURE_ONLY)
