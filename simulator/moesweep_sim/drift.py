"""The GPU's step-time drift: a real card's forward step wanders by a fraction of a percent over about a minute.

Measured on an H100 at its 700 W cap by ``bench/device/step_drift.py`` (results in
``bench/device/results/step-drift-h100-x1-20261207/``): a decode-like CUDA-graph step of 17.36 ms mean whose
10, 30 and 60 s window means vary by CV 0.28-0.29 %, lag-1 0.87 between 10 s windows and 0.55 between 30 s ones
(an exponential correlation time of 50-72 s), while the SM clock sits at 1380-1440 MHz under the power cap and the
card heats from 39 to 75 C. Modelled here as an Ornstein-Uhlenbeck process ``x`` on the step-time factor
``1 + x``: stationary standard deviation ``cv``, correlation time ``tau_s``, advanced exactly over each step's
(simulator) seconds, idle time included, so consecutive steps share their drift as the real card's do.

Off unless ``MOESWEEP_SIM_STEP_DRIFT`` is ``CV,TAU_S[,SEED]`` (``TAU_S`` in simulator seconds: a time-scaled
server's correlation time is scaled with it, as its phases are); the reference-scale profile sets it.
"""

from __future__ import annotations

import math
import os
import random


class Drift:
    """The step-time factor of one server's GPUs (every TP step waits for all ranks: one process for the group)."""

    def __init__(self, cv: float, tau_s: float, seed: int | str | None = None):
        if cv < 0 or tau_s <= 0:
            raise ValueError(f"step drift needs cv >= 0 and tau_s > 0, got {cv}, {tau_s}")
        self.cv, self.tau_s = float(cv), float(tau_s)
        self.rng = random.Random(seed)
        self.x = self.rng.gauss(0.0, self.cv)  # a server starts somewhere in the stationary distribution
        self.t: float | None = None

    def advance(self, dt: float) -> float:
        """Move the process ``dt`` seconds on; returns the factor ``1 + x`` there."""
        if dt > 0:
            a = math.exp(-dt / self.tau_s)
            self.x = self.x * a + self.cv * math.sqrt(1.0 - a * a) * self.rng.gauss(0.0, 1.0)
        return 1.0 + self.x

    def factor(self, t: float) -> float:
        """The step-time factor for a step that starts at ``t`` (seconds, any monotonic clock)."""
        dt = 0.0 if self.t is None else t - self.t
        self.t = t
        return self.advance(dt)


def from_env(environ=None) -> Drift | None:
    """``MOESWEEP_SIM_STEP_DRIFT=CV,TAU_S[,SEED]`` -> Drift; None when unset or empty."""
    spec = (environ if environ is not None else os.environ).get("MOESWEEP_SIM_STEP_DRIFT", "").strip()
    if not spec:
        return None
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) not in (2, 3):
        raise ValueError(f"MOESWEEP_SIM_STEP_DRIFT={spec!r}: expected CV,TAU_S[,SEED]")
    return Drift(float(parts[0]), float(parts[1]), parts[2] if len(parts) == 3 else None)
