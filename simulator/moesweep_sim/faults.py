"""Fault injection switch: env MOESWEEP_SIM_FAULT, else the first line of /run/moesweep-sim/fault
(path overridable with MOESWEEP_SIM_FAULT_FILE).  See simulator/README.md for what each fault does.

Start-up faults (``oom_kv`` ... ``port_in_use``) are read once when the server starts.  The serving-time
faults are read live, so writing or clearing the fault file while a server runs turns them on or off:

* ``stall``: the scheduler's batch in flight stops making progress (as a hung NCCL collective does);
* ``hw_slowdown[:GPU]``: the driver reports HW (thermal) slowdown on that GPU (default 0, ``all`` for all);
* ``ecc_error[:GPU]``: the volatile uncorrected ECC counter of that GPU counts up;
* ``low_accuracy[:RATE][@BACKEND]``: a share of the few-shot GSM8K questions is answered wrongly (``gsm8k.py``).
"""

from __future__ import annotations

import os
import time

STARTUP_FAULTS = ("oom_kv", "oom_graph", "hang_capture", "crash_after_ready", "garbage", "slow_jit", "port_in_use")
LIVE_FAULTS = ("stall", "hw_slowdown", "ecc_error", "low_accuracy")
FAULTS = STARTUP_FAULTS + LIVE_FAULTS
DEFAULT_FILE = "/run/moesweep-sim/fault"


def _raw() -> str:
    v = os.environ.get("MOESWEEP_SIM_FAULT", "").strip()
    if v:
        return v
    try:
        with open(os.environ.get("MOESWEEP_SIM_FAULT_FILE") or DEFAULT_FILE, encoding="utf-8") as f:
            return (f.readline() or "").strip()
    except OSError:
        return ""


def switch_mtime() -> float | None:
    """When the fault file last changed (None when the env var decides or there is no file)."""
    if os.environ.get("MOESWEEP_SIM_FAULT", "").strip():
        return None
    try:
        return os.stat(os.environ.get("MOESWEEP_SIM_FAULT_FILE") or DEFAULT_FILE).st_mtime
    except OSError:
        return None


def parse(line: str) -> tuple[str | None, str | None]:
    """'hw_slowdown:3' -> ('hw_slowdown', '3'); unknown names -> (None, None)."""
    name, _, arg = line.strip().partition(":")
    if name not in FAULTS:
        return None, None
    return name, (arg or None)


def current() -> str | None:
    """The fault in force now (its name, without the GPU argument), or None."""
    return parse(_raw())[0]


def gpus_affected(name: str, gpu_count: int) -> set[int]:
    """GPU indices a live GPU fault applies to now (empty when that fault is not in force)."""
    fault, arg = parse(_raw())
    if fault != name:
        return set()
    if arg is None:
        return {0}
    if arg == "all":
        return set(range(gpu_count))
    try:
        return {int(arg)}
    except ValueError:
        return set()


class LiveFault:
    """Cheap repeated checks of one live fault: re-reads the switch at most every ``period`` seconds."""

    def __init__(self, name: str, period: float = 0.1):
        self.name = name
        self.period = period
        self._at = 0.0
        self._on = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self._at >= self.period:
            self._at = now
            self._on = current() == self.name
        return self._on
