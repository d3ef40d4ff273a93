import os
import shutil
import uuid

import psutil
import pytest

SUITE_MARK = "KAFKA_LAB_SUITE"
# Debian's chromium, which the browser tests (test_browser.py, test_room_page.py) drive with Playwright
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


NOTEBOOK_RUNS = ("tests/test_notebooks.py::test_notebook[",)

# The order the workers take the units in (scheduling only, never an assertion): the longest first, so that the
# suite ends on short ones, and never two heavy units queued side by side, since each worker holds the next unit
# while it runs one, so neighbours in the order mostly run together. Seconds as measured in the suite on three
# workers (2026-11-27, two notebook lanes and a side lane: 25 min 27 s; since then, with the experiment exercises
# they try); the lesson notebooks (02a to 07d) as measured in the suite (6792e49's CI) where its slowest list had
# them, else alone, one after the other (2026-11-28, load about 1); a unit not listed counts as short. Heavy: the
# units that keep both cores busy or peak highest (07d's three-node cluster with its apps, 07a's eight consumers and Spark, 06c's RocksDB
# JVMs, 03a's five Streams apps, the browser tests' chromium and JupyterLab).
MEASURED_S = {
    "05a_crash_points[failure]": 139, "05b_exception_handlers[failure]": 51,
    "05b_exception_handlers[control]": 18, "05c_state_schema[failure]": 69, "05d_refused_record[failure]": 85,
    "07d_broker_bounce[failure]": 116,
    "06a_store_growth[failure]": 60, "06b_restore[failure]": 69, "06b_restore[control]": 45,
    "06c_rocksdb_memory[failure]": 69, "06d_changelog_reader[failure]": 69, "06e_disk_space[failure]": 80,
    "tests/test_spark_cluster.py": 325, "tests/test_browser.py": 156,
    "02a_idle_clients[failure]": 99, "02a_idle_clients[control]": 59, "02b_idle_streams[failure]": 69,
    "02c_old_brokers[failure]": 97, "03a_over_quota[failure]": 134, "03b_sweep[failure]": 82,
    "08_diagnose_your_cluster[failure]": 165, "01_quiet_service[failure]": 141,
    "tests/test_audit.py": 115, "03a_over_quota[control]": 151, "tests/test_cluster.py": 105,
    "07a_poll_loop[failure]": 107, "07a_poll_loop[control]": 31, "07b_partitions[failure]": 68,
    "07c_lookups[failure]": 47, "07c_lookups[control]": 52,
    "04_store_reads[control]": 84, "04_store_reads[failure]": 172, "tests/test_security.py": 75,
    "01_quiet_service[control]": 62,
    "tests/test_site.py": 60, "00_setup_check[failure]": 30,
    "tests/test_doctor.py": 45, "08_diagnose_your_cluster[control]": 31,
    "09_work_queue[failure]": 86, "09_work_queue[control]": 41,
    "tests/test_panel.py": 25, "tests/test_room.py": 35, "tests/test_room_page.py": 12,
}
HEAVY = ("07a_poll_loop", "07d_broker_bounce", "06c_rocksdb_memory", "03a_over_quota",
         "tests/test_browser.py")


def unit_of(nodeid: str) -> str:
    """The unit a test runs in: each notebook run alone, every other module whole (its fixtures start once)."""
    return nodeid if nodeid.startswith(NOTEBOOK_RUNS) else nodeid.split("::")[0]


def _measured(unit: str) -> float:
    return next((s for name, s in MEASURED_S.items() if name in unit), 0)


def heavy(unit: str) -> bool:
    return any(name in unit for name in HEAVY)


def unit_order(units: list[str]) -> list[str]:
    """Longest first; a heavy unit never right after another heavy one while a light one is left."""
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


NOTEBOOK_LANES = 2   # workers that run any notebook; a worker beyond them (a side lane) only the light ones
SIDE_LANE_NICENESS = 10   # how much a side lane yields the CPU to the notebook lanes
UNITS_AHEAD = 1   # a worker with this many tests left gets the next unit (pytest-xdist's own: 2)


def is_side_lane(worker: str | None) -> bool:
    """A pytest-xdist worker (gw0, gw1, ...) beyond the notebook lanes: it runs the modules without notebooks, then
    the light notebook runs (next_unit)."""
    return bool(worker) and worker.startswith("gw") and int(worker.removeprefix("gw")) >= NOTEBOOK_LANES


def pytest_configure(config):
    """A side lane runs at a lower CPU priority, and so do its children (brokers, Spark): the notebook lanes set the
    suite's length, and a side lane has time to spare, so it takes the CPU they leave (os.nice: Linux, macOS, WSL2)."""
    if is_side_lane(os.environ.get("PYTEST_XDIST_WORKER")):
        os.nice(SIDE_LANE_NICENESS)


def runs_a_notebook(unit: str) -> bool:
    """A unit that executes notebooks in a kernel: a notebook run, or the browser tests' JupyterLab."""
    return unit.startswith(NOTEBOOK_RUNS) or unit == "tests/test_browser.py"


def next_unit(queue: list[str], side_lane: bool) -> str | None:
    """The unit a worker takes next from the queue (in unit_order): a notebook lane the first notebook run, or else
    the first unit; a side lane the last unit that runs no notebook (the shortest), then, with none left, the last
    notebook run that is not heavy, or nothing. The side lane starts light so that its Spark cluster tests come
    later, not beside the two longest notebooks' first audits and JVM starts, when the machine is busiest; once its
    modules are done, it takes the short notebook runs from the end of the queue while the notebook lanes take the
    long ones from its front, so that the suite does not end on two lanes with a third one idle."""
    if side_lane:
        modules = (unit for unit in reversed(queue) if not runs_a_notebook(unit))
        light = (unit for unit in reversed(queue) if runs_a_notebook(unit) and not heavy(unit))
        return next(modules, None) or next(light, None)
    return next((unit for unit in queue if runs_a_notebook(unit)), queue[0] if queue else None)


@pytest.hookimpl(optionalhook=True)   # pytest-xdist's hook: `make test` runs three workers (JOBS=3)
def pytest_xdist_make_scheduler(config, log):
    """Units of work for the workers (unit_of): each notebook run alone, every other test module whole, in the
    collection's order (unit_order). NOTEBOOK_LANES workers run the notebooks; a worker beyond them takes the other
    modules, which then run beside two notebooks instead of taking turns with them, and then the short notebook
    runs that are not heavy (next_unit)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            scope = next_unit(list(self.workqueue), is_side_lane(node.gateway.id))
            if scope is None:   # only heavy notebook runs left: this side worker is done
                node.shutdown()
                return
            self.workqueue.move_to_end(scope, last=False)   # the parent takes the queue's first unit
            super()._assign_work_unit(node)

        def _reschedule(self, node) -> None:
            # pytest-xdist hands a worker more once it has two tests or fewer left; a notebook run is one test, so a
            # lane would hold two runs besides the one it runs, and the suite could end on one lane while the others
            # idle. A worker runs a test once it knows the next one: more only when it is down to one.
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= UNITS_AHEAD:
                self._assign_work_unit(node)

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
    from lab.runtime.processes import stop_all
    from lab.audit.spark import stop_spark
    stop_spark()
    stop_all()
    left = jvms_of_this_suite(token)
    if left:
        pytest.fail(f"JVMs left running after the suite: {left}")


@pytest.fixture(scope="module")
def browser():
    """A headless chromium (Debian's, no browser download), or the test skipped and why."""
    if not CHROMIUM:
        pytest.skip("chromium is not installed: `make test` installs Debian's chromium package when it runs as root "
                    "with apt-get; elsewhere install it (apt-get install chromium) to run the browser test")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[dev]')")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()
