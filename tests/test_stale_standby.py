"""The pure parts of notebook 04's scenario: no broker, no JVM."""
import re

import pandas as pd
import pytest

from lab.errors import LabError
from lab.record.history import History
from lab.toolbox import checks
from lab.scenarios.nb04_stale_standby_cache import exercises as ex, stale_standby as s, stale_standby_report as report
from tests.expectations import try_exercises

T0 = 1_000.0


def line(ts, instance, active, standby, state="RUNNING"):
    """One worker evidence line, as StaleStandbyWorker logs it through log4j."""
    lst = lambda tasks: "[" + ",".join(f'"{t}"' for t in tasks) + "]"  # noqa: E731
    return (f'[2026-11-23 12:00:00,000] INFO [main] LAB {{"kind":"assignment","ts":{ts:.3f},"instance":{instance},'
            f'"state":"{state}","active":{lst(active)},"standby":{lst(standby)}}} (StaleStandbyWorker)')


def test_program_parsing():
    assert s.parse_program("1 2 3") == [1, 2, 3]
    assert s.parse_program("1,2, 2") == [1, 2, 2]
    assert s.parse_program([3, 1]) == [3, 1]
    for bad in ("", "1 x", "0 1", f"1 {s.MAX_INSTANCES + 1}"):
        with pytest.raises(LabError, match="PROGRAM"):
            s.parse_program(bad)


def test_the_question_says_what_the_program_does_in_words():
    """The question names each step of the program from every instance stopped, and its standbys in words."""
    assert s.describe_program("1 2 3") == "instance 1 starts, then instance 2 starts, then instance 3 starts"
    assert s.describe_program("1 2 1") == "instance 1 starts, then instance 2 starts, then instance 1 stops"
    text, choices = s.question(s.lesson.spec.defaults)[:2]
    assert "1 standby replica per task" in text and "(s)" not in text and "instance 3 starts" in text, text
    assert len(set(choices)) == len(choices) == 4
    none = s.question({**s.lesson.spec.defaults, "standby_replicas": 0, "caching": False})[0]
    two = s.question({**s.lesson.spec.defaults, "standby_replicas": 2})[0]
    assert "no standby replica per task, a store without a cache" in none and "2 standby replicas" in two


def test_is_affected():
    assert report.is_affected("2.6.0") and report.is_affected("3.3.1") and report.is_affected("3.4.0")
    assert not report.is_affected("2.5.1") and not report.is_affected("3.4.1") and not report.is_affected("3.5.2")
    assert not report.is_affected("4.3.1")


def test_spec_refuses_what_cannot_run_and_accepts_the_control(monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)   # no jars, no compiler here
    assert s.lesson.spec.validate(streams_version="3.5.2", compare=False)["streams_version"] == "3.5.2"
    assert s.lesson.spec.validate(program="1 2 2", standby_replicas=0, caching=False)["program"] == "1 2 2"
    refusals = [(dict(program="1 1"), "every instance stopped"), (dict(step_seconds=1), "STEP_SECONDS"),
                (dict(streams_version="2.8.2"), "STREAMS_VERSION.*older"),
                (dict(compare_versions=["2.8.2"]), "COMPARE_VERSIONS"),
                (dict(partitions=0), "PARTITIONS"), (dict(standby=1), "did you mean")]
    for params, message in refusals:
        with pytest.raises(LabError, match=message):
            s.lesson.spec.validate(**params)


def test_an_unknown_version_is_refused_when_maven_has_none(monkeypatch):
    def missing(version):
        raise LabError(f"Maven Central has no artifact org.apache.kafka:kafka-streams:jar:{version}.")
    monkeypatch.setattr(checks, "build_streams_program", lambda version, *a, **k: missing(version))
    with pytest.raises(LabError, match=r"STREAMS_VERSION='3.3.99'.*no artifact"):
        s.lesson.spec.validate(streams_version="3.3.99")


def test_variants_follow_the_parameters():
    p = dict(streams_version="3.3.1", compare_versions=["3.5.2"], caching=True, compare=True, streams_protocol=[])
    main, other = ("main", "3.3.1", True, "classic"), ("version 3.5.2", "3.5.2", True, "classic")
    assert s.variants(p) == [main, other, ("caching off", "3.3.1", False, "classic")]
    assert s.variants({**p, "compare": False}) == [main, other]
    assert s.variants({**p, "compare_versions": ["3.3.1"], "compare": False}) == [main]
    assert s.variants({**p, "caching": False}) == [("main", "3.3.1", False, "classic"),
                                                   ("version 3.5.2", "3.5.2", False, "classic")]
    # Kafka 4's streams group protocol: after the others, the cache on whatever the run's (the setting asked about),
    # and never among the versions the question asks about
    kafka4 = {**p, "compare": False, "caching": False, "streams_protocol": ["4.3.1"]}
    assert s.variants(kafka4)[-1] == ("version 4.3.1, streams protocol", "4.3.1", True, "streams")
    assert s.question_versions({**kafka4, "caching": True}) == ["3.3.1", "3.5.2"]


def test_the_streams_protocol_needs_a_release_that_has_it_and_standbys_the_broker_allows():
    with pytest.raises(LabError, match=r"STREAMS_PROTOCOL: Kafka Streams 3.5.2 has no production-ready"):
        s.lesson.spec.validate(streams_protocol=["3.5.2"])
    with pytest.raises(LabError, match=r"STANDBY_REPLICAS=3 with STREAMS_PROTOCOL.*group.streams.max.standby"):
        s.lesson.spec.validate(streams_protocol=["4.3.1"], standby_replicas=3)
    assert s.lesson.spec.validate(standby_replicas=3)["standby_replicas"] == 3   # the classic protocol: the app's own


def test_the_streams_protocol_run_is_not_among_the_answers():
    """Its row sits beside the others in the Mitigate step's table; the question asks about the classic runs only."""
    record = {"streams_version": "3.3.1", "main": {"caching": True}, "main_counts": {"stale_reads": 0},
              "compared": {"version 4.3.1, streams protocol": {"version": "4.3.1", "caching": True,
                                                               "protocol": "streams", "stale_reads": 2}}}
    assert report.measured_answer(record, {}) == "none of them"


def test_the_question_asks_which_versions_serve_a_stale_value_and_the_run_answers_it():
    """An old and a current release play the program by default; the question asks which of them serve a stale value
    (no yes/no bet), its choices what the runs can produce; the answer is read from each version's counts."""
    defaults = s.lesson.spec.defaults
    assert defaults["streams_version"] == "3.3.1" and defaults["compare_versions"] == ["4.3.1"]
    text, choices = s.question(defaults)
    assert "on Kafka Streams 3.3.1, then on 4.3.1" in text and "Which of them serve a stale value?" in text, text
    assert choices == ("none of them", "only Kafka Streams 3.3.1", "only Kafka Streams 4.3.1", "both")
    assert not re.search(r"\bfix|bug|broken|KAFKA-", text)
    record = lambda main, other=None, caching=True: {   # noqa: E731
        "streams_version": "3.3.1", "main": {"caching": caching}, "main_counts": {"stale_reads": main},
        "compared": {} if other is None else {"version 4.3.1": {"version": "4.3.1", "caching": caching,
                                                                 "stale_reads": other},
                                              "caching off": {"version": "3.3.1", "caching": False,
                                                              "stale_reads": 0}}}
    assert report.measured_answer(record(3, 0), defaults) == choices[1]
    assert report.measured_answer(record(0, 0), defaults) == choices[0]
    assert report.measured_answer(record(2, 1), defaults) == choices[3]
    assert report.measured_answer(record(0, 4), defaults) == choices[2]
    # one version alone (the Mitigate step, or COMPARE_VERSIONS empty): asked about it alone
    alone = {**defaults, "compare_versions": []}
    assert s.question(alone)[1] == ("none of them", "Kafka Streams 3.3.1")
    assert report.measured_answer(record(0), alone) == "none of them"
    assert report.measured_answer(record(5), alone) == "Kafka Streams 3.3.1"
    assert s.question({**defaults, "streams_version": "3.5.2"})[1] == ("none of them", "both")


def test_assignments_and_a_round_trip():
    logs = {1: "\n".join([line(T0 + 1, 1, ["0_0", "0_1"], []), line(T0 + 10, 1, ["0_0"], ["0_1"]),
                          line(T0 + 20, 1, ["0_0", "0_1"], [])]),
            2: "\n".join([line(T0 + 10.2, 2, ["0_1"], []), "noise LAB {cut", line(T0 + 20.1, 2, [], ["0_1"])])}
    toggles = [{"ts": T0, "instance": 1, "action": "start", "step": 0},
               {"ts": T0 + 9, "instance": 2, "action": "start", "step": 1}]
    a = report.parse_assignments(logs, toggles)
    mine = a[(a.instance == 1) & (a.task == "0_1")]
    assert list(zip(mine.was, mine.role)) == [("none", "active"), ("active", "standby"), ("standby", "active")]
    trips = report.round_trips(a)
    assert trips[["instance", "task", "left_ts", "back_ts"]].values.tolist() == [[1, "0_1", T0 + 10, T0 + 20]]


def test_a_stop_in_between_is_no_round_trip():
    logs = {1: "\n".join([line(T0 + 1, 1, ["0_1"], []), line(T0 + 5, 1, [], ["0_1"]),
                          line(T0 + 20, 1, ["0_1"], [])])}
    toggles = [{"ts": T0, "instance": 1, "action": "start", "step": 0},
               {"ts": T0 + 8, "done_ts": T0 + 9, "instance": 1, "action": "stop", "step": 1},
               {"ts": T0 + 15, "instance": 1, "action": "start", "step": 2}]
    assert report.round_trips(report.parse_assignments(logs, toggles)).empty


def test_movements_keep_the_return_to_active_logged_just_after_the_read():
    """The 3.2.3 run: back to active logged at 22.9 s, the stale read at 22.82 s."""
    a = pd.DataFrame([(T0 + 1, 1, "0_3", "active", "none"), (T0 + 10, 1, "0_3", "standby", "active"),
                      (T0 + 22.9, 1, "0_3", "active", "standby"), (T0 + 40, 1, "0_3", "standby", "active")],
                     columns=["ts", "instance", "task", "role", "was"])
    moved = report.movements(a, "0_3", T0 + 22.82)
    assert list(zip(moved.was, moved.role)) == [("none", "active"), ("active", "standby"), ("standby", "active")]
    assert len(report.movements(a, "0_3", T0 + 30)) == 3      # nothing active within the window after: up to the read


def test_outputs_find_a_stale_read_and_its_wrong_values():
    produced = pd.DataFrame({"id": ["a", "b", "c", "d"], "true_value": [1, 2, 3, 4], "seq": [1, 2, 3, 4]})
    rec = lambda i, value, prev, inst, at, off: dict(id=i, key="k0", value=value, prev=prev, instance=str(inst),  # noqa: E731
                                                     task="0_0", at=at, partition=0, offset=off)
    records = [rec("a", 1, None, 1, 1_001_000, 0), rec("b", 2, 1, 1, 1_002_000, 1), rec("c", 3, 2, 2, 1_003_000, 2),
               rec("d", 3, 2, 1, 1_004_000, 3)]   # instance 1 is back and reads its own old 2, not 3
    out, truth = report.outputs(records, produced, T0)
    assert out["stale_read"].tolist() == [False, False, False, True]
    assert out["wrong_value"].sum() == 1 and out["backwards"].sum() == 0 and len(truth) == 4
    assert out["t_s"].tolist() == [1.0, 2.0, 3.0, 4.0]


def analysed(tmp_path, stale: bool = True, version: str = "3.3.1"):
    """Instance 1 has task 0_0, gives it to instance 2 (keeps a standby) and gets it back; with `stale`, it then
    reads its own old value."""
    class Worker:
        def __init__(self, i, lines):
            self.log_path = tmp_path / f"w{i}.log"
            self.log_path.write_text("\n".join(lines))
    workers = {1: Worker(1, [line(T0 + 1, 1, ["0_0"], []), line(T0 + 10, 1, [], ["0_0"]),
                             line(T0 + 20.1, 1, ["0_0"], [])]),
               2: Worker(2, [line(T0 + 10.2, 2, ["0_0"], []), line(T0 + 19.9, 2, [], ["0_0"])])}
    toggles = [{"ts": T0, "instance": 1, "action": "start", "step": 0},
               {"ts": T0 + 9, "instance": 2, "action": "start", "step": 1}]
    produced = pd.DataFrame({"id": list("abcd"), "true_value": [1, 2, 3, 4], "seq": [1, 2, 3, 4]})
    rec = lambda i, value, prev, inst, at, off: dict(id=i, key="k0", value=value, prev=prev, instance=str(inst),  # noqa: E731
                                                     task="0_0", at=at * 1000, partition=0, offset=off)
    records = [rec("a", 1, None, 1, T0 + 2, 0), rec("b", 2, 1, 1, T0 + 5, 1), rec("c", 3, 2, 2, T0 + 15, 2),
               rec("d", 3, 2, 1, T0 + 20.05, 3) if stale   # read before its return is logged (the worker polls)
               else rec("d", 4, 3, 1, T0 + 20.05, 3)]
    history = History(tmp_path / "history", "main")   # no send failed
    return report.analyse("main", version, True, "classic", T0, history, "out", workers, toggles, produced, records,
                          {})


def test_analyse_a_round_trip_then_a_stale_read(tmp_path):
    v = analysed(tmp_path)
    assert v.counts["stale_reads"] == 1 and v.counts["round_trips"] == 1 and v.counts["missing"] == 0
    f = v.first_stale
    assert (f["instance"], f["task"], f["found"], f["expected"]) == (1, "0_0", 2, 3)
    assert f["last_value_this_instance_wrote"] == 2 and f["after_round_trip"]
    assert v.movements[v.movements.instance == 1].role.tolist() == ["active", "standby", "active"]
    assert "the cache outlived the recycle" in v.why()
    assert {e.tone for e in v.timeline.events} >= {"info", "standby", "failure", "fault", "wait"}


def test_why_names_the_branch_of_a_clean_run():
    counts = dict(stale_reads=0, round_trips=2)
    clean = lambda version, caching, trips=2: report.Variant("x", version, caching, None, "", None, None,  # noqa: E731
                                                         {**counts, "round_trips": trips}, None, None, {}, {},
                                                         None).why()
    assert "clears the caches" in clean("3.5.2", True)
    assert "caching off" in clean("3.3.1", False)
    assert "proves nothing" in clean("3.3.1", True, trips=0)
    assert "yet no read went stale" in clean("3.3.1", True)


@pytest.mark.parametrize("stale", [True, False])
def test_the_exercises_take_the_solution_and_refuse_the_tempting_wrong_answer(tmp_path, stale, monkeypatch):
    monkeypatch.setattr(checks, "build_streams_program", lambda *a, **k: None)   # no jars, no compiler here
    v = analysed(tmp_path, stale=stale, version="3.3.1" if stale else "3.5.2")
    outcome = report.StaleStandbyResult("store_reads", {"program": "1 2"}, "x", v.timeline, variants={"main": v})
    result = s.lesson.result(outcome, program="1 2")
    assert result.failed is stale and v.counts["round_trips"] == 1
    tried = try_exercises(result)
    for number in (1, 2):   # both judged on a clean run too: exercise 2's case is not this run's
        t = tried[number]
        assert t["none"] == "not answered" and t["right"] == "correct", t
        assert t["wrong"].startswith("Not quite:"), t
        assert all(said.startswith("Not quite:") for case, said in t.items() if case.startswith("trivial")), t
        copied = [said for case, said in t.items() if case.startswith("printed")]   # shown above it, copied
        assert copied and all(said.startswith("Not quite:") for said in copied), t
    assert all(e.closer for e in result.exercises.values()) and not result.exercises[2].needs_failure
    e1, e2 = result.exercises[1], result.exercises[2]
    # Exercise 1 is judged on every role history read after: instance 1 read on task 0_0 twice as its first active,
    # instance 2 once, and instance 1 once more right after its round trip (the "active" logged 50 ms after the read).
    assert ex.reads_by_roles(v) == {(1, "0_0", ("active",)): (2, 0), (2, "0_0", ("active",)): (1, 0),
                                   (1, "0_0", ("active", "standby", "active")): (1, int(stale))}
    assert e1.solution(result) is ex.goes_stale and e1.wrong(result)(["active", "none", "active"]) is True
    assert result.check(1, ex.goes_stale)
    # The Explain's path, formerly the answer: it leaves out a standby that left and came back, so it is refused.
    explain = lambda roles: roles[-3:] == ["active", "standby", "active"]   # noqa: E731
    got = result.check(1, explain)
    assert not got and "goes_stale(['active', 'standby', 'none', 'active']) = False" in got.said, got.said
    wrong = [(1, lambda roles: False), (1, lambda roles: "active" in roles), (1, lambda roles: "yes"),
             (1, lambda: True), (1, "none"), (1, 1),
             (1, lambda roles: roles[-2:] == ["standby", "active"]),   # "a promoted standby is behind"
             (1, lambda roles: roles == ["active", "standby", "active"]),   # only this run's path
             (1, lambda roles: roles[-1] == "active" and "active" in roles[:-1]),   # a close forgotten
             (1, lambda roles: ex.goes_stale([r if r != "stopped" else "none" for r in roles]))]   # a stop forgotten
    # Exercise 2 is the case's count, whatever the run: 155 (instance 2 counts on from its own cached 150)
    assert e2.solution(result) == 155 and e2.wrong(result) == 133 and result.check(2, 155.0)
    assert ex.played(ex.CASE_START, ex.CASE_MOVES, cache_kept=False)[-1] == 163   # the true count, no cache kept
    wrong += [(2, answer) for answer in ("none", "155x", 0, -155, 10**9, [155], True, "", 163, 133, 150, 151, 128)]
    if stale:   # the formerly passing look-up: this run's first stale read's `prev`
        wrong += [(2, v.first_stale["found"])]
    for number, answer in wrong:
        got = result.check(number, answer)
        assert not got and got.said.startswith("Not quite: "), (number, answer, got.said)
    assert "true count" in result.check(2, 163).said and "store" in result.check(2, 133).said
    assert "first read" in result.check(2, 150).said
    shown = []
    result.solution(2, display=shown.append)
    assert "For this run: `155`" in shown[0].data and "cache" in shown[0].data
    if stale:   # the printed values include the run's `prev`, the answer the look-up gave
        assert v.first_stale["found"] in e2.printed(result)


def test_the_case_printed_leaves_out_a_value_equal_to_the_answer_by_chance(tmp_path):
    v = analysed(tmp_path)
    v.first_stale = {**v.first_stale, "true_value": 155}
    outcome = report.StaleStandbyResult("store_reads", {"program": "1 2"}, "x", v.timeline, variants={"main": v})
    assert ex._case_printed(outcome) == [2, 3, 58, 31]   # found, expected (value 3 once), the quote; 155 left out


def test_goes_stale_follows_the_cache_of_3_3_1():
    """The histories the source decides: recycling keeps the entries, closing an active task or a stop removes
    them, closing a standby does not (its stores were handed the 0-byte stand-in cache)."""
    for roles, truth in ex.MECHANISM:
        assert ex.goes_stale(roles) is truth, roles
    assert ex.goes_stale([]) is False and ex.goes_stale(["active", "standby"]) is False


def test_a_stop_marks_every_task_the_instance_held():
    """The histories tell a task that left a running instance ("none") from a stopped instance ("stopped"), even
    for a task it no longer held when it stopped."""
    logs = {1: "\n".join([line(T0 + 1, 1, ["0_0", "0_1"], []), line(T0 + 5, 1, ["0_0"], []),
                          line(T0 + 20, 1, ["0_1"], [])])}
    toggles = [{"ts": T0, "instance": 1, "action": "start", "step": 0},
               {"ts": T0 + 8, "done_ts": T0 + 9, "instance": 1, "action": "stop", "step": 1},
               {"ts": T0 + 15, "instance": 1, "action": "start", "step": 2}]
    a = report.parse_assignments(logs, toggles)
    roles = lambda task: list(a[a.task == task].sort_values("ts").role)   # noqa: E731
    assert roles("0_0") == ["active", "stopped"] and roles("0_1") == ["active", "none", "stopped", "active"]
    assert a[(a.task == "0_1") & (a.ts == T0 + 20)].was.tolist() == ["stopped"]
