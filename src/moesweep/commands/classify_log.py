"""``moesweep classify-log FILE [--json]``: the readiness module's classifier on a saved SGLang log.

Exit status: 0 ready, 1 crashed, 2 starting (the log ends with no verdict, as a hang does in a static
file), 3 the file cannot be read. ``-`` reads standard input.
"""

from __future__ import annotations

import argparse
import json
import sys

from ansible_collections.moesweep.sweep.plugins.module_utils.sglang_log import classify_text

import moesweep._collection  # noqa: F401  (makes the collection importable)

EXIT_CODES = {"ready": 0, "crashed": 1, "starting": 2}
EXIT_UNREADABLE = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "classify-log",
        help="classify a saved SGLang server log: ready, crashed (with cause), or starting",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="log file (journalctl output or the server's stdout); - for stdin")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=run)


def _human(result: dict) -> str:
    lines = []
    state = result["state"]
    if state == "crashed":
        when = "after ready" if result["after_ready"] else f"during {result['phase']}"
        lines.append(f"crashed ({result['cause']}) {when}")
        lines.append(f"  phase:    {result['phase']}")
        lines.append(f"  decisive: {result['decisive_line']}")
    elif state == "ready":
        how = " (inferred from serving traffic)" if result.get("ready_inferred") else ""
        lines.append(f"ready{how}")
    else:
        lines.append(f"starting: no verdict, log ends in phase {result['phase']}")
    tl = {k: v for k, v in result["timeline"].items() if k != "events"}
    if tl:
        lines.append("  timeline:")
        for phase, entry in tl.items():
            dur = "" if entry["duration"] is None else f"  ({entry['duration']:.1f} s)"
            at = "?" if entry["at"] is None else f"+{entry['at']:.1f} s"
            lines.append(f"    {phase:<13}{at}{dur}")
    if result.get("traceback"):
        lines.append("  traceback:")
        lines.extend("    " + t for t in result["traceback"].splitlines())
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
    except OSError as exc:
        print(f"moesweep classify-log: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_UNREADABLE
    result = classify_text(text)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(_human(result))
    return EXIT_CODES[result["state"]]
