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
    assert len(listed) >= 15
    for p in SOURCES:
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", p.values[1])
    causes = {p.values[3] for p in SOURCES if p.values[3]}
    assert {"oom", "unsupported_arch", "nccl", "jit_compile", "flag_error", "port_in_use", "warmup_failed"} <= causes


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


def test_ready_inferred_is_reported():
    r = classify_text((FIXTURES / "ready_serving_hicache.log").read_text())
    assert r["ready_inferred"] is True


# ---------------------------------------------------------------------------------------------- source strings
# A full launch in SGLang 0.5.23's strings (sglang-facts.md §4.2), tp 2, with harmless lines mixed in.
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
