"""``moesweep sweep``: run playbooks/sweep.yml once per backend through ansible-runner, record every
point (a refused or crashed point is a result too), print a comparison, and leave the server on a
known-good backend."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

from moesweep import __version__
from moesweep._collection import REPO_ROOT
from moesweep.util import atomic_write_text

SCHEMA = "moesweep.point/1"


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run one sweep point per backend and compare them")
    p.add_argument("--backends", required=True, help="comma-separated backends, in order of preference")
    p.add_argument("-i", "--inventory", default=None, help="inventory (default: ansible.cfg's, inventory/sim.yml)")
    p.add_argument("--limit", default=None, help="host pattern")
    p.add_argument("--results", type=Path, default=Path("results"), help="results directory (default ./results)")
    p.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE",
                   help="extra variable for every point (repeatable)")
    p.add_argument("--no-restore", action="store_true",
                   help="do not return the server to the best ready backend at the end")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def point_status(outcome) -> str:
    if outcome.unreachable:
        return "unreachable"
    pre = outcome.results.get("preflight") or {}
    ready = outcome.results.get("readiness") or {}
    if pre.get("failed") and not pre.get("forced"):
        return "refused"
    if ready.get("state"):
        return ready["state"]
    return "failed" if outcome.failed_task else "unknown"


def _summarise(backend: str, outcome, run, run_id: str, started: str, extravars: dict) -> dict:
    pre = outcome.results.get("preflight") or {}
    ready = outcome.results.get("readiness") or {}
    facts = (outcome.results.get("gpu_facts") or {}).get("ansible_facts", {}).get("moesweep_gpu", {})
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "host": outcome.host,
        "backend": backend,
        "status": point_status(outcome),
        "started": started,
        "finished": _now(),
        "seconds": round(run.seconds, 2),
        "preflight": {k: pre.get(k) for k in ("verdict", "msg", "reasons", "alternatives", "preflight_warnings",
                                               "advice", "forced", "effective_backend", "sm") if k in pre},
        "readiness": {k: ready.get(k) for k in ("state", "cause", "phase", "after_ready", "decisive_line",
                                                 "traceback", "timeline", "elapsed", "unit_state",
                                                 "health_sequence") if k in ready},
        "gpu": {k: facts.get(k) for k in ("sm", "gpu_count", "gpu_models", "interconnect", "virtualization",
                                          "driver_version", "cuda_toolkit") if k in facts},
        "failed_task": outcome.failed_task,
        "failed_msg": outcome.failed_msg,
        "provenance": {
            "moesweep": __version__,
            "git_commit": _git_commit(),
            "extravars": extravars,
            "ansible_rc": run.rc,
            "artifacts": run.artifact_dir,
        },
    }


def _detail(point: dict) -> str:
    """One line saying why a point ended as it did."""
    ready, pre = point["readiness"], point["preflight"]
    if point["status"] == "refused":
        reasons = [r for r in pre.get("reasons") or [] if r.get("status") == "unsupported"]
        return (reasons[0].get("reason") if reasons else (pre.get("msg") or "").splitlines()[0])[:200]
    if ready.get("state") == "ready":
        warn = pre.get("preflight_warnings") or []
        return f"ready in {ready.get('elapsed')} s" + (f" (caveat: {warn[0][:120]})" if warn else "")
    if ready.get("state"):
        line = (ready.get("decisive_line") or "")[:160]
        return f"{ready.get('cause') or ready['state']} in {ready.get('phase')}: {line}"
    return (point.get("failed_msg") or "").splitlines()[0][:200] if point.get("failed_msg") else ""


def _parse_extra(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"moesweep sweep: error: -e {pair!r}: use KEY=VALUE")
        k, v = pair.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def run(args) -> int:
    from moesweep.runner import run_playbook

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends:
        print("moesweep sweep: error: --backends is empty; e.g. --backends flashinfer_cutlass,triton",
              file=sys.stderr)
        return 2
    if len(set(backends)) != len(backends):
        print("moesweep sweep: error: --backends lists a backend twice", file=sys.stderr)
        return 2
    extra = _parse_extra(args.extra_var)
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.results / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    table = []
    for backend in backends:
        started = _now()
        print(f"== {backend}: running playbooks/sweep.yml", file=sys.stderr, flush=True)
        run = run_playbook("playbooks/sweep.yml", extravars={**extra, "backend": backend},
                           inventory=args.inventory, limit=args.limit, ident=f"{run_id}-{backend}")
        if not run.hosts:
            print(f"   no host answered (ansible rc {run.rc}); see {run.artifact_dir}", file=sys.stderr)
        for host, outcome in sorted(run.hosts.items()):
            point = _summarise(backend, outcome, run, run_id, started, {**extra, "backend": backend})
            path = out_dir / host / f"{backend}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(point, indent=2, sort_keys=True, default=str) + "\n")
            table.append(point)
            print(f"   {host}: {point['status']}: {_detail(point)}", file=sys.stderr, flush=True)
    restored = None
    if not args.no_restore and table:
        ready = [p["backend"] for p in table if p["status"] == "ready"]
        last = table[-1]["backend"]
        if ready and (ready[0] != last or table[-1]["status"] != "ready"):
            restored = ready[0]
            print(f"== leaving the server on known-good backend {restored}", file=sys.stderr, flush=True)
            run_playbook("playbooks/sweep.yml", extravars={**extra, "backend": restored},
                         inventory=args.inventory, limit=args.limit, ident=f"{run_id}-restore-{restored}")
        elif ready:
            restored = last
    summary = {"run_id": run_id, "results": str(out_dir), "restored_backend": restored,
               "points": [{k: p[k] for k in ("host", "backend", "status", "seconds")} |
                          {"cause": p["readiness"].get("cause"), "verdict": p["preflight"].get("verdict")}
                          for p in table]}
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{'host':<14} {'backend':<22} {'status':<12} {'preflight':<12} {'cause':<16} seconds")
        for p in summary["points"]:
            print(f"{p['host']:<14} {p['backend']:<22} {p['status']:<12} {str(p['verdict']):<12} "
                  f"{str(p['cause'] or ''):<16} {p['seconds']}")
        print(f"results: {out_dir}" + (f"; server left on {restored}" if restored else ""))
    return 0 if any(p["status"] == "ready" for p in table) else 1
