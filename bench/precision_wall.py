#!/usr/bin/env python3
"""What sizing each level to a precision target buys at the reference deployment's scale: a 4-backend sweep's
benchmark on the reference-scale simulated profile (simulator/moesweep_sim/reference_profile.py: a ~3.5 min server
start, ~225 output tok/s at c64, 1024 in / 1024 out), run time-scaled and projected to real time.

    .venv/bin/python bench/precision_wall.py [--time-scale 0.1] [--precision 0.02] [--json]

For every backend: a simulated server on 127.0.0.1 at the profile's rates (1 / time_scale times as fast, its start
time_scale times as long; no simulated host is booted), then the sglang_bench module as a sweep point runs it (real
sglang 0.5.9 bench_serving, levels 1 8 32 64) with the precision target. Printed:

* the projected real wall time of the sweep's server starts and benchmarks with the precision target (measured:
  the servers' starts and bench_serving's durations divided by the time scale, the module's own time beyond them
  as it ran, since it does not scale) against the fixed default (max(5 x level, 16) requests per level, computed
  from the token model, which the measured durations check), plus the same per-point sweep overhead on both sides
  (``--point-overhead-s``, bench/README.md's sweep_wall figure). Goal: at most one third.
* the same projection with equivalent points: the backends the real preflight finds running an earlier one's
  kernels on the reference launch (sglang 0.5.9, NVFP4, SM120; plugin_utils/equivalence.py) cost their preflight and
  record only, as a sweep records them same_as that one. The profile's per-backend speeds are simulation parameters
  (reference_profile.BACKENDS) and differ even between backends the preflight finds equivalent.
* every level's steady-state figure against the token model's ground truth (reference_profile.expected): its error
  and whether the truth is inside its 95 % interval, next to bench_serving's whole-run figure's error. Goal: every
  error within 2 %, and as many truths inside as 95 % intervals hold: the count inside is not below what 95 %
  coverage gives with probability 5 % (14 of 16: a 95 % interval misses 1 time in 20 by construction).

The simulated rates are simulation parameters chosen to reproduce the reference deployment's two given figures,
not measurements. The profile's GPUs drift as a real H100 was measured to (step time CV 0.3 % over a minute,
simulator/moesweep_sim/drift.py), seeded per backend with ``--seed``, so a figure differs from the token model by a
real card's amount. Telemetry is off (the simulated nvidia-smi sampler would only add CPU load on the dev machine).
CPU-heavy at small time scales (the client parses every streamed token): run one at a time.

Exit status: 0 both goals met, 1 a goal missed, 2 a run failed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "simulator")]

from moesweep_sim import reference_profile as ref  # noqa: E402

from moesweep.sim import local_server  # noqa: E402

# the reference deployment as the preflight sees it (the role defaults' launch line's axes): which of the swept
# backends run the kernels of an earlier one (plugin_utils/equivalence.py), so a sweep starts and measures it once
REFERENCE_FACTS = {"sm": "sm120", "gpu_count": 8, "interconnect": "pcie-phb", "virtualization": {"kind": "vm"},
                   "cuda_toolkit": {"release": "12.8"}}
REFERENCE_FLAGS = {"model-path": "lukealonso/GLM-5-NVFP4", "tp-size": 8, "quantization": "modelopt_fp4",
                   "attention-backend": "flashinfer"}


def reference_equivalents(backends: list[str]) -> dict:
    """{backend: the earlier backend whose kernels it runs} by the real preflight (knowledge base) on the reference
    deployment, sglang 0.5.9: what the sweep records same_as instead of starting."""
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import equivalence, preflight

    details = {}
    for backend in backends:
        result, failed = preflight.run_preflight({
            "backend": backend, "flags": REFERENCE_FLAGS, "version_flags": {}, "backends": {}, "extra_flags": {},
            "sglang_version": "0.5.9", "provenance": {}, "environment": {}, "gpu_facts": REFERENCE_FACTS,
            "dry_run": "off"})
        details[backend] = dict(result, refused=failed or result.get("verdict") not in ("supported", "caveat"))
    return equivalence.plan_equivalents(backends, details)

LEVELS = [1, 8, 32, 64]
WALL_GOAL = 1.0 / 3.0
ERROR_GOAL = 0.02
# a point's overhead outside its server and benchmark: the latest `bench/sweep_wall.py --one-host` figure in
# bench/README.md (2026-12-07: 11.93 and 12.32 s per point; the guard is 10 s); --point-overhead-s gives another
POINT_OVERHEAD_S = 12.3


def coverage_floor(n: int, p: float = 0.95, tail: float = 0.05) -> int:
    """The least count of ``n`` intervals of coverage ``p`` that still holds the truth with probability >= ``tail``
    of the binomial's lower tail: fewer inside is evidence that the intervals are too narrow."""
    cdf = 0.0
    for k in range(n + 1):
        cdf += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if cdf >= tail:
            return k
    return n


def fixed_requests(c: int) -> int:
    return max(5 * c, 16)  # sglang_bench's prompts_per_concurrency 5, min_prompts 16


def run_backend(backend: str, a, client, work: Path) -> dict:
    scale = a.time_scale
    env = ref.env(backend, scale, seed=a.seed)
    with local_server.SimServer(work / "srv", rates=ref.scaled_rates(backend, scale), time_scale=scale, env=env,
                                ready_timeout=max(90.0, 3 * ref.START_S * scale)) as srv:
        args = local_server.module_args(srv, client, work / "out", input_len=ref.INPUT_LEN, output_len=ref.OUTPUT_LEN,
                                        concurrency=a.concurrency, precision=a.precision, telemetry=False,
                                        level_budget_s=a.level_budget_s * scale, level_timeout=3600.0)
        rc, res, wall = local_server.run_module(args, work, env=srv.smi_env, timeout=3600)
        started = srv.started_s
    if rc != 0 or res.get("state") != "ok":
        raise RuntimeError(f"{backend}: the benchmark failed: {res.get('msg')}")
    levels, durations, rounds = [], 0.0, 0
    for lv in res["levels"]:
        c = lv["concurrency"]
        thr = lv["stats"]["steady_output_throughput"]
        truth = ref.expected(backend, c)
        # real tok/s = simulated tok/s x time_scale
        value, low, high = (thr[k] * scale if thr[k] is not None else None for k in ("value", "low", "high"))
        whole = lv["figures"]["output_throughput"] * scale
        d = sum(r["duration"] for r in lv["rounds"])
        durations += d
        rounds += len(lv["rounds"])
        modelled = ref.level_seconds(backend, c, lv["num_prompts"]) if len(lv["rounds"]) == 1 else None
        levels.append({"concurrency": c, "requests": lv["num_prompts"], "rounds": len(lv["rounds"]),
                       "steady_requests": thr["steady_requests"], "batches": thr["batches"],
                       "ended_by": lv["stats"]["ended_by"], "precision_reached": thr["half_width_rel"],
                       "truth": truth, "steady": value, "low": low, "high": high,
                       "error": value / truth - 1, "inside": low is not None and low <= truth <= high,
                       "whole_run": whole, "whole_run_error": whole / truth - 1,
                       "duration_real_s": d / scale, "modelled_real_s": modelled,
                       "ttft_p99_n": lv["stats"]["latency"]["ttft"]["n"]})
    module_own = res["elapsed"] - durations  # the client's imports, bench_serving's fixed pauses: not scaled
    start_real = sum(ref.PHASES_S.values()) + (started - sum(ref.PHASES_S.values()) * scale)
    precise_s = start_real + durations / scale + module_own + a.point_overhead_s
    per_round_own = module_own / max(1, rounds)
    fixed_s = (start_real + sum(ref.level_seconds(backend, c, fixed_requests(c)) for c in a.concurrency)
               + per_round_own * len(a.concurrency) + a.point_overhead_s)
    return {"backend": backend, "start_measured_s": started, "start_real_s": start_real,
            "module_elapsed_s": res["elapsed"], "module_own_s": module_own, "precise_real_s": precise_s,
            "fixed_real_s": fixed_s, "levels": levels, "wall_s": wall}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--time-scale", type=float, default=0.1)
    p.add_argument("--precision", type=float, default=0.02)
    p.add_argument("--level-budget-s", type=float, default=900.0, help="per-level budget, real seconds")
    p.add_argument("--concurrency", type=int, nargs="+", default=LEVELS)
    p.add_argument("--backends", nargs="+", default=list(ref.BACKENDS))
    p.add_argument("--point-overhead-s", type=float, default=POINT_OVERHEAD_S)
    p.add_argument("--seed", type=int, default=1, help="the simulated GPUs' drift course (with the backend's name)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if not 0 < a.time_scale <= 1 or not 0 < a.precision < 1:
        p.error("--time-scale must be in (0, 1] and --precision in (0, 1)")
    client = local_server.bench_client_python()
    out = []
    with tempfile.TemporaryDirectory(prefix="precision-wall-") as tmp:
        for backend in a.backends:
            try:
                out.append(run_backend(backend, a, client, Path(tmp) / backend))
            except (RuntimeError, OSError) as exc:
                print(f"FAILED: {exc}", file=sys.stderr)
                return 2
    precise = sum(b["precise_real_s"] for b in out)
    fixed = sum(b["fixed_real_s"] for b in out)
    # with equivalent points: a point that runs an earlier one's kernels costs its preflight and record only
    equivalents = reference_equivalents([b["backend"] for b in out])
    distinct = sum(b["precise_real_s"] for b in out if b["backend"] not in equivalents) \
        + a.point_overhead_s * len(equivalents)
    ratio = precise / fixed
    figures = [lv for b in out for lv in b["levels"]]
    worst = max(abs(lv["error"]) for lv in figures)
    inside = sum(1 for lv in figures if lv["inside"])
    wall_ok = ratio <= WALL_GOAL
    floor = coverage_floor(len(figures))
    error_ok = worst <= ERROR_GOAL and inside >= floor
    if a.json:
        print(json.dumps({"time_scale": a.time_scale, "precision": a.precision, "backends": out,
                          "precise_real_s": precise, "fixed_real_s": fixed, "ratio": ratio,
                          "equivalents": equivalents, "precise_distinct_real_s": distinct,
                          "worst_error": worst, "inside": inside, "inside_floor": floor,
                          "figures": len(figures)}, indent=1))
    else:
        print(f"reference-scale profile, time scale {a.time_scale}, precision +-{100 * a.precision:.1f} %, "
              f"levels {a.concurrency}, {ref.INPUT_LEN}/{ref.OUTPUT_LEN} tokens")
        for b in out:
            print(f"\n{b['backend']}: start {b['start_measured_s']:.1f} s measured -> {b['start_real_s']:.0f} s real; "
                  f"module {b['module_elapsed_s']:.1f} s ({b['module_own_s']:.1f} s its own); "
                  f"projected {b['precise_real_s'] / 60:.1f} min vs fixed default {b['fixed_real_s'] / 60:.1f} min")
            print("   c  req rounds  steady tok/s [95 % CI]        truth   error  inside  whole-run error  "
                  "ended_by   real s (modelled)")
            for lv in b["levels"]:
                ci = (f"[{lv['low']:.2f}, {lv['high']:.2f}]" if lv["low"] is not None else "[no interval]")
                model = f"{lv['modelled_real_s']:.0f}" if lv["modelled_real_s"] is not None else "-"
                print(f"  {lv['concurrency']:>3} {lv['requests']:>4} {lv['rounds']:>6}  {lv['steady']:8.2f} "
                      f"{ci:<20} {lv['truth']:8.2f} {100 * lv['error']:+6.2f} %  {'yes' if lv['inside'] else 'NO':>5}"
                      f"  {100 * lv['whole_run_error']:+6.2f} %          {lv['ended_by']:<10} "
                      f"{lv['duration_real_s']:.0f} ({model})")
        print(f"\nprojected real wall time, {len(out)} backends: precision target {precise / 3600:.2f} h, "
              f"fixed default {fixed / 3600:.2f} h: ratio {ratio:.3f} "
              f"(goal <= {WALL_GOAL:.3f}: {'met' if wall_ok else 'MISSED'})")
        same = ", ".join(f"{b} same_as {e}" for b, e in equivalents.items()) or "none"
        print(f"with equivalent points ({same}; the reference launch's preflight, sglang 0.5.9): "
              f"{len(out) - len(equivalents)} of {len(out)} started and measured, projected {distinct / 60:.1f} min "
              f"(precision target)")
        print(f"figures against the token model: worst error {100 * worst:.2f} % (goal {100 * ERROR_GOAL:.0f} %), "
              f"{inside} of {len(figures)} inside their 95 % interval (at least {floor}) "
              f"({'met' if error_ok else 'MISSED'})")
    return 0 if wall_ok and error_ok else 1


if __name__ == "__main__":
    sys.exit(main())
