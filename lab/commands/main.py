"""`python -m lab fetch [--kit DIR] [--all] | check | site DIR | start | prune [--keep N] | params | answers | doctor | kit DIR | clean-notebooks NB...`"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..config import LAB_DIR
from ..doctor.cli import EXIT_CODES, UsageParser, add_arguments
from ..runtime.ports import free_port

ROOT = LAB_DIR.parent


def fetch(args) -> None:
    """Check Java and cache every jar the default lab needs (broker, Spark connector, the doctor); with --kit,
    every jar of the offline kit first (then nothing needs the network)."""
    from ..cluster import kafka_classpath, known_broker_configs
    from ..config import KAFKA_VERSION
    from ..runtime import maven
    from ..runtime.jvm import current
    from ..runtime.programs import ECJ
    from ..audit.spark import connector_jars
    if args.kit:
        from .kit import install_jars
        print(f"Jars from the kit: {install_jars(args.kit)} copied into the lab's cache ({maven.REPOSITORY})")
    if args.all:
        print(f"Every jar of the course: {maven.cache_all()} cached in {maven.REPOSITORY}")
    java = current()
    print(f"Java {java.version} ({java.source}: {java.home})")
    maven.classpath([ECJ], label="ecj")   # the compiler of the lab's Java programs
    print(f"Kafka {KAFKA_VERSION}: {len(kafka_classpath())} jars, "
          f"{len(known_broker_configs(KAFKA_VERSION))} broker configs known")
    from ..doctor.facts import collector
    print(f"The doctor: {len(collector()) - 1} jars, its collector compiled")   # `make doctor` needs nothing more
    print(f"Spark Kafka connector: {len(connector_jars())} jars")


# JupyterLab as the lab runs it. `make lab` (start below) and tests/test_browser.py both build its command line
# with jupyter_command(), so the browser test sees what a student sees.
# A workshop's notebooks are left open one after the other: a kernel idle this long (a learner has moved on) is shut
# down. Long enough for a lesson's reading and discussion; short enough that a day of lessons fits an 8 GB laptop.
IDLE_MINUTES, IDLE_ENV = 30, "KAFKA_LAB_IDLE_MINUTES"
INDEX = "00_setup_check.ipynb"   # JupyterLab opens on the course index: notebook 00 lists the course
# JupyterLab settings defaults (plugin id -> settings; names from the plugins' schemas), written to overrides.json.
JUPYTERLAB_SETTINGS = {
    # no "Would you like to get notified about official Jupyter news?" popup, no check for JupyterLab updates
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def jupyterlab_settings() -> Path:
    """Merge JUPYTERLAB_SETTINGS into this environment's JupyterLab `settings/overrides.json` (its app folder).

    Overrides change the defaults only: a student's own choice in Settings still wins. Returns the file.
    """
    from jupyterlab.commands import get_app_dir
    from ..errors import LabError
    path = Path(get_app_dir()) / "settings" / "overrides.json"
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as exc:
        raise LabError(f"{path} is not valid JSON ({exc}): fix or delete it") from exc
    merged = {**current, **{plugin: {**current.get(plugin, {}), **values}
                            for plugin, values in JUPYTERLAB_SETTINGS.items()}}
    if merged != current:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(merged, indent=2) + "\n")
        except OSError as exc:   # a read-only JupyterLab install: cosmetic, say so and go on
            print(f"JupyterLab's defaults not written ({exc}): the news popup may show", file=sys.stderr)
    return path


def jupyter_command(port: int, token: str, root: Path | str, ip: str = "127.0.0.1",
                    idle_minutes: float = 0) -> list[str]:
    """The JupyterLab command line: `ip`:`port` (loopback unless asked), `token` auth, notebooks under `root`,
    opening on INDEX; `idle_minutes` > 0: a kernel idle that long is shut down (its tab open or not), so that the
    notebooks a learner has left give their memory back (a running cell is never idle).

    Also writes the lab's settings defaults (jupyterlab_settings). Run it with the lab's interpreter's
    environment; kernels then import the installed lab package whatever `root` is.
    """
    jupyterlab_settings()
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--ip={ip}", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={Path(root).resolve()}", f"--LabApp.default_url=/lab/tree/{INDEX}"]
    if idle_minutes > 0:
        idle_s = max(1, round(idle_minutes * 60))
        cmd += [f"--MappingKernelManager.cull_idle_timeout={idle_s}",
                f"--MappingKernelManager.cull_interval={max(1, min(60, idle_s // 2))}",
                "--MappingKernelManager.cull_connected=True"]
    if os.geteuid() == 0:  # containers and CI machines often run as root
        cmd.append("--allow-root")
    return cmd


def start(args) -> None:
    """JupyterLab on localhost with a token; with --playground, a broker for free exploration beside it.

    Each notebook starts the cluster its lesson needs; the playground is only for poking around, so it runs only
    when asked for (its memory is a lesson's to have otherwise).
    """
    import contextlib
    import secrets

    from ..cluster import KafkaCluster
    from ..toolbox.room import ROOM_ENV, room_answers, room_url
    room = room_url(args.room) if args.room else None   # a mistyped address is said before anything starts
    port, token = free_port(args.port), secrets.token_urlsafe(24)
    cmd = jupyter_command(port, token, ROOT / "notebooks", ip=args.ip, idle_minutes=args.idle_minutes)
    with KafkaCluster(name="playground") if args.playground else contextlib.nullcontext() as cluster:
        env = dict(os.environ)
        if cluster is not None:
            print(f"Playground Kafka {cluster.version} at {cluster.bootstrap} "
                  f"(log: {cluster.log_path()}); set as KAFKA_LAB_PLAYGROUND in JupyterLab.")
            env["KAFKA_LAB_PLAYGROUND"] = cluster.bootstrap
        if room:
            env[ROOM_ENV] = room
            print(f"In the room {room}: each notebook's predictions, runs and exercises go to the teacher's "
                  "page (a random id of this laptop, no name, no address)." if room_answers(room) else
                  f"The room at {room} does not answer now (is the address right, the network the "
                  "teacher's?): the lab starts anyway, and its notebooks send when the room answers.")
        if port != args.port:
            print(f"Port {args.port} is in use: JupyterLab takes {port}.")
        host = "127.0.0.1" if args.ip in ("127.0.0.1", "0.0.0.0", "::") else args.ip
        print(f"JupyterLab: http://{host}:{port}/lab/tree/{INDEX}?token={token}  (Ctrl-C stops the lab)")
        if args.ip != "127.0.0.1":
            print(f"It listens on {args.ip}: anyone who can reach this machine and has the token can use it.")
        if args.idle_minutes > 0:
            print(f"A notebook's kernel idle for {args.idle_minutes:g} minutes is shut down to give its memory back "
                  f"(its outputs stay; run it again to go on). {IDLE_ENV}=0 keeps them.")
        try:
            subprocess.run(cmd, env=env, check=False)
        except KeyboardInterrupt:
            pass
    print("Lab stopped" + ("; the playground broker is down." if args.playground else "."))


def prune(args) -> None:
    """Delete old run folders under the work folder, keeping the newest --keep (and any in use)."""
    from ..config import WORK_DIR
    from ..toolbox.run import prune as prune_runs
    removed = prune_runs(args.keep)
    for path in removed:
        print(f"removed {path}")
    print(f"{len(removed)} folder(s) removed from {WORK_DIR}; kept the newest {args.keep} and any in use.")


def scenario_specs(strict: bool = True) -> dict:
    """module name -> its parameters (a lesson's spec, or a scenario's SPEC), for every notebook of the course
    (lab.scenarios.COURSE).

    strict=False reports a module that does not import (on stderr) and goes on with the others.
    """
    from ..scenarios import COURSE
    specs = {}
    for entry in COURSE:
        try:
            module = entry.module()
        except ImportError as exc:
            if strict:
                raise
            print(f"{entry.package}.{entry.scenario} does not import: {exc}", file=sys.stderr)
            continue
        specs[entry.scenario] = module.lesson.spec
    return specs


def params_markdown(specs: dict) -> str:
    """docs/parameters.md's tables: one per scenario."""
    return "\n\n".join(f"#### `{name}`\n\n{spec.markdown()}" for name, spec in specs.items())


PARAMS_START, PARAMS_END = "<!-- params: generated by `.venv/bin/python -m lab params --write` -->", "<!-- params: end -->"
COURSE_START, COURSE_END = "<!-- course: generated by `.venv/bin/python -m lab params --write` -->", "<!-- course: end -->"
PARAMS_DOC = ROOT / "docs" / "parameters.md"


def readme_course_table() -> str:
    from ..scenarios import course_table
    return course_table(link="notebooks/{name}.ipynb")


def _replace_between(text: str, start: str, end: str, body: str) -> str:
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    if not rest or not tail:
        raise SystemExit(f"no {start} ... {end} section to write")
    return f"{head}{start}\n\n{body}\n\n{end}{tail}"


def params(args) -> None:
    """Print each scenario's parameters table (markdown); --write writes them into docs/parameters.md, and the
    course table into README.md."""
    specs = scenario_specs(strict=False)
    tables = params_markdown(specs)
    if args.write:
        PARAMS_DOC.write_text(_replace_between(PARAMS_DOC.read_text(), PARAMS_START, PARAMS_END, tables))
        readme = ROOT / "README.md"
        readme.write_text(_replace_between(readme.read_text(), COURSE_START, COURSE_END, readme_course_table()))
        print(f"docs/parameters.md: the parameters of {', '.join(specs) or 'no scenario'}; README.md: the course table")
    else:
        print(tables)


def doctor(args) -> None:
    """Read-only diagnosis of a cluster (lab.doctor.cli): a gate with --fail-on, a monitor with --watch."""
    from ..doctor.cli import run
    sys.exit(run(args))


class _Parser(UsageParser):
    """Bad arguments exit 2, as argparse's; the doctor's subcommand 4 (its 2 says the cluster could not be read)."""
    usage_status = 2


def check(_args) -> None:
    """The pre-flight (lab.commands.preflight): exit 1 when something the course needs is missing."""
    from .preflight import run
    if not all(c.ok for c in run()):
        sys.exit(1)


def site(args) -> None:
    """The course as a static site (lab.commands.site): every notebook executed at its defaults, rendered to HTML."""
    from .site import build
    build(Path(args.dir), args.notebooks)


def kit(args) -> None:
    """The offline kit for a workshop (lab.commands.kit): wheels for each platform asked for, every jar, checksums."""
    from .kit import build
    build(Path(args.dir), args.platform, ROOT, site=Path(args.site))


def clean_notebooks(args) -> None:
    """Strip outputs, execution counts and widget state; keep cell tags (the parameters tag)."""
    for path in args.notebooks:
        nb = json.loads(Path(path).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["outputs"], cell["execution_count"] = [], None
            for key in ("execution", "collapsed", "scrolled"):
                cell.get("metadata", {}).pop(key, None)
        nb["metadata"].pop("widgets", None)
        nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        print(f"cleaned {path}")


def main() -> None:
    from .kit import PLATFORMS
    parser = _Parser(prog="python -m lab")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fetch", help="check Java, cache the Kafka and Spark jars")
    p.add_argument("--kit", help="an offline kit (`make kit`): its jars go into the lab's cache first")
    p.add_argument("--all", action="store_true", help="every jar of every lesson, not only the default broker's and "
                                                      "Spark's (before a workshop without network)")
    p.set_defaults(run=fetch)
    p = sub.add_parser("start", help="JupyterLab (and, with --playground, a broker to poke around)")
    p.add_argument("--port", type=int, default=8888, help="JupyterLab's port (default 8888; a free one if taken)")
    p.add_argument("--ip", default=os.environ.get("KAFKA_LAB_IP", "127.0.0.1"),
                   help="the interface JupyterLab listens on (default 127.0.0.1, or KAFKA_LAB_IP; 0.0.0.0 in a "
                        "container or cloud workspace whose port is forwarded); token auth either way")
    p.add_argument("--playground", action="store_true",
                   help="also start a broker for free exploration (KAFKA_LAB_PLAYGROUND in JupyterLab; about 400 MB)")
    p.add_argument("--idle-minutes", type=float, default=float(os.environ.get(IDLE_ENV, IDLE_MINUTES)),
                   help=f"shut down a kernel idle this long, to give its memory back (default {IDLE_MINUTES:g}, or "
                        f"{IDLE_ENV}; 0: never)")
    p.add_argument("--room", default=os.environ.get("KAFKA_LAB_ROOM"),
                   help="a workshop's room (the address the teacher's `make room` printed): every notebook's "
                        "predictions and runs go to the teacher's page")
    p.set_defaults(run=start)
    p = sub.add_parser("prune", help="delete old run folders under the work folder")
    p.add_argument("--keep", type=int, default=8, help="run folders to keep (default 8)")
    p.set_defaults(run=prune)
    p = sub.add_parser("params", help="print every scenario's parameters table (markdown)")
    p.add_argument("--write", action="store_true",
                   help="write the tables into docs/parameters.md, and the course table into README.md")
    p.set_defaults(run=params)
    from .answers import add_parser as add_answers
    add_answers(sub)
    from ..room.command import add_parser as add_room
    add_room(sub)
    p = sub.add_parser("doctor", help="read-only diagnosis of a cluster against the failures of this course",
                       description=EXIT_CODES)
    from ..doctor.report import EXIT_USAGE
    add_arguments(p)
    p.usage_status = EXIT_USAGE
    p.set_defaults(run=doctor)
    sub.add_parser("check", help="the pre-flight: Python, Java, memory, disk, jars, ports, a broker (offline)"
                   ).set_defaults(run=check)
    p = sub.add_parser("site", help="the course as a static site: every notebook executed, rendered to HTML")
    p.add_argument("dir", help="the site's folder (created; index.html at its top)")
    p.add_argument("--notebooks", nargs="*", help="only these notebooks, by number (default: the whole course)")
    p.set_defaults(run=site)
    p = sub.add_parser("kit", help="write an offline kit for a workshop: wheels, jars, checksums")
    p.add_argument("dir", help="the kit's folder (created, or completed)")
    p.add_argument("--platform", nargs="*", default=["current"],
                   help="current (default: this machine and Python), all, or names: " + ", ".join(PLATFORMS))
    p.add_argument("--site", default=str(ROOT / "site"), help="the built site to carry, when there is one (make site)")
    p.set_defaults(run=kit)
    p = sub.add_parser("clean-notebooks", help="strip outputs before committing")
    p.add_argument("notebooks", nargs="+")
    p.set_defaults(run=clean_notebooks)
    args = parser.parse_args()
    from ..errors import LabError
    from .kit import KitError
    try:
        args.run(args)
    except (LabError, KitError) as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
