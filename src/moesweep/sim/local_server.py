"""The simulated SGLang server as a local process, the benchmark clients' cached venvs, and the
sglang_bench module run the way Ansible runs it: what measures the module itself without booting a host, shared
by the bench scripts (``bench/aiperf_agreement.py``, ``bench/bench_overhead.py``, ``bench/precision_wall.py``)
and their integration tests (``tests/integration/test_bench_module_sim.py``, ``test_bench_precision_sim.py``).

No simulated host is booted: the server listens on 127.0.0.1 and the simulated ``nvidia-smi`` reads the
server's live GPU state through ``MOESWEEP_SIM_PROFILE`` / ``MOESWEEP_SIM_STATE`` (the contract in
docs/architecture.md), so the module samples telemetry exactly as on a simulated host.

The ground truth of a level is the simulator's token model (``simulator/moesweep_sim/tokenmodel.py``:
``expected_output_throughput`` with the rates the server runs at). Rates are set through the
simulator's documented overrides (``MOESWEEP_SIM_DECODE_RATE`` / ``_DECODE_ALPHA`` / ``_PREFILL_RATE``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from moesweep._collection import REPO_ROOT as REPO
from moesweep.sim import lockfiles
from moesweep.sim.wheelhouse import TARGET_PYTHON

SIMULATOR = REPO / "simulator"
SIM = SIMULATOR / "bin" / "sglang-sim"
SMI = SIMULATOR / "bin" / "nvidia-smi"
TOKENIZER = SIMULATOR / "tokenizer"
MODULE = REPO / "plugins" / "modules" / "sglang_bench.py"
VENVS = Path(os.path.expanduser("~/.cache/moesweep/venvs"))
BENCH_CLIENT_VENV = VENVS / "bench-sglang-0.5.9"
# sglang 0.5.9's bench_serving needs no torch (its sglang/__init__ imports only sglang.lang.*, sglang.utils, which
# needs IPython and pydantic, and sglang.srt.environ): sglang --no-deps plus these
BENCH_CLIENT_PKGS = ["aiohttp", "numpy", "requests", "tqdm", "pybase64", "pillow", "ipython", "pydantic",
                     "datasets", "transformers==4.57.1"]
NO_UNIT = "moesweep-bench-no-such.service"  # the module reads this unit's state; it never exists here

# the token model is the simulator's own (simulator/ is not part of the package): the ground truth the server runs
if str(SIMULATOR) not in sys.path:
    sys.path.insert(0, str(SIMULATOR))
from moesweep_sim import tokenmodel  # noqa: E402


class VenvError(RuntimeError):
    """A client venv could not be built (the message carries pip's last words)."""


def build_venv(venv: Path, installs: list[list[str]]) -> Path:
    """``venv/bin/python``, building the venv first when it is missing: each entry of ``installs`` is one
    ``pip install`` argument list. Built under ``<venv>.building`` and renamed when complete, so a half-built
    venv is never taken for a finished one (venv scripts keep absolute paths: use the python by path)."""
    py = venv / "bin" / "python"
    if py.exists():
        return py
    with lockfiles.held(venv):  # one builder; a second caller waits and takes the finished venv
        if py.exists():
            return py
        return _build_venv(venv, installs)


def _build_venv(venv: Path, installs: list[list[str]]) -> Path:
    py = venv / "bin" / "python"
    tmp = venv.with_name(venv.name + ".building")
    subprocess.run([TARGET_PYTHON, "-m", "venv", "--clear", str(tmp)], check=True)
    for args in installs:
        r = subprocess.run([str(tmp / "bin" / "pip"), "install", "-q", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise VenvError(f"pip install {' '.join(args)} into {tmp} failed: {r.stderr.strip()[-800:]}")
    tmp.rename(venv)
    return py


def bench_client_python() -> Path:
    """The client venv the sglang_env role installs on a host (sglang 0.5.9's bench_serving): the cached one,
    built on first use, or the interpreter that MOESWEEP_BENCH_CLIENT_PYTHON names (an existing client venv)."""
    given = os.environ.get("MOESWEEP_BENCH_CLIENT_PYTHON")
    if given:
        if not os.access(given, os.X_OK):
            raise VenvError(f"MOESWEEP_BENCH_CLIENT_PYTHON={given} is not an executable interpreter")
        return Path(given)
    return build_venv(BENCH_CLIENT_VENV, [["--no-deps", "sglang==0.5.9"], BENCH_CLIENT_PKGS])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimServer:
    """One simulated SGLang server on 127.0.0.1 (``with SimServer(...) as srv:``).

    ``rates`` = (decode tok/s per request at batch 1, alpha, prefill tok/s) or None for the token model's
    table entry of (backend, gpu_model)."""

    def __init__(self, workdir: Path, gpu_model: str = "rtx-pro-6000", gpu_count: int = 8, tp: int = 8,
                 backend: str = "flashinfer_cutlass", quantization: str | None = "modelopt_fp4",
                 rates: tuple[float, float, float] | None = None, sglang_version: str = "0.5.9",
                 time_scale: float = 0.05, ready_timeout: float = 90.0, env: dict | None = None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.gpu_model, self.backend, self.tp = gpu_model, backend, tp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        profile = self.dir / "profile.json"
        profile.write_text(json.dumps({"simulated": True, "gpu_model": gpu_model, "gpu_count": gpu_count,
                                       "sglang_version": sglang_version}))
        # what the simulated nvidia-smi needs to see this server's GPUs (the module's sampler inherits it)
        self.smi_env = {"MOESWEEP_SIM_PROFILE": str(profile), "MOESWEEP_SIM_STATE": str(self.dir / "gpu-state.json"),
                        "MOESWEEP_SIM_FAULT_FILE": str(self.dir / "no-fault")}
        self.rate_env = {}
        if rates is not None:
            self.rate_env = {"MOESWEEP_SIM_DECODE_RATE": str(rates[0]), "MOESWEEP_SIM_DECODE_ALPHA": str(rates[1]),
                             "MOESWEEP_SIM_PREFILL_RATE": str(rates[2])}
        self.argv = [sys.executable, str(SIM), "--model-path", str(TOKENIZER), "--tp", str(tp),
                     "--moe-runner-backend", backend, "--host", "127.0.0.1", "--port", str(self.port)]
        if quantization:
            self.argv += ["--quantization", quantization]
        self.time_scale = time_scale
        self.ready_timeout = ready_timeout
        self.extra_env = dict(env or {})  # more simulator overrides (a profile's phases, say)
        self.started_s: float | None = None  # seconds from the process's start to its first healthy answer
        self.proc: subprocess.Popen | None = None
        self.log_path = self.dir / "server.log"

    def params(self) -> tuple[float, float, float]:
        """The rates the server runs at (the token model reads the same overrides)."""
        saved = {k: os.environ.get(k) for k in self.rate_env}
        try:
            os.environ.update(self.rate_env)
            return tokenmodel.params(self.backend, self.gpu_model)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def expected(self, concurrency: int, input_len: int, output_len: int) -> float:
        """The token model's output throughput (tok/s) of a closed-loop level: the ground truth."""
        return tokenmodel.expected_output_throughput(concurrency, input_len, output_len, *self.params())

    def __enter__(self) -> SimServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOESWEEP_SIM_")}
        env.update(self.smi_env, **self.rate_env, MOESWEEP_SIM_TIME_SCALE=str(self.time_scale))
        env.update(self.extra_env)
        t0 = time.monotonic()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        end = time.monotonic() + self.ready_timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        self.started_s = time.monotonic() - t0
                        return self
            except OSError:
                time.sleep(0.2)
        tail = self.log_path.read_text()[-2000:]
        self.__exit__(None, None, None)
        raise RuntimeError(f"the simulated server on {self.url} did not become ready: {tail}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def module_args(server: SimServer, client_python: Path, output_dir: Path, **overrides) -> dict:
    """sglang_bench's arguments against ``server``: its tokenizer, the simulated nvidia-smi, no unit."""
    args = {"client_python": str(client_python), "host": "127.0.0.1", "port": server.port,
            "tokenizer": str(TOKENIZER), "nvidia_smi_path": str(SMI), "unit": NO_UNIT,
            "output_dir": str(output_dir), "rerun": True}
    args.update(overrides)
    return args


def run_module(args: dict, workdir: Path, env: dict | None = None, timeout: float = 600) -> tuple[int, dict, float]:
    """Run plugins/modules/sglang_bench.py as Ansible's AnsiballZ does (a JSON args file, the collection by
    FQCN on PYTHONPATH). Returns (rc, the module's result, wall seconds of the module process)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    full_env = dict(os.environ, PYTHONPATH=str(REPO / "collections"), **(env or {}))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, env=full_env,
                       cwd=str(REPO), timeout=timeout)
    wall = time.monotonic() - t0
    try:
        result = json.loads(r.stdout)
    except ValueError:
        result = {"failed": True, "msg": f"no JSON from the module (rc {r.returncode}): "
                                         f"{(r.stdout + r.stderr)[-2000:]}"}
    return r.returncode, result, wall
