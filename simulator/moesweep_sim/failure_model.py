"""Where a simulated launch dies for MoE-backend / quantization / GPU reasons, with the real text at the real stage.

Written from the emulated versions' code, independently of the controller's knowledge base (nothing here reads
``data/compat.yml`` or imports ``plugins/``); ``tests/simulator/test_agreement.py`` compares the two.  Stdlib only.

``launch_failure(version, args, sm, architecture, env)`` walks one launch in the order the real one runs and
returns the first failure it reaches, or None when the launch serves:

``server_args``
    ``ServerArgs`` resolution in the launching process, before any scheduler starts: the process prints the
    traceback and exits 1 (0.5.9 ``server_args.py`` ``_handle_moe_kernel_config``; 0.5.23 ``arg_groups/*_hook.py``).
``model_init``
    The scheduler builds the model after ``Load weight begin``: the loader's quantization-capability gate, the MoE
    quantization method's ``__init__`` and ``create_moe_runner`` (called from ``FusedMoE.__init__``: 0.5.9
    ``layers/moe/fused_moe_triton/layer.py:306``, 0.5.23 ``:576``), ``MoeRunner.__init__``.
``first_forward``
    The first MoE forward: flashinfer autotune where it runs, else CUDA graph capture, else the first request
    (the server's own warmup).  The quantization method's ``apply()``, the JIT / cubin / kernel-dispatch checks.

Paths are inside the wheels (``sglang/srt/...`` is ``python/sglang/srt/...`` at the release tag of
https://github.com/sgl-project/sglang; ``flashinfer/...`` is at the tag of https://github.com/flashinfer-ai/flashinfer).
Every launch is GLM-5-like (the DeepSeek-V2 MoE block) with the reference line's ``--attention-backend`` and no
``--moe-a2a-backend`` unless the args say otherwise.
"""

from __future__ import annotations

import collections

from . import moe_resolution, server_args
from . import templates as T

STAGES = ("server_args", "model_init", "attention_init", "first_forward")

# stage, exception line ("ValueError: ..."), source ("sglang 0.5.23 sglang/srt/...:L1-L2"), raise frame or None
# (file, line, function, code, carets, decorated) in the emulated version's wheel: the frame the traceback ends in.
Failure = collections.namedtuple("Failure", "stage exc source frame")

# MoeRunnerBackend member names (0.5.23 sglang/srt/layers/moe/utils.py:194-216; a plain Enum, so f"{backend}" is
# "MoeRunnerBackend.<NAME>")
ENUM_NAMES = {
    "auto": "AUTO", "deep_gemm": "DEEP_GEMM", "triton": "TRITON", "triton_kernel": "TRITON_KERNELS",
    "flashinfer_trtllm": "FLASHINFER_TRTLLM", "experimental_sgl_trtllm": "EXPERIMENTAL_SGL_TRTLLM",
    "flashinfer_trtllm_routed": "FLASHINFER_TRTLLM_ROUTED", "flashinfer_cutlass": "FLASHINFER_CUTLASS",
    "flashinfer_mxfp4": "FLASHINFER_MXFP4", "flashinfer_cutedsl": "FLASHINFER_CUTEDSL",
    "flashinfer_megamoe": "FLASHINFER_MEGAMOE", "cutlass": "CUTLASS", "marlin": "MARLIN", "humming": "HUMMING",
    "experimental_sgl_marlin": "EXPERIMENTAL_SGL_MARLIN", "lora_cutedsl": "LORA_CUTEDSL",
    "lora_triton": "LORA_TRITON", "lora_marlin": "LORA_MARLIN", "aiter": "AITER", "hpc_ops": "HPC_OPS",
    "intel_xpu": "INTEL_XPU",
}
FALSE = ("0", "false", "no", "off")


def _enum(backend: str) -> str:
    return "MoeRunnerBackend." + ENUM_NAMES.get(backend, backend.upper())


def _quant(args: dict):
    q = args.get("quantization")
    return None if q in (None, "", "none", "unquant") else q


def _fail(stage, exc_type, text, source, frame=None) -> Failure:
    return Failure(stage, f"{exc_type}: {text}" if text else exc_type, source, frame)


def launch_failure(version: str, args: dict, sm: int, architecture: str = "", env: dict | None = None,
                   gpu_mem_mib: float | None = None, path_exists=None, mla: bool | None = None):
    """The first failure this launch reaches, or None when it serves.  ``gpu_mem_mib``: the GPU's total memory as
    ``nvidia-smi --query-gpu=memory.total`` gives it, which sizes the default chunked prefill (0.5.23
    ``arg_groups/memory_hook.py`` ``handle_gpu_memory_settings``); None is sglang's own fallback when it cannot
    read it. ``path_exists``: how the server tells whether a local model path exists (os.path.exists; None: it is
    not asked, and this stays a pure function of its arguments)."""
    env = env or {}
    missing = _missing_model_dir(version, args, path_exists) if path_exists else None
    if missing is not None:
        return missing
    if version == "0.5.9":
        failure = _failure_059(args, sm, architecture, env)
    else:
        failure = _failure_0523(args, sm, architecture, env, gpu_mem_mib)
    if failure is None or failure.stage == "first_forward":
        # the attention backend is built after the model and its KV pool, before any kernel warm-up
        gate = _attention_gate(version, args, sm, _is_mla(architecture) if mla is None else mla)
        if gate is not None:
            return gate
    return failure


# The models whose attention is MLA (ModelConfig.attention_arch == AttentionArch.MLA; 0.5.9
# srt/configs/model_config.py _derive_model_shapes): the DeepSeek V2/V3 family and what reuses it.
_MLA_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                      "DeepseekV3ForCausalLMNextN", "GlmMoeDsaForCausalLM", "KimiK2ForCausalLM",
                      "KimiVLForConditionalGeneration", "MistralLarge3ForCausalLM")


def _is_mla(architecture: str) -> bool:
    return architecture in _MLA_ARCHITECTURES


# (line, exception type, text) of each attention backend factory's own gate
# (srt/layers/attention/attention_registry.py of each wheel).
_FA3_TEXT = "FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`."
_ATTENTION_GATES = {
    "0.5.9": {
        "fa3": (130, "create_flashattention_v3_backend", "assert (", "AssertionError", _FA3_TEXT),
        "trtllm_mla": (51, "create_trtllm_mla_backend",
                       'raise ValueError("trtllm_mla backend can only be used with MLA models.")', "ValueError",
                       "trtllm_mla backend can only be used with MLA models."),
        "trtllm_mha": (158, "create_trtllm_mha_backend",
                       'raise ValueError("trtllm_mha backend can only be used with non-MLA models.")', "ValueError",
                       "trtllm_mha backend can only be used with non-MLA models."),
    },
    "0.5.23": {
        "fa3": (243, "create_flashattention_v3_backend",
                "assert (major == 8 and not runner.use_mla_backend) or major == 9, (", "AssertionError", _FA3_TEXT),
        "trtllm_mla": (97, "create_trtllm_mla_backend",
                       'raise ValueError("trtllm_mla backend can only be used with MLA models.")', "ValueError",
                       "trtllm_mla backend can only be used with MLA models."),
        "trtllm_mha": (280, "create_trtllm_mha_backend",
                       'raise ValueError("trtllm_mha backend can only be used with non-MLA models.")', "ValueError",
                       "trtllm_mha backend can only be used with non-MLA models."),
    },
}


def _attention_gate(version: str, args: dict, sm: int, mla: bool):
    """The gate of an attention backend the model runner builds (prefill's, then decode's; one backend when they are
    the same), where it refuses the GPU or the model: FA3 runs on SM90, or SM80 without MLA; TRT-LLM MLA needs an
    MLA model, TRT-LLM MHA one without."""
    gates = _ATTENTION_GATES.get(version) or {}
    default = args.get("attention_backend")
    names = [args.get("prefill_attention_backend") or default, args.get("decode_attention_backend") or default]
    for name in [n for i, n in enumerate(names) if n and n not in names[:i]]:
        gate = gates.get(name)
        if gate is None:
            continue
        major = sm // 10
        fails = {"fa3": not ((major == 8 and not mla) or major == 9), "trtllm_mla": not mla,
                 "trtllm_mha": mla}[name]
        if fails:
            line, func, code, exc_type, text = gate
            return _fail("attention_init", exc_type, text,
                         f"sglang {version} sglang/srt/layers/attention/attention_registry.py:{line}",
                         ("sglang/srt/layers/attention/attention_registry.py", line, func, code, None, False))
    return None


# ServerArgs reads the model's config through sglang's get_config -> transformers' AutoConfig.from_pretrained; a
# local path that is no directory is no hub id either, and transformers raises (v4.57.1 configuration_utils.py
# PretrainedConfig._get_config_dict; 0.5.23's pinned transformers the same text). The frame: sglang's call.
_MODEL_CONFIG_FRAME = {
    "0.5.9": ("sglang/srt/utils/hf_transformers_utils.py", 315, "get_config",
              "config = AutoConfig.from_pretrained(", None, False),
}
_CANNOT_LOAD_CONFIG = ("Can't load the configuration of '{path}'. If you were trying to load it from "
                       "'https://huggingface.co/models', make sure you don't have a local directory with the same "
                       "name. Otherwise, make sure '{path}' is the correct path to a directory containing a "
                       "config.json file")


def _missing_model_dir(version: str, args: dict, path_exists):
    """A --model-path that is an absolute path to nothing: the launch dies at its arguments. (A directory that exists
    but lacks config.json dies the same way on a real host; the simulator serves such directories, its tokenizer's
    among them - a known gap.)"""
    path = str(args.get("model_path") or "")
    if not path.startswith("/") or path_exists(path):
        return None
    return _fail("server_args", "OSError", _CANNOT_LOAD_CONFIG.format(path=path),
                 f"transformers 4.57.1 configuration_utils.py via sglang {version} get_config",
                 _MODEL_CONFIG_FRAME.get(version))


# ------------------------------------------------------------------------------------------------ sglang 0.5.9
def _failure_059(args, sm, architecture, env):
    requested = args.get("moe_runner_backend") or "auto"
    quant = _quant(args)
    tp = int(args.get("tp_size") or 1)
    ep = int(args.get("ep_size") or 1)
    major = sm // 10
    # -- server args: ServerArgs._handle_moe_kernel_config (server_args.py:2127-2160)
    if requested == "flashinfer_cutlass":
        if quant not in ("modelopt_fp4", "modelopt_fp8", None):
            return _fail("server_args", "AssertionError", T.render(T.ASSERT_CUTLASS_QUANT_9, q=quant),
                         "sglang 0.5.9 sglang/srt/server_args.py:2137-2141",
                         ("sglang/srt/server_args.py", 2137, "_handle_moe_kernel_config",
                          "assert self.quantization in [", None, False))
        if ep not in (1, tp):
            return _fail("server_args", "AssertionError", T.render(T.ASSERT_EP_9),
                         "sglang 0.5.9 sglang/srt/server_args.py:2142-2145")
    if requested == "flashinfer_trtllm" and quant not in ("modelopt_fp4", "fp8", "modelopt_fp8",
                                                          "compressed-tensors", None):
        return _fail("server_args", "AssertionError", T.render(T.ASSERT_TRTLLM_QUANT_9, q=quant),
                     "sglang 0.5.9 sglang/srt/server_args.py:2148-2154",
                     ("sglang/srt/server_args.py", 2148, "_handle_moe_kernel_config",
                      "assert self.quantization in [", None, False))
    runs = moe_resolution.resolve_backend("0.5.9", args, sm, architecture)

    # -- model init
    if quant == "modelopt_fp4" and sm < 100:
        # model_loader/loader.py:222-241 _get_quantization_config: ModelOptFp4Config.get_min_capability() is 100
        # (layers/quantization/modelopt_quant.py:952-953); this runs before the model class (and so the NVFP4
        # MoE method's own "Please use Blackwell" check, modelopt_quant.py:1332-1339) is built
        return _fail("model_init", "ValueError", T.render(T.LOADER_MIN_CAPABILITY_9, q=quant, min=100, cap=sm),
                     "sglang 0.5.9 sglang/srt/model_loader/loader.py:236-241",
                     ("sglang/srt/model_loader/loader.py", 236, "_get_quantization_config", "raise ValueError(",
                      None, False))
    if quant == "fp8" and requested == "cutlass" and major not in (9, 10):
        # Fp8MoEMethod.__init__: a bare `assert is_sm100_supported() or is_sm90_supported()`
        return _fail("model_init", "AssertionError", "", "sglang 0.5.9 sglang/srt/layers/quantization/fp8.py:686",
                     ("sglang/srt/layers/quantization/fp8.py", 686, "__init__",
                      "assert is_sm100_supported() or is_sm90_supported()", None, False))

    # -- first forward
    if quant == "fp8" and major >= 11 and _dense_fp8_on_flashinfer_trtllm_059(args, env):
        # With DeepGEMM off, --fp8-gemm-backend auto picks flashinfer's TRT-LLM FP8 GEMM on any Blackwell
        # (fp8_utils.py:250-265, the explicit choice :201-208), whose backend requirement admits SM100/SM103 only;
        # K < 256 falls back to Triton, GLM-5's projections do not (fp8_utils.py:310-345)
        return _fail("first_forward", "flashinfer.utils.BackendSupportedError",
                     T.render(T.FI_BACKEND_UNSUPPORTED, func="gemm_fp8_nt_groupwise", backend="trtllm",
                              extra=f" with capability {sm}"),
                     "flashinfer 0.6.3 flashinfer/utils.py:1149-1155; flashinfer/gemm/gemm_base.py:3190-3191",
                     ("flashinfer/utils.py", 1153, "wrapper", "raise BackendSupportedError(", None, False))
    if quant == "fp8" and major >= 11 and _dense_fp8_on_deepgemm_059(args, env):
        # Block-FP8 dense GEMMs (attention projections, dense layers: they run before any MoE layer) go to
        # DeepGEMM under --fp8-gemm-backend auto (layers/quantization/fp8_utils.py:182-197, 250-265; DeepGEMM is
        # on for any SM >= 90, layers/deep_gemm_wrapper/configurer.py:9-22), and sgl-kernel 0.3.21's DeepGEMM
        # dispatches SM90 and SM100 only (deep_gemm/include/deep_gemm/impls/: sm90_* and sm100_* kernels).
        return _fail("first_forward", "RuntimeError", T.render(T.DEEPGEMM_ARCH),
                     "sgl-kernel 0.3.21 deep_gemm/deep_gemm_cpp.abi3.so (DeepGEMM csrc/apis/gemm.hpp "
                     "DG_HOST_UNREACHABLE)")
    if quant == "fp8" and major >= 11 and runs == "deep_gemm" and _deepgemm_enabled_059(env):
        # the MoE layers' grouped GEMMs on the same DeepGEMM (Fp8MoEMethod.create_moe_runner, fp8.py:1341-1360)
        return _fail("first_forward", "RuntimeError", T.render(T.DEEPGEMM_ARCH),
                     "sgl-kernel 0.3.21 deep_gemm/deep_gemm_cpp.abi3.so (DeepGEMM csrc/apis/gemm.hpp "
                     "DG_HOST_UNREACHABLE)")
    if runs in moe_resolution.TRTLLM_FAMILY and sm not in (100, 103):
        # trtllm-gen MoE is JIT-built for major 10 only: flashinfer 0.6.3 jit/fused_moe.py:215-238 ->
        # compilation_context.py:62-64
        return _fail("first_forward", "RuntimeError", T.render(T.FI_NO_ARCH, majors=[10]),
                     "flashinfer 0.6.3 flashinfer/compilation_context.py:62-64",
                     ("flashinfer/compilation_context.py", 62, "get_nvcc_flags_list", "raise RuntimeError(",
                      None, False))
    if quant == "fp8" and requested in ("triton_kernel", "flashinfer_mxfp4", "flashinfer_cutedsl"):
        # Fp8MoEMethod.create_moe_runner builds a runner for deep_gemm / triton / flashinfer_trtllm only
        # (fp8.py:1341-1360); apply() then reads self.runner
        return _fail("first_forward", "AttributeError",
                     T.render(T.ATTRIBUTE_MISSING, type="Fp8MoEMethod", name="runner"),
                     "sglang 0.5.9 sglang/srt/layers/quantization/fp8.py:1341-1360")
    if requested == "triton_kernel":
        if quant is None:
            # DeepseekV2MoE keeps STANDARD top-k for unquantized layers (models/deepseek_v2.py:450-457)
            return _fail("first_forward", "AssertionError", T.render(T.TRITON_KERNEL_TOPK),
                         "sglang 0.5.9 sglang/srt/layers/moe/moe_runner/triton_kernels.py:166-168",
                         ("sglang/srt/layers/moe/moe_runner/triton_kernels.py", 166,
                          "pre_permute_standard_to_triton_kernels",
                          "assert TopKOutputChecker.format_is_triton_kernels(", None, False))
        if quant == "modelopt_fp4":
            # top-k gives TritonKernelTopKOutput (layers/moe/topk.py:282-299); the NVFP4 apply() reads .topk_weights
            return _fail("first_forward", "AttributeError",
                         T.render(T.ATTRIBUTE_MISSING, type="TritonKernelTopKOutput", name="topk_weights"),
                         "sglang 0.5.9 sglang/srt/layers/moe/topk.py:282-299")
    if requested == "flashinfer_mxfp4" and quant == "modelopt_fp4":
        return _fail("first_forward", "AttributeError",
                     T.render(T.ATTRIBUTE_MISSING, type="BypassedTopKOutput", name="topk_weights"),
                     "sglang 0.5.9 sglang/srt/layers/moe/topk.py:282-299")
    return None


def _deepgemm_enabled_059(env) -> bool:
    """SGLANG_ENABLE_JIT_DEEPGEMM defaults to true (0.5.9 environ.py; layers/deep_gemm_wrapper/configurer.py)."""
    return str(env.get("SGLANG_ENABLE_JIT_DEEPGEMM", "true")).strip().lower() not in FALSE


def _dense_fp8_on_flashinfer_trtllm_059(args, env) -> bool:
    backend = args.get("fp8_gemm_backend") or "auto"
    return backend == "flashinfer_trtllm" or (backend == "auto" and not _deepgemm_enabled_059(env))


def _dense_fp8_on_deepgemm_059(args, env) -> bool:
    """0.5.9 sends block-FP8 linear layers to DeepGEMM: ``--fp8-gemm-backend auto`` with DeepGEMM enabled
    (``SGLANG_ENABLE_JIT_DEEPGEMM`` defaults to true), or ``deep_gemm`` explicitly."""
    backend = args.get("fp8_gemm_backend") or "auto"
    return _deepgemm_enabled_059(env) and backend in ("auto", "deep_gemm")


# ----------------------------------------------------------------------------------------------- sglang 0.5.23
def _failure_0523(args, sm, architecture, env, gpu_mem_mib=None):
    requested = args.get("moe_runner_backend") or "auto"
    quant = _quant(args)
    major, minor = divmod(sm, 10)
    a2a = args.get("moe_a2a_backend") or "none"
    # -- server args, in the order ServerArgs resolution runs its hooks
    if requested == "megamoe" or a2a == "megamoe":
        # handle_moe_runner_backend_alias: megamoe -> auto + --moe-a2a-backend megamoe; check_mega_moe_compat
        if not (major == 9 or major == 10):
            return _fail("server_args", "ValueError", T.render(T.MEGAMOE_ARCH_23),
                         "sglang 0.5.23 sglang/srt/arg_groups/mega_moe_hook.py:43-48",
                         ("sglang/srt/arg_groups/mega_moe_hook.py", 43, "check_mega_moe_compat", "raise ValueError(",
                          None, False))
    if requested.startswith("lora") and not (args.get("enable_lora") or args.get("lora_paths")):
        return _fail("server_args", "ValueError", T.render(T.LORA_MOE_REQUIRES_LORA_23, backend=requested),
                     "sglang 0.5.23 sglang/srt/arg_groups/lora_hook.py:200-203",
                     ("sglang/srt/arg_groups/lora_hook.py", 201, "check_lora_moe_runner_args", "raise ValueError(",
                      None, False))
    resolved = moe_resolution.server_args_backend("0.5.23", args, sm, architecture)
    qtext = str(quant)  # f"Invalid quantization '{view.quantization}'"
    if resolved == "flashinfer_cutlass" and quant not in ("modelopt_fp4", "modelopt_fp8", "modelopt_mixed", None):
        return _fail("server_args", "AssertionError", T.render(T.ASSERT_CUTLASS_QUANT_23, q=qtext),
                     "sglang 0.5.23 sglang/srt/arg_groups/moe_hook.py:81-88",
                     ("sglang/srt/arg_groups/moe_hook.py", 81, "handle_moe_kernel_config",
                      "assert view.quantization in [", None, False))
    if resolved == "flashinfer_cutedsl" and quant not in ("modelopt_fp4", "modelopt_mixed", "nvfp4_online"):
        # a GLM-5 checkpoint carries no hybrid NVFP4 MoE metadata (nvfp4_moe_meta is None)
        return _fail("server_args", "AssertionError", T.render(T.ASSERT_CUTEDSL_QUANT_23, q=qtext),
                     "sglang 0.5.23 sglang/srt/arg_groups/moe_hook.py:96-101",
                     ("sglang/srt/arg_groups/moe_hook.py", 96, "handle_moe_kernel_config", "assert (", None, False))
    if resolved in ("flashinfer_trtllm", "experimental_sgl_trtllm") and quant not in (
            "modelopt_fp4", "nvfp4_online", "fp8", "mxfp8", "modelopt_fp8", "modelopt_mixed", "compressed-tensors",
            None):
        return _fail("server_args", "AssertionError", T.render(T.ASSERT_TRTLLM_QUANT_23, q=qtext),
                     "sglang 0.5.23 sglang/srt/arg_groups/moe_hook.py:124-135")
    if resolved == "flashinfer_trtllm_routed" and quant not in (
            "fp8", "mxfp8", "modelopt_fp4", "modelopt_mixed", "nvfp4_online", "minimax_m3_nvfp4", None):
        return _fail("server_args", "AssertionError", T.render(T.ASSERT_TRTLLM_ROUTED_QUANT_23, q=qtext),
                     "sglang 0.5.23 sglang/srt/arg_groups/moe_hook.py:138-148")
    if requested == "megamoe" or a2a == "megamoe":
        failure = _mega_moe_token_budget_0523(args, architecture, quant, env, gpu_mem_mib)
        if failure:
            return failure
    if quant == "modelopt_fp4":
        return _nvfp4_0523(args, sm, resolved, env)
    if quant == "fp8":
        return _fp8_0523(args, sm, resolved, env)
    if quant is None:
        return _unquant_0523(args, sm, resolved, env)
    return None


def _runner_init_0523(backend: str, sm: int, a2a: str = "none"):
    """MoeRunner.__init__ (layers/moe/moe_runner/runner.py:55-181) for a backend the quantization method chose."""
    major, minor = divmod(sm, 10)
    if backend == "hpc_ops" and major != 9:
        return _fail("model_init", "ValueError", T.render(T.HPC_OPS_NEEDS_SM90_23, major=major, minor=minor),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/runner.py:150-159",
                     ("sglang/srt/layers/moe/moe_runner/runner.py", 155, "__init__", "raise ValueError(", None, False))
    if backend == "intel_xpu":
        return _fail("model_init", "NotImplementedError", T.render(T.RUNNER_UNSUPPORTED_23, backend=_enum(backend)),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/runner.py:164-165",
                     ("sglang/srt/layers/moe/moe_runner/runner.py", 165, "__init__",
                      'raise NotImplementedError(f"Unsupported runner backend: {runner_backend}")', None, False))
    # fused-path-only runners with no ("none", backend) fused func: flashinfer_megamoe registers one for the
    # flashinfer_megamoe a2a backend only (layers/moe/flashinfer_megamoe.py:651); experimental_sgl_trtllm only
    # with SGLANG_EXPERIMENTAL_LORA_OPTI (moe_runner/flashinfer_trtllm.py:1956-1959)
    if backend in ("flashinfer_megamoe", "experimental_sgl_trtllm"):
        return _fail("model_init", "NotImplementedError",
                     T.render(T.RUNNER_NO_FUSED_FUNC_23, backend=_enum(backend), a2a=a2a),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/runner.py:177-181",
                     ("sglang/srt/layers/moe/moe_runner/runner.py", 178, "__init__", "raise NotImplementedError(",
                      None, False))
    return None


def _trtllm_kernels_0523(sm: int):
    """trtllm-gen MoE on a GPU without its kernels: flashinfer 0.7.2 JIT-builds the module for majors [10, 12]
    (jit/fused_moe.py:384-387), so SM90 fails in the JIT filter and SM12x on the cubin manifest."""
    if sm in (100, 103):
        return None
    if sm // 10 == 12:
        site = "{site}"
        text = ("Error in function 'TrtllmGenBatchedGemmRunner' at " + site
                + "/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: " + T.render(T.FI_NO_SM120_CUBIN, sm=sm))
        return _fail("first_forward", "RuntimeError", text,
                     "flashinfer 0.7.2 csrc/trtllm_batched_gemm_runner.cu:204-219 (FLASHINFER_CHECK, "
                     "include/flashinfer/exception.h)")
    return _fail("first_forward", "RuntimeError", T.render(T.FI_NO_ARCH, majors=[10, 12]),
                 "flashinfer 0.7.2 flashinfer/compilation_context.py:162-164",
                 ("flashinfer/compilation_context.py", 162, "get_nvcc_flags_list", "raise RuntimeError(", None, False))


def _nvfp4_0523(args, sm, resolved, env):
    major = sm // 10
    a2a = args.get("moe_a2a_backend") or "none"
    if args.get("moe_runner_backend") == "megamoe":
        a2a = "megamoe"
    is_lora = resolved.startswith("lora")
    # ModelOptNvFp4FusedMoEMethod.__init__ (modelopt_quant.py:2370-2387)
    if is_lora and resolved != "lora_marlin":
        return _fail("model_init", "ValueError", "NVFP4 MoE LoRA requires --moe-runner-backend lora_marlin.",
                     "sglang 0.5.23 sglang/srt/layers/quantization/modelopt_quant.py:2372-2376")
    if resolved == "auto" or is_lora:
        marlin_fallback = 80 <= sm < 100
    else:
        marlin_fallback = resolved in ("marlin", "experimental_sgl_marlin")
    if major not in (10, 11, 12) and not marlin_fallback:
        return _fail("model_init", "ValueError", T.render(T.NVFP4_PLATFORM_23),
                     "sglang 0.5.23 sglang/srt/layers/quantization/modelopt_quant.py:2383-2387",
                     ("sglang/srt/layers/quantization/modelopt_quant.py", 2383, "__init__", "raise ValueError(",
                      None, False))
    # create_moe_runner (modelopt_quant.py:3111-3149)
    backend = resolved
    if backend == "auto":
        backend = "marlin" if 80 <= sm < 100 else "flashinfer_trtllm"
    if a2a == "megamoe":
        # process_weights_after_loading repacks the NVFP4 experts into the Mega MoE layout on any GPU
        # (modelopt_quant.py:2726-2728 -> _build_mega_moe_weights :2650-2710, DeepGEMM's layout transforms are
        # tensor ops) and create_moe_runner builds no runner (:3127-3130).  DeepseekV2MoE.forward takes the Mega MoE
        # path only when the experts are ready (models/deepseek_v2.py:1061-1069, layers/moe/mega_moe.py:163-193): on
        # SM10x always (the token budget was checked at start-up); on SM90 only for experts built by the SM90 FP8
        # builder (mega_moe_sm90.py:28-39 needs _mega_moe_sm90_fp8_weights), so the NVFP4 experts reach the fused MoE
        # path, whose apply() refuses them at the first MoE forward.
        if major == 10:
            return None
        return _fail("first_forward", "RuntimeError", T.render(T.NVFP4_MEGAMOE_NO_FALLBACK_23),
                     "sglang 0.5.23 sglang/srt/layers/quantization/modelopt_quant.py:3189-3194 (reached from "
                     "models/deepseek_v2.py:1061-1069 when layers/moe/mega_moe.py:163-169 is_mega_moe_experts_ready "
                     "is False on SM90: layers/moe/mega_moe_sm90.py:28-39)",
                     ("sglang/srt/layers/quantization/modelopt_quant.py", 3190, "apply", "raise RuntimeError(",
                      None, False))
    if is_lora:
        return None  # no MoeRunner: the LoRA path (not followed further here)
    if backend == "cutlass":
        return _fail("model_init", "NotImplementedError", T.render(T.NVFP4_CUTLASS_23),
                     "sglang 0.5.23 sglang/srt/layers/quantization/modelopt_quant.py:3144-3148",
                     ("sglang/srt/layers/quantization/modelopt_quant.py", 3145, "create_moe_runner",
                      "raise NotImplementedError(", None, False))
    if backend == "experimental_sgl_marlin":
        backend = "marlin"  # is_marlin() (layers/moe/utils.py:133-170); no LoRA: the stock marlin fused path
    failure = _runner_init_0523(backend, sm, a2a)
    if failure:
        return failure
    # apply() (modelopt_quant.py:3200-3369): branches for megamoe, marlin, trtllm (+routed), cutedsl, flashinfer_cutlass
    if backend not in ("marlin", "flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutedsl",
                       "flashinfer_cutlass"):
        return _fail("first_forward", "NotImplementedError",
                     T.render(T.NVFP4_NO_APPLY_BRANCH_23, backend=_enum(backend)),
                     "sglang 0.5.23 sglang/srt/layers/quantization/modelopt_quant.py:3366-3369",
                     ("sglang/srt/layers/quantization/modelopt_quant.py", 3366, "apply", "raise NotImplementedError(",
                      None, False))
    if backend in ("flashinfer_trtllm", "flashinfer_trtllm_routed"):
        return _trtllm_kernels_0523(sm)
    if backend == "flashinfer_cutedsl" and sm // 10 not in (9, 10):
        # CuteDslMoEWrapper's @supported_compute_capability([100, 103, 107]) only annotates (flashinfer 0.7.2
        # fused_moe/cute_dsl/fused_moe.py:663).  Its run() (:1097-1111, the flashinfer autotune dummy forward first)
        # sorts the tokens before any CuTe DSL GEMM is traced (_moe_core_impl :448-471 -> moe_utils.py:741
        # _get_moe_utils_module): the moe_utils JIT module is generated for majors [9, 10] only
        # (jit/moe_utils.py:86-88), so off SM9x/SM10x get_nvcc_flags_list raises.
        return _fail("first_forward", "RuntimeError", T.render(T.FI_NO_ARCH, majors=[9, 10]),
                     "flashinfer 0.7.2 flashinfer/jit/moe_utils.py:86-88 -> flashinfer/compilation_context.py:"
                     "161-164 (moe_sort of fused_moe/cute_dsl/fused_moe.py:460)",
                     ("flashinfer/compilation_context.py", 162, "get_nvcc_flags_list", "raise RuntimeError(",
                      None, False))
    return None


# MoE blocks without a fused-MoE fallback under megamoe (0.5.23 arg_groups/mega_moe_hook.py:51-64)
MEGA_MOE_NO_FALLBACK_ARCHS = frozenset({
    "DeepseekV4ForCausalLM", "InternS2PreviewForConditionalGeneration", "MellumForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "Qwen3VLMoeForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
})


def _mega_moe_token_budget_0523(args, architecture, quant, env, gpu_mem_mib):
    """validate_mega_moe_token_budget_for_model (arg_groups/mega_moe_hook.py:78-92, run by the resolution pipeline
    after the speculative hooks, arg_groups/pipeline.py:320-324): for a model without a fused-MoE fallback or with
    NVFP4 experts (mega_moe_needs_token_budget :66-75), SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK
    (environ.py:1470, default 8192) must cover the largest decode graph bucket and each rank's chunked prefill
    (:161-253).  The defaults come from the GPU's memory (arg_groups/memory_hook.py:87-170): chunked prefill 8192 on
    H100/H200-class memory, 16384 from 160 GiB up (B200), decode max bs 512 with tp >= 4."""
    if not (architecture in MEGA_MOE_NO_FALLBACK_ARCHS or quant in ("modelopt_fp4", "minimax_m3_nvfp4")):
        return None
    label = architecture
    src = "sglang 0.5.23 sglang/srt/arg_groups/mega_moe_hook.py"
    cap = int(env.get("SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK") or 8192)
    tp = int(args.get("tp_size") or 1)
    default_chunk, default_max_bs = server_args._capacity_defaults(gpu_mem_mib, tp, "0.5.23")
    chunk = args.get("chunked_prefill_size")
    chunk = default_chunk if chunk in (None, "") else int(chunk)
    decode = int(args.get("cuda_graph_max_bs") or default_max_bs)
    if args.get("max_running_requests"):
        decode = min(decode, int(args["max_running_requests"]))
    if args.get("speculative_algorithm"):
        decode *= int(args.get("speculative_num_draft_tokens") or 1)
    if cap < decode:
        return _fail("server_args", "ValueError",
                     T.render(T.MEGAMOE_DECODE_BUDGET_23, label=label, dec=decode, cap=cap), src + ":171-183",
                     ("sglang/srt/arg_groups/mega_moe_hook.py", 174, "validate_mega_moe_token_budget",
                      "raise ValueError(", None, False))
    if chunk <= 0:
        return _fail("server_args", "ValueError", T.render(T.MEGAMOE_CHUNKED_PREFILL_23, label=label),
                     src + ":191-197",
                     ("sglang/srt/arg_groups/mega_moe_hook.py", 192, "validate_mega_moe_token_budget",
                      "raise ValueError(", None, False))
    dp = int(args.get("dp_size") or 1)
    if args.get("enable_dp_attention") and dp > 1:  # attn_dp_enabled_of
        part, psize, align, local = "attn_dp_size", dp, max(tp // dp, 1), chunk // dp
    else:  # pure TP: global_num_tokens is ceil-aligned to the attention TP size
        part, psize, align, local = "none", 1, max(tp, 1), chunk
    required = (local + align - 1) // align * align
    if cap < required:
        return _fail("server_args", "ValueError",
                     T.render(T.MEGAMOE_PREFILL_BUDGET_23, label=label, chunk=chunk, part=part, psize=psize,
                              align=align, req=required, cap=cap), src + ":240-256",
                     ("sglang/srt/arg_groups/mega_moe_hook.py", 241, "validate_mega_moe_token_budget",
                      "raise ValueError(", None, False))
    return None


def _fp8_0523(args, sm, resolved, env):
    a2a = args.get("moe_a2a_backend") or "none"
    # Fp8MoEMethod.__init__ (fp8.py:1508-1517): cutlass passes on SM90 / SM100 / SM120
    if resolved == "cutlass" and (sm // 10) not in (9, 10, 12):
        return _fail("model_init", "AssertionError", "cutlass_fp8 MoE requires SM90, SM100, or SM120 GPUs",
                     "sglang 0.5.23 sglang/srt/layers/quantization/fp8.py:1513-1517")
    # create_moe_runner (fp8.py:2941-2999)
    backend = resolved
    if backend == "auto":
        backend = "triton"  # is_deepgemm_moe_runner_backend_enabled() needs a DeepEP-style a2a backend
    if backend in ("flashinfer_cutlass", "flashinfer_cutedsl"):
        backend = "triton"
    runner_backends = ("deep_gemm", "triton", "aiter", "flashinfer_trtllm", "experimental_sgl_trtllm",
                       "flashinfer_trtllm_routed", "hpc_ops", "flashinfer_megamoe")
    if backend in runner_backends:
        failure = _runner_init_0523(backend, sm, a2a)
        if failure:
            return failure
    # apply() (fp8.py:3087-3359)
    if backend == "cutlass":
        if sm // 10 not in (9, 10):
            # sglang-kernel 0.4.10 fp8_blockwise_scaled_grouped_mm dispatches sm90_ and sm100_ only
            return _fail("first_forward", "NotImplementedError", T.render(T.SGL_KERNEL_FP8_GROUPED_MM, sm=sm),
                         "sglang-kernel 0.4.10 sgl_kernel/sm100/common_ops.abi3.so "
                         "(csrc/moe/fp8_blockwise_moe_kernel.cu)")
        return None
    if backend not in runner_backends:
        # no runner was built (FusedMoEMethodBase.runner is None, layers/quantization/base_config.py:98)
        return _fail("first_forward", "AttributeError",
                     T.render(T.ATTRIBUTE_MISSING, type="NoneType", name="runner_backend"),
                     "sglang 0.5.23 sglang/srt/layers/quantization/fp8.py:3227",
                     ("sglang/srt/layers/quantization/fp8.py", 3227, "apply",
                      "if self.runner.runner_backend.is_flashinfer_megamoe():", None, False))
    if backend == "aiter":
        return _fail("first_forward", "NotImplementedError", T.render(T.FP8_APPLY_UNSUPPORTED_23,
                                                                      backend=_enum(backend)),
                     "sglang 0.5.23 sglang/srt/layers/quantization/fp8.py:3357-3359",
                     ("sglang/srt/layers/quantization/fp8.py", 3357, "apply", "raise NotImplementedError(",
                      None, False))
    if backend == "hpc_ops":
        # the ("none", "hpc_ops") fused func imports the HPC-Ops package, which the pinned stack does not install
        return _fail("first_forward", "ModuleNotFoundError", T.render(T.MODULE_MISSING, name="hpc"),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/hpc_ops.py:132",
                     ("sglang/srt/layers/moe/moe_runner/hpc_ops.py", 132, "fused_experts_none_to_hpc_ops",
                      "import hpc", None, False))
    if backend in ("flashinfer_trtllm", "flashinfer_trtllm_routed"):
        return _trtllm_kernels_0523(sm)
    return None


def _unquant_0523(args, sm, resolved, env):
    # UnquantizedFusedMoEMethod.create_moe_runner (unquant.py:1169-1194)
    if resolved in ("flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"):
        backend = "flashinfer_trtllm_routed" if resolved == "flashinfer_trtllm_routed" else "flashinfer_trtllm"
    elif resolved in ("flashinfer_cutlass", "deep_gemm", "triton_kernel"):
        backend = resolved
    else:
        backend = "triton"
    if resolved == "hpc_ops":
        # MoeRunner.__init__ refuses a layer that picked another runner under --moe-runner-backend hpc_ops
        return _fail("model_init", "ValueError", T.render(T.HPC_OPS_OTHER_RUNNER_23, runner=backend),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/runner.py:70-83",
                     ("sglang/srt/layers/moe/moe_runner/runner.py", 77, "__init__", "raise ValueError(", None, False))
    if backend == "triton_kernel":
        return _fail("first_forward", "AssertionError", T.render(T.TRITON_KERNEL_TOPK),
                     "sglang 0.5.23 sglang/srt/layers/moe/moe_runner/triton_kernels.py:173-175",
                     ("sglang/srt/layers/moe/moe_runner/triton_kernels.py", 173,
                      "pre_permute_standard_to_triton_kernels",
                      "assert TopKOutputChecker.format_is_triton_kernels(topk_output), (", None, False))
    if backend in ("flashinfer_trtllm", "flashinfer_trtllm_routed"):
        return _trtllm_kernels_0523(sm)
    return None
