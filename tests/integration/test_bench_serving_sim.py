"""Real `sglang.bench_serving` (sglang 0.5.9, whose client needs no torch: sglang --no-deps plus its light
dependencies) against the simulated SGLang server: every request must succeed and the measured output throughput must be
within 3 % of the simulator's model (tokenmodel.expected_output_throughput), over both the native
/generate API (--backend sglang) and the OpenAI API (--backend sglang-oai).

The client venv is cached in ~/.cache/moesweep/venvs/bench-sglang-0.5.9; the tokenizer is made
offline by tests/helpers/make_tiny_tokenizer.py.  The token rate is kept low (8 streams x ~22
tok/s) so the simulator and the client are far from CPU-bound on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.paths import REPO, TARGET_PYTHON
from moesweep_sim import tokenmodel

# alone: its throughput is held to 3 % of the simulator's ground truth, which a test in another worker would slow.
pytestmark = [pytest.mark.slow, pytest.mark.alone]

SIM = REPO / "simulator" / "bin" / "sglang-sim"
VENV = Path(os.path.expanduser("~/.cache/moesweep/venvs/bench-sglang-0.5.9"))
CLIENT_PKGS = ["aiohttp", "numpy", "requests", "tqdm", "pybase64", "pillow", "ipython", "pydantic", "datasets",
               "transformers==4.57.1"]


CONCURRENCY, INPUT_LEN, OUTPUT_LEN, PROMPTS = 8, 32, 128, 16
RATE_ENV = {"MOESWEEP_SIM_DECODE_RATE": "30", "MOESWEEP_SIM_DECODE_ALPHA": "0.05", "MOESWEEP_SIM_PREFILL_RATE": "5000"}


def _venv_python() -> Path:
    py = VENV / "bin" / "python"
    if py.exists():
        return py
    tmp = VENV.with_name(VENV.name + ".building")
    subprocess.run([TARGET_PYTHON, "-m", "venv", "--clear", str(tmp)], check=True)
    pip = [str(tmp / "bin" / "pip"), "install", "-q"]
    r1 = subprocess.run(pip + ["--no-deps", "sglang==0.5.9"], capture_output=True, text=True)
    r2 = subprocess.run(pip + CLIENT_PKGS, capture_output=True, text=True) if r1.returncode == 0 else r1
    if r2.returncode != 0:
        pytest.skip(f"cannot build the bench client venv: {r2.stderr[-500:]}")
    tmp.rename(VENV)  # venv scripts use absolute paths, so use its python by path only
    return py


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def client_py():
    return _venv_python()


@pytest.fixture(scope="module")
def tokenizer_dir(client_py, tmp_path_factory):
    out = tmp_path_factory.mktemp("tok") / "tiny-tokenizer"
    subprocess.run([str(client_py), str(REPO / "tests" / "helpers" / "make_tiny_tokenizer.py"), str(out)],
                   check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out


@pytest.fixture(scope="module")
def sim_server(tmp_path_factory, tokenizer_dir):
    tmp = tmp_path_factory.mktemp("sim")
    prof = tmp / "profile.json"
    prof.write_text(json.dumps({"simulated": True, "gpu_model": "rtx-pro-6000", "gpu_count": 8,
                                "sglang_version": "0.5.9"}))
    port = _free_port()
    env = {**os.environ, **RATE_ENV, "MOESWEEP_SIM_PROFILE": str(prof), "MOESWEEP_SIM_STATE": str(tmp / "st.json"),
           "MOESWEEP_SIM_FAULT_FILE": str(tmp / "nofault"), "MOESWEEP_SIM_TIME_SCALE": "0.05"}
    env.pop("MOESWEEP_SIM_FAULT", None)
    env.pop("MOESWEEP_SIM_SGLANG_VERSION", None)
    log = open(tmp / "server.log", "w")
    proc = subprocess.Popen([sys.executable, str(SIM), "--model-path", str(tokenizer_dir), "--tp", "8",
                             "--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass",
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            env=env)
    url = f"http://127.0.0.1:{port}"
    end = time.time() + 60
    while time.time() < end:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("simulator not ready: " + (tmp / "server.log").read_text()[-2000:])
    yield url, tmp
    proc.kill()
    proc.wait(10)
    log.close()


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai"])
def test_bench_serving_throughput_matches_model(client_py, tokenizer_dir, sim_server, backend, tmp_path):
    url, _ = sim_server
    out = tmp_path / "bench.jsonl"
    cmd = [str(client_py), "-m", "sglang.bench_serving", "--backend", backend, "--base-url", url,
           "--model", str(tokenizer_dir), "--tokenizer", str(tokenizer_dir), "--dataset-name", "random-ids",
           "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
           "--random-range-ratio", "1.0", "--num-prompts", str(PROMPTS), "--max-concurrency", str(CONCURRENCY),
           "--request-rate", "inf", "--output-file", str(out), "--disable-tqdm"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads(out.read_text().splitlines()[-1])
    assert res["completed"] == PROMPTS, res
    assert res["total_output_tokens"] == PROMPTS * OUTPUT_LEN
    base, alpha, prefill = (float(RATE_ENV["MOESWEEP_SIM_DECODE_RATE"]), float(RATE_ENV["MOESWEEP_SIM_DECODE_ALPHA"]),
                            float(RATE_ENV["MOESWEEP_SIM_PREFILL_RATE"]))
    expected = tokenmodel.expected_output_throughput(CONCURRENCY, INPUT_LEN, OUTPUT_LEN, base, alpha, prefill)
    measured = res["output_throughput"]
    print(f"{backend}: measured {measured:.2f} tok/s, expected {expected:.2f} tok/s "
          f"({100 * (measured / expected - 1):+.2f} %)")
    assert abs(measured / expected - 1) <= 0.03, (measured, expected)
