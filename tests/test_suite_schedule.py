"""The suite's own schedule (tests/conftest.py): two notebook lanes, and a side lane that never runs a notebook."""
from tests.conftest import next_unit, unit_order

NOTEBOOK = "tests/test_notebooks.py::test_notebook[05_exactly_once_under_crashes[failure]]"
CONTROL = "tests/test_notebooks.py::test_notebook[08_diagnose_your_cluster[control]]"
BROWSER = "tests/test_browser.py"
MODULE, LIGHT = "tests/test_spark_cluster.py", "tests/test_layout.py"


def test_a_side_lane_takes_the_shortest_module_never_a_notebook_and_stops_when_only_notebooks_are_left():
    assert next_unit([NOTEBOOK, BROWSER, MODULE, LIGHT], side_lane=True) == LIGHT    # the shortest first
    assert next_unit([NOTEBOOK, BROWSER, MODULE], side_lane=True) == MODULE
    assert next_unit([NOTEBOOK, BROWSER, CONTROL], side_lane=True) is None


def test_a_notebook_lane_takes_notebooks_first_then_helps_with_the_rest():
    assert next_unit([MODULE, NOTEBOOK, LIGHT], side_lane=False) == NOTEBOOK
    assert next_unit([MODULE, BROWSER], side_lane=False) == BROWSER    # the browser tests run notebooks too
    assert next_unit([MODULE, LIGHT], side_lane=False) == MODULE
    assert next_unit([], side_lane=False) is None


def test_the_longest_first_and_never_two_heavy_units_in_a_row():
    streams_stop = "tests/test_notebooks.py::test_notebook[07_when_streams_stop[failure]]"
    assert unit_order([LIGHT, MODULE, NOTEBOOK]) == [NOTEBOOK, MODULE, LIGHT]
    # by length 07's failure run, then the browser tests: both heavy, so the CONTROL run goes between them
    assert unit_order([LIGHT, CONTROL, BROWSER, streams_stop]) == [streams_stop, CONTROL, BROWSER, LIGHT]
