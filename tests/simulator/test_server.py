"""The simulated SGLang server, run as a subprocess on 127.0.0.1 with a temporary profile/state."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.paths import REPO

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
    assert st == 200 and b'sglang:num_running_reqs{model_name="glm-5"}' in body
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


def test_nvfp4_on_h200_fails(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], gpu="h200")
    assert s.wait_exit() == -signal.SIGKILL
    assert "ValueError: Current platform does not support NVFP4 quantization. Please use Blackwell and above." \
        in s.log()


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


def test_fault_oom_kv(sims):
    s = sims(BASE + ["--moe-runner-backend", "flashinfer_cutlass"], fault="oom_kv")
    assert s.wait_exit() == -signal.SIGKILL
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: self.server_args.mem_fraction_static=None") in s.log()


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
