# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Pure, incremental classifier of SGLang server logs (journal lines or a saved log file).

Feed lines, read the state. Nothing here does I/O or reads a clock: times come from the line's own
``[YYYY-MM-DD HH:MM:SS(.mmm)]`` (or, in sglang 0.2.15-0.3.5, ``[HH:MM:SS]``) header or from the monotonic
``t`` the caller passes with the line.

Written from SGLang's sources (0.5.9 / 0.5.23: scheduler.py ``Scheduler hit an exception``,
engine.py ``Received sigquit from a child process``, http_server.py ``The server is fired up and ready
to roll!`` / ``Initialization failed. warmup error``, model_runner.py / cuda_graph_setup.py phase lines;
0.1.x-0.3.x: ``router init state:``, ``Exception in ModelTpServer`` / ``run_tp_server`` /
``ControllerSingle``) and from real logs quoted in public issues, as SGLang prints them and as
orchestrators re-emit them (tests/fixtures/sglang-logs/SOURCES.md).

Verdicts:
  ready     ``The server is fired up and ready to roll!`` was seen (or, in an excerpt that starts late,
            serving traffic: ``ready_inferred``)
  crashed   a crash marker was seen; ``cause`` is one of CAUSES
  starting  no verdict yet (a hang, in a static file, ends here too)

A crash marker is decisive as soon as it is read. A bare traceback, a lone exception line, ``Killed`` or
a record naming a fatal error without any marker (forks and wrappers log them so) is only a candidate:
it becomes the crash at ``finish()`` -- end of a static file, or the live waiter seeing the process gone
-- so both paths reach the same verdict.

Stdlib only; runs on the target (Python 3.9+) as well as on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
import time as _time

PHASES = ("init", "load_weights", "kv_cache", "cuda_graph", "http_up", "warmup", "ready", "serving")
CAUSES = (
    "unsupported_arch",
    "oom",
    "nccl",
    "stuck",
    "jit_compile",
    "flag_error",
    "port_in_use",
    "warmup_failed",
    "killed",
    "segfault",
    "aborted",
    "other",
)
_PHASE_INDEX = {p: i for i, p in enumerate(PHASES)}

# --------------------------------------------------------------------------------------------------
# Line framing

# The record header SGLang's logger writes: ``[%(asctime)s<prefix>] message``; prefix is any of
# `` DPn PPn ATTN_CPn MOE_DPn TPn EPn`` (scheduler.py configure_scheduler_process). Milliseconds with
# SGLANG_LOG_MS=1 (0.5.9 utils/common.py:1228-1232). Searched, not matched, so that container / CI / Ray
# prefixes and glued output (``...numpy.random._bounded_integers[2025-04-17 11:44:15 TP3] Scheduler hit
# ...``) still parse.
_RANKS = r"(?P<ranks>(?:\s+(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)"
_HEADER_RE = re.compile(r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<frac>[.,]\d+)?" + _RANKS + r"\]\s?")
# sglang 0.2.15-0.3.5 logged the time only: configure_logger(..., datefmt="%H:%M:%S") with the prefix
# f" TP{tp_rank}" (0.2.15 and 0.3.0 srt/utils.py:709-716, managers/tp_worker.py:882; 0.3.6 srt/utils.py:557
# has the date): ``[17:25:03 TP0] ...``.
# Matched at the start of a record only (a time inside a line is no header).
_HMS_HEADER_RE = re.compile(r"\[(?P<hms>\d{2}:\d{2}:\d{2})" + _RANKS + r"\]\s?")
# sglang's diffusion server (`sglang serve` / `sglang generate` for a diffusion model) logs month and day without
# the year: configure_logger's datefmt "%m-%d %H:%M:%S" (0.5.23 multimodal_gen/runtime/utils/logging_utils.py:457-461),
# "[12-16 14:27:08] ..." (https://github.com/sgl-project/sglang/issues/15235). Matched at the start of a record only.
_MD_HEADER_RE = re.compile(r"\[(?P<md>\d{2}-\d{2}) (?P<hms>\d{2}:\d{2}:\d{2})" + _RANKS + r"\]\s?")
# A rank-only header, as some excerpts show it (``[TP0] Scheduler hit an exception``).
_RANK_ONLY_RE = re.compile(r"^\[(?:(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+\s*)+\]\s?")
# Terminal colours (Ray colours its worker prefixes with colorama: python/ray/_private/worker.py
# print_worker_logs).
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# Prefixes added by whatever collected or re-emitted the output, stripped before anything else. "line"
# prefixes are put on every physical line (a traceback's frames too): after stripping one the line is
# what SGLang printed. "record" prefixes are another logger's record header around one message: the
# message is then a record of its own (headed), like one behind SGLang's own header.
_LEVEL = r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)"
_OUTER_PREFIXES = (
    # NVIDIA Dynamo re-logs SGLang's Python records through its tracing formatter, and `dynamo run`
    # re-emits a subprocess's lines under the target ``dynamo_run::subprocess``:
    # "2025-11-05T01:56:54.290150Z  INFO kv_events.__init__: ..." (https://github.com/ai-dynamo/dynamo/
    # issues/4121, https://github.com/ai-dynamo/dynamo/issues/1422).
    (
        "dynamo",
        re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z\s+" + _LEVEL + r"\s+(?P<target>\S+?):(?: |$)"),
    ),
    # journalctl -o short: "Nov 29 21:15:00 host sglang[123]: "
    ("line", re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:]+(?:\[\d+\])?: ")),
    # docker / CI / Kubernetes CRI (RFC3339 + stream + partial flag): "[2025-11-06T02:08:27.278Z] ",
    # "2025-07-25T07:53:08.21748708+08:00 stdout F "
    (
        "line",
        re.compile(
            r"^\[?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s"
            r"(?:std(?:out|err) [FP] )?"
        ),
    ),
    # FastChat's build_logger redirects stdout/stderr line by line into loggers named "stdout" / "stderr"
    # with fmt "%(asctime)s | %(levelname)s | %(name)s | %(message)s" (lm-sys/FastChat fastchat/utils.py
    # build_logger, StreamToLogger); other logger names are records of their own.
    ("fastchat", re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \| " + _LEVEL + r" \| (?P<target>[\w.\-]+) \| ?")),
    # A launcher re-logging each server line through Python logging ("%(asctime)s - %(name)s -
    # %(levelname)s - %(message)s"): "2025-03-07 23:50:27,531 - __main__ - INFO - "
    # (https://github.com/allenai/olmocr/issues/105).
    ("line", re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} - [\w.\-]+ - " + _LEVEL + r" - ")),
    # pm2: "3|qwen  | "
    ("line", re.compile(r"^\d+\|[\w.\-]+\s*\| ?")),
    # docker compose: "sglang-1  | "
    ("line", re.compile(r"^[\w.-]+\s+\| ?")),
    # Ray worker output on the driver: "(pid=45601) ", "(SGLangEngine pid=23902) ", "(WorkerDict pid=616,
    # ip=192.168.149.159) ", "(raylet) " (ray python/ray/_private/worker.py print_worker_logs; ray docs
    # doc/source/ray-observability/ray-logging.rst).
    ("line", re.compile(r"^\((?:[\w:.\-/]+ )?pid=\d+(?:, ip=[\d.:a-fA-F]+)?\) ?")),
    ("line", re.compile(r"^\(raylet(?:, ip=[\d.:a-fA-F]+)?\) ?")),
    # torchrun: "[rank0]: "
    ("line", re.compile(r"^\[rank\d+\]: ?")),
)
_RAY_REPEAT_RE = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")

# --------------------------------------------------------------------------------------------------
# Phase lines (message text after the header). Order within a phase does not matter.

_PHASE_PATTERNS = (
    # 0.5.9 logs ``server_args=ServerArgs(...)`` and model_runner.py:731 ``Init torch distributed begin.``; 0.5.23
    # logs the resolved dict, ``server_args={...}`` (entrypoints/engine.py:311/1185), and
    # distributed/bootstrap.py:115 ``Init parallel begin.``
    (
        "init",
        re.compile(
            r"server_args=(?:ServerArgs\(|\{)|Init torch distributed begin|Init parallel begin|"
            r"init_distributed_environment"
        ),
    ),
    # transformers' own "Loading checkpoint shards" bar: the diffusion server loads its native components with it
    ("load_weights", re.compile(r"Load weight begin|Loading (?:(?:safetensors|pt) )?checkpoint shards")),
    # The KV pool is allocated right after the weights, so a failure after "Load weight end" is a KV failure.
    ("kv_cache", re.compile(r"Load weight end|KV Cache is allocated|Memory pool end|KV Cache is VA upper bound")),
    (
        "cuda_graph",
        re.compile(
            r"Capture (?:target |draft )?(?:decode |verify |prefill |piecewise )?cuda graph begin"
            r"|Capturing batches|Capture cuda graph bs|Registering \d+ cuda graph addresses",
            re.I,
        ),
    ),
    # A multi-node server's rank >= 1 has no API: once its schedulers are ready it starts the dummy health server
    # and logs "Dummy health check server started in background thread at HOST:PORT" (launch_dummy_health_check_server,
    # 0.5.9 srt/utils/common.py:2710-2712, 0.5.23 :3683-3685; called from engine.py _launch_subprocesses for
    # node_rank >= 1). Its readiness is that endpoint's 200.
    (
        "http_up",
        re.compile(r"Started server process|Waiting for application startup|Application startup complete"
                   r"|Dummy health check server started"),
    ),
    ("warmup", re.compile(r"Uvicorn running on|\"(?:GET|POST) /(?:get_)?model_info|Start of (?:pd )?warmup")),
    ("ready", re.compile(r"The server is fired up and ready to roll")),
)
_LOAD_END_RE = re.compile(r"Load weight end")
# The distributed init (NCCL communicators, custom all-reduce) inside the init phase: 0.5.9
# model_runner.py:731/850 ``Init torch distributed begin.`` / ``Init torch distributed ends. elapsed=...``,
# 0.5.23 distributed/bootstrap.py:115/190 ``Init parallel begin.`` / ``Init parallel ends. elapsed=...``.
_DIST_BEGIN_RE = re.compile(r"Init torch distributed begin|Init parallel begin")
_DIST_END_RE = re.compile(r"Init torch distributed ends|Init parallel ends")
_GRAPH_END_RE = re.compile(r"Capture (?:target |draft )?(?:decode |verify |prefill |piecewise )?cuda graph end", re.I)
_SUMMARY_RE = re.compile(r"max_total_num_tokens=")

# Serving traffic: a batch with other requests running / queued, a decode batch, or an OpenAI-API access
# line. Warmup is one request with nothing else running, so these only appear once the server serves.
# "#running-req" (0.2+: "Prefill batch. ... #running-req: N"); 0.1.x printed "new fill batch. ...
# #running_req: N" (0.1.12 managers/router/model_rpc.py).
_BATCH_RE = re.compile(
    r"(?P<kind>Prefill|Decode|new fill) batch[.,].*?#running[-_]req: (?P<run>\d+)(?:.*?#queue-req: (?P<q>\d+))?"
)
_API_ACCESS_RE = re.compile(r"\"(?:POST|GET) /v1/(?:chat/completions|completions|embeddings|messages|responses)")
_ACCESS_RE = re.compile(r"INFO:\s+[\d.:a-fA-F\[\]]+ - \"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+\" (?P<code>\d{3})")
_GENERATE_200_RE = re.compile(r"\"POST /generate HTTP/[\d.]+\" 200")
# The diffusion server's component loader caught the exception it printed (traceback.print_exc()) and loads the
# native component instead (multimodal_gen/runtime/loader/component_loader.py): what came before was survived.
_FALLBACK_RE = re.compile(r"Error while loading customized \S+, falling back to native version")
# A finished health-check generation (--log-requests' "Finish: obj=GenerateReqInput(... rid='HEALTH_CHECK_<time>'"):
# /health and /health_generate answer 503 while the server is starting and only then run this one-token
# generation (0.5.x entrypoints/http_server.py health_generate), so the scheduler serves: the server is ready.
_HEALTH_GEN_DONE_RE = re.compile(r"Finish: obj=GenerateReqInput\(.*rid='HEALTH_CHECK_")

# Progress without a record header: tqdm bars, shard loading, JIT compilers.
_PROGRESS_RE = re.compile(
    r"\d+%\|.*\|\s*\d+/\d+|Completed \| \d+/\d+|flashinfer\.jit|Loading JIT ops|Compiling|nvcc|ninja|"
    r"\[\d+/\d+\]|it/s\]|s/it\]",
    re.I,
)

# --------------------------------------------------------------------------------------------------
# Crash markers (decisive as soon as seen) and candidates (decisive at end of input / process exit).

# An impossible KV budget: the profiled token count is negative, so the pool cannot be built. 0.5.9
# model_runner_kv_cache_mixin.py:379-384 logs "max_total_tokens={N} is larger than the profiled value
# {M}." and :415-419 then raises "Not enough memory. Please try to increase --mem-fraction-static."
# for any M <= 0; forks that drop that check go on to print the negative size in the pool lines
# ("KV Cache is allocated. #tokens: {N}" mem_cache/memory_pool.py:652/658, "max_total_num_tokens={N}"
# managers/scheduler.py:623).
_NEGATIVE_BUDGET_RE = re.compile(
    r"is larger than the profiled value -\d|max_total_num_tokens=-\d|#tokens: -\d"
)
# Fatal out-of-memory records SGLang logs *before* raising or exiting, often without a traceback:
# 0.1.12 infer_batch.py:233/390 "Prefill/Decode out of memory. This should nerver happen." (sic);
# 0.2.7 schedule_batch.py:386/620 "... This should never happen." then exit(); 0.3.0 schedule_batch.py:391
# and 0.3.6 :535 "... out of memory. Try to lower your batch size." then exit(1); 0.5.9
# mem_cache/common.py:285/411 (0.5.23 mem_cache/allocation.py:239/613) log it, then raise RuntimeError.
# ("Decode out of memory happened." is 0.3.x's harmless retraction notice, not this.)
_KV_EXHAUSTED_RE = re.compile(
    r"(?:Prefill|Decode) out of memory\. (?:Try to lower your batch size|This should ne(?:ve|rve)r happen)"
    r"|alloc_req_slots runs out of memory"  # 0.5.9 mem_cache/common.py:319-324 raise RuntimeError
)
_CRASH_MARKERS = (
    re.compile(r"(?:Scheduler|DataParallelController|DetokenizerManager|TokenizerManager|\w+) hit an exception"),
    re.compile(r"Received sigquit from a child proces"),  # sic: older releases print "proces"
    re.compile(r"SIGQUIT received\. signum="),
    re.compile(r"Initialization failed\. warmup error"),
    re.compile(r"scheduler died during initialization"),
    re.compile(r"Rank \d+ scheduler is dead"),
    # the diffusion server's launcher after "Rank N scheduler is dead" (https://github.com/sgl-project/sglang/issues/15235)
    re.compile(r"^Exit code: -\d+\s*$"),
    # The forward watchdog (0.5.9 / 0.5.23 utils/watchdog.py WatchdogRaw._watchdog_once) logs "{name} watchdog
    # timeout (self.watchdog_timeout=300, self.soft=False)" and SIGQUITs its parent; the soft one
    # (--soft-watchdog-timeout, soft=True) logs the same line with self.soft=True and keeps serving, so it is no
    # marker (see _SOFT_WATCHDOG_RE). Older releases and forks print "Watchdog timeout (self.watchdog_timeout=300)".
    re.compile(r"[Ww]atchdog timeout(?!\s*\([^)]*self\.soft=True\))"),
    # torch's NCCL watchdog (ProcessGroupNCCL.cpp): a collective past its timeout, or a CUDA error the watchdog
    # thread caught, tears the process down (TORCH_NCCL_ASYNC_ERROR_HANDLING, on by default) through
    # std::terminate: "terminate called after throwing an instance of 'c10::DistBackendError'" then abort.
    # Since torch 2.5 the watchdog also logs "[PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog
    # at work sequence id: 2635 PG status: ..." for any failed work, error or timeout (ProcessGroupNCCL.cpp
    # Watchdog::runLoop, LOG(ERROR) when work.exception()), before it tears the process down.
    re.compile(r"[Ww]atchdog caught collective operation timeout|[Ww]atchdog thread terminated with exception|"
               r"failure detected by watchdog at work sequence id"),
    # its heartbeat monitor, when the watchdog itself hangs: "Heartbeat monitor timed out! Process will be terminated
    # after dumping debug info." then a fatal "ProcessGroupNCCL's watchdog got stuck for 600 seconds ..."
    re.compile(r"Heartbeat monitor timed out! Process will be terminated|watchdog got stuck for \d+ seconds"),
    re.compile(r"terminate called after throwing an instance of"),
    re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code"),
    re.compile(r"Capture (?:cuda|CUDA) graph failed"),
    re.compile(r"error while attempting to bind on address|[Aa]ddress already in use"),
    re.compile(r"Fatal Python error: "),
    re.compile(r"Main process exited, code=(?:killed|dumped|exited), status=(?!0/)"),
    # sglang 0.2.x-0.3.x: the TP worker logs "Exception in ModelTpServer:" and re-raises, run_tp_server
    # logs "Exception in run_tp_server:" and re-raises, and the controller logs "Exception in
    # ControllerSingle:" / "ControllerMulti:" and kills its parent (0.3.0 managers/tp_worker.py:246,898,
    # controller_single.py:167, controller_multi.py:209; 0.2.7 tp_worker.py:211,848). 0.1.x's "Exception
    # in ModelRpcClient:" is logged and swallowed (0.1.12 router/model_rpc.py:178), so it is no marker.
    re.compile(r"Exception in (?:ModelTpServer|run_tp_server|ControllerSingle|ControllerMulti):"),
    # sglang 0.1.x: the launcher prints the failed child's traceback as its init state and exits 1
    # (0.1.12 srt/server.py:457-462).
    re.compile(r"(?:router|detoken) init state: (?!init ok)"),
    _KV_EXHAUSTED_RE,
    _NEGATIVE_BUDGET_RE,
    # Raised by the KV-pool sizing, never survivable: 0.5.9 model_runner_kv_cache_mixin.py:415-419,
    # 0.5.23 model_executor/pool_configurator.py:95-99 and mem_cache/kv_cache_configurator.py:3050-3052.
    re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"),
    re.compile(r"Loaded weights leave no GPU memory for the KV cache"),
    # `sglang serve` for diffusion models exits with SystemExit(f"error: unrecognized arguments: ..."), no
    # program name (0.5.23 multimodal_gen/runtime/server_args/server_args.py:3709).
    re.compile(r"^error: unrecognized arguments: "),
)
# argparse: "usage: ..." then "<prog>: error: <message>" and exit 2 (launch_server.py, sglang serve, ...)
_ARGPARSE_RE = re.compile(
    r"^(?:[\w.\-/]+(?: serve)?|__main__\.py): error: "
    r"(?:unrecognized arguments|ambiguous option|argument |the following arguments are required|invalid choice)"
)
# A traceback logged with a header (older releases: "[... TP0] Traceback (most recent call last):")
_HEADER_TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\)")
# A top-level exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "Exception: ...", and Triton's
# "triton.runtime.errors.OutOfResources: ..." (triton python/triton/runtime/errors.py class OutOfResources, whose
# name ends in none of the usual suffixes; https://github.com/sgl-project/sglang/issues/8513).
_EXC_LINE_RE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)|OutOfResources)(?::|$)"
)
_KILLED_RE = re.compile(r"^(?:Killed|已杀死|Aborted(?: \(core dumped\))?|Segmentation fault(?: \(core dumped\))?)\s*$")

# --------------------------------------------------------------------------------------------------
# Causes: first match in this order wins across the crash evidence.

_ARCH_RE = re.compile(
    r"No supported CUDA architectures found|no kernel image is available|Unsupported CUDA architecture|"
    r"not supported on (?:this|the current) (?:GPU|device|platform)|Current platform does not support|"
    r"[Pp]lease use Blackwell|supported only on NVIDIA|only supports sm|SM1\d\d[- ]only|"
    r"requires (?:SM|sm_?)\s?\d+|is not supported on SM|"
    r"CUDA error: (?:no kernel image|invalid device function)|cudaErrorNoKernelImageForDevice|"
    # sglang 0.5.9 multiplex/pdmux_context.py:67, jit_kernel/flash_attention/cute/interface.py:480;
    # 0.5.23 kernels/ops/attention/flash_attn/cute/interface.py:622; flashinfer 0.6.3 bundled CUTLASS
    # CuTeDSL/cutlass/utils/smem_capacity.py:25
    r"[Uu]nsupported compute capability|"
    # flashinfer trtllm-gen FMHA off SM100/103: FLASHINFER_CHECK(..., "Unsupported architecture")
    # (flashinfer 0.6.3 data/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:30)
    r"[Uu]nsupported (?:GPU |gpu )?arch(?:itecture)?\b|"
    # The toolchain does not know the GPU: nvcc "Unsupported gpu architecture 'compute_120a'", Triton's
    # bundled ptxas "Value 'sm_120' is not defined for option 'gpu-name'", "Feature ... not supported on
    # .target 'sm_120a'", or ptxas failing on a Blackwell target (https://github.com/RLinf/RLinf/issues/92,
    # https://github.com/sgl-project/sglang/issues/8879).
    r"Value 'sm_\d+[af]?' is not defined for option 'gpu-name'|not supported on \.target '?sm_\d+|"
    r"ptxas\b.*(?:--gpu-name[= ]|\.target '?)sm_1[0-2]\d[af]?\b|"
    # flashinfer 0.7.2 data/csrc/trtllm_batched_gemm_runner.cu:216-218 (FLASHINFER_CHECK) and
    # trtllm_gemm_runner.cu:174-176: "The trtllm-gen batched GEMM cubin manifest contains no kernels runnable
    # on sm120; this backend currently ships cubins for sm100, sm103 and sm107."
    r"cubin manifest contains no kernels runnable on sm\d+|"
    # sgl-kernel 0.3.21 (strings of sgl_kernel/sm100/common_ops.abi3.so and sm90/): csrc/moe/nvfp4_blockwise_moe.cu
    # cutlass_fp4_group_mm TORCH_CHECK_NOT_IMPLEMENTED "Unsupported SM version: " + sm_version;
    # csrc/moe/fp8_blockwise_moe_kernel.cu "No implemented fp8_blockwise_scaled_grouped_mm for current compute
    # capability: " (and its fp8_blockwise_scaled_mm / fp8_scaled_mm / int8_scaled_mm siblings), "cutlass_mla_decode
    # is only supported on compute capability 10.0, but found sm version "
    r"Unsupported SM (?:major )?version: \d+|No implemented \w+ for current compute capability|"
    # flashinfer's backend_requirement (0.6.3 utils.py:1146-1164, 0.7.2 utils.py:1554-1585): BackendSupportedError
    # "mm_fp4 does not support backend 'trtllm' with capability 120", "... does not support compute capability 120",
    # "No suitable auto backends found for mm_fp4"; gemm/gemm_base.py (0.6.3 :1032, 0.7.2 :2901) "Unsupported SM
    # major version: 12"; 0.7.2's CuTe kernels "... requires compute capability 10.0 or 10.3"
    r"does not support (?:backend '[^']*' with capability|compute capability) \d+|No suitable auto backends found|"
    r"requires compute capability \d|"
    r"is only supported on compute capability|"
    # sglang 0.5.23 layers/moe/moe_runner/runner.py:154-159 "--moe-runner-backend hpc_ops requires an SM90 (Hopper)
    # GPU (the HPC-Ops kernels ship sm90a only), got sm120.", layers/attention/hpc_ops_backend.py:139-143
    r"requires an? SM ?\d+|requires (?:Blackwell|Hopper)\b|"
    # sglang 0.5.9 model_loader/loader.py:232-242 (0.5.23 :256-266): "The quantization method modelopt_fp4 is not
    # supported for the current GPU. Minimum capability: 100. Current capability: 90."
    r"is not supported for the current GPU\. Minimum capability|Minimum capability: \d+\. Current capability: \d+|"
    # A kernel config that needs more shared memory per block than this GPU has: Triton's OutOfResources
    # ("out of resource: shared memory, Required: 147456, Hardware limit: 101376. Reducing block sizes or `num_stages`
    # may help.", triton python/triton/runtime/errors.py). The fused-MoE Triton configs assume a datacenter GPU's
    # shared memory; SM120 / SM121 (RTX PRO 6000, RTX 50xx, GB10) have 101376 bytes, so a MoE model without a tuned
    # config for the device dies on its first forward (https://github.com/sgl-project/sglang/issues/8513, /issues/28019;
    # sglang PR #9251 "Triton MoE kernels exceed SM120's 101KB shared memory limit", PR #28038). Not GPU memory: OOM's
    # words never match it.
    r"shared memory, Required: \d+, Hardware limit: \d+"
)
_OOM_RE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
    r"Not enough memory\. Please try to increase --mem-fraction-static|"
    r"leave no GPU memory for the KV cache|out of memory|Failed to allocate memory|"
    r"max_total_num_tokens.*(?:<= 0|too small)|"
    # 0.5.9 managers/tp_worker.py:292-294 / 0.5.23 :425 assert on a pool that cannot hold one request
    r"Memory pool size is too small|" + _NEGATIVE_BUDGET_RE.pattern
)
_CAUSE_PATTERNS = (
    (
        "flag_error",
        re.compile(
            r"(?:^|: )error: (?:unrecognized arguments|ambiguous option|argument |the following arg|invalid choice)"
        ),
    ),
    (
        "port_in_use",
        re.compile(
            r"[Aa]ddress already in use|EADDRINUSE|error while attempting to bind|[Ee]rrno 98|"
            # sglang's own port checks: 0.5.9 utils/common.py:705-735 / 0.5.23 utils/network.py:60-105
            # (wait_port_available) "nccl_port at 30005 is not available in 30 seconds. ... is used by a process
            # already", logged by server_args.py (0.5.9 :5688-5691, 0.5.23 :884-887) as "Port is already in use.
            # dist_init_port=..." before re-raising. get_open_port's "Port N is already in use, trying port M" is
            # no failure and matches none of these.
            r"\w+_port at \d+ is not available in \d+ seconds|\w+_port is used by a process already|"
            r"Port is already in use\. dist_init_port="
        ),
    ),
    ("unsupported_arch", _ARCH_RE),
    ("oom", _OOM_RE),
    (
        "jit_compile",
        re.compile(
            r"Ninja build failed|\['ninja', '-v'|run_ninja|nvcc fatal|nvcc error|error: identifier \"|"
            r"fatal error: \S+\.(?:h|hpp|cuh): No such file|CUDA_HOME environment variable is not set|"
            r"CompilationError|triton\.compiler|build_and_load|JIT compil\w* fail|Failed to compile|"
            r"PTXASError|Internal Triton PTX codegen error|"
            # the CuTe DSL building a kernel's MLIR at run time: MLIR's nanobind adaptor throws "Expected an MLIR
            # object (got ...)" (mlir/Bindings/Python/NanobindAdaptors.h), through std::terminate
            r"Expected an MLIR object"
        ),
    ),
    (
        "nccl",
        re.compile(
            r"NCCL error|ncclCommInitRank|NCCL WARN|ProcessGroupNCCL(?!\.cpp)|DistBackendError|nccl\w*Error|"
            r"gloo|collective operation timeout|failure detected by watchdog at work sequence id|"
            r"Connection closed by peer|init_process_group|"
            r"custom_all_reduce|TCPStore|dist-init-addr|Heartbeat monitor timed out|collective timeout|"
            # torch.distributed's rendezvous store: TCPStore.cpp raises DistStoreError "Timed out after 601 seconds
            # waiting for clients. 1/4 clients joined." (https://github.com/sgl-project/sglang/issues/507),
            # DistNetworkError on a broken store socket; socket.cpp warns "[c10d] waitForInput: socket ... timed out
            # after 1800000ms" while a node waits for the others (https://github.com/sgl-project/sglang/issues/7478).
            r"DistStoreError|DistNetworkError|clients joined\.|\[c10d\]"
        ),
    ),
    # sglang's forward watchdog ended a batch (or a startup) that made no progress for --watchdog-timeout: a hung
    # kernel or collective that raised nothing. Last: a log that says why it hung (NCCL above) names that instead.
    ("stuck", re.compile(r"[Ww]atchdog timeout(?!\s*\([^)]*self\.soft=True\))")),
)
_NCCL_PRIO = [cause for cause, _rx in _CAUSE_PATTERNS].index("nccl")
# NCCL's error return trace: NCCLCHECK logs each failing call on its way out as INFO "file.cc:line -> code"
# (NVIDIA/nccl src/include/checks.h, INFO(NCCL_ALL,"%s:%d -> %d", __FILE__, __LINE__, res)). Reaching init.cc after an
# "NCCL WARN" means communicator init failed ("misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to ... failed",
# then "bootstrap.cc:285 -> 2", "init.cc:1534 -> 2", "init.cc:1799 -> 2": https://github.com/sgl-project/sglang/
# issues/6017). A candidate only (the Python error it becomes may be cut from the excerpt); dropped if the launch goes
# on past init.
_NCCL_INIT_FAIL_RE = re.compile(r"NCCL INFO init\.cc:\d+ -> [1-9]\d*\s*$")
_WARMUP_CAUSE_RE = re.compile(r"Initialization failed\. warmup error")
# How a process died by a signal. The exit code decides: multiprocessing gives -signum (0.5.23
# entrypoints/engine.py:2002-2010 "Rank {rank} scheduler died during initialization (exit code: -11). If exit
# code is -9 (SIGKILL), a common cause is the OS OOM killer. ..." -- that hint names -9 whatever the code was;
# utils/watchdog.py SubprocessWatchdog "... crashed with exit code -11"), systemd "status=11/SEGV", and the
# shell and Python name the signal. SIGKILL is "killed" (the OOM killer, or someone), SIGSEGV "segfault",
# SIGABRT "aborted" (std::terminate, a failed C++ check, glibc); SIGQUIT is sglang's own teardown (a scheduler that
# hit an exception SIGQUITs its parent, 0.5.9 / 0.5.23 managers/scheduler.py run_scheduler_process, so a DP
# controller dies with -3): no cause of its own, the exception before it is the cause; another signal is "killed".
_EXIT_CODE_RE = re.compile(r"[Ee]xit code:? (-\d+)\b|status=(\d+)/[A-Z]+")
_SIGNAL_CAUSES = {9: "killed", 11: "segfault", 6: "aborted", 3: None}
_SIGNAL_WORDS = (
    (
        "segfault",
        re.compile(r"^Segmentation fault(?: \(core dumped\))?\s*$|Fatal Python error: Segmentation fault|SIGSEGV"),
    ),
    (
        "aborted",
        re.compile(
            r"^Aborted(?: \(core dumped\))?\s*$|Fatal Python error: Aborted|SIGABRT|"
            r"terminate called after throwing an instance of"
        ),
    ),
    ("killed", re.compile(r"^(?:Killed|已杀死)\s*$|code=killed|SIGKILL")),
)


def _signal_cause(line):
    """``killed`` / ``segfault`` / ``aborted`` when the line says the process died by a signal, else None."""
    m = _EXIT_CODE_RE.search(line)
    if m:
        if m.group(1):
            return _SIGNAL_CAUSES.get(-int(m.group(1)), "killed")
        if "code=exited" not in line:
            return _SIGNAL_CAUSES.get(int(m.group(2)), "killed")
    for cause, rx in _SIGNAL_WORDS:
        if rx.search(line):
            return cause
    return None


# A SIGKILL from the kernel's OOM killer, as the unit's journal shows it: systemd's "A process of this unit has
# been killed by the OOM killer." / "Failed with result 'oom-kill'." (src/core/unit.c unit_check_oom,
# src/core/service.c service_result "oom-kill"), or the kernel's "Out of memory: Killed process 1234 (python3)"
# / "Memory cgroup out of memory: Killed process ..." (mm/oom_kill.c) where the kernel log is collected too.
# sglang's own hint "a common cause is the OS OOM killer" is advice, not this.
_OOM_KILLER_RE = re.compile(
    r"has been killed by the OOM killer|Failed with result 'oom-kill'|[Oo]ut of memory: Kill(?:ed)? process|"
    r"invoked oom-killer"
)
# What the forward watchdog logs when a batch (or the startup) is stuck (0.5.9 / 0.5.23 utils/watchdog.py
# WatchdogRaw._watchdog_once: "{name} debug info:", "{name} watchdog timeout (...)"; utils pyspy_dump_schedulers:
# "Pyspy dump for PID ...", "Pyspy failed ..."): no progress, though it is output.
_WATCHDOG_REPORT_RE = re.compile(
    r"\w+ debug info:|[Ww]atchdog timeout|Pyspy (?:dump|failed)|All pyspy dump attempts failed"
)
# The soft watchdog's report (see the watchdog marker above): the server goes on; recorded as an event.
_SOFT_WATCHDOG_RE = re.compile(r"[Ww]atchdog timeout\s*\([^)]*self\.soft=True\)")
# A CUDA error that torch's NCCL watchdog thread caught and reported ("[PG ID 0 ... Rank 3] Process group watchdog
# thread terminated with exception: CUDA error: an illegal memory access was encountered"): the kernel fault is
# the cause, not NCCL, though the report comes from ProcessGroupNCCL.
_WATCHDOG_CUDA_ERROR_RE = re.compile(r"[Ww]atchdog(?: thread terminated with exception)?: (?P<msg>CUDA error: .*)")
# A record with no marker that still names a fatal error (a fork or wrapper logging the exception text
# as an ordinary record, without the traceback): a candidate, like a lone exception line. Only the
# errors' own wording: healthy launches log warnings that merely mention the same things (0.5.23
# arg_groups/overrides.py "... (trtllm-gen MoE kernels are SM100-only)", 0.5.9 deep_gemm_wrapper/
# compile_utils.py "... to avoid out of memory").
_FATAL_RECORD_RE = re.compile(
    r"CUDA out of memory\. Tried to allocate|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|"  # torch, driver
    r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice|"
    r"[Uu]nsupported compute capability|: Unsupported architecture$|"  # see _ARCH_RE
    r"ptxas fatal\s*:|nvcc fatal\s*: Unsupported gpu architecture|"
    r"Port is already in use\. dist_init_port="  # logger.exception, then raise (see the port_in_use cause)
)

# Traceback frames that tell the phase when the log has no phase lines (an excerpt).
_FRAME_PHASES = (
    ("warmup", re.compile(r"_execute_server_warmup|_wait_and_warmup")),
    (
        "serving",
        re.compile(
            r"event_loop_(?:normal|overlap|pp)|run_event_loop|dispatch_event_loop|process_batch_result|"
            r"get_next_batch_to_run|"
            # the scheduler builds a forward batch's worker input (managers/schedule_batch.py get_model_worker_batch,
            # called by Scheduler.run_batch): an engine driven in-process (verl's rollout) has no event loop frame
            r"in (?:get_model_worker_batch|run_batch)\b|"
            # a CUDA graph (full or piecewise) replayed: only a forward batch does that (0.5.9
            # model_executor/piecewise_cuda_graph_runner.py:689 and cuda_graph_runner.py replay; 0.5.23
            # model_executor/runner/decode_cuda_graph_runner.py:1521/1981 load_batch / execute)
            r"graph_runner\.py\", line \d+, in (?:replay|execute|load_batch)\b|"
            # the overlap scheduler's forward thread (0.4.6 / 0.4.10 managers/tp_worker_overlap_thread.py)
            r"forward_thread_func|"
            # 0.1.x-0.3.x: the TP server's step loop (0.3.0 managers/tp_worker.py:225 exposed_step, :255
            # forward_step, :493 forward_prefill_batch, :653 forward_decode_batch, :922 broadcast_recv_input
            # waiting for the next batch; 0.1.12 router/model_rpc.py:161 exposed_step, :391 forward_fill_batch)
            r"exposed_step|forward_step|forward_(?:prefill|decode|fill)_batch|broadcast_recv_input"
        ),
    ),
    (
        "cuda_graph",
        re.compile(r"cuda_graph_runner|init_cuda_graphs|init_device_graphs|capture_one_batch_size|cuda_graph_setup"),
    ),
    ("kv_cache", re.compile(r"init_memory_pool|memory_pool\.py|profile_max_num_token|kv_cache_configurator")),
    ("load_weights", re.compile(r"load_model|model_loader|load_weights|weight_utils")),
    ("init", re.compile(r"initialize_model_parallel|init_torch_distributed|init_distributed_environment|pynccl")),
)
# Markers that fix the phase outright.
_PHASE_FROM_MARKER = (
    ("cuda_graph", re.compile(r"Capture (?:cuda|CUDA) graph failed")),
    ("warmup", re.compile(r"Initialization failed\. warmup error")),
    ("kv_cache", re.compile(r"leave no GPU memory for the KV cache|Not enough memory\. Please try to increase")),
    ("kv_cache", _NEGATIVE_BUDGET_RE),
)
# Markers that only happen once batches run, so in an excerpt with no phase lines they mean "serving"
# (like the frames above): the KV pool running out under load, and the forward watchdog, which only
# arms while a batch is in flight (0.3.6 managers/scheduler.py:345-356, 0.5.9 utils/watchdog.py).
_PHASE_HINT_FROM_MARKER = (("serving", re.compile(_KV_EXHAUSTED_RE.pattern + r"|[Ww]atchdog timeout")),)

# Lines that look alarming and are not (printed by healthy launches). Never evidence of a cause.
_HARMLESS_RE = re.compile(
    r"Ignore import error when loading|is deprecated|DeprecationWarning|FutureWarning|UserWarning|"
    r"\"GET /health(?:_generate)? HTTP/[\d.]+\" 503|warnings\.warn|torch\._dynamo|NCCL INFO|"
    # 0.3.x's retraction notice (0.3.0 managers/tp_worker.py:662, 0.3.6 managers/scheduler.py:889)
    r"[Dd]ecode out of memory happened"
)
# Health-check access lines are produced by our own poller: they are not progress of the server.
_HEALTH_ACCESS_RE = re.compile(r"\"GET /(?:health|health_generate|ready) HTTP/")

_TB_KEEP_HEAD = 2
_TB_KEEP_TAIL = 14


def _strip_outer(line):
    """Strip collector / orchestrator prefixes. Returns (line, headed): ``headed`` when one of them was
    another logger's record header around the message (not a per-line transport prefix)."""
    headed = False
    for _ in range(6):
        # Outermost first, and start over after each: a prefix can wrap another one.
        for kind, rx in _OUTER_PREFIXES:
            m = rx.match(line)
            if m and m.end() > 0:
                line = line[m.end():]
                if kind == "dynamo":
                    # `dynamo run` relays a subprocess's raw lines under "dynamo_run::subprocess"
                    headed = "::" not in m.group("target")
                elif kind == "fastchat":
                    headed = m.group("target") not in ("stdout", "stderr")
                break
        else:
            break
    return _RAY_REPEAT_RE.sub("", line), headed


def _parse_ts(ts, frac):
    try:
        value = float(calendar.timegm(_time.strptime(ts, "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return None
    if frac:
        try:
            value += float("0." + frac[1:])
        except ValueError:
            pass
    return value


def _parse_hms(hms):
    """Seconds since midnight of a time-only header (the caller unwraps day rollovers)."""
    h, m, s = (int(x) for x in hms.split(":"))
    if h > 23 or m > 59 or s > 60:
        return None
    return float(h * 3600 + m * 60 + s)


# Docker's json-file log driver writes each line the container printed as {"log":"<line>\n","stream":"stderr",
# "time":"..."} (https://docs.docker.com/engine/logging/drivers/json-file/); a log collected from those files
# (or shipped raw by an orchestrator) carries every record inside one.
_DOCKER_JSON_RE = re.compile(r'^\s*\{"log":"(?P<line>(?:[^"\\]|\\.)*)","stream":"(?:stdout|stderr)"')


def _unwrap_docker_json(text):
    if '{"log":"' not in text:
        return text
    lines = []
    for line in text.split("\n"):
        m = _DOCKER_JSON_RE.match(line)
        if m:
            try:
                line = json.loads('"%s"' % m.group("line")).rstrip("\n")
            except ValueError:
                pass
        lines.append(line)
    return "\n".join(lines)


def _split_physical(text):
    out = []
    text = _unwrap_docker_json(text)
    for physical in _ANSI_RE.sub("", text).replace("\r\n", "\n").split("\n"):
        for seg in physical.split("\r"):
            seg, headed = _strip_outer(seg.rstrip())
            # A header that does not start the segment: split there, keeping both parts.
            m = _HEADER_RE.search(seg)
            if m and m.start() > 0:
                head = seg[: m.start()].rstrip()
                if head:
                    out.append((head, headed))
                seg = seg[m.start():]
                headed = False
            out.append((seg, headed))
    return out


def split_records(line):
    """Split one chunk of output into records: newlines, tqdm carriage returns, and records glued after
    other output (``...[2025-04-17 11:44:15 TP3] Scheduler hit ...``). Returns a list of strings."""
    return [seg for seg, _ in _split_physical(line)]


class Record:
    """One parsed record: message text, wall time (or None), rank prefix, whether it had a header."""

    __slots__ = ("raw", "msg", "wall", "ranks", "headed", "indented", "time_only")

    def __init__(self, raw, outer_headed=False):
        self.raw = raw
        self.time_only = False
        m = _HEADER_RE.match(raw)
        if not m:
            md = _MD_HEADER_RE.match(raw)
            if md:
                # a leap year, so that 02-29 parses; the year itself is not in the record
                wall = _parse_ts("2000-%s %s" % (md.group("md"), md.group("hms")), None)
                if wall is not None:
                    m = md
        h = None if m else _HMS_HEADER_RE.match(raw)
        if m is not None and m.re is _MD_HEADER_RE:
            self.msg = raw[m.end():]
            self.wall = wall
            self.ranks = m.group("ranks").strip()
            self.headed = True
        elif m:
            self.msg = raw[m.end():]
            self.wall = _parse_ts(m.group("ts"), m.group("frac"))
            self.ranks = m.group("ranks").strip()
            self.headed = True
        elif h:
            self.msg = raw[h.end():]
            self.wall = _parse_hms(h.group("hms"))
            self.time_only = self.wall is not None
            self.ranks = h.group("ranks").strip()
            self.headed = True
        else:
            r = _RANK_ONLY_RE.match(raw)
            self.msg = raw[r.end():] if r else raw
            self.wall = None
            self.ranks = raw[1: r.end() - 1].strip() if r else ""
            self.headed = bool(r) or outer_headed
        self.indented = (not self.headed) and raw[:1] in (" ", "\t")


class SglangLogClassifier:
    """Incremental classifier. ``feed(text, t=None)`` any number of times, then read ``state`` /
    ``result()``. ``finish()`` marks end of input (a static file, or the process has exited): a bare
    traceback, a lone exception line or a fatal-looking record at the end then counts as the crash."""

    def __init__(self):
        self.phase = "init"
        self._phase_times = {}  # phase -> (time, source) first seen
        self._events = {}  # load_weights_end, cuda_graph_end -> time
        self.ready_seen = False
        self.ready_inferred = False
        self.crashed = False
        self.crash_phase = None
        self.after_ready = False
        self.first_marker = None
        self._cause_hits = []  # (priority, line)
        self._blocks = []  # traceback blocks: lists of lines
        self._in_block = False
        self._pending = None  # candidate crash line (bare traceback / exception line / Killed)
        self._pending_phase = None
        self._finished = False
        self._generate_200 = 0
        self._recent = []  # last suspicious lines before a crash (NCCL WARN etc.)
        self.first_time = None
        self.last_time = None
        self.last_progress = None
        self.lines_seen = 0
        self._block_closed = False
        self._markers = []
        self._frame_phase = None
        self._day_offset = 0.0  # time-only headers: days added after midnight rollovers
        self._last_hms = None
        self._oom_killer_line = None
        self._in_dump = False
        self._pending_soft = False  # the candidate is NCCL's init return trace: void once the launch goes on

    # ------------------------------------------------------------------ feeding
    def feed(self, text, t=None):
        """Feed a chunk (one line or many). ``t``: monotonic time the chunk was read; when omitted the
        record's own header time is used (static files). Returns self for chaining in checks."""
        for raw, outer_headed in _split_physical(text):
            self._feed_record(Record(raw, outer_headed), t)
        return self

    def feed_lines(self, lines, t=None):
        for line in lines:
            self.feed(line, t)
        return self

    def _now(self, rec, t):
        if t is not None:
            return float(t)
        if rec.wall is not None:
            if not rec.time_only:
                return rec.wall
            if self._last_hms is not None and rec.wall < self._last_hms - 43200:
                self._day_offset += 86400.0
            self._last_hms = rec.wall
            return rec.wall + self._day_offset
        return self.last_time

    def _candidate(self, line, phase=None, soft=False):
        self._pending = line
        self._pending_phase = phase if phase is not None else self.phase
        self._pending_soft = soft

    def _feed_record(self, rec, t):
        msg = rec.msg
        if not msg.strip():
            return
        self.lines_seen += 1
        now = self._now(rec, t)
        if rec.headed or _PROGRESS_RE.search(msg):
            # the watchdogs' reports (and the request / py-spy dump lines under them) say the server is stuck
            self._in_dump = bool(_WATCHDOG_REPORT_RE.search(msg))
        if now is not None:
            if self.first_time is None:
                self.first_time = now
            self.last_time = now
            if not _HEALTH_ACCESS_RE.search(msg) and not self._in_dump:
                self.last_progress = now
        if "init" not in self._phase_times:
            self._phase_times["init"] = now
        if self._oom_killer_line is None and _OOM_KILLER_RE.search(msg):
            self._oom_killer_line = msg.strip()
        if _SOFT_WATCHDOG_RE.search(msg):
            # --soft-watchdog-timeout: a forward batch ran past it; the server dumps and keeps serving
            self._events.setdefault("soft_watchdog", now)

        # Traceback block bookkeeping: indented or exception lines continue a block; a headed record ends it.
        if self._in_block:
            if rec.headed and not _HEADER_TRACEBACK_RE.match(msg):
                self._in_block = False
                self._block_closed = True
            else:
                self._blocks[-1].append(msg)
                if any(rx.search(msg) for rx in _CRASH_MARKERS):
                    self._crash(msg.strip(), now)
                stripped = msg.strip()
                if not rec.indented and _EXC_LINE_RE.match(stripped):
                    self._note_cause(stripped)
                    if not self.crashed:
                        self._candidate(stripped, self._marker_phase(stripped))
                elif rec.indented:
                    self._note_frame(msg)
                    self._note_cause(stripped, frame=True)
                else:
                    # The exception message's own continuation lines ("`ptxas` stderr:" / "ptxas fatal :
                    # Value 'sm_120' ...", "Try to allocate 8192 tokens.") speak for the cause too.
                    self._note_cause(stripped)
                return

        harmless = bool(_HARMLESS_RE.search(msg))
        self._track_phase(msg, now)

        if harmless:
            if (
                self._pending is None
                and not self.crashed
                and _NCCL_INIT_FAIL_RE.search(msg)
                and any("NCCL WARN" in line for line in self._recent)
            ):
                # the cause comes from the NCCL WARN kept in _recent (this line itself is INFO)
                self._candidate(msg.strip(), soft=True)
            return

        stripped = msg.strip()
        marker = _ARGPARSE_RE.match(stripped) or any(rx.search(msg) for rx in _CRASH_MARKERS)
        if not marker and rec.headed and _HEADER_TRACEBACK_RE.match(msg):
            marker = True
        if marker:
            self._crash(stripped, now)
            # The traceback follows on the marker's line or, after "Exception in ModelTpServer:" and
            # the like, on the next lines: the crash is settled only once it has been read.
            if (
                "Traceback (most recent call last)" in msg
                or stripped.endswith(":")
                or "terminate called after throwing" in msg
            ):
                self._blocks.append([stripped])
                self._in_block = True
            return

        if not rec.headed:
            if stripped.startswith("Traceback (most recent call last)") or stripped.startswith(
                "During handling of the above exception"
            ):
                if not self._in_block:
                    self._blocks.append([stripped])
                    self._in_block = True
                if self._pending is None:
                    self._candidate(stripped)
                return
            if rec.indented and stripped.startswith("File \""):
                # A traceback whose head was cut off (an excerpt) or scrolled out.
                self._blocks.append([stripped])
                self._in_block = True
                self._note_frame(stripped)
                self._note_cause(stripped, frame=True)
                if self._pending is None:
                    self._candidate(stripped)
                return
            if _KILLED_RE.match(stripped):
                self._note_cause(stripped)
                if self._pending is None:
                    self._candidate(stripped)
                return
        # A lone exception line ("RuntimeError: ..."), a logged one that names a known cause ("[... TP0]
        # ValueError: ... Unsupported ..."; a request's error logged while serving, such as 0.5.23
        # openai/serving_base.py's "DS32EncodingError: ...", is none), or a record that names a fatal
        # error without any marker or traceback (forks, wrappers, orchestrators re-logging the message):
        # a candidate, decisive at end of input / process exit.
        exc = _EXC_LINE_RE.match(stripped)
        if _FATAL_RECORD_RE.search(stripped) or (
            exc and (not rec.headed or any(rx.search(stripped) for _, rx in _CAUSE_PATTERNS))
        ):
            self._note_cause(stripped)
            self._candidate(stripped, self._marker_phase(stripped))
            return
        if re.search(r"NCCL WARN|ERROR|[Ee]rror:|CUDA error|\[c10d\]", msg):
            self._recent.append(stripped)
            del self._recent[:-20]

    # ------------------------------------------------------------------ phases
    def _enter(self, phase, now):
        if self._pending_soft and _PHASE_INDEX[phase] > _PHASE_INDEX["init"]:
            self._pending = None  # NCCL's init failed trace, yet the launch went on: survived
            self._pending_soft = False
        if self._phase_times.get(phase) is None:
            self._phase_times[phase] = now
        if _PHASE_INDEX[phase] > _PHASE_INDEX[self.phase]:
            # Fill skipped phases' absence honestly: only phases actually seen get a time.
            self.phase = phase

    def _track_phase(self, msg, now):
        if self.crashed:
            return
        for phase, rx in _PHASE_PATTERNS:
            if rx.search(msg):
                if phase == "ready":
                    self.ready_seen = True
                self._enter(phase, now)
        if _LOAD_END_RE.search(msg) and "load_weights_end" not in self._events:
            self._events["load_weights_end"] = now
        if _DIST_BEGIN_RE.search(msg):
            self._events.setdefault("distributed_init_begin", now)
        if _DIST_END_RE.search(msg):
            # every rank logs it: the last one is when the distributed init is done
            self._events["distributed_init_end"] = now
        if _GRAPH_END_RE.search(msg):
            self._events["cuda_graph_end"] = now
        if _SUMMARY_RE.search(msg):
            self._events.setdefault("scheduler_ready", now)
        # Serving traffic
        serving = False
        m = _BATCH_RE.search(msg)
        if m:
            if m.group("kind") == "Decode" or int(m.group("run")) > 0 or int(m.group("q") or 0) > 0:
                serving = True
            # The scheduler ran a batch after the candidate: that traceback / exception was survived.
            self._pending = None
        if _FALLBACK_RE.search(msg):
            self._pending = None  # the loader caught it and loads the native component instead
        if _API_ACCESS_RE.search(msg):
            serving = True
        if _GENERATE_200_RE.search(msg):
            self._generate_200 += 1
            if self._generate_200 > 1:
                serving = True
        if (not serving and _HEALTH_GEN_DONE_RE.search(msg) and self.phase == "init"
                and len(self._phase_times) <= 1):
            # an excerpt that begins mid-run with a health check: up, and no user traffic seen
            self.ready_inferred = True
            self._enter("ready", now)
        if serving:
            if self.ready_seen or self.phase == "ready":
                self._enter("serving", now)
            elif _PHASE_INDEX[self.phase] <= _PHASE_INDEX["warmup"]:
                # Requests served while warmup was still to finish are still warmup unless we never saw
                # the startup at all (an excerpt that begins mid-run): then it is serving.
                if self.phase == "init" and len(self._phase_times) <= 1:
                    self.ready_inferred = True
                    self._enter("serving", now)

    def _marker_phase(self, text):
        for phase, rx in _PHASE_FROM_MARKER:
            if rx.search(text):
                return phase
        return None

    def _hint_phase(self, phase):
        if self._frame_phase is None or _PHASE_INDEX[phase] > _PHASE_INDEX[self._frame_phase]:
            self._frame_phase = phase

    def _note_frame(self, text):
        for phase, rx in _FRAME_PHASES:
            if rx.search(text):
                self._hint_phase(phase)
                return

    # ------------------------------------------------------------------ crash evidence
    def _crash(self, line, now):
        self._markers.append(line)
        if not self.crashed:
            self.crashed = True
            self.first_marker = line
            self.crash_time = now
            self.after_ready = self.ready_seen or self.phase == "serving"
            self.crash_phase = self._marker_phase(line)
        for phase, rx in _PHASE_HINT_FROM_MARKER:
            if rx.search(line):
                self._hint_phase(phase)
        self._note_cause(line)

    def _note_cause(self, line, frame=False):
        m = _WATCHDOG_CUDA_ERROR_RE.search(line)
        if m:
            for prio, (cause, rx) in enumerate(_CAUSE_PATTERNS):
                if cause in ("unsupported_arch", "oom") and rx.search(m.group("msg")):
                    self._cause_hits.append((prio, cause, line))
                    return
            # beats the NCCL evidence the same report carries (ProcessGroupNCCL frames, DistBackendError)
            self._cause_hits.append((_NCCL_PRIO - 0.25, "other", line))
            return
        if frame:
            # Frames only speak for compiler / collective failures (a path through run_ninja, pynccl ...).
            for prio, (cause, rx) in enumerate(_CAUSE_PATTERNS):
                if cause in ("jit_compile", "nccl") and rx.search(line):
                    self._cause_hits.append((prio + 0.5, cause, line))
                    return
            return
        if _HARMLESS_RE.search(line):
            return
        for prio, (cause, rx) in enumerate(_CAUSE_PATTERNS):
            if rx.search(line):
                self._cause_hits.append((prio, cause, line))
                return
        if _WARMUP_CAUSE_RE.search(line):
            self._cause_hits.append((len(_CAUSE_PATTERNS), "warmup_failed", line))
        elif _signal_cause(line):
            # An exception line that names the signal (e.g. "scheduler died ... exit code: -11") beats the bare
            # systemd exit line.
            prio = len(_CAUSE_PATTERNS) + (0.25 if _EXC_LINE_RE.match(line) else 1)
            self._cause_hits.append((prio, _signal_cause(line), line))
        elif _EXC_LINE_RE.match(line):
            # An exception no cause pattern knows (e.g. "RuntimeError: CUDA error: an illegal memory
            # access") still says more than the SIGKILL that follows it: cause "other", this line decisive.
            self._cause_hits.append((len(_CAUSE_PATTERNS) + 0.5, "other", line))

    def finish(self):
        """End of input -- a static file's end, or the live waiter seeing the process gone: promote a
        trailing candidate (bare traceback / exception line / fatal record / ``Killed``) to the crash.
        Idempotent."""
        if self._finished:
            return self
        self._finished = True
        if not self.crashed and self._pending is not None:
            self.crashed = True
            self.first_marker = self._pending
            self._markers.append(self._pending)
            if self.ready_seen:
                # A traceback after the ready line with the process gone is a crash after ready.
                self.after_ready = True
                self.crash_phase = self.phase
            else:
                self.after_ready = self.phase == "serving"
                self.crash_phase = self._marker_phase(self._pending)
                if self.crash_phase is None and self._pending_phase != "init":
                    self.crash_phase = self._pending_phase
            for phase, rx in _PHASE_HINT_FROM_MARKER:
                if rx.search(self._pending):
                    self._hint_phase(phase)
            self._note_cause(self._pending)
        return self

    # ------------------------------------------------------------------ reading
    @property
    def state(self):
        if self.crashed:
            return "crashed"
        if self.ready_seen or self.ready_inferred:
            return "ready"
        return "starting"

    @property
    def crash_settled(self):
        """True once the crash's traceback has been followed by another record (or input ended), i.e. the
        cause is as good as it will get from the log."""
        return self.crashed and (self._finished or not self._in_block or self._block_closed)

    def _best_cause(self):
        if not self._cause_hits and self._recent:
            for line in self._recent:
                self._note_cause(line)
        if not self._cause_hits:
            return "other", None
        prio, cause, line = min(self._cause_hits, key=lambda h: h[0])
        if cause == "killed" and self._oom_killer_line is not None:
            # the SIGKILL came from the kernel's OOM killer: host memory, not the GPU's
            return "oom", self._oom_killer_line
        # A warmup failure whose only evidence is the HTTP assertion stays warmup_failed; a specific cause
        # seen anywhere (scheduler traceback: OOM, arch, NCCL ...) wins over it.
        return cause, line

    def _died_phase(self):
        """The phase the server died in: the marker's own phase (``Capture cuda graph failed`` ->
        cuda_graph, ``warmup error`` -> warmup), else the phase reached, else -- for an excerpt with no
        phase lines at all -- what the traceback's frames (or a serving-only marker) say."""
        if self.crash_phase is not None:
            return self.crash_phase
        phase = self.phase
        inferred = self._frame_phase
        if inferred is not None and _PHASE_INDEX[inferred] > _PHASE_INDEX[phase]:
            only_init = all(p == "init" for p, at in self._phase_times.items() if at is not None)
            # Serving frames count in an excerpt with no phase lines, or once the ready line was seen
            # (the first request's crash dies in the event loop: serving, not "ready").
            if inferred != "serving" or only_init or self.ready_seen:
                phase = inferred
        return phase

    def _decisive_marker(self):
        # The child's own line says more than the parent's "Received sigquit" or systemd's exit line.
        for line in self._markers:
            if not re.search(r"sigquit|SIGQUIT|Main process exited", line):
                return line
        return self.first_marker

    def traceback_excerpt(self):
        if not self._blocks:
            return None
        block = self._blocks[0]
        if len(block) > _TB_KEEP_HEAD + _TB_KEEP_TAIL:
            block = block[:_TB_KEEP_HEAD] + ["..."] + block[-_TB_KEEP_TAIL:]
        return "\n".join(block)

    def timeline(self):
        """phase -> {"at": offset seconds from the first record, "duration": seconds until the next phase
        seen (None for the last)}, plus events (load_weights_end, cuda_graph_end) as offsets."""
        base = self.first_time
        seen = [(p, self._phase_times[p]) for p in PHASES if self._phase_times.get(p) is not None]
        out = {}
        for i, (phase, at) in enumerate(seen):
            nxt = seen[i + 1][1] if i + 1 < len(seen) else None
            entry = {"at": round(at - base, 3) if base is not None else None, "duration": None}
            if nxt is not None:
                entry["duration"] = round(nxt - at, 3)
            out[phase] = entry
        if "load_weights" in out and self._events.get("load_weights_end") is not None:
            began = self._phase_times["load_weights"]
            out["load_weights"]["duration"] = round(self._events["load_weights_end"] - began, 3)
        began, ended = self._events.get("distributed_init_begin"), self._events.get("distributed_init_end")
        if "init" in out and began is not None and ended is not None and ended >= began:
            out["init"]["distributed_duration"] = round(ended - began, 3)
        if "cuda_graph" in out and self._events.get("cuda_graph_end") is not None:
            out["cuda_graph"]["duration"] = round(self._events["cuda_graph_end"] - self._phase_times["cuda_graph"], 3)
        for name, at in self._events.items():
            if at is not None and base is not None:
                out.setdefault("events", {})[name] = round(at - base, 3)
        return out

    def stalled(self, now, stall_timeout):
        """Pure predicate: no progress record for ``stall_timeout`` seconds while starting. ``now`` is on the
        clock the caller fed ``t`` with (or header wall time when feeding without ``t``). tqdm, shard and
        JIT compiler lines count as progress: a slow compile that still prints is not a hang."""
        if self.state != "starting":
            return False
        ref = self.last_progress if self.last_progress is not None else self.first_time
        if ref is None:
            return False
        return (now - ref) >= stall_timeout

    def result(self):
        state = self.state
        out = {
            "state": state,
            "cause": None,
            "phase": self.phase,
            "after_ready": False,
            "decisive_line": None,
            "traceback": None,
            "ready_inferred": self.ready_inferred and not self.ready_seen,
            "timeline": self.timeline(),
        }
        if state == "crashed":
            cause, line = self._best_cause()
            phase = self._died_phase()
            out["cause"] = cause
            out["phase"] = phase
            out["after_ready"] = bool(phase != "warmup" and (self.after_ready or phase == "serving"))
            out["decisive_line"] = line or self._decisive_marker()
            out["traceback"] = self.traceback_excerpt()
        elif state == "ready":
            out["after_ready"] = False
            out["decisive_line"] = (
                "The server is fired up and ready to roll!" if self.ready_seen else None
            )
        return out


def classify_text(text):
    """Classify a whole saved log (a static file: ends with ``finish()``)."""
    return SglangLogClassifier().feed(text).finish().result()


def classify_lines(lines):
    c = SglangLogClassifier()
    for line in lines:
        c.feed(line)
    return c.finish().result()
