"""How a Python program the lab starts gets its settings: as its Java programs do (Lab.load, lab/java/Lab.java),
from one argument, a properties file the launcher wrote (lab.runtime.programs.settings_file). `bootstrap.servers`
says where Kafka is; each `lab.<name>` key is one of the program's own settings.

    p = argparse.ArgumentParser(...)        # the program's settings: their types, defaults, choices, help
    args = settings.parse(p, argv)          # lab.run.id=r1 is --run-id r1; lab.pause=true is --pause

A mistake is named by its key, as Lab.setting does: "missing setting lab.topic", "lab.batch: invalid int value".
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..connection import parse_properties


def key_of(option: str) -> str:
    """The properties key of an option: --bootstrap is bootstrap.servers, --run-id is lab.run.id."""
    return "bootstrap.servers" if option == "--bootstrap" else "lab." + option.removeprefix("--").replace("-", ".")


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """The settings of the properties file `argv` names, checked by `parser` as if given as its options."""
    argv = sys.argv[1:] if argv is None else argv
    by_key = {key_of(a.option_strings[-1]): a for a in parser._actions if a.option_strings and a.dest != "help"}
    parser.usage = "%(prog)s SETTINGS.properties, its keys " + ", ".join(
        k if a.required else f"[{k}]" for k, a in by_key.items())
    if len(argv) != 1 or not argv[0].endswith(".properties"):
        parser.error("one argument: the program's settings, a .properties file")
    try:
        given = parse_properties(Path(argv[0]).read_text(encoding="utf-8"))
    except OSError as e:
        parser.error(f"cannot read its settings {argv[0]}: {e.strerror}")
    unknown = [k for k in given if k not in by_key]
    missing = [k for k, a in by_key.items() if a.required and k not in given]
    if unknown or missing:
        parser.error(f"{argv[0]}: " + "; ".join([*(f"{k} is not a setting of this program" for k in unknown),
                                                 *(f"missing setting {k}" for k in missing)]))
    options = []
    for key, value in given.items():
        option = by_key[key].option_strings[-1]
        if by_key[key].nargs == 0:   # a flag: present when true (Lab.flag: Boolean.parseBoolean)
            options += [option] if value.lower() == "true" else []
        else:
            options.append(f"{option}={value}")   # one word: a value starting with '-' is not taken for an option
    parser.exit_on_error = False   # a wrong value is named by its key, not by the option it became
    try:
        return parser.parse_args(options)
    except argparse.ArgumentError as e:
        named = f"{key_of(e.argument_name.split('/')[-1])}: " if e.argument_name else ""
        parser.error(f"{argv[0]}: {named}{e.message}")
