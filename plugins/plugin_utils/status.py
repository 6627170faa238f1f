# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""A point's status and cause, from what its stages returned (docs/results.md), and the stage a failed task
belongs to.

One verdict per point, decided once on the controller (``point_status``) and kept in its record: the summary,
resume and the restore read it from there, and only a ``PASSED`` point is ranked, resumed or restored. ``stage_of``
names the stage from the module or action of the task that failed, so the verdict says which stage it is about.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PASSED = "passed"


def point_status(stage, failed_result, readiness, smoke, benchmark, preflight, accuracy=None):
    """(status, cause) of a point from the failed stage (or None) and what each stage returned. A crash anywhere
    outranks ``bad_accuracy`` (the accuracy stage's verdict below its threshold), which outranks the benchmark's own
    verdicts: a point that computes wrongly is never a result, however fast."""
    failed_result = failed_result or {}
    if failed_result.get("unreachable"):
        return "unreachable", None
    if stage == "interrupted":
        return "interrupted", None
    if stage == "preflight":
        return "refused", None
    ready_state = (readiness or {}).get("state")
    if stage == "readiness" or (ready_state and ready_state != "ready"):
        state = ready_state or failed_result.get("state")
        if state in ("crashed", "hang", "timeout"):
            return state, (readiness or failed_result).get("cause")
        if state == "stopped":
            return "crashed", "other"
    smoke_state = (smoke or {}).get("state")
    if smoke_state == "bad_output":
        return "bad_output", None
    if smoke_state == "server_died":
        return _after_ready(smoke.get("crash"))
    accuracy_state = (accuracy or {}).get("state")
    if accuracy_state == "server_died":
        return _after_ready(accuracy.get("crash"))
    bench_state = (benchmark or {}).get("state")
    if bench_state == "server_died":
        return _after_ready(benchmark.get("crash"))
    if accuracy_state == "bad_accuracy":
        return "bad_accuracy", None
    if bench_state == "invalid_gpu_state":
        return "invalid_gpu_state", None
    if bench_state == "failed":
        return "bench_failed", None
    if stage is not None:
        return "failed", None
    if ready_state == "ready" and (not smoke or smoke_state == "ok") and (not benchmark or bench_state == "ok") \
            and (not accuracy or accuracy_state == "ok"):
        return PASSED, None
    return "failed", None


def _after_ready(crash):
    """(status, cause) of a server that stopped answering after it was ready, from the judge of its unit's run
    (readiness.judge_entries): ``crashed`` when the run crashed or the unit is gone; ``hang`` when the unit still runs
    and its journal shows no crash (a server that stalls: requests time out, nothing exits)."""
    crash = crash or {}
    if crash.get("state") and crash["state"] != "crashed" and crash.get("unit_gone") is False:
        return "hang", None
    return "crashed", crash.get("cause") or "other"


def stage_of(task_action, failed_result=None):
    """The stage a failed task belongs to, by its module / action (a node group's barrier, ``sglang_nodes``,
    says which stage it judged)."""
    action = str(task_action or "").replace("moesweep.sweep.", "")
    if action == "sglang_nodes":
        return (failed_result or {}).get("stage") or "other"
    if action == "sglang_restart" and ((failed_result or {}).get("released") or {}).get("released") is False:
        return "restart"  # the old server's GPUs or port were never free, nothing started
    # a start that failed is the readiness stage's, as the restart's own start is (a node group's rank start)
    return {"sglang_preflight": "preflight", "sglang_ready": "readiness", "sglang_restart": "readiness",
            "sglang_start": "readiness", "gpu_released": "restart",
            "sglang_smoke": "smoke", "sglang_accuracy": "accuracy", "sglang_bench": "benchmark",
            "sglang_bench_wait": "benchmark", "gpu_facts": "facts", "port_owner": "preflight",
            "interconnect_facts": "interconnect", "model_stage": "preflight",
            "model_stage_wait": "preflight", "sglang_bench_check": "preflight"}.get(action, "other")
