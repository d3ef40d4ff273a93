import os
import uuid

import psutil
import pytest

SUITE_MARK = "KAFKA_LAB_SUITE"


NOTEBOOK_RUNS = ("tests/test_notebooks.py::test_notebook[", "tests/test_notebooks.py::test_a_notebook_runs")


def pytest_collection_modifyitems(config, items):
    """The notebook runs and the browser tests first: the long ones start early, and two workers pair them."""
    items.sort(key=lambda item: not (item.get_closest_marker("notebook") or item.get_closest_marker("browser")))


@pytest.hookimpl(optionalhook=True)   # pytest-xdist's hook: `make test` runs two workers (JOBS=2)
def pytest_xdist_make_scheduler(config, log):
    """Units of work for the workers: each notebook run alone, so that two run side by side (they mostly wait on
    Kafka's clocks); every other test module whole, so that its module fixtures start once. In the collection's
    order, notebook runs first."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(NOTEBOOK_RUNS) else nodeid.split("::")[0]

    config.option.loadscopereorder = False
    return ByUnit(config, log)


def jvms_of_this_suite(token: str) -> list[int]:
    """JVMs whose environment carries this suite's token: started by it, directly or via a kernel."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] == "java" and proc.environ().get(SUITE_MARK) == token:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_jvm_left_behind():
    """The suite fails if a JVM it started (broker, Streams app, Spark) is still running at the end."""
    token = uuid.uuid4().hex
    os.environ[SUITE_MARK] = token  # inherited by every child: brokers, apps, papermill kernels, Spark
    yield
    from lab.processes import stop_all
    from lab.spark import stop_spark
    stop_spark()
    stop_all()
    left = jvms_of_this_suite(token)
    if left:
        pytest.fail(f"JVMs left running after the suite: {left}")
