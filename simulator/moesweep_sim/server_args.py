"""The resolved ServerArgs of the simulated server: what ``server_args=`` logs and ``/server_info`` returns.

Fields and declared defaults come from ``data/sglang-<version>.json`` (bin/extract-sglang-data, from the wheel);
the command line overrides them; then the resolution steps below run, each following the real code:

0.5.9 (``ServerArgs.__post_init__``, https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/server_args.py):
  ``_handle_missing_default_values`` (tokenizer_path, served_model_name, device, random_seed, mm_process_config,
  mamba_scheduler_strategy, speculative_draft_model_quantization), ``_handle_gpu_memory_settings``
  (chunked_prefill_size, cuda_graph_max_bs, cuda_graph_bs, piecewise_cuda_graph_*, mem_fraction_static, with
  ``gpu_mem`` = the smallest ``memory.total`` in MiB, as ``get_nvgpu_memory_capacity`` reads it from nvidia-smi),
  the DeepSeek-DSA branch of ``_handle_model_specific_adjustments`` (GlmMoeDsaForCausalLM: attention_backend,
  page_size, kv_cache_dtype, nsa_*_backend, with their warnings) and ``_handle_moe_kernel_config``
  (flashinfer_trtllm -> disable_shared_experts_fusion).  The warnings of ``__post_init__`` are logged before
  ``configure_logger`` runs, so they reach stderr bare, through logging's last-resort handler.
0.5.23 (``resolve_once`` -> ``run_resolution_pipeline``, sglang/srt/arg_groups/): the same missing defaults,
  ``handle_gpu_memory_settings`` (memory_hook.py) with the ``cuda_graph_config`` record built by
  ``_parse_cuda_graph_config`` (cuda_graph_hook.py: --disable-cuda-graph, --cuda-graph-*-decode/prefill flags,
  then the --cuda-graph-config JSON on top), and ``_moe_runner_fusion_disable`` (overrides.py).  These
  messages are logged after ``configure_logger`` (``[time] msg``).

Everything else keeps its declared default or command-line value (simulator/README.md lists this gap).
"""

from __future__ import annotations

import ast
import copy
import json
import os
import random

from . import templates as T

HERE = os.path.dirname(os.path.abspath(__file__))


class _Repr:
    """A declared default that is not a Python literal: printed as the wheel's own repr."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return self.text


def load_fields(version: str) -> list:
    with open(os.path.join(HERE, "data", f"sglang-{version}.json"), encoding="utf-8") as f:
        return json.load(f)["server_args"]


def _value(rep):
    if rep is None:
        return None
    try:
        return ast.literal_eval(rep)
    except (ValueError, SyntaxError):
        return _Repr(rep)


# 0.5.23 CudaGraphConfig / PhaseConfig (sglang/srt/model_executor/cuda_graph_config.py): field order and
# defaults; decode defaults to backend "full", prefill to "breakable" on CUDA (default_prefill_backend)
PHASE_FIELDS = ("backend", "max_bs", "bs", "tc_compiler", "max_context_size", "full_prefill_max_req",
                "full_prefill_prefix_chunk_tokens", "max_seq_len")


def _phase(backend: str) -> dict:
    d = dict.fromkeys(PHASE_FIELDS)
    d["backend"] = backend
    d["tc_compiler"] = "eager"
    return d


def decode_batch_sizes(max_bs: int, padding_disabled: bool, spec: bool, append_max: bool) -> list[int]:
    """0.5.9 ServerArgs._generate_cuda_graph_batch_sizes / 0.5.23 generate_decode_cuda_graph_batch_sizes
    (cuda_graph_hook.py, which also appends max_bs when it is not in the list)."""
    if padding_disabled:
        bs = list(range(1, max_bs + 1))
    elif not spec:
        bs = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    else:
        bs = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
              + list(range(272, max_bs + 1, 16)))
    bs = [b for b in bs if b <= max_bs]
    if append_max and max_bs not in bs:
        bs.append(max_bs)
    return bs


def prefill_token_sizes(max_tokens: int) -> list[int]:
    """0.5.9 _generate_piecewise_cuda_graph_tokens / 0.5.23 generate_prefill_cuda_graph_batch_sizes."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def _capacity_defaults(gpu_mem: float | None, tp: int, version: str) -> tuple[int, int]:
    """(chunked_prefill_size, decode max bs) by GPU memory (MiB); the versions differ for 20-35 GB GPUs."""
    if gpu_mem is None:
        return 4096, 160
    if gpu_mem < 20 * 1024:
        return 2048, 8
    if gpu_mem < 35 * 1024:
        if version == "0.5.9":
            return 2048, (24 if tp < 4 else 80)
        return 4096, (48 if tp < 4 else 160)
    if gpu_mem < 60 * 1024:
        return 4096, (32 if tp < 4 else 160)
    if gpu_mem < 160 * 1024:  # H100/A100 80 GB and H20/H200: the same values
        return 8192, (256 if tp < 4 else 512)
    return 16384, 512


class ResolvedArgs:
    """ServerArgs after resolution.  ``notices``: (message, bare) in the order the real code logs them."""

    def __init__(self, version: str, cli: dict, *, gpu_mem_mib: float | None, sm: int, model_arch: str,
                 mla: bool):
        self.version = version
        self.fields = load_fields(version)
        self.values = {name: _value(rep) for name, rep in self.fields}
        for k, v in cli.items():
            if k in self.values:
                self.values[k] = copy.deepcopy(v)
        self.gpu_mem = gpu_mem_mib
        self.sm = sm
        self.model_arch = model_arch
        self.mla = mla
        self.notices: list[tuple[str, bool]] = []
        if version == "0.5.9":
            self._resolve_059()
        else:
            self._resolve_0523()

    def __getitem__(self, k):
        return self.values[k]

    def get(self, k, default=None):
        return self.values.get(k, default)

    # -------------------------------------------------------------- shared
    def _missing_defaults(self):
        v = self.values
        if v.get("tokenizer_path") is None:
            v["tokenizer_path"] = v["model_path"]
        if v.get("served_model_name") is None:
            v["served_model_name"] = v["model_path"]
        if v.get("device") is None:
            v["device"] = "cuda"
        if v.get("random_seed") is None:
            v["random_seed"] = random.randint(0, 1 << 30)
        if "mm_process_config" in v and v["mm_process_config"] is None:
            v["mm_process_config"] = {}
        if v.get("mamba_scheduler_strategy") == "auto":
            v["mamba_scheduler_strategy"] = "no_buffer"
        if "speculative_draft_model_quantization" in v:
            if v["speculative_draft_model_quantization"] is None:
                v["speculative_draft_model_quantization"] = v.get("quantization")
            elif v["speculative_draft_model_quantization"] == "unquant":
                v["speculative_draft_model_quantization"] = None

    def _reserved_mem_059(self, gpu_mem) -> float:
        v = self.values
        reserved = 512
        reserved += max(v["chunked_prefill_size"], 2048) * 1.5 if v["chunked_prefill_size"] > 0 \
            else max(v["max_prefill_tokens"], 2048) * 1.5
        reserved += v["cuda_graph_max_bs"] * 2
        reserved += v["tp_size"] * v["pp_size"] / 8 * 1024
        if v.get("enable_dp_attention"):
            reserved += v["cuda_graph_max_bs"] * v["dp_size"] * 3
            if v["cuda_graph_max_bs"] > 300:
                reserved += v["cuda_graph_max_bs"] * v["dp_size"] * 1.5
        if v.get("enable_piecewise_cuda_graph"):
            reserved += len(v["piecewise_cuda_graph_tokens"]) * 8
        if gpu_mem is not None and gpu_mem > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        if v.get("speculative_algorithm") is not None:
            reserved += 6 * 1024 if v["speculative_algorithm"] == "STANDALONE" else \
                (0 if v["speculative_algorithm"] == "NGRAM" else 2 * 1024)
        return reserved

    # -------------------------------------------------------------- 0.5.9
    def _resolve_059(self):
        v = self.values
        self._missing_defaults()
        gpu_mem = self.gpu_mem
        chunk, max_bs = _capacity_defaults(gpu_mem, v["tp_size"], self.version)
        if v["chunked_prefill_size"] is None:
            v["chunked_prefill_size"] = chunk
        if v["cuda_graph_max_bs"] is None:
            v["cuda_graph_max_bs"] = max_bs
        if v["cuda_graph_bs"] is None:
            v["cuda_graph_bs"] = decode_batch_sizes(v["cuda_graph_max_bs"], v["disable_cuda_graph_padding"],
                                                    v["speculative_algorithm"] is not None, append_max=False)
        else:
            v["cuda_graph_max_bs"] = max(v["cuda_graph_bs"])
        if v["piecewise_cuda_graph_max_tokens"] is None:
            v["piecewise_cuda_graph_max_tokens"] = 2048 if self.mla else v["chunked_prefill_size"]
        if v["piecewise_cuda_graph_tokens"] is None:
            v["piecewise_cuda_graph_tokens"] = prefill_token_sizes(v["piecewise_cuda_graph_max_tokens"])
        if v["mem_fraction_static"] is None:
            reserved = self._reserved_mem_059(gpu_mem)
            v["mem_fraction_static"] = round((gpu_mem - reserved) / gpu_mem, 3) if gpu_mem is not None else 0.88
        if self.model_arch == "GlmMoeDsaForCausalLM":
            self._dsa_059()
        if v["moe_runner_backend"] == "flashinfer_trtllm":
            v["disable_shared_experts_fusion"] = True
            self.notices.append((T.render(T.TRTLLM_SHARED_EXPERTS_9), True))

    def _dsa_059(self):
        """_handle_model_specific_adjustments, the is_deepseek_nsa branch on a CUDA GPU."""
        v = self.values
        major = self.sm // 10
        if major in (10, 11, 12):  # is_blackwell_supported
            self.notices.append((T.render(T.DSA_FORCE_MLA_9), True))
        if v.get("attention_backend") is None and v.get("prefill_attention_backend") is None \
                and v.get("decode_attention_backend") is None:
            v["attention_backend"] = "nsa"  # logger.info: not shown before logging is configured
        if not v.get("enable_nsa_prefill_context_parallel") and v["dp_size"] < v["tp_size"]:
            self.notices.append((T.render(T.DSA_TP_MODE_9, dp=v["dp_size"], tp=v["tp_size"]), True))
        v["page_size"] = 64
        self.notices.append((T.render(T.DSA_PAGE_SIZE_9), True))
        user_prefill = v.get("nsa_prefill_backend") is not None
        user_decode = v.get("nsa_decode_backend") is not None
        if (user_prefill or user_decode) and v["kv_cache_dtype"] == "auto":
            self.notices.append((T.render(T.DSA_KV_DTYPE_HINT_9), True))
        if v["kv_cache_dtype"] == "auto":
            v["kv_cache_dtype"] = "fp8_e4m3" if major >= 10 else "bfloat16"
            self.notices.append((T.render(T.DSA_KV_DTYPE_9, dtype=v["kv_cache_dtype"], major=major), True))
        if v["kv_cache_dtype"] == "bf16":
            v["kv_cache_dtype"] = "bfloat16"
        if v["kv_cache_dtype"] == "fp8_e4m3":
            if not user_prefill:
                v["nsa_prefill_backend"] = "flashmla_auto"
            if not user_decode:
                v["nsa_decode_backend"] = "flashmla_kv"
        elif major >= 10:
            if not user_prefill:
                v["nsa_prefill_backend"] = "flashmla_sparse"
            if not user_decode:
                v["nsa_decode_backend"] = "trtllm"
        else:
            if not user_prefill:
                v["nsa_prefill_backend"] = "flashmla_sparse"
            if not user_decode:
                v["nsa_decode_backend"] = "fa3"
        self.notices.append((T.render(T.NSA_BACKENDS_9, dtype=v["kv_cache_dtype"], prefill=v["nsa_prefill_backend"],
                                      decode=v["nsa_decode_backend"]), True))

    # -------------------------------------------------------------- 0.5.23
    def cuda_graph_config_0523(self) -> dict:
        """_parse_cuda_graph_config (cuda_graph_hook.py): defaults, legacy flags, per-phase flags, JSON."""
        v = self.values
        cfg = {"decode": _phase("full"), "prefill": _phase("breakable")}
        if v.get("disable_cuda_graph"):
            cfg["decode"]["backend"] = cfg["prefill"]["backend"] = "disabled"
        if v.get("disable_prefill_cuda_graph"):
            cfg["prefill"]["backend"] = "disabled"
        if v.get("disable_decode_cuda_graph"):
            cfg["decode"]["backend"] = "disabled"
        for flag, phase, key in (("cuda_graph_backend_decode", "decode", "backend"),
                                 ("cuda_graph_backend_prefill", "prefill", "backend"),
                                 ("cuda_graph_max_bs_decode", "decode", "max_bs"),
                                 ("cuda_graph_max_bs_prefill", "prefill", "max_bs"),
                                 ("cuda_graph_max_seq_len_prefill", "prefill", "max_seq_len"),
                                 ("cuda_graph_bs_decode", "decode", "bs"),
                                 ("cuda_graph_bs_prefill", "prefill", "bs"),
                                 ("cuda_graph_prefill_max_context", "prefill", "max_context_size")):
            if v.get(flag) is not None:
                cfg[phase][key] = v[flag]
        raw = v.get("cuda_graph_config")
        if isinstance(raw, dict):
            for phase, settings in raw.items():
                if isinstance(settings, dict) and phase in cfg:
                    cfg[phase].update(settings)
        return cfg

    def _resolve_0523(self):
        v = self.values
        self._missing_defaults()
        # handle_deprecated_args (serving_hook.py:284-302): the old switch becomes the auto fusion backend
        if v.get("enable_flashinfer_allreduce_fusion") and v.get("flashinfer_allreduce_fusion_backend") is None:
            self.notices.append((T.render(T.ALLREDUCE_FUSION_DEPRECATED_23), False))
            v["flashinfer_allreduce_fusion_backend"] = "auto"
        v["enable_flashinfer_allreduce_fusion"] = False
        cfg = self.cuda_graph_config_0523()
        dec, pre = cfg["decode"], cfg["prefill"]
        gpu_mem = self.gpu_mem
        max_bs_is_default = dec["max_bs"] is None
        chunk, max_bs = _capacity_defaults(gpu_mem, v["tp_size"], self.version)
        if v["chunked_prefill_size"] is None:
            v["chunked_prefill_size"] = chunk
        if dec["max_bs"] is None:
            dec["max_bs"] = max_bs
        mrr = v.get("max_running_requests")
        if max_bs_is_default and mrr is not None and dec["max_bs"] > mrr:
            dec["max_bs"] = mrr
        if dec["bs"] is None:
            dec["bs"] = decode_batch_sizes(dec["max_bs"], v["disable_cuda_graph_padding"],
                                           v.get("speculative_algorithm") is not None, append_max=True)
        else:
            dec["max_bs"] = max(dec["bs"])
        if pre["max_bs"] is None:
            pre["max_bs"] = v["chunked_prefill_size"] if not self.mla else min(8192, v["chunked_prefill_size"])
            if v.get("max_total_tokens") is not None:
                pre["max_bs"] = min(pre["max_bs"], v["max_total_tokens"])
            if "llama-2" in str(v["model_path"]).lower():
                pre["max_bs"] = min(pre["max_bs"], 4096)
        if pre["bs"] is None:
            pre["bs"] = prefill_token_sizes(pre["max_bs"])
        v["cuda_graph_config"] = cfg
        if v["mem_fraction_static"] is None:
            activation = max(v["chunked_prefill_size"], 2048) if v["chunked_prefill_size"] > 0 \
                else max(v["max_prefill_tokens"], 2048)
            reserved = 512 + activation * 1.5 + v["tp_size"] * v["pp_size"] / 8 * 1024
            if dec["backend"] != "disabled":  # reserve_for_graph_mb
                reserved += dec["max_bs"] * 2
            if pre["backend"] != "disabled":
                reserved += 1.5 * 1024 if self.mla else len(pre["bs"]) * 8
            if gpu_mem is not None and gpu_mem > 60 * 1024:
                reserved = max(reserved, 10 * 1024)
            v["mem_fraction_static"] = round((gpu_mem - reserved) / gpu_mem, 3) if gpu_mem is not None else 0.95
        if self.model_arch == "GlmMoeDsaForCausalLM":
            self._dsa_0523()
        # handle_moe_kernel_config -> _moe_runner_backend_quant_constraints (overrides.py:1513-1522)
        if v.get("moe_runner_backend") == "auto" and v.get("quantization") == "modelopt_fp4" \
                and (self.sm == 110 or self.sm // 10 == 12):
            v["moe_runner_backend"] = "flashinfer_cutlass"
            self.notices.append((T.render(T.NVFP4_AUTO_FLASHINFER_CUTLASS_23), False))
        runner = v.get("moe_runner_backend")
        notice = {"flashinfer_cutedsl": T.CUTEDSL_SHARED_EXPERTS_23, "flashinfer_trtllm": T.TRTLLM_SHARED_EXPERTS_23,
                  "experimental_sgl_trtllm": T.TRTLLM_SHARED_EXPERTS_23}.get(runner)
        if notice is not None:
            v["disable_shared_experts_fusion"] = True
            self.notices.append((T.render(notice), False))

    def _dsa_0523(self):
        """GLM-5's DSA resolution on a CUDA GPU: _deepseek_family_overrides (arg_groups/model_overrides/
        deepseek_v2.py:99-170: the dsa attention backend when none is given, page size 64 x index_kpool, which is 1
        for GLM-5), then handle_model_specific_adjustments (arg_groups/model_hook.py:280-344: the dense-attention
        threshold from the model's index_topk, 2048 in GLM-5's config.json; the TP-mode warning) and its
        _dsa_kv_cache_dtype_default / _dsa_split_backend_resolution passes (arg_groups/overrides.py:490-740:
        KV cache auto -> fp8_e4m3 on SM >= 10, else bfloat16; on SM12x GLM with an FP8 KV cache, the
        flashinfer_sparse_mla prefill and decode backends)."""
        v = self.values
        major = self.sm // 10
        if v.get("attention_backend") is None and v.get("prefill_attention_backend") is None \
                and v.get("decode_attention_backend") is None:
            v["attention_backend"] = "dsa"
            self.notices.append((T.render(T.DSA_ATTN_BACKEND_23), False))
        v["page_size"] = 64
        self.notices.append((T.render(T.DSA_PAGE_SIZE_23, page=64), False))
        self.notices.append((T.render(T.DSA_DENSE_THRESHOLD_23, topk=2048), False))
        attn_dp = int(v.get("dp_size") or 1) if v.get("enable_dp_attention") else 1
        attn_tp = int(v["tp_size"]) // attn_dp
        if attn_tp > 1:
            self.notices.append((T.render(T.DSA_TP_MODE_23, dp=attn_dp, tp=v["tp_size"], atp=attn_tp), False))
        user_prefill = v.get("dsa_prefill_backend") is not None
        user_decode = v.get("dsa_decode_backend") is not None
        if (user_prefill or user_decode) and v["kv_cache_dtype"] == "auto":
            self.notices.append((T.render(T.DSA_KV_DTYPE_HINT_23), False))
        if v["kv_cache_dtype"] == "auto":
            v["kv_cache_dtype"] = "fp8_e4m3" if major >= 10 else "bfloat16"
            self.notices.append((T.render(T.DSA_KV_DTYPE_23, dtype=v["kv_cache_dtype"], major=major), False))
        if v["kv_cache_dtype"] == "bf16":
            v["kv_cache_dtype"] = "bfloat16"
        kv = v["kv_cache_dtype"]
        if major == 12 and kv == "fp8_e4m3":
            backend = "flashinfer_sparse_mla"
            v["dsa_prefill_backend"] = v["dsa_prefill_backend"] if user_prefill else backend
            v["dsa_decode_backend"] = v["dsa_decode_backend"] if user_decode else backend
            self.notices.append((T.render(T.DSA_BACKENDS_GLM_SM12_23, backend=backend), False))
            return
        if kv == "fp8_e4m3":
            default = "trtllm" if major >= 10 else "flashmla_kv"
            prefill, decode = default, default
        else:
            prefill, decode = "flashmla_sparse", "trtllm" if major >= 10 else "fa3"
        if not user_prefill:
            v["dsa_prefill_backend"] = prefill
        if not user_decode:
            v["dsa_decode_backend"] = decode
        self.notices.append((T.render(T.DSA_BACKENDS_23, dtype=kv, prefill=v["dsa_prefill_backend"],
                                      decode=v["dsa_decode_backend"]), False))

    # -------------------------------------------------------------- output
    def decode_capture_bs(self) -> list[int] | None:
        """The decode batch sizes to capture, before the runner clamps them to the request pool; None when
        decode CUDA graphs are off."""
        v = self.values
        if self.version == "0.5.9":
            return None if v["disable_cuda_graph"] else list(v["cuda_graph_bs"])
        dec = v["cuda_graph_config"]["decode"]
        return None if dec["backend"] == "disabled" else list(dec["bs"])

    def as_dict(self) -> dict:
        return dict(self.values)

    def log_repr(self) -> str:
        """0.5.9: the dataclass repr, ``ServerArgs(a=1, ...)``; 0.5.23: ``resolved_dict()``, a plain dict
        (engine.py ``_server_args_for_logging``) whose ``enable_dp_attention`` says whether attention DP is on."""
        if self.version == "0.5.9":
            return "ServerArgs(" + ", ".join(f"{n}={self.values[n]!r}" for n, _ in self.fields) + ")"
        d = {n: self.values[n] for n, _ in self.fields}
        d["enable_dp_attention"] = bool(d.get("enable_dp_attention")) and d.get("dp_size", 1) > 1
        return repr(d)
