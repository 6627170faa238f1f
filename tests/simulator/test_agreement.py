"""Two derivations written apart must agree: the simulated server's failure model
(simulator/moesweep_sim/failure_model.py, read from the wheels' code) and the preflight's knowledge base
(plugins/plugin_utils/compat.py over data/compat.yml).  For every --moe-runner-backend choice of both pinned
versions x modelopt_fp4 / fp8 / bf16 x the SM90 (H200), SM100 (B200) and SM120 (RTX PRO 6000) profiles, the
launch either serves on both sides (the preflight says supported or caveat, and both name the same runner) or fails
on both at the same stage with the same exception (the preflight's message part of the simulator's).  A disagreement
fails with both sides' citations.

The matrix is compared at the level of the two pure functions (the preflight is imported here only: the simulator
shares no code with plugins/); a few cells, one per stage and profile, are also launched as real standalone
simulated servers to show the server does what its failure model says."""

from __future__ import annotations

import ast
import re
import signal

import pytest
from helpers.paths import REPO
from moesweep_sim import failure_model, gpus, moe_resolution
from simulator.real_wheels import WHEELS, source
from simulator.test_moe_resolution import launch

# isort: split
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, sglang_flags

KB = compat.load_kb()
GLM5 = "GlmMoeDsaForCausalLM"
VERSIONS = ("0.5.9", "0.5.23")
QUANTS = ("modelopt_fp4", "fp8", None)
# the simulated GPU profiles and their SM, from the profiles themselves
PROFILES = {name: int(gpus.MODELS[name]["compute_cap"].replace(".", "")) for name in ("h200", "b200", "rtx-pro-6000")}
# the CUDA toolkit of each version's provisioning lane (cu128-sglang-0.5.9, cu130-sglang-0.5.23)
LANE_TOOLKIT = {"0.5.9": "12.8", "0.5.23": "13.0"}
# the reference launch line's flags that decide these cells on neither side but that a rule may read
REFERENCE_FLAGS = {"tp-size": "8", "attention-backend": "flashinfer"}
# The cells the two sides still disagree on, each with why it is not resolved (the simulator always serves or fails;
# the preflight may answer `unknown`).  The agreement test fails when this list and the disagreements differ, so a
# cell resolved on either side has to leave it.
UNRESOLVED: dict = {}


def choices(version):
    return sglang_flags.load_schema(version)["_options"]["--moe-runner-backend"]["choices"]


def cells():
    for version in VERSIONS:
        for backend in choices(version):
            for quant in QUANTS:
                for gpu, sm in PROFILES.items():
                    yield version, backend, quant, gpu, sm


def simulated(version, backend, quant, sm):
    args = {"moe_runner_backend": backend, "quantization": quant, "tp_size": 8, "attention_backend": "flashinfer"}
    gpu = next(name for name, profile_sm in PROFILES.items() if profile_sm == sm)
    failure = failure_model.launch_failure(version, args, sm, GLM5, env={},
                                           gpu_mem_mib=gpus.MODELS[gpu]["memory_total_mib"])
    runs = moe_resolution.resolve_backend(version, args, sm, GLM5)
    return failure, runs


def preflight(version, backend, quant, sm):
    point = {"backend": backend, "quantization": quant, "sglang_version": version, "flags": dict(REFERENCE_FLAGS),
             "environment": {}}
    facts = {"sm": f"sm{sm}", "gpu_count": 8, "cuda_toolkit": {"release": LANE_TOOLKIT[version]}}
    return compat.evaluate(point, facts, KB)


def outcome_sim(failure):
    return "serves" if failure is None else failure.stage


def outcome_kb(verdict):
    if verdict["status"] in ("supported", "caveat"):
        return "serves"
    if verdict["status"] == "unknown":
        return "unknown"
    return verdict["stage"]


def same_text(sim_exc: str, kb_error: str) -> bool:
    """The preflight's error is part of the simulator's exception line, and where it names an exception type, the
    same type (the preflight may leave out a prefix the C++ side adds, e.g. DeepGEMM's "Assertion error (file): "
    or flashinfer's "Error in function '...' at file:line: ", or give only that C++ text)."""
    sim_type, _, sim_msg = sim_exc.partition(": ")
    kb_type, sep, kb_msg = (kb_error or "").partition(": ")
    if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", kb_type):
        return bool(kb_error) and kb_error.strip() in sim_exc
    return sim_type.rsplit(".", 1)[-1] == kb_type.rsplit(".", 1)[-1] and kb_msg.strip() in sim_msg


def disagreement(version, backend, quant, gpu, sm):
    failure, runs = simulated(version, backend, quant, sm)
    v = preflight(version, backend, quant, sm)
    sim, kb = outcome_sim(failure), outcome_kb(v)
    if sim == kb and sim == "serves" and runs == v["effective_backend"]:
        return None
    if sim == kb and sim != "serves" and same_text(failure.exc, v["error"]):
        return None
    sim_side = (f"serves, runs {runs}" if failure is None
                else f"fails at {failure.stage}: {failure.exc} [{failure.source}]")
    kb_side = f"{v['status']} at {v['stage']}: {v['error']}" if v["status"] == "unsupported" else \
        f"{v['status']}, runs {v['effective_backend']}"
    return (f"sglang {version} --moe-runner-backend {backend} --quantization {quant} on {gpu} (SM{sm}):\n"
            f"  simulator: {sim_side}\n  preflight: {kb_side} {v['citations']}")


def test_profiles_cover_sm90_sm100_sm120():
    assert sorted(PROFILES.values()) == [90, 100, 120]


def test_matrix_covers_every_choice_of_both_versions():
    all_cells = list(cells())
    assert len(all_cells) == 3 * 3 * sum(len(choices(v)) for v in VERSIONS)
    assert {c[1] for c in all_cells if c[0] == "0.5.23"} >= {"hpc_ops", "lora_triton", "megamoe", "intel_xpu"}


def test_simulator_and_preflight_agree_on_every_cell():
    found = {c[:3] + (c[4],): d for c in cells() if (d := disagreement(*c)) is not None}
    unexpected = [d for cell, d in found.items() if cell not in UNRESOLVED]
    assert unexpected == [], f"{len(unexpected)} disagreements:\n" + "\n".join(unexpected)
    assert set(found) == set(UNRESOLVED), f"resolved since: {sorted(set(UNRESOLVED) - set(found))}"


def test_the_cells_issue_30_names_fail_on_the_simulator():
    """With 8x RTX PRO 6000 (SM120), the launches the knowledge base and the code call unsupported."""
    for backend in ("flashinfer_cutedsl", "cutlass", "triton", "lora_triton", "hpc_ops", "deep_gemm", "triton_kernel",
                    "flashinfer_mxfp4"):
        assert simulated("0.5.23", backend, "modelopt_fp4", 120)[0] is not None, backend
    failure, _ = simulated("0.5.23", "flashinfer_cutlass", "fp8", 120)
    assert failure.stage == "server_args" and failure.exc.startswith("AssertionError: Invalid quantization 'fp8'.")
    for backend in ("triton_kernel", "flashinfer_mxfp4"):
        assert simulated("0.5.9", backend, "modelopt_fp4", 120)[0] is not None, backend
    assert simulated("0.5.9", "cutlass", "fp8", 120)[0].stage == "model_init"


def test_059_block_fp8_dense_gemms_on_sm120():
    """0.5.9 sends block-FP8 linear layers to DeepGEMM under --fp8-gemm-backend auto (fp8_utils.py:182-265), whose
    sgl-kernel 0.3.21 build dispatches SM90/SM100 only; with SGLANG_ENABLE_JIT_DEEPGEMM=0 auto picks flashinfer's
    TRT-LLM FP8 GEMM, declared for SM100/SM103 only: that fails too.  Triton and CUTLASS (sgl-kernel has an SM120
    blockwise kernel) serve."""
    fp8 = {"moe_runner_backend": "auto", "quantization": "fp8"}
    assert "Unsupported architecture or scaling factor types" in failure_model.launch_failure(
        "0.5.9", fp8, 120, GLM5).exc
    no_deepgemm = failure_model.launch_failure("0.5.9", fp8, 120, GLM5, env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"})
    assert no_deepgemm.stage == "first_forward" and no_deepgemm.exc == (
        "flashinfer.utils.BackendSupportedError: gemm_fp8_nt_groupwise does not support backend 'trtllm' "
        "with capability 120")
    for backend in ("triton", "cutlass"):
        assert failure_model.launch_failure("0.5.9", dict(fp8, fp8_gemm_backend=backend), 120, GLM5) is None
    for sm in (90, 100):
        assert failure_model.launch_failure("0.5.9", fp8, sm, GLM5) is None
    assert failure_model.launch_failure("0.5.23", fp8, 120, GLM5) is None  # sgl-deep-gemm 0.2.3 has sm120 kernels


def test_sm100_only_paths_serve_on_b200():
    for version in VERSIONS:
        for quant in QUANTS:
            assert simulated(version, "flashinfer_trtllm", quant, 100) == (None, "flashinfer_trtllm")
        assert simulated(version, "auto", "modelopt_fp4", 100) == (None, "flashinfer_trtllm")
    assert simulated("0.5.23", "flashinfer_cutedsl", "modelopt_fp4", 100)[0] is None
    assert simulated("0.5.23", "flashinfer_trtllm_routed", "fp8", 100)[0] is None


def test_megamoe_on_glm5_follows_the_experts_format():
    """0.5.23 --moe-runner-backend megamoe (mega_moe_hook.py, mega_moe.py, modelopt_quant.py, fp8.py): NVFP4 experts
    need the Mega MoE token budget at start-up (B200's default chunked prefill 16384 > the 8192 default), have no
    fused-MoE fallback (SM90), and run Mega MoE within the budget on SM100; experts never built into the Mega MoE
    layout (block-FP8 on SM100, bf16) run triton."""
    b200 = gpus.MODELS["b200"]["memory_total_mib"]
    nvfp4 = {"moe_runner_backend": "megamoe", "quantization": "modelopt_fp4", "tp_size": 8}
    failure = failure_model.launch_failure("0.5.23", nvfp4, 100, GLM5, env={}, gpu_mem_mib=b200)
    assert failure.stage == "server_args" and failure.exc.startswith(f"ValueError: {GLM5} with MegaMoE requires ")
    assert "chunked_prefill_size=16384, token_partition=none, token_partition_size=1, token_alignment=8, " \
           "required_per_rank=16384, SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK=8192." in failure.exc
    env = {"SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK": "16384"}
    assert failure_model.launch_failure("0.5.23", nvfp4, 100, GLM5, env=env, gpu_mem_mib=b200) is None
    assert failure_model.launch_failure("0.5.23", dict(nvfp4, chunked_prefill_size=8192), 100, GLM5,
                                        gpu_mem_mib=b200) is None
    assert moe_resolution.resolve_backend("0.5.23", nvfp4, 100, GLM5) == "megamoe"
    failure, _ = simulated("0.5.23", "megamoe", "modelopt_fp4", 90)
    assert failure.stage == "first_forward" and failure.exc.startswith(
        "RuntimeError: NVFP4 MegaMoE experts cannot fall back to the fused MoE path;")
    for quant, sm in (("fp8", 100), (None, 90), (None, 100)):
        assert simulated("0.5.23", "megamoe", quant, sm) == (None, "triton"), (quant, sm)
    # block-FP8 experts on SM90 are built into the Mega MoE layout and the pinned DeepGEMM runs them
    assert simulated("0.5.23", "megamoe", "fp8", 90) == (None, "megamoe")


def test_the_pinned_deep_gemm_has_the_sm90_fp8_mega_moe_entry_points():
    """sglang 0.5.23 layers/moe/mega_moe_sm90.py:28-39 runs the SM90 FP8 Mega MoE only when
    hasattr(deep_gemm, "fp8_mega_moe") and hasattr(deep_gemm, "mega_moe_pre_dispatch_sm90"): both are module-level
    names of the sgl-deep-gemm the 0.5.23 wheel pins (its METADATA), read in that wheel."""
    metadata = source(WHEELS[("sglang", "0.5.23")], "sglang-0.5.23.dist-info/METADATA")
    assert f"Requires-Dist: {WHEELS[('deep_gemm', '0.5.23')]}\n" in metadata
    tree = ast.parse(source(WHEELS[("deep_gemm", "0.5.23")], "deep_gemm/__init__.py"))
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {"fp8_mega_moe", "mega_moe_pre_dispatch_sm90"} <= names


def test_cutedsl_moe_off_sm9x_sm10x_fails_in_the_moe_sort_jit():
    failure, _ = simulated("0.5.23", "flashinfer_cutedsl", "modelopt_fp4", 120)
    assert failure.stage == "first_forward"
    assert failure.exc == "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."


def test_failure_model_reads_no_knowledge_base():
    """The simulator's side is written from the sglang sources, not from the controller's KB."""
    tree = ast.parse((REPO / "simulator" / "moesweep_sim" / "failure_model.py").read_text(encoding="utf-8"))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "collections", ""}  # "" is the package-relative `from . import`
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not any("compat.yml" in v or "plugins" in v for v in strings[1:])  # [0] is the docstring


# ------------------------------------------------------------------------------ real standalone servers
LAUNCHES = [
    # (version, gpu, extra args, stage the failure model names or "serves")
    ("0.5.23", "rtx-pro-6000", ["--moe-runner-backend", "flashinfer_cutlass", "--quantization", "fp8"], "server_args"),
    ("0.5.23", "rtx-pro-6000", ["--moe-runner-backend", "hpc_ops"], "model_init"),
    ("0.5.23", "rtx-pro-6000", ["--moe-runner-backend", "triton"], "first_forward"),
    ("0.5.9", "rtx-pro-6000", ["--moe-runner-backend", "cutlass", "--quantization", "fp8"], "model_init"),
    ("0.5.9", "rtx-pro-6000", ["--moe-runner-backend", "triton", "--quantization", "fp8"], "first_forward"),
    ("0.5.23", "b200", ["--moe-runner-backend", "flashinfer_cutedsl"], "serves"),
    ("0.5.9", "b200", ["--moe-runner-backend", "flashinfer_trtllm"], "serves"),
    ("0.5.23", "h200", ["--moe-runner-backend", "hpc_ops", "--quantization", "fp8"], "first_forward"),
]


@pytest.mark.parametrize("version,gpu,extra,stage", LAUNCHES,
                         ids=[f"{v}-{g}-{'-'.join(e[1::2])}" for v, g, e, _ in LAUNCHES])
def test_standalone_server_does_what_the_model_says(tmp_path, version, gpu, extra, stage):
    args = {"moe_runner_backend": extra[1], "quantization": "modelopt_fp4", "tp_size": 8}
    args.update({k.lstrip("-").replace("-", "_"): v for k, v in zip(extra[::2], extra[1::2], strict=True)})
    sm = PROFILES[gpu]
    failure = failure_model.launch_failure(version, args, sm, GLM5, env={})
    assert outcome_sim(failure) == stage
    v = preflight(version, args["moe_runner_backend"], args["quantization"], sm)
    assert outcome_kb(v) == stage, v
    rc, log = launch(tmp_path, version, gpu, extra)
    if stage == "serves":
        assert rc is None, log[-2000:]
        return
    exc = failure.exc.replace("{site}", "/opt/sglang/venv/lib/python3.11/site-packages")
    assert exc in log, log[-2000:]
    if stage == "server_args":
        assert rc == 1 and "Load weight begin" not in log and "server_args=" not in log
    else:
        assert rc == -signal.SIGKILL
        assert log.index("Load weight begin") < log.index(exc.splitlines()[0])
        assert ("Load weight end" in log) == (stage == "first_forward")


# ------------------------------------------------------------------------------ the attention backends' gates
# The simulator's derivation of the attention factories' gates (failure_model._attention_gate) against sglang's own
# code: the controller's dry run of the pinned wheels (plugins/plugin_utils/sglang_sandbox.py), which calls each
# factory with a stand-in runner. (version, SM, model, --attention-backend)
ATTENTION_CELLS = [
    ("0.5.9", 120, "Qwen/Qwen3-30B-A3B", "fa3"),
    ("0.5.9", 90, "Qwen/Qwen3-30B-A3B", "fa3"),
    ("0.5.9", 100, "Qwen/Qwen3-30B-A3B", "trtllm_mla"),
    ("0.5.9", 100, "Qwen/Qwen3-30B-A3B", "trtllm_mha"),
    ("0.5.23", 120, "zai-org/GLM-5", "fa3"),
    ("0.5.23", 90, "zai-org/GLM-5", "fa3"),
    ("0.5.23", 100, "zai-org/GLM-5", "trtllm_mha"),
    ("0.5.23", 100, "zai-org/GLM-5", "trtllm_mla"),
    ("0.5.23", 100, "Qwen/Qwen3-30B-A3B", "trtllm_mla"),
]


@pytest.mark.parametrize("version,sm,model,backend", ATTENTION_CELLS,
                         ids=[f"{v}-sm{sm}-{m.split('/')[1]}-{b}" for v, sm, m, b in ATTENTION_CELLS])
def test_the_simulator_refuses_an_attention_backend_where_sglangs_own_code_does(version, sm, model, backend):
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_sandbox
    from moesweep_sim import sglang_server

    try:
        sglang_sandbox.prepare(version)
    except sglang_sandbox.SandboxError as exc:
        pytest.skip(f"the pinned wheels cannot be fetched here ({str(exc)[:160]})")
    real = sglang_sandbox.dry_run_point(version, ["--model-path", model, "--tp", "8", "--attention-backend", backend],
                                        {}, {"sm": f"sm{sm}", "gpu_count": 8})
    assert real["verdict"] in ("accepted", "refused"), real.get("reason")
    _w, cls, _kv, mla, *_ = sglang_server.model_facts(model)
    sim = failure_model.launch_failure(version, {"model_path": model, "tp_size": 8, "attention_backend": backend},
                                       sm, cls, mla=mla)
    real_dies_here = real["verdict"] == "refused" and real["stage"] == "attention_init"
    assert (sim is not None and sim.stage == "attention_init") == real_dies_here, (real.get("error"), sim)
    if real_dies_here:
        assert sim.exc.endswith(real["error"]["message"]) and sim.frame[1] == real["error"]["line"]
