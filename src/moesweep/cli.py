"""The ``moesweep`` command line. Each sub-command lives in ``moesweep.commands.<name>`` and exposes
``register(subparsers)``. A command whose module fails to import is still listed, and says why when it is
run (exit 2), so one broken command cannot take the others down and none disappears silently."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("sim", "provision", "facts", "check", "classify_log", "sweep", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moesweep",
        description="Bring up SGLang MoE servers and sweep kernel backends on GPU hosts.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"moesweep.commands.{name}")
        except Exception as exc:  # noqa: BLE001 - reported when that command is used
            _broken(sub, name.replace("_", "-"), exc)
            continue
        module.register(sub)
    return parser


def _broken(sub, name: str, exc: Exception) -> None:
    p = sub.add_parser(name, help=f"(unavailable: {type(exc).__name__}: {exc})", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    def run(_args) -> int:
        print(f"moesweep {name}: this command cannot load: {type(exc).__name__}: {exc}; reinstall moesweep "
              "(make venv) or report the error", file=sys.stderr)
        return 2

    p.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
