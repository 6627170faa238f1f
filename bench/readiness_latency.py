#!/usr/bin/env python3
"""Readiness detection delay on a simulated host: from the simulator writing "fired up" (or its
traceback) to the readiness wait's verdict (module_utils readiness, the wait moesweep.sweep.sglang_restart runs after
its start and moesweep.sweep.sglang_ready runs alone), over N restarts each, next to the manual loop (grep the log
every 5 s) measured on the same restarts.

    .venv/bin/python bench/readiness_latency.py [--runs 20]

Delays compare the journal's own timestamp of the decisive line with the wall-clock time at which
each watcher reached its verdict; both clocks are the same kernel's (the host is a container).
Goal: crash <= 1 s, ready <= 0.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from moesweep.runner import run_playbook  # noqa: E402
from moesweep.sim import hosts  # noqa: E402

FAST = {"MOESWEEP_SIM_TIME_SCALE": "0.15"}


def configure(inventory: Path, backend: str, force: bool, results: Path) -> None:
    """Put the unit on ``backend`` (one sweep point, its benchmark off) and leave it there: restore=none, so the
    forced crashing point stays the unit the measured restarts start."""
    run_playbook("playbooks/sweep.yml", inventory=str(inventory), extravars={
        "backend": backend, "force": force, "restore": "none", "results_dir": str(results), "rerun": True,
        "sglang_bench_enabled": False, "sglang_server_extra_environment": FAST,
        "sglang_server_ready_timeout": 120})


def measure(inventory: Path, host: str, runs: int) -> tuple[list[float], list[float], list[str]]:
    ours, grepped, states = [], [], []
    for _ in range(runs):
        captured = {}

        def grab(event, captured=captured):
            data = event.get("event_data") or {}
            if event.get("event") == "runner_on_ok" and data.get("task") == "Read the timestamps":
                captured["stamps"] = data["res"]["stdout"].split()

        run = run_playbook("bench/playbooks/readiness_once.yml", inventory=str(inventory), on_event=grab)
        verdict = run.hosts[host].results.get("readiness", {})
        stamps = captured.get("stamps", [])
        if len(stamps) != 2 or "verdict_at" not in verdict:
            print(f"  run failed: {run.hosts[host].failed_msg}", file=sys.stderr)
            continue
        grep_at, line_at = float(stamps[0]), float(stamps[1])
        ours.append(verdict["verdict_at"] - line_at)
        grepped.append(grep_at - line_at)
        states.append(verdict["state"])
    return ours, grepped, states


def show(label: str, ours: list[float], grepped: list[float], states: list[str]) -> None:
    if not ours:
        print(f"{label}: no successful run")
        return
    print(f"{label}: n={len(ours)} states={sorted(set(states))}")
    print(f"  readiness wait   median {statistics.median(ours) * 1000:8.1f} ms   max {max(ours) * 1000:8.1f} ms")
    print(f"  grep loop (5 s)  median {statistics.median(grepped) * 1000:8.1f} ms   max {max(grepped) * 1000:8.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    res = hosts.up(n=1, cluster="bench-ready", inventory=Path("/run/moesweep/bench-ready.yml"), log=lambda m: None)
    inv, host = res.inventory, res.hosts[0].name
    try:
        with tempfile.TemporaryDirectory(prefix="moesweep-readiness-") as results:
            configure(inv, "flashinfer_cutlass", False, Path(results))
            ready = measure(inv, host, args.runs)
            configure(inv, "flashinfer_trtllm", True, Path(results))
            crash = measure(inv, host, args.runs)
    finally:
        hosts.down(cluster="bench-ready", log=lambda m: None)
    print("readiness detection delay (line written -> verdict), simulated SM120 host, sglang 0.5.9")
    show("ready (fired up)", *ready)
    show("crash (flashinfer_trtllm traceback)", *crash)
    print("goal: ready <= 500 ms, crash <= 1000 ms")
    # a figure is only worth its verdicts: every ready run judged ready, every crash run judged crashed
    if set(ready[2]) != {"ready"} or set(crash[2]) != {"crashed"}:
        print("a restart was judged otherwise than its kind: the figures above do not measure what they say",
              file=sys.stderr)
        return 2
    met = ready[0] and crash[0] and max(ready[0]) <= 0.5 and max(crash[0]) <= 1.0
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
