import os
import uuid

import psutil
import pytest

SUITE_MARK = "KAFKA_LAB_SUITE"


NOTEBOOK_RUNS = ("tests/test_notebooks.py::test_notebook[", "tests/test_notebooks.py::test_a_notebook_runs")

# The order the two workers take the units in (scheduling only, never an assertion): the longest first, so that
# the suite ends on short ones, and never two heavy units queued side by side, since each worker holds the next
# unit while it runs one, so neighbours in the order mostly run together. Seconds as measured two at a time (the
# fresh-clone .ci/run of stop 34, and this round's pairs for 01's and 05's runs, which the Spark warm-up shortened);
# the other test modules from one run of them alone. A unit not listed counts as short. Heavy: the units that keep
# both cores busy or peak highest (notebook 07's three-node cluster with its apps, 06's lessons, notebook 03's five
# Streams apps, the browser tests' chromium and JupyterLab): 06's and 07's failure runs side by side kept the load
# at 12 and took 390 and 371 s; 07's two runs side by side took 5.1 GB, the browser tests beside 07's CONTROL 5.5 GB.
MEASURED_S = {
    "07_when_streams_stop[failure]": 355, "06_state_in_production[failure]": 302, "tests/test_browser.py": 284,
    "05_exactly_once_under_crashes[failure]": 287, "02_transactional_id_expiry[failure]": 266,
    "03_quota_driven_fencing[failure]": 231, "08_diagnose_your_cluster[failure]": 193,
    "01_offset_expiry_reprocessing[failure]": 168, "04_stale_standby_cache[failure]": 123,
    "tests/test_spark_cluster.py": 120, "07_when_streams_stop[control]": 117, "tests/test_audit.py": 115,
    "05_exactly_once_under_crashes[control]": 114, "03_quota_driven_fencing[control]": 112,
    "04_stale_standby_cache[control]": 106, "tests/test_cluster.py": 105, "02_transactional_id_expiry[control]": 100,
    "tests/test_security.py": 75, "00_setup_check[failure]": 75, "01_offset_expiry_reprocessing[control]": 70,
    "06_state_in_production[control]": 65, "tests/test_site.py": 60, "tests/test_doctor.py": 45,
    "08_diagnose_your_cluster[control]": 35, "test_a_notebook_runs": 30, "tests/test_panel.py": 25,
}
HEAVY = ("07_when_streams_stop", "06_state_in_production", "03_quota_driven_fencing", "test_a_notebook_runs",
         "tests/test_browser.py")


def unit_of(nodeid: str) -> str:
    """The unit a test runs in: each notebook run alone, every other module whole (its fixtures start once)."""
    return nodeid if nodeid.startswith(NOTEBOOK_RUNS) else nodeid.split("::")[0]


def _measured(unit: str) -> float:
    return next((s for name, s in MEASURED_S.items() if name in unit), 0)


def unit_order(units: list[str]) -> list[str]:
    """Longest first; a heavy unit never right after another heavy one while a light one is left."""
    heavy = lambda unit: any(name in unit for name in HEAVY)   # noqa: E731
    pending, order = sorted(units, key=lambda u: -_measured(u)), []
    while pending:
        pick = next((u for u in pending if not (order and heavy(order[-1]) and heavy(u))), pending[0])
        order.append(pick)
        pending.remove(pick)
    return order


def pytest_collection_modifyitems(config, items):
    """Items grouped by unit, the units in unit_order: xdist hands them out in this order."""
    rank = {unit: i for i, unit in enumerate(unit_order(list(dict.fromkeys(unit_of(i.nodeid) for i in items))))}
    items.sort(key=lambda item: rank[unit_of(item.nodeid)])


@pytest.hookimpl(optionalhook=True)   # pytest-xdist's hook: `make test` runs two workers (JOBS=2)
def pytest_xdist_make_scheduler(config, log):
    """Units of work for the workers (unit_of): each notebook run alone, so that two run side by side (they mostly
    wait on Kafka's clocks); every other test module whole. In the collection's order (unit_order)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

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
