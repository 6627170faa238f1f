"""A launch matrix end to end on the provisioned simulated SM120 host, through the user's command
(``ansible-playbook sweep.yml -e @matrix.yml``): every cell judged by the preflight before the first restart, the
SM100-only cells recorded refused and never started, the rest run and recorded with their axes, and a second run
resuming (the cells that passed are skipped)."""

from __future__ import annotations

import json

import pytest
from conftest import SIM_FAST, SMALL_BENCH

pytestmark = pytest.mark.hosts

# small: two of its four cells start (the benchmark is not the point here)
MATRIX = {"axes": {"moe-runner-backend": ["flashinfer_trtllm", "flashinfer_cutlass"],
                   "attention-backend": ["flashinfer"], "fp8-gemm-backend": ["cutlass", "triton"]}}


def records(results):
    out = []
    for f in sorted(results.glob("*/points.jsonl")):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return [r for r in out if r["kind"] == "point"]


@pytest.mark.alone
def test_a_matrix_plans_refuses_runs_records_its_axes_and_resumes(bench_cluster, tmp_path):
    results = tmp_path / "results"
    settings = tmp_path / "matrix.json"
    settings.write_text(json.dumps({
        "matrix": MATRIX, "results_dir": str(results), "sglang_bench_enabled": False,
        "sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
        "sglang_server_ready_timeout": 120, **SMALL_BENCH}))
    proc = bench_cluster.playbook("sweep.yml", "-e", f"@{settings}", check=False)
    assert "refused by the preflight, never started: 2" in proc.stdout, proc.stdout[-3000:]
    assert "to run: 2: flashinfer_cutlass.flashinfer.cutlass, flashinfer_cutlass.flashinfer.triton" in proc.stdout
    recs = records(results)
    by_point = {r["point"]: r for r in recs}
    assert sorted(by_point) == sorted(["flashinfer_trtllm.flashinfer.cutlass", "flashinfer_trtllm.flashinfer.triton",
                                       "flashinfer_cutlass.flashinfer.cutlass", "flashinfer_cutlass.flashinfer.triton"])
    for name, rec in by_point.items():
        assert rec["axes"]["moe-runner-backend"] == name.split(".")[0]
        if name.startswith("flashinfer_trtllm."):
            assert rec["status"] == "refused" and not rec["readiness"] and rec["preflight"]["citations"]
        else:
            assert rec["status"] == "passed", (name, rec.get("cause"), rec.get("failed_msg"))
            assert "--fp8-gemm-backend " + rec["axes"]["fp8-gemm-backend"] in rec["launch"]["command_line"]
    # resumed: the cells that passed are skipped (their record written again, marked resumed, nothing started);
    # the refused ones are judged and recorded again
    again = bench_cluster.playbook("sweep.yml", "-e", f"@{settings}", check=False)
    assert "passed before with this sweep" in again.stdout
    new = records(results)[len(recs):]
    started = sorted(r["point"] for r in new if not r.get("resumed"))
    assert started == ["flashinfer_trtllm.flashinfer.cutlass", "flashinfer_trtllm.flashinfer.triton"], started
    resumed = [r for r in new if r.get("resumed")]
    assert sorted(r["point"] for r in resumed) == ["flashinfer_cutlass.flashinfer.cutlass",
                                                   "flashinfer_cutlass.flashinfer.triton"]
    assert all(r["started"] == by_point[r["point"]]["started"] for r in resumed)
