#!/usr/bin/env python3
"""How long the dry run of sglang's own argument handling takes on the controller (plugins/plugin_utils/
sglang_sandbox.py): a refusal and an acceptance, each run N times through the one function `moesweep check` and the
sweep's preflight call, after the sandbox is ready; with --cold, the sandbox's preparation too (into a temporary
cache: the pinned wheel and transformers' stack downloaded from PyPI and installed, as on a new machine).

Goal (issue #45): a refusal in <= 15 s; what it saves is a server start (~3.5 min at the reference deployment,
the 453 GB load).

    .venv/bin/python bench/dry_run_time.py --runs 5 [--cold] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import moesweep._collection  # noqa: E402,F401  (the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_sandbox  # noqa: E402

RTX_PRO_6000_X8 = {"gpu_count": 8, "sm": "sm120", "gpus": [{"memory_total_mib": 97887}],
                   "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]}
CASES = {
    # sglang 0.5.9 refuses this in ServerArgs (server_args.py:2136-2145)
    "refusal (0.5.9, server_args)": ("0.5.9", ["--model-path", "Qwen/Qwen3-30B-A3B-FP8", "--tp", "8",
                                               "--moe-runner-backend", "flashinfer_cutlass", "--quantization", "fp8"]),
    # 16 scheduler processes on 8 GPUs (the ninth's set_device)
    "refusal (0.5.9, scheduler_init)": ("0.5.9", ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--dp", "2"]),
    "acceptance (0.5.9)": ("0.5.9", ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8"]),
    "acceptance (0.5.23, GLM-5)": ("0.5.23", ["--model-path", "zai-org/GLM-5", "--tp", "8"]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="prepare the sandboxes in a new cache first, timed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    figures: dict = {"python": sys.version.split()[0], "runs": args.runs, "cases": {}}
    if args.cold:
        cache = tempfile.mkdtemp(prefix="moesweep-dry-run-bench-")
        os.environ["MOESWEEP_CACHE_DIR"] = cache
        figures["cold_prepare_s"] = {}
        for version in ("0.5.9", "0.5.23"):
            started = time.monotonic()
            sglang_sandbox.prepare(version)
            figures["cold_prepare_s"][version] = round(time.monotonic() - started, 1)
    for version in ("0.5.9", "0.5.23"):
        sglang_sandbox.prepare(version)
    worst_refusal = 0.0
    for name, (version, argv) in CASES.items():
        times, verdicts = [], set()
        for _ in range(args.runs):
            started = time.monotonic()
            answer = sglang_sandbox.dry_run_point(version, argv, {}, RTX_PRO_6000_X8)
            times.append(time.monotonic() - started)
            verdicts.add((answer["verdict"], answer.get("stage")))
        figures["cases"][name] = {"median_s": round(statistics.median(times), 2), "max_s": round(max(times), 2),
                                  "verdicts": sorted(f"{v[0]} {v[1]}" for v in verdicts)}
        if name.startswith("refusal"):
            worst_refusal = max(worst_refusal, max(times))
    figures["goal_refusal_s"] = 15.0
    figures["goal_met"] = worst_refusal <= 15.0
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for version, seconds in (figures.get("cold_prepare_s") or {}).items():
            print(f"sandbox of sglang {version}, prepared cold: {seconds} s")
        for name, fig in figures["cases"].items():
            print(f"{name}: median {fig['median_s']} s, max {fig['max_s']} s over {args.runs} runs "
                  f"({', '.join(fig['verdicts'])})")
        verdict = "met" if figures["goal_met"] else "MISSED"
        print(f"worst refusal {worst_refusal:.2f} s against the goal of 15 s: {verdict}")
    return 0 if figures["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
