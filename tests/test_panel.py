"""The panel, clicked as a user would, on a scenario that needs no broker (fast; no JVM).

The course's own panels are clicked on real scenarios by tests/test_notebooks.py (the CONTROL
runs) and in a real browser by tests/test_browser.py.
"""
import time
from dataclasses import dataclass

import pytest

from lab.errors import LabError
from lab.toolbox import Param, Result
from lab.toolbox.lesson import Lesson
from lab.toolbox import panel as panel_module
from lab.toolbox.panel import Panel, panel

PARAMS = [Param("seconds", 1.0, "how long the run waits", lo=0.1, hi=120, unit="s"),
          Param("fail", False, "raise a LabError after the wait"),
          Param("label", None, "a number or nothing: a text box", lo=0, hi=10, none="no label"),
          Param("blocked_s", 0.0, "then a call that ignores Stop (one waiting for a dead broker)", lo=0, hi=60)]
RULES = [lambda v: "FAIL=True needs SECONDS <= 60." if v["fail"] and v["seconds"] > 60 else None]


class BorrowedCluster:
    """Stands in for the user's own cluster: the run borrows it and starts none."""
    owns_broker, running, bootstrap = False, True, "127.0.0.1:9"

    def require_broker_config(self, config):
        pass


@dataclass
class WaitResult(Result):
    waited: float = 0.0

    @property
    def failed(self):
        return self.params["seconds"] >= 1

    def verdict(self):
        return f"waited {self.waited:.1f} s"

    def record_fields(self):
        return {"waited": self.waited}


def waiting_body(run, p):
    sleeper = run.spawn_python("sleeper", "timeit", ["-n", "1", "import time; time.sleep(120)"])
    run.event("sleeper", "started", tone="fault")
    waited = run.countdown("the wait", seconds=p["seconds"])
    time.sleep(p["blocked_s"])
    if p["fail"]:
        raise LabError("the scenario failed on purpose: set FAIL to False")
    assert sleeper.alive()
    return WaitResult("panel-test", p, run.id, run.timeline, waited=waited)


def question(p):   # the question follows the values: a panel asks it again when they change it
    return (f"Does a wait of {p['seconds']:g} s count as long?", ["yes", "no"])


WAITING = Lesson("panel_test", "a wait", params=PARAMS, rules=RULES, needs=lambda p: {}, body=waiting_body,
                 question=question, measured_answer=lambda record, p: "yes" if p["seconds"] >= 1 else "no")


@pytest.fixture
def tune():
    return Panel(WAITING, cluster=BorrowedCluster(), seconds=1.0, fail=False)


def test_a_run_shows_its_verdict_and_leaves_nothing_running(tune):
    outcome = tune.click({"seconds": 1.5, "label": 5})   # a number typed into a text box
    assert tune.last_result.params["label"] == 5
    assert outcome["status"].startswith("done: waited 1.")
    assert outcome["failure_reproduced"] is True and outcome["left_running"] == 0
    assert "sleeper: started" in tune.events.value and "the wait" not in tune.status.value
    assert tune.progress_box.layout.display == "none"   # the result replaced the progress
    # twice in a row, with another value: the control outcome
    again = tune.click({"seconds": 0.2})
    assert again["failure_reproduced"] is False and again["left_running"] == 0
    assert tune.run_button.disabled is False and tune.stop_button.disabled is True


def test_stop_ends_the_run_at_once_and_kills_its_processes(tune):
    outcome = tune.click({"seconds": 60}, stop_after=1.0)
    assert outcome["stopped"] is True and outcome["status"].startswith("stopped")
    assert outcome["seconds"] < 10 and outcome["left_running"] == 0
    assert "nothing left running" in outcome["status"], outcome
    assert tune.last_result is None


def test_a_failed_run_shows_one_line(tune):
    outcome = tune.click({"fail": True, "seconds": 0.2})
    assert outcome["status"] == "failed: LabError: the scenario failed on purpose: set FAIL to False"
    assert outcome["left_running"] == 0 and "verdict" not in outcome


def test_a_value_out_of_range_is_refused_before_anything_starts(tune):
    tune.controls["seconds"].value = 500          # the control's range comes from the spec
    assert tune.controls["seconds"].value == 120
    outcome = tune.click({"seconds": 90, "fail": True})   # a rule across parameters: one line, nothing ran
    assert outcome["status"] == "refused: LabError: FAIL=True needs SECONDS <= 60."
    assert "run_ids" not in outcome


def test_stop_does_not_wait_for_a_blocked_call_and_the_next_run_is_not_disturbed(tune):
    outcome = tune.click({"seconds": 0.5, "blocked_s": 12}, stop_after=1.5)
    assert outcome["stopped"] is True and outcome["left_running"] == 0, outcome
    assert outcome["seconds"] < 9, outcome          # the 12 s call was not waited for
    assert outcome["status"].endswith("ends in the background"), outcome
    again = tune.click({"seconds": 0.2, "blocked_s": 0})   # the stopped run's thread is still blocked
    assert again["status"].startswith("done:") and again["left_running"] == 0, again
    time.sleep(12)   # the stopped run's thread ends now: it must not touch the panel
    assert tune.status.value == again["status"] and tune.last_outcome["status"] == again["status"]


def test_each_run_is_predicted_and_its_row_sets_the_prediction_beside_the_measurement(tune):
    assert "Does a wait of 1 s count as long?" in tune.question.text.value
    tune.controls["seconds"].value = 0.3              # the question follows the values
    assert "Does a wait of 0.3 s count as long?" in tune.question.text.value
    first = tune.click({"seconds": 1.5}, prediction="no")
    assert first["prediction"] == "no" and first["measured"] == "yes" and first["prediction_right"] is False
    assert tune.question.widget.value is None and not tune.question.widget.disabled   # asked again for the next run
    second = tune.click({"seconds": 0.2}, prediction="no")
    assert second["prediction_right"] is True
    third = tune.click({"seconds": 0.2})               # no answer: the run goes, its row says so
    assert third["prediction"] is None and third["prediction_right"] is None and third["history_row"]["predicted"] is None
    rows = tune.history.rows
    assert [r["run"] for r in rows] == [1, 2, 3] and [r["right"] for r in rows] == [False, True, None]
    assert rows[0]["values"] == "SECONDS=1.5" and rows[0]["ended"].startswith("done: waited 1.")
    assert "✗" in tune.history.widget.value and "✓" in tune.history.widget.value
    assert WAITING.last is None                        # a panel's run is never the one the exercises judge


def test_the_answer_is_locked_while_the_run_goes(tune):
    tune.question.answer("yes")
    tune.controls["seconds"].value = 2.0               # a new question, the answer kept: still one of the choices
    widget = tune.question.widget
    assert widget.value == "yes"
    tune.run_button.click()
    assert widget.disabled                             # taken at Run: a later change does not count
    tune.stop_button.click()
    tune._done.wait(30)
    assert tune.history.rows[-1]["ended"].startswith("stopped")


def test_a_stopped_or_refused_run_gets_its_row_too(tune):
    stopped = tune.click({"seconds": 60}, prediction="yes", stop_after=1.0)
    assert stopped["history_row"]["ended"].startswith("stopped") and stopped["history_row"]["measured"] is None
    refused = tune.click({"seconds": 90, "fail": True}, prediction="no")
    assert refused["history_row"]["ended"].startswith("refused: ") and len(tune.history.rows) == 2
    assert tune.question.widget.value == "no"          # nothing ran: the answer stays for the next try


def test_a_run_that_would_not_fit_the_free_memory_is_refused_in_one_line(tune, monkeypatch):
    from lab.toolbox import memory
    monkeypatch.setattr(memory, "free_mb", lambda: 300.0)
    outcome = tune.click({"seconds": 0.2})
    assert outcome["status"].startswith("refused: LabError: This run needs about 0.2 GB of memory (1 app) and "
                                        "0.3 GB is free"), outcome
    assert "run_ids" not in outcome and "\n" not in outcome["status"]
    with pytest.raises(LabError, match="This run needs about"):   # the notebook's own Run cell refuses it too
        WAITING.run(cluster=BorrowedCluster(), seconds=0.2)
    monkeypatch.setattr(memory, "free_mb", lambda: 8000.0)
    assert tune.click({"seconds": 0.2})["status"].startswith("done:")


def test_a_broker_the_run_would_start_counts_and_a_borrowed_one_does_not():
    from lab.toolbox.memory import BROKER_MB, APP_MB, SPARE_MB, needed_mb, refuse_unless_it_fits
    assert needed_mb(1, 2, False) == (BROKER_MB + 2 * APP_MB, "1 broker, 2 apps")
    refuse_unless_it_fits(0, 1, False, free=APP_MB + SPARE_MB + 1)
    with pytest.raises(LabError, match=r"\(3 brokers, 1 app, 1 Spark\)"):
        refuse_unless_it_fits(3, 1, True, free=2000)


def test_headless_runs_build_no_panel(monkeypatch):
    monkeypatch.setenv("KAFKA_LAB_HEADLESS", "1")
    monkeypatch.setattr(panel_module, "Panel", lambda *a, **k: pytest.fail("a headless run built a panel"))
    before = list(panel_module._shown)
    panel(WAITING, cluster=BorrowedCluster())
    assert panel_module._shown == before
    monkeypatch.setenv("KAFKA_LAB_HEADLESS", "0")
    assert not panel_module.headless()
    monkeypatch.delenv("KAFKA_LAB_HEADLESS")
    assert not panel_module.headless()


def test_the_controls_say_their_unit_and_range():
    from lab.toolbox.panel import control
    assert control(PARAMS[0], 1.0).description == "SECONDS (s, 0.1 to 120)"
    assert control(PARAMS[1], False).description == "FAIL"
