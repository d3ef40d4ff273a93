"""The suite's own schedule (tests/conftest.py): two notebook lanes, and a side lane that runs the other modules, then
the light notebook runs, at a lower priority."""
import os
import subprocess
import sys

from tests.conftest import SIDE_LANE_NICENESS, is_side_lane, next_unit, unit_order

NOTEBOOK = "tests/test_notebooks.py::test_notebook[08_diagnose_your_cluster[failure]]"
CONTROL = "tests/test_notebooks.py::test_notebook[08_diagnose_your_cluster[control]]"
BROWSER = "tests/test_browser.py"
MODULE, LIGHT = "tests/test_spark_cluster.py", "tests/test_layout.py"


def test_a_side_lane_takes_the_shortest_module_then_the_short_light_notebooks_and_stops_at_the_heavy_ones():
    assert next_unit([NOTEBOOK, BROWSER, MODULE, LIGHT, CONTROL], side_lane=True) == LIGHT    # modules first, shortest
    assert next_unit([NOTEBOOK, BROWSER, MODULE, CONTROL], side_lane=True) == MODULE
    assert next_unit([NOTEBOOK, BROWSER, CONTROL], side_lane=True) == CONTROL    # then the last notebook run, if light
    heavy_control = "tests/test_notebooks.py::test_notebook[07a_poll_loop[control]]"
    assert next_unit([heavy_control, BROWSER], side_lane=True) is None   # never a heavy one: the side lane is done


def test_a_notebook_lane_takes_notebooks_first_then_helps_with_the_rest():
    assert next_unit([MODULE, NOTEBOOK, LIGHT], side_lane=False) == NOTEBOOK
    assert next_unit([MODULE, BROWSER], side_lane=False) == BROWSER    # the browser tests run notebooks too
    assert next_unit([MODULE, LIGHT], side_lane=False) == MODULE
    assert next_unit([], side_lane=False) is None


def test_the_longest_first_and_never_two_heavy_units_in_a_row():
    state = "tests/test_notebooks.py::test_notebook[03a_over_quota[failure]]"
    assert unit_order([LIGHT, NOTEBOOK, MODULE]) == [MODULE, NOTEBOOK, LIGHT]
    # by length the browser tests, then 03a's failure run: both heavy, so the CONTROL run goes between them
    assert unit_order([LIGHT, CONTROL, BROWSER, state]) == [BROWSER, CONTROL, state, LIGHT]


def test_the_workers_beyond_the_notebook_lanes_are_side_lanes_and_run_at_a_lower_priority():
    assert [is_side_lane(w) for w in ("gw0", "gw1", "gw2", "gw3")] == [False, False, True, True]
    assert not is_side_lane(None) and not is_side_lane("")   # no xdist: one lane, full priority
    # a side lane's configure hook lowers its priority, and a child it starts (a broker, Spark) inherits it
    probe = ("import os, subprocess, sys; from tests.conftest import pytest_configure; pytest_configure(None); "
             "print(os.nice(0), subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'], "
             "capture_output=True, text=True).stdout.strip())")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for worker in ("gw1", "gw2"):
        env = {**os.environ, "PYTEST_XDIST_WORKER": worker}
        out[worker] = subprocess.run([sys.executable, "-c", probe], cwd=root, env=env, capture_output=True,
                                     text=True, check=True).stdout.split()
    base = os.nice(0)
    assert out["gw1"] == [str(base)] * 2, out
    assert out["gw2"] == [str(min(19, base + SIDE_LANE_NICENESS))] * 2, out
