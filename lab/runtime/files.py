"""Files and folders other lab processes may read while this one makes them (two notebooks, a kernel and its
JVMs): each appears whole or not at all. Made under a name of its own beside the target, then renamed onto it.

    with replacing(lock) as tmp:            # write tmp; renamed onto lock when the block ends without error
        tmp.write_text(text)
    into_place(aside(classes), classes)     # something else made it (a compiler, a JVM's dump): rename it now
"""
from __future__ import annotations

import os
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path


def aside(path: Path, suffix: str = "") -> Path:
    """A hidden sibling of `path` no other process or thread of this one uses at the same time."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}{suffix}")


@contextmanager
def replacing(path: Path):
    """Yield a temporary sibling to write; rename it onto `path` when the block succeeds, drop it when not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = aside(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        _drop(tmp)   # gone when renamed; left over when the block failed


def write_shared(path: Path, text: str) -> None:
    """Write `text` to `path` only if it differs, whole: a JVM starting while another program of the same run
    folder truncated and rewrote the file read it empty (no log appender: a log with no evidence)."""
    if path.exists() and path.read_text() == text:
        return
    with replacing(path) as tmp:
        tmp.write_text(text)


def into_place(made: Path, path: Path) -> bool:
    """Rename `made` (a file or a folder something else wrote) onto `path`. A folder cannot replace a folder
    another process put there first: then `made` is dropped and False says so."""
    try:
        os.replace(made, path)
        return True
    except OSError:
        _drop(made)
        return False


def _drop(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
