"""The pre-flight (`python -m lab check`, lab.commands.preflight): each check's verdict and what it tells to do."""
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

from lab.commands import preflight
from lab.runtime import maven

ROOT = Path(__file__).resolve().parent.parent


def test_too_little_memory_or_disk_fails_and_says_what_to_do(monkeypatch, tmp_path):
    Memory = namedtuple("Memory", "available")
    monkeypatch.setattr(preflight.psutil, "virtual_memory", lambda: Memory(1.2 * 2**30))
    low = preflight.memory()
    assert not low.ok and "1.2 GiB available" in low.line() and "close other programs" in low.line()
    monkeypatch.setattr(preflight.psutil, "virtual_memory", lambda: Memory(8 * 2**30))
    assert preflight.memory().ok
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(preflight, "WORK_DIR", tmp_path)
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda _path: Usage(0, 0, 1 * 2**30))
    full = preflight.disk()
    assert not full.ok and "prune" in full.fix and str(tmp_path) in full.found


def test_jars_of_other_lessons_missing_is_a_warning_with_the_way_to_fetch_them(monkeypatch, tmp_path):
    monkeypatch.setattr(maven, "REPOSITORY", tmp_path / "empty")
    check = preflight.jars()
    assert check.ok and check.warn and check.line().startswith("warn")
    assert f"0 of {len(maven.committed()['jars'])} jars" in check.found and "make fetch-all" in check.fix


def test_no_java_fails_and_the_broker_is_not_tried(monkeypatch):
    from lab.errors import LabError

    def no_java():
        raise LabError("No Java found: run make reinstall")
    monkeypatch.setattr("lab.runtime.jvm.current", no_java)
    monkeypatch.setattr(preflight, "broker", lambda: (_ for _ in ()).throw(AssertionError("broker tried")))
    monkeypatch.setattr(preflight, "CHECKS", (preflight.java, preflight.broker))
    lines = []
    results = preflight.run(out=lines.append)
    assert [r.ok for r in results] == [False, False] and "not tried: no Java" in lines[1]
    assert lines[-1] == "Not ready: java, broker (see -> above)."


def test_the_preflight_on_this_machine_starts_a_broker_and_passes():
    """The real command, as an attendee types it: every check, a broker that round-trips a record, exit 0."""
    run = subprocess.run([sys.executable, "-m", "lab", "check"], capture_output=True, text=True, cwd=ROOT,
                         timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert [line.split()[1] for line in lines[:-1] if not line.startswith(" ")] == [
        "python", "java", "memory", "disk", "jars", "ports", "broker"], run.stdout
    assert "round-tripped a record" in run.stdout and lines[-1] == "Ready for the course.", run.stdout
    assert "|FAIL|" not in run.stderr and "rdkafka" not in run.stderr, run.stderr   # quiet: no client left open
