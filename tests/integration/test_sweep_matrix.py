"""A launch matrix end to end on the provisioned simulated SM120 host: a 3-axis matrix of 12 cells (MoE runner x
attention backend x fp8 GEMM backend) judged by the preflight before the first restart, the cells the host cannot
run (the SM100-only MoE runner, a DSA model's `nsa` attention) recorded refused and never started, the rest run
and recorded with their axes. It runs through all three ways in: `moesweep sweep --matrix FILE`, stopped by one
Ctrl-C in the middle of a cell; the user's command (``ansible-playbook sweep.yml -e @matrix.yml``), which resumes it
(the cells that passed are skipped, the interrupted one runs again); and the Python API into another results
directory, whose records are the same cells with the same outcomes and launch lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, wait_for

import moesweep
from moesweep.sim.presets import SIM_FAST, SMALL_BENCH

pytestmark = pytest.mark.hosts

MOESWEEP = str(Path(sys.executable).parent / "moesweep")
MATRIX = {"axes": {"moe-runner-backend": ["flashinfer_trtllm", "flashinfer_cutlass", "triton"],
                   "attention-backend": ["flashinfer", "nsa"], "fp8-gemm-backend": ["cutlass", "triton"]}}
CELLS = [f"{m}.{a}.{g}" for m in MATRIX["axes"]["moe-runner-backend"] for a in MATRIX["axes"]["attention-backend"]
         for g in MATRIX["axes"]["fp8-gemm-backend"]]
# SM120: flashinfer_trtllm has SM100 kernels only; a DSA model's nsa attention needs DeepGEMM / FlashMLA (SM90/SM100)
REFUSED = [c for c in CELLS if c.startswith("flashinfer_trtllm.") or ".nsa." in c]
RUN = [c for c in CELLS if c not in REFUSED]
SETTINGS = {"sglang_bench_enabled": False, "sglang_server_extra_environment": dict(SIM_FAST),
            "sglang_server_stall_timeout": 5, "sglang_server_ready_timeout": 120, **SMALL_BENCH}


def records(results, kind="point"):
    out = []
    for f in sorted(results.glob("*/points.jsonl")):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return [r for r in out if r["kind"] == kind]


def outcome(rec):
    """What two runs of the same matrix must agree on for a cell (not its times or the sweep's id)."""
    return (rec["point"], rec["status"], json.dumps(rec["axes"], sort_keys=True),
            (rec.get("launch") or {}).get("command_line"))


@pytest.mark.alone
def test_a_12_cell_matrix_plans_refuses_runs_resumes_after_ctrl_c_and_the_api_gives_the_same_records(
        bench_cluster, tmp_path):
    assert len(CELLS) == 12 and len(REFUSED) == 8 and len(RUN) == 4
    results = tmp_path / "results"
    matrix_file = tmp_path / "matrix.yml"
    matrix_file.write_text(json.dumps({"matrix": MATRIX}))  # JSON is YAML
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    settings.chmod(0o600)

    # 1. moesweep sweep --matrix FILE, one Ctrl-C while the second cell that runs starts its server
    proc = subprocess.Popen([MOESWEEP, "sweep", "-i", str(bench_cluster.inventory), "--results", str(results),
                             "--no-progress", "--matrix", str(matrix_file), "-e", f"@{settings}"],
                            cwd=REPO, env=dict(os.environ, ANSIBLE_NOCOLOR="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    # the in-flight marker is written as the cell starts, before its preflight and restart; the stop check after the
    # restart must see the stop file, which the command writes within api.STOP_POLL_S of the Ctrl-C
    wait_for(lambda: list(results.glob(f"*/.inflight/*__{RUN[1]}.json")), timeout=300,
             what=f"the cell {RUN[1]} to start")
    os.killpg(proc.pid, signal.SIGINT)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 130, text[-3000:]
    words = " ".join(text.split())
    assert "refused by the preflight, never started: 8" in words, text[-3000:]
    assert f"to run: 4: {', '.join(RUN)}" in words, text[-3000:]
    first = records(results)
    by_point = {r["point"]: r for r in first}
    assert by_point[RUN[0]]["status"] == "passed", by_point[RUN[0]]
    assert by_point[RUN[1]]["status"] == "interrupted", by_point[RUN[1]]
    assert not set(by_point) & set(RUN[2:]), sorted(by_point)  # stopped after the step: nothing later started
    for name in set(by_point) & set(REFUSED):
        rec = by_point[name]
        assert rec["status"] == "refused" and not rec["readiness"] and rec["preflight"]["citations"], rec

    # 2. the user's command resumes it: the passed cell is skipped, the interrupted one and the rest run
    bench_cluster.playbook("sweep.yml", "-e", f"@{settings}", "-e", f"@{matrix_file}", "-e",
                           f"results_dir={results}", check=False)
    new = records(results)[len(first):]
    assert sorted(r["point"] for r in new if r.get("resumed")) == [RUN[0]], [(r["point"], r["status"]) for r in new]
    resumed = next(r for r in new if r.get("resumed"))
    assert resumed["started"] == by_point[RUN[0]]["started"]
    started = [r["point"] for r in new if not r.get("resumed") and r["status"] != "refused"]
    assert started == RUN[1:], [(r["point"], r["status"]) for r in new]
    final = {r["point"]: r for r in records(results)}  # the last record of each cell
    assert sorted(final) == sorted(CELLS)
    for name, rec in final.items():
        for axis, value in zip(MATRIX["axes"], name.split("."), strict=True):
            assert rec["axes"][axis] == value, (name, rec["axes"])
        if name in REFUSED:
            assert rec["status"] == "refused" and not rec["readiness"] and rec["preflight"]["citations"], rec
        else:
            assert rec["status"] == "passed", (name, rec.get("cause"), rec.get("failed_msg"))
            assert "--fp8-gemm-backend " + rec["axes"]["fp8-gemm-backend"] in rec["launch"]["command_line"]
    # the report: each axis's effect, the refusals grouped by axis value
    report_dir = tmp_path / "report"
    subprocess.run([MOESWEEP, "report", str(next(results.glob("sweep-*"))), "--out", str(report_dir)], cwd=REPO,
                   check=True, capture_output=True, text=True)
    report = (report_dir / "report.md").read_text()
    assert "## Launch matrix" in report and "Launch matrix: the effect of each axis" in report, report[-3000:]
    assert "0/4 passed" in report and "0/6 passed" in report  # flashinfer_trtllm (4 cells) and nsa (6), all refused

    # 3. the Python API, the same matrix file into another directory: the same cells, outcomes and launch lines
    api_results = tmp_path / "api"
    result = moesweep.sweep(str(bench_cluster.inventory), matrix=str(matrix_file), results_dir=api_results,
                            **SETTINGS)
    api_final = {r["point"]: r for r in records(api_results)}
    assert sorted(outcome(r) for r in api_final.values()) == sorted(outcome(r) for r in final.values())
    assert sorted(p.point for p in result.points) == sorted(CELLS)
