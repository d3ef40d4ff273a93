"""Run lab/java/ClusterFacts.java against a cluster and return the raw facts it read (a JSON-able dict).

The collector only reads (Admin describe/list calls, an assign()-only consumer without group.id that never
commits). It is compiled once per source hash into the cache: a single-file launch would compile on every run.
Its stdout is the one JSON document; its stderr carries `LAB {"kind": "progress", ...}` lines while it reads.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..config import KAFKA_VERSION
from ..errors import LabError
from ..record.evidence import lab_lines
from ..runtime import maven
from ..runtime.jvm import java_executable
from ..runtime.programs import JAVA_DIR, compile_sources, settings_file

SOURCES = [JAVA_DIR / "ClusterFacts.java", JAVA_DIR / "CoordinatorLogs.java", JAVA_DIR / "GroupRecords.java",
           JAVA_DIR / "StreamsGroups.java", JAVA_DIR / "Lab.java"]
# What the collector runs on: the clients, and the coordinators' record classes that decode the internal topics
# (their dependencies come along: 28 MB, pinned in lab/jars.lock); slf4j-nop: the clients log nowhere.
JARS = [f"org.apache.kafka:kafka-clients:{KAFKA_VERSION}", f"org.apache.kafka:kafka-group-coordinator:{KAFKA_VERSION}",
        f"org.apache.kafka:kafka-transaction-coordinator:{KAFKA_VERSION}", "org.slf4j:slf4j-nop:1.7.36"]

# What to do, by the step that failed and the words in the error.
ADVICE = [
    ("config", "", "fix or remove that key in the properties file"),
    ("connect", "Authentication", "check the SASL/SSL settings (user, password, mechanism, truststore)"),
    ("connect", "SslAuthentication", "check the truststore and the broker's certificate"),
    ("connect", "Authorization", "the principal may not describe the cluster: grant it DESCRIBE on the cluster"),
    ("connect", "", "check the bootstrap address and that the broker is up and reachable from here"),
]


def read_facts(bootstrap: str, *, jmx: str | None = None, command_config: Path | None = None,
               timeout_s: float = 20, max_read_bytes: int | None = None, progress=None) -> dict:
    """Run the collector; one LabError (which step, what to do) when the cluster cannot be read at all.

    `max_read_bytes` bounds each internal topic's read (the collector's default: 256 MiB); `progress`, if given,
    is called (on this thread) with each progress event the collector reports, a dict."""
    classpath = collector()
    given = {"bootstrap.servers": bootstrap, "lab.timeout.ms": int(timeout_s * 1000), "lab.jmx": jmx,
             "lab.command.config": command_config, "lab.max.read.bytes": max_read_bytes}
    limit_s = timeout_s * 6 + 30
    with tempfile.TemporaryDirectory(prefix="lab-doctor-") as folder:   # its settings: a file, as every program's
        settings = settings_file(Path(folder), "cluster-facts", {k: v for k, v in given.items() if v is not None},
                                 java=False)   # the security settings are the command config's, checked there
        argv = [java_executable(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-cp", os.pathsep.join(map(str, classpath)), "ClusterFacts", str(settings)]
        returncode, stdout, stderr = _run(argv, limit_s, progress or (lambda event: None))
    if returncode is None:
        raise LabError(f"lab doctor: reading {bootstrap} did not finish in {limit_s:.0f} s: "
                       "check the cluster's health, or raise the timeout")
    facts = _last_json(stdout)
    if facts is None:
        raise LabError(f"lab doctor: the collector failed (exit {returncode}): {stderr.strip()[-600:]}")
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


def collector() -> list[Path]:
    """The collector's classpath, its compiled classes first: its jars fetched and its sources compiled once, into
    the cache (a container image does this when it is built, and runs read-only after)."""
    classpath = maven.classpath(JARS, label=f"doctor-{KAFKA_VERSION}")
    return [compile_sources(SOURCES, classpath, label=f"ClusterFacts-{KAFKA_VERSION}"), *classpath]


def _run(argv: list[str], limit_s: float, progress) -> tuple[int | None, str, str]:
    """Run the collector for at most `limit_s`, handing each progress line of its stderr to `progress` as it comes.
    (exit code or None when it was killed at the limit, stdout, the rest of stderr)."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    events: queue.Queue = queue.Queue()
    stderr = collections.deque(maxlen=200)   # the tail is enough for an error message
    stdout: list[str] = []

    def read_stderr():
        for line in process.stderr:
            rows = lab_lines(line)   # the lab's one evidence-line protocol
            if rows:
                events.put(rows[0])
            else:
                stderr.append(line)
        events.put(None)   # end of stderr: the collector is done or gone

    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: stdout.append(process.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + limit_s
    try:
        # the callback runs here, not on the reader thread: a caller's exception stops the run
        while (event := events.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            progress(event)
        returncode = process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except (queue.Empty, subprocess.TimeoutExpired):
        returncode = None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for reader in readers:
        reader.join()
    return returncode, "".join(stdout), "".join(stderr)


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None

