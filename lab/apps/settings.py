"""How a Python program the lab starts gets its settings: as its Java programs do (Lab.load, lab/java/Lab.java),
from one argument, a properties file the launcher wrote (lab.runtime.programs.settings_file). `bootstrap.servers`
says where Kafka is; each `lab.<name>` key is one of the program's own settings.

    p = argparse.ArgumentParser(...)        # the program's settings: their types, defaults, choices, help
    args = settings.parse(p, argv)          # lab.run.id=r1 is --run-id r1; lab.pause=true is --pause
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..connection import parse_properties


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """The settings of the properties file `argv` names, checked by `parser` as if given as its options."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].endswith(".properties"):
        parser.error("one argument: the program's settings, a .properties file")
    options = []
    for key, value in parse_properties(Path(argv[0]).read_text(encoding="utf-8")).items():
        option = "--bootstrap" if key == "bootstrap.servers" else \
            "--" + key.removeprefix("lab.").replace(".", "-") if key.startswith("lab.") else None
        action = parser._option_string_actions.get(option) if option else None
        if action is None:
            parser.error(f"{argv[0]}: {key} is not a setting of this program")
        if action.nargs == 0:   # a flag: present when true
            options += [option] if value.strip().lower() == "true" else []
        else:
            options += [option, value]
    return parser.parse_args(options)
