"""The offline kit: one folder that a USB stick carries, from which the lab installs with no network at all.

    make kit KIT_DIR=DIR [KIT_PLATFORMS=all]   a teacher builds it once, with the network
    make lab KIT=DIR                           an attendee installs from it, offline

    DIR/wheels/      the lab's Python packages (its tests' too) as wheels, for each platform and Python asked for;
                     pyspark's wheel is built once (PyPI has only its source, and it is the same everywhere)
    DIR/maven/       every jar of lab/jars.lock, in the Maven layout of the lab's jar cache
    DIR/kafka-failure-lab.tar.gz   the lab itself: its last commit (git archive), or the folder without its
                     environments and caches when it is not a git checkout
    DIR/site/        the course as a static site (`make site`), when one was built: a laptop that fails follows
                     along from it
    DIR/SHA256SUMS   every file's checksum: a copy damaged on its way to a laptop is named before anything installs
    DIR/README.txt   what an attendee types

Each platform's packages are resolved for that platform (uv: its markers, such as macOS-only dependencies, count
for the target, not for the machine that builds the kit), then downloaded as binary wheels by pip.

This module's `verify` needs nothing but the standard library: `python lab/commands/kit.py verify DIR` runs before the
lab's environment exists.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SUMS = "SHA256SUMS"
SOURCE = "kafka-failure-lab.tar.gz"
PYTHONS = ("3.11", "3.12", "3.13")


def _manylinux(arch: str, glibc_minor: int = 28) -> list[str]:
    """pip's --platform tags for a Linux with glibc 2.`glibc_minor` (pip does not expand manylinux_2_NN itself)."""
    return ([f"manylinux_2_{n}_{arch}" for n in range(glibc_minor, 16, -1)]
            + [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"])


# platform -> (uv's --python-platform, pip's --platform tags). Linux: glibc 2.28 or newer (Debian 10, Ubuntu 20.04,
# WSL2's Ubuntu); macOS 13 or newer (MACOSX_DEPLOYMENT_TARGET below, pip expands the older tags itself): on Apple
# Silicon, confluent-kafka 2.16.1's wheel for Python 3.13 is built for macOS 13 (3.11 and 3.12: for 11).
PLATFORMS = {
    "linux-x86_64": ("x86_64-manylinux_2_28", _manylinux("x86_64")),
    "linux-arm64": ("aarch64-manylinux_2_28", _manylinux("aarch64")),
    "macos-arm64": ("aarch64-apple-darwin", ["macosx_13_0_arm64"]),
    "macos-x86_64": ("x86_64-apple-darwin", ["macosx_13_0_x86_64"]),
}
MACOS_MINIMUM = "13.0"
README = """\
Kafka Failure Lab: offline kit
==============================

Built {built} for: {targets}.
Size: {size}.

Install the lab from this kit, with no network:

    tar xzf {path_hint}/{source}      (the lab, as committed; or use your own clone)
    cd kafka-failure-lab
    make lab KIT={path_hint}

That checks this kit's files against SHA256SUMS, creates the lab's environment from wheels/ and puts the jars of
maven/ in the lab's jar cache (~/.cache/kafka-failure-lab/maven). Then JupyterLab starts, as with `make lab`.
Open notebook 00 first: it checks Java, ports, memory, disk and a broker, all offline.
{site}
A file named in an error is damaged or missing: copy the kit again. A platform or Python that is not listed above
is not in this kit: ask for a kit built with KIT_PLATFORMS=all, or connect to the network once.
"""


class KitError(Exception):
    pass


# ------------------------------------------------------------------ checking (standard library only)

def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify(kit: Path) -> int:
    """Check every file listed in the kit's SHA256SUMS; return how many. Raises KitError naming what is wrong."""
    kit = Path(kit)
    sums = kit / SUMS
    if not sums.is_file():
        raise KitError(f"{kit} is not an offline kit: it has no {SUMS} (build one with `make kit KIT_DIR=...`)")
    bad = []
    lines = [line.split("  ", 1) for line in sums.read_text().splitlines() if line.strip()]
    for digest, name in lines:
        path = kit / name
        if not path.is_file():
            bad.append(f"{name} is missing")
        elif sha256(path) != digest:
            bad.append(f"{name} is damaged (its SHA-256 differs)")
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise KitError(f"the kit at {kit} is incomplete: {'; '.join(bad[:5])}{more}. Copy the kit again.")
    return len(lines)


def _write_sums(kit: Path) -> int:
    files = sorted([p for sub in ("wheels", "maven", "site") for p in (kit / sub).rglob("*") if p.is_file()]
                   + [p for p in [kit / SOURCE] if p.is_file()])
    (kit / SUMS).write_text("".join(f"{sha256(p)}  {p.relative_to(kit).as_posix()}\n" for p in files))
    return len(files)


# ------------------------------------------------------------------ building (the lab's environment)

def current_platform() -> str:
    """This machine's platform name in PLATFORMS, or "" when the kit does not cover it."""
    import platform
    machine = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "arm64", "aarch64": "arm64"}.get(
        platform.machine().lower(), "")
    system = {"linux": "linux", "darwin": "macos"}.get(sys.platform, "")
    name = f"{system}-{machine}"
    return name if name in PLATFORMS else ""


def targets(asked: list[str]) -> list[tuple[str, str]]:
    """(platform, python) pairs for `asked`: platform names, "all", or "current" (this machine and Python)."""
    here = (current_platform(), f"{sys.version_info[0]}.{sys.version_info[1]}")
    if not asked or asked == ["current"]:
        if not here[0]:
            raise KitError(f"this machine ({sys.platform}) is not a platform the kit covers: give --platform "
                           f"{' '.join(PLATFORMS)}")
        return [here]
    names = list(PLATFORMS) if asked == ["all"] else asked
    unknown = [n for n in names if n not in PLATFORMS]
    if unknown:
        raise KitError(f"unknown platform {', '.join(unknown)}: choose from {', '.join(PLATFORMS)}, all or current")
    return [(name, python) for name in names for python in PYTHONS]


def requirements(root: Path) -> list[str]:
    """What the lab installs (`pip install -e '.[course,dev]'`: the doctor's packages, the course's, the tests'),
    plus pip and the build backend of the lab itself."""
    import tomllib
    project = tomllib.loads((root / "pyproject.toml").read_text())
    backend = project["build-system"]["requires"]
    extras = project["project"]["optional-dependencies"]
    return [*project["project"]["dependencies"], *extras["course"], *extras["dev"], *backend, "pip"]


def _run(cmd: list[str], what: str, env: dict | None = None) -> None:
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
        raise KitError(f"{what} failed:\n{tail}")


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        raise KitError("building a kit needs uv (`make kit` installs it; or `pip install uv`)") from None
    return find_uv_bin()


def _wheels(root: Path, wheels: Path, platform: str, python: str, tmp: Path) -> dict[str, int]:
    """Resolve the lab's packages for one platform and Python, download them as binary wheels into `wheels`;
    returns that target's wheels, {file name: bytes}."""
    uv_platform, pip_platforms = PLATFORMS[platform]
    spec, pinned = tmp / "requirements.in", tmp / f"{platform}-{python}.txt"
    spec.write_text("\n".join(requirements(root)) + "\n")
    _run([_uv(), "pip", "compile", str(spec), "--python-version", python, "--python-platform", uv_platform,
          # versions that have a wheel for this target (pyspark has only its source, built once below)
          "--only-binary", ":all:", "--no-binary", "pyspark",
          "--no-header", "--no-annotate", "--quiet", "-o", str(pinned)],
         f"resolving the packages for {platform}, Python {python}", env={"MACOSX_DEPLOYMENT_TARGET": MACOS_MINIMUM})
    binary = tmp / f"{platform}-{python}-binary.txt"   # pyspark's wheel is built once, beside them
    binary.write_text("".join(line + "\n" for line in pinned.read_text().splitlines()
                              if line.strip() and not line.startswith("pyspark==")))
    own = tmp / f"{platform}-{python}"   # this target's wheels alone (pip's cache serves the ones shared)
    abi = "cp" + python.replace(".", "")
    _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
          *[f"--platform={tag}" for tag in pip_platforms], "--python-version", python, "--implementation", "cp",
          "--abi", abi, "-d", str(own), "-r", str(binary)],
         f"downloading the wheels for {platform}, Python {python}")
    found = {}
    for wheel in own.iterdir():
        found[wheel.name] = wheel.stat().st_size
        if not (wheels / wheel.name).exists():
            shutil.move(str(wheel), wheels / wheel.name)
    shutil.rmtree(own)
    return found


def _pyspark_wheel(wheels: Path) -> None:
    from ..config import SPARK_VERSION
    if not list(wheels.glob(f"pyspark-{SPARK_VERSION}-*.whl")):
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels),
              f"pyspark=={SPARK_VERSION}"], "building pyspark's wheel")


# ------------------------------------------------------------------ the jars

def _lock_jars() -> dict[str, str]:
    from ..runtime import maven
    return maven.committed()["jars"]


def _jar_relpath(jar: str) -> Path:
    from ..runtime import maven
    return maven.path_of(jar).relative_to(maven.REPOSITORY)


def copy_jars(source: Path, target: Path, jars: dict[str, str]) -> int:
    """Copy each jar of `jars` ({coordinate: sha256}) from one Maven-layout folder to another, checked; skips
    the ones already right in `target`. Returns how many were copied."""
    from ..runtime.files import replacing
    copied, missing = 0, []
    for jar, digest in jars.items():
        rel = _jar_relpath(jar)
        src, dst = source / rel, target / rel
        if dst.is_file() and sha256(dst) == digest:
            continue
        if not src.is_file() or sha256(src) != digest:
            missing.append(jar)
            continue
        with replacing(dst) as tmp:
            shutil.copyfile(src, tmp)
        copied += 1
    if missing:
        raise KitError(f"{len(missing)} jar(s) missing or damaged in {source}: {', '.join(missing[:3])}"
                       f"{' ...' if len(missing) > 3 else ''}")
    return copied


def install_jars(kit: Path) -> int:
    """The kit's jars into the lab's jar cache (`python -m lab fetch --kit DIR`); returns how many were copied."""
    from ..runtime import maven
    return copy_jars(Path(kit) / "maven", maven.REPOSITORY, _lock_jars())


# ------------------------------------------------------------------ the kit

LEFT_OUT = re.compile(r"^(\.venv.*|\.git|__pycache__|.*\.egg-info|\.pytest_cache|\.ipynb_checkpoints|site)$")


def _source(root: Path, archive: Path) -> None:
    """The lab itself, for attendees who have no clone: the last commit, or the folder as it is."""
    if (root / ".git").exists():
        _run(["git", "-C", str(root), "archive", "--format=tar.gz", "--prefix=kafka-failure-lab/",
              "-o", str(archive), "HEAD"], "archiving the lab's source")
        return
    import tarfile
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root, arcname="kafka-failure-lab",
                filter=lambda info: None if any(LEFT_OUT.match(part) for part in Path(info.name).parts) else info)


def _site(site: Path | None, kit: Path) -> bool:
    """The built site, when there is one, goes in whole (the pages need no network)."""
    if site is None or not (Path(site) / "index.html").is_file():
        return False
    shutil.rmtree(kit / "site", ignore_errors=True)
    shutil.copytree(site, kit / "site")
    return True


SITE_NOTE = """
Without a laptop that runs the lab: open site/index.html in a browser. Every lesson is there as it ran when the kit
was built, with its figures and verdicts; the panels and the exercises' checks need the lab itself.
"""


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def build(kit: Path, asked: list[str], root: Path, site: Path | None = None) -> dict:
    """Write the kit into `kit` (created or completed), with the site of `site` when it was built; returns what it
    holds and its sizes in bytes."""
    kit = Path(kit).resolve()
    pairs = targets(asked)
    wheels = kit / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"Kit for {', '.join(f'{p} Python {v}' for p, v in pairs)} in {kit}", flush=True)
    per_platform: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="kit-") as tmp:
        _pyspark_wheel(wheels)
        shared = {w.name: w.stat().st_size for w in wheels.glob("pyspark-*.whl")}
        for platform, python in pairs:
            found = _wheels(root, wheels, platform, python, Path(tmp))
            per_platform.setdefault(platform, dict(shared)).update(found)
            print(f"  {platform}, Python {python}: {len(found)} wheels", flush=True)
    _source(root, kit / SOURCE)
    from ..runtime import maven
    jars = maven.cache_all()
    copy_jars(maven.REPOSITORY, kit / "maven", _lock_jars())
    has_site = _site(site, kit)
    files = _write_sums(kit)
    sizes = {"wheels": size(wheels), "maven": size(kit / "maven"), "site": size(kit / "site")}
    total = sum(sizes.values())
    # what one platform needs of it, every Python asked for: its wheels, pyspark's, the jars
    platforms = {p: sum(w.values()) + sizes["maven"] for p, w in per_platform.items()}
    summary = (f"{total / 1e6:.0f} MB (wheels {sizes['wheels'] / 1e6:.0f} MB, jars {sizes['maven'] / 1e6:.0f} MB); "
               + "; ".join(f"{p} alone {b / 1e6:.0f} MB" for p, b in platforms.items())
               + (f"; the site {sizes['site'] / 1e6:.0f} MB" if has_site else "; no site (run `make site` first)"))
    (kit / "README.txt").write_text(README.format(
        built=_today(), targets=", ".join(f"{p} with Python {v}" for p, v in pairs), size=summary,
        path_hint=kit, source=SOURCE, site=SITE_NOTE if has_site else ""))
    print(f"Kit ready: {files} files, {jars} jars, {summary}", flush=True)
    return {"targets": pairs, "files": files, "jars": jars, "bytes": sizes, "platform_bytes": platforms,
            "site": has_site}


def _today() -> str:
    import datetime
    return datetime.date.today().isoformat()


if __name__ == "__main__":   # `python lab/commands/kit.py verify DIR`, before the lab's environment exists
    if len(sys.argv) != 3 or sys.argv[1] != "verify":
        sys.exit("usage: python lab/commands/kit.py verify DIR")
    try:
        print(f"kit checked: {verify(Path(sys.argv[2]))} files match {SUMS}")
    except KitError as exc:
        sys.exit(f"error: {exc}")
