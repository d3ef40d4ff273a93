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
KEPT = 16               # archives kept (40 to 70 MB each: 1.1 GB at most), the least used lately go first
_dumping: set[str] = set()
_lock = threading.Lock()


def folder() -> Path:
    return CACHE_DIR / "class-archives"


def key(java: str, classpath: list[Path]) -> str:
    """The Java and every jar of the classpath as they are now: an updated Java or a changed jar is another
    archive."""
    digest = hashlib.sha256()
    for entry in [Path(java).resolve(), *classpath]:
        try:
            st = Path(entry).stat()
            digest.update(f"\0{entry}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            digest.update(f"\0{entry}\0missing".encode())
    return digest.hexdigest()[:20]


def options(java: str, classpath: list[Path], spawn) -> list[str]:
    """The JVM options for this start: map the archive, or write the class list, or nothing while one is made.
    `spawn(name, argv, log)` starts the dump's JVM (lab.runtime.processes.Child: the caller's, so a panel's Stop stops it)."""
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
        if time.time() - lists[0].stat().st_mtime >= QUIET_FOR_S:
            _dump_in_background(java, classpath, name, lists[0], spawn)
        return []
    except OSError:   # a read-only or full cache: the JVM starts as it would without archives
        return []


def _dump_in_background(java: str, classpath: list[Path], name: str, class_list: Path, spawn) -> None:
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
                                               "-cp", os.pathsep.join(map(str, classpath))], log)
    except Exception:   # a stopped run, a full disk: no archive this time
        _done(name, part, usable)
        return
    threading.Thread(target=_finish, args=(child, name, part, usable, log), name=f"class-archive-{name}",
                     daemon=True).start()


def _finish(child, name: str, part: Path, usable: Path, log: Path) -> None:
    here = folder()
    try:
        try:
            code = child.proc.wait(DUMP_TIMEOUT_S)
        finally:
            child.stop()
        if code == 0 and part.exists():
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


def prune(here: Path, kept: int = KEPT) -> None:
    """Keep the `kept` archives used last. A JVM that maps one being removed keeps its copy until it exits."""
    archives = sorted(here.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[kept:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".dump.log").unlink(missing_ok=True)
