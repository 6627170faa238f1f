"""The simulated SGLang server, run as a subprocess on 127.0.0.1 with a temporary profile/state."""

from __future__ import annotations

import ast
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest import mock

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_log
from helpers.paths import REPO
from moesweep_sim import sglang_server

SIM = REPO / "simulator" / "bin" / "sglang-sim"
MODEL = "lukealonso/GLM-5-NVFP4"
BASE = ["--model-path", MODEL, "--tp", "8", "--quantization", "modelopt_fp4", "--host", "127.0.0.1"]
FAST = {f"MOESWEEP_SIM_PHASE_{p}_S": "0.1" for p in ("INIT", "DIST", "LOAD", "KV", "AUTOTUNE", "CAPTURE")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    def __init__(self, tmp: Path, args, gpu="rtx-pro-6000", version="0.5.9", fault=None, env=None):
        self.tmp = tmp
        self.port = free_port()
        prof = tmp / "profile.json"
        prof.write_text(json.dumps({"simulated": True, "gpu_model": gpu, "gpu_count": 8, "sglang_version": version}))
        self.state = tmp / "gpu-state.json"
        e = dict(os.environ)
        e.update(FAST)
        e.update({"MOESWEEP_SIM_PROFILE": str(prof), "MOESWEEP_SIM_STATE": str(self.state),
                  "MOESWEEP_SIM_FAULT_FILE": str(tmp / "fault"), "MOESWEEP_SIM_TIME_SCALE": "1.0"})
        e.pop("MOESWEEP_SIM_FAULT", None)
        e.pop("MOESWEEP_SIM_SGLANG_VERSION", None)
        if fault:
            e["MOESWEEP_SIM_FAULT"] = fault
        e.update(env or {})
        self.out = open(tmp / "stdout.txt", "w+")
        self.err = open(tmp / "stderr.txt", "w+")
        if "--port" in args:
            self.port = int(args[args.index("--port") + 1])
        else:
            args = [*args, "--port", str(self.port)]
        self.proc = subprocess.Popen([sys.executable, str(SIM), *args],
                                     stdout=self.out, stderr=self.err, env=e)

    def log(self) -> str:
        return (self.tmp / "stderr.txt").read_text()

    def access(self) -> str:
        return (self.tmp / "stdout.txt").read_text()

    def req(self, method, path, body=None, headers=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, r

    def wait_ready(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode}\n{self.log()[-3000:]}")
            try:
                if self.req("GET", "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("not ready\n" + self.log()[-3000:])

    def wait_exit(self, timeout=60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("did not exit\n" + self.log()[-3000:]) from None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()
        self.err.close()


@pytest.fixture
def sims(tmp_path):
    made = []

    def make(*a, **kw):
        d = tmp_path / f"s{len(made)}"
        d.mkdir()
        s = Sim(d, *a, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def sse_events(data: bytes):
    return [ln[len(b"data: "):] for ln in data.split(b"\n") if ln.startswith(b"data: ")]


# ------------------------------------------------------------------------------------------ tests
def test_bad_flags_exit_2_with_argparse_message(tmp_path):
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--no-such-flag", "1"],
                       capture_output=True, text=True, env={**os.environ, "MOESWEEP_SIM_SGLANG_VERSION": "0.5.9"})
    assert r.returncode == 2
    assert r.stderr.rstrip().endswith("launch_server.py: error: unrecognized arguments: --no-such-flag 1")
    assert "usage: launch_server.py" in r.stderr
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--cuda-graph-max-bs", "4"],
                       capture_output=True, text=True, env={**os.environ, "MOESWEEP_SIM_SGLANG_VERSION": "0.5.23"})
    assert r.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode" in r.stderr


def test_startup_assert_flashinfer_cutlass_quantization(tmp_path):
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--moe-runner-backend", "flashinfer_cutlass",
                        "--quantization", "fp8"], capture_output=True, text=True,
                       env={**os.environ, "MOESWEEP_SIM_SGLANG_VERSION": "0.5.9"})
    assert r.returncode == 1
    assert "AssertionError: Invalid quantization 'fp8'. \nFlashInfer Cutlass MOE supports only" in r.stderr


def test_readiness_sequence_and_log(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], env={"MOESWEEP_SIM_PHASE_LOAD_S": "1.5"})
    seen = []
    end = time.time() + 60
    while time.time() < end:
        try:
            st = s.req("GET", "/health", timeout=5)[0]
        except OSError:
            st = "refused"
        if not seen or seen[-1] != st:
            seen.append(st)
        if st == 200:
            break
        time.sleep(0.05)
    assert seen[0] == "refused" and seen[-1] == 200 and 503 in seen, seen
    log = s.log()
    assert log.startswith("[moesweep-sim] SIMULATED SGLang server (no GPU) emulating sglang 0.5.9\n")
    order = ["server_args=ServerArgs(", "TP0] Load weight begin. avail mem=", "TP7] Load weight end. elapsed=",
             "TP0] KV Cache is allocated. #tokens: ", "Memory pool end. avail mem=",
             "TP0] Capture cuda graph begin. This can take up to several minutes.",
             "Capture cuda graph end. Time elapsed",
             "TP0] max_total_num_tokens=", "INFO:     Started server process [", "INFO:     Uvicorn running on "
             "http://127.0.0.1:", "The server is fired up and ready to roll!"]
    pos = [log.find(x) for x in order]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), list(zip(order, pos, strict=True))
    time.sleep(0.3)
    acc = s.access()
    assert '"GET /model_info HTTP/1.1" 200 OK' in acc and '"POST /generate HTTP/1.1" 200 OK' in acc
    st = json.loads(s.state.read_text())
    assert st["pid"] == s.proc.pid and len(st["gpus"]) == 8 and st["gpus"][0]["memory_used_mib"] > 60000


def test_endpoints_streaming_and_api_key(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--api-key", "sekret", "--enable-metrics",
                     "--served-model-name", "glm-5"])
    s.wait_ready()
    auth = {"Authorization": "Bearer sekret"}
    assert s.req("GET", "/model_info")[0] == 401
    assert json.loads(s.req("GET", "/model_info")[1]) == {"error": "Unauthorized"}
    st, body, r = s.req("GET", "/model_info", headers=auth)
    assert st == 200 and r.getheader("X-Moesweep-Simulated") == "1"
    assert json.loads(body)["architectures"] == ["GlmMoeDsaForCausalLM"]
    assert s.req("GET", "/get_model_info", headers=auth)[0] == 200
    info = json.loads(s.req("GET", "/get_server_info", headers=auth)[1])
    assert info["tp_size"] == 8 and info["version"] == "0.5.9" and info["internal_states"][0]["memory_usage"]
    models = json.loads(s.req("GET", "/v1/models", headers=auth)[1])
    assert models["data"][0]["id"] == "glm-5"
    # /metrics is exempt from the api key; sglang:* names with model_name label
    st, body, _ = s.req("GET", "/metrics")
    assert st == 200 and (b'sglang:num_running_reqs{engine_type="unified",model_name="glm-5",moe_ep_rank="0",'
                          b'pp_rank="0",tp_rank="0"} ') in body
    # native generate, non-streaming
    st, body, _ = s.req("POST", "/generate", {"text": "one two three four", "sampling_params":
                                              {"max_new_tokens": 5, "ignore_eos": True}}, auth)
    g = json.loads(body)
    assert st == 200 and len(g["output_ids"]) == 5 and len(g["text"].split()) == 5
    m = g["meta_info"]
    assert m["prompt_tokens"] == 4 and m["completion_tokens"] == 5 and m["cached_tokens"] == 0
    assert m["finish_reason"] == {"type": "length", "length": 5} and m["e2e_latency"] > 0
    # input_ids + streaming: cumulative text/output_ids, [DONE]
    st, body, r = s.req("POST", "/generate", {"input_ids": [1, 2, 3], "stream": True,
                                              "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}, auth)
    assert r.getheader("content-type").startswith("text/event-stream")
    ev = sse_events(body)
    assert ev[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    assert [len(c["output_ids"]) for c in chunks] == [1, 2, 3, 4]
    assert chunks[-1]["text"].startswith(chunks[-2]["text"]) and chunks[0]["meta_info"]["finish_reason"] is None
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    # OpenAI completions, streaming with usage
    st, body, _ = s.req("POST", "/v1/completions", {"model": "glm-5", "prompt": "a b c", "max_tokens": 3,
                                                    "stream": True, "ignore_eos": True,
                                                    "stream_options": {"include_usage": True}}, auth)
    ev = sse_events(body)
    assert ev[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert chunks[-1]["usage"]["prompt_tokens"] == 3
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]).split() == \
        json.loads(s.req("POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 3, "ignore_eos": True},
                         auth)[1])["choices"][0]["text"].split()
    # chat, non-streaming
    st, body, _ = s.req("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi there"}],
                                                         "max_tokens": 2}, auth)
    c = json.loads(body)
    assert c["object"] == "chat.completion" and c["usage"]["completion_tokens"] == 2
    assert s.req("POST", "/flush_cache", headers=auth)[0] == 200
    log = s.log()
    assert "Endpoint '/get_model_info' is deprecated" in log and "Prefill batch, #new-seq: 1" in log


def test_decode_batch_lines(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--decode-log-interval", "5"],
             env={"MOESWEEP_SIM_DECODE_RATE": "400"})
    s.wait_ready()
    s.req("POST", "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}})
    assert "TP0] Decode batch, #running-req: 1, #token: " in s.log()
    assert ", cuda graph: True, gen throughput (token/s): " in s.log()


def test_trtllm_on_sm120_crashes_with_sigkill(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_trtllm"])
    assert s.wait_exit() == -signal.SIGKILL
    log = s.log()
    assert "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set." in log
    assert "Load weight end." in log and "Running FlashInfer autotune..." in log
    assert log.count("Scheduler hit an exception: Traceback (most recent call last):") == 8
    assert "RuntimeError: No supported CUDA architectures found for major versions [10].\n" in log
    assert 'flashinfer/jit/fused_moe.py", line 237, in gen_trtllm_gen_fused_moe_sm100_module' in log
    assert log.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    assert "fired up" not in log and not s.state.exists()


@pytest.mark.parametrize("version,text", [
    # 0.5.9: the loader's capability gate comes first (model_loader/loader.py:236-241; ModelOptFp4Config's minimum
    # capability is 100), before the NVFP4 MoE method's "Please use Blackwell" check is built
    ("0.5.9", "ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. "
              "Minimum capability: 100. Current capability: 90."),
    # 0.5.23: the minimum capability is 80 (marlin), so the MoE method's own check raises
    ("0.5.23", "ValueError: Current platform does not support NVFP4 quantization with the selected MoE backend. "
               "Please use Blackwell and above, or use moe_runner_backend=marlin on SM80+."),
])
def test_nvfp4_on_h200_fails(sims, version, text):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], gpu="h200", version=version)
    assert s.wait_exit() == -signal.SIGKILL
    assert text in s.log()


def test_allreduce_fusion_sm120_on_0523(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--enable-flashinfer-allreduce-fusion"],
             version="0.5.23")
    assert s.wait_exit() == -signal.SIGKILL
    assert "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in s.log()


@pytest.mark.parametrize("version,rc", [("0.5.9", -signal.SIGKILL), ("0.5.23", 0)])
def test_sigterm_drains(sims, version, rc):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version=version,
             env={"MOESWEEP_SIM_TIME_SCALE": "0.1"})
    s.wait_ready()
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == rc
    log = s.log()
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in log
    assert "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." in log
    assert not s.state.exists()


@pytest.mark.parametrize("started,now,expected", [
    (None, 100.0, 5.0),     # no handle loop yet: a whole period
    (100.0, 100.0, 5.0),    # the first sleep(5) has just begun
    (100.0, 101.5, 3.5),
    (100.0, 104.9, 0.1),
    (100.0, 112.0, 3.0),    # the third period
])
def test_watchdog_wakes_at_the_end_of_its_period(started, now, expected):
    """sigterm_watchdog's ``while not self.gracefully_exit: await asyncio.sleep(5)`` sees the flag at its next wake."""
    assert sglang_server.watchdog_wake_delay(started, now, 5.0) == pytest.approx(expected)


def test_sigterm_late_in_the_watchdog_period_exits_at_its_end(sims):
    """The drain starts when the watchdog's current sleep ends, not a whole period after the SIGTERM."""
    # no warmup request and a /health without generation: the handle loop (and its watchdog) starts at our request
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--skip-server-warmup"],
             env={"MOESWEEP_SIM_TIME_SCALE": "0.6", "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"})
    s.wait_ready()
    created = time.time()
    s.req("POST", "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})
    # the watchdog sleeps 3 s at a time at this scale: SIGTERM 2.4 s into its first sleep
    time.sleep(max(0.0, created + 2.4 - time.time()))
    sent = time.time()
    s.proc.send_signal(signal.SIGTERM)
    s.wait_exit()
    # the rest of the period (0.6 s) plus this machine's load; a whole period (3 s) if the phase were ignored
    assert time.time() - sent < 2.0
    assert "Gracefully exiting... Remaining number of requests 0." in s.log()


def test_fault_oom_kv(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="oom_kv")
    assert s.wait_exit() == -signal.SIGKILL
    # the value __post_init__ resolved: round((97887 - 14848) / 97887, 3) for 8x RTX PRO 6000 at tp 8
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: self.server_args.mem_fraction_static=0.848") in s.log()


def test_fault_oom_graph_from_file(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"])
    s.stop()
    (s.tmp / "fault").write_text("oom_graph\n")
    s2 = Sim(s.tmp, BASE + ["--moe-runner-backend", "flashinfer_cutlass"])
    try:
        assert s2.wait_exit() == -signal.SIGKILL
        log = s2.log()
        assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in log
        assert "During handling of the above exception, another exception occurred:" in log
        assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
        assert "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)" in log
    finally:
        s2.stop()


def test_fault_hang_capture(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="hang_capture")
    time.sleep(3)
    assert s.proc.poll() is None
    log = s.log().rstrip()
    assert log.splitlines()[-1].split("] ", 1)[1].startswith(
        "Capture cuda graph begin. This can take up to several minutes. avail mem=")
    with pytest.raises(OSError):
        s.req("GET", "/health", timeout=2)


def test_fault_crash_after_ready(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="crash_after_ready")
    s.wait_ready()
    with pytest.raises((OSError, http.client.HTTPException)):
        s.req("POST", "/generate", {"text": "boom", "sampling_params": {"max_new_tokens": 4}}, timeout=10)
    assert s.wait_exit() == -signal.SIGKILL
    log = s.log()
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log


def test_fault_garbage(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="garbage")
    s.wait_ready()
    g = json.loads(s.req("POST", "/generate", {"text": "q", "sampling_params": {"max_new_tokens": 6,
                                                                              "ignore_eos": True}})[1])
    assert len(set(g["text"].split())) == 1 and len(g["output_ids"]) == 6


def test_fault_slow_jit(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="slow_jit",
             env={"MOESWEEP_SIM_PHASE_SLOW_JIT_S": "4"})
    t0 = time.time()
    s.wait_ready()
    assert time.time() - t0 > 4
    assert s.log().count("Capturing batches (bs=") >= 30


@pytest.mark.parametrize("natural", [False, True])
def test_port_in_use(sims, natural):
    blocker = None
    if natural:
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--port", str(port)],
                 env={"MOESWEEP_SIM_TIME_SCALE": "0.02"})
    else:
        s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="port_in_use",
                 env={"MOESWEEP_SIM_TIME_SCALE": "0.02"})
    try:
        if natural:
            # the occupant accepts but never answers: warmup's GET /model_info (timeout 5 s, 120 tries)
            # keeps the process alive, as in sglang; once it is gone the polls fail fast
            end = time.time() + 60
            while "[Errno 98]" not in s.log() and time.time() < end:
                time.sleep(0.2)
            assert s.proc.poll() is None
            blocker.close()
            blocker = None
        assert s.wait_exit(90) == -signal.SIGKILL
        log = s.log()
        assert "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', " in log
        assert "address already in use" in log and "Initialization failed. warmup error:" in log
    finally:
        if blocker:
            blocker.close()


# ------------------------------------------------------------------------------------------ health
def _timed(s, method, path, **kw):
    t0 = time.monotonic()
    st, body, r = s.req(method, path, **kw)
    return st, body, r, time.monotonic() - t0


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_health_runs_a_generation_after_one_second(sims, version):
    """http_server.py health_generate: asyncio.sleep(1) before the first check, a 1-token generation
    (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION defaults to true), 200 with an empty body."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version=version)
    s.wait_ready()
    before = s.log().count("#new-token: 1,")
    for path in ("/health", "/health_generate"):
        st, body, r, dt = _timed(s, "GET", path)
        assert (st, body) == (200, b"") and 1.0 <= dt < 2.5, (path, dt)
        assert r.getheader("content-type") is None and r.getheader("content-length") == "0"
    assert s.log().count("#new-token: 1,") == before + 2  # each check ran as a 1-token prefill


def test_health_generation_can_be_switched_off(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"],
             env={"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"})
    s.wait_ready()
    st, _, _, dt = _timed(s, "GET", "/health")
    assert st == 200 and dt < 0.5
    st, _, _, dt = _timed(s, "GET", "/health_generate")  # only /health skips the generation
    assert st == 200 and dt >= 1.0


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_stalled_scheduler_fails_health_then_recovers(sims, version):
    """No output for SGLANG_HEALTH_CHECK_TIMEOUT s: 503, status UnHealthy, the real error line; once outputs
    flow again the next check answers 200 and sets the status back to Up."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version=version,
             env={"SGLANG_HEALTH_CHECK_TIMEOUT": "2"})
    s.wait_ready()
    (s.tmp / "fault").write_text("stall\n")
    st, body, r, dt = _timed(s, "GET", "/health")
    assert (st, body) == (503, b"") and 2.0 <= dt < 4.0 and r.getheader("content-type") is None
    log = s.log()
    line = next(x for x in log.splitlines() if "Health check failed." in x)
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Health check failed\. Server couldn't get a response "
                        r"from detokenizer for last 2 seconds\. tic start time: \d\d:\d\d:\d\d\. "
                        r"last_heartbeat time: \d\d:\d\d:\d\d", line), line
    if version == "0.5.23":
        assert s.req("GET", "/ready")[0] == 503 and s.req("GET", "/ping")[0] == 503  # is_healthy() is False
    else:
        assert s.req("GET", "/ping")[0] == 200  # 0.5.9 sagemaker_health always answers 200
    (s.tmp / "fault").write_text("")
    assert s.req("GET", "/health")[0] == 200
    if version == "0.5.23":
        assert s.req("GET", "/ready")[0] == 200 and s.req("GET", "/ping")[0] == 200


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_stuck_forward_is_ended_by_the_schedulers_watchdog(sims, version):
    """--watchdog-timeout: a batch in flight that makes no progress for the timeout (checked every timeout / 2)
    makes every rank log its debug info, the py-spy dump's outcome and the timeout line; 5 s later the main process
    gets SIGQUIT and kills the tree (sglang/srt/utils/watchdog.py, tokenizer_manager.py's running-phase handler)."""
    # get_bool_env_var reads only "true" / "1" as true: "yes" leaves request logging, and the debug info, on
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--watchdog-timeout", "20"], version=version,
             env={"MOESWEEP_SIM_TIME_SCALE": "0.1", "SGLANG_DISABLE_REQUEST_LOGGING": "yes"})
    s.wait_ready()
    body = {"text": "a b c", "sampling_params": {"max_new_tokens": 100000, "ignore_eos": True}}
    def generate():
        try:
            s.req("POST", "/generate", body, timeout=60)
        except (OSError, http.client.HTTPException):
            pass  # the server is killed under it

    threading.Thread(target=generate, daemon=True).start()
    time.sleep(0.5)
    (s.tmp / "fault").write_text("stall\n")
    stalled = time.time()
    assert s.wait_exit(timeout=30) == -signal.SIGKILL
    took = time.time() - stalled
    assert 2.0 + 0.5 <= took < 3.0 + 0.5 + 2.0, took
    log = s.log()
    for rank in range(8):
        assert f" TP{rank}] Scheduler watchdog timeout (self.watchdog_timeout=20.0, self.soft=False)\n" in log
    assert log.count("Scheduler watchdog timeout") == 8
    pid = s.proc.pid
    if version == "0.5.9":
        assert re.search(rf"TP0\] Pyspy (dump for PID {pid}:|failed to dump PID {pid}\. Error: )", log)
        info = log[log.index("TP0] Scheduler debug info:"):]
        assert re.match(r"TP0\] Scheduler debug info:\nscheduler\.cur_batch\.batch_size\(\)=1\n"
                        r"scheduler\.cur_batch\.reqs=\[Req\(rid=\w+, input_ids=\[\d+, \d+, \d+\], "
                        r"output_ids=\[[\d, ]+\], self\.grammar=None, "
                        r"self\.sampling_params=<sglang\.srt\.sampling\.sampling_params\.SamplingParams "
                        r"object at 0x[0-9a-f]+>\)\]\nself\.max_total_num_tokens=\d+, available_size=\d+, "
                        r"evictable_size=0, protected_size=\d+\n", info), info[:600]
    else:
        assert re.search(rf"TP0\] Pyspy (dump for PID {pid} \(py-spy dump --native --pid {pid}\)|"
                         rf"failed \(py-spy dump --native --pid {pid}\)\. Error: )", log)
        assert "Scheduler debug info" not in log  # 0.5.23's dump is not modelled (simulator/README.md)
    assert log.rstrip("\n").endswith("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    # where the simulator meets the classifier written from the real code and real logs
    verdict = sglang_log.classify_text(log)
    assert (verdict["state"], verdict["cause"], verdict["phase"]) == ("crashed", "stuck", "serving")
    assert verdict["decisive_line"] == "Scheduler watchdog timeout (self.watchdog_timeout=20.0, self.soft=False)"


def test_the_soft_watchdog_only_logs_and_the_server_serves_on(sims):
    """--soft-watchdog-timeout: the same lines with self.soft=True, again while the batch stays stuck, no SIGQUIT."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--soft-watchdog-timeout", "10"],
             env={"MOESWEEP_SIM_TIME_SCALE": "0.1"})
    s.wait_ready()
    body = {"text": "a b c", "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}}
    done = []
    worker = threading.Thread(target=lambda: done.append(s.req("POST", "/generate", body, timeout=60)), daemon=True)
    worker.start()
    time.sleep(0.3)
    (s.tmp / "fault").write_text("stall\n")
    time.sleep(3.5)
    assert s.proc.poll() is None
    log = s.log()
    assert log.count("] Scheduler watchdog timeout (self.watchdog_timeout=10.0, self.soft=True)") >= 16  # twice x 8
    (s.tmp / "fault").write_text("")
    worker.join(30)
    assert done and done[0][0] == 200 and s.proc.poll() is None
    assert "SIGQUIT" not in s.log()
    verdict = sglang_log.classify_text(s.log())
    assert verdict["state"] == "ready" and "soft_watchdog" in verdict["timeline"]["events"]


def test_sigterm_while_unhealthy_force_exits(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version="0.5.23",
             env={"SGLANG_HEALTH_CHECK_TIMEOUT": "1", "MOESWEEP_SIM_TIME_SCALE": "0.1"})
    s.wait_ready()
    (s.tmp / "fault").write_text("stall\n")
    assert s.req("GET", "/health")[0] == 503
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait_exit() == 0
    log = s.log()
    assert "Signal SIGTERM received while health check failed. Force exiting." in log
    assert "Gracefully exiting..." not in log


# ------------------------------------------------------------------------------------------ HTTP semantics
def test_wrong_method_head_and_metrics_mount(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--enable-metrics"])
    s.wait_ready()
    for method, path, allow in (("POST", "/health", {"GET"}), ("HEAD", "/model_info", {"GET"}),
                                ("DELETE", "/generate", {"POST", "PUT"}), ("GET", "/v1/completions", {"POST"})):
        st, body, r = s.req(method, path)
        assert st == 405, (method, path)
        assert set(r.getheader("Allow").split(", ")) == allow
        assert r.getheader("content-type") == "application/json" and r.getheader("content-length") == "31"
        assert body == (b"" if method == "HEAD" else b'{"detail":"Method Not Allowed"}')
    assert s.req("PUT", "/generate", {"text": "a", "sampling_params": {"max_new_tokens": 1}})[0] == 200
    assert s.req("GET", "/nope")[1] == b'{"detail":"Not Found"}'
    plain = s.req("GET", "/metrics")
    for method, path in (("GET", "/metrics/"), ("POST", "/metrics"), ("GET", "/metrics/anything")):
        st, body, r = s.req(method, path)
        assert st == 200 and r.getheader("content-type") == "text/plain; version=0.0.4; charset=utf-8"
        assert body.splitlines()[:2] == plain[1].splitlines()[:2]
    st, body, r = s.req("GET", "/model_info")
    assert b": " not in body and b'"architectures":["GlmMoeDsaForCausalLM"]' in body  # compact JSON


def test_metrics_absent_without_flag_and_bare_503_while_starting(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], env={"MOESWEEP_SIM_PHASE_LOAD_S": "0.1"})
    end = time.time() + 30
    seen = None
    while time.time() < end:
        try:
            st, body, r = s.req("GET", "/health", timeout=5)
        except OSError:
            time.sleep(0.02)
            continue
        if st == 503:
            seen = (body, r.getheader("content-type"), r.getheader("content-length"))
            break
        break
    assert seen == (b"", None, "0")
    s.wait_ready()
    assert s.req("GET", "/metrics")[0] == 404


def test_generate_during_drain_is_served(sims):
    """Neither version has a 'Server is shutting down' answer: during the SIGTERM drain /generate still runs."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], env={"MOESWEEP_SIM_TIME_SCALE": "0.4"})
    s.wait_ready()
    s.req("POST", "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    st, body, _ = s.req("POST", "/generate", {"text": "x y", "sampling_params": {"max_new_tokens": 3,
                                                                                "ignore_eos": True}})
    assert st == 200 and len(json.loads(body)["output_ids"]) == 3
    assert s.req("GET", "/health")[0] == 503
    assert "Health check request received during shutdown. Returning 503." in s.log()


META_KEYS = {
    ("0.5.9", False): ["id", "finish_reason", "prompt_tokens", "weight_version", "total_retractions",
                       "completion_tokens", "cached_tokens", "e2e_latency"],
    ("0.5.9", True): ["id", "finish_reason", "prompt_tokens", "weight_version", "total_retractions", "queue_time",
                      "prefill_launch_delay", "prefill_launch_latency", "prefill_finished_ts", "completion_tokens",
                      "cached_tokens", "e2e_latency", "request_received_ts", "request_sent_to_scheduler_ts",
                      "response_sent_to_client_ts", "decode_finished_ts", "inference_time", "decode_throughput"],
    ("0.5.23", False): ["id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
                        "reasoning_tokens", "completion_tokens", "cached_tokens", "e2e_latency"],
    ("0.5.23", True): ["id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
                       "forward_entry_time", "prefill_finished_time", "queue_time", "reasoning_tokens",
                       "completion_tokens", "cached_tokens", "e2e_latency", "request_received_ts",
                       "first_token_latency", "api_server_dispatch_finish_ts", "response_sent_to_client_ts",
                       "request_finished_ts", "decode_throughput"],
}


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
@pytest.mark.parametrize("enable_metrics", [False, True])
def test_meta_info_keys(sims, version, enable_metrics):
    """tokenizer_manager.py _handle_batch_output (+ _calculate_timing_metrics on 0.5.9, the time stats'
    convert_to_output_meta_info on 0.5.23): the keys and their order, per version and --enable-metrics."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"] + (["--enable-metrics"] if enable_metrics else []),
             version=version)
    s.wait_ready()
    g = json.loads(s.req("POST", "/generate", {"text": "a b c", "sampling_params": {"max_new_tokens": 5,
                                                                                   "ignore_eos": True}})[1])
    meta = g["meta_info"]
    assert list(meta) == META_KEYS[(version, enable_metrics)]
    if enable_metrics:
        assert 0 <= meta["queue_time"] < 1 and meta["decode_throughput"] > 0
        assert meta["request_received_ts"] <= meta["response_sent_to_client_ts"]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_metrics_histograms_count_what_was_served(sims, version):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--enable-metrics", "--served-model-name", "g"],
             version=version, env={"MOESWEEP_SIM_DECODE_RATE": "200"})
    s.wait_ready()
    for _ in range(3):
        s.req("POST", "/generate", {"text": "a b", "stream": True,
                                    "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}})
    text = s.req("GET", "/metrics")[1].decode()
    lbl = 'engine_type="unified",' if version == "0.5.23" else ""
    stream = 'is_streaming="true",' if version == "0.5.23" else ""  # labels are sorted by name

    def value(sample):
        return float(next(x for x in text.splitlines() if x.startswith(sample + " ")).rsplit(" ", 1)[1])

    # 3 streamed requests (+ the non-streaming warmup request on 0.5.9's unlabelled series)
    ttft = value(f'sglang:time_to_first_token_seconds_count{{{lbl}{stream}model_name="g"}}')
    assert ttft == (4 if version == "0.5.9" else 3)
    assert value(f'sglang:time_to_first_token_seconds_bucket{{{lbl}{stream}le="+Inf",model_name="g"}}') == ttft
    # every token after the first is one inter-token observation (warmup: 8 tokens -> 7)
    itl = value(f'sglang:inter_token_latency_seconds_count{{{lbl}model_name="g"}}')
    assert itl == 3 * 5 + 7
    assert "# TYPE sglang:e2e_request_latency_seconds histogram" in text
    assert "# HELP sglang:inter_token_latency_seconds Histogram of inter-token latency in seconds." in text
    assert "sglang:gen_throughput{engine_type=\"unified\",model_name=\"g\",moe_ep_rank=\"0\",pp_rank=\"0\"," \
           "tp_rank=\"0\"}" in text


# ------------------------------------------------------------------------------------------ start-up log
def test_059_startup_shape(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_trtllm", "--disable-flashinfer-autotune",
                     "--disable-cuda-graph"])
    s.wait_exit()
    lines = s.log().splitlines()
    notice = lines.index("FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set.")
    sargs = next(i for i, x in enumerate(lines) if "] server_args=ServerArgs(" in x)
    assert notice < sargs  # bare: __post_init__ logs before configure_logger
    assert lines[sargs].split("] ", 1)[1].startswith(
        "server_args=ServerArgs(model_path='lukealonso/GLM-5-NVFP4', tokenizer_path='lukealonso/GLM-5-NVFP4', ")
    assert ", page_size=64, " in lines[sargs] and ", kv_cache_dtype='fp8_e4m3', " in lines[sargs]
    assert ", disable_shared_experts_fusion=True, " in lines[sargs]


def test_059_non_mla_kv_line_and_tqdm_bar(sims):
    s = sims(["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1"],
             env={"MOESWEEP_SIM_PHASE_CAPTURE_S": "0.5"})
    s.wait_ready()
    log = s.log()
    assert re.search(r"\] KV Cache is allocated\. #tokens: \d+, K size: \d+\.\d\d GB, V size: \d+\.\d\d GB\n", log)
    raw = (s.tmp / "stderr.txt").read_bytes().decode()  # read_text() would turn tqdm's \r into \n
    bar = [x for x in raw.split("\r") if x.startswith("Capturing batches (bs=1 ")][-1].split("\n")[0]  # close()
    assert re.fullmatch(r"Capturing batches \(bs=1 avail_mem=\d+\.\d\d GB\): 100%\|██████████\| (\d+)/\1 "
                        r"\[00:00<00:00, +\d+\.\d\dit/s\] *", bar), bar
    assert "\r  0%|          | 0/" in raw  # the bar tqdm prints before the first set_description
    assert re.search(r"\|[█▏▎▍▌▋▊▉]+ +\| \d+/", raw)  # partial blocks while it runs


def test_0523_startup_shape(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--cuda-graph-max-bs-decode", "8"],
             version="0.5.23")
    s.wait_ready()
    log = s.log()
    assert "Running FlashInfer autotune..." not in log and "Capture cuda graph bs" not in log
    assert re.search(r"TP0\] Running FlashInfer autotune with cache: .*/flashinfer/autotune/0\.7\.2/sm120/"
                     r"[0-9a-f]{16}/rank_tp0_pp0_dp0\.json\n", log)
    assert "TP7] Init parallel begin.\n" in log and "Init torch distributed" not in log
    assert "TP0] Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=" in log
    line = next(x for x in log.splitlines() if "] server_args={" in x)
    d = ast.literal_eval(line.split("] server_args=", 1)[1])
    assert d["model_path"] == MODEL and d["cuda_graph_max_bs_decode"] == 8
    assert d["cuda_graph_config"]["decode"]["max_bs"] == 8 and d["cuda_graph_config"]["decode"]["bs"] == [1, 2, 4, 8]


def test_0523_cuda_graph_config_is_json(tmp_path):
    env = {**os.environ, "MOESWEEP_SIM_SGLANG_VERSION": "0.5.23"}
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--cuda-graph-config", "{bad"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "error: argument --cuda-graph-config: --cuda-graph-config must be JSON: Expecting property name " in r.stderr
    r = subprocess.run([sys.executable, str(SIM), "--model-path", "m", "--cuda-graph-config",
                        '{"decode": {"max_bs": 4, "nope": 1}}'], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "--cuda-graph-config['decode']: unknown key 'nope', expected one of " \
        "('backend', 'max_bs', 'bs')" in r.stderr


def test_0523_cuda_graph_config_bounds_capture(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--cuda-graph-config",
                     '{"decode": {"max_bs": 16}}'], version="0.5.23")
    s.wait_ready()
    assert "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16], elapsed=" in s.log()


def test_0523_allreduce_fusion_fails_at_kernel_warmup(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--enable-flashinfer-allreduce-fusion"],
             version="0.5.23")
    assert s.wait_exit() == -signal.SIGKILL
    log = s.log()
    assert log.index("TP7] Memory pool end.") < log.index("Scheduler hit an exception")
    assert "Capture target decode CUDA graph begin" not in log
    assert 'model_executor/runner/eager_runner.py", line 153, in __init__\n    self.warmup()\n' in log
    assert 'layers/flashinfer_comm_fusion.py", line 49, in _resolve_backend\n    raise ValueError(\n' \
           "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.\n" in log


# ------------------------------------------------------------------------------------------ GPU state
def test_nvidia_smi_sees_the_server_under_load(sims):
    """While requests run the server's gpu-state makes the simulated 8x RTX PRO 6000 look launch bound
    (~100 % util, ~55 % of 600 W, SM clock at its maximum); idle once they finish."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], env={"MOESWEEP_SIM_DECODE_RATE": "20"})
    s.wait_ready()
    smi = REPO / "simulator" / "bin" / "nvidia-smi"
    env = {**os.environ, "MOESWEEP_SIM_PROFILE": str(s.tmp / "profile.json"), "MOESWEEP_SIM_STATE": str(s.state)}
    q = ["--query-gpu=utilization.gpu,power.draw,enforced.power.limit,clocks.sm,clocks.max.sm,memory.used",
         "--format=csv,noheader,nounits"]
    import threading

    t = threading.Thread(target=s.req, args=("POST", "/generate", {"text": "x", "sampling_params": {
        "max_new_tokens": 60, "ignore_eos": True}}), kwargs={"timeout": 60})
    t.start()
    time.sleep(2.5)  # past the power ramp
    out = subprocess.run([sys.executable, str(smi), *q], env=env, capture_output=True, text=True).stdout
    cells = [line.split(", ") for line in out.splitlines()]
    assert len(cells) == 8
    for util, power, limit, clock, max_clock, mem in cells:
        assert util == "100" and 0.53 <= float(power) / float(limit) <= 0.57 and clock == max_clock == "3090"
        assert int(mem) > 60000
    t.join()
    time.sleep(0.6)
    out = subprocess.run([sys.executable, str(smi), *q], env=env, capture_output=True, text=True).stdout
    assert {line.split(", ")[0] for line in out.splitlines()} == {"0"}


# ------------------------------------------------------------------------------ lines the real code prints
def prefill_throughputs(log: str) -> list[float]:
    return [float(line.rsplit("input throughput (token/s): ", 1)[1].split(",")[0])
            for line in log.splitlines() if "Prefill batch" in line and "input throughput" in line]


def test_first_prefill_line_reports_zero_input_throughput_on_059(sims):
    """0.5.9 divides the previous prefill batch's tokens by the time since the previous prefill line
    (managers/scheduler_metrics_mixin.py:166-169): the first line, the server's own warmup, says 0.00."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"])
    s.wait_ready()
    s.req("POST", "/generate", {"text": "a b c d e f g h", "sampling_params": {"max_new_tokens": 1}})
    rates = prefill_throughputs(s.log())
    assert len(rates) >= 2 and rates[0] == 0.0 and rates[1] > 0


def test_prefill_line_reports_this_batch_over_the_gap_on_0523(sims):
    """0.5.23 divides this batch's tokens by the time since the previous prefill line (or since the scheduler's
    metrics were set up; managers/scheduler_components/metrics_reporter.py:733-740): never 0 for a batch."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version="0.5.23")
    s.wait_ready()
    rates = prefill_throughputs(s.log())
    assert rates and rates[0] > 0


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_flush_cache_sends_no_content_type(sims, version):
    """A starlette Response(content=..., status_code=...) has no media type, so no content-type header."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], version=version)
    s.wait_ready()
    status, body, r = s.req("POST", "/flush_cache")
    assert status == 200 and body.startswith(b"Cache flushed.\nPlease check backend logs")
    assert r.getheader("content-type") is None and r.getheader("content-length") == str(len(body))


def test_0523_glm5_dsa_resolution_on_sm120(sims):
    """0.5.23 resolves GLM-5's DSA settings and logs each step (arg_groups/model_overrides/deepseek_v2.py,
    model_hook.py, overrides.py:490-740): the KV cache goes to fp8_e4m3 on SM >= 10 and the pool is allocated in
    torch.float8_e4m3fn; on SM12x the GLM FP8 DSA backends are flashinfer_sparse_mla."""
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--attention-backend", "flashinfer"],
             version="0.5.23")
    s.wait_ready()
    log = s.log()
    lines = ["Setting page size to 64 for DeepSeek DSA.",
             "Set dense attention kv len threshold to model index_topk=2048 for DeepSeek with DSA.",
             "DSA with TP mode is active, attn_dp_size=1, tp_size=8, attn_tp_size=8, attention weights will be "
             "sharded across 8 ranks.",
             "Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device.",
             "Set DSA backends for GLM FP8 KV Cache on SM120/SM121: prefill=flashinfer_sparse_mla, "
             "decode=flashinfer_sparse_mla."]
    positions = [log.index(line) for line in lines]
    assert positions == sorted(positions)
    assert "Use dsa attention backend" not in log  # --attention-backend was given
    assert "KV Cache is allocated. dtype: torch.float8_e4m3fn," in log
    assert "'kv_cache_dtype': 'fp8_e4m3'" in log or "kv_cache_dtype='fp8_e4m3'" in log


def test_0523_glm5_dsa_resolution_on_sm90(sims):
    s = sims(BASE[:-4] + ["--host", "127.0.0.1", "--quantization", "fp8"], gpu="h200", version="0.5.23")
    s.wait_ready()
    log = s.log()
    assert "Use dsa attention backend for DeepSeek with DSA." in log
    assert "Setting KV cache dtype to bfloat16 for DeepSeek DSA on SM9 device." in log
    assert "Set DSA backends for bfloat16 KV Cache: prefill=flashmla_sparse, decode=fa3." in log
    assert "KV Cache is allocated. dtype: torch.bfloat16," in log


def test_0523_allreduce_fusion_switch_is_deprecated(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass", "--enable-flashinfer-allreduce-fusion"],
             version="0.5.23")
    assert s.wait_exit() == -signal.SIGKILL
    log = s.log()
    deprecated = ("--enable-flashinfer-allreduce-fusion is deprecated. Please use "
                  "--flashinfer-allreduce-fusion-backend=auto instead.")
    assert log.index(deprecated) < log.index("ValueError: FlashInfer allreduce fusion requires SM90 or SM10X")


def test_0523_nvfp4_auto_on_sm120_says_why_it_runs_flashinfer_cutlass(sims):
    s = sims(BASE, version="0.5.23")
    s.wait_ready()
    assert ("Use flashinfer_cutlass as MoE runner backend on SM110/SM120 for modelopt_fp4 (trtllm-gen MoE kernels "
            "are SM100-only)") in s.log()


@pytest.mark.parametrize("version,context", [
    ("0.5.9", "Context: self.device='cuda' self.gpu_id=8 os.environ.get('CUDA_VISIBLE_DEVICES')=None self.tp_rank=0 "
              "self.tp_size=8"),
    ("0.5.23", "Context: device=cuda gpu_id=8 CUDA_VISIBLE_DEVICES=None tp_rank=0"),
])
def test_schedulers_beyond_the_gpus_die_at_set_device(sims, version, context):
    # tp 8 x dp 2 on the 8 simulated GPUs: the second DP group's schedulers take GPUs 8-15
    s = sims(["--model-path", MODEL, "--tp", "8", "--dp", "2"], version=version)
    assert s.wait_exit() == -signal.SIGKILL
    log = s.log()
    assert f"DP1 TP0] {context}\n" in log
    assert log.count("Scheduler hit an exception: Traceback (most recent call last):") == 8
    assert "RuntimeError: CUDA error: invalid device ordinal\n" in log
    assert "set_device(" in log and "Load weight begin" not in log and "DP0 TP0] Context" not in log


def test_the_simulator_and_the_preflight_agree_on_which_layouts_fit():
    """Two derivations of sglang's GPU-index formula meet: the simulator's (Server.unseen_gpus) and the one the
    preflight and the dry run share (module_utils/sglang_dryrun._gpu_ids, via compat.gpu_layout_finding)."""
    import types

    from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat
    from moesweep_sim import sglang_server

    kb = compat.load_kb()
    cases = [(tp, dp, att, base, step, cvd) for tp in (1, 2, 4, 8) for dp in (1, 2, 4) for att in (False, True)
             for base in (0, 4) for step in (1, 2) for cvd in (None, "0,1,2,3")]
    for tp, dp, att, base, step, cvd in cases:
        args = {"tp_size": tp, "dp_size": dp, "enable_dp_attention": att, "base_gpu_id": base, "gpu_id_step": step}
        sim = types.SimpleNamespace(args=args, tp=tp, nnodes=1, local_ranks=range(tp), gpu={"count": 8})
        sim.visible_gpus = types.MethodType(sglang_server.Server.visible_gpus, sim)
        env = {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd}
        with mock.patch.dict(os.environ, env, clear=False):
            if cvd is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            simulated = bool(sglang_server.Server.unseen_gpus(sim))
        flags = {"tp-size": tp, "dp-size": dp, "enable-dp-attention": att, "base-gpu-id": base, "gpu-id-step": step}
        verdict = compat.evaluate({"backend": "triton", "sglang_version": "0.5.9", "flags": flags, "environment": env},
                                  {"sm": "sm120", "gpu_count": 8}, kb)
        assert (verdict.get("stage") == "scheduler_init") == simulated, (tp, dp, att, base, step, cvd)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_model_path_to_nothing_dies_at_its_arguments(sims, version):
    # transformers' own text from AutoConfig (what the dry run of the real 0.5.9 printed for this path), exit 1
    s = sims(["--model-path", "/models/does-not-exist", "--tp", "8"], version=version)
    assert s.wait_exit() == 1
    log = s.log()
    assert "OSError: Can't load the configuration of '/models/does-not-exist'." in log
    assert "Init torch distributed begin" not in log and "Init parallel begin" not in log
