"""Wall time of a 4-point sweep over SSH on simulated hosts, two figures:

1. the sweep's overhead per point on 1 host: the playbook run's wall time minus the simulated server's own start
   time (its log's "ready" phase) and shutdown (what a restart waited for the previous server to exit after
   SIGTERM: sglang's SIGTERM watchdog ticks every 5 s) and the measurements' own time (bench_serving's duration of
   every level, the GSM8K evaluator's own run, the all-reduce measurement), over the points (goal: <= 10 s per
   point); and the same per point from its record (record seconds minus server start, levels and evaluator);
2. the same sweep on 4 hosts with -e spread=true against 1 host (goal: ratio <= 0.35).

The hosts are provisioned first with site.yml (test stack and benchmark client from a wheelhouse served on every
host's gateway), so each point is benchmarked as in a real sweep; the timed runs are the user's command,
`ansible-playbook sweep.yml -e backends=[...]`, from the repository root.

The simulated servers run at the simulator's default phase durations (time scale 1.0: a ~15 s start where a real
8-GPU VM loads a large MoE model for minutes). A smaller --time-scale shortens only the servers' own starts and
drains, which is what the spread runs in parallel, while the 4 simulated hosts and the controller share this
machine's CPUs (4 real VMs each have their own): the ratio it gives is further from a real sweep's, not closer.

Run as root: .venv/bin/python bench/sweep_wall.py [--time-scale 1.0] [--keep DIR] [--json] [--one-host]
[--profile] [--keep-up]. With --profile, bench/callback_plugins/task_times.py times every task of the timed runs and
the figures say where each point's overhead goes (the tasks' own seconds by phase, and the gaps between tasks:
the controller's includes and templating).
Exit 0 when both goals are met, 1 when one is missed, 2 when a point was not recorded exactly once or did not pass.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]

from moesweep.runner import run_ansible  # noqa: E402
from moesweep.sim import hosts as simhosts  # noqa: E402
from moesweep.sim import wheelhouse  # noqa: E402
from moesweep.sim.presets import SIM_RATES, SMALL_BENCH  # noqa: E402

LOCKS = REPO / "roles" / "sglang_env" / "files" / "locks"
STACK = "test-cpu-sglang-0.5.9"
BACKENDS = ["auto", "flashinfer_cutedsl", "flashinfer_cutlass", "triton"]
CLUSTER = "bench-sweep"
GOAL = 0.35
OVERHEAD_GOAL = 10.0
CPU_SPLITS: list[dict[str, float]] = []  # per timed sweep, in order: where its CPU-seconds went


def points(results: Path, kind: str = "point") -> list[dict]:
    out = []
    for f in results.glob("*/points.jsonl"):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in out if r["kind"] == kind]


def shutdown_s(rec: dict) -> float:
    """The previous server's own shutdown that a record's restart waited for: ``systemctl stop`` returning once its
    processes exited (``readiness.released.stop_s``; sglang exits at its SIGTERM watchdog's next 5 s tick, which the
    simulator keeps). The point's early stop overlaps most of it with the next point's first tasks; what is left is
    the server's own time, as its start is."""
    return float((((rec.get("readiness") or {}).get("released")) or {}).get("stop_s") or 0.0)


def own_time(rec: dict) -> tuple[float, float]:
    """(the server's own start and shutdown time, the measuring tools' own time) of one record: bench_serving's
    duration of every level and the GSM8K evaluator's own run (sglang.test.few_shot_gsm8k's "Latency",
    ``accuracy.latency_s``). Both are measurements a real point makes for minutes; what the tools do around them
    (imports, warmups, bench_serving's fixed 1 s pause) stays overhead."""
    start = ((rec.get("readiness") or {}).get("timeline") or {}).get("ready", {}).get("at") or 0.0
    start += shutdown_s(rec)
    levels = (rec.get("benchmark") or {}).get("levels") or []
    bench = sum(float((lv.get("figures") or {}).get("duration") or 0.0) for lv in levels)
    return float(start), bench + float((rec.get("accuracy") or {}).get("latency_s") or 0.0)


def interconnect_s(results: Path) -> float:
    """The all-reduce measurements' own seconds (interconnect.jsonl ``elapsed``: once per host and NCCL environment,
    with the server stopped), a measurement like the levels."""
    total = 0.0
    for f in results.glob("*/interconnect.jsonl"):
        for line in f.read_text().splitlines():
            if line.strip():
                total += float(json.loads(line).get("elapsed") or 0.0)
    return total


def overhead(wall: float, recs: list[dict], restores: list[dict], measured_s: float = 0.0) -> dict:
    """Overhead of the sweep: its wall time less the server's own start time (each point's, and the restore's when
    it restarted the server: the best point was not the last), the measuring tools' own time (``own_time``) and
    ``measured_s``, the all-reduce measurements' own seconds."""
    per_record = {}
    for r in recs:
        start, bench = own_time(r)
        per_record[r["point"]] = round(float(r.get("seconds") or 0.0) - start - bench, 2)
    own = sum(sum(own_time(r)) for r in recs) + measured_s
    by_point = {r["point"]: r for r in recs}
    restore = None
    for r in restores:  # a restore record has no timeline: a restart takes its point's server start again
        point = by_point.get(r.get("point"))
        restarted = bool(point) and (r.get("readiness") or {}).get("invocation_id") not in (
            None, (point.get("readiness") or {}).get("invocation_id"))
        if restarted:
            own += own_time(point)[0] - shutdown_s(point) + shutdown_s(r)
        restore = {"point": r.get("point"), "restarted": restarted}
    # counted as overhead, yet bench_serving's own: each level's time in the client outside its `duration` (its
    # arguments and tokenizer, the warmup request, the fixed 1 s pause before the main run, its metrics and output)
    fixed = sum(float(lv.get("wall_s") or 0.0) - float((lv.get("figures") or {}).get("duration") or 0.0)
                for r in recs for lv in (r.get("benchmark") or {}).get("levels") or [] if lv.get("wall_s"))
    accuracy = sum(float((r.get("accuracy") or {}).get("latency_s") or 0.0) for r in recs)
    shutdown = sum(shutdown_s(r) for r in recs)
    if restore and restore["restarted"]:
        shutdown += sum(shutdown_s(r) for r in restores)
    return {"wall_s": round(wall, 1), "server_start_and_measurements_s": round(own, 1),
            "server_shutdown_waited_s": round(shutdown, 1),
            "accuracy_evaluator_s": round(accuracy, 1), "interconnect_measured_s": round(measured_s, 1),
            "per_point_s": round((wall - own) / max(len(recs), 1), 2), "per_point_in_record_s": per_record,
            "bench_serving_fixed_per_point_s": round(fixed / max(len(recs), 1), 2),
            # the restore restarts the best point unless it is the last one: one server start more in the wall time
            "restore": restore}


def cpu_busy_s() -> float:
    """CPU-seconds every process of this machine has used so far (the simulated hosts are containers on its
    kernel, so their servers and clients count too): /proc/stat's first line, user + nice + system + irq + softirq
    in USER_HZ ticks (proc(5)); steal, the time the hypervisor ran others, is not this machine's work."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


SIM_CGROUP = Path("/sys/fs/cgroup/unified/moesweep-sim")  # every simulated host's subtree (moesweep.sim.nspawn)


def sim_cgroup_usage_s() -> dict[str, float]:
    """CPU-seconds per cgroup of the simulated hosts (cgroup v2 ``cpu.stat`` ``usage_usec``, which counts the
    group's descendants, stopped ones too), down to their services: each host's own, its systemd's slices and
    units (the server is ``system.slice/sglang.service``, modules run in ``user.slice``'s SSH sessions)."""
    out = {}
    if not SIM_CGROUP.is_dir():
        return out
    for stat in SIM_CGROUP.glob("**/cpu.stat"):
        rel = stat.parent.relative_to(SIM_CGROUP)
        if len(rel.parts) > 4:
            continue
        for line in stat.read_text().splitlines():
            if line.startswith("usage_usec "):
                out[str(rel)] = int(line.split()[1]) / 1e6
    return out


def cpu_split(before: dict[str, float], after: dict[str, float], total: float) -> dict[str, float]:
    """Where a run's CPU-seconds went: the controller (the machine less the simulated hosts) and, summed over the
    hosts, the groups below each host (by their path under it: ``system.slice/sglang.service``, ...)."""
    split = {"controller": total - (after.get(".", 0.0) - before.get(".", 0.0))}
    for key, used in after.items():
        parts = Path(key).parts
        if len(parts) < 2:
            continue
        name = "/".join(parts[1:])
        split[name] = split.get(name, 0.0) + used - before.get(key, 0.0)
    return {k: round(v, 1) for k, v in sorted(split.items(), key=lambda kv: -kv[1]) if v >= 0.5}


def parse_variant(text: str) -> tuple[str | None, str | None]:
    """A strategy variant, ``STRATEGY[@INTERNAL_POLL_INTERVAL]`` (``free@0.01``), or ``default`` (the playbook's
    own choice and ansible-core's default interval)."""
    if text == "default":
        return None, None
    strategy, _, interval = text.partition("@")
    if interval:
        float(interval)
    return strategy, interval or None


def timed_sweep(inventory: Path, results: Path, time_scale: float, *args: str,
                profile: Path | None = None, variant: str = "default") -> tuple[float, list[dict], float]:
    env: dict[str, str] = {}
    if profile is not None:
        env = {"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "bench" / "callback_plugins"),
               "ANSIBLE_CALLBACKS_ENABLED": "moesweep.sweep.results,task_times", "MOESWEEP_TASK_TIMES": str(profile)}
    strategy, interval = parse_variant(variant)
    if strategy:
        args = (*args, "-e", "sweep_strategy=" + strategy)
    if interval:
        env["ANSIBLE_INTERNAL_POLL_INTERVAL"] = interval
    # measure_equivalent: every point starts its own server and is benchmarked, so the overhead per point is the one
    # the guard has always measured (auto, flashinfer_cutedsl and triton run the same kernels on this host: a user's
    # sweep records two of them same_as the first and starts them not at all)
    settings = {"sglang_server_extra_environment": {"MOESWEEP_SIM_TIME_SCALE": str(time_scale), **SIM_RATES},
                "sglang_server_ready_timeout": 600, "results_dir": str(results), "rerun": True,
                "measure_equivalent": True, **SMALL_BENCH}
    t0, cpu0, groups0 = time.monotonic(), cpu_busy_s(), sim_cgroup_usage_s()
    proc = run_ansible("ansible-playbook", "-i", str(inventory), "sweep.yml", "-e", json.dumps(settings),
                       "-e", "backends=" + ",".join(BACKENDS), *args, check=False, env=env or None)
    if proc.returncode != 0:
        print(f"ansible-playbook sweep.yml exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}",
              file=sys.stderr, flush=True)
    wall = time.monotonic() - t0
    cpu = cpu_busy_s() - cpu0
    CPU_SPLITS.append(cpu_split(groups0, sim_cgroup_usage_s(), cpu))
    return wall, points(results), cpu


def where_time_goes(profile: Path) -> dict:
    """The 1-host run's task times (bench/callback_plugins/task_times.py), summed: per action, the tasks' own
    seconds and the gaps before them, and the slowest tasks by name."""
    rows = [json.loads(line) for line in profile.read_text().splitlines() if line.strip()]
    by_action: dict[str, list[float]] = {}
    by_task: dict[str, float] = {}
    for r in rows:
        acc = by_action.setdefault(r["action"], [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += r["seconds"]
        acc[2] += r["gap"]
        name = r["task"].split(" of ")[0].split(", ")[0].split(" for ")[0][:70]
        by_task[name] = by_task.get(name, 0.0) + r["seconds"]
    return {"tasks": len(rows), "task_s": round(sum(r["seconds"] for r in rows), 1),
            "gap_s": round(sum(r["gap"] for r in rows), 1),
            "by_action": {a: {"n": n, "task_s": round(t, 1), "gap_s": round(g, 1)}
                          for a, (n, t, g) in sorted(by_action.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))},
            "slowest_tasks": dict(sorted(((k, round(v, 1)) for k, v in by_task.items()), key=lambda kv: -kv[1])[:15])}


def host_timeline(profile: Path) -> dict:
    """The 4-host run's task times per host: when its first task started and its last ended (seconds from the
    run's first task), its tasks' own seconds, and its three slowest tasks: which host ends the run, and why."""
    rows = [json.loads(line) for line in profile.read_text().splitlines() if line.strip()]
    t0 = min((r["start"] for r in rows), default=0.0)
    out = {}
    for host in sorted({r["host"] for r in rows}):
        mine = [r for r in rows if r["host"] == host]
        slow = sorted(mine, key=lambda r: -r["seconds"])[:3]
        out[host] = {"first_s": round(min(r["start"] for r in mine) - t0, 1),
                     "last_s": round(max(r["start"] + r["seconds"] for r in mine) - t0, 1),
                     "task_s": round(sum(r["seconds"] for r in mine), 1), "tasks": len(mine),
                     "slowest": {r["task"][:60]: r["seconds"] for r in slow}}
    return out


def compare_variants(inventory: Path, work: Path, host: str, args: argparse.Namespace) -> int:
    """The 1-host sweep under each strategy variant, ``args.runs`` times each, interleaved so that a machine that
    gets slower weighs on every variant alike: per run the overhead per point, the wall time and the controller's
    CPU-seconds (the machine's less the simulated hosts'); per variant their mean, min and max."""
    rows: dict[str, list[dict]] = {v: [] for v in args.variant}
    failed = False
    for run in range(args.runs):
        for variant in args.variant:
            results = work / f"{variant.replace('@', '-at-')}-{run}"
            wall, recs, cpu = timed_sweep(inventory, results, args.time_scale, "--limit", host, variant=variant)
            over = overhead(wall, recs, points(results, "restore"), interconnect_s(results))
            ok = sorted(r["point"] for r in recs) == sorted(BACKENDS) and all(r["status"] == "passed" for r in recs)
            failed |= not ok
            row = {"per_point_s": over["per_point_s"], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                   "controller_cpu_s": CPU_SPLITS[-1].get("controller", 0.0), "passed": ok}
            rows[variant].append(row)
            if not args.json:
                print(f"run {run + 1}/{args.runs} {variant:24s} overhead {row['per_point_s']:6.2f} s per point, "
                      f"wall {row['wall_s']:6.1f} s, CPU {row['cpu_s']:5.1f} s (controller "
                      f"{row['controller_cpu_s']:5.1f} s), every point passed: {ok}", flush=True)
    summary = {}
    for variant, runs in rows.items():
        summary[variant] = {k: {"mean": round(sum(r[k] for r in runs) / len(runs), 2),
                                "min": min(r[k] for r in runs), "max": max(r[k] for r in runs)}
                            for k in ("per_point_s", "wall_s", "controller_cpu_s")}
    if args.json:
        print(json.dumps({"runs": rows, "summary": summary, "time_scale": args.time_scale, "backends": BACKENDS}))
    else:
        print(f"{args.runs} run(s) each, 1 host, {len(BACKENDS)} points, time scale {args.time_scale}:")
        for variant, f in summary.items():
            print(f"  {variant:24s} " + "; ".join(
                f"{k} mean {v['mean']} (min {v['min']}, max {v['max']})" for k, v in f.items()))
    return 2 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="the simulator's MOESWEEP_SIM_TIME_SCALE (1.0, its default: seconds-long server starts)")
    parser.add_argument("--keep", type=Path, help="keep the results directories here")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--one-host", action="store_true", help="time the 1-host sweep only (no spread figure)")
    parser.add_argument("--profile", action="store_true",
                        help="time every task of the timed runs (the 4-host run per host)")
    parser.add_argument("--keep-up", action="store_true", help="leave the simulated hosts running (faster reruns)")
    parser.add_argument("--variant", action="append", metavar="STRATEGY[@INTERVAL]",
                        help="compare strategies on the 1-host sweep: the play's strategy (-e sweep_strategy) and "
                             "ansible-core's internal_poll_interval, e.g. free, free@0.005, host_pinned; "
                             "'default' is the playbook's own; repeatable; implies --one-host")
    parser.add_argument("--runs", type=int, default=1, help="with --variant: timed runs of each, interleaved")
    args = parser.parse_args()
    if args.variant:
        for v in args.variant:
            parse_variant(v)
        args.one_host = True
    root = wheelhouse.build([LOCKS / f"{STACK}.txt", LOCKS / "client-sglang-0.5.9.txt"])
    inventory = Path(f"/run/moesweep/{CLUSTER}.yml")
    work = args.keep or Path(tempfile.mkdtemp(prefix="moesweep-spread-"))
    work.mkdir(parents=True, exist_ok=True)
    res = simhosts.up(n=1 if args.one_host else 4, cluster=CLUSTER, inventory=inventory, log=lambda m: None)
    try:
        with contextlib.ExitStack() as stack:
            for h in res.hosts:
                stack.enter_context(wheelhouse.serve(root, h.gateway, 8702))
            extra = json.dumps({"sglang_env_stack": STACK,
                                "sglang_env_index_url": "http://{{ moesweep_sim_gateway }}:8702/simple/",
                                "sglang_env_trusted_hosts": ["{{ moesweep_sim_gateway }}"]})
            run_ansible("ansible-playbook", "-i", str(inventory), str(REPO / "site.yml"), "-e", extra)
        one = sorted(h.name for h in res.hosts)[0]
        if args.variant:
            return compare_variants(inventory, work, one, args)
        profile = work / "task-times.jsonl" if args.profile else None
        wall_1, recs_1, cpu_1 = timed_sweep(inventory, work / "one-host", args.time_scale, "--limit", one,
                                            profile=profile)
        profile_4 = work / "task-times-four-hosts.jsonl" if args.profile else None
        wall_4, recs_4, cpu_4 = (None, [], None) if args.one_host else timed_sweep(
            inventory, work / "four-hosts", args.time_scale, "-e", "spread=true", profile=profile_4)
    finally:
        if not args.keep_up:
            simhosts.down(cluster=CLUSTER, log=lambda m: None)
    ok = ((args.one_host or sorted(r["point"] for r in recs_4) == sorted(BACKENDS))
          and sorted(r["point"] for r in recs_1) == sorted(BACKENDS)
          and all(r["status"] == "passed" for r in recs_1 + recs_4))
    ratio = wall_4 / wall_1 if wall_4 is not None else None
    over = overhead(wall_1, recs_1, points(work / "one-host", "restore"), interconnect_s(work / "one-host"))
    figures = {"backends": BACKENDS, "time_scale": args.time_scale, "one_host_s": round(wall_1, 1),
               "four_hosts_spread_s": wall_4 and round(wall_4, 1), "ratio": ratio and round(ratio, 3), "goal": GOAL,
               "overhead_one_host": over, "overhead_goal_s": OVERHEAD_GOAL, "every_point_once_and_passed": ok,
               "statuses": {r["point"]: [r["host"], r["status"]] for r in recs_4},
               # CPU work, every process of the machine: a run cannot take less wall time than its CPU-seconds spread
               # over every CPU, so the 4-host run's CPU-seconds over all CPUs, against the 1-host wall time, is a
               # floor under the ratio that only less work (not less waiting) can lower.
               "cpus": os.cpu_count(), "one_host_cpu_s": round(cpu_1, 1),
               "four_hosts_cpu_s": cpu_4 and round(cpu_4, 1),
               "ratio_floor_on_these_cpus": cpu_4 and round(cpu_4 / (os.cpu_count() * wall_1), 3),
               "cpu_split": CPU_SPLITS}
    if profile is not None:
        figures["where_time_goes"] = where_time_goes(profile)
        if wall_4 is not None:
            figures["four_hosts_timeline"] = host_timeline(profile_4)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"4-point sweep ({', '.join(BACKENDS)}), simulator time scale {args.time_scale}, benchmark on:")
        print(f"  1 host:                 {wall_1:7.1f} s, of which server start + measurements "
              f"{over['server_start_and_measurements_s']:.1f} s (the previous servers' shutdowns the restarts waited "
              f"for {over['server_shutdown_waited_s']:.1f} s, bench_serving's levels, the GSM8K evaluator's "
              f"{over['accuracy_evaluator_s']:.1f} s, the all-reduce's {over['interconnect_measured_s']:.1f} s); "
              f"{cpu_1:.1f} CPU-s on this machine's {os.cpu_count()} CPUs "
              f"({cpu_1 / wall_1:.2f} busy on average)")
        print("    where: " + ", ".join(f"{k} {v}" for k, v in list(CPU_SPLITS[0].items())[:10]))
        print(f"  overhead per point:     {over['per_point_s']:7.2f} s (goal <= {OVERHEAD_GOAL:.0f} s); "
              "in each record: " + ", ".join(f"{p} {v:.2f} s" for p, v in over["per_point_in_record_s"].items()))
        print(f"    of which inside bench_serving's levels, outside its durations (warmup, fixed 1 s pause, ...): "
              f"{over['bench_serving_fixed_per_point_s']:.2f} s per point")
        if over["restore"]:
            print(f"    the restore left the host on {over['restore']['point']}: "
                  + ("restarted (the best point was not the last; its server start is in the 1-host wall time)"
                     if over["restore"]["restarted"] else "judged as it ran (the best point was the last)"))
        if profile is not None:
            where = figures["where_time_goes"]
            print(f"  1-host run, {where['tasks']} task results: {where['task_s']} s in tasks, "
                  f"{where['gap_s']} s between them")
            for action, f in where["by_action"].items():
                print(f"    {action:40s} x{f['n']:<4d} {f['task_s']:7.1f} s in tasks  {f['gap_s']:6.1f} s before them")
            print("  slowest tasks (summed over the points): " + "; ".join(
                f"{k} {v} s" for k, v in where["slowest_tasks"].items()))
        if wall_4 is not None:
            where = ", ".join(f"{p} on {h} {s}" for p, (h, s) in figures["statuses"].items())
            print(f"  4 hosts, spread=true:   {wall_4:7.1f} s  ({where})")
            print(f"  ratio {ratio:.3f} (goal <= {GOAL}); every point recorded once and passed: {ok}")
            print(f"    4-host run: {cpu_4:.1f} CPU-s ({cpu_4 / wall_4:.2f} of {os.cpu_count()} CPUs busy on average); "
                  f"floor under the ratio on {os.cpu_count()} CPUs (that CPU work over all of them, against the "
                  "1-host wall time): "
                  f"{figures['ratio_floor_on_these_cpus']:.3f}")
            print("    where: " + ", ".join(f"{k} {v}" for k, v in list(CPU_SPLITS[-1].items())[:10]))
            for host, f in figures.get("four_hosts_timeline", {}).items():
                print(f"    {host}: tasks {f['first_s']}-{f['last_s']} s after the run's first, {f['tasks']} tasks "
                      f"{f['task_s']} s; slowest: " + "; ".join(f"{k} {v}" for k, v in f["slowest"].items()))
    if not ok:
        return 2
    return 0 if (ratio is None or ratio <= GOAL) and over["per_point_s"] <= OVERHEAD_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
