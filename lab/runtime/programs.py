"""Real Kafka Streams (or plain Java client) programs at a chosen version.

A program is a few small Java sources under lab/java/, compiled at run time
against the pinned jars of one Kafka version (cached by source hash), and run
as its own JVM so a notebook can start, stop and kill it. Its log is parsed
into the events the failure notebooks talk about (lab.record.evidence).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import maven
from .versions import parse_version
from ..config import CACHE_DIR, LAB_DIR
from ..connection import java_security, write_properties
from ..errors import LabError
from ..record import evidence
from .files import aside, into_place, write_shared
from .jvm import java_executable
from .log4j import PROGRAMS as LOG4J
from .platforms import rocksdb_for
from .processes import Child, spawn_java

JAVA_DIR = LAB_DIR / "java"

# One logging binding for every version: all Kafka releases the lab uses speak slf4j 1.7.
LOGGING = ["org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25"]



def streams_classpath(version: str, extra: list[str] = (), *, stores: bool = True, machine: str | None = None,
                      system: str | None = None) -> list[Path]:
    """kafka-streams (with kafka-clients) at `version`, plus a logging binding. For an app with state `stores`, on
    a platform (this one unless `machine`/`system` say otherwise) whose native library its RocksDB lacks, the
    rocksdbjni lab.runtime.platforms pins (or its refusal); a stateless app never loads RocksDB and runs anywhere."""
    parse_version(version)
    pin = rocksdb_for(version, machine or platform.machine(), system or sys.platform) if stores else None
    rocksdb = [f"org.rocksdb:rocksdbjni:{pin}"] if pin else []
    jars = maven.classpath([f"org.apache.kafka:kafka-streams:{version}", *LOGGING, *rocksdb, *extra],
                           label=f"kafka-streams-{version}")
    # The direct coordinate wins; should the bundled rocksdbjni come along too, it must not shadow the pin.
    return [j for j in jars if not (pin and j.name.startswith("rocksdbjni-") and j.name != f"rocksdbjni-{pin}.jar")]


def clients_classpath(version: str) -> list[Path]:
    parse_version(version)
    return maven.classpath([f"org.apache.kafka:kafka-clients:{version}", *LOGGING],
                           label=f"kafka-clients-{version}")


ECJ = "org.eclipse.jdt:ecj:3.40.0"  # the Eclipse compiler: runs on Java 17+, compiles Java 17 sources


def compile_java(sources: list[Path], classpath: list[Path], classes: Path) -> None:
    """Compile `sources` against `classpath` into `classes` with ECJ; a LabError with its errors if any."""
    compiler = maven.classpath([ECJ], label="ecj")
    classes.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([java_executable(), "-jar", str(compiler[0]), "-17", "-nowarn", "-encoding", "UTF-8",
                          "-proc:none", "-d", str(classes), "-cp", os.pathsep.join(map(str, classpath)),
                          *map(str, sources)], capture_output=True, text=True)
    if run.returncode != 0:
        names = ", ".join(Path(s).name for s in sources)
        raise LabError(f"Compiling {names} failed:\n{(run.stdout + run.stderr)[-2000:]}")


def compile_sources(sources: list[Path], classpath: list[Path], label: str) -> Path:
    """Compile the sources against the classpath once (compile_java); return the classes folder."""
    digest = hashlib.sha256()
    for source in sorted(sources):
        digest.update(Path(source).read_bytes())
    digest.update("\n".join(p.name for p in classpath).encode())
    classes = CACHE_DIR / "classes" / f"{label}-{digest.hexdigest()[:16]}"
    if not (classes / ".complete").exists():
        # compiled aside, then renamed into place: two lab processes (two notebooks) compiling the same sources
        # at once must not let a JVM load a class file the other is still writing
        made = aside(classes)
        shutil.rmtree(made, ignore_errors=True)
        compile_java(sources, classpath, made)
        (made / ".complete").touch()
        # the other process was first (or an unfinished folder from a crash): use what is there, or start over
        if not into_place(made, classes) and not (classes / ".complete").exists():
            shutil.rmtree(classes, ignore_errors=True)
            return compile_sources(sources, classpath, label)
    return classes


def settings_file(folder: Path, name: str, settings: dict, *, java: bool = True) -> Path:
    """Write a program's settings where it reads them, as its one argument: `bootstrap.servers`, `lab.<name>` keys
    for the program itself, and (Java) the rest as its Kafka configs. Java reads it with Lab.load, Python with
    lab.apps.settings. A Java client also gets KAFKA_LAB_CLIENT_PROPERTIES' security settings in Java's names
    (0600: a password); a Python one reads them itself (lab.connection.kafka_config)."""
    security = java_security() if java and "bootstrap.servers" in settings else {}
    return write_properties(folder / f"{name}.properties", {**security, **settings})


@dataclass
class JavaProgram:
    """One JVM running `main_class` from lab/java sources against Kafka `version`."""

    name: str
    version: str
    main_class: str
    sources: list[str]                 # file names under lab/java/
    properties: dict = field(default_factory=dict)  # written to a file, passed as args[0]
    folder: Path = Path(".")
    args: list[str] = field(default_factory=list)
    streams: bool = True               # kafka-streams classpath (else kafka-clients only)
    stores: bool = True                # a Streams app with state stores (RocksDB): see streams_classpath
    heap: str = "256m"
    jvm_options: list = field(default_factory=list)

    def __post_init__(self):
        self.folder = Path(self.folder)
        self.process: Child | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.name}.log"

    def start(self) -> Child:
        if self.process and self.process.alive():
            raise LabError(f"{self.name} is already running.")
        cp = streams_classpath(self.version, stores=self.stores) if self.streams else clients_classpath(self.version)
        classes = compile_sources([JAVA_DIR / s for s in self.sources], cp,
                                  label=f"{self.main_class}-{self.version}")
        self.folder.mkdir(parents=True, exist_ok=True)
        props = settings_file(self.folder, self.name, self.properties)
        write_shared(self.folder / "log4j.properties", LOG4J)
        self.starts += 1
        # RocksDB unpacks its 15 MB native library into java.io.tmpdir and a killed JVM leaves it there:
        # the run folder's tmp/ goes when the run folder is pruned.
        tmp = self.folder / "tmp"
        tmp.mkdir(exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(f"===== lab: start #{self.starts} of {self.name} (Kafka {self.version})\n")
        self.process = spawn_java(
            self.name, [classes, *cp], self.main_class, [str(props), *self.args], self.log_path,
            heap=self.heap,
            # UTC: lab.record.evidence reads every log stamp as UTC.
            jvm_options=[f"-Dlog4j.configuration=file:{self.folder / 'log4j.properties'}",
                         "-Duser.timezone=UTC", f"-Djava.io.tmpdir={tmp}", *self.jvm_options])
        return self.process

    def stop(self, timeout: float = 30) -> None:
        if self.process:
            self.process.stop(timeout)

    def kill(self) -> None:
        if self.process:
            self.process.kill()

    def alive(self) -> bool:
        return bool(self.process and self.process.alive())

    def events(self, patterns=None) -> list[dict]:
        """Its log as events (lab.record.evidence.java_events), tagged with program and version."""
        return [{**e, "program": self.name, "version": self.version}
                for e in evidence.java_events(self.log_path, patterns)]

    def lab_lines(self, **match) -> list[dict]:
        """Its `LAB {json}` evidence rows (lab.record.evidence.lab_lines)."""
        return evidence.lab_lines(self.log_path, **match)


def idle_producer(run, name: str, version: str, txn_id: str, go, prefix: str, **props):
    """lab/java/IdleTransactionalProducer.java at kafka-clients `version`, adopted by `run` (a lab.toolbox.Run): one transaction
    per record to the topic named like its transactional.id, idle until the file `go` exists, then more."""
    return run.program(JavaProgram(name, version, "IdleTransactionalProducer",
                                   ["IdleTransactionalProducer.java", "Lab.java"],
                                   properties={"bootstrap.servers": run.bootstrap, "transactional.id": txn_id,
                                               "lab.topic": txn_id, "lab.go.file": go, "lab.id.prefix": prefix,
                                               **props}, streams=False, heap="128m"))
