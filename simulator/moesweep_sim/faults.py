"""Fault injection switch: env MOESWEEP_SIM_FAULT, else the first line of /run/moesweep-sim/fault
(path overridable with MOESWEEP_SIM_FAULT_FILE).  See docs/architecture.md."""

from __future__ import annotations

import os

FAULTS = ("oom_kv", "oom_graph", "hang_capture", "crash_after_ready", "garbage", "slow_jit", "port_in_use")
DEFAULT_FILE = "/run/moesweep-sim/fault"


def current() -> str | None:
    v = os.environ.get("MOESWEEP_SIM_FAULT", "").strip()
    if not v:
        try:
            with open(os.environ.get("MOESWEEP_SIM_FAULT_FILE") or DEFAULT_FILE, encoding="utf-8") as f:
                v = (f.readline() or "").strip()
        except OSError:
            v = ""
    return v if v in FAULTS else None
