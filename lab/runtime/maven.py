"""Java classpaths from Maven Central: pinned by a lockfile, cached in the Maven layout, offline once cached.

`classpath(coordinates)` returns the jars of a set of `group:artifact:version` coordinates. What a set
resolves to, each jar with its SHA-256, is pinned in `lab/jars.lock` (committed: the sets the course uses)
or, for a set first asked for on this machine (a version a learner chose), in the cache's own jars.lock.
The jars live under `<cache>/maven` in the standard Maven layout; when they are there and match their
checksums, nothing touches the network.

Resolving a new set is Apache Ivy's job: the Ivy jar that pyspark ships (Spark's own `--packages`
resolver), run on the lab's Java, with a cache of its own for each run (the repository is the only lasting copy). Chosen over a pure-Python resolver because it reads POMs the way Spark
and Maven do (parents, imported BOMs, dependency management): the pure-Python one tried here resolved
Kafka 4.3.1's broker with kafka-clients 3.8.0 and test-scoped jars. Where two paths of the graph ask for
different versions Ivy takes the newest (Maven the nearest); a coordinate asked for directly is forced,
so it wins as it does in Maven.

A pinned set needs no resolver: its jars are downloaded one by one from Maven Central (the repository and its
layout are the maven-artifact package's), checked against their SHA-256 before they go into place. That is how
the doctor installed alone, without pyspark, gets its jars, and how the lab gets any locked jar it lacks.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ..config import CACHE_DIR, LAB_DIR
from ..errors import LabError
from .files import replacing

LOCK = LAB_DIR / "jars.lock"      # committed; `python -m lab lock` style updates: see below
LOCAL_LOCK = CACHE_DIR / "jars.lock"               # sets first resolved on this machine
REPOSITORY = CACHE_DIR / "maven"                   # a Maven-layout file repository
# Set to 1 (developers) to record newly resolved sets in the committed lab/jars.lock instead of the cache's.
UPDATE_LOCK_ENV = "KAFKA_LAB_UPDATE_LOCK"

_checked: dict[str, list[Path]] = {}               # sets whose jars this process has verified
DOWNLOAD_TIMEOUT_S = 60                            # per request: a stalled connection fails instead of hanging
PROGRESS_S = 10                                    # a progress line at least this often while jars download


def classpath(coordinates: list[str], *, label: str = "classpath") -> list[Path]:
    """The runtime jars of `coordinates` (they and what they depend on), downloading once."""
    key = set_key(coordinates)
    if key in _checked:
        return _checked[key]
    jars = locked(key)
    if jars is None:
        jars = _resolve(coordinates, label)
        _record(key, jars)
    missing = not_cached(jars)
    if missing:
        _fetch({jar: jars[jar] for jar in missing}, label)
        for jar in missing:
            if not _matches(path_of(jar), jars[jar]):
                raise LabError(f"{path_of(jar)} does not match its pinned SHA-256 ({jars[jar][:12]}...): "
                               "delete it and run again, the lab fetches it anew.")
    paths = [path_of(jar) for jar in jars]
    _checked[key] = paths
    return paths


def set_key(coordinates: list[str]) -> str:
    for c in coordinates:
        if not re.fullmatch(r"[\w.\-]+:[\w.\-]+:[\w.\-]+(:[\w.\-]+)?", c):
            raise LabError(f"{c!r} is not a group:artifact:version coordinate.")
    return " ".join(sorted(set(coordinates)))


def locked(key: str) -> dict[str, str] | None:
    """{jar coordinate: sha256} pinned for a set, from the committed lock or this machine's."""
    for lock in (LOCK, LOCAL_LOCK):
        data = _read(lock)
        if key in data["sets"]:
            return {jar: data["jars"][jar] for jar in data["sets"][key]}
    return None


def committed() -> dict:
    """lab/jars.lock: {"jars": {coordinate: sha256}, "sets": {set key: [coordinates]}} (the sets the course uses)."""
    return _read(LOCK)


def not_cached(jars: dict[str, str]) -> list[str]:
    """The jars of {coordinate: sha256} that the cache lacks, or holds with another checksum."""
    return [jar for jar, sha in jars.items() if not _matches(path_of(jar), sha)]


def cache_all() -> int:
    """Every set the course uses (lab/jars.lock) in the cache, fetching what is missing; returns the jars' count."""
    sets = committed()["sets"]
    for key in sets:
        classpath(key.split(" "), label="the course's")
    return len(committed()["jars"])


def path_of(jar: str) -> Path:
    """group:artifact:version[:classifier] -> its file in the Maven layout."""
    group, artifact, version, *classifier = jar.split(":")
    name = f"{artifact}-{version}" + (f"-{classifier[0]}" if classifier else "") + ".jar"
    return REPOSITORY.joinpath(*group.split("."), artifact, version, name)


def _read(lock: Path) -> dict:
    if not lock.exists():
        return {"jars": {}, "sets": {}}
    try:
        return json.loads(lock.read_text())
    except ValueError as exc:
        raise LabError(f"{lock} is not valid JSON ({exc}): delete it (the cache's) or restore it (the lab's).")


def _lock_to_write() -> Path:
    return LOCK if os.environ.get(UPDATE_LOCK_ENV) == "1" else LOCAL_LOCK


def _record(key: str, jars: dict[str, str]) -> None:
    lock = _lock_to_write()
    data = _read(lock)
    data["sets"][key] = sorted(jars)
    data["jars"].update(jars)
    data = {"jars": dict(sorted(data["jars"].items())), "sets": dict(sorted(data["sets"].items()))}
    with replacing(lock) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")


def _matches(path: Path, sha256: str) -> bool:
    return path.exists() and _sha256(path) == sha256


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# ---------------------------------------------------------------- Ivy

IVY_MODULE = """<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">
  <info organisation="kafka-failure-lab" module="classpath"/>
  <configurations><conf name="default"/></configurations>
  <dependencies>
{deps}
  </dependencies>
</ivy-module>
"""


def _resolve(coordinates: list[str], label: str) -> dict[str, str]:
    """Resolve a new set with Ivy (direct coordinates forced); its jars go to the repository."""
    deps = [_dependency(c, 'force="true" conf="default->default"') for c in coordinates]
    print(f"Resolving {label} from Maven Central (once; pinned in {_lock_to_write()}) ...", flush=True)
    found = _run_ivy(deps, label, coordinates)
    return {jar: _sha256(path_of(jar)) for jar in found}


def _fetch(jars: dict[str, str], label: str) -> None:
    """Download exactly these jars ({coordinate: sha256}, no dependencies of theirs) into the repository, four at
    a time; a jar whose bytes differ from its pin never goes into place."""
    say = _progress_line()
    say(f"Fetching {len(jars)} {label} jars from Maven Central (once; cached in {REPOSITORY}) ...")
    from maven_artifact.downloader import Downloader
    central = Downloader()   # its default repository is Maven Central
    got, done = _Tally(), threading.Event()

    def report() -> None:   # a line every PROGRESS_S while it downloads: a slow network never looks stuck
        while not done.wait(PROGRESS_S):
            say(f"  {label}: {got.jars} of {len(jars)} jars, {got.bytes / 2**20:.1f} MB so far ...")
    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda item: _download(central, *item, got), jars.items()))
    finally:
        done.set()
        reporter.join()   # its last line comes before the total, never after it
    say(f"  {label}: {got.jars} jars, {got.bytes / 2**20:.1f} MB")


class _Tally:
    """Jars and bytes downloaded so far, added to from the download threads."""

    def __init__(self):
        self.jars, self.bytes, self._lock = 0, 0, threading.Lock()

    def add(self, nbytes: int = 0, jar: bool = False) -> None:
        with self._lock:
            self.bytes += nbytes
            self.jars += jar


def _progress_line():
    """Where a download's progress goes: stdout in a notebook's kernel (stderr shows there as an error box), else
    stderr (a command's stdout is its report: the doctor's)."""
    stream = sys.stdout if "ipykernel" in sys.modules else sys.stderr
    return lambda line: print(line, file=stream, flush=True)


def _download(central, jar: str, sha256: str, got: _Tally | None = None) -> None:
    from maven_artifact.artifact import Artifact
    group, artifact, version, *classifier = jar.split(":")
    url = Artifact(group, artifact, version, classifier[0] if classifier else None).uri(central.resolver.base)

    def failed(_url, error):
        raise LabError(_explain(str(error), [jar]) if "404" not in str(error) else
                       f"Maven Central has no artifact {jar} ({url}).")
    # requests trusts certifi's CAs unless told: SSL_CERT_FILE (a proxy's CA) counts here as for pip
    verify = os.environ.get("SSL_CERT_FILE") or os.environ.get("REQUESTS_CA_BUNDLE") or True
    with central.requestor.request(url, failed, stream=True, timeout=DOWNLOAD_TIMEOUT_S, verify=verify) as response:
        with replacing(path_of(jar)) as tmp:
            digest = hashlib.sha256()
            with open(tmp, "wb") as out:
                for chunk in response.iter_content(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    if got is not None:
                        got.add(len(chunk))
            if digest.hexdigest() != sha256:   # raised inside: the half-made file is dropped, never renamed in
                raise LabError(f"{url} does not match its pinned SHA-256 ({sha256[:12]}...): not used.")
    if got is not None:
        got.add(jar=True)


def _dependency(coordinate: str, options: str) -> str:
    group, artifact, version, *classifier = coordinate.split(":")
    attrs = f"org={quoteattr(group)} name={quoteattr(artifact)} rev={quoteattr(version)} {options}"
    if not classifier:
        return f"    <dependency {attrs}/>"
    return (f"    <dependency {attrs}><artifact name={quoteattr(artifact)} type=\"jar\" ext=\"jar\" "
            f"m:classifier={quoteattr(classifier[0])}/></dependency>")


def _run_ivy(deps: list[str], label: str, asked: list[str]) -> list[str]:
    """Run Ivy on an ivy.xml of `deps`; move what it retrieved into the repository; return those jars."""
    from .jvm import java_executable, trust_options
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ivy-", dir=CACHE_DIR) as tmp:
        module = Path(tmp) / "ivy.xml"
        module.write_text(IVY_MODULE.format(deps="\n".join(deps)))
        out = Path(tmp) / "out"
        run = subprocess.run(
            # Ivy's own cache lives and dies with this run: the repository is the one cache (no second copy of
            # every jar), and two lab processes resolving at once share nothing of Ivy's.
            [java_executable(), *trust_options(), f"-Divy.default.ivy.user.dir={tmp}/ivy", "-jar", str(ivy_jar()),
             "-ivy", str(module), "-cache", f"{tmp}/cache", "-confs", "default",
             "-types", "jar", "bundle", "-warn",
             "-retrieve", f"{out}/[organisation]/[artifact]/[revision]/[artifact]-[revision](-[classifier]).[ext]"],
            capture_output=True, text=True)
        if run.returncode != 0:
            raise LabError(_explain(run.stdout + run.stderr, asked))
        found = []
        for jar in sorted(out.rglob("*.jar")):
            group, artifact, version, name = jar.relative_to(out).parts
            classifier = name[len(f"{artifact}-{version}"):-len(".jar")].lstrip("-")
            coordinate = ":".join([group, artifact, version] + ([classifier] if classifier else []))
            target = path_of(coordinate)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(jar), target)
            found.append(coordinate)
    return found


def ivy_jar() -> Path:
    try:
        import pyspark
    except ImportError:   # the doctor installed alone: its set is pinned, only another set needs resolving
        raise LabError("resolving a set of jars the lock does not pin needs the whole lab (pyspark's Ivy): "
                       "install it (`make install`), or use the pinned versions.") from None
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise LabError("pyspark ships no Ivy jar here: reinstall the lab (`make reinstall`).")
    return jars[-1]


def _explain(output: str, coordinates: list[str]) -> str:
    # Ivy names a module org#name;rev: say it the way Maven coordinates are written
    missing = sorted({f"{g}:{a}:{v}" for g, a, v in re.findall(r"module not found: ([^#\s]+)#([^;\s]+);(\S+)", output)})
    if re.search(r"Host \S+ not found|UnknownHost|Network is unreachable|Connection refused|timed out|"
                 r"server access error|Failed to resolve|Name or service not known|name resolution", output, re.I):
        return ("Maven Central could not be reached, so the jars could not be fetched. "
                "Connect to the network once; afterwards the cached jars are used offline.")
    if missing:
        return (f"Maven Central has no artifact {', '.join(missing)}. "
                f"Check the version you asked for ({', '.join(coordinates)}).")
    tail = "\n".join(line for line in output.splitlines() if line.strip())[-1500:]
    return f"Ivy could not resolve {', '.join(coordinates)}:\n{tail}"
