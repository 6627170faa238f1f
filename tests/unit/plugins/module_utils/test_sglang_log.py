# ruff: noqa: E501  (verbatim SGLang log lines are long)
"""The SGLang log classifier on real logs (tests/fixtures/sglang-logs, cited in SOURCES.md) and on
SGLang's own source strings."""

from __future__ import annotations

import re

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_log
from ansible_collections.moesweep.sweep.plugins.module_utils.sglang_log import (
    SglangLogClassifier,
    classify_text,
)
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIXTURES = FIXTURES_ROOT / "sglang-logs"


def _sources():
    rows = []
    for line in (FIXTURES / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0].endswith(".log"):
            name, url, state, cause, phase, after_ready = cells[:6]
            rows.append(
                pytest.param(
                    name,
                    url,
                    state,
                    None if cause == "-" else cause,
                    phase,
                    after_ready == "true",
                    id=name[:-4],
                )
            )
    return rows


SOURCES = _sources()


def test_corpus_is_complete_and_cited():
    listed = {p.values[0] for p in SOURCES}
    on_disk = {p.name for p in FIXTURES.glob("*.log")}
    assert listed == on_disk
    assert len(listed) >= 60
    for p in SOURCES:
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", p.values[1])
    causes = {p.values[3] for p in SOURCES if p.values[3]}
    assert {"oom", "unsupported_arch", "nccl", "jit_compile", "flag_error", "port_in_use", "warmup_failed"} <= causes


# The file name's first word is the kind of log; the expected verdict in SOURCES.md must agree with it.
_KIND_STATE = {"ready": "ready", "starting": "starting", "hang": "starting"}
_KIND_CAUSE = {
    "oom": "oom",
    "arch": "unsupported_arch",
    "nccl": "nccl",
    "jit": "jit_compile",
    "flag": "flag_error",
    "port": "port_in_use",
}


def test_corpus_kinds_agree_with_expected_verdicts():
    kinds = {}
    for p in SOURCES:
        name, _url, state, cause = p.values[:4]
        kind = name.split("_", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        assert kind in set(_KIND_STATE) | set(_KIND_CAUSE) | {"crash"}, name
        assert state == _KIND_STATE.get(kind, "crashed"), name
        if kind in _KIND_CAUSE:
            assert cause == _KIND_CAUSE[kind], name
    # every kind is represented by more than a token example
    assert kinds["crash"] >= 20 and kinds["oom"] >= 8 and kinds["arch"] >= 6
    assert kinds["ready"] >= 3 and kinds["starting"] + kinds["hang"] >= 12
    assert min(kinds[k] for k in ("nccl", "jit", "flag")) >= 2


@pytest.mark.parametrize("name,url,state,cause,phase,after_ready", SOURCES)
def test_corpus_verdict(name, url, state, cause, phase, after_ready):
    result = classify_text((FIXTURES / name).read_text(encoding="utf-8"))
    assert result["state"] == state, result
    assert result["cause"] == cause, result
    assert result["phase"] == phase, result
    assert result["after_ready"] is after_ready, result
    if state == "crashed":
        assert result["decisive_line"]


@pytest.mark.parametrize("name,url,state,cause,phase,after_ready", SOURCES)
def test_corpus_line_by_line_equals_whole_file(name, url, state, cause, phase, after_ready):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    c = SglangLogClassifier()
    for line in text.splitlines(keepends=True):
        c.feed(line)
    assert c.finish().result() == classify_text(text)


@pytest.mark.parametrize("name,url,state,cause,phase,after_ready", SOURCES)
def test_corpus_live_waiter_path_decides_like_the_static_file(name, url, state, cause, phase, after_ready):
    """The readiness waiter feeds each journal line with its monotonic read time and, when systemd reports
    the unit gone, calls ``finish()``: a crash that a static file decides only at its end (a bare
    traceback, a lone exception line, a fatal record without a marker) must be decided the same way."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    c = SglangLogClassifier()
    for i, line in enumerate(text.splitlines()):
        c.feed(line, t=1000.0 + 0.05 * i)
    streaming_state = c.state
    r = c.finish().result()
    static = classify_text(text)
    for key in ("state", "cause", "phase", "after_ready", "decisive_line", "traceback"):
        assert r[key] == static[key], (key, r[key], static[key])
    assert r["state"] == state
    # finish() only ever turns a candidate into a crash; it never undoes a verdict already reached
    if streaming_state != "starting":
        assert r["state"] == streaming_state
    assert c.finish().result() == r  # idempotent, as the waiter may call it once more


@pytest.mark.parametrize(
    "name,cause",
    [
        ("arch_fork_record_no_traceback_mini_sglang.log", "unsupported_arch"),
        ("oom_record_dynamo_nested_prefix.log", "oom"),
        ("crash_compose_fastchat_runtime.log", "other"),
        ("nccl_warn_socket_abort_init_return_trace.log", "nccl"),
        ("arch_triton_smem_gb10_sm121_gemma4.log", "unsupported_arch"),
        ("crash_bare_tail_marlin_moe_sum_reduce.log", "other"),
    ],
)
def test_end_of_input_crashes_are_candidates_until_the_process_is_gone(name, cause):
    c = SglangLogClassifier()
    for i, line in enumerate((FIXTURES / name).read_text(encoding="utf-8").splitlines()):
        c.feed(line, t=float(i))
    assert c.state == "starting"  # the process may still be running: not decisive yet
    assert c.finish().state == "crashed"
    assert c.result()["cause"] == cause


def test_decisive_lines():
    r = classify_text((FIXTURES / "nccl_unhandled_system_error.log").read_text())
    assert r["decisive_line"].startswith("RuntimeError: NCCL error: unhandled system error")
    r = classify_text((FIXTURES / "oom_kv_pool_compose.log").read_text())
    assert r["decisive_line"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert "init_memory_pool" in r["traceback"]
    r = classify_text((FIXTURES / "crash_sigquit_first_glued.log").read_text())
    # the child's line, not the parent's sigquit
    assert "Scheduler hit an exception" in r["decisive_line"]
    r = classify_text((FIXTURES / "flag_unrecognized_enable_reasoning.log").read_text())
    assert r["decisive_line"] == "launch_server.py: error: unrecognized arguments: --enable-reasoning"
    r = classify_text((FIXTURES / "port_in_use_uvicorn.log").read_text())
    assert "address already in use" in r["decisive_line"]
    # orchestrator prefixes are gone from the decisive line; the line that names the cause decides
    r = classify_text((FIXTURES / "oom_record_dynamo_nested_prefix.log").read_text())
    assert r["decisive_line"].startswith("CUDA out of memory. Tried to allocate 112.00 MiB.")
    r = classify_text((FIXTURES / "arch_ptxas_sm120_ray_sglangworker.log").read_text())
    assert r["decisive_line"] == "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'"
    r = classify_text((FIXTURES / "oom_kv_negative_profiled_rocm_dp.log").read_text())
    assert "the profiled value -561981" in r["decisive_line"]
    r = classify_text((FIXTURES / "crash_serving_old_hms_header_run_tp_server.log").read_text())
    assert r["decisive_line"] == "Exception in run_tp_server:"


def test_ready_inferred_is_reported():
    r = classify_text((FIXTURES / "ready_serving_hicache.log").read_text())
    assert r["ready_inferred"] is True


# ---------------------------------------------------------------------------------------------- source strings
# A full launch in SGLang 0.5.23's strings (model_executor/model_runner.py Load weight begin/end,
# mem_cache/memory_pool.py KV Cache is allocated, model_runner_components/cuda_graph_setup.py Capture target
# decode CUDA graph begin/end, managers/scheduler.py max_total_num_tokens=, entrypoints/http_server.py
# fired up), tp 2, with harmless lines mixed in.
S23_READY = """\
[2026-10-30 12:00:00] server_args=ServerArgs(model_path='m', tp_size=2)
[2026-10-30 12:00:01 TP1] Ignore import error when loading sglang.srt.models.glm4v_moe: No module named 'x'
[2026-10-30 12:00:02 TP0] Init torch distributed begin.
[2026-10-30 12:00:05 TP0] Load weight begin. avail mem=94.00 GB
Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:10<00:10, 10.00s/it]\r\
Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:20<00:00, 10.00s/it]
[2026-10-30 12:00:45 TP0] Load weight end. elapsed=40.00 s, type=GlmMoeDsaForCausalLM, avail mem=20.00 GB, mem usage=74.00 GB.
[2026-10-30 12:00:46 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, KV size: 8.00 GB
[2026-10-30 12:00:46 TP0] Memory pool end. avail mem=11.00 GB
[2026-10-30 12:00:47 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=11.00 GB
Capturing batches (bs=64 avail_mem=10.90 GB):  50%|█████     | 4/8 [00:02<00:02,  2.00it/s]\r\
[2026-10-30 12:01:07 TP1] Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=20.00 s, mem usage=1.00 GB, avail mem=10.00 GB.
[2026-10-30 12:01:07 TP0] Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=20.00 s, mem usage=1.00 GB, avail mem=10.00 GB.
[2026-10-30 12:01:08 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=8192, available_gpu_mem=10.00 GB
[2026-10-30 12:01:09] INFO:     Started server process [1234]
[2026-10-30 12:01:09] INFO:     Waiting for application startup.
[2026-10-30 12:01:09] INFO:     Application startup complete.
[2026-10-30 12:01:09] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-10-30 12:01:10] INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 503 Service Unavailable
[2026-10-30 12:01:10] INFO:     127.0.0.1:40002 - "GET /model_info HTTP/1.1" 200 OK
[2026-10-30 12:01:11 TP0] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 0.00
[2026-10-30 12:01:12] INFO:     127.0.0.1:40004 - "POST /generate HTTP/1.1" 200 OK
[2026-10-30 12:01:12] The server is fired up and ready to roll!
"""


def test_s23_launch_is_ready_with_timeline():
    r = classify_text(S23_READY)
    assert r["state"] == "ready"
    assert r["phase"] == "ready"
    assert r["decisive_line"] == "The server is fired up and ready to roll!"
    tl = r["timeline"]
    assert list(k for k in tl if k != "events") == [
        "init", "load_weights", "kv_cache", "cuda_graph", "http_up", "warmup", "ready"
    ]
    assert tl["load_weights"] == {"at": 5.0, "duration": 40.0}
    assert tl["cuda_graph"] == {"at": 47.0, "duration": 20.0}
    assert tl["ready"]["at"] == 72.0
    assert tl["events"]["cuda_graph_end"] == 67.0


def test_streaming_verdict_arrives_with_the_line():
    c = SglangLogClassifier()
    lines = S23_READY.splitlines(keepends=True)
    for line in lines[:-1]:
        c.feed(line)
        assert c.state == "starting"
    c.feed(lines[-1])
    assert c.state == "ready"


def test_crash_after_ready_with_parent_sigquit_after():
    text = S23_READY + (
        "[2026-10-30 12:05:00 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0\n"
        "[2026-10-30 12:05:01 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 100, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        "[2026-10-30 12:05:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: second rank\n"
        "[2026-10-30 12:05:01] SIGQUIT received. signum=None, frame=None. It usually means one child failed.\n"
    )
    r = classify_text(text)
    assert r["state"] == "crashed"
    assert r["after_ready"] is True
    assert r["phase"] == "serving"
    assert r["cause"] == "other"
    # the child's exception line, not the marker or the parent's sigquit, is what decided
    assert "illegal memory access" in r["decisive_line"]
    assert "illegal memory access" in r["traceback"]


@pytest.mark.parametrize(
    "line,cause",
    [
        ("sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm --nsa-prefill-backend trtllm", "flag_error"),
        ("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill", "flag_error"),
        ("launch_server.py: error: argument --moe-runner-backend: invalid choice: 'foo' (choose from 'auto', 'triton')", "flag_error"),
        ("ValueError: Current platform does not support NVFP4 quantization with the selected MoE backend. Please use Blackwell and above, or use moe_runner_backend=marlin on SM80+.", "unsupported_arch"),
        ("RuntimeError: Rank 3 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer.", "killed"),
    ],
)
def test_source_strings(line, cause):
    r = classify_text("[2026-10-30 12:00:00] server_args=ServerArgs(tp_size=8)\n" + line + "\n")
    assert r["state"] == "crashed"
    assert r["cause"] == cause


def test_s23_subprocess_watchdog_while_serving():
    text = S23_READY + "[2026-10-30 12:09:00] Subprocess scheduler_TP3 (pid=99) crashed with exit code -9. Triggering SIGQUIT for cleanup...\n"
    c = SglangLogClassifier().feed(text)
    assert c.state == "crashed"  # decisive before end of input
    r = c.result()
    assert r["after_ready"] is True and r["cause"] == "killed"


def test_capture_failure_in_s23_format_is_cuda_graph_phase():
    text = (
        "[2026-10-30 12:00:46 TP0] Memory pool end. avail mem=11.00 GB\n"
        "[2026-10-30 12:00:47 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=11.00 GB\n"
        "[2026-10-30 12:00:50 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    r = classify_text(text)
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "oom", "cuda_graph")


def test_harmless_lines_alone_do_not_crash():
    text = (
        "[2026-10-30 12:00:01 TP1] Ignore import error when loading sglang.srt.models.x: boom Error\n"
        "[2026-10-30 12:00:02] Endpoint '/get_model_info' is deprecated and will be removed in a future version.\n"
        '[2026-10-30 12:00:03] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 Service Unavailable\n'
        "[2026-10-30 12:00:04] WARNING: NCCL INFO something error-like\n"
    )
    assert classify_text(text)["state"] == "starting"


def test_bare_traceback_is_only_a_candidate_until_end_of_input():
    c = SglangLogClassifier().feed("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad\n")
    assert c.state == "starting"  # streaming: not yet decisive (a logged, survivable traceback)
    assert c.finish().state == "crashed"


# ---------------------------------------------------------------------------------------------- stall predicate
def test_stalled_uses_last_progress_and_monotonic_time():
    c = SglangLogClassifier()
    c.feed("[2026-10-30 12:00:47 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=1 GB\n", t=100.0)
    assert not c.stalled(110.0, 30)
    c.feed("Capturing batches (bs=8 avail_mem=1 GB):  50%|#####     | 4/8 [00:20<00:20, 5.0s/it]\r", t=125.0)
    assert not c.stalled(150.0, 30)  # tqdm progress counts
    assert c.stalled(155.0, 30)
    # our own /health polls are not progress
    c.feed('[2026-10-30 12:01:30] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 Service Unavailable\n', t=154.0)
    assert c.stalled(155.0, 30)


def test_stalled_is_false_once_verdict():
    c = SglangLogClassifier().feed("[2026-10-30 12:00:00] The server is fired up and ready to roll!\n", t=0.0)
    assert not c.stalled(1000.0, 1)


def test_slow_jit_that_prints_is_not_a_hang():
    c = SglangLogClassifier()
    c.feed("[2026-10-30 12:00:47 TP0] Capture cuda graph begin.\n", t=0.0)
    for i in range(1, 20):
        c.feed("2025-03-27 21:33:31,890 - INFO - flashinfer.jit: Loading JIT ops: batch_decode_x\n", t=i * 20.0)
        assert not c.stalled(i * 20.0 + 10, 30)


def test_module_constants():
    assert sglang_log.PHASES[-2:] == ("ready", "serving")
    assert "warmup_failed" in sglang_log.CAUSES


# ---------------------------------------------------------------------------------------------- new wordings
@pytest.mark.parametrize(
    "line,cause,phase",
    [
        # 0.5.9 model_runner_kv_cache_mixin.py:379-384: a negative profiled budget; :415-419 raises next
        ("[2026-10-30 12:00:45 TP0] max_total_tokens=131072 is larger than the profiled value -2048. Use the profiled value instead.", "oom", "kv_cache"),
        # the pool / summary lines of a fork that skips the check (memory_pool.py:658, scheduler.py:623)
        ("[2026-10-30 12:00:46 TP0] KV Cache is allocated. #tokens: -2048, KV size: -0.12 GB", "oom", "kv_cache"),
        ("[2026-10-30 12:00:46 TP0] max_total_num_tokens=-2048, chunked_prefill_size=8192, max_prefill_tokens=16384", "oom", "kv_cache"),
        # 0.5.23 kv_cache_configurator.py:3050-3052, pool_configurator.py:95-99
        ("[2026-10-30 12:00:46 TP0] ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.", "oom", "kv_cache"),
        ("[2026-10-30 12:00:46 TP0] Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5", "oom", "kv_cache"),
        # 0.1.12 infer_batch.py:233 (sic "nerver"), 0.3.0 schedule_batch.py:391 -- logged, then exit(1)
        ("Prefill out of memory. This should nerver happen.", "oom", "serving"),
        ("[12:01:09 TP0] Prefill out of memory. Try to lower your batch size.", "oom", "serving"),
        # 0.5.23 multimodal_gen/runtime/server_args/server_args.py:3709
        ("error: unrecognized arguments: --served-model-name minimax-h3", "flag_error", "init"),
        # 0.3.0 managers/tp_worker.py:898, controller_single.py:167
        ("[17:25:03 TP0] Exception in run_tp_server:", "other", "init"),
        ("Exception in ControllerSingle:", "other", "init"),
    ],
)
def test_new_markers_are_decisive_without_waiting_for_end_of_input(line, cause, phase):
    c = SglangLogClassifier().feed(line + "\n")
    assert c.state == "crashed"  # live: decided with the line itself
    r = c.result()
    assert (r["cause"], r["phase"]) == (cause, phase)


@pytest.mark.parametrize(
    "line",
    [
        # 0.3.0 tp_worker.py:662 / 0.3.6 scheduler.py:889: retraction, the server goes on
        "[2024-10-22 06:40:00 TP0] Decode out of memory happened. #retracted_reqs: 2, #new_token_ratio: 0.7000 -> 1.0000",
        # 0.1.12 router/model_rpc.py:178 logs this and swallows the exception: not a marker by itself
        "Exception in ModelRpcClient:",
        # a successful profile is no impossible budget
        "[2026-10-30 12:00:45 TP0] max_total_tokens=131072 is larger than the profiled value 65536. Use the profiled value instead.",
        "2025-07-02 16:41:31 | ERROR | stderr | Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:00<00:00,  3.28it/s]",
    ],
)
def test_lines_that_are_not_crashes(line):
    assert classify_text("[2026-10-30 12:00:00] server_args=ServerArgs(tp_size=8)\n" + line + "\n")["state"] == "starting"


def test_a_survived_exception_is_no_crash_once_batches_run_again():
    text = (
        "[2026-10-30 12:05:00 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0\n"
        "Exception in ModelRpcClient:\n"
        "Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/router/model_rpc.py", line 176, in exposed_step\n'
        "AttributeError: 'NoneType' object has no attribute 'cpu'\n"
        "[2026-10-30 12:05:03 TP0] Decode batch, #running-req: 3, #token: 800, token usage: 0.01, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0\n"
    )
    assert classify_text(text)["state"] == "ready"
    # ... but the same exception as the last thing the process wrote is its crash
    r = classify_text(text.rsplit("[2026-10-30 12:05:03", 1)[0])
    assert (r["state"], r["phase"], r["after_ready"]) == ("crashed", "serving", True)


def test_time_only_header_of_sglang_0_3_gives_a_timeline_across_midnight():
    text = (
        "[23:59:50] server_args=ServerArgs(model_path='m')\n"
        "[23:59:58 TP0] Load weight begin. avail mem=20.00 GB\n"
        "[00:00:08 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=6.00 GB\n"
        "[00:00:09 TP0] Memory pool end. avail mem=1.00 GB\n"
    )
    r = classify_text(text)
    assert (r["state"], r["phase"]) == ("starting", "kv_cache")
    assert r["timeline"]["load_weights"] == {"at": 8.0, "duration": 10.0}


def test_orchestrator_prefixes_are_stripped_and_keep_the_traceback_shape():
    # Ray colours the prefix and adds the node's ip for remote workers (python/ray/_private/worker.py
    # print_worker_logs); Dynamo's `dynamo run` relays raw subprocess lines under dynamo_run::subprocess.
    text = (
        "\x1b[36m(SGLangEngine pid=616, ip=192.168.149.159)\x1b[0m [2026-10-30 12:00:50 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "\x1b[36m(SGLangEngine pid=616, ip=192.168.149.159)\x1b[0m   File \"/x/sglang/srt/model_executor/cuda_graph_runner.py\", line 1, in capture\n"
        "2026-10-30T12:00:50.100Z DEBUG dynamo_run::subprocess: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    r = classify_text(text)
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "oom", "cuda_graph")
    assert r["decisive_line"].startswith("torch.OutOfMemoryError")
    assert "cuda_graph_runner.py" in r["traceback"]


def test_dynamo_record_header_is_a_record_of_its_own():
    # Dynamo formats SGLang's Python records itself (no sglang header): each is a headed record, so a
    # record after a traceback closes it, and phase lines are read from the message.
    text = (
        "2025-11-05T01:56:35.855764Z  INFO model_runner.init_torch_distributed: Init torch distributed begin.   \n"
        "2025-11-05T01:56:40.000000Z  INFO model_runner.load_model: Load weight begin. avail mem=78.00 GB   \n"
    )
    r = classify_text(text)
    assert (r["state"], r["phase"]) == ("starting", "load_weights")


def test_first_request_crash_right_after_ready_is_serving():
    # no batch line between the ready line and the crash: the event-loop frames say where it died
    text = S23_READY + (
        "[2026-10-30 12:05:01 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 100, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    )
    r = classify_text(text)
    assert (r["state"], r["phase"], r["after_ready"]) == ("crashed", "serving", True)


@pytest.mark.parametrize(
    "line",
    [
        # info / warning records of healthy launches that only mention an architecture or memory
        # (0.5.23 srt/arg_groups/overrides.py, srt/arg_groups/model_overrides/minimax_m3.py,
        # multimodal_gen/runtime/platforms/cuda.py; 0.5.9 layers/deep_gemm_wrapper/compile_utils.py)
        "[2026-10-30 12:00:00] Use flashinfer_cutlass as MoE runner backend on SM110/SM120 for modelopt_fp4 (trtllm-gen MoE kernels are SM100-only)",
        "[2026-10-30 12:00:00] MiniMax-M3 on Hopper: attention_backend=fa3, page_size=64 (MSA is SM100-only; sparse attention runs on the Triton path).",
        "[2026-10-30 12:00:00] FlashAttention is not supported on SM12.x in this build; falling back to Torch SDPA.",
        "[2026-10-30 12:00:01 TP0] Available memory 2GB is less than required memory 4GB for warmup, reducing max_m to 1024 to avoid out of memory",
        # a request's error logged at info while serving (0.5.23 entrypoints/openai/serving_base.py)
        "[2026-10-30 12:00:02] DS32EncodingError: bad tool call",
    ],
)
def test_warnings_that_mention_arch_or_memory_do_not_end_a_log_as_a_crash(line):
    text = "[2026-10-30 12:00:00] server_args=ServerArgs(tp_size=8)\n" + line + "\n"
    c = SglangLogClassifier().feed(text)
    assert c.finish().state == "starting"


def test_an_old_marker_waits_for_the_traceback_it_announces():
    # 0.3.0 tp_worker.py:898 logs "Exception in run_tp_server:\n" + traceback: the live waiter must not
    # settle on the marker alone, or the cause in the traceback is lost
    c = SglangLogClassifier().feed("[12:00:00 TP0] Exception in run_tp_server:\n", t=0.0)
    assert c.state == "crashed" and not c.crash_settled
    c.feed("Traceback (most recent call last):\n", t=0.1)
    c.feed('  File "/x/sglang/srt/managers/tp_worker.py", line 884, in run_tp_server\n', t=0.1)
    c.feed("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", t=0.1)
    assert not c.crash_settled
    c.feed("[12:00:01] Received sigquit from a child process. It usually means the child failed.\n", t=0.2)
    assert c.crash_settled
    assert c.result()["cause"] == "oom"


def test_a_follower_ranks_dummy_health_server_is_its_http_phase_not_ready():
    """A multi-node server's rank >= 1 serves no API: after its schedulers are ready it logs the dummy health
    server's line (0.5.9 srt/utils/common.py launch_dummy_health_check_server) and never the ready line, so the
    log alone says http_up; its health endpoint decides readiness."""
    r = sglang_log.classify_lines([
        "[2026-10-30 12:00:58] Init torch distributed begin.",
        "[2026-10-30 12:01:09] Dummy health check server started in background thread at 0.0.0.0:8000",
    ])
    assert r["state"] == "starting" and r["phase"] == "http_up" and r["cause"] is None


# ---------------------------------------------------------------------------------------------- the 0.5.23 stack's own texts
# Each line below is the wheel's own string, put together the way the wheel puts it together.
_HEAD = "[2026-10-30 12:00:00] server_args={'model_path': 'zai-org/GLM-5', 'tp_size': 8}\n"


@pytest.mark.parametrize(
    "line",
    [
        # flashinfer 0.7.2 flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:216-218: the message, thrown by
        # FLASHINFER_CHECK as flashinfer::Error, whose what() is "Error in function '<func>' at <file>:<line>: <msg>"
        # (data/include/flashinfer/exception.h:79-83); the JIT module is compiled from the installed package's csrc.
        "RuntimeError: Error in function 'TrtllmGenBatchedGemmRunner' at /opt/moesweep/venvs/sglang/lib/python3.12/site-packages/flashinfer/data/csrc/trtllm_batched_gemm_runner.cu:218: The trtllm-gen batched GEMM cubin manifest contains no kernels runnable on sm120; this backend currently ships cubins for sm100, sm103 and sm107.",
        # flashinfer 0.7.2 flashinfer/data/csrc/trtllm_gemm_runner.cu:174-176 (FLASHINFER_ERROR), dense trtllm-gen GEMM
        "RuntimeError: Error in function 'TrtllmGenGemmRunner' at /opt/moesweep/venvs/sglang/lib/python3.12/site-packages/flashinfer/data/csrc/trtllm_gemm_runner.cu:176: The trtllm-gen GEMM cubin manifest contains no kernels runnable on sm121; this backend currently ships cubins for sm100, sm103 and sm107.",
        # sgl-kernel 0.3.21 csrc/moe/nvfp4_blockwise_moe.cu cutlass_fp4_group_mm: TORCH_CHECK_NOT_IMPLEMENTED(false,
        # "Unsupported SM version: " + std::to_string(sm_version)) -> NotImplementedError (the literal is in the
        # wheel's sgl_kernel/sm100/common_ops.abi3.so and sgl_kernel/sm90/common_ops.abi3.so)
        "NotImplementedError: Unsupported SM version: 121",
        # sgl-kernel 0.3.21 csrc/moe/fp8_blockwise_moe_kernel.cu: TORCH_CHECK_NOT_IMPLEMENTED(can_implement,
        # "No implemented fp8_blockwise_scaled_grouped_mm for current compute capability: ", sm_version) (same .so files)
        "NotImplementedError: No implemented fp8_blockwise_scaled_grouped_mm for current compute capability: 120",
        # sgl-kernel 0.3.21, the dense blockwise GEMM's sibling check (csrc/gemm/fp8_blockwise_gemm_kernel.cu, same .so)
        "RuntimeError: No implemented fp8_blockwise_scaled_mm for current compute capability: 121",
        # sglang 0.5.23 srt/layers/moe/moe_runner/runner.py:154-159
        "ValueError: --moe-runner-backend hpc_ops requires an SM90 (Hopper) GPU (the HPC-Ops kernels ship sm90a only), got sm120.",
        # sglang 0.5.23 srt/layers/attention/hpc_ops_backend.py:139-143
        "ValueError: The hpc_ops attention backend requires an SM90 (Hopper) GPU (the HPC-Ops kernels ship sm90a only), got sm120.",
        # sglang 0.5.9 srt/model_loader/loader.py:232-242 (0.5.23 :256-266): NVFP4 on an H100 fails here first
        "ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. Minimum capability: 100. Current capability: 90.",
    ],
)
def test_the_stacks_own_architecture_failures_are_unsupported_arch(line):
    c = SglangLogClassifier().feed(_HEAD + line + "\n")
    assert c.state == "starting"  # a lone exception line: decided when the process is gone
    r = c.finish().result()
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "unsupported_arch", "init")
    assert r["decisive_line"] == line
    # the same line inside the scheduler's traceback is decisive at once
    tb = (
        "[2026-10-30 12:03:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 4048, in run_scheduler_process\n'
        + line + "\n"
    )
    r = classify_text(_HEAD + tb)
    assert (r["state"], r["cause"]) == ("crashed", "unsupported_arch") and r["decisive_line"] == line


# sglang 0.5.23 srt/entrypoints/engine.py:2002-2010 _scheduler_died_error: the hint names -9 whatever the code is
_DIED = (
    "RuntimeError: Rank {rank} scheduler died during initialization (exit code: {code}). If exit code is -9 "
    "(SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
)


@pytest.mark.parametrize(
    "code,cause",
    [(-11, "segfault"), (-6, "aborted"), (-9, "killed"), (-15, "killed")],
)
def test_a_scheduler_that_died_by_a_signal_is_told_by_its_exit_code(code, cause):
    line = _DIED.format(rank=3, code=code)
    r = classify_text(_HEAD + "[2026-10-30 12:00:02 TP3] Init parallel begin.\n" + line + "\n")
    assert (r["state"], r["cause"]) == ("crashed", cause), r
    assert r["decisive_line"] == line


@pytest.mark.parametrize(
    "lines,cause",
    [
        # 0.5.23 utils/watchdog.py:215-220 SubprocessWatchdog
        (["[2026-10-30 12:09:00] Subprocess scheduler_TP3 (pid=99) crashed with exit code -11. Triggering SIGQUIT for cleanup..."], "segfault"),
        (["[2026-10-30 12:09:00] Subprocess scheduler_TP3 (pid=99) crashed with exit code -6. Triggering SIGQUIT for cleanup..."], "aborted"),
        # systemd's own lines in the unit's journal (src/core/service.c service_sigchld_event)
        (["sglang.service: Main process exited, code=dumped, status=11/SEGV"], "segfault"),
        (["sglang.service: Main process exited, code=dumped, status=6/ABRT"], "aborted"),
        (["sglang.service: Main process exited, code=killed, status=9/KILL"], "killed"),
        # the kernel's OOM killer chose the process: systemd says so (src/core/unit.c unit_check_oom,
        # src/core/service.c "oom-kill" result), so the SIGKILL is host memory running out
        (
            [
                "sglang.service: A process of this unit has been killed by the OOM killer.",
                "sglang.service: Main process exited, code=killed, status=9/KILL",
                "sglang.service: Failed with result 'oom-kill'.",
            ],
            "oom",
        ),
        (
            [
                "sglang.service: A process of this unit has been killed by the OOM killer.",
                _DIED.format(rank=0, code=-9),
            ],
            "oom",
        ),
        # ... but only a SIGKILL: a segfault next to an OOM-killer line of another process stays a segfault
        (
            [
                "sglang.service: A process of this unit has been killed by the OOM killer.",
                _DIED.format(rank=0, code=-11),
            ],
            "segfault",
        ),
        # the shell's words for the signals
        (["Segmentation fault (core dumped)"], "segfault"),
        (["Aborted (core dumped)"], "aborted"),
        (["Fatal Python error: Segmentation fault"], "segfault"),
    ],
)
def test_signal_deaths_and_the_oom_killer(lines, cause):
    r = classify_text(_HEAD + "\n".join(lines) + "\n")
    assert (r["state"], r["cause"]) == ("crashed", cause), r
    if cause == "oom":
        assert "OOM killer" in r["decisive_line"]


def test_the_soft_watchdog_keeps_serving_the_hard_one_is_a_crash():
    # 0.5.23 utils/watchdog.py:147-160 (0.5.9 :145-158): the same report, then SIGQUIT to the parent unless soft;
    # the scheduler's soft one is --soft-watchdog-timeout (0.5.23 managers/scheduler.py:1476-1480)
    dump = (
        "[2026-10-30 12:05:00 TP0] Scheduler debug info:\n"
        "scheduler.cur_batch_for_debug.batch_size()=64\n"
        "[2026-10-30 12:05:00 TP0] Pyspy failed (py-spy dump --native --pid 1234). Error: /bin/sh: 1: py-spy: not found\n"
    )
    soft = S23_READY + dump + (
        "[2026-10-30 12:05:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=30.0, self.soft=True)\n"
        "[2026-10-30 12:05:03 TP0] Decode batch, #running-req: 64, #token: 9000, token usage: 0.10, cuda graph: True, gen throughput (token/s): 900.00, #queue-req: 0\n"
    )
    c = SglangLogClassifier().feed(soft)
    assert c.state == "ready"
    r = c.finish().result()
    assert (r["state"], r["cause"]) == ("ready", None)
    assert r["timeline"]["events"]["soft_watchdog"] == 300.0
    # the soft report as the last thing in the log is still no crash
    assert classify_text(soft.rsplit("[2026-10-30 12:05:03", 1)[0])["state"] == "ready"
    hard = S23_READY + dump + "[2026-10-30 12:05:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300.0, self.soft=False)\n"
    c = SglangLogClassifier().feed(hard)
    assert c.state == "crashed"  # decisive with the line: the parent is SIGQUIT next
    r = c.result()
    assert (r["cause"], r["phase"], r["after_ready"]) == ("stuck", "serving", True)
    assert "self.soft=False" in r["decisive_line"]
    # a log that says why the batch hung names that instead: torch's NCCL watchdog on the collective
    nccl = hard.replace("[2026-10-30 12:05:00 TP0] Scheduler debug info:", "[rank0]:[E1030 12:04:59.000000000 "
                        "ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before "
                        "timing out.\n[2026-10-30 12:05:00 TP0] Scheduler debug info:")
    assert classify_text(nccl)["cause"] == "nccl"


def test_the_0_5_23_init_lines_open_the_init_phase_and_time_the_distributed_init():
    # 0.5.23 entrypoints/engine.py:311 server_args={...}; distributed/bootstrap.py:115/190 Init parallel begin / ends
    text = (
        "[2026-10-30 12:00:00] server_args={'model_path': 'zai-org/GLM-5', 'tp_size': 8, 'moe_runner_backend': 'auto'}\n"
        "[2026-10-30 12:00:05 TP0] Init parallel begin.\n"
        "[2026-10-30 12:00:05 TP1] Init parallel begin.\n"
        "[2026-10-30 12:00:31 TP1] Init parallel ends. elapsed=26.00 s\n"
        "[2026-10-30 12:00:32 TP0] Init parallel ends. elapsed=27.00 s\n"
        "[2026-10-30 12:00:33 TP0] Load weight begin. avail mem=94.00 GB\n"
    )
    r = classify_text(text)
    assert (r["state"], r["phase"]) == ("starting", "load_weights")
    tl = r["timeline"]
    assert tl["init"] == {"at": 0.0, "duration": 33.0, "distributed_duration": 27.0}
    assert tl["events"]["distributed_init_begin"] == 5.0 and tl["events"]["distributed_init_end"] == 32.0
    # an excerpt that starts at the init line is in the init phase from it, and a crash there is an init crash
    r = classify_text(text.splitlines(keepends=True)[1] + _DIED.format(rank=0, code=-9) + "\n")
    assert (r["state"], r["cause"], r["phase"]) == ("crashed", "killed", "init")


def test_a_graph_replay_failing_in_an_excerpt_is_serving_not_capture():
    # a CUDA graph is replayed only for a forward batch (0.5.9 model_executor/model_runner.py:2325-2330 ->
    # piecewise_cuda_graph_runner.py:689 replay): an excerpt holding only the traceback's tail says serving
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 2330, in _forward_raw\n'
        "    self.piecewise_cuda_graph_runner.replay(forward_batch, **kwargs),\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/piecewise_cuda_graph_runner.py", line 720, in replay\n'
        "    output = self.model_runner.model.forward(\n"
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    )
    r = classify_text(text)
    assert (r["state"], r["cause"], r["phase"], r["after_ready"]) == ("crashed", "other", "serving", True)
    # 0.5.23's graph runners (model_executor/runner/decode_cuda_graph_runner.py:1981 execute)
    s23 = text.replace(
        "piecewise_cuda_graph_runner.py\", line 720, in replay",
        "runner/decode_cuda_graph_runner.py\", line 1993, in execute",
    )
    assert "in execute" in s23
    assert classify_text(s23)["phase"] == "serving"
    # ... while a capture failure in the same runner is the cuda_graph phase
    capture = (
        "Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/model_executor/piecewise_cuda_graph_runner.py", line 281, in __init__\n'
        "    raise Exception(\n"
        "Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered\n"
    )
    assert classify_text(capture)["phase"] == "cuda_graph"


@pytest.mark.parametrize(
    "line,cause",
    [
        # torch's NCCL watchdog: a collective past its timeout is NCCL's; a CUDA error it caught is the kernel's
        ("[rank0]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.", "nccl"),
        ("[rank1]:[E519 05:58:22.475481966 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered", "other"),
        ("[rank1]:[E519 05:58:22.475481966 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: CUDA error: out of memory", "oom"),
        # sglang's port checks: 0.5.23 utils/network.py:101-104, server_args.py:884-887
        ("ValueError: nccl_port at 30005 is not available in 30 seconds. nccl_port is used by a process already. process.name()='python3'", "port_in_use"),
        ("[2026-10-30 12:00:01] Port is already in use. dist_init_port=None port_base=30000 detokenizer_port=30001 nccl_port=30005 scheduler_input_port=30003", "port_in_use"),
    ],
)
def test_watchdog_and_port_reports(line, cause):
    r = classify_text(_HEAD + line + "\n")
    assert (r["state"], r["cause"]) == ("crashed", cause), r


def test_get_open_ports_retry_is_no_crash():
    # 0.5.23 utils/network.py:33 / 0.5.9 utils/common.py:2593: an info line, the next port is tried
    assert classify_text(_HEAD + "[2026-10-30 12:00:01] Port 30000 is already in use, trying port 30001\n")["state"] == "starting"


@pytest.mark.parametrize(
    "line",
    [
        # flashinfer 0.7.2 utils.py:1560-1566 (0.6.3 :1150-1155), the backend_requirement decorator
        "flashinfer.utils.BackendSupportedError: mm_fp4 does not support backend 'trtllm' with capability 120",
        # flashinfer 0.7.2 utils.py:1577-1585 (0.6.3 :1162-1165)
        "flashinfer.utils.BackendSupportedError: trtllm_fp4_block_scale_moe does not support compute capability 120; supported compute capabilities: [100, 103]",
        # flashinfer 0.7.2 utils.py:1556-1558 (0.6.3 :1145-1147)
        "flashinfer.utils.BackendSupportedError: No suitable auto backends found for mm_fp4",
        # flashinfer 0.7.2 gemm/gemm_base.py:2901 (0.6.3 :1032)
        "ValueError: Unsupported SM major version: 12",
        # flashinfer 0.7.2 msa_ops/_blackwell_sm100.py:144-146
        "RuntimeError: the SM100/SM103 MSA backend requires compute capability 10.0 or 10.3; got 12.0",
    ],
)
def test_flashinfer_capability_checks_are_unsupported_arch(line):
    r = classify_text(_HEAD + line + "\n")
    assert (r["state"], r["cause"]) == ("crashed", "unsupported_arch")


def test_the_diffusion_servers_month_day_header_is_a_header():
    # 0.5.23 multimodal_gen/runtime/utils/logging_utils.py:457-461: datefmt "%m-%d %H:%M:%S"
    r = classify_text((FIXTURES / "crash_diffusion_month_day_header_exit_code_killed.log").read_text())
    assert r["timeline"]["init"]["at"] == 0.0 and r["decisive_line"] == "Exit code: -9"
    c = SglangLogClassifier().feed("[02-29 23:59:58 TP1] Load weight begin. avail mem=40.00 GB\n")
    c.feed("[03-01 00:00:08 TP1] Load weight end. type=FluxPipeline, avail mem=20.00 GB\n")
    assert c.result()["timeline"]["load_weights"]["duration"] == 10.0


def test_torchs_heartbeat_monitor_ends_the_log_as_an_nccl_crash():
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp heartbeatMonitor (torch 2.3+): the lines as torch logs them
    text = _HEAD + (
        "[rank25]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 25] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2\n"
        "[rank25]:[E ProcessGroupNCCL.cpp:1153] [PG 0 Rank 25] ProcessGroupNCCL preparing to dump debug info.\n"
    )
    c = SglangLogClassifier().feed(text)
    assert c.state == "crashed" and c.result()["cause"] == "nccl"


@pytest.mark.parametrize("name", ["port_in_use_uvicorn.log", "nccl_unhandled_system_error.log", "oom_kv_pool_compose.log"])
def test_a_log_inside_docker_json_records_reads_like_the_log(name):
    # docker's json-file driver: {"log":"<line>\n","stream":"stdout","time":"..."} per line, the line JSON-escaped
    import json

    text = (FIXTURES / name).read_text(encoding="utf-8")
    wrapped = "\n".join(
        json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-01-01T00:00:00.000000000Z"},
                   separators=(",", ":"))
        for line in text.splitlines()
    ) + "\n"
    assert classify_text(wrapped) == classify_text(text)


def test_a_soft_watchdog_reporting_a_stuck_startup_is_no_progress():
    # --soft-watchdog-timeout 30 during a capture that hangs: the report repeats (utils/watchdog.py loops in
    # _watchdog_thread), but a stuck server is still stuck: the stall predicate must fire
    c = SglangLogClassifier()
    c.feed("[2026-10-30 12:00:47 TP0] Capture cuda graph begin. This can take up to several minutes.\n", t=0.0)
    for i in range(1, 6):
        c.feed("[2026-10-30 12:01:17 TP0] Scheduler debug info:\n", t=30.0 * i)
        c.feed("symmetric-memory registration in progress: capture bs=64\n", t=30.0 * i)
        c.feed("[2026-10-30 12:01:17 TP0] Pyspy failed (py-spy dump --native --pid 7). Error: /bin/sh: 1: py-spy: not found\n", t=30.0 * i)
        c.feed("[2026-10-30 12:01:17 TP0] Scheduler watchdog timeout (self.watchdog_timeout=30.0, self.soft=True)\n", t=30.0 * i)
    assert c.state == "starting"
    assert c.stalled(150.0, 120)
    # real output after the report is progress again
    c.feed("Capturing batches (bs=64 avail_mem=10.90 GB):  50%|#####     | 4/8 [00:02<00:02,  2.00it/s]\r", t=151.0)
    assert not c.stalled(160.0, 120)


# ---- #30 item 6: readings a blind check of public logs got wrong ------------------------------------------------


def test_triton_out_of_resources_is_the_gpus_shared_memory_not_oom_and_not_the_kill():
    # triton python/triton/runtime/errors.py OutOfResources: "out of resource: {name}, Required: {required}, Hardware
    # limit: {limit}. Reducing block sizes or `num_stages` may help." -- its class name ends in no Error/Exception
    r = classify_text((FIXTURES / "arch_triton_smem_out_of_resource_glm45_air.log").read_text())
    assert (r["cause"], r["phase"]) == ("unsupported_arch", "init")
    assert r["decisive_line"].startswith("triton.runtime.errors.OutOfResources: out of resource: shared memory")
    # a register or another resource is not the shared-memory limit the fused-MoE configs hit; still a crash
    r = classify_text(_HEAD + "triton.runtime.errors.OutOfResources: out of resource: registers, Required: 300, Hardware limit: 255. Reducing block sizes or `num_stages` may help.\n")
    assert (r["state"], r["cause"]) == ("crashed", "other")


@pytest.mark.parametrize(
    "line",
    [
        # torch/csrc/distributed/c10d/TCPStore.cpp (TCPStore::waitForWorkers): C10_THROW_ERROR(DistStoreError, ...)
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 7/8 clients joined.",
        "torch.distributed.DistNetworkError: Connection reset by peer",
    ],
)
def test_the_rendezvous_store_failing_is_nccl(line):
    r = classify_text(_HEAD + line + "\n")
    assert (r["state"], r["cause"]) == ("crashed", "nccl")


def test_c10d_socket_warnings_name_the_cause_of_a_cut_traceback():
    r = classify_text((FIXTURES / "nccl_c10d_store_timeout_ipv6_multihost.log").read_text())
    assert r["cause"] == "nccl" and "[c10d] waitForInput" in r["decisive_line"]
    # alone, a c10d warning is no crash (torch retries its connects: socket.cpp "The client socket has failed to
    # connect to ... (errno: 99 - Cannot assign requested address)." while the master comes up)
    retry = "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).\n"
    assert classify_text(_HEAD + retry)["state"] == "starting"


def test_nccl_init_return_trace_needs_its_warn_and_is_survived_if_the_launch_goes_on():
    trace = "node:1:1 [0] NCCL INFO init.cc:1799 -> 2\n"
    warn = "node:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<43369> failed : Connection refused\n"
    # NVIDIA/nccl src/include/checks.h: NCCLCHECK's INFO "%s:%d -> %d" on the way out of a failing call
    r = classify_text(_HEAD + warn + trace)
    assert (r["state"], r["cause"]) == ("crashed", "nccl") and "NCCL WARN socketStartConnect" in r["decisive_line"]
    # without a WARN before it, an INFO line is no evidence
    assert classify_text(_HEAD + trace)["state"] == "starting"
    # a return trace the launch survives (it went on to load the weights) is no crash at its end
    survived = _HEAD + warn + trace + "[2026-10-30 12:00:05 TP0] Load weight begin. avail mem=78.00 GB\n"
    assert classify_text(survived)["state"] == "starting"
    # and it never undoes a marker that follows
    r = classify_text(_HEAD + warn + trace + "[2026-10-30 12:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):\nRuntimeError: NCCL error: remote process exited or there was a network error\n")
    assert (r["state"], r["cause"]) == ("crashed", "nccl")

