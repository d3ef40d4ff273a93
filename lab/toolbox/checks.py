"""Checks a Spec runs before anything starts, shared by the scenarios that need them.

    Param("streams_version", "3.3.1", "...", check=lambda v: check_version(
        v, "STREAMS_VERSION", build, oldest=(3, 0, 0), why="the worker's exactly_once_v2 API"))

A version that Maven Central does not have, or that the program under test cannot be compiled against,
is refused now, with the parameter's name, instead of minutes later when a cell starts the program.
"""
from __future__ import annotations

import shutil

from ..runtime.versions import parse_version
from ..config import WORK_DIR
from ..errors import LabError


def check_version(version: str, name: str, build, oldest: tuple | None = None, why: str = "",
                  what: str = "Kafka Streams") -> None:
    """`version` (named by the parameter `name`) is a version, not older than `oldest` (`why`: what needs
    it), and `build(version)` succeeds (resolve its jars, compile the program under test against them)."""
    try:
        too_old = oldest is not None and parse_version(version) < tuple(oldest)
    except (LabError, ValueError, TypeError):
        raise LabError(f"{name}={version!r} is not a Kafka version like '4.3.1'.") from None
    if too_old:
        raise LabError(f"{name}: {what} {version} is older than the program supports "
                       f"({'.'.join(map(str, oldest))}+: {why}).")
    try:
        build(version)
    except LabError as exc:
        raise LabError(f"{name}={version!r}: {exc}") from None


def build_streams_program(version: str, main: str, sources: list[str], stores: bool = True):
    """Resolve Kafka Streams `version` and compile the program `main` (its `sources` under lab/java) against it."""
    from ..runtime.programs import JAVA_DIR, compile_sources, streams_classpath   # lab.runtime.programs imports this package
    return compile_sources([JAVA_DIR / s for s in sources], streams_classpath(version, stores=stores),
                           label=f"{main}-{version}")


def check_streams_program(version: str, name: str, main: str, sources: list[str], oldest: tuple, why: str,
                          stores: bool = True) -> None:
    """check_version for a Kafka Streams program under test: the jars of `version` resolved and the program
    compiled against them now, before anything starts."""
    check_version(version, name, lambda v: build_streams_program(v, main, sources, stores), oldest=oldest, why=why)


def half_the_free_disk(need_bytes: float, what: str) -> str | None:
    """A refusal when `what` needs more than half the disk free under the lab's work folder (None: it fits): a
    lesson that would fill a laptop's disk is refused before anything starts."""
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(WORK_DIR).free
    if need_bytes > free / 2:
        return (f"{what} needs about {need_bytes / 2**30:.1f} GiB, more than half of the {free / 2**30:.1f} GiB "
                f"free under {WORK_DIR}.")
    return None
