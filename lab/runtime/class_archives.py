"""Class-data sharing for the lab's JVMs: a broker or a Streams app starts from an archive of its classes.

A notebook starts dozens of short-lived JVMs, and each spends most of its start loading, parsing and verifying the
same classes from the same jars. A CDS archive holds them ready to map: a 4.3.1 broker started in 2.3 s with 1.9
CPU-s instead of 3.6 s with 3.3 CPU-s (Java 17, 2 cores). The archive is made from what a real run loaded:

1. the first JVM of a classpath writes the classes it loads (-XX:DumpLoadedClassList);
2. a later start, once that list has stopped growing, dumps a static archive from it in the background
   (-Xshare:dump, to a part file renamed into place only when the dump exited cleanly: a JVM that maps a
   truncated archive crashes);
3. every start after that maps the archive (-XX:SharedArchiveFile). A JVM whose classpath or Java differ
   ignores it quietly and loads its classes as usual.

One archive per Java and classpath (the jars' sizes and times included), in the lab's cache. Static archives
need no archive of the Java runtime's own (the bundled runtime has none), on Java 17 to 21, on every platform.
A failed dump leaves a note and the classpath runs without an archive. KAFKA_LAB_CLASS_ARCHIVES=0 turns it off.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from pathlib import Path

from ..config import CACHE_DIR
from .files import into_place

ENV = "KAFKA_LAB_CLASS_ARCHIVES"
QUIET_FOR_S = 10.0      # a class list unchanged this long: the JVM that writes it has started up
DUMP_TIMEOUT_S = 180.0
DUMP_NEEDS_MB = 1200    # memory free before a dump starts: Spark's driver classes took 870 MB to dump (RESULTS.md)
LIST_KEPT_S = 7 * 86400   # a class list whose classpath has not started since is removed with the archives' prune
KEPT_MB = 2000          # archives kept, the least used lately go first: 40 to 70 MB each, and Spark's driver's 170 MB
                        # for each environment (a suite on 1.2 GB dumped four of its archives again)
_dumping: set[str] = set()
_lock = threading.Lock()


def folder() -> Path:
    return CACHE_DIR / "class-archives"


def key(java: str, classpath: list[Path]) -> str:
    """The Java's build and every jar of the classpath as they are now: an updated Java or a changed jar is another
    archive. The Java counts by what it is, not where: the lab's own runtime lives in each checkout's virtual
    environment, and an archive dumped by one copy maps in another of the same build."""
    digest = hashlib.sha256(_runtime(java))
    for entry in classpath:
        try:
            st = Path(entry).stat()
            digest.update(f"\0{entry}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"\0{entry}\0missing".encode())
    return digest.hexdigest()[:20]


def _runtime(java: str) -> bytes:
    """The Java runtime's identity: its `release` file and the size of its class image, or, without them, its path
    and times."""
    home = Path(java).resolve().parents[1]
    try:
        return (home / "release").read_bytes() + str((home / "lib" / "modules").stat().st_size).encode()
    except OSError:
        try:
            st = Path(java).resolve().stat()
            return f"{Path(java).resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()
        except OSError:
            return f"{java}\0missing".encode()


def options(java: str, classpath: list[Path], spawn, dump: bool = True) -> list[str]:
    """The JVM options for this start: map the archive, or write the class list, or nothing while one is made.
    `spawn(name, argv, log)` starts the dump's JVM (lab.runtime.processes.Child: the caller's, so a panel's Stop stops it).
    With dump=False the caller asks for the dump itself once its JVM runs (dump_when_ready: Spark's driver, whose
    classpath its own launcher writes)."""
    if os.environ.get(ENV) == "0":
        return []
    try:
        here = folder()
        here.mkdir(parents=True, exist_ok=True)
        name = key(java, classpath)
        archive = here / f"{name}.jsa"
        if archive.exists():
            try:
                os.utime(archive)   # used now: the last to go (prune)
            except OSError:         # another user's cache: use it all the same
                pass
            return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
        if (here / f"{name}.failed").exists():
            return []
        lists = sorted(here.glob(f"{name}.*.classlist"), key=lambda p: p.stat().st_size, reverse=True)
        if not lists:
            return [f"-XX:DumpLoadedClassList={here / f'{name}.{uuid.uuid4().hex[:8]}.classlist'}"]
        if dump:
            dump_when_ready(java, classpath, spawn)
        return []
    except OSError:   # a read-only or full cache: the JVM starts as it would without archives
        return []


def dump_when_ready(java: str, classpath: list[Path], spawn, run_classpath: str | None = None) -> None:
    """Dump the archive in the background if the class list of this Java and classpath has stopped growing, none
    is made yet and the memory it takes is free. `run_classpath`: the -cp the JVMs run with, as their Java saw it
    (the dump's must be the same), when it is not the classpath's jars joined."""
    if os.environ.get(ENV) == "0":
        return
    try:
        here, name = folder(), key(java, classpath)
        lists = sorted(here.glob(f"{name}.*.classlist"), key=lambda p: p.stat().st_size, reverse=True)
        if (not lists or (here / f"{name}.jsa").exists() or (here / f"{name}.failed").exists()
                or time.time() - lists[0].stat().st_mtime < QUIET_FOR_S):
            return
    except OSError:
        return
    import psutil   # the course's, not the doctor's (which never dumps: it runs no archived JVM)
    if psutil.virtual_memory().available < DUMP_NEEDS_MB * 2**20:   # tried again at a later start
        return
    _dump_in_background(java, run_classpath or os.pathsep.join(map(str, classpath)), name, lists[0], spawn,
                        [str(entry) for entry in classpath])


def _dump_in_background(java: str, classpath: str, name: str, class_list: Path, spawn, entries: list[str]) -> None:
    """Start the dump in the caller's thread (a panel's Stop of its run stops it too; it is tried again later),
    and finish it in another."""
    with _lock:
        if name in _dumping:
            return
        _dumping.add(name)
    here = folder()
    part = here / f"{name}.{uuid.uuid4().hex[:8]}.part"
    usable = here / f"{name}.{uuid.uuid4().hex[:8]}.lst"
    log = here / f"{name}.dump.log"
    try:
        # The list is still written by its JVM: only its whole lines.
        text = class_list.read_bytes()
        usable.write_bytes(text[:text.rfind(b"\n") + 1])
        child = spawn(f"class-archive-{name}", [java, "-Xshare:dump", f"-XX:SharedClassListFile={usable}",
                                               f"-XX:SharedArchiveFile={part}",
                                               "-cp", classpath], log)
    except Exception:   # a stopped run, a full disk: no archive this time
        _done(name, part, usable)
        return
    threading.Thread(target=_finish, args=(child, name, part, usable, log, entries), name=f"class-archive-{name}",
                     daemon=True).start()


def _finish(child, name: str, part: Path, usable: Path, log: Path, entries: list[str]) -> None:
    here = folder()
    try:
        try:
            code = child.proc.wait(DUMP_TIMEOUT_S)
        finally:
            child.stop()
        if code == 0 and part.exists():
            # its jars, for prune: an archive whose jars are gone (a deleted checkout's environment) never maps again
            (here / f"{name}.jars").write_text("\n".join(entries) + "\n")
            into_place(part, here / f"{name}.jsa")   # a start sees the whole archive or none
            for stale in here.glob(f"{name}.*.classlist"):
                stale.unlink(missing_ok=True)
            prune(here)
        elif code > 0:   # the dump refused (a signal, i.e. a stopped lab, is tried again next time)
            (here / f"{name}.failed").write_text(f"the dump exited with {code}; its output: {log}\n")
    except Exception:   # a full disk, a dump past its time: no archive this time
        pass
    finally:
        _done(name, part, usable)


def _done(name: str, part: Path, usable: Path) -> None:
    part.unlink(missing_ok=True)
    usable.unlink(missing_ok=True)
    with _lock:
        _dumping.discard(name)


def prune(here: Path, kept_mb: int = KEPT_MB) -> None:
    """Remove the archives whose jars are gone (a deleted checkout's Spark, 170 MB each), then keep the archives used
    last, `kept_mb` of them (the last one whatever its size), and the class lists written this week. A JVM that
    maps an archive being removed keeps its copy until it exits."""
    archives = sorted(here.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    total = 0
    for i, archive in enumerate(archives):
        if _jars_gone(archive):
            _remove(archive)
            continue
        total += archive.stat().st_size
        if i and total > kept_mb * 2**20:
            _remove(archive)
    for forgotten in here.glob("*.classlist"):   # a classpath not started for a week (an old Java, old jars)
        if time.time() - forgotten.stat().st_mtime > LIST_KEPT_S:
            forgotten.unlink(missing_ok=True)


def _jars_gone(archive: Path) -> bool:
    try:
        return any(line and not Path(line).exists() for line in archive.with_suffix(".jars").read_text().splitlines())
    except OSError:   # dumped before the lab noted its jars: prune by use alone
        return False


def _remove(archive: Path) -> None:
    for path in (archive, archive.with_suffix(".dump.log"), archive.with_suffix(".jars")):
        path.unlink(missing_ok=True)
