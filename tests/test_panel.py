"""The panel, clicked as a user would, on a scenario that needs no broker (fast; no JVM).

The course's own panels are clicked on real scenarios by tests/test_notebooks.py (the CONTROL
runs) and in a real browser by tests/test_browser.py.
"""
import time
from dataclasses import dataclass

import pytest

from lab.errors import LabError
from lab.toolbox import Param, Result, Run, Spec
from lab.toolbox.panel import Panel

SPEC = Spec(Param("seconds", 1.0, "how long the run waits", lo=0.1, hi=120, unit="s"),
            Param("fail", False, "raise a LabError after the wait"),
            Param("label", None, "a number or nothing: a text box", lo=0, hi=10, none="no label"),
            Param("blocked_s", 0.0, "then a call that ignores Stop (one waiting for a dead broker)", lo=0, hi=60),
            rules=[lambda v: "FAIL=True needs SECONDS <= 60." if v["fail"] and v["seconds"] > 60 else None])


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


def waiting_scenario(cluster=None, progress=True, **params):
    p = SPEC.validate(**params)
    with Run("panel-test", cluster=cluster, progress=progress) as run:
        sleeper = run.spawn_python("sleeper", "timeit", ["-n", "1", "import time; time.sleep(120)"])
        run.event("sleeper", "started", tone="fault")
        waited = run.countdown("the wait", seconds=p["seconds"])
        time.sleep(p["blocked_s"])
        if p["fail"]:
            raise LabError("the scenario failed on purpose: set FAIL to False")
        assert sleeper.alive()
        return WaitResult("panel-test", p, run.id, run.timeline, waited=waited)


@pytest.fixture
def tune():
    return Panel(SPEC, waiting_scenario, cluster=BorrowedCluster(), seconds=1.0, fail=False)


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
    assert outcome["status"] == "failed: LabError: FAIL=True needs SECONDS <= 60."
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
