"""Run lab/java/ClusterFacts.java against a cluster and return the raw facts it read (a JSON-able dict).

The collector only reads (Admin describe/list calls, an assign()-only consumer without group.id that never
commits). It is compiled once per source hash into the cache: a single-file launch would compile on every run.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..config import CACHE_DIR, KAFKA_VERSION
from ..errors import LabError
from ..jvm import java_executable
from ..programs import compile_java, write_shared

SOURCE = Path(__file__).resolve().parent.parent / "java" / "ClusterFacts.java"

# What to do, by the step that failed and the words in the error.
ADVICE = [
    ("config", "", "fix or remove that key in the properties file"),
    ("connect", "Authentication", "check the SASL/SSL settings (user, password, mechanism, truststore)"),
    ("connect", "SslAuthentication", "check the truststore and the broker's certificate"),
    ("connect", "Authorization", "the principal may not describe the cluster: grant it DESCRIBE on the cluster"),
    ("connect", "", "check the bootstrap address and that the broker is up and reachable from here"),
]


def compiled(classpath: list[Path]) -> Path:
    """The folder holding ClusterFacts.class, compiled once per source (and classpath) hash."""
    key = hashlib.sha256(SOURCE.read_bytes() + KAFKA_VERSION.encode()).hexdigest()[:16]
    folder = CACHE_DIR / "java-classes" / f"ClusterFacts-{key}"
    if not (folder / "ClusterFacts.class").exists():
        tmp = Path(tempfile.mkdtemp(prefix="ClusterFacts-", dir=CACHE_DIR))
        compile_java([SOURCE], classpath, tmp)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(folder)
        except OSError:   # compiled at the same time by another process: theirs is the same
            pass
    return folder


def read_facts(bootstrap: str, *, jmx: str | None = None, command_config: Path | None = None,
               timeout_s: float = 20) -> dict:
    """Run the collector; one LabError (which step, what to do) when the cluster cannot be read at all."""
    from ..cluster import kafka_classpath
    classpath = kafka_classpath(KAFKA_VERSION)
    argv = [java_executable(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Dlog4j2.level=OFF", "-Dlog4j2.rootLevel=OFF", "-Dlog4j2.configurationFile=" + str(_quiet_log4j()),
            "-cp", os.pathsep.join(map(str, [compiled(classpath), *classpath])), "ClusterFacts",
            "--bootstrap", bootstrap, "--timeout-ms", str(int(timeout_s * 1000))]
    if command_config:
        argv += ["--command-config", str(command_config)]
    if jmx:
        argv += ["--jmx", jmx]
    try:
        run = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout_s * 6 + 30)
    except subprocess.TimeoutExpired:
        raise LabError(f"lab doctor: reading {bootstrap} did not finish in {timeout_s * 6 + 30:.0f} s: "
                       "check the cluster's health, or raise the timeout") from None
    facts = _last_json(run.stdout)
    if facts is None:
        raise LabError(f"lab doctor: the collector failed (exit {run.returncode}): {run.stderr.strip()[-600:]}")
    if "fatal" in facts:
        step, error = facts["fatal"]["step"], facts["fatal"]["error"]
        if step == "connect" and re.search(r"Authentication|Authorization|Ssl|SASL", error):
            from ..connection import (
                explain_failure,  # it knows the security settings: names the user and file
            )
            raise explain_failure(f"lab doctor, step '{step}'", bootstrap, error)
        advice = next(a for s, word, a in ADVICE if s == step and word in error) if step in ("config", "connect") \
            else "see the error"
        raise LabError(f"lab doctor, step '{step}' ({bootstrap}): {error.splitlines()[0][:300]} -> {advice}.")
    return facts


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _quiet_log4j() -> Path:
    """The client libraries log to log4j2: nothing on the terminal (the JSON is the output)."""
    path = CACHE_DIR / "java-classes" / "doctor-log4j2.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_shared(path, "status = error\nrootLogger.level = OFF\n")
    return path
