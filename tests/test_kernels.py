"""A lesson gives back what it took: its last cell stops the kernel's Spark, and `make lab`'s JupyterLab shuts down a
kernel left idle (a real JupyterLab, a real kernel; no broker)."""
import os
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from lab.commands.site import headless_kernel_manager

from lab.runtime.ports import free_port
from tests.jupyterlab import MARK, Lab, marked

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

JVMS = ("import psutil\n"
        "print(sum('java' in p.name() for p in psutil.Process().children(recursive=True)))")


def test_the_last_cell_stops_the_kernels_spark_and_says_so():
    cells = ['from lab.notebook import *\nlesson = setup("07c")',
             "from lab.audit.spark import spark_session\nspark_session().range(3).count()",
             JVMS,
             "lesson.end(None)",   # no cluster of its own here: Spark alone
             JVMS]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
                   kernel_manager_class=headless_kernel_manager()).execute()
    text = ["".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") for cell in nb.cells]
    assert int(text[2].split()[-1]) >= 1, text[2]           # Spark's driver JVM, the kernel's child
    assert text[3].startswith("Lesson over: Spark stopped, memory given back."), text[3]
    assert int(text[4].split()[-1]) == 0, text[4]            # nothing left holding memory


def test_a_headless_kernel_starts_on_a_machine_where_jupyter_never_ran(monkeypatch):
    """Its sockets are files in Jupyter's runtime folder, which a fresh machine does not have yet (a short path: a
    socket file's path may not exceed 107 characters)."""
    with tempfile.TemporaryDirectory(prefix="rt-") as short:
        runtime = Path(short) / "never-created"
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
        NotebookClient(nb, kernel_name="python3", timeout=120, kernel_manager_class=headless_kernel_manager()).execute()
        assert nb.cells[0].outputs[0]["text"] == "42\n"
        assert runtime.is_dir()


def test_jupyterlab_shuts_down_a_kernel_left_idle(tmp_path):
    lab = Lab(tmp_path, tmp_path, idle_minutes=0.1)   # as `make lab` starts it: 6 s idle, checked every 3 s
    try:
        kernel = lab.api("kernels", "POST", {"name": "python3"})
        assert [k["id"] for k in lab.api("kernels")] == [kernel["id"]]
        deadline = time.monotonic() + 60
        while lab.api("kernels") and time.monotonic() < deadline:
            time.sleep(1)
        assert lab.api("kernels") == [], "the idle kernel is still running"
        assert "Culling kernel" in lab.log_path.read_text()
    finally:
        lab.stop()
    assert not marked(lab.marker), "JupyterLab or its kernel still running after it stopped"


def test_make_lab_says_once_that_idle_kernels_are_shut_down_and_starts_no_broker_unless_asked(monkeypatch, capsys):
    from argparse import Namespace

    from lab.commands import main
    ran = []
    monkeypatch.setattr(main.subprocess, "run", lambda cmd, env, check: ran.append((cmd, env)))
    main.start(Namespace(port=free_port(), ip="127.0.0.1", idle_minutes=30, playground=False, room=None))
    out = capsys.readouterr().out
    assert out.count("idle for 30 minutes is shut down to give its memory back") == 1, out
    assert "Playground" not in out and "KAFKA_LAB_PLAYGROUND" not in ran[0][1]
    assert "--MappingKernelManager.cull_idle_timeout=1800" in ran[0][0]
    assert "--MappingKernelManager.cull_connected=True" in ran[0][0]   # an open tab does not keep a kernel


def _running(marker: str, word: str) -> list:
    import psutil
    found = []
    for proc in marked(marker).values():
        try:
            found += [proc] if word in " ".join(proc.cmdline()) else []
        except psutil.Error:
            continue
    return found


def _wait(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what} within {seconds:.0f} s"
        time.sleep(0.5)
    return value


def test_a_hung_cell_interrupted_stops_its_run_and_a_restart_leaves_nothing(tmp_path):
    """docs/teaching.md's "A cell hangs": Interrupt ends the lesson's run and what it started (its app), the
    notebook's broker stays up; Restart ends the kernel and everything the lab started from it."""
    from jupyter_client import KernelManager
    marker = uuid.uuid4().hex
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(NOTEBOOK_DIR), env={**os.environ, MARK: marker, "KAFKA_LAB_HEADLESS": "1"})
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        setup = ('from lab.notebook import *\nlesson = setup("07c")\n'
                 'PARAMS = lesson.spec.from_notebook({"LOOKUP_WINDOW_S": 60})\n'
                 "cluster = kafka_cluster(**lesson.needs(PARAMS)).start()")
        reply = kc.execute_interactive(setup, timeout=180, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        broker = _wait(lambda: _running(marker, "kafka.Kafka"), 30, "the notebook's broker")
        kc.execute("result = lesson.run(cluster=cluster, **PARAMS)")   # a run of a minute: the cell that hangs
        _wait(lambda: _running(marker, "ThroughputApp"), 120, "the lesson's app to start")
        km.interrupt_kernel()                                          # Kernel > Interrupt Kernel
        _wait(lambda: not _running(marker, "ThroughputApp"), 30, "the interrupted run's app to stop")
        assert all(proc.is_running() for proc in broker), "the notebook's broker stopped on an interrupt"
        km.restart_kernel(now=False)                                   # Kernel > Restart Kernel
        _wait(lambda: not [p for p in marked(marker).values() if "java" in p.name()], 60,
              "every JVM to end after a restart")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        for proc in marked(marker).values():
            proc.kill()
