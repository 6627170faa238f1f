"""Every line the simulated SGLang server can print, in ONE place, each with its source.

Rules (see simulator/README.md):

* A template is a ``Tpl``: ``origin`` names where the real text lives ("sglang", "uvicorn",
  "flashinfer", "torch" or "python"), ``source`` the file inside that package (wheel path
  convention ``sglang/...``), ``versions`` the emulated sglang versions that print it, and
  ``parts`` the format strings.  Each part corresponds to ONE string literal / f-string of
  the real source (adjacent literals joined, as the compiler does); ``{name}`` placeholders
  stand for the real f-string's expressions.  ``tests/simulator/test_log_templates.py`` checks
  every literal fragment of every part against the real wheel.
* Traceback frames are (file, line, function, code, carets, decorated) tuples generated from
  the real wheels (line numbers and code lines are those of the wheel of the emulated
  version; flashinfer frames are from flashinfer_python 0.6.3, which sglang 0.5.9 pins).
  The test re-reads each frame's line in the wheel.
* Nothing here is copied code: these are log/error message strings and traceback
  coordinates, i.e. observable output of the real programs.
"""

from __future__ import annotations

import collections

Tpl = collections.namedtuple("Tpl", "origin source versions parts")

V9 = ("0.5.9",)
V23 = ("0.5.23",)
ALL = V9 + V23


def render(tpl: Tpl, **kw) -> str:
    return "".join(p.format(**kw) for p in tpl.parts)


# ---------------------------------------------------------------- main process, startup
SERVER_ARGS_9 = Tpl("sglang", "sglang/srt/entrypoints/engine.py", V9, ("server_args={args}",))
SERVER_ARGS_23 = Tpl("sglang", "sglang/srt/entrypoints/engine.py", V23, ("server_args={args}",))

# ---------------------------------------------------------------- scheduler (per rank)
INIT_DIST_BEGIN_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                        ("Init torch distributed begin.",))
INIT_DIST_END_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                      ("Init torch distributed ends. elapsed={t:.2f} s, mem usage={m:.2f} GB",))
INIT_PARALLEL_BEGIN_23 = Tpl("sglang", "sglang/srt/distributed/bootstrap.py", V23, ("Init parallel begin.",))
INIT_PARALLEL_END_23 = Tpl("sglang", "sglang/srt/distributed/bootstrap.py", V23,
                           ("Init parallel ends. elapsed={t:.2f} s",))
MEM_BASELINE_23 = Tpl("sglang", "sglang/srt/distributed/bootstrap.py", V23,
                      ("Memory baseline taken. mem usage={m:.2f} GB",))
LOAD_BEGIN = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", ALL,
                 ("Load weight begin. avail mem={avail:.2f} GB",))
LOAD_END_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                 ("Load weight end. elapsed={t:.2f} s, type={cls}, dtype={dtype}, "
                  "avail mem={avail:.2f} GB, mem usage={usage:.2f} GB.",))
LOAD_END_23 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V23,
                  ("Load weight end. elapsed={t:.2f} s, type={cls}, {quant}"
                   "avail mem={avail:.2f} GB, mem usage={usage:.2f} GB.",))
KV_ALLOC_KV_9 = Tpl("sglang", "sglang/srt/mem_cache/memory_pool.py", V9,
                    ("KV Cache is allocated. #tokens: {n}, KV size: {kv:.2f} GB",))
KV_ALLOC_KV_23 = Tpl("sglang", "sglang/srt/mem_cache/memory_pool.py", V23,
                     ("{cache_name} {state}. dtype: {dtype}, #tokens: {n}, KV size: {kv:.2f} GB",))
# a pool whose get_kv_size_bytes() returns (K, V): MHATokenToKVPool, i.e. non-MLA models
KV_ALLOC_KV_SPLIT_9 = Tpl("sglang", "sglang/srt/mem_cache/memory_pool.py", V9,
                          ("KV Cache is allocated. #tokens: {n}, K size: {k:.2f} GB, V size: {v:.2f} GB",))
KV_ALLOC_KV_SPLIT_23 = Tpl("sglang", "sglang/srt/mem_cache/memory_pool.py", V23,
                           ("{cache_name} {state}. dtype: {dtype}, #tokens: {n}, K size: {k:.2f} GB, "
                            "V size: {v:.2f} GB",))
MEM_POOL_END_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner_kv_cache_mixin.py", V9,
                     ("Memory pool end. avail mem={avail:.2f} GB",))
MEM_POOL_END_23 = Tpl("sglang", "sglang/srt/mem_cache/kv_cache_configurator.py", V23,
                      ("Memory pool end. avail mem={avail:.2f} GB",))
AUTOTUNE_BEGIN_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                       ("Running FlashInfer autotune...",))
AUTOTUNE_END_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                     ("FlashInfer autotune completed.",))
AUTOTUNE_BEGIN_23 = Tpl("sglang", "sglang/srt/model_executor/runner/flashinfer_autotune.py", V23,
                        ("Running FlashInfer autotune with cache: {cache}",))  # logger.info("...%s", path)
AUTOTUNE_END_23 = Tpl("sglang", "sglang/srt/model_executor/runner/flashinfer_autotune.py", V23,
                      ("FlashInfer autotune completed.",))
CAPTURE_BEGIN_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                      ("Capture {graph} begin. This can take up to several minutes. avail mem={avail:.2f} GB",))
CAPTURE_END_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9,
                    ("Capture {graph} end. Time elapsed: {t:.2f} s. ",
                     "mem usage={usage:.2f} GB. avail mem={avail:.2f} GB."))
CAPTURE_BS_9 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_runner.py", V9,
                   ("Capture cuda graph bs {bs}",))  # log_info_on_rank0: TP0 only
# TP0's tqdm bar over reversed(capture_bs), with this description (both versions)
CAPTURE_TQDM_DESC_9 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_runner.py", V9,
                          ("Capturing batches (bs={bs} avail_mem={avail:.2f} GB)",))
CAPTURE_TQDM_DESC_23 = Tpl("sglang", "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py", V23,
                           ("Capturing batches (bs={bs} avail_mem={avail:.2f} GB)",))
# tqdm 4.70.1 std.py format_meter: l_bar '{desc}: {percentage:3.0f}%|' and r_bar
TQDM_R_BAR = Tpl("tqdm", "tqdm/std.py", ALL,
                 ("| {n_fmt}/{total_fmt} [{elapsed_str}<{remaining_str}, {rate_fmt}{postfix}]",))
CAPTURE_BEGIN_23 = Tpl("sglang", "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", V23,
                       ("Capture {name} {graph} begin. backend={backend}, num_tokens_per_req={k}, "
                        "avail mem={avail:.2f} GB",))
CAPTURE_END_23 = Tpl("sglang", "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py", V23,
                     ("Capture {name} {graph} end. bs={bs}, elapsed={t:.2f} s, "
                      "mem usage={usage:.2f} GB, avail mem={avail:.2f} GB.",))
MAX_TOTAL_9 = Tpl("sglang", "sglang/srt/managers/scheduler.py", V9,
                  ("max_total_num_tokens={n}, chunked_prefill_size={c}, max_prefill_tokens={p}, "
                   "max_running_requests={r}, context_len={L}, {label}={avail:.2f} GB",))
MAX_TOTAL_23 = Tpl("sglang", "sglang/srt/managers/scheduler.py", V23,
                   ("max_total_num_tokens={n}, chunked_prefill_size={c}, max_prefill_tokens={p}, "
                    "max_running_requests={r}, context_len={L}, {label}={avail:.2f} GB",))
TRTLLM_SHARED_EXPERTS_9 = Tpl("sglang", "sglang/srt/server_args.py", V9,
                              ("FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is "
                               "automatically set.",))
# 0.5.23 resolution hooks (logged after configure_logger)
TRTLLM_SHARED_EXPERTS_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23,
                               ("FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is "
                                "automatically set.",))
CUTEDSL_SHARED_EXPERTS_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23,
                                ("FlashInfer CuteDSL MoE is enabled. --disable-shared-experts-fusion is "
                                 "automatically set.",))
# ServerArgs._handle_model_specific_adjustments, DeepSeek DSA branch (GlmMoeDsaForCausalLM), 0.5.9
DSA_FORCE_MLA_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "Force NSA prefill to use MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM on Blackwell.",))
DSA_TP_MODE_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "DSA with TP mode is active, dp_size={dp}, tp_size={tp}, attn_tp_size={tp}, attention weights will be "
    "sharded across {tp} ranks.",))
DSA_PAGE_SIZE_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, ("Setting page size to 64 for DeepSeek DSA.",))
DSA_KV_DTYPE_HINT_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "When specifying --nsa-prefill-backend or --nsa-decode-backend, you should also explicitly set "
    "--kv-cache-dtype (e.g., 'fp8_e4m3' or 'bfloat16'). DeepSeek V3.2 defaults to FP8 KV cache which may not "
    "be compatible with all backends.",))
# 0.5.23 DSA resolution (GlmMoeDsaForCausalLM on a CUDA GPU): _deepseek_family_overrides, then
# handle_model_specific_adjustments and its _dsa_kv_cache_dtype_default / _dsa_split_backend_resolution passes
DSA_ATTN_BACKEND_23 = Tpl("sglang", "sglang/srt/arg_groups/model_overrides/deepseek_v2.py", V23,
                          ("Use dsa attention backend for DeepSeek with DSA.",))
DSA_PAGE_SIZE_23 = Tpl("sglang", "sglang/srt/arg_groups/model_overrides/deepseek_v2.py", V23,
                       ("Setting page size to {page} for DeepSeek DSA.",))
DSA_DENSE_THRESHOLD_23 = Tpl("sglang", "sglang/srt/arg_groups/model_hook.py", V23, (
    "Set dense attention kv len threshold to model index_topk={topk} for DeepSeek with DSA.",))
DSA_TP_MODE_23 = Tpl("sglang", "sglang/srt/arg_groups/model_hook.py", V23, (
    "DSA with TP mode is active, attn_dp_size={dp}, tp_size={tp}, attn_tp_size={atp}, attention weights will be "
    "sharded across {atp} ranks.",))
DSA_KV_DTYPE_HINT_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23, (
    "When specifying --dsa-prefill-backend or --dsa-decode-backend, you should also explicitly set "
    "--kv-cache-dtype (e.g., 'fp8_e4m3' or 'bfloat16'). DeepSeek V3.2 defaults to FP8 KV cache which may not "
    "be compatible with all backends.",))
DSA_KV_DTYPE_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23,
                      ("Setting KV cache dtype to {dtype} for DeepSeek DSA on SM{major} device.",))
DSA_BACKENDS_GLM_SM12_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23, (
    "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill={backend}, decode={backend}.",))
DSA_BACKENDS_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23,
                      ("Set DSA backends for {dtype} KV Cache: prefill={prefill}, decode={decode}.",))
ALLREDUCE_FUSION_DEPRECATED_23 = Tpl("sglang", "sglang/srt/arg_groups/serving_hook.py", V23, (
    "--enable-flashinfer-allreduce-fusion is deprecated. Please use --flashinfer-allreduce-fusion-backend=auto "
    "instead.",))
NVFP4_AUTO_FLASHINFER_CUTLASS_23 = Tpl("sglang", "sglang/srt/arg_groups/overrides.py", V23, (
    "Use flashinfer_cutlass as MoE runner backend on SM110/SM120 for modelopt_fp4 (trtllm-gen MoE kernels are "
    "SM100-only)",))
DSA_KV_DTYPE_9 = Tpl("sglang", "sglang/srt/server_args.py", V9,
                     ("Setting KV cache dtype to {dtype} for DeepSeek DSA on SM{major} device.",))
NSA_BACKENDS_9 = Tpl("sglang", "sglang/srt/server_args.py", V9,
                     ("Set NSA backends for {dtype} KV Cache: prefill={prefill}, decode={decode}.",))

# ---------------------------------------------------------------- serving
PREFILL_9 = Tpl("sglang", "sglang/srt/managers/scheduler_metrics_mixin.py", V9, (
    "Prefill batch{it}, #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, {usage_msg}"
    "#running-req: {running}, #queue-req: {queue}, ",
    "token usage: {usage:.2f}, ",
    "input throughput (token/s): {thr:.2f}, ",
    "{graph}: {cg}",
))
DECODE_9 = Tpl("sglang", "sglang/srt/managers/scheduler_metrics_mixin.py", V9, (
    "Decode batch{it}, #running-req: {running}, {usage_msg}",
    "#token: {tokens}, token usage: {usage:.2f}, ",
    "{graph}: {cg}, gen throughput (token/s): {thr:.2f}, #queue-req: {queue}",
))
PREFILL_23 = Tpl("sglang", "sglang/srt/managers/scheduler_components/metrics_reporter.py", V23, (
    "Prefill batch{it}, #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, ",
))
DECODE_23 = Tpl("sglang", "sglang/srt/managers/scheduler_components/metrics_reporter.py", V23, (
    "Decode batch{it}, #running-req: {running}, {usage_msg}",
))

# ---------------------------------------------------------------- http server / tokenizer manager
READY = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL,
            ("The server is fired up and ready to roll!",))
GET_MODEL_INFO_DEPRECATED = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL, (
    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
    "Please use '/model_info' instead.",))
GET_SERVER_INFO_DEPRECATED = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL, (
    "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
    "Please use '/server_info' instead.",))
HEALTH_CHECK_FAILED = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL, (
    "Health check failed. Server couldn't get a response from detokenizer for last {timeout} seconds. "
    "tic start time: {tic}. last_heartbeat time: {last}",))
SIGTERM_UNHEALTHY = Tpl("sglang", "sglang/srt/managers/tokenizer_manager.py", ALL,
                        ("Signal SIGTERM received while health check failed. Force exiting.",))
HEALTH_DURING_SHUTDOWN = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL,
                             ("Health check request received during shutdown. Returning 503.",))
WARMUP_FAILED = Tpl("sglang", "sglang/srt/entrypoints/http_server.py", ALL,
                    ("Initialization failed. warmup error: {tb}",))
SIGTERM = Tpl("sglang", "sglang/srt/managers/tokenizer_manager.py", ALL,
              ("SIGTERM received. signum={signum} frame={frame}. Draining requests and shutting down...",))
GRACEFUL = Tpl("sglang", "sglang/srt/managers/tokenizer_manager.py", ALL, (
    "Gracefully exiting... Remaining number of requests {n}. Remaining requests remaining_rids={rids}.",))
SIGQUIT_RUNNING = Tpl("sglang", "sglang/srt/managers/tokenizer_manager.py", ALL,
                      ("SIGQUIT received. signum={signum}, frame={frame}. It usually means one child failed.",))
SIGQUIT_LAUNCH = Tpl("sglang", "sglang/srt/entrypoints/engine.py", ALL,
                     ("Received sigquit from a child process. It usually means the child failed.",))
# nodes >= 1 of a multi-node server (launch_dummy_health_check_server; 0.5.23 engine.py SIGTERM handler)
DUMMY_HEALTH_STARTED = Tpl("sglang", "sglang/srt/utils/common.py", ALL,
                           ("Dummy health check server started in background thread at {addr}",))
FOLLOWER_SIGTERM_23 = Tpl("sglang", "sglang/srt/entrypoints/engine.py", V23, (
    "SIGTERM received on node_rank {rank}; waiting for the rank-0 ShutdownReq broadcast to stop the schedulers.",))
SCHEDULER_EXCEPTION = Tpl("sglang", "sglang/srt/managers/scheduler.py", ALL,
                          ("Scheduler hit an exception: {tb}",))

# ---------------------------------------------------------------- the scheduler's forward watchdog (watchdog.py)
# WatchdogRaw._watchdog_once, in this order per rank: the debug info (when dump_info returns text), the py-spy dump of
# its own process, the timeout line, an empty line on stderr and on stdout
WATCHDOG_DEBUG_INFO = Tpl("sglang", "sglang/srt/utils/watchdog.py", ALL, ("{name} debug info:\n{info}",))
WATCHDOG_TIMEOUT = Tpl("sglang", "sglang/srt/utils/watchdog.py", ALL,
                       ("{name} watchdog timeout (self.watchdog_timeout={timeout!r}, self.soft={soft!r})",))
# 0.5.9 create_scheduler_watchdog.dump_info (empty while initializing or with SGLANG_DISABLE_REQUEST_LOGGING) and
# _check_radix_cache_memory's token_msg
WATCHDOG_BATCH_9 = Tpl("sglang", "sglang/srt/managers/scheduler_runtime_checker_mixin.py", V9, (
    "scheduler.cur_batch.batch_size()={n}\nscheduler.cur_batch.reqs={reqs}\n{tokens}",))
WATCHDOG_TOKENS_9 = Tpl("sglang", "sglang/srt/managers/scheduler_runtime_checker_mixin.py", V9, (
    "self.max_total_num_tokens={total}, available_size={available}, evictable_size={evictable}, "
    "protected_size={protected}\n",))
# Req.__repr__; 0.5.9's SamplingParams is a plain class: object.__repr__
REQ_REPR = Tpl("sglang", "sglang/srt/managers/schedule_batch.py", ALL, (
    "Req(rid={rid}, input_ids={input_ids}, output_ids={output_ids}, self.grammar={grammar}, "
    "self.sampling_params={sampling_params})",))
# CPython Objects/typeobject.c object_repr: "<%U.%U object at %p>"
OBJECT_REPR = Tpl("python", "Objects/typeobject.c", ALL, ("<{cls} object at {addr}>",))
# utils/common.py pyspy_dump_schedulers (0.5.9): `py-spy dump --native --pid PID` through /bin/sh
PYSPY_DUMP_9 = Tpl("sglang", "sglang/srt/utils/common.py", V9, ("Pyspy dump for PID {pid}:\n{out}",))
PYSPY_FAILED_9 = Tpl("sglang", "sglang/srt/utils/common.py", V9, ("Pyspy failed to dump PID {pid}. Error: {err}",))
# 0.5.23 utils/cudacore_pyspy_dump_utils.py: with --native, then without
PYSPY_DUMP_23 = Tpl("sglang", "sglang/srt/utils/cudacore_pyspy_dump_utils.py", V23,
                    ("Pyspy dump for PID {pid} ({cmd}):\n{out}",))
PYSPY_FAILED_23 = Tpl("sglang", "sglang/srt/utils/cudacore_pyspy_dump_utils.py", V23,
                      ("Pyspy failed ({cmd}). Error: {err}",))
PYSPY_ALL_FAILED_23 = Tpl("sglang", "sglang/srt/utils/cudacore_pyspy_dump_utils.py", V23,
                          ("All pyspy dump attempts failed for PID {pid}.",))

# ---------------------------------------------------------------- errors raised (exception messages)
NOT_ENOUGH_MEMORY_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner_kv_cache_mixin.py", V9, (
    "Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static={mfs}",))
NOT_ENOUGH_MEMORY_23 = Tpl("sglang", "sglang/srt/model_executor/pool_configurator.py", V23, (
    "Not enough memory. Please try to increase --mem-fraction-static.",
    " Current value: mem_fraction_static={mfs}",))
CAPTURE_FAILED = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_runner.py", V9,
                     ("Capture cuda graph failed: {e}\n{hint}",))
CAPTURE_FAILED_HINT = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_runner.py", V9, (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n",))
NVFP4_PLATFORM_9 = Tpl("sglang", "sglang/srt/layers/quantization/modelopt_quant.py", V9, (
    "Current platform does not support NVFP4 quantization. Please use Blackwell and above.",))
NVFP4_PLATFORM_23 = Tpl("sglang", "sglang/srt/layers/quantization/modelopt_quant.py", V23, (
    "Current platform does not support NVFP4 quantization with the selected MoE backend. "
    "Please use Blackwell and above, or use moe_runner_backend=marlin on SM80+.",))
CUDA_GRAPH_CONFIG_JSON_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23,
                                ("--cuda-graph-config must be JSON: {e}",))
CUDA_GRAPH_CONFIG_OBJECT_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23,
                                  ("--cuda-graph-config must be a JSON object, got {t}",))
CUDA_GRAPH_CONFIG_PHASE_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23,
                                 ("--cuda-graph-config: unknown phase '{phase}', expected one of {phases}",))
CUDA_GRAPH_CONFIG_PHASE_OBJECT_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23, (
    "--cuda-graph-config['{phase}'] must be a JSON object, got {t}",))
CUDA_GRAPH_CONFIG_KEY_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23, (
    "--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}",))
CUDA_GRAPH_BACKEND_REMOVED_23 = Tpl("sglang", "sglang/srt/model_executor/cuda_graph_config.py", V23, (
    "tc_piecewise was removed; select breakable, full, or disabled",))
ALLREDUCE_FUSION_23 = Tpl("sglang", "sglang/srt/layers/flashinfer_comm_fusion.py", V23,
                          ("FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.",))
ASSERT_CUTLASS_QUANT_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "Invalid quantization '{q}'. \nFlashInfer Cutlass MOE supports only: 'modelopt_fp4', "
    "'modelopt_fp8', or bfloat16 (None).",))
ASSERT_TRTLLM_QUANT_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "Invalid quantization '{q}'. \nFlashInfer TRTLLM MOE supports only: 'modelopt_fp4', 'fp8', "
    "'modelopt_fp8', 'compressed-tensors', or bfloat16 (None).",))
ASSERT_EP_9 = Tpl("sglang", "sglang/srt/server_args.py", V9,
                  ("The expert parallel size must be 1 or the same as the tensor parallel size",))

# flashinfer 0.6.3 (pinned by sglang 0.5.9): flashinfer/compilation_context.py:62-64
FI_NO_ARCH = Tpl("flashinfer", "flashinfer/compilation_context.py", ALL,
                 ("No supported CUDA architectures found for major versions {majors}.",))
# flashinfer 0.7.2 (pinned by sglang 0.5.23): data/csrc/trtllm_batched_gemm_runner.cu:205-219
# (flashinfer_python 0.7.2 wheel, flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:216-217; C++ source, not
# checked by the test)
FI_NO_SM120_CUBIN = Tpl("flashinfer-cpp", "flashinfer/data/csrc/trtllm_batched_gemm_runner.cu", V23, (
    "The trtllm-gen batched GEMM cubin manifest contains no kernels runnable on sm{sm}; "
    "this backend currently ships cubins for sm100, sm103 and sm107.",))

# ---------------------------------------------------------------- MoE launch failures (failure_model.py)
# sglang 0.5.9: the loader's capability gate (ModelOptFp4Config.get_min_capability() is 100), raised while the
# quantization config is built, before the NVFP4 MoE method's own platform check
LOADER_MIN_CAPABILITY_9 = Tpl("sglang", "sglang/srt/model_loader/loader.py", V9, (
    "The quantization method {q} is not supported for the current GPU. Minimum capability: {min}. "
    "Current capability: {cap}.",))
TRITON_KERNEL_TOPK = Tpl("sglang", "sglang/srt/layers/moe/moe_runner/triton_kernels.py", ALL,
                         ("Triton-kernel runner expects TritonKernelTopKOutput",))
ASSERT_CUTLASS_QUANT_23 = Tpl("sglang", "sglang/srt/arg_groups/moe_hook.py", V23, (
    "Invalid quantization '{q}'. \nFlashInfer Cutlass MOE supports only: 'modelopt_fp4', 'modelopt_fp8', "
    "'modelopt_mixed', or bfloat16 (None).",))
ASSERT_CUTEDSL_QUANT_23 = Tpl("sglang", "sglang/srt/arg_groups/moe_hook.py", V23, (
    "Invalid quantization '{q}'. \nFlashInfer CuteDSL MOE currently supports only: 'modelopt_fp4', "
    "'modelopt_mixed' (with NVFP4 MoE layers), 'nvfp4_online', or hybrid NVFP4 models.",))
ASSERT_TRTLLM_QUANT_23 = Tpl("sglang", "sglang/srt/arg_groups/moe_hook.py", V23, (
    "Invalid quantization '{q}'. \nFlashInfer TRTLLM MOE supports only: 'modelopt_fp4', 'nvfp4_online', "
    "'fp8', 'modelopt_fp8', 'modelopt_mixed', 'compressed-tensors', or bfloat16 (None).",))
ASSERT_TRTLLM_ROUTED_QUANT_23 = Tpl("sglang", "sglang/srt/arg_groups/moe_hook.py", V23, (
    "Invalid quantization '{q}'. \nFlashInfer TRTLLM routed MOE supports only: 'fp8', 'mxfp8', 'modelopt_fp4', "
    "'modelopt_mixed', 'nvfp4_online', 'minimax_m3_nvfp4', or bfloat16 (None).",))
LORA_MOE_REQUIRES_LORA_23 = Tpl("sglang", "sglang/srt/arg_groups/lora_hook.py", V23,
                                ("--moe-runner-backend {backend} requires --enable-lora (or --lora-paths)",))
MEGAMOE_ARCH_23 = Tpl("sglang", "sglang/srt/arg_groups/mega_moe_hook.py", V23, (
    "--moe-a2a-backend megamoe needs a CUDA SM90 GPU (block-FP8 experts) or an SM100-class GPU (MXFP4 / NVFP4 "
    "experts); it runs DeepGEMM kernels over CUDA symmetric memory. On ROCm, set "
    "SGLANG_AMD_USE_FLYDSL_MEGA_MOE=1 to select aiter MegaMoEv2 instead.",))
# validate_mega_moe_token_budget (arg_groups/mega_moe_hook.py:161-253), run for a model without a fused-MoE
# fallback or with NVFP4 experts (mega_moe_needs_token_budget, :66-75); {label} is the model's architecture
MEGAMOE_DECODE_BUDGET_23 = Tpl("sglang", "sglang/srt/arg_groups/mega_moe_hook.py", V23, (
    "{label} with MegaMoE requires SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK to cover the largest decode "
    "/ verify forward on one rank. Current values: largest decode graph bucket x tokens per request = {dec}, "
    "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK={cap}. Raise the env var to at least {dec} or lower "
    "--cuda-graph-max-bs / --max-running-requests / --speculative-num-draft-tokens.",))
MEGAMOE_CHUNKED_PREFILL_23 = Tpl("sglang", "sglang/srt/arg_groups/mega_moe_hook.py", V23, (
    "{label} with MegaMoE requires chunked prefill to be enabled. Set --chunked-prefill-size to a positive value; "
    "--chunked-prefill-size=-1 is unsafe because MegaMoE's per-rank token requirement would not have a strict "
    "prefill-forward bound.",))
MEGAMOE_PREFILL_BUDGET_23 = Tpl("sglang", "sglang/srt/arg_groups/mega_moe_hook.py", V23, (
    "{label} with MegaMoE requires SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK to cover each rank's "
    "effective prefill token budget. Current values: chunked_prefill_size={chunk}, token_partition={part}, "
    "token_partition_size={psize}, token_alignment={align}, required_per_rank={req}, "
    "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK={cap}. Set "
    "SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK to at least {req}, or lower --chunked-prefill-size until "
    "the effective per-rank budget fits.",))
# ModelOptNvFp4FusedMoEMethod.apply (layers/quantization/modelopt_quant.py:3189-3194): NVFP4 experts repacked into the
# Mega MoE layout reached the fused MoE path
NVFP4_MEGAMOE_NO_FALLBACK_23 = Tpl("sglang", "sglang/srt/layers/quantization/modelopt_quant.py", V23, (
    "NVFP4 MegaMoE experts cannot fall back to the fused MoE path; the model block must route every forward through "
    "run_mega_routed_experts (check the MegaMoE token budget).",))
NVFP4_CUTLASS_23 = Tpl("sglang", "sglang/srt/layers/quantization/modelopt_quant.py", V23, (
    "moe_runner_backend=cutlass is not supported for NVFP4 MoE. Use --moe-runner-backend flashinfer_cutlass "
    "instead.",))
NVFP4_NO_APPLY_BRANCH_23 = Tpl("sglang", "sglang/srt/layers/quantization/modelopt_quant.py", V23, (
    "Unsupported moe_runner_backend for NVFP4 MoE: {backend}. Use --moe-runner-backend flashinfer_cutlass "
    "instead.",))
HPC_OPS_NEEDS_SM90_23 = Tpl("sglang", "sglang/srt/layers/moe/moe_runner/runner.py", V23, (
    "--moe-runner-backend hpc_ops requires an SM90 (Hopper) GPU (the HPC-Ops kernels ship sm90a only), got "
    "sm{major}{minor}.",))
HPC_OPS_OTHER_RUNNER_23 = Tpl("sglang", "sglang/srt/layers/moe/moe_runner/runner.py", V23, (
    "--moe-runner-backend hpc_ops was requested, but this MoE layer's quantization method selected the "
    "'{runner}' runner (hpc_ops only supports FP8 blockwise / per-tensor quantized MoE). Remove "
    "--moe-runner-backend hpc_ops for this model.",))
RUNNER_UNSUPPORTED_23 = Tpl("sglang", "sglang/srt/layers/moe/moe_runner/runner.py", V23,
                            ("Unsupported runner backend: {backend}",))
RUNNER_NO_FUSED_FUNC_23 = Tpl("sglang", "sglang/srt/layers/moe/moe_runner/runner.py", V23, (
    "Runner backend {backend} requires a fused func for a2a backend {a2a}, but none is registered.",))
FP8_APPLY_UNSUPPORTED_23 = Tpl("sglang", "sglang/srt/layers/quantization/fp8.py", V23,
                               ("Unsupported runner backend: {backend}",))  # "... %s" % backend
# flashinfer 0.6.3 @backend_requirement (flashinfer/utils.py:1149-1155): gemm_fp8_nt_groupwise's trtllm backend is
# declared for SM100/SM103 only (gemm/gemm_base.py:3190-3191)
FI_BACKEND_UNSUPPORTED = Tpl("flashinfer", "flashinfer/utils.py", V9,
                             ("{func} does not support backend '{backend}'{extra}",))
# Python's own texts for an attribute read on an object without it (the sglang line that reads it is cited in
# failure_model.py)
ATTRIBUTE_MISSING = Tpl("python", "Objects/object.c", ALL, ("'{type}' object has no attribute '{name}'",))
MODULE_MISSING = Tpl("python", "importlib/_bootstrap.py", ALL, ("No module named '{name}'",))
# C++ texts, read from the compiled libraries (`strings`), not checked by the test:
# sgl-kernel 0.3.21 deep_gemm/deep_gemm_cpp.abi3.so: DeepGEMM's DG_HOST_UNREACHABLE(reason) throws
# DGException("Assertion", __FILE__, __LINE__, reason), whose message is "<name> error (<file>:<line>): <reason>"
# (deepseek-ai/DeepGEMM csrc/utils/exception.hpp); the .so records the file as below.  The line of the dispatch
# in csrc/apis/gemm.hpp at the commit sgl-kernel 0.3.21 builds was not established: the message is shown with
# the file only.
DEEPGEMM_ARCH = Tpl("deep_gemm-cpp", "deep_gemm/deep_gemm_cpp.abi3.so", V9, (
    "Assertion error (_deps/repo-deepgemm-src/csrc/apis/gemm.hpp): Unsupported architecture or scaling factor "
    "types",))
# sglang-kernel 0.4.10 sgl_kernel/sm100/common_ops.abi3.so (csrc/moe/fp8_blockwise_moe_kernel.cu): only the
# sm90_ and sm100_ grouped-GEMM dispatchers exist
SGL_KERNEL_FP8_GROUPED_MM = Tpl("sgl-kernel-cpp", "sgl_kernel/sm100/common_ops.abi3.so", V23, (
    "No implemented fp8_blockwise_scaled_grouped_mm for current compute capability: {sm}",))

# torch's CUDA caching allocator message (c10/cuda/CUDACachingAllocator.cpp), not in any wheel
# we check; shape as printed by torch >= 2.1.
TORCH_OOM = Tpl("torch", "c10/cuda/CUDACachingAllocator.cpp", ALL, (
    "CUDA out of memory. Tried to allocate {req:.2f} GiB. GPU {gpu} has a total capacity of "
    "{total:.2f} GiB of which {free:.2f} MiB is free. Including non-PyTorch memory, this process "
    "has {used:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by "
    "PyTorch, and {reserved:.2f} MiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
    "avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",))
# torch c10/cuda/CUDAException / CUDA runtime text for an asynchronous kernel fault.
TORCH_ILLEGAL_ADDRESS = Tpl("torch", "c10/cuda/CUDAException.cpp", ALL, (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",))

# ---------------------------------------------------------------- uvicorn (0.54.0 wheel), with the
# format sglang installs in set_uvicorn_logging_configs (sglang/srt/utils/common.py):
#   default: "[%(asctime)s] %(levelprefix)s %(message)s", access: '[%(asctime)s] %(levelprefix)s
#   %(client_addr)s - "%(request_line)s" %(status_code)s'
UVICORN_DEFAULT_FMT = Tpl("sglang", "sglang/srt/utils/common.py", ALL, ("[{asctime}] {levelprefix} {message}",))
UVICORN_ACCESS_FMT = Tpl("sglang", "sglang/srt/utils/common.py", ALL,
                         ('[{asctime}] {levelprefix} {client_addr} - "{request_line}" {status_code}',))
UV_STARTED = Tpl("uvicorn", "uvicorn/server.py", ALL, ("Started server process [{pid}]",))
UV_FINISHED = Tpl("uvicorn", "uvicorn/server.py", ALL, ("Finished server process [{pid}]",))
UV_SHUTTING_DOWN = Tpl("uvicorn", "uvicorn/server.py", ALL, ("Shutting down",))
UV_RUNNING = Tpl("uvicorn", "uvicorn/server.py", ALL, ("Uvicorn running on {addr} (Press CTRL+C to quit)",))
UV_ADDR = Tpl("uvicorn", "uvicorn/server.py", ALL, ("{scheme}://{host}:{port}",))  # addr_format "%s://%s:%d"
UV_WAIT_STARTUP = Tpl("uvicorn", "uvicorn/lifespan/on.py", ALL, ("Waiting for application startup.",))
UV_STARTUP_COMPLETE = Tpl("uvicorn", "uvicorn/lifespan/on.py", ALL, ("Application startup complete.",))
UV_WAIT_SHUTDOWN = Tpl("uvicorn", "uvicorn/lifespan/on.py", ALL, ("Waiting for application shutdown.",))
UV_SHUTDOWN_COMPLETE = Tpl("uvicorn", "uvicorn/lifespan/on.py", ALL, ("Application shutdown complete.",))
# asyncio/uvloop create_server bind failure, logged by uvicorn/server.py startup() (logger.error(exc))
# then sys.exit(STARTUP_FAILURE) with STARTUP_FAILURE = 3 (uvicorn/config.py).
BIND_ERROR = Tpl("python", "asyncio/base_events.py", ALL,
                 ("[Errno {errno}] error while attempting to bind on address {addr!r}: {strerror}",))
UVICORN_STARTUP_FAILURE_RC = 3

# ---------------------------------------------------------------- traceback frames
# torch 2.9.1 (pinned by sglang 0.5.9) frames: line numbers as reported in public tracebacks of
# torch 2.9.x (module.py 1775/1786, _contextlib.py 120) -- third-party evidence, not checked here.
TORCH_MODULE_FRAMES = (
    ("torch/nn/modules/module.py", 1775, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)",
     (7, 32), False),
    ("torch/nn/modules/module.py", 1786, "_call_impl", "return forward_call(*args, **kwargs)",
     (7, 29), False),
)
TORCH_DECORATE_FRAME = ("torch/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)",
                        (7, 21), False)
# code lines that call an nn.Module (the torch frames follow them)
MODULE_CALLS = ("self.model(", "layer(", "self.mlp(", "self.experts(")

# Generated from the sglang 0.5.9 / flashinfer 0.6.3 wheels: (file, line, function, code, carets, decorated);
# carets = (offset into the stripped line, count) of Python 3.11's ^ marker line, None when not shown.
# decorated=True: the function is wrapped by torch.no_grad()/DynamicGradMode, so torch's
# decorate_context frame precedes it.
# Frames shared by several tracebacks: scheduler start-up down to ModelRunner.initialize(), and the
# GLM-5 (DeepseekV2 code path) forward down to its MoE layer.
S9_INIT_TO_MODEL_RUNNER = [
    ('sglang/srt/managers/scheduler.py', 3130, 'run_scheduler_process',
     'scheduler = Scheduler(', (12, 10), False),
    ('sglang/srt/managers/scheduler.py', 368, '__init__',
     'self.init_model_worker()', None, False),
    ('sglang/srt/managers/scheduler.py', 564, 'init_model_worker',
     'self.init_tp_model_worker()', None, False),
    ('sglang/srt/managers/scheduler.py', 522, 'init_tp_model_worker',
     'self.tp_worker = TpModelWorker(', (17, 14), False),
    ('sglang/srt/managers/tp_worker.py', 247, '__init__',
     'self._init_model_runner()', None, False),
    ('sglang/srt/managers/tp_worker.py', 330, '_init_model_runner',
     'self._model_runner = ModelRunner(', (21, 12), False),
    ('sglang/srt/model_executor/model_runner.py', 413, '__init__',
     'self.initialize(min_per_gpu_memory)', None, False),
]

S9_DEEPSEEK_MOE_LAYER = [
    ('sglang/srt/models/deepseek_v2.py', 2919, 'forward',
     'hidden_states = self.model(', (16, 11), True),
    ('sglang/srt/models/deepseek_v2.py', 2730, 'forward',
     'hidden_states, residual = layer(', (26, 6), False),
    ('sglang/srt/models/deepseek_v2.py', 2421, 'forward',
     'hidden_states = self.mlp(', (16, 9), False),
    ('sglang/srt/models/deepseek_v2.py', 582, 'forward',
     'return self.forward_normal(', (7, 20), False),
]

S9_TRTLLM = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 608, 'initialize',
     'self.kernel_warmup()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1827, 'kernel_warmup',
     'self._flashinfer_autotune()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1870, '_flashinfer_autotune',
     'self._dummy_run(', None, False),
    ('sglang/srt/model_executor/model_runner.py', 2117, '_dummy_run',
     'run_once()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 2106, 'run_once',
     'logits_output_or_pp_proxy_tensors = self.model.forward(', (36, 19), False),
    *S9_DEEPSEEK_MOE_LAYER,
    ('sglang/srt/models/deepseek_v2.py', 680, 'forward_normal',
     'final_hidden_states = self.experts(', (22, 13), False),
    ('sglang/srt/layers/moe/fused_moe_triton/layer.py', 1283, 'forward',
     'return self.forward_impl(hidden_states, topk_output)', (7, 45), False),
    ('sglang/srt/layers/moe/fused_moe_triton/layer.py', 1333, 'forward_impl',
     'result = trtllm_fp4_block_scale_moe(', (9, 27), False),
    ('flashinfer/fused_moe/core.py', 2552, 'trtllm_fp4_block_scale_moe',
     'return get_trtllm_moe_sm100_module().trtllm_fp4_block_scale_moe(', (7, 57), False),
    ('flashinfer/fused_moe/core.py', 931, 'get_trtllm_moe_sm100_module',
     'module = gen_trtllm_gen_fused_moe_sm100_module()', (9, 39), False),
    ('flashinfer/jit/fused_moe.py', 237, 'gen_trtllm_gen_fused_moe_sm100_module',
     'nvcc_flags = current_compilation_context.get_nvcc_flags_list(', (13, 48), False),
    ('flashinfer/compilation_context.py', 62, 'get_nvcc_flags_list',
     'raise RuntimeError(', None, False),
]

S9_KV = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 590, 'initialize',
     'self.init_memory_pool(min_per_gpu_memory)', None, False),
    ('sglang/srt/model_executor/model_runner_kv_cache_mixin.py', 416, 'init_memory_pool',
     'raise RuntimeError(', None, False),
]

S9_GRAPH_INNER = [
    ('sglang/srt/model_executor/cuda_graph_runner.py', 370, '__init__',
     'self.capture()', None, False),
    ('sglang/srt/model_executor/cuda_graph_runner.py', 513, 'capture',
     ') = self.capture_one_batch_size(bs, forward, stream_idx)', None, False),
    ('sglang/srt/model_executor/cuda_graph_runner.py', 732, 'capture_one_batch_size',
     'run_once()', None, False),
    ('sglang/srt/model_executor/cuda_graph_runner.py', 719, 'run_once',
     'logits_output_or_pp_proxy_tensors = forward(', (36, 8), False),
    *S9_DEEPSEEK_MOE_LAYER,
    ('sglang/srt/models/deepseek_v2.py', 680, 'forward_normal',
     'final_hidden_states = self.experts(', (22, 13), False),
    ('sglang/srt/layers/moe/fused_moe_triton/layer.py', 977, 'forward',
     'return self.forward_impl(hidden_states, topk_output)', (7, 45), False),
    ('sglang/srt/layers/moe/fused_moe_triton/layer.py', 996, 'forward_impl',
     'combine_input = self.run_moe_core(', (16, 18), False),
    ('sglang/srt/layers/moe/fused_moe_triton/layer.py', 1017, 'run_moe_core',
     'return self.quant_method.apply(', (7, 24), False),
    ('sglang/srt/layers/quantization/modelopt_quant.py', 1763, 'apply',
     'symm_output = torch.empty(', (14, 12), False),
]

S9_GRAPH_OUTER = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 609, 'initialize',
     'self.init_device_graphs()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 2156, 'init_device_graphs',
     'self.graph_runner = graph_runners[self.device](self)', (20, 32), False),
    ('sglang/srt/model_executor/cuda_graph_runner.py', 372, '__init__',
     'raise Exception(', None, False),
]

S9_SERVE = [
    ('sglang/srt/managers/scheduler.py', 3169, 'run_scheduler_process',
     'scheduler.event_loop_overlap()', None, False),
    ('sglang/srt/managers/scheduler.py', 1165, 'event_loop_overlap',
     'batch_result = self.run_batch(batch)', (15, 21), True),
    ('sglang/srt/managers/scheduler.py', 2368, 'run_batch',
     'batch_result = self.model_worker.forward_batch_generation(', (15, 43), False),
    ('sglang/srt/managers/tp_worker.py', 456, 'forward_batch_generation',
     'out = self.model_runner.forward(', (6, 26), False),
    ('sglang/srt/model_executor/model_runner.py', 2401, 'forward',
     'output = self._forward_raw(', (9, 18), False),
    ('sglang/srt/model_executor/model_runner.py', 2463, '_forward_raw',
     'ret = self.graph_runner.replay(', (6, 25), False),
    ('sglang/srt/model_executor/cuda_graph_runner.py', 866, 'replay',
     'self.graphs[graph_key].replay()', None, False),
]

S9_NVFP4 = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 493, 'initialize',
     'self.load_model()', None, False),
    ('sglang/srt/layers/quantization/modelopt_quant.py', 1335, '__init__',
     'raise ValueError(', None, False),
]

# 0.5.23: --enable-flashinfer-allreduce-fusion off SM90/SM10X, raised while the eager runner warms up
# kernels (scheduler init -> init_all_cuda_graphs -> capture_cuda_graphs -> EagerRunner -> _warmup)
S23_ALLREDUCE_FUSION = [
    ('sglang/srt/managers/scheduler.py', 6362, 'run_scheduler_process',
     'scheduler = Scheduler(server_args, port_args)', (12, 33), False),
    ('sglang/srt/managers/scheduler.py', 568, '__init__',
     'self.init_model_worker()', None, False),
    ('sglang/srt/managers/scheduler.py', 1146, 'init_model_worker',
     'self.init_all_cuda_graphs()', None, False),
    ('sglang/srt/managers/scheduler.py', 1124, 'init_all_cuda_graphs',
     'self.tp_worker.init_cuda_graphs()', None, True),
    ('sglang/srt/managers/tp_worker.py', 435, 'init_cuda_graphs',
     'self.model_runner.init_cuda_graphs(', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1192, 'init_cuda_graphs',
     'capture = capture_cuda_graphs(', (10, 20), False),
    ('sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py', 416, 'capture_cuda_graphs',
     'eager_runner = EagerRunner(model_runner, run_warmup=not defer_distributed_setup)', (15, 65), False),
    ('sglang/srt/model_executor/runner/eager_runner.py', 153, '__init__',
     'self.warmup()', None, False),
    ('sglang/srt/model_executor/runner/base_runner.py', 255, 'warmup',
     'self._warmup()', None, False),
    ('sglang/srt/model_executor/runner/base_runner.py', 267, '_warmup',
     'self._pre_initialize_flashinfer_allreduce_workspace()', None, False),
    ('sglang/srt/model_executor/runner/base_runner.py', 329, '_pre_initialize_flashinfer_allreduce_workspace',
     'pre_initialize_workspaces(', None, False),
    ('sglang/srt/layers/flashinfer_comm_fusion.py', 1063, 'pre_initialize_workspaces',
     'ensure_workspace_initialized(', None, False),
    ('sglang/srt/layers/flashinfer_comm_fusion.py', 778, 'ensure_workspace_initialized',
     'backend = resolve_flashinfer_allreduce_fusion_backend()', (10, 45), False),
    ('sglang/srt/layers/flashinfer_comm_fusion.py', 100, 'resolve_flashinfer_allreduce_fusion_backend',
     'return _resolve_backend(backend, get_parallel().nnodes > 1)', (7, 52), False),
    ('sglang/srt/layers/flashinfer_comm_fusion.py', 49, '_resolve_backend',
     'raise ValueError(', None, False),
]

# KV pool allocation running out of memory (a --mem-fraction-static above 1 sizes the pool beyond the free
# memory): GLM-5's NSATokenToKVPool -> MLATokenToKVPool._create_buffers, 0.5.9 mem_cache/memory_pool.py.
# Python 3.11 adds a <listcomp> frame at line 1440 (`torch.zeros(`) below the last one; it is left out.
S9_KV_POOL_OOM = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 590, 'initialize',
     'self.init_memory_pool(min_per_gpu_memory)', None, False),
    ('sglang/srt/model_executor/model_runner_kv_cache_mixin.py', 527, 'init_memory_pool',
     'self.token_to_kv_pool = NSATokenToKVPool(', None, False),
    ('sglang/srt/mem_cache/memory_pool.py', 1755, '__init__', 'super().__init__(', None, False),
    ('sglang/srt/mem_cache/memory_pool.py', 1420, '__init__', 'self._create_buffers()', None, False),
    ('sglang/srt/mem_cache/memory_pool.py', 1439, '_create_buffers', 'self.kv_buffer = [', None, False),
]

# Where a failure_model.py launch failure is raised from, down to the step that raises (the raising frame itself
# comes from failure_model.py): the model build (ModelRunner.initialize -> load_model) and flashinfer autotune.
S23_INIT_TO_LOAD_MODEL = [
    ('sglang/srt/managers/scheduler.py', 6362, 'run_scheduler_process',
     'scheduler = Scheduler(server_args, port_args)', (12, 33), False),
    ('sglang/srt/managers/scheduler.py', 568, '__init__',
     'self.init_model_worker()', None, False),
    ('sglang/srt/managers/scheduler.py', 1130, 'init_model_worker',
     'self.init_tp_model_worker()', None, False),
    ('sglang/srt/managers/scheduler.py', 1033, 'init_tp_model_worker',
     'self.tp_worker = TpModelWorker(**worker_kwargs)', (17, 30), False),
    ('sglang/srt/managers/tp_worker.py', 319, '__init__',
     'self._init_model_runner()', None, False),
    ('sglang/srt/managers/tp_worker.py', 487, '_init_model_runner',
     'self._model_runner = ModelRunner(', (21, 12), False),
    ('sglang/srt/model_executor/model_runner.py', 499, '__init__',
     'self.initialize()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 715, 'initialize',
     'self.load_model()', None, False),
]
S23_AUTOTUNE = S23_ALLREDUCE_FUSION[:9] + [
    ('sglang/srt/model_executor/runner/base_runner.py', 284, '_warmup',
     'self._flashinfer_autotune(buffers=buffers, batch_size=batch_size)', None, False),
    ('sglang/srt/model_executor/runner/base_runner.py', 408, '_flashinfer_autotune',
     'self._dummy_run(', None, False),
]
# A scheduler process whose GPU index the process cannot see: its device selection raises (0.5.9 ModelRunner.__init__
# -> init_torch_distributed, model_runner.py:392/734; 0.5.23 Scheduler.__init__ -> bootstrap.init_parallel_runtime,
# distributed/bootstrap.py:133); torch's own frames below set_device are left out (not in a wheel we check).
S9_SET_DEVICE = S9_INIT_TO_MODEL_RUNNER[:-1] + [
    ('sglang/srt/model_executor/model_runner.py', 392, '__init__',
     'min_per_gpu_memory = self.init_torch_distributed()', (21, 29), False),
    ('sglang/srt/model_executor/model_runner.py', 734, 'init_torch_distributed',
     'torch.get_device_module(self.device).set_device(self.gpu_id)', None, False),
]
S23_SET_DEVICE = S23_INIT_TO_LOAD_MODEL[:1] + [
    ('sglang/srt/managers/scheduler.py', 536, '__init__',
     'bootstrap.init_parallel_runtime(', None, False),
    ('sglang/srt/distributed/bootstrap.py', 133, 'init_parallel_runtime',
     'torch.get_device_module(device).set_device(get_device().gpu_id)', None, False),
]
# The attention backend's factory, called when the model runner builds its attention backend, after the KV pool and
# before any kernel warm-up (0.5.9 ModelRunner.initialize -> init_attention_backend; 0.5.23 Scheduler.init_model_worker
# -> init_all_attention_backends, whose frames from build_attention_backends down to the factory's call are left out).
S9_ATTENTION_INIT = S9_INIT_TO_MODEL_RUNNER + [
    ('sglang/srt/model_executor/model_runner.py', 607, 'initialize', 'self.init_attention_backend()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1737, 'init_attention_backend',
     'self.attn_backend = self._get_attention_backend()', (20, 29), False),
    ('sglang/srt/model_executor/model_runner.py', 1781, '_get_attention_backend',
     'attn_backend = self._get_attention_backend_from_str(', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1798, '_get_attention_backend_from_str',
     'full_attention_backend = ATTENTION_BACKENDS[backend_str](self)', (25, 37), False),
]
S23_ATTENTION_INIT = S23_INIT_TO_LOAD_MODEL[:2] + [
    ('sglang/srt/managers/scheduler.py', 1145, 'init_model_worker', 'self.init_all_attention_backends()', None, False),
    ('sglang/srt/managers/scheduler.py', 1115, 'init_all_attention_backends',
     'self.tp_worker.init_attention_backends()', None, False),
    ('sglang/srt/managers/tp_worker.py', 429, 'init_attention_backends',
     'self.model_runner.init_attention_backends()', None, False),
    ('sglang/srt/model_executor/model_runner.py', 1122, 'init_attention_backends',
     'backends = build_attention_backends(model_runner=self)', (11, 43), False),
    ('sglang/srt/model_executor/model_runner_components/attention_backend_setup.py', 283,
     '_build_full_attention_backend_from_str', 'return ATTENTION_BACKENDS[backend_str](model_runner)', (7, 45), False),
]
# What the failing rank logs before it re-raises (the except clause around that set_device)
DEVICE_CONTEXT_9 = Tpl("sglang", "sglang/srt/model_executor/model_runner.py", V9, (
    "Context: {device} {gpu_id} {cvd} {tp_rank} {tp_size}",))
DEVICE_CONTEXT_23 = Tpl("sglang", "sglang/srt/distributed/bootstrap.py", V23, (
    "Context: device=%s gpu_id=%s CUDA_VISIBLE_DEVICES=%s tp_rank=%s",))
# torch c10/cuda/CUDAException (C10_CUDA_CHECK) text for cudaErrorInvalidDevice, as torch.cuda.set_device raises it.
TORCH_INVALID_DEVICE = Tpl("torch", "c10/cuda/CUDAException.cpp", ALL, (
    "CUDA error: invalid device ordinal\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",))
STARTUP_PREFIX = {
    ("0.5.9", "attention_init"): S9_ATTENTION_INIT,
    ("0.5.23", "attention_init"): S23_ATTENTION_INIT,
    ("0.5.9", "model_init"): S9_NVFP4[:-1],
    ("0.5.9", "autotune"): S9_TRTLLM[:len(S9_INIT_TO_MODEL_RUNNER) + 5],
    ("0.5.23", "model_init"): S23_INIT_TO_LOAD_MODEL,
    ("0.5.23", "autotune"): S23_AUTOTUNE,
}

TRACEBACKS = {
    ("0.5.9", "attention_init"): S9_ATTENTION_INIT,
    ("0.5.23", "attention_init"): S23_ATTENTION_INIT,
    ("0.5.9", "set_device"): S9_SET_DEVICE,
    ("0.5.23", "set_device"): S23_SET_DEVICE,
    ("0.5.23", "allreduce_fusion"): S23_ALLREDUCE_FUSION,
    ("0.5.9", "trtllm_sm120"): S9_TRTLLM,
    ("0.5.9", "oom_kv"): S9_KV,
    ("0.5.9", "oom_graph_inner"): S9_GRAPH_INNER,
    ("0.5.9", "oom_graph_outer"): S9_GRAPH_OUTER,
    ("0.5.9", "serve"): S9_SERVE,
    ("0.5.9", "nvfp4_platform"): S9_NVFP4,
    ("0.5.9", "kv_pool_oom"): S9_KV_POOL_OOM,
    ("0.5.23", "init_to_load_model"): S23_INIT_TO_LOAD_MODEL,
    ("0.5.23", "autotune"): S23_AUTOTUNE,
}


def format_traceback(frames, exc_line: str, site_packages: str) -> str:
    """Render frames the way Python 3.11's traceback.format_exc() does (as sglang's
    get_exception_traceback returns it)."""
    out = ["Traceback (most recent call last):\n"]
    for fr in _expand(frames):
        path, line, func, code, carets, _deco = fr
        out.append(f'  File "{site_packages}/{path}", line {line}, in {func}\n')
        out.append(f"    {code}\n")
        if carets:
            out.append("    " + " " * carets[0] + "^" * carets[1] + "\n")
    out.append(exc_line + "\n")
    return "".join(out)


def _expand(frames):
    for fr in frames:
        if fr[5]:
            yield TORCH_DECORATE_FRAME
        yield fr
        if any(fr[3].endswith(c) or fr[3].endswith(c + ")") or (" " + c) in fr[3] for c in MODULE_CALLS) \
                and fr[3].rstrip().endswith("("):
            yield from TORCH_MODULE_FRAMES

# ---------------------------------------------------------------- argparse deprecation warnings
DEPRECATED_ARG_9 = Tpl("sglang", "sglang/srt/server_args.py", V9, (
    "The command line argument '{opt}' is deprecated and will be removed in future versions.",))
DEPRECATED_FLAG_23 = Tpl("sglang", "sglang/srt/arg_groups/argparse_actions.py", V23, (
    "'{opt}' is deprecated and will be removed in a future release.{repl}",))
DEPRECATED_REPLACEMENT_23 = Tpl("sglang", "sglang/srt/arg_groups/argparse_actions.py", V23,
                                (" Use '{new}' instead.",))
