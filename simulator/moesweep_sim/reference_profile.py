"""The reference deployment's scale as a simulated host profile: GLM-5-NVFP4 at ``--tp 8`` on 8x RTX PRO 6000
(PCIe), a server start of about 3.5 minutes and about 225 output tok/s at concurrency 64 with 1024 input / 1024
output tokens, the two figures the project was given for that deployment. Everything else here is a simulation
parameter chosen to reproduce them (how the start splits into phases, the decode rate at batch 1, the prefill rate),
not a measurement.

Runnable time-scaled: ``env(backend, time_scale)`` gives the simulator's overrides for a server that runs
``time_scale`` times real time (phases ``time_scale`` times as long, every token rate ``1 / time_scale`` times as
fast), so a sweep measured at ``time_scale`` projects to real time by dividing its server and request time by it.
``expected(backend, concurrency)`` is the token model's closed-loop throughput in real time: the ground truth.

Its GPUs drift as a real card does (``drift.py``: step time CV 0.3 % correlated over 60 s, measured on an H100), so
one cohort's figure is off the token model's by a real card's amount, which the benchmark's interval has to hold.
"""

from __future__ import annotations

import zlib

from . import tokenmodel

INPUT_LEN = OUTPUT_LEN = 1024
START_S = 210.0  # ~3.5 min
# How the start splits (seconds, real time): the weights (~453 GB) dominate. MOESWEEP_SIM_PHASE_<NAME>_S.
PHASES_S = {"init": 10.0, "dist": 5.0, "load": 150.0, "kv": 5.0, "capture": 30.0, "autotune": 10.0}
BASE_DECODE = 20.0  # tok/s per request at batch 1
PREFILL = 4000.0  # tok/s
TARGET_C64 = 225.0
# The step-time drift (drift.py), real seconds: bench/device/results/step-drift-h100-x1-20261207/ rounded up.
DRIFT_CV = 0.003
DRIFT_TAU_S = 60.0


def _alpha_for(target: float, concurrency: int = 64, base: float = BASE_DECODE, prefill: float = PREFILL) -> float:
    """The decode slow-down ``alpha`` that gives ``target`` output tok/s at ``concurrency`` (tokenmodel's formula
    solved for alpha)."""
    per_request_s = OUTPUT_LEN / target - INPUT_LEN / prefill
    aggregate = (OUTPUT_LEN - 1) / per_request_s
    per_req = aggregate / concurrency
    return (base / per_req - 1.0) / (concurrency - 1)


ALPHA = _alpha_for(TARGET_C64)
# A 4-backend sweep: each backend's rates relative to the reference one (simulation parameters): auto resolves to
# flashinfer_cutlass on SM120 (so the two tie), flashinfer_cutedsl 3 % slower, triton 20 % slower.
BACKENDS = {"auto": 1.0, "flashinfer_cutlass": 1.0, "flashinfer_cutedsl": 0.97, "triton": 0.80}


def rates(backend: str) -> tuple[float, float, float]:
    """(decode tok/s per request at batch 1, alpha, prefill tok/s) in real time."""
    f = BACKENDS.get(backend, 1.0)
    return BASE_DECODE * f, ALPHA, PREFILL * f


def scaled_rates(backend: str, time_scale: float) -> tuple[float, float, float]:
    base, alpha, prefill = rates(backend)
    return base / time_scale, alpha, prefill / time_scale


def env(backend: str, time_scale: float, seed: int | None = 1) -> dict[str, str]:
    """The simulator's environment for this profile at ``time_scale``; ``seed`` (with the backend's name) fixes the
    drift's course, None leaves it to chance."""
    base, alpha, prefill = scaled_rates(backend, time_scale)
    drift = f"{DRIFT_CV!r},{DRIFT_TAU_S * time_scale!r}"
    if seed is not None:
        drift += f",{zlib.crc32(f'{backend}:{seed}'.encode())}"
    out = {"MOESWEEP_SIM_TIME_SCALE": str(time_scale), "MOESWEEP_SIM_DECODE_RATE": repr(base),
           "MOESWEEP_SIM_DECODE_ALPHA": repr(alpha), "MOESWEEP_SIM_PREFILL_RATE": repr(prefill),
           "MOESWEEP_SIM_STEP_DRIFT": drift}
    out.update({f"MOESWEEP_SIM_PHASE_{name.upper()}_S": repr(s * time_scale) for name, s in PHASES_S.items()})
    return out


def expected(backend: str, concurrency: int, input_len: int = INPUT_LEN, output_len: int = OUTPUT_LEN) -> float:
    """The token model's output tok/s of a closed-loop level, real time."""
    return tokenmodel.expected_output_throughput(concurrency, input_len, output_len, *rates(backend))


def level_seconds(backend: str, concurrency: int, requests: int, input_len: int = INPUT_LEN,
                  output_len: int = OUTPUT_LEN) -> float:
    """Real seconds the server takes for ``requests`` closed-loop requests at ``concurrency`` of fixed lengths: whole
    cohorts prefilled together then decoded (the token model's closed loop); a last partial cohort runs alone."""
    base, alpha, prefill = rates(backend)
    full, rest = divmod(requests, concurrency)
    total = 0.0
    for n, count in ((concurrency, full), (rest, 1 if rest else 0)):
        if count:
            wave = n * input_len / prefill + (output_len - 1) * tokenmodel.step_time(n, base, alpha)
            total += count * wave
    return total
