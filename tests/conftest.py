import os
import re
import uuid

import psutil
import pytest

SUITE_MARK = "KAFKA_LAB_SUITE"


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist turns xdist_group marks into scopes
def pytest_collection_modifyitems(config, items):
    """The notebook runs first, each a unit of its own, so that two workers (`make test`, JOBS=2) pair them:
    they mostly wait on Kafka's clocks. Every other test module is one unit, its module fixtures started once."""
    for item in items:
        unit = item.nodeid if item.get_closest_marker("notebook") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(re.sub(r"\W+", "-", unit)))
    items.sort(key=lambda item: not (item.get_closest_marker("notebook") or item.get_closest_marker("browser")))


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
