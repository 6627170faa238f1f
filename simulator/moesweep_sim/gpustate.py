"""Simulated GPU profile lookup and the live ``gpu-state.json`` writer (contract in
docs/architecture.md).  GPU data comes from moesweep_sim.gpus (the nvidia-smi simulator's tables)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time

from . import faults

try:
    from . import gpus as _gpus
except ImportError:  # pragma: no cover - keep a minimal table if gpus.py is absent
    _gpus = None

_FALLBACK = {
    "rtx-pro-6000": {"compute_cap": "12.0", "memory_total_mib": 97887, "power_limit_w": 600.0,
                     "max_sm_clock_mhz": 3090, "idle_sm_clock_mhz": 180, "idle_power_w": [28.0]},
    "h200": {"compute_cap": "9.0", "memory_total_mib": 143771, "power_limit_w": 700.0,
             "max_sm_clock_mhz": 1980, "idle_sm_clock_mhz": 345, "idle_power_w": [82.11]},
    "b200": {"compute_cap": "10.0", "memory_total_mib": 183359, "power_limit_w": 1000.0,
             "max_sm_clock_mhz": 1965, "idle_sm_clock_mhz": 120, "idle_power_w": [192.0]},
}
DEFAULT_STATE = "/run/moesweep-sim/gpu-state.json"
# Fallback load draw when a GPU table has no load profile: ~55 % of the power limit at ~100 % utilisation
# (the real RTX PRO 6000 deployment this project targets; see gpus.py).
DECODE_POWER_FRACTION = 0.55
# How often the state is rewritten while serving: a -lms 250 sampler sees every change.
TICK_S = 0.25
# utilization.gpu is a time average: "Percent of time over the past sample period during which one or more kernels
# was executing on the GPU. The sample period may be between 1 second and 1/6 second depending on the product."
# (nvidia-smi --help-query-gpu). The engine is polled this often and each state carries the busy share of the last
# TICK_S, so the few milliseconds between one request's end and the next one's start read as ~99 %, not as 0.
POLL_S = 0.02


def profile() -> dict:
    if _gpus is not None:
        try:
            return _gpus.load_profile()
        except SystemExit:
            pass
    path = os.environ.get("MOESWEEP_SIM_PROFILE") or "/etc/moesweep-sim/profile.json"
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError:
        return {"gpu_model": "rtx-pro-6000", "gpu_count": 8}


def gpu_info(prof: dict) -> dict:
    model = prof.get("gpu_model", "rtx-pro-6000")
    table = (_gpus.MODELS.get(model) if _gpus is not None else None) or _FALLBACK.get(model.replace("-x2", "")) \
        or _FALLBACK["rtx-pro-6000"]
    major, minor = (int(x) for x in str(table["compute_cap"]).split("."))
    info = dict(table)
    info["sm"] = major * 10 + minor
    info["count"] = int(prof.get("gpu_count", 1))
    return info


class StateWriter:
    def __init__(self, prof: dict, tp: int, pid: int):
        self.prof = prof
        self.info = gpu_info(prof)
        self.tp = max(1, tp)
        self.pid = pid
        self.path = os.environ.get("MOESWEEP_SIM_STATE") or DEFAULT_STATE
        self.used_gb = 0.0
        self.util = 0
        self.engine = None
        self._stop = False
        self.lock = threading.Lock()
        self.busy_since = 0.0
        self._slow_at = 0.0
        self._slow = 1.0

    def _gpus(self):
        n = min(self.tp, self.info["count"]) if self.info["count"] else self.tp
        limit = float(self.info["power_limit_w"])
        idle_p = float(self.info.get("idle_power_w", [limit * 0.05])[0])
        load_p = float(self.info.get("load_power_w", limit * DECODE_POWER_FRACTION))
        load_clock = (self.info.get("load_sm_clocks_mhz") or [self.info["max_sm_clock_mhz"]])[0]
        out = []
        for i in range(n):
            util = self.util
            power = idle_p + (load_p - idle_p) * util / 100.0
            clock = load_clock if util else self.info.get("idle_sm_clock_mhz", 300)
            g = {"index": i, "memory_used_mib": int(self.used_gb * 1024), "utilization_gpu": int(util),
                 "power_draw_w": round(power, 1), "sm_clock_mhz": int(clock), "pids": [self.pid]}
            if util and self.busy_since:
                g["busy_since"] = self.busy_since  # nvidia-smi ramps power from here (gpus.py load_ramp_s)
            out.append(g)
        return out

    def slowdown_factor(self) -> float:
        """Decode step time multiplier: 2 while the ``hw_slowdown`` fault halves an SM clock of one of this
        server's GPUs (every TP step waits for the slowest rank)."""
        now = time.monotonic()
        if now - self._slow_at >= 0.2:
            self._slow_at = now
            n = min(self.tp, self.info["count"]) if self.info["count"] else self.tp
            self._slow = 2.0 if faults.gpus_affected("hw_slowdown", n) & set(range(n)) else 1.0
        return self._slow

    def write(self):
        doc = {"pid": self.pid, "process_name": "sglang::scheduler_TP0" if self.tp > 1 else "sglang::scheduler",
               "updated": time.time(), "simulated": True, "gpus": self._gpus()}
        d = os.path.dirname(self.path) or "."
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".gpu-state.", dir=d)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self.path)
        except OSError:
            pass

    def phase(self, used_gb: float, util: int):
        with self.lock:
            self.used_gb, self.util = used_gb, util
            self.write()

    def start_serving(self, engine, used_gb: float):
        self.engine = engine
        self.used_gb = used_gb
        threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self):
        window = last = time.monotonic()
        busy_s, was_busy = 0.0, False
        while not self._stop:
            busy = bool(self.engine and self.engine.running)
            now = time.monotonic()
            if was_busy:
                busy_s += now - last  # the interval since the last poll, in the state it had then
            last, was_busy = now, busy
            if now - window >= TICK_S:
                util = int(round(100.0 * min(1.0, busy_s / (now - window))))
                with self.lock:
                    if self._stop:
                        return
                    if util and not self.util:
                        self.busy_since = time.time()
                    self.util = util
                    self.write()
                window, busy_s = now, 0.0
            time.sleep(POLL_S)

    def remove(self):
        with self.lock:
            self._stop = True
            try:
                os.unlink(self.path)
            except OSError:
                pass
