"""``moesweep classify-log FILE [--json]``: the readiness module's classifier on a saved SGLang log.

Exit status: 0 ready, 1 crashed, 2 starting (the log ends with no verdict, as a hang does in a static
file) -- or no log at all: the file is empty, holds only blank lines, or is not text (binary, compressed,
a raw systemd journal file); then nothing is printed on stdout and stderr names the file and says what to
give instead. 3 the file cannot be read. ``-`` reads standard input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ansible_collections.moesweep.sweep.plugins.module_utils.sglang_log import classify_text

import moesweep._collection  # noqa: F401  (makes the collection importable)

EXIT_CODES = {"ready": 0, "crashed": 1, "starting": 2}
EXIT_NO_LOG = 2
EXIT_UNREADABLE = 3

# Magic numbers of inputs people save instead of the log itself.
_GZIP_MAGIC = b"\x1f\x8b"
_JOURNAL_MAGIC = b"LPKSHHRH"  # systemd journal file header signature (systemd journal-def.h)
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x1b\x08")  # whitespace, ANSI escape, backspace (tqdm)


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


def no_log_reason(data: bytes, path: str = "FILE") -> str | None:
    """Why ``data`` holds no log to classify (None when it is text with at least one non-blank line);
    ``path`` is used in the suggested command."""
    if not data:
        return "is empty: there is no log to classify"
    if data.startswith(_GZIP_MAGIC):
        return f"is gzip-compressed, not a text log: decompress it first (zcat {path} | moesweep classify-log -)"
    if data.startswith(_JOURNAL_MAGIC):
        return (
            "is a binary systemd journal file, not a text log: export it first "
            f"(journalctl --file {path} -o cat | moesweep classify-log -)"
        )
    sample = data[:65536]
    controls = sum(1 for b in sample if b < 0x20 and b not in _TEXT_CONTROLS)
    instead = "give the server's saved stdout or `journalctl -u UNIT -o cat` output"
    if b"\x00" in sample or controls * 20 > len(sample):
        return f"is not a text log (binary data): {instead}"
    text = sample.decode("utf-8", errors="replace")
    if text.count("\ufffd") * 10 > len(text):
        return f"is not a text log (not UTF-8 text): {instead}"
    if not data.strip():
        return "holds only blank lines: there is no log to classify"
    return None


def _read(path: str) -> bytes:
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            return buffer.read()
        return sys.stdin.read().encode("utf-8", errors="replace")
    with open(path, "rb") as fh:
        return fh.read()


def run(args: argparse.Namespace) -> int:
    name = "standard input" if args.file == "-" else args.file
    try:
        data = _read(args.file)
    except OSError as exc:
        print(f"moesweep classify-log: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_UNREADABLE
    reason = no_log_reason(data, args.file)
    if reason is not None:
        print(f"moesweep classify-log: {name} {reason}", file=sys.stderr)
        return EXIT_NO_LOG
    result = classify_text(data.decode("utf-8", errors="replace"))
    try:
        if args.json:
            print(json.dumps(result, sort_keys=True))
        else:
            print(_human(result))
        sys.stdout.flush()
    except BrokenPipeError:
        # `moesweep classify-log x.log | head`: the reader left; the verdict is still the exit status.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CODES[result["state"]]
