"""``moesweep sweep``: run sweep.yml through the Python API (one code path with ``ansible-playbook
sweep.yml``), show progress live, print the comparison table.

Exit status:
  0  every point passed and the host was left on a known-good configuration
  1  the sweep ran, but some points did not pass (each is recorded with its cause)
  2  the sweep could not run at all (bad input, no host, ansible missing): nothing was changed
  3  the points are recorded, but leaving the host on a known-good configuration failed
  4  records of this run could not be written to the results directory (each is kept where the run says; the
     next run of the same sweep puts them in and runs the points not run)
  130 interrupted (Ctrl-C, SIGTERM or SIGHUP; a second one stops at once): the running point is recorded ``interrupted``
Each run's status is told from what that run did: the points it ran or skipped and its own restore, never from
another run's records of the same sweep.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_POINTS_FAILED, EXIT_CANNOT_RUN, EXIT_RESTORE_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_UNRECORDED = 4


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="sweep MoE runner backends on GPU hosts (sweep.yml through ansible-runner)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--backends", action="append", default=[], metavar="A,B,C",
                   help="backends in order (comma separated, or 'compatible': every backend the preflight accepts)")
    p.add_argument("--matrix", type=Path, default=None, metavar="FILE",
                   help="a launch matrix instead of --backends: a YAML file with a top-level 'matrix' key (axes of "
                        "sglang flags or env:NAME with their values, optional zip and exclude), the file "
                        "ansible-playbook sweep.yml -e @FILE takes; each cell is a point")
    p.add_argument("-i", "--inventory", default=None,
                   help="inventory (default: ansible.cfg's, inventory/sim.yml for the simulated host)")
    p.add_argument("--limit", default=None, help="host pattern")
    p.add_argument("--results", type=Path, default=Path("results"), help="results directory (default ./results)")
    p.add_argument("--sweep-id", default=None, help="the sweep's id (default: stable for the same points and hosts)")
    p.add_argument("--new", action="store_true", help="refuse an existing --sweep-id instead of resuming it")
    p.add_argument("--rerun", action="store_true", help="run points that already passed with the same configuration")
    p.add_argument("--measure-equivalent", action="store_true",
                   help="start and measure a point even when it runs the same kernels as a point measured in this "
                        "sweep (otherwise recorded same_as that point, not started)")
    p.add_argument("--restore", choices=("best", "previous", "none"), default="best",
                   help="what to leave the host on at the end (default: the best point that passed)")
    p.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE|@FILE",
                   help="extra variable for every point, as ansible-playbook -e (repeatable; @FILE reads a YAML/JSON "
                        "vars file, the way to pass secrets such as sglang_server_hf_token)")
    p.add_argument("--break-lock", default=None, metavar="ID",
                   help="break the host's sweep lock held by ID (the id a busy lock's message names) when that sweep "
                        "is dead: only that lock, never one taken since")
    p.add_argument("--vault-password-file", default=None, help="password file for vaulted vars files")
    p.add_argument("--json", action="store_true", help="print the result as JSON (no live display)")
    p.add_argument("--no-progress", action="store_true", help="no live display, one line per event")
    p.set_defaults(func=run)


class BadInput(ValueError):
    pass


def parse_extra(pairs: list[str]) -> tuple[dict, list[str]]:
    """-e KEY=VALUE (values read as JSON when they parse, as ansible does for simple types) and -e @FILE."""
    out, files = {}, []
    for pair in pairs:
        if pair.startswith("@"):
            if not Path(pair[1:]).is_file():
                raise BadInput(f"-e {pair}: no such file; give the path of a YAML or JSON vars file")
            files.append(pair[1:])
            continue
        if "=" not in pair:
            raise BadInput(f"-e {pair!r}: use KEY=VALUE (or @FILE)")
        key, value = pair.split("=", 1)
        if not key.isidentifier():
            raise BadInput(f"-e {pair!r}: {key!r} is not a variable name")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out, files


def parse_backends(values: list[str]) -> list[str] | str:
    if not values:
        raise BadInput("--backends is required, e.g. --backends flashinfer_cutlass,triton (or compatible)")
    if len(values) > 1:
        raise BadInput(f"--backends given {len(values)} times ({', '.join(values)}): give it once, with every "
                       "backend comma separated")
    if values[0].strip() == "compatible":
        return "compatible"
    backends = [b.strip() for b in values[0].split(",") if b.strip()]
    if not backends:
        raise BadInput("--backends is empty; e.g. --backends flashinfer_cutlass,triton")
    if len(set(backends)) != len(backends):
        raise BadInput("--backends lists a backend twice")
    return backends


class Progress:
    """Live display of the points (rich on a terminal; one line per event otherwise)."""

    def __init__(self, live: bool):
        self.rows: dict = {}
        self.levels: list = []  # the benchmark's concurrency levels, from the sweep plan
        self.live = None
        self.console = None
        if live:
            try:
                from rich.console import Console
                from rich.live import Live

                self.console = Console(stderr=True)
                if self.console.is_terminal:
                    # get_renderable: every refresh draws the table anew, so the elapsed cell of a running point
                    # counts up during long steps (a benchmark level, a model load), not only at events
                    self.live = Live(console=self.console, get_renderable=self._table, refresh_per_second=2,
                                     transient=False)
                    self.live.start()
            except ImportError:  # pragma: no cover - rich is a runtime dependency
                self.live = None

    def _table(self):
        from rich.table import Table

        table = Table(title="moesweep sweep", expand=False)
        for col in ("host", "point", "phase", "elapsed", "level", "status"):
            table.add_column(col)
        now = time.time()
        for (host, point), row in self.rows.items():
            end = row.get("end") or now
            table.add_row(host or "", point or "", row.get("phase") or "", "%.0f s" % (end - row["start"]),
                          row.get("level") or "", row.get("status") or "")
        return table

    def _say(self, text):
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False)
        else:
            self._line(text)

    def _line(self, text):
        print(time.strftime("%H:%M:%S ") + text, file=sys.stderr, flush=True)

    def update(self, event) -> None:
        key = (event.host, event.point)
        if event.kind == "plan":
            self.levels = list(event.detail.get("concurrency") or [])
            # a launch matrix's plan, before the first restart: cells, refused (why), to run, estimated time
            for text in (event.detail.get("matrix") or {}).get("lines") or []:
                self._say(f"{event.host} {text}" if event.host else text)
            return
        if event.kind == "point_started":
            self.rows[key] = {"start": event.at, "phase": "started"}
            line = f"{event.host} {event.point}: started"
        elif event.kind == "phase" and key in self.rows:
            if self.rows[key].get("phase") == event.phase:
                return
            self.rows[key]["phase"] = event.phase
            if event.phase == "benchmark" and self.levels:
                # the levels to run; each one shows as running, then its figure, while the benchmark runs
                self.rows[key]["level"] = "levels " + ", ".join(f"c{c}" for c in self.levels)
            line = f"{event.host} {event.point}: {event.phase}"
        elif event.kind == "level_started":
            c = event.detail.get("concurrency")
            row = self.rows.get(key)
            at = f" ({self.levels.index(c) + 1}/{len(self.levels)})" if c in self.levels else ""
            text = f"c{c} running{at}"
            if row is not None:
                row["level"] = ", ".join(row.get("levels_done", []) + [text])
            line = f"{event.host} {event.point}: level c{c} started, {event.detail.get('num_prompts')} prompts{at}"
        elif event.kind == "level":
            lv = event.detail
            figs = lv.get("figures") or {}
            c = lv.get("concurrency")
            tok = figs.get("output_throughput")
            text = f"c{c} {tok:.1f} tok/s" if lv.get("ok") and tok is not None else f"c{c} failed"
            row = self.rows.get(key)
            if row is not None:
                row.setdefault("levels_done", []).append(text)
                row["level"] = ", ".join(row["levels_done"])
            line = f"{event.host} {event.point}: level {text}"
        elif event.kind == "stage":
            # the model's download, before the point's first restart: its line in the level column while it runs
            text = event.detail.get("msg") or "staging the model"
            row = self.rows.get(key)
            if row is not None:
                row["phase"] = "stage"
                row["level"] = "" if event.detail.get("finished") else text
            line = f"{event.host} {event.point}: {text}"
        elif event.kind == "point_finished":
            rec = event.record or {}
            row = self.rows.setdefault(key, {"start": event.at})
            row.update(end=event.at, phase="done", status=rec.get("status") + (f" ({rec['cause']})"
                                                                                if rec.get("cause") else ""))
            line = f"{event.host} {event.point}: {row['status']}"
        elif event.kind == "skipped":
            self.rows[key] = {"start": event.at, "end": event.at, "phase": "done", "status": "passed before (skipped)"}
            line = f"{event.host} {event.point}: passed before with this configuration, skipped"
        elif event.kind == "restore":
            rec = event.record or {}
            line = f"{event.host} restore ({rec.get('action')}): {rec.get('status')} - {rec.get('reason')}"
        elif event.kind == "failed":
            if not event.point:
                return  # the closing summary of the playbook; the table below says the same
            line = f"{event.host} {event.point}: task failed: {event.detail.get('task')}"
        else:
            return
        if self.live:
            self.live.refresh()
        else:
            self._line(line)

    def stop(self):
        if self.live:
            self.live.refresh()
            self.live.stop()
            self.live = None


def run(args) -> int:
    from moesweep import api

    try:
        matrix = None
        if args.matrix is not None:
            if args.backends:
                raise BadInput("--matrix and --backends together: a matrix's cells are its points (add "
                               "moe-runner-backend as one of its axes)")
            try:
                matrix = api.load_matrix(args.matrix)
            except api.MoesweepError as exc:
                raise BadInput(str(exc)) from exc
            backends = None
        else:
            backends = parse_backends(args.backends)
        extra, files = parse_extra(args.extra_var)
        if args.break_lock:
            extra["sweep_lock_break"] = args.break_lock
        for clash in ("backend", "backends", "matrix"):
            if clash in extra:
                raise BadInput(f"-e {clash}=... beside --backends / --matrix: give the points with those only")
        if args.results.exists() and not args.results.is_dir():
            raise BadInput(f"--results {args.results} is a file: give a directory")
        from ansible_collections.moesweep.sweep.plugins.module_utils import secrets

        for key in sorted(k for k in extra if secrets.is_secret_name(k)):
            print(f"moesweep sweep: warning: -e {key}=... puts the secret in this command's argv, which any local user "
                  "can read (/proc/PID/cmdline): pass it in a 0600 vars file (-e @FILE) or a vault instead",
                  file=sys.stderr)
    except BadInput as exc:
        print(f"moesweep sweep: error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    progress = Progress(live=not args.json and not args.no_progress)
    failures: list = []
    result = None

    def body(stop_after_step, cancel):
        nonlocal result
        for event in api.iter_sweep(args.inventory, backends, matrix=matrix, results_dir=args.results,
                                    sweep_id=args.sweep_id,
                                    resume=not args.new, rerun=args.rerun, limit=args.limit, restore=args.restore,
                                    measure_equivalent=args.measure_equivalent,
                                    extra_vars_files=files, vault_password_file=args.vault_password_file,
                                    stop_after_step=stop_after_step, cancel=cancel, **extra):
            if event.kind == "failed":
                failures.append(event)
            if event.kind == "done":
                result = event.detail["result"]
            else:
                progress.update(event)

    try:
        api.interrupt_safe(body)
    except api.MoesweepError as exc:
        progress.stop()
        print(f"moesweep sweep: error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        progress.stop()
    return report(args, result, failures)


# The playbook's last task, which fails when any point did not pass: the table says the same.
CLOSING_TASK = "Say which points did not pass"


def report(args, result, failures) -> int:
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

    if result is not None and not result.points and (result.interrupted or result.status == "canceled"):
        print("moesweep sweep: interrupted before any point was recorded; run the same command again to run the "
              "sweep (a point that was running is recorded then, from its in-flight marker)", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result is None or (result.directory is None and not result.points):
        why = next((f.detail.get("msg") for f in failures if f.detail.get("msg")), None)
        print("moesweep sweep: error: the sweep could not run: %s" % (
            why or "no host answered (check the inventory's gpu_hosts group and --limit)"), file=sys.stderr)
        return EXIT_CANNOT_RUN
    points = [p for p in result.points]
    # this run's own points and restores (results loaded from disk have only the sweep's)
    ran = result.run_points if result.run_points is not None else points
    restores = result.run_restores if result.run_restores is not None else result.restores
    restore_failed = any(r.status != "passed" for r in restores)
    unreachable = sorted({f.host for f in failures if f.detail.get("unreachable") and f.host})
    unrecorded = list(result.unrecorded or []) or [x for f in failures for x in (f.detail.get("unrecorded") or [])]
    if result.interrupted or result.status == "canceled":
        code = EXIT_INTERRUPTED
    elif unrecorded:
        code = EXIT_UNRECORDED
    elif restore_failed:
        code = EXIT_RESTORE_FAILED
    elif any(not p.passed for p in ran) or unreachable:
        code = EXIT_POINTS_FAILED
    elif not ran:
        code = EXIT_CANNOT_RUN
    else:
        code = EXIT_OK
    # What failed outside every point (the host's sweep lock, its facts, ansible itself): no record says it.
    errors = [": ".join(x for x in (f.host, f.detail.get("task"), f.detail["msg"]) if x) for f in failures
              if not f.point and f.detail.get("msg") and not (f.detail.get("task") or "").startswith(CLOSING_TASK)]
    if args.json:
        print(json.dumps({"sweep_id": result.sweep_id, "results": str(result.directory), "exit": code,
                          "interrupted": result.interrupted, "errors": errors, "unrecorded": unrecorded,
                          "points": [{"host": p.host, "point": p.point, "backend": p.backend, "status": p.status,
                                      "cause": p.cause, "simulated": p.simulated, "axes": p.axes,
                                      "levels": [{"concurrency": lv.concurrency, "ok": lv.ok,
                                                  "output_throughput": lv.figures.get("output_throughput")
                                                  if lv.ok else None} for lv in p.levels]} for p in points],
                          "restores": [{"host": r.host, "action": r.action, "point": r.point, "status": r.status,
                                        "reason": r.reason} for r in restores]}, indent=1, default=str))
        return code
    recs = [p.record for p in points] + [r.record for r in result.restores]
    if recs:
        print(summary.render_text(summary.summary_rows(recs)))
        for line in summary.evidence_lines(recs):
            print(line)
        effects = summary.matrix_effects(recs)
        if effects:
            print(summary.render_matrix_text(effects))
    for r in restores:
        print(f"{r.host}: left on {r.point or r.action} ({r.status}): {r.reason}")
    for host in unreachable:
        print(f"{host}: UNREACHABLE - its points did not run (check SSH to it)")
    print(f"results: {result.directory}")
    for text in errors:
        print(f"moesweep sweep: error: {text}", file=sys.stderr)
    if code == EXIT_UNRECORDED:
        print(f"moesweep sweep: records of this run could NOT be written to {result.directory}: see the errors above "
              "for where each is kept; make the directory writable (or free space) and run the same command again",
              file=sys.stderr)
    if code == EXIT_RESTORE_FAILED:
        print("moesweep sweep: the host is NOT on a known-good configuration: see the restore record", file=sys.stderr)
    if code == EXIT_INTERRUPTED:
        print("moesweep sweep: interrupted; run the same command again to complete the sweep", file=sys.stderr)
    return code
