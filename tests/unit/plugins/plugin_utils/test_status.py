"""A point's status and cause from what its stages returned, and the stage of a failed task."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import status
from helpers.point_records import OK_BENCH, READY


@pytest.mark.parametrize("stage,failed,readiness,smoke,bench,expected", [
    (None, {}, READY, {"state": "ok"}, OK_BENCH, ("passed", None)),
    ("preflight", {"verdict": "unsupported"}, {}, {}, {}, ("refused", None)),
    ("readiness", {"state": "crashed", "cause": "oom"}, {"state": "crashed", "cause": "oom"}, {}, {},
     ("crashed", "oom")),
    ("readiness", {}, {"state": "hang"}, {}, {}, ("hang", None)),
    ("smoke", {}, READY, {"state": "bad_output"}, {}, ("bad_output", None)),
    ("smoke", {}, READY, {"state": "server_died", "crash": {"cause": "other"}}, {}, ("crashed", "other")),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "failed"}, ("bench_failed", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "invalid_gpu_state"}, ("invalid_gpu_state", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "server_died", "crash": {"cause": "killed"}},
     ("crashed", "killed")),
    # #37: a server that stalls after ready (the unit runs, no crash in its journal) is a hang, not a crash
    ("smoke", {}, READY, {"state": "server_died", "crash": {"state": "ready", "unit_gone": False}}, {}, ("hang", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "server_died", "crash": {"state": "ready", "unit_gone": False}},
     ("hang", None)),
    ("smoke", {}, READY, {"state": "server_died", "crash": {"state": "crashed", "cause": "oom", "unit_gone": True}},
     {}, ("crashed", "oom")),
    ("interrupted", {}, READY, {}, {}, ("interrupted", None)),
    ("other", {"msg": "boom"}, READY, {"state": "ok"}, OK_BENCH, ("failed", None)),
])
def test_point_status(stage, failed, readiness, smoke, bench, expected):
    assert status.point_status(stage, failed, readiness, smoke, bench, {}) == expected


@pytest.mark.parametrize("action,result,stage", [
    ("moesweep.sweep.sglang_ready", {"state": "crashed"}, "readiness"),
    # the restart's stop and release wait, run by the restart call: nothing started
    ("moesweep.sweep.sglang_restart", {"released": {"released": False, "stopped": True}}, "restart"),
    ("moesweep.sweep.sglang_restart", {"released": {"released": True}, "state": "hang"}, "readiness"),
    ("moesweep.sweep.sglang_restart", {"state": "crashed", "released": {"released": True}}, "readiness"),
    ("moesweep.sweep.sglang_start", {"msg": "systemctl start sglang.service failed (rc 5)"}, "readiness"),
    ("moesweep.sweep.gpu_released", {"released": False}, "restart"),
    ("moesweep.sweep.sglang_bench_check", {"msg": "sglang_bench_check: tokenizer directory /x does not exist"},
     "preflight"),
    ("moesweep.sweep.sglang_nodes", {"stage": "restart"}, "restart"),
    ("ansible.builtin.assert", {}, "other"),
])
def test_stage_of_a_failed_task(action, result, stage):
    assert status.stage_of(action, result) == stage


def test_a_model_that_could_not_be_staged_refuses_the_point():
    msg = ("lukealonso/GLM-5-NVFP4 (staging refused at 3f0c1e2a9b8d): 421.9 GiB to download (of 421.9 GiB in 97 "
           "files) and 10.0 GiB kept free for the JIT caches need 431.9 GiB, but /var/lib/sglang/models has 200.0 GiB "
           "free")
    stage = status.stage_of("moesweep.sweep.model_stage", {"msg": msg, "failed": True})
    assert stage == "preflight"
    # the same refusal, reported by the wait of the async staging job
    assert status.stage_of("moesweep.sweep.model_stage_wait", {"msg": msg, "failed": True}) == "preflight"
    assert status.point_status(stage, {"msg": msg}, {}, {}, {}, {}) == ("refused", None)
