"""Wall time of a 4-point sweep over SSH on simulated hosts, two figures:

1. the sweep's overhead per point on 1 host: the playbook run's wall time minus the simulated server's own start
   time (its log's "ready" phase) and bench_serving's own duration of every level, over the points (goal: <= 10 s
   per point); and the same per point from its record (record seconds minus server start and levels);
2. the same sweep on 4 hosts with -e spread=true against 1 host (goal: ratio <= 0.35).

The hosts are provisioned first with site.yml (test stack and benchmark client from a wheelhouse served on every
host's gateway), so each point is benchmarked as in a real sweep; the timed runs are the user's command,
`ansible-playbook sweep.yml -e backends=[...]`, from the repository root.

Run as root: .venv/bin/python bench/sweep_wall.py [--time-scale 0.25] [--keep DIR] [--json]
Exit 0 when both goals are met, 1 when one is missed, 2 when a point was not recorded exactly once or did not pass.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests"), str(REPO / "collections")]

from conftest import SIM_RATES, SMALL_BENCH, run_ansible  # noqa: E402
from helpers import wheelhouse  # noqa: E402

from moesweep.sim import hosts as simhosts  # noqa: E402

LOCKS = REPO / "roles" / "sglang_env" / "files" / "locks"
STACK = "test-cpu-sglang-0.5.9"
BACKENDS = ["auto", "flashinfer_cutedsl", "flashinfer_cutlass", "triton"]
CLUSTER = "bench-sweep"
GOAL = 0.35
OVERHEAD_GOAL = 10.0


def points(results: Path, kind: str = "point") -> list[dict]:
    out = []
    for f in results.glob("*/points.jsonl"):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in out if r["kind"] == kind]


def own_time(rec: dict) -> tuple[float, float]:
    """(the server's own start time, bench_serving's own duration over the levels) of one record."""
    start = ((rec.get("readiness") or {}).get("timeline") or {}).get("ready", {}).get("at") or 0.0
    levels = (rec.get("benchmark") or {}).get("levels") or []
    return float(start), sum(float((lv.get("figures") or {}).get("duration") or 0.0) for lv in levels)


def overhead(wall: float, recs: list[dict], restores: list[dict]) -> dict:
    """Overhead of the sweep: its wall time less the server's own start time (each point's, and the restore's when
    it restarted the server: the best point was not the last) and bench_serving's own durations."""
    per_record = {}
    for r in recs:
        start, bench = own_time(r)
        per_record[r["point"]] = round(float(r.get("seconds") or 0.0) - start - bench, 2)
    own = sum(sum(own_time(r)) for r in recs)
    by_point = {r["point"]: r for r in recs}
    for r in restores:  # a restore record has no timeline: a restart takes its point's server start again
        point = by_point.get(r.get("point"))
        restarted = point and (r.get("readiness") or {}).get("invocation_id") not in (
            None, (point.get("readiness") or {}).get("invocation_id"))
        if restarted:
            own += own_time(point)[0]
    return {"wall_s": round(wall, 1), "server_start_and_bench_s": round(own, 1),
            "per_point_s": round((wall - own) / max(len(recs), 1), 2), "per_point_in_record_s": per_record}


def timed_sweep(inventory: Path, results: Path, time_scale: float, *args: str) -> tuple[float, list[dict]]:
    settings = {"sglang_server_extra_environment": {"MOESWEEP_SIM_TIME_SCALE": str(time_scale), **SIM_RATES},
                "sglang_server_ready_timeout": 600, "results_dir": str(results), "rerun": True, **SMALL_BENCH}
    t0 = time.monotonic()
    run_ansible("ansible-playbook", "-i", str(inventory), "sweep.yml", "-e", json.dumps(settings),
                "-e", "backends=" + ",".join(BACKENDS), *args, check=False)
    wall = time.monotonic() - t0
    return wall, points(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--time-scale", type=float, default=0.25,
                        help="the simulator's MOESWEEP_SIM_TIME_SCALE (1.0: the recorded launch timings)")
    parser.add_argument("--keep", type=Path, help="keep the results directories here")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    root = wheelhouse.build([LOCKS / f"{STACK}.txt", LOCKS / "client-sglang-0.5.9.txt"])
    inventory = Path(f"/run/moesweep/{CLUSTER}.yml")
    work = args.keep or Path(tempfile.mkdtemp(prefix="moesweep-spread-"))
    res = simhosts.up(n=4, cluster=CLUSTER, inventory=inventory, log=lambda m: None)
    try:
        with contextlib.ExitStack() as stack:
            for h in res.hosts:
                stack.enter_context(wheelhouse.serve(root, h.gateway, 8702))
            extra = json.dumps({"sglang_env_stack": STACK,
                                "sglang_env_index_url": "http://{{ moesweep_sim_gateway }}:8702/simple/",
                                "sglang_env_trusted_hosts": ["{{ moesweep_sim_gateway }}"]})
            run_ansible("ansible-playbook", "-i", str(inventory), str(REPO / "site.yml"), "-e", extra)
        one = sorted(h.name for h in res.hosts)[0]
        wall_1, recs_1 = timed_sweep(inventory, work / "one-host", args.time_scale, "--limit", one)
        wall_4, recs_4 = timed_sweep(inventory, work / "four-hosts", args.time_scale, "-e", "spread=true")
    finally:
        simhosts.down(cluster=CLUSTER, log=lambda m: None)
    ok = (sorted(r["point"] for r in recs_4) == sorted(BACKENDS)
          and sorted(r["point"] for r in recs_1) == sorted(BACKENDS)
          and all(r["status"] == "passed" for r in recs_1 + recs_4))
    ratio = wall_4 / wall_1
    over = overhead(wall_1, recs_1, points(work / "one-host", "restore"))
    figures = {"backends": BACKENDS, "time_scale": args.time_scale, "one_host_s": round(wall_1, 1),
               "four_hosts_spread_s": round(wall_4, 1), "ratio": round(ratio, 3), "goal": GOAL,
               "overhead_one_host": over, "overhead_goal_s": OVERHEAD_GOAL, "every_point_once_and_passed": ok,
               "statuses": {r["point"]: [r["host"], r["status"]] for r in recs_4}}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"4-point sweep ({', '.join(BACKENDS)}), simulator time scale {args.time_scale}, benchmark on:")
        print(f"  1 host:                 {wall_1:7.1f} s, of which server start + bench_serving "
              f"{over['server_start_and_bench_s']:.1f} s")
        print(f"  overhead per point:     {over['per_point_s']:7.2f} s (goal <= {OVERHEAD_GOAL:.0f} s); "
              "in each record: " + ", ".join(f"{p} {v:.2f} s" for p, v in over["per_point_in_record_s"].items()))
        where = ", ".join(f"{p} on {h} {s}" for p, (h, s) in figures["statuses"].items())
        print(f"  4 hosts, spread=true:   {wall_4:7.1f} s  ({where})")
        print(f"  ratio {ratio:.3f} (goal <= {GOAL}); every point recorded once and passed: {ok}")
    if not ok:
        return 2
    return 0 if ratio <= GOAL and over["per_point_s"] <= OVERHEAD_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
