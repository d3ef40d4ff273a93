"""Class archives (lab.runtime.class_archives): a classpath's first JVM lists its classes, a later start dumps them, every
start after that maps the archive; a failed dump is never used. On the real broker classpath, with real JVMs."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from lab.runtime import class_archives, processes
from lab.cluster import kafka_classpath
from lab.config import KAFKA_VERSION
from lab.runtime.jvm import java_executable


@pytest.fixture
def archives(tmp_path, monkeypatch):
    here = tmp_path / "class-archives"
    monkeypatch.setattr(class_archives, "folder", lambda: here)
    monkeypatch.delenv(class_archives.ENV, raising=False)
    return here


def usage(java: str, classpath: list[Path], options: list[str]) -> subprocess.CompletedProcess:
    """kafka.Kafka without a config: it loads its classes, prints its usage and exits (the JVM's output in stdout)."""
    return subprocess.run([java, *options, "-cp", os.pathsep.join(map(str, classpath)), "kafka.Kafka"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


def settled(seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while class_archives._dumping and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not class_archives._dumping, "the dump did not end"


def test_the_first_start_lists_its_classes_a_later_one_dumps_them_and_then_every_start_maps_the_archive(archives):
    java, jars = java_executable(), kafka_classpath(KAFKA_VERSION)
    first = class_archives.options(java, jars, processes.Child)
    assert len(first) == 1 and first[0].startswith("-XX:DumpLoadedClassList="), first
    assert "USAGE" in usage(java, jars, first).stdout
    listed = Path(first[0].split("=", 1)[1])
    assert "kafka/Kafka" in listed.read_text()
    # While the list may still grow (its JVM starting up), a start neither dumps nor lists again.
    assert class_archives.options(java, jars, processes.Child) == [] and not class_archives._dumping
    os.utime(listed, (time.time() - 60, time.time() - 60))
    assert class_archives.options(java, jars, processes.Child) == []   # this start as before; the dump beside it
    settled()
    names = sorted(p.name for p in archives.iterdir() if not p.name.endswith(".log"))
    name = class_archives.key(java, jars)
    assert names == [f"{name}.jars", f"{name}.jsa"], names   # no part file, no list left; its jars noted
    assert (archives / f"{name}.jars").read_text().split() == list(map(str, jars))
    mapped = class_archives.options(java, jars, processes.Child)
    assert f"-XX:SharedArchiveFile={archives / names[1]}" in mapped
    # -Xshare:on: the JVM refuses to start unless it maps the archive.
    run = usage(java, jars, [*mapped, "-Xshare:on"])
    assert "USAGE" in run.stdout and "shared archive" not in run.stdout.lower(), run


@pytest.mark.parametrize("ends", ["exit 3", "kill -9 $$"])
def test_a_dump_that_fails_is_never_used_and_a_killed_one_is_tried_again(archives, tmp_path, ends):
    """A Java whose dump exits with an error (noted: that classpath runs without an archive from then on), or is
    killed (a stopped lab: tried again later). Either may leave a part file behind: it is never used."""
    java = tmp_path / "java"
    half_written = "for a; do case $a in -XX:SharedArchiveFile=*) echo half > ${a#*=};; esac; done"
    java.write_text(f"#!/bin/sh\necho dump >> {tmp_path / 'dumps'}\n{half_written}\n{ends}\n")
    java.chmod(0o755)
    classpath = kafka_classpath(KAFKA_VERSION)[:2]
    name = class_archives.key(str(java), classpath)
    archives.mkdir()
    listed = archives / f"{name}.x.classlist"
    listed.write_text("java/lang/Object id: 0\n")
    class_archives._dump_in_background(str(java), os.pathsep.join(map(str, classpath)), name, listed, processes.Child,
                                       list(map(str, classpath)))
    settled()
    left = sorted(p.suffix for p in archives.iterdir())
    assert left == sorted([".classlist", ".log", *([".failed"] if "exit" in ends else [])]), left
    if "exit" in ends:
        assert class_archives.options(str(java), classpath, processes.Child) == []
    else:   # the list is there and quiet: the next start dumps again
        os.utime(listed, (time.time() - 60, time.time() - 60))
        class_archives.options(str(java), classpath, processes.Child)
        settled()
        assert (tmp_path / "dumps").read_text() == "dump\ndump\n"


def test_a_changed_jar_is_another_archive_and_the_switch_turns_archives_off(archives, tmp_path, monkeypatch):
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    before = class_archives.key("java", [jar])
    os.utime(jar, (1, 1))
    assert class_archives.key("java", [jar]) != before
    monkeypatch.setenv(class_archives.ENV, "0")
    assert class_archives.options("java", [jar], processes.Child) == [] and not archives.exists()


def test_the_jars_come_before_the_lab_classes_and_only_the_jars_are_archived(archives, tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(processes, "Child", lambda name, argv, *a, **kw: seen.setdefault("argv", argv))
    monkeypatch.setattr(class_archives, "options", lambda java, jars, spawn: seen.setdefault("jars", jars) and [])
    classes, jar = tmp_path / "classes", tmp_path / "b.jar"
    processes.spawn_java("x", [classes, jar], "Main", [], tmp_path / "x.log")
    assert seen["jars"] == [jar]
    argv = seen["argv"]
    assert argv[argv.index("-cp") + 1] == os.pathsep.join([str(jar), str(classes)])


def test_a_copy_of_the_same_java_elsewhere_maps_the_same_archive(tmp_path):
    """The lab's own runtime is installed in each checkout's virtual environment: a fresh clone's copy of the same
    build keys the same archive (HotSpot maps an archive dumped by another copy of its build), another build not."""
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"jar")

    def runtime(where: str, release: str, modules: int) -> str:
        home = tmp_path / where
        (home / "bin").mkdir(parents=True)
        (home / "lib").mkdir()
        (home / "bin" / "java").write_text("#!/bin/sh\n")
        (home / "release").write_text(release)
        (home / "lib" / "modules").write_bytes(b"m" * modules)
        return str(home / "bin" / "java")
    first = runtime("venv-a/java-runtime", 'JAVA_VERSION="21.0.8"\n', 100)
    again = runtime("venv-b/java-runtime", 'JAVA_VERSION="21.0.8"\n', 100)
    newer = runtime("venv-c/java-runtime", 'JAVA_VERSION="21.0.9"\n', 100)
    rebuilt = runtime("venv-d/java-runtime", 'JAVA_VERSION="21.0.8"\n', 101)
    keys = [class_archives.key(java, [jar]) for java in (first, again, newer, rebuilt)]
    assert keys[0] == keys[1] and len(set(keys)) == 3, keys


def test_a_class_list_no_start_wrote_for_a_week_is_pruned(tmp_path):
    old, new = tmp_path / "aaa.1.classlist", tmp_path / "bbb.2.classlist"
    for f in (old, new):
        f.write_text("java/lang/Object\n")
    os.utime(old, (1, 1))
    class_archives.prune(tmp_path)
    assert not old.exists() and new.exists()


def test_the_archives_used_last_are_kept_up_to_a_size(tmp_path):
    sizes = {"new": 600, "mid": 500, "old": 300}   # bytes, against a budget of 1 KB (kept_mb in MB: scaled below)
    for age, (name, size) in enumerate(sizes.items()):
        (tmp_path / f"{name}.jsa").write_bytes(b"a" * size)
        os.utime(tmp_path / f"{name}.jsa", (1000 - age, 1000 - age))
    class_archives.prune(tmp_path, kept_mb=1000 / 2**20)
    assert sorted(p.stem for p in tmp_path.glob("*.jsa")) == ["new"]   # new + mid is over: mid and old go
    (tmp_path / "new.jsa").write_bytes(b"a" * 5000)
    class_archives.prune(tmp_path, kept_mb=1000 / 2**20)
    assert (tmp_path / "new.jsa").exists()   # the last used stays, whatever its size


def test_an_archive_whose_jars_are_gone_is_pruned_first(tmp_path):
    """A deleted checkout's environment (its Spark jars) leaves an archive that can never map again: it goes
    before any archive in use, whatever the budget; one dumped before the lab noted its jars stays."""
    jar = tmp_path / "kept.jar"
    jar.write_bytes(b"jar")
    for name, jars in {"gone": [tmp_path / "deleted-venv" / "spark-core.jar", jar], "alive": [jar], "older": None}.items():
        (tmp_path / f"{name}.jsa").write_bytes(b"a" * 100)
        (tmp_path / f"{name}.dump.log").write_text("")
        if jars:
            (tmp_path / f"{name}.jars").write_text("\n".join(map(str, jars)) + "\n")
    class_archives.prune(tmp_path)
    assert sorted(p.stem for p in tmp_path.glob("*.jsa")) == ["alive", "older"]
    assert not (tmp_path / "gone.jars").exists() and not (tmp_path / "gone.dump.log").exists()


def test_a_jvm_whose_launcher_writes_the_classpath_dumps_with_that_classpath_from_its_folder(archives, tmp_path,
                                                                                           monkeypatch):
    """Spark's driver (lab.audit.spark): its start only lists or maps (dump=False); once it runs, the dump takes the
    classpath it ran with and its folder, and waits for free memory."""
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"jar")
    spawned = []
    spawn = lambda name, argv, log: spawned.append(argv) or (_ for _ in ()).throw(OSError("not started"))  # noqa: E731
    first = class_archives.options("java", [jar], spawn, dump=False)
    listed = Path(first[0].split("=", 1)[1])
    listed.write_text("java/lang/Object\n")
    os.utime(listed, (time.time() - 60, time.time() - 60))
    assert class_archives.options("java", [jar], spawn, dump=False) == [] and not spawned
    import psutil
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("M", (), {"available": 2**20})())
    class_archives.dump_when_ready("java", [jar], spawn, "rel/*:/abs/a.jar")
    assert not spawned                           # too little memory free: a later start tries again
    monkeypatch.undo()
    monkeypatch.setattr(class_archives, "folder", lambda: archives)
    class_archives.dump_when_ready("java", [jar], spawn, "rel/*:/abs/a.jar")
    assert len(spawned) == 1 and spawned[0][-2:] == ["-cp", "rel/*:/abs/a.jar"], spawned
