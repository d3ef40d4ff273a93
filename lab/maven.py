"""Resolve Java classpaths from Maven Central with the machine's `mvn`.

Each distinct set of coordinates gets a tiny generated pom and a folder of
jars under the cache; a `.complete` marker makes later calls instant.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

from .config import CACHE_DIR
from .errors import LabError

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-failure-lab</groupId><artifactId>classpath</artifactId><version>1</version>
  <dependencies>
{deps}
  </dependencies>
</project>
"""
DEP = "    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"


def classpath(coordinates: list[str], *, label: str = "classpath") -> list[Path]:
    """Return the runtime jars of `group:artifact:version` coordinates, downloading once."""
    key = hashlib.sha256("\n".join(sorted(coordinates)).encode()).hexdigest()[:16]
    folder = CACHE_DIR / "classpaths" / f"{label}-{key}"
    jars = folder / "jars"
    if not (folder / ".complete").exists():
        _resolve(coordinates, folder, label)
    return sorted(jars.glob("*.jar"))


def _resolve(coordinates: list[str], folder: Path, label: str) -> None:
    if shutil.which("mvn") is None:
        raise LabError("Maven (`mvn`) is not on PATH: install it (Debian: apt-get install maven) "
                       "so the lab can fetch Kafka jars from Maven Central.")
    deps = []
    for c in coordinates:
        g, a, v = c.split(":")
        deps.append(DEP.format(g=g, a=a, v=v))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(POM.format(deps="\n".join(deps)))
    print(f"Fetching {label} jars from Maven Central (once; cached in {folder}) ...", flush=True)
    run = subprocess.run(
        ["mvn", "-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime",
         "-DoutputDirectory=jars"],
        cwd=folder, capture_output=True, text=True)
    if run.returncode != 0:
        raise LabError(_explain(run.stdout + run.stderr, coordinates))
    (folder / ".complete").touch()


def _explain(output: str, coordinates: list[str]) -> str:
    missing = re.search(r"Could not find artifact (\S+)|(\S+) was not found in", output)
    if missing:
        return (f"Maven Central has no artifact {missing.group(1) or missing.group(2)}. "
                f"Check the version you asked for ({', '.join(coordinates)}).")
    if re.search(r"Unknown host|Network is unreachable|Connection refused|timed out|Could not transfer", output):
        return ("Maven Central could not be reached, so the jars could not be fetched. "
                "Connect to the network once; afterwards the cached jars are used offline.")
    tail = "\n".join(line for line in output.splitlines() if "ERROR" in line)[:1500]
    return f"Maven could not resolve {', '.join(coordinates)}:\n{tail}"
