import os
import uuid

import psutil
import pytest

SUITE_MARK = "KAFKA_LAB_SUITE"


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
