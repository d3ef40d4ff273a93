"""Jars from Maven Central without Maven (lab.runtime.maven): the lockfile, the Maven-layout cache, offline use."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from lab.runtime import maven
from lab.errors import LabError

CLIENTS = ["org.apache.kafka:kafka-clients:3.9.1"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache and an empty local lock; the committed lock is still read."""
    monkeypatch.setattr(maven, "REPOSITORY", tmp_path / "maven")
    monkeypatch.setattr(maven, "LOCAL_LOCK", tmp_path / "jars.lock")
    monkeypatch.setattr(maven, "_checked", {})
    monkeypatch.delenv(maven.UPDATE_LOCK_ENV, raising=False)   # new sets go to the local lock here
    return tmp_path


def no_ivy(*_args, **_kwargs):
    raise AssertionError("Ivy ran (the network would have been used)")


def test_a_new_set_is_resolved_pinned_and_then_served_from_the_cache_alone(cache, monkeypatch):
    monkeypatch.setattr(maven, "LOCK", cache / "committed.lock")    # pretend nothing is pinned yet
    jars = maven.classpath(CLIENTS)
    names = {p.name for p in jars}
    assert {"kafka-clients-3.9.1.jar", "zstd-jni-1.5.6-4.jar"} <= names
    assert all(p.is_relative_to(cache / "maven") for p in jars)     # the Maven layout:
    assert (cache / "maven/org/apache/kafka/kafka-clients/3.9.1/kafka-clients-3.9.1.jar").exists()
    pinned = json.loads((cache / "jars.lock").read_text())
    assert pinned["sets"][maven.set_key(CLIENTS)] == sorted(pinned["jars"])
    assert all(len(sha) == 64 for sha in pinned["jars"].values())
    monkeypatch.setattr(maven, "_checked", {})
    monkeypatch.setattr(maven, "_run_ivy", no_ivy)
    assert maven.classpath(CLIENTS) == jars                        # offline: no Ivy, same jars


def test_a_missing_jar_is_fetched_alone_and_a_changed_one_is_refused(cache, monkeypatch):
    monkeypatch.setattr(maven, "LOCK", cache / "committed.lock")
    jar = next(p for p in maven.classpath(CLIENTS) if p.name.startswith("kafka-clients"))
    fetched = []
    real = maven._fetch
    monkeypatch.setattr(maven, "_fetch", lambda jars, label: (fetched.append(jars), real(jars, label)))
    jar.unlink()
    monkeypatch.setattr(maven, "_checked", {})
    maven.classpath(CLIENTS)
    assert fetched == [["org.apache.kafka:kafka-clients:3.9.1"]] and jar.exists()
    monkeypatch.setattr(maven, "_checked", {})
    monkeypatch.setattr(maven, "_fetch", lambda jars, label: jar.write_bytes(b"not the pinned jar"))
    jar.write_bytes(b"not the pinned jar")
    with pytest.raises(LabError, match="does not match its pinned SHA-256"):
        maven.classpath(CLIENTS)


def test_the_committed_lock_pins_the_default_lab():
    """Every set `make lab` fetches is in lab/jars.lock, so a fresh machine gets exactly those jars."""
    from lab.cluster.kraft import KAFKA_VERSION
    from lab.runtime.programs import ECJ
    lock = json.loads(maven.LOCK.read_text())
    for wanted in ([ECJ], ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"],
                   [f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"]):
        assert any(set(wanted) <= set(key.split()) for key in lock["sets"]), wanted
    assert set().union(*map(set, lock["sets"].values())) == set(lock["jars"])


def test_errors_name_what_is_missing_or_unreachable():
    offline = "Host repo.example not found. url=https://repo.example/x.pom\n\t\tmodule not found: a#b;1"
    assert "could not be reached" in maven._explain(offline, ["a:b:1"])
    missing = "\t\tmodule not found: org.apache.kafka#kafka-clients;3.99.1\n"
    assert "has no artifact org.apache.kafka:kafka-clients:3.99.1" in maven._explain(missing, ["x"])
    with pytest.raises(LabError, match="not a group:artifact:version"):
        maven.set_key(["kafka-clients-3.9.1.jar"])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="cutting the network needs root")
def test_cached_jars_need_no_network(cache, monkeypatch):
    """The real code in a process without a network (unshare -n): the cached set works, a new one says why not."""
    monkeypatch.setattr(maven, "LOCK", cache / "committed.lock")
    maven.classpath(CLIENTS)
    code = (f"from lab.runtime import maven; from pathlib import Path; "
            f"maven.REPOSITORY = Path({str(cache / 'maven')!r}); maven.LOCAL_LOCK = Path({str(cache / 'jars.lock')!r}); "
            f"maven.LOCK = Path({str(cache / 'committed.lock')!r}); maven.CACHE_DIR = Path({str(cache)!r}); "
            f"print(len(maven.classpath({CLIENTS!r})))\n"
            f"try: maven.classpath(['org.apache.kafka:kafka-clients:3.8.1'])\n"
            f"except Exception as e: print(e)")
    run = subprocess.run(["unshare", "-n", sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[0] == str(len(maven.classpath(CLIENTS)))
    assert "could not be reached" in lines[-1]
