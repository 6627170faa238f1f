"""The ``moesweep`` command line. Each sub-command lives in ``moesweep.commands.<name>`` and exposes
``register(subparsers)``; the module is imported only when listed here, so one broken command
cannot take the others down."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("sim", "check", "facts", "classify_log", "sweep", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moesweep",
        description="Bring up SGLang MoE servers and sweep kernel backends on GPU hosts.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"moesweep.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"moesweep.commands.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
