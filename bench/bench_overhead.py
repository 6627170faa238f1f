#!/usr/bin/env python3
"""What the benchmark stage costs beyond the benchmark itself: the sglang_bench module's wall time minus
bench_serving's own ``duration`` of every level, per level and in total, on the simulated SGLang server
(goal: <= 2 s per level), and where that time goes.

    .venv/bin/python bench/bench_overhead.py [--concurrency 1 2 4 8] [--input-len 32] [--output-len 64]
                                             [--prompts-per-level 2] [--backend sglang] [--json]

The module runs as Ansible runs it (a JSON args file, the collection on PYTHONPATH), on 127.0.0.1 against
a local simulated server with telemetry on (the simulated nvidia-smi, as on a simulated host). To see inside
it without changing it, ``client_python`` is a small bash wrapper around the real client interpreter: it
stamps the start and end of each of the module's calls of the client (venv check, NVML probe, the driver)
and copies the driver's event lines (``imported``, per level ``start`` / ``end``, ``done``: DRIVER_SOURCE in
plugins/module_utils/bench_serving.py) to a log - the module itself keeps only the level start / end times.
The wrapper costs one bash start (a few ms) per call. Tokenizer loading and ``/get_server_info`` happen
inside bench_serving's level, where no event marks them, so they are also timed on their own (``standalone``).

What bench_serving 0.5.9 itself spends outside its ``duration`` in every level
(https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/bench_serving.py): argument parsing,
``get_tokenizer`` and the dataset (L2938-L2939), the warmup requests of at most 32 output tokens
(L2349-L2414; the module sends 1 in the first level and 0 in the others), a fixed ``time.sleep(1.0)`` after
the warmup, taken with 0 warmup requests too (L2421), and after ``duration`` a second
``GET /get_server_info`` (L2663), the metrics and the output file. For the ``sglang`` backends the first
``/get_server_info`` (L2535) falls inside ``duration`` (L2557).

Exit status: 0 goal met, 1 goal missed, 2 the module failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from moesweep.sim import local_server  # noqa: E402

GOAL_S = 2.0
DEFAULT_RATES = (30.0, 0.05, 5000.0)

WRAPPER = r"""#!/bin/bash
# bench/bench_overhead.py: the real client interpreter, with each call's start / end and the driver's events logged
REAL=%(real)s
LOG=%(log)s
case "$2" in
  *"def emit("*) kind=driver ;;
  *"--probe"*|*"pynvml"*) kind=nvml_probe ;;
  *sysconfig*) kind=venv_check ;;
  *) kind=other ;;
esac
echo "{\"call\": \"$kind\", \"edge\": \"start\", \"t\": $EPOCHREALTIME}" >> "$LOG"
if [ "$kind" = driver ]; then
  "$REAL" "$@" | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
else
  "$REAL" "$@"
  rc=$?
fi
echo "{\"call\": \"$kind\", \"edge\": \"end\", \"t\": $EPOCHREALTIME, \"rc\": $rc}" >> "$LOG"
exit $rc
"""

STANDALONE = r"""
import json, sys, time, urllib.request
t = time.time(); import sglang.bench_serving as bs; imported = time.time() - t
loads = []
for _ in range(3):
    t = time.time(); bs.get_tokenizer(sys.argv[1]); loads.append(time.time() - t)
print(json.dumps({"import_s": imported, "tokenizer_load_s": loads}))
"""


def write_wrapper(real: Path, work: Path) -> tuple[Path, Path]:
    log = work / "client-calls.jsonl"
    log.write_text("")
    wrapper = work / "client-python"
    wrapper.write_text(WRAPPER % {"real": shlex.quote(str(real)), "log": shlex.quote(str(log))})
    wrapper.chmod(0o755)
    return wrapper, log


def read_log(log: Path) -> list[dict]:
    out = []
    for line in log.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def first_sample_time(csv_path: Path) -> float | None:
    """The timestamp of the sampler's first row (nvidia-smi's ``timestamp`` column, local time)."""
    try:
        with open(csv_path) as fh:
            row = next(csv.reader(fh))
        return datetime.strptime(row[1].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def server_info_latency(url: str, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.monotonic()
        with urllib.request.urlopen(url + "/get_server_info", timeout=30) as r:
            r.read()
        times.append(time.monotonic() - t)
    return sorted(times)[len(times) // 2]


def standalone(client: Path) -> dict:
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9",
           "PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(client), "-c", STANDALONE, str(local_server.TOKENIZER)], capture_output=True, text=True,
                       env=env, timeout=300)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (r.stdout + r.stderr)[-500:]}


def breakdown(t_begin: float, t_exit: float, calls: list[dict], res: dict, csv_path: Path) -> list[tuple[str, float]]:
    """[(what, seconds)] from the module's start to its exit, in order; the parts add up to the module's wall."""
    def at(kind, edge, event=None):
        for c in calls:
            if event is None and c.get("call") == kind and c.get("edge") == edge:
                return c["t"]
            if event is not None and c.get("event") == event:
                return c["t"]
        return None

    venv_start, venv_end = at("venv_check", "start"), at("venv_check", "end")
    nvml_start = at("nvml_probe", "start")
    drv_start = at("driver", "start")  # its end is not stamped: the module kills it once it said it is done
    imported = next((c for c in calls if c.get("event") == "imported"), None)
    starts = [c for c in calls if c.get("event") == "start"]
    ends = [c for c in calls if c.get("event") == "end"]
    if None in (venv_start, venv_end, nvml_start, drv_start) or not imported or not starts or not ends:
        return []
    levels = res.get("levels") or []
    in_level = [lv["wall_s"] - lv["figures"]["duration"] for lv in levels
                if lv.get("wall_s") is not None and lv.get("figures", {}).get("duration") is not None]
    nvml_end = at("nvml_probe", "end") or nvml_start
    # The module starts the driver right after the venv check; the driver imports while the module checks the
    # server (/health, /v1/models), probes NVML and takes the first sample, and runs the first level at the go.
    parts = [
        ("module start: interpreter, Ansible, argument checks", venv_start - t_begin),
        ("client venv check (one client interpreter start)", venv_end - venv_start),
        (f"venv check -> first level: the driver's start and imports ({imported['t'] - drv_start:.2f} s), "
         f"overlapping /health (the server's own ~1 s), /v1/models, the NVML probe ({nvml_end - nvml_start:.2f} s) "
         "and the 0.5 s lead before the first request", starts[0]["t"] - venv_end),
        ("idle between the driver's events (level handover)",
         (ends[-1]["t"] - starts[0]["t"]) - sum(lv["wall_s"] for lv in levels if lv.get("wall_s") is not None)),
        ("inside the levels, outside bench_serving's duration (all levels)", sum(in_level)),
        ("after the last level: the sampler's first sample after it (at most 0.5 s), sampler and driver stop, "
         "telemetry parse, kernel log, summaries, result", t_exit - ends[-1]["t"]),
    ]
    sample0 = first_sample_time(csv_path)
    if sample0 is not None:
        parts.append(("(of which: first telemetry sample -> first level)", starts[0]["t"] - sample0))
    return parts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--input-len", type=int, default=32)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--prompts-per-level", type=int, default=2, help="prompts per unit of concurrency")
    p.add_argument("--backend", default="sglang", choices=["sglang", "sglang-oai", "sglang-oai-chat"])
    p.add_argument("--rates", type=float, nargs=3, metavar=("DECODE", "ALPHA", "PREFILL"), default=DEFAULT_RATES)
    p.add_argument("--client-python", type=Path, help="an existing bench client venv's python (default: the cached "
                   "venv, built on first use)")
    p.add_argument("--keep", type=Path, help="keep the module's output files and the call log here")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if not a.concurrency or min(a.concurrency) <= 0 or a.prompts_per_level <= 0:
        p.error("--concurrency levels and --prompts-per-level must be positive")
    try:
        client = a.client_python or local_server.bench_client_python()
    except local_server.VenvError as exc:
        print(f"bench_overhead: {exc}", file=sys.stderr)
        return 2
    work = a.keep or Path(tempfile.mkdtemp(prefix="moesweep-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    wrapper, log = write_wrapper(client, work)
    counts = [a.prompts_per_level * c for c in a.concurrency]
    with local_server.SimServer(work / "server", rates=tuple(a.rates)) as srv:
        args = local_server.module_args(srv, wrapper, work / "levels", backend=a.backend, input_len=a.input_len,
                                        output_len=a.output_len, concurrency=a.concurrency, num_prompts=counts)
        t_begin = time.time()
        rc, res, _wall = local_server.run_module(args, work, env=srv.smi_env)
        t_exit = time.time()
        info_s = server_info_latency(srv.url)
    alone = standalone(client)
    levels = res.get("levels") or []
    if rc != 0 or not levels:
        print(f"bench_overhead: the module failed (rc {rc}): {res.get('msg')}", file=sys.stderr)
        return 2
    wall = t_exit - t_begin
    durations = [lv["figures"].get("duration") or 0.0 for lv in levels]
    total = wall - sum(durations)
    per_level = total / len(levels)
    parts = breakdown(t_begin, t_exit, read_log(log), res, work / "levels" / "telemetry.csv")
    report = {"concurrency": a.concurrency, "num_prompts": counts, "input_len": a.input_len,
              "output_len": a.output_len, "backend": a.backend, "module_wall_s": round(wall, 3),
              "module_elapsed_s": res.get("elapsed"), "module_overhead_s_per_level": res.get("overhead_s_per_level"),
              "levels": [{"concurrency": lv["concurrency"], "num_prompts": lv["num_prompts"],
                          "duration_s": lv["figures"].get("duration"), "wall_s": lv.get("wall_s"),
                          "in_level_overhead_s": round(lv["wall_s"] - lv["figures"]["duration"], 3)
                          if lv.get("wall_s") is not None and lv["figures"].get("duration") is not None else None,
                          "output_throughput": lv["figures"].get("output_throughput"), "ok": lv.get("ok"),
                          "verdict": (lv.get("diagnosis") or {}).get("verdict")} for lv in levels],
              "overhead_total_s": round(total, 3), "overhead_per_level_s": round(per_level, 3), "goal_s": GOAL_S,
              "goal_met": per_level <= GOAL_S, "breakdown": [{"what": w, "s": round(s, 3)} for w, s in parts],
              "standalone": dict(alone, get_server_info_s=round(info_s, 4)), "artifacts": str(work)}
    if a.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"sglang_bench on the simulated server: levels {a.concurrency}, {counts} prompts, {a.input_len} in / "
              f"{a.output_len} out tokens, backend {a.backend}, telemetry on")
        print(f"  {'level':>6} {'prompts':>8} {'duration s':>11} {'level wall s':>13} {'in-level overhead s':>20}")
        for lv in report["levels"]:
            print(f"  {'c' + str(lv['concurrency']):>6} {lv['num_prompts']:>8} {lv['duration_s']:>11.2f} "
                  f"{lv['wall_s']:>13.2f} {lv['in_level_overhead_s']:>20.2f}")
        print(f"  module wall {wall:.2f} s - durations {sum(durations):.2f} s = overhead {total:.2f} s in all, "
              f"{per_level:.2f} s per level (the module's own overhead_s_per_level: "
              f"{res.get('overhead_s_per_level')}); goal <= {GOAL_S:g} s per level: "
              f"{'met' if report['goal_met'] else 'NOT met'}")
        if parts:
            print("  where the module's wall time goes outside bench_serving's durations:")
            for what, s in parts:
                print(f"    {s:7.3f} s  {what}")
        if "error" not in alone:
            loads = [x * 1000 for x in alone["tokenizer_load_s"]]
            print(f"  standalone in the client venv: import sglang.bench_serving {alone['import_s']:.2f} s, "
                  f"get_tokenizer {min(loads):.0f}-{max(loads):.0f} ms; GET /get_server_info {info_s * 1000:.1f} ms "
                  "(median of 5)")
    return 0 if report["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
