"""Children that never outlive the lab (lab.runtime.processes, lab.runtime.reaper), without a broker: tiny Python children."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from lab.runtime import processes
from lab.toolbox import run as run_module
from lab.runtime.processes import Child, Stopped, children_of_thread, stop_thread, wait_until

ROOT = Path(__file__).resolve().parent.parent
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody has reaped yet (it runs nothing any more)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def start_helper(log: Path, **popen) -> tuple[subprocess.Popen, int, int]:
    """A lab process of its own that starts one Child and sleeps: (it, the child's pid, its reaper's pid)."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from lab.runtime import processes
        child = processes.Child("sleeper", {SLEEP!r}, {str(log)!r})
        print(child.pid, processes.ensure_reaper().pid, flush=True)
        time.sleep(600)
    """)
    helper = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, **popen)
    line = helper.stdout.readline()
    assert line, f"the helper died before starting its child (exit {helper.wait()})"
    child, reaper = map(int, line.split())
    return helper, child, reaper


def cleanup(helper: subprocess.Popen, *pids: int) -> None:
    """Whatever a failed test left running."""
    helper.kill()
    helper.wait()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_a_child_dies_when_the_process_that_started_it_is_killed(tmp_path):
    helper, child, reaper = start_helper(tmp_path / "sleeper.log")
    try:
        assert not gone(child) and os.getpgid(child) == child   # running, in a process group of its own
        os.kill(helper.pid, signal.SIGKILL)
        helper.wait()
        assert gone_within(child, 10), f"child {child} still running 10 s after its parent was killed"
    finally:
        cleanup(helper, child, reaper)


def test_the_reaper_outlives_its_lab_long_enough_to_reap_then_exits(tmp_path):
    """Its lab's whole process group is killed (as a kernel manager does): the reaper, in a session of its
    own, is not, kills the child (which nothing else would: it has a group of its own) and exits."""
    helper, child, reaper = start_helper(tmp_path / "sleeper.log", start_new_session=True)
    try:
        assert not gone(reaper) and os.getsid(reaper) == reaper != os.getsid(helper.pid)
        assert os.getpgid(child) == child != os.getpgid(helper.pid)
        os.killpg(helper.pid, signal.SIGKILL)
        helper.wait()
        assert gone_within(child, 10), f"child {child} still running 10 s after its lab was killed"
        assert gone_within(reaper, 10), f"reaper {reaper} still running after it reaped"
    finally:
        cleanup(helper, child, reaper)


def test_stop_leaves_no_process(tmp_path):
    child = Child("sleeper", SLEEP, tmp_path / "sleeper.log")
    assert child.alive() and child in processes._children
    assert child.stop(timeout=10) == -signal.SIGTERM
    assert not child.alive() and child not in processes._children
    assert gone(child.pid) and not psutil.pid_exists(child.pid)
    assert processes.ensure_reaper().poll() is None   # the watchdog keeps running for the next child


def test_a_child_outlives_the_thread_that_started_it(tmp_path):
    """Children die with the lab process, not with a thread (a panel's worker thread ends before its Stop)."""
    started = []
    worker = threading.Thread(target=lambda: started.append(Child("sleeper", SLEEP, tmp_path / "sleeper.log")))
    worker.start()
    worker.join()
    child = started[0]
    try:
        time.sleep(0.5)
        assert child.alive()
        assert children_of_thread(worker) == [child] and children_of_thread(threading.current_thread()) == []
    finally:
        child.kill()
    assert not child.alive() and children_of_thread(worker) == []


def test_a_stopped_thread_has_its_children_killed_and_may_start_no_new_one(tmp_path):
    """A panel's Stop (stop_thread): what its run's thread started dies, and what it starts afterwards
    (a broker it was about to start when Stop was clicked) is refused, not left running."""
    started, refused, stopped = [], [], threading.Event()

    def run():
        started.append(Child("first", SLEEP, tmp_path / "first.log"))
        stopped.wait(30)
        try:
            started.append(Child("late", SLEEP, tmp_path / "late.log"))
        except Stopped as exc:
            refused.append(str(exc))

    worker = threading.Thread(target=run, name="lab-panel-run")
    worker.start()
    while not started:
        time.sleep(0.05)
    try:
        assert stop_thread(worker) == started
        stopped.set()
        worker.join(30)
        assert len(started) == 1 and not started[0].alive() and gone_within(started[0].pid, 10)
        assert refused == ["late was not started: a Stop ended the work of lab-panel-run"]
        assert children_of_thread(worker) == []
        other = Child("other thread", SLEEP, tmp_path / "other.log")   # other threads start as before
        assert other.alive()
        other.kill()
    finally:
        for child in started:
            child.kill()


def test_named_by_live_processes_finds_a_folder_on_a_live_childs_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "WORK_DIR", tmp_path)
    properties = tmp_path / "runs" / "run-1" / "cluster" / "server.properties"
    classpath = f"{tmp_path / 'kraft-a' / 'classes'}:{tmp_path / 'jars' / 'x.jar'}"
    child = Child("holder", [*SLEEP, str(properties), classpath], tmp_path / "holder.log")
    try:
        wait_until(lambda: str(properties) in psutil.Process(child.pid).cmdline(), 10, "the holder to exec")
        names = run_module._named_by_live_processes()
    finally:
        child.stop(timeout=10)
    assert {tmp_path / "runs", tmp_path / "runs" / "run-1", tmp_path / "kraft-a", tmp_path / "jars"} <= names
    assert tmp_path / "cluster" not in names
    assert run_module._named_by_live_processes() == set()   # the holder is gone


def test_a_child_that_fails_says_its_command_and_its_last_log_lines(tmp_path):
    """A broker that fails to start says why: its command (classpath shortened) and the end of its log."""
    from lab.errors import LabError
    from lab.runtime.processes import Child, wait_until
    script = "import sys; print('\\n'.join(f'line {i}' for i in range(30))); sys.exit(3)"
    child = Child("broken", [sys.executable, "-c", script, "-cp", os.pathsep.join(["a.jar", "b.jar", "c.jar"])],
                  tmp_path / "broken.log")
    with pytest.raises(LabError) as refused:
        wait_until(lambda: False, 30, "the broken program to be ready", child=child)
    message = str(refused.value)
    assert "broken exited (3) while waiting for the broken program to be ready" in message
    assert "-cp <3 classpath entries>" in message and "a.jar" not in message
    assert "line 29" in message and "line 14" not in message      # the last 15 lines
    assert "First errors" not in message
    child.stop()


def test_a_broker_that_fails_names_the_first_error_before_its_shutdown_lines(tmp_path):
    """A broker logs why it stops (a port taken, a bad config), then many lines of its shutdown: the cause is said."""
    from lab.runtime.processes import Child
    lines = ["INFO starting", "ERROR [KafkaServer id=1] Fatal error during startup. (kafka.server.KafkaServer)",
             "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:20001: Address "
             "already in use.", *[f"INFO shutting down {i}" for i in range(40)]]
    log = tmp_path / "broker.log"
    child = Child("broker", [sys.executable, "-c", f"print({chr(10).join(lines)!r}); raise SystemExit(1)"], log)
    child.proc.wait(30)
    why = child.why()
    assert "First errors in its log:\nERROR [KafkaServer id=1] Fatal error during startup" in why
    assert "Address already in use" in why and why.rstrip().endswith("INFO shutting down 39")
    child.stop()


def test_free_ports_are_distinct_free_and_outside_the_systems_ephemeral_range():
    import socket
    from lab.runtime.ports import PORT_RANGE, free_ports
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = free_ports(12, avoid={20000})
    assert len(set(ports)) == 12 and all(p in PORT_RANGE and p != 20000 for p in ports)
    assert PORT_RANGE.stop <= 32768   # Linux and WSL2 hand out from 32768, macOS from 49152
    for port in ports:   # each can be bound now
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    taken.close()
