# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The sweep's stop file as the waits on async jobs read it (``sglang_bench_wait``, ``model_stage_wait``): a file
on the controller (``moesweep_sweep.stop_file``, which ``moesweep.api`` and the CLI create when asked to stop after
the current step) whose presence turns the wait's ``stop`` on. Read at every call, so at every ``until`` retry."""

from __future__ import annotations

import os


def requested(args: dict) -> dict:
    """``args`` with ``stop`` true when its ``stop_file`` exists on the controller (a copy; ``stop`` already true
    stays true)."""
    out = dict(args)
    path = out.get("stop_file")
    if path and os.path.exists(os.path.expanduser(str(path))):
        out["stop"] = True
    return out
