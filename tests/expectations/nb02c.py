"""Lesson 02c, a producer whose records retention deleted (UnknownProducerIdException; "Some kafka retention lessons
(we learned the hard way)")."""
import re

from tests.expectations import exercises, prediction

# Broker 2.0.1 (with the ZooKeeper it pins tried first), then the KRaft broker. Its control is the Mitigate step
# (the test's own fix, written into the Mitigate cell): broker 2.4.1 keeps the producer's state.
PARAMETERS = {"ZOOKEEPER_BROKERS": ["2.0.1"], "FIX": {"zookeeper_brokers": ["2.4.1"]}, "PREDICTION": None}


def check(r):
    assert r["failure_reproduced"] is True, r["verdict"]
    # the source's UnknownProducerIdException message on 2.0.1 only
    c = r["part_c"]
    assert c["2.0.1"]["reproduced"], c["2.0.1"]
    prediction(r, None, "only 2.0.1")
    assert re.match(r"Found no record of producerId=\d+ on the broker\. It is possible that the last message "
                    r"with the producerId=\d+ has been removed due to hitting the retention limit\.",
                    c["2.0.1"]["broker_message"]), c["2.0.1"]
    modern = [v for v in c if not v.startswith("2.")]
    assert modern and all(not c[v]["reproduced"] and c[v]["committed_after"] for v in modern), c
    assert all(x["log_start_offset"] and x["log_start_offset"] > 0 for x in c.values()), c  # retention did delete
    pinned = r["pinned_zookeeper"]
    assert pinned and pinned["started"] is False and any("UnresolvedAddress" in l for l in pinned["lines"]), pinned
    # The Mitigate step: broker 2.4.1 keeps the producer's state after retention deleted its records.
    old = r["mitigation"]
    assert old["fix"] == {"zookeeper_brokers": ["2.4.1"]} and old["clean"] is True, old["verdict"]
    assert old["part_a"] == {} and old["pinned_zookeeper"] is None, old
    c241 = old["part_c"]["2.4.1"]
    assert not c241["reproduced"] and c241["committed_after"] and c241["log_start_offset"] > 0, c241
    answers = exercises(r, [1])
    assert answers[1] is None, answers
