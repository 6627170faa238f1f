"""``moesweep report SWEEP [SWEEP ...] [--out DIR] [--reference-concurrency N]``: the comparison report.

Each SWEEP is a sweep's results directory (``results/<sweep_id>``, where the results callback wrote
``points.jsonl``), that ``points.jsonl`` itself, or a bare sweep id looked up under ``results/`` (of the
current directory, then of the moesweep checkout). Several sweeps are compared in one report: hosts,
sweeps and SGLang versions side by side.

Writes ``report.md`` (plots under ``plots/``) and ``report.html`` (one self-contained page, plots
embedded) into ``--out`` (default: ``<sweep>/report`` for one sweep, ``report-<id>+<id>`` beside the first
for several), and prints the comparison table. Points from simulated hosts are labelled SIMULATED
everywhere and never mixed with measured points without saying which is which.

The reference concurrency (TTFT, GPU figures, diagnosis and the best point are of that level) defaults
to the one the sweep was run with, else the highest level every benchmarked point ran.

Exit status: 0 the report was written; 2 bad input (a directory without points.jsonl, an unreadable or
damaged points file, a sweep with no point yet, an --out that is a file or not writable, a reference
concurrency no point ran): the message names the problem and the fix, and nothing is written; 3 matplotlib
is not installed (`make venv`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2
EXIT_NO_PLOTTER = 3


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "report",
        help="write the comparison report (Markdown + self-contained HTML, PNG plots) of one or more sweeps",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sweeps", nargs="+", metavar="SWEEP",
                   help="results/<sweep_id> directory, its points.jsonl, or a sweep id under results/")
    p.add_argument("--out", metavar="DIR", help="directory for report.md, report.html and plots/")
    p.add_argument("--reference-concurrency", type=int, metavar="N",
                   help="the concurrency level the table's TTFT, GPU figures and best point are taken at")
    p.set_defaults(func=run)


def resolve(source: str) -> str:
    """A path as given when it exists; a bare sweep id under results/ of the cwd, then of the checkout."""
    if os.path.exists(source) or os.sep in source or source in (".", ".."):
        return source
    from moesweep._collection import REPO_ROOT

    for base in (Path.cwd() / "results", REPO_ROOT / "results"):
        if (base / source).exists():
            return str(base / source)
    return source


def run(args) -> int:
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

    from moesweep.report import PlotterMissing, ReportError, build_report

    sources = [resolve(s) for s in args.sweeps]
    try:
        result = build_report(sources, args.out, args.reference_concurrency)
    except ReportError as exc:
        print(f"moesweep report: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PlotterMissing as exc:
        print(f"moesweep report: {exc}", file=sys.stderr)
        return EXIT_NO_PLOTTER
    except OSError as exc:
        print("moesweep report: cannot write the report: {}{}".format(
            exc.strerror or exc, f" ({exc.filename})" if getattr(exc, "filename", None) else ""), file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        sys.stdout.write(summary.render_text(result["rows"]))
        print("report: {}".format(result["markdown"]))
        print("report: {}".format(result["html"]))
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0
