"""Which MoE runner a simulated launch runs (where it dies: failure_model.py).

Written from the emulated versions' code (sglang 0.5.9 with flashinfer 0.6.3 and sgl-kernel 0.3.21;
sglang 0.5.23 with flashinfer 0.7.2), independently of the controller's knowledge base: nothing here
reads ``data/compat.yml`` or imports ``plugins/``.  Stdlib only.

Sources (python/sglang/srt/... at the release tag):

* 0.5.9 ``server_args.py`` L1289-1311: ``auto`` becomes ``flashinfer_trtllm`` only for the DeepSeek
  family under ``is_sm100_supported()`` (compute capability major 10) with fp8 / modelopt_fp8 /
  modelopt_fp4 and no ``--moe-a2a-backend``.  Everywhere else ``auto`` reaches the quantization method:
  ``layers/quantization/modelopt_quant.py`` L1692-1818 ``ModelOptNvFp4FusedMoEMethod.apply()`` has a
  flashinfer_trtllm and a flashinfer_cutlass branch and otherwise runs sgl-kernel ``cutlass_moe_fp4``;
  ``fp8.py`` L1341-1360 / ``unquant.py`` L321-329 run triton.
* 0.5.23 ``modelopt_quant.py`` ``create_moe_runner`` L3111-3149 turns NVFP4 ``auto`` into marlin on SM80-SM9x.
* 0.5.23 ``arg_groups/overrides.py`` L809-830 (DeepSeek family, SM100: ``auto`` -> flashinfer_trtllm for
  fp8 / modelopt_fp8 / modelopt_fp4 / modelopt_mixed and unquantized) and L1513-1522 (NVFP4 ``auto`` ->
  flashinfer_cutlass on SM110 / SM12x; ``is_sm120`` is compute capability major 12).
* ``--mem-fraction-static`` is not range-checked: 0.5.9
  ``model_executor/model_runner_kv_cache_mixin.py`` L143-149 and 0.5.23
  ``mem_cache/kv_cache_configurator.py`` L3007-3060 size the KV pool as free memory minus
  capacity x (1 - fraction), so a fraction above 1 sizes it beyond the free memory.
"""

from __future__ import annotations

DEEPSEEK_FAMILY = frozenset({
    "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
})
DEEPSEEK_FAMILY_0523 = DEEPSEEK_FAMILY | {
    "DeepseekV32ForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
    "Dots3NoteForCausalLM",
}
TRTLLM_FAMILY = ("flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm")


def _major(sm: int) -> int:
    return sm // 10


def _quant(args: dict):
    q = args.get("quantization")
    return None if q in (None, "", "none") else q


def _a2a(args: dict) -> str:
    return args.get("moe_a2a_backend") or "none"


def resolve_backend(version: str, args: dict, sm: int, architecture: str = "") -> str:
    """The ``--moe-runner-backend`` whose code runs the MoE layers of this launch (what ``auto`` resolves
    to; a choice whose NVFP4 / unquantized path falls through to another runner names that runner)."""
    requested = args.get("moe_runner_backend") or "auto"
    quant = _quant(args)
    if version == "0.5.9":
        if requested == "auto":
            if (_major(sm) == 10 and architecture in DEEPSEEK_FAMILY and _a2a(args) == "none"
                    and quant in ("fp8", "modelopt_fp8", "modelopt_fp4")):
                return "flashinfer_trtllm"
            return "cutlass" if quant == "modelopt_fp4" else "triton"
        if quant == "modelopt_fp4" and requested in ("triton", "deep_gemm", "flashinfer_cutedsl") \
                and not (requested == "flashinfer_cutedsl" and _a2a(args) != "none"):
            return "cutlass"  # apply() has no branch for them: sgl-kernel cutlass_moe_fp4
        if quant is None and requested in ("deep_gemm", "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass"):
            return "triton"  # UnquantizedFusedMoEMethod builds the triton runner
        return requested
    # 0.5.23
    if requested == "megamoe" or (requested == "auto" and _a2a(args) == "megamoe"):
        return _mega_moe_runner_0523(quant, sm)
    if requested == "auto":
        if (_major(sm) == 10 and architecture in DEEPSEEK_FAMILY_0523 and _a2a(args) == "none"
                and quant in ("fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed", None)):
            return "flashinfer_trtllm"
        if quant == "modelopt_fp4":
            if sm == 110 or _major(sm) == 12:
                return "flashinfer_cutlass"
            if 80 <= sm < 100:
                return "marlin"
            return "flashinfer_trtllm"
        return "triton"
    if requested == "experimental_sgl_marlin" and quant == "modelopt_fp4":
        return "marlin"  # is_marlin(); without LoRA the stock marlin fused path
    if quant is None and requested in ("flashinfer_mxfp4", "flashinfer_megamoe", "cutlass", "aiter", "marlin",
                                       "humming", "experimental_sgl_marlin", "intel_xpu"):
        return "triton"
    if quant is None and requested == "experimental_sgl_trtllm":
        return "flashinfer_trtllm"
    return requested


def _mega_moe_runner_0523(quant, sm: int) -> str:
    """What runs the MoE layers under ``--moe-a2a-backend megamoe`` (``megamoe`` is its runner alias,
    ``arg_groups/mega_moe_hook.py`` ``handle_moe_runner_backend_alias``): the DeepGEMM Mega MoE kernel where the
    experts were built into its layout, else every forward takes the fused MoE path with the ``auto`` runner.

    * NVFP4 (``modelopt_quant.py:2726-2728``) and MXFP4 experts are built on any GPU, Mega MoE runs them on SM10x
      (``layers/moe/mega_moe.py:163-169``); on SM90 NVFP4 experts fail (failure_model.py).
    * block-FP8 experts are built only on SM90 (``fp8.py:2266-2273``, ``mega_moe_sm90.py:97-149``), and run there
      when the installed DeepGEMM has ``fp8_mega_moe`` and ``mega_moe_pre_dispatch_sm90``
      (``mega_moe_sm90.py:28-39``; the pinned sgl-deep-gemm 0.2.3.post2 has both).  On SM10x Fp8MoEMethod's
      ``auto`` is triton: its DeepGEMM choice needs a DeepEP-class a2a backend (``fp8.py:1530-1542``, ``2962-2971``).
    * unquantized experts are never built; UnquantizedFusedMoEMethod's ``auto`` is triton (``unquant.py:1169-1194``).
    """
    if quant is None:
        return "triton"
    if quant == "fp8":
        return "megamoe" if _major(sm) == 9 else "triton"
    return "megamoe"


def server_args_backend(version: str, args: dict, sm: int, architecture: str = "") -> str:
    """``--moe-runner-backend`` after ServerArgs resolution (what ``server_args=...`` prints): ``auto`` is
    rewritten only on the branches cited in the module docstring, ``megamoe`` becomes ``auto`` (0.5.23
    ``arg_groups/mega_moe_hook.py`` ``handle_moe_runner_backend_alias``)."""
    requested = args.get("moe_runner_backend") or "auto"
    quant = _quant(args)
    if version == "0.5.9":
        if (requested == "auto" and _major(sm) == 10 and architecture in DEEPSEEK_FAMILY and _a2a(args) == "none"
                and quant in ("fp8", "modelopt_fp8", "modelopt_fp4")):
            return "flashinfer_trtllm"
        return requested
    if requested == "megamoe":
        return "auto"
    if requested == "auto":
        if (_major(sm) == 10 and architecture in DEEPSEEK_FAMILY_0523 and _a2a(args) == "none"
                and quant in ("fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed", None)):
            return "flashinfer_trtllm"
        if quant == "modelopt_fp4" and (sm == 110 or _major(sm) == 12):
            return "flashinfer_cutlass"
    return requested


def kv_pool_exceeds_free_memory(mem_fraction_static, max_total_tokens) -> bool:
    """``--mem-fraction-static`` above 1 sizes the KV pool beyond the free GPU memory: allocating it runs
    out of memory, unless ``--max-total-tokens`` caps the pool."""
    try:
        fraction = float(mem_fraction_static)
    except (TypeError, ValueError):
        return False
    return fraction > 1 and not max_total_tokens
