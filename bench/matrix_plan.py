#!/usr/bin/env python3
"""How a launch matrix's planning time grows with its cell count: sweep_plan's plan() (the matrix checked against the
version's flag schema, every cell's preflight from the knowledge base, the plan summary) for matrices of N cells
(5 backends x N/50 values of --max-running-requests x 10 NCCL_P2P_LEVEL values), each with max_cells set to N.

Goal (issue #49): linear in the cells, 1000 cells planned in seconds; a matrix above 64 cells without max_cells is
refused before any cell is built.

    .venv/bin/python bench/matrix_plan.py [--cells 100 250 500 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import moesweep._collection  # noqa: E402,F401  (the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.action import sweep_plan  # noqa: E402
from ansible_collections.moesweep.sweep.plugins.plugin_utils import plan_checks  # noqa: E402

BACKENDS = ["triton", "flashinfer_cutlass", "cutlass", "flashinfer_cutedsl", "auto"]
P2P = ["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3"]


def args_for(cells: int, results: str, max_cells: int | None) -> dict:
    mrr = list(range(8, 8 + 8 * max(1, cells // (len(BACKENDS) * len(P2P))), 8))
    matrix = {"axes": {"moe-runner-backend": BACKENDS, "max-running-requests": mrr, "env:NCCL_P2P_LEVEL": P2P}}
    if max_cells is not None:
        matrix["max_cells"] = max_cells
    args = {k: spec.get("default") for k, spec in sweep_plan.ARGUMENT_SPEC.items()}
    args.update(matrix=matrix, results_dir=results, sglang_version="0.5.9", host="vm",
                flags={"model-path": "lukealonso/GLM-5-NVFP4", "tp-size": 8, "quantization": "modelopt_fp4"},
                gpu_facts={"sm": "sm120", "gpu_count": 8})
    return args


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, nargs="+", default=[100, 250, 500, 1000])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    figures = {"runs": []}
    with tempfile.TemporaryDirectory() as results:
        started = time.monotonic()
        try:
            sweep_plan.plan(args_for(1000, results, None))
            refused = None
        except plan_checks.PlanError as exc:
            refused = str(exc)
        figures["refusal_without_max_cells_s"] = round(time.monotonic() - started, 3)
        figures["refusal"] = refused
        for cells in a.cells:
            started = time.monotonic()
            plan = sweep_plan.plan(args_for(cells, results, cells))
            seconds = time.monotonic() - started
            figures["runs"].append({"cells": len(plan["points"]), "seconds": round(seconds, 2),
                                    "ms_per_cell": round(1000 * seconds / len(plan["points"]), 2)})
    if a.json:
        print(json.dumps(figures, indent=1))
    else:
        print(f"1000 cells without max_cells: refused in {figures['refusal_without_max_cells_s']} s "
              f"({(figures['refusal'] or 'NOT refused')[:120]}...)")
        for run in figures["runs"]:
            print(f"{run['cells']} cells planned in {run['seconds']} s ({run['ms_per_cell']} ms a cell)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
