"""Equivalent points: the kernel path of a point from its launch and its preflight, the measured point another one
stands on, and its same_as record - on the real preflight's answers for the reference host."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import equivalence, preflight

SM120 = {"sm": "sm120", "gpu_count": 8, "interconnect": "pcie-phb", "virtualization": {"kind": "vm"},
         "cuda_toolkit": {"release": "12.8"}}
FLAGS = {"model-path": "m", "tp-size": 8, "quantization": "modelopt_fp4", "port": 8000}
BENCH = {"concurrency": [1, 4], "num_prompts": [4, 8]}


def check(backend, flags=None, version="0.5.9", **more):
    result, failed = preflight.run_preflight(dict({
        "backend": backend, "flags": flags or FLAGS, "version_flags": {}, "backends": {}, "extra_flags": {},
        "sglang_version": version, "provenance": {}, "environment": {}, "gpu_facts": SM120, "dry_run": "off"},
        **more))
    return result


def measured_record(backend, point=None, sweep_id="s1", host="h1", status="passed", **over):
    res = check(backend)
    rec = {"kind": "point", "sweep_id": sweep_id, "host": host, "point": point or backend, "backend": backend,
           "status": status, "finished": "2026-12-07T10:00:00Z", "config_hash": "c-" + backend,
           "launch": res["launch"], "preflight": res, "provenance": {},
           "benchmark": {"levels": [{"concurrency": 4, "ok": True, "figures": {"output_throughput": 100.0}}],
                         "settings": BENCH},
           "readiness": {"state": "ready"}, "artifacts": ["x.log"]}
    rec.update(over)
    return rec


def test_the_kernel_path_follows_the_moe_runner_the_preflight_resolved():
    cutedsl, triton, cutlass = check("flashinfer_cutedsl"), check("triton"), check("flashinfer_cutlass")
    assert cutedsl["effective_backend"] == triton["effective_backend"] == "cutlass"
    assert equivalence.kernel_path(cutedsl["launch"], cutedsl) == equivalence.kernel_path(triton["launch"], triton)
    assert equivalence.kernel_path(cutlass["launch"], cutlass) != equivalence.kernel_path(triton["launch"], triton)
    # refused, forced or undecided: no path, so never equivalent
    trtllm = check("flashinfer_trtllm")
    assert trtllm["verdict"] == "unsupported" and equivalence.kernel_path(trtllm["launch"], trtllm) is None
    assert equivalence.kernel_path(triton["launch"], dict(triton, forced=True)) is None
    assert equivalence.kernel_path(triton["launch"], dict(triton, effective_backend=None)) is None


def test_any_other_flag_environment_or_resolution_is_another_path():
    triton = check("triton")
    path = equivalence.kernel_path(triton["launch"], triton)
    other = check("flashinfer_cutedsl", flags=dict(FLAGS, **{"max-running-requests": 32}))
    assert equivalence.kernel_path(other["launch"], other) != path
    env = dict(triton["launch"], environment={"NCCL_P2P_LEVEL": "SYS"})
    assert equivalence.kernel_path(env, triton) != path
    # where sglang's own argument handling ran, what it resolved for every other backend counts, the MoE runner's
    # own field not
    resolved = {"attention_backend": "flashinfer", "moe_runner_backend": "triton"}
    a = dict(triton, dry_run={"resolved": resolved})
    b = dict(triton, dry_run={"resolved": dict(resolved, moe_runner_backend="flashinfer_cutedsl")})
    c = dict(triton, dry_run={"resolved": dict(resolved, attention_backend="trtllm_mla")})
    assert equivalence.kernel_path(triton["launch"], a) == equivalence.kernel_path(triton["launch"], b)
    assert equivalence.kernel_path(triton["launch"], a) != equivalence.kernel_path(triton["launch"], c)


def test_a_point_stands_on_a_measured_point_of_this_sweep_on_this_host_only():
    triton = check("triton")
    measured = measured_record("flashinfer_cutedsl")

    def find(records, **over):
        args = dict(records=records, host="h1", sweep_id="s1", point="triton", launch=triton["launch"],
                    preflight=triton, bench_settings=BENCH, lock_sha256=None)
        args.update(over)
        return equivalence.measured_equivalent(**args)

    assert find([measured]) is measured
    assert find([measured], host="h2") is None
    assert find([measured], sweep_id="s2") is None
    assert find([measured], bench_settings={"concurrency": [1]}) is None
    assert find([measured], lock_sha256="other-stack") is None
    assert find([dict(measured, status="crashed")]) is None  # what did not pass is measured again
    assert find([dict(measured, same_as={"point": "x"})]) is None  # never a record that stands on another
    assert find([measured_record("flashinfer_cutlass")]) is None  # another kernel


def test_the_same_as_record_keeps_its_own_launch_and_names_the_measured_point_with_the_evidence():
    triton = check("triton")
    measured = measured_record("flashinfer_cutedsl")
    before = copy.deepcopy(measured)
    rec = equivalence.same_as_record(measured, "triton", triton["launch"], triton, "c-triton", "t0", "t1")
    assert measured == before  # a copy
    assert rec["point"] == "triton" and rec["backend"] == "triton" and rec["config_hash"] == "c-triton"
    assert rec["status"] == "passed" and rec["benchmark"] == measured["benchmark"] and rec["seconds"] == 0.0
    assert rec["launch"]["flags"]["moe-runner-backend"] == "triton" and rec["artifacts"] == []
    same = rec["same_as"]
    assert same["point"] == "flashinfer_cutedsl" and same["moe_runner"] == "cutlass"
    assert same["resolution"] == "the knowledge base"
    assert same["evidence"] and all(e["citations"] for e in same["evidence"])
    assert any("cutlass_moe_fp4" in e["reason"] for e in same["evidence"]), same["evidence"]


@pytest.mark.parametrize("points,expected", [
    (["flashinfer_cutedsl", "triton", "flashinfer_cutlass", "auto"], {"triton": "flashinfer_cutedsl",
                                                                      "auto": "flashinfer_cutedsl"}),
    (["flashinfer_trtllm", "triton"], {}),
])
def test_the_plans_prediction(points, expected):
    details = {p: dict(check(p), refused=check(p)["verdict"] not in ("supported", "caveat")) for p in points}
    assert equivalence.plan_equivalents(points, details) == expected


def test_a_records_resolved_accuracy_threshold_matches_an_unset_one():
    # the record keeps the model family's floor where the settings left it unset; another threshold differs
    triton = check("triton")
    acc = {"enabled": True, "questions": 8, "threshold": None}
    measured = measured_record("flashinfer_cutedsl")
    measured["benchmark"]["settings"] = dict(BENCH, accuracy=dict(acc, threshold=0.8))

    def find(threshold):
        return equivalence.measured_equivalent([measured], "h1", "s1", "triton", triton["launch"], triton,
                                               dict(BENCH, accuracy=dict(acc, threshold=threshold)), None)

    assert find(None) is measured and find(0.8) is measured and find(0.5) is None


def test_a_point_of_the_same_moe_runner_measured_apart_says_what_differs():
    other = check("flashinfer_cutedsl", flags=dict(FLAGS, **{"max-running-requests": 32}))
    measured = measured_record("flashinfer_cutedsl")
    near = equivalence.near_miss([measured], "h1", "s1", "triton", other["launch"], other)
    assert near == ("flashinfer_cutedsl", ["flags.max-running-requests"])
    triton = check("triton")
    assert equivalence.near_miss([measured], "h1", "s1", "triton", triton["launch"], triton) is None  # equal
