#!/usr/bin/env python3
"""Plan every cell (model x --moe-runner-backend of sglang 0.5.15) with moesweep's own preflight (dev machine).

For each tiny model under models/ and each choice of 0.5.15's --moe-runner-backend (data/sglang/flags-0.5.15.json),
``preflight.run_preflight`` plans the launch exactly as the ``sglang_preflight`` action does for a sweep point
(``launch.plan``: the common flags, the backend's overlay, the unit's environment, the argv the unit's ExecStart
would run) and judges it against the knowledge base for an H100 (SM90) with the device's driver and toolkit. The
device runs every cell's argv and environment as planned, refused ones too (a forced point), so each verdict meets
the real outcome.

    .venv/bin/python bench/device/real_sglang/plan_cells.py > bench/device/real_sglang/cells.json
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.moesweep.sweep.plugins.plugin_utils import launch, preflight  # noqa: E402

VERSION = "0.5.15"
MODELS_REL = "bench/device/real_sglang/models"
# The lent H100 as gpu_facts reports it (KINDS.md, nvidia-h100-x1, seen 2026-11-13: driver 580.159.04, nvcc 13.0).
FACTS = {"sm": "9.0", "gpu_count": 1, "gpu_name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04",
         "driver_cuda_version": "13.0", "cuda_toolkit": {"release": "13.0"}}

# The common launch (sglang_server_flags of this run). Why each one:
COMMON = {
    "host": "127.0.0.1",
    "port": 30000,
    "load-format": "dummy",          # random weights: no hub, no checkpoint files
    "attention-backend": "triton",   # fa3 (SM90's default) is sgl_kernel/flash_ops.abi3.so, not carried; flashinfer
                                     # attention would JIT-compile with nvcc at start (no flashinfer-cubin carried)
    "sampling-backend": "pytorch",   # flashinfer's sampling kernels would JIT-compile too
    "grammar-backend": "none",       # xgrammar (44 MB) is not carried; no request here asks for a grammar
    "max-running-requests": 64,      # the largest benchmark level
    "cuda-graph-max-bs-decode": 64,  # capture decode graphs only up to what can run
    "disable-prefill-cuda-graph": True,  # no piecewise (torch.compile) prefill graphs: minutes of start-up
    "mem-fraction-static": 0.8,
    "context-length": 4096,
    "enable-metrics": True,
}
MODEL_FLAGS = {
    # DeepGEMM's dense FP8 GEMMs compile with nvcc at first use (minutes per start); triton's block-FP8 GEMM
    # compiles in seconds. The deep_gemm MoE runner still uses DeepGEMM for the experts, which is what it is.
    "dsv3-mla-tiny-fp8": {"fp8-gemm-backend": "triton"},
    # DSA: sglang picks the attention backend for the indexer itself (dsa on SM90); the common triton would not do
    "glm5-dsa-tiny-fp8": {"fp8-gemm-backend": "triton", "attention-backend": None},
}
# The server role's defaults (roles/sglang_server/defaults/main.yml): the device run makes this venv (with the
# device's site-packages visible, for its torch) and unpacks the staged stack into it.
VENV = "/opt/moesweep/venvs/sglang"
HOME = "/var/lib/sglang"
ENVIRONMENT = {"OMP_NUM_THREADS": "8", "PYTHONUNBUFFERED": "1"}


def backends():
    schema = launch.schema_for(VERSION)
    return launch.backend_choices(schema)


def plan_cell(model, backend):
    model_dir = os.path.join(MODELS_REL, model)
    with open(os.path.join(REPO, model_dir, "config.json")) as fh:
        config = json.load(fh)
    flags = dict(COMMON, **{"model-path": model_dir, "served-model-name": model}, **MODEL_FLAGS.get(model, {}))
    args = {
        "backend": backend,
        "sglang_version": VERSION,
        "flags": flags,
        "backends": {backend: {"flags": {"moe-runner-backend": backend}}},
        "environment": ENVIRONMENT,
        "venv": VENV,
        "home": HOME,
        "cuda_home": "/usr/local/cuda",
        "model_config": config,
        "cuda_version": "13.0",
    }
    result, failed = preflight.run_preflight(args, task_vars_facts={"moesweep_gpu": FACTS})
    plan = result.get("launch") or {}
    return {
        "model": model,
        "backend": backend,
        "verdict": result.get("verdict"),
        "refused": bool(failed),
        "reasons": result.get("reasons"),
        "citations": result.get("citations"),
        "msg": result.get("msg"),
        "effective_backend": result.get("effective_backend"),
        "flag_errors": plan.get("flag_errors"),
        "argv": plan.get("argv"),
        "command_line": plan.get("command_line"),
        "environment": plan.get("environment"),
        "launch_hash": plan.get("launch_hash"),
        "port": plan.get("port"),
        "host": plan.get("host"),
    }


def main():
    models = sorted(d for d in os.listdir(os.path.join(REPO, MODELS_REL))
                    if os.path.exists(os.path.join(REPO, MODELS_REL, d, "config.json")))
    cells = [plan_cell(m, b) for m in models for b in backends()]
    json.dump({"sglang_version": VERSION, "facts": FACTS, "cells": cells}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
