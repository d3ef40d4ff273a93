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
    monkeypatch.setattr(maven, "_fetch", lambda jars, label: (fetched.append(list(jars)), real(jars, label)))
    jar.unlink()
    monkeypatch.setattr(maven, "_checked", {})
    maven.classpath(CLIENTS)
    assert fetched == [["org.apache.kafka:kafka-clients:3.9.1"]] and jar.exists()
    monkeypatch.setattr(maven, "_checked", {})
    monkeypatch.setattr(maven, "_fetch", lambda jars, label: jar.write_bytes(b"not the pinned jar"))
    jar.write_bytes(b"not the pinned jar")
    with pytest.raises(LabError, match="does not match its pinned SHA-256"):
        maven.classpath(CLIENTS)


def test_a_pinned_jar_is_downloaded_checked_and_never_put_in_place_when_its_bytes_differ(cache):
    """The pinned sets need no resolver (the doctor installed alone has no Ivy): each jar comes straight from
    Maven Central, checked against its SHA-256 before it goes into place."""
    from maven_artifact.downloader import Downloader
    nop = "org.slf4j:slf4j-nop:1.7.36"
    pinned = maven.committed()["jars"][nop]
    with pytest.raises(LabError, match="does not match its pinned SHA-256"):
        maven._download(Downloader(), nop, "0" * 64)
    assert not maven.path_of(nop).exists() and not list(maven.path_of(nop).parent.iterdir())
    maven._fetch({nop: pinned}, "test")
    assert maven._sha256(maven.path_of(nop)) == pinned
    with pytest.raises(LabError, match="has no artifact org.slf4j:slf4j-nop:0.0.404"):
        maven._download(Downloader(), "org.slf4j:slf4j-nop:0.0.404", pinned)


def test_the_committed_lock_pins_the_default_lab():
    """Every set `make lab` fetches is in lab/jars.lock, so a fresh machine gets exactly those jars; the doctor's
    too, so that installed alone it never resolves."""
    from lab.cluster.kraft import KAFKA_VERSION
    from lab.doctor.facts import JARS
    from lab.runtime.programs import ECJ
    lock = json.loads(maven.LOCK.read_text())
    for wanted in ([ECJ], ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"],
                   [f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"], JARS):
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


def test_a_slow_fetch_says_how_far_it_is_at_least_every_few_seconds(monkeypatch, capsys):
    """First set-up on venue Wi-Fi: a line every PROGRESS_S with the jars and MB so far, never a silent minute."""
    import sys
    import time
    import types

    from lab.runtime import maven
    monkeypatch.setattr(maven, "PROGRESS_S", 0.2)
    monkeypatch.setitem(sys.modules, "maven_artifact.downloader", types.SimpleNamespace(Downloader=lambda: None))

    def slow(central, jar, sha256, got=None):   # one MB a jar, 0.3 s each
        time.sleep(0.3)
        got.add(2**20, jar=True)
    monkeypatch.setattr(maven, "_download", slow)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)   # a command, not a notebook's kernel
    maven._fetch({f"g:a{i}:1": "0" * 64 for i in range(8)}, "test")
    said = capsys.readouterr()
    lines = said.err.splitlines()   # stderr: a command's stdout is its report (the doctor's)
    assert not said.out
    assert lines[0].startswith("Fetching 8 test jars from Maven Central")
    assert any("of 8 jars" in line and "MB so far" in line for line in lines[1:-1]), lines
    assert lines[-1] == "  test: 8 jars, 8.0 MB"
    monkeypatch.setitem(sys.modules, "ipykernel", types.SimpleNamespace())   # in a notebook: stdout, not an error box
    maven._fetch({"g:b:1": "0" * 64}, "test")
    said = capsys.readouterr()
    assert said.out.startswith("Fetching 1 test jars") and not said.err
