"""The simulator's performance model: a KNOWN ground truth for benchmark tests.

This is NOT a claim about real hardware: the numbers below are simulation parameters chosen to be
plausible in shape (decode gets slower per request as the batch grows, aggregate throughput
saturates), so that a benchmark run through the simulator has an exactly computable expected result.

Model (continuous batching, one scheduler loop, like sglang's non-overlap event loop):

* decode step with ``n`` running requests takes ``1 / per_req_rate(n)`` seconds and gives every
  running request one token, where ``per_req_rate(n) = base / (1 + alpha * (n - 1))``;
  aggregate decode throughput is ``n * per_req_rate(n)``;
* a prefill batch of ``T`` new tokens takes ``T / prefill_rate`` seconds and produces each new
  request's first token; decode does not run during a prefill batch;
* closed-loop benchmark with concurrency ``C``, fixed input ``I`` and output ``O`` tokens
  (``expected_output_throughput``): each request costs ``I / prefill_rate`` of prefill time and
  ``(O - 1)`` decode tokens produced at ``C * per_req_rate(C)``, so
  ``throughput = O / (I / prefill_rate + (O - 1) / (C * per_req_rate(C)))``.

Environment overrides (for tests and experiments): ``MOESWEEP_SIM_DECODE_RATE`` (base, tok/s per
request at batch 1), ``MOESWEEP_SIM_DECODE_ALPHA``, ``MOESWEEP_SIM_PREFILL_RATE`` (tok/s).
"""

from __future__ import annotations

import os

# (backend, gpu_model) -> (base decode tok/s per request at n=1, alpha, prefill tok/s)
# "auto" resolves per version/SM in sglang_server.resolve_backend().
RATES = {
    ("flashinfer_cutlass", "rtx-pro-6000"): (38.0, 0.045, 6000.0),
    ("flashinfer_cutedsl", "rtx-pro-6000"): (36.0, 0.050, 5600.0),
    ("cutlass", "rtx-pro-6000"): (34.0, 0.050, 5200.0),
    ("triton", "rtx-pro-6000"): (24.0, 0.060, 4000.0),
    ("marlin", "rtx-pro-6000"): (22.0, 0.070, 3500.0),
    # NVFP4 MoE is impossible on SM90 (ModelOptNvFp4FusedMoEMethod's ValueError,
    # https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/layers/quantization/modelopt_quant.py)
    ("flashinfer_trtllm", "h200"): (0.0, 0.0, 0.0),
    ("marlin", "h200"): (30.0, 0.060, 7000.0),
    ("triton", "h200"): (32.0, 0.050, 8000.0),
    ("flashinfer_cutlass", "h200"): (40.0, 0.045, 9000.0),
    ("deep_gemm", "h200"): (42.0, 0.040, 10000.0),
    ("flashinfer_trtllm", "b200"): (60.0, 0.035, 16000.0),
    ("flashinfer_trtllm_routed", "b200"): (58.0, 0.035, 15500.0),
    ("flashinfer_cutedsl", "b200"): (56.0, 0.040, 15000.0),
    ("flashinfer_cutlass", "b200"): (52.0, 0.040, 14000.0),
    ("cutlass", "b200"): (48.0, 0.045, 13000.0),
    ("deep_gemm", "b200"): (54.0, 0.040, 15000.0),
    ("triton", "b200"): (40.0, 0.050, 11000.0),
    ("marlin", "b200"): (36.0, 0.060, 9000.0),
}
DEFAULT_RATE = (30.0, 0.05, 5000.0)


def params(backend: str, gpu_model: str) -> tuple[float, float, float]:
    base, alpha, prefill = RATES.get((backend, gpu_model.replace("-x2", "")), DEFAULT_RATE)
    if base <= 0:
        base, alpha, prefill = DEFAULT_RATE
    base = float(os.environ.get("MOESWEEP_SIM_DECODE_RATE", base))
    alpha = float(os.environ.get("MOESWEEP_SIM_DECODE_ALPHA", alpha))
    prefill = float(os.environ.get("MOESWEEP_SIM_PREFILL_RATE", prefill))
    return base, alpha, prefill


def per_req_rate(n: int, base: float, alpha: float) -> float:
    n = max(1, n)
    return base / (1.0 + alpha * (n - 1))


def step_time(n: int, base: float, alpha: float) -> float:
    return 1.0 / per_req_rate(n, base, alpha)


def expected_output_throughput(concurrency: int, input_len: int, output_len: int,
                               base: float, alpha: float, prefill: float) -> float:
    c = max(1, concurrency)
    decode_agg = c * per_req_rate(c, base, alpha)
    per_request_time = input_len / prefill + max(0, output_len - 1) / decode_agg
    return output_len / per_request_time
