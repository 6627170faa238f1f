"""The simulator's MoE resolution (simulator/moesweep_sim/moe_resolution.py): which runner a launch runs and
whether it dies for backend / quantization / SM reasons, checked against the matrix derived from the real
wheels (tests/fixtures/compat/matrix.csv, data only: the simulator shares no code with plugins/), and the
simulated server process doing what that matrix says for `auto` on SM90 (H200) and SM120 (RTX PRO 6000)."""

from __future__ import annotations

import ast
import csv
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers.paths import FIXTURES, REPO
from moesweep_sim import failure_model, moe_resolution, tokenmodel

GLM5 = "GlmMoeDsaForCausalLM"
MATRIX = list(csv.DictReader((FIXTURES / "compat" / "matrix.csv").open(encoding="utf-8")))
NVFP4_ERRORS = ("ValueError: Current platform does not support NVFP4 quantization",
                # 0.5.9: the model loader's capability check (loader.py:222-242) comes before the MoE method's
                "ValueError: The quantization method modelopt_fp4 is not supported for the current GPU.")
TRTLLM_ERRORS = ("No supported CUDA architectures found for major versions [10",
                 "cubin manifest contains no kernels runnable")


def args_of(row: dict) -> dict:
    return {"moe_runner_backend": row["backend"],
            "quantization": None if row["quantization"] == "none" else row["quantization"]}


# ------------------------------------------------------------------------------ against the derived matrix
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_runner_resolution_matches_the_matrix(version):
    """Where the launch gets to run a MoE runner, the simulator runs the one the code runs."""
    wrong = []
    for row in MATRIX:
        if row["sglang"] != version or row["verdict"] not in ("supported", "caveat") or row["backend"] == "megamoe":
            continue
        got = moe_resolution.resolve_backend(version, args_of(row), int(row["sm"]), GLM5)
        if got != row["runs"]:
            wrong.append((row["backend"], row["sm"], row["quantization"], got, row["runs"]))
    assert wrong == []


def failure_of(row: dict):
    return failure_model.launch_failure(row["sglang"], args_of(row), int(row["sm"]), GLM5)


def test_nvfp4_platform_refusal_matches_the_matrix():
    for row in MATRIX:
        expected = row["error"].startswith(NVFP4_ERRORS)
        failure = failure_of(row)
        got = failure is not None and failure.exc.startswith(NVFP4_ERRORS)
        assert got == expected, row


def test_trtllm_without_kernels_matches_the_matrix():
    for row in MATRIX:
        if row["backend"] not in ("flashinfer_trtllm", "flashinfer_trtllm_routed"):
            continue
        if "scaling factor types" in row["error"]:
            continue  # 0.5.9 block-FP8 on SM12x: the dense DeepGEMM GEMM fails before the MoE is reached
        failure = failure_of(row)
        got = failure is not None and any(e in failure.exc for e in TRTLLM_ERRORS)
        assert got == any(e in row["error"] for e in TRTLLM_ERRORS), row


def test_auto_resolution_points_the_reviewer_named():
    nvfp4 = {"moe_runner_backend": "auto", "quantization": "modelopt_fp4"}
    assert moe_resolution.resolve_backend("0.5.9", nvfp4, 120, GLM5) == "cutlass"  # sgl-kernel cutlass_moe_fp4
    assert failure_model.launch_failure("0.5.9", nvfp4, 90, GLM5).stage == "model_init"  # no marlin in 0.5.9
    assert moe_resolution.resolve_backend("0.5.23", nvfp4, 90, GLM5) == "marlin"
    assert failure_model.launch_failure("0.5.23", nvfp4, 90, GLM5) is None
    assert moe_resolution.resolve_backend("0.5.23", nvfp4, 120, GLM5) == "flashinfer_cutlass"
    assert moe_resolution.resolve_backend("0.5.9", nvfp4, 100, GLM5) == "flashinfer_trtllm"
    assert moe_resolution.resolve_backend("0.5.9", nvfp4, 100, "LlamaForCausalLM") == "cutlass"


def test_mem_fraction_static_above_one():
    assert moe_resolution.kv_pool_exceeds_free_memory(1.5, None)
    assert not moe_resolution.kv_pool_exceeds_free_memory(1.5, 200000)
    assert not moe_resolution.kv_pool_exceeds_free_memory(0.88, None)
    assert not moe_resolution.kv_pool_exceeds_free_memory(None, None)


def test_simulator_reads_no_knowledge_base():
    """The simulator's side is written from the sglang sources, not from the controller's KB."""
    tree = ast.parse((REPO / "simulator" / "moesweep_sim" / "moe_resolution.py").read_text(encoding="utf-8"))
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert imported == {"__future__"}
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not any("compat.yml" in v or "plugins" in v for v in strings[1:])  # [0] is the docstring


# ------------------------------------------------------------------------------ the simulated server process
SIM = REPO / "simulator" / "bin" / "sglang-sim"
BASE = ["--model-path", "lukealonso/GLM-5-NVFP4", "--tp", "8", "--quantization", "modelopt_fp4",
        "--host", "127.0.0.1"]
FAST = {f"MOESWEEP_SIM_PHASE_{p}_S": "0.1" for p in ("INIT", "DIST", "LOAD", "KV", "AUTOTUNE", "CAPTURE")}


def launch(tmp_path, version, gpu, extra=()):
    """Start the simulated server; return (exit code or None when it became ready, its log)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"simulated": True, "gpu_model": gpu, "gpu_count": 8, "sglang_version": version}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOESWEEP_SIM_")}
    env.update(FAST, MOESWEEP_SIM_PROFILE=str(prof), MOESWEEP_SIM_STATE=str(tmp_path / "gpu-state.json"),
               MOESWEEP_SIM_FAULT_FILE=str(tmp_path / "fault"))
    err = tmp_path / "stderr.txt"
    with open(err, "w") as errf, open(tmp_path / "stdout.txt", "w") as outf:
        proc = subprocess.Popen([sys.executable, str(SIM), *BASE, *extra, "--port", str(port)],
                                stdout=outf, stderr=errf, env=env)
        try:
            end = time.time() + 90
            while time.time() < end:
                if proc.poll() is not None:
                    return proc.returncode, err.read_text()
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/health")
                    if conn.getresponse().status == 200:
                        return None, err.read_text()
                except OSError:
                    pass
                time.sleep(0.1)
            raise AssertionError("neither ready nor exited\n" + err.read_text()[-3000:])
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def test_auto_nvfp4_on_h200_with_059_dies_before_loading_weights(tmp_path):
    rc, log = launch(tmp_path, "0.5.9", "h200")
    assert rc == -signal.SIGKILL
    # the loader's capability gate (0.5.9 model_loader/loader.py:236-241; ModelOptFp4Config.get_min_capability()
    # is 100, modelopt_quant.py:952-953) raises before the NVFP4 MoE method's "Please use Blackwell" check
    # (modelopt_quant.py:1332-1339) is ever built
    assert ("ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. "
            "Minimum capability: 100. Current capability: 90.\n" in log) and "marlin" not in log
    assert "Current platform does not support NVFP4" not in log
    assert "Load weight begin" in log and "Load weight end" not in log  # raised while the model is built


def runs(log: str, backend: str, gpu: str) -> bool:
    """The engine serving the warmup request runs `backend` (whose rates in the simulator's performance model,
    tokenmodel.RATES, it then uses): the simulator labels it on its own `[moesweep-sim]` line, since the real
    prefill line's `input throughput` is a measured rate, not the backend's."""
    assert tokenmodel.params(backend, gpu)
    return f"[moesweep-sim] the MoE layers run the {backend} runner\n" in log


def test_auto_nvfp4_on_h200_with_0523_runs_marlin(tmp_path):
    rc, log = launch(tmp_path, "0.5.23", "h200")
    assert rc is None and "Current platform does not support NVFP4" not in log and runs(log, "marlin", "h200")


def test_auto_nvfp4_on_rtx_pro_6000_with_059_runs_sgl_kernel_cutlass(tmp_path):
    rc, log = launch(tmp_path, "0.5.9", "rtx-pro-6000")
    # auto stays auto in ServerArgs (no SM100): no flashinfer autotune, no trtllm crash; cutlass_moe_fp4 runs
    assert rc is None and "Running FlashInfer autotune" not in log and runs(log, "cutlass", "rtx-pro-6000")


def test_auto_nvfp4_on_rtx_pro_6000_with_0523_runs_flashinfer_cutlass(tmp_path):
    rc, log = launch(tmp_path, "0.5.23", "rtx-pro-6000")
    assert rc is None and runs(log, "flashinfer_cutlass", "rtx-pro-6000")


def test_trtllm_fp8_on_h200_crashes_in_autotune(tmp_path):
    rc, log = launch(tmp_path, "0.5.9", "h200", ["--quantization", "fp8", "--moe-runner-backend", "flashinfer_trtllm"])
    assert rc == -signal.SIGKILL and "No supported CUDA architectures found for major versions [10]." in log


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_mem_fraction_static_above_one_runs_out_of_memory_at_the_kv_pool(tmp_path, version):
    rc, log = launch(tmp_path, version, "rtx-pro-6000", ["--moe-runner-backend", "flashinfer_cutlass",
                                                        "--mem-fraction-static", "1.5"])
    assert rc == -signal.SIGKILL and "torch.OutOfMemoryError: CUDA out of memory." in log
    assert "Load weight end" in log and "KV Cache is allocated" not in log
