"""sweep_plan refuses bad sweep input before any point runs, each time naming the fix; backends=compatible
keeps what the preflight accepts for the host."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from ansible_collections.moesweep.sweep.plugins.action import sweep_plan as action

SM120 = {"sm": "sm120", "gpu_count": 8, "interconnect": "pcie-phb", "virtualization": {"kind": "vm"},
         "cuda_toolkit": {"release": "12.8"}}
FLAGS = {"model-path": "m", "tp-size": 8, "quantization": "modelopt_fp4", "port": 8000}


def run(tmp_path, **args):
    base = {"results_dir": str(tmp_path / "results"), "sglang_version": "0.5.9", "flags": FLAGS, "gpu_facts": SM120,
            "concurrency": [1, 8, 64]}
    base.update(args)
    task = mock.MagicMock()
    task.args = base
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    with mock.patch.object(action.ActionBase, "run", return_value={}):
        return plugin.run(task_vars={})


def test_one_point(tmp_path):
    res = run(tmp_path, backend="flashinfer_cutlass")
    sweep = res["moesweep_sweep"]
    assert sweep["points"] == ["flashinfer_cutlass"] and sweep["reference_concurrency"] == 64
    assert sweep["dir"].startswith(str(tmp_path / "results")) and sweep["restore"] == "best"


@pytest.mark.parametrize("args,needle", [
    ({"backend": "triton", "backends": ["a"]}, "not both"),
    ({"backends": []}, "empty list"),
    ({"backends": ["flashinfer_cutlas"]}, "did you mean 'flashinfer_cutlass'"),
    ({"backend": "triton", "reference_concurrency": 32}, "reference concurrency 32 is not one of"),
    ({"backend": "triton", "restore": "latest"}, "restore must be one of"),
    ({"backend": "triton", "sglang_version": "9.9.9"}, "moesweep knows"),
    ({"backend": "triton", "sweep_id": "../../etc"}, "plain name"),
])
def test_bad_input(tmp_path, args, needle):
    res = run(tmp_path, **args)
    assert res["failed"] and needle in res["msg"] and res["msg"].startswith("sweep refused before any point ran")


def test_results_dir_that_is_a_file(tmp_path):
    (tmp_path / "results").write_text("")
    res = run(tmp_path, backend="triton")
    assert res["failed"] and "is a file" in res["msg"]


def test_compatible_is_what_the_preflight_accepts(tmp_path):
    res = run(tmp_path, backends="compatible")
    points = res["moesweep_sweep"]["points"]
    assert "flashinfer_cutlass" in points and "flashinfer_trtllm" not in points


def test_the_points_that_start_a_server_are_the_ones_the_preflight_accepts(tmp_path):
    sweep = run(tmp_path, backends=["flashinfer_trtllm", "flashinfer_cutlass", "triton"])["moesweep_sweep"]
    assert sweep["starts_server"] == ["flashinfer_cutlass", "triton"]
    forced = run(tmp_path, backends=["flashinfer_trtllm", "triton"], force=True)["moesweep_sweep"]
    assert forced["starts_server"] == ["flashinfer_trtllm", "triton"]


def _inputs(*names, **differ):
    facts = {"gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "gpu_count": 8,
             "driver_version": "580.159.04", "interconnect": "pcie-phb", "virtualization": {"kind": "vm"}}
    out = {n: {"gpu_facts": dict(facts), "provenance": {"lock_sha256": "abc"}} for n in names}
    for name, over in differ.items():
        out[name]["gpu_facts"].update(over)
    return out


def test_spread_deals_every_point_once_with_one_sweep_id(tmp_path):
    points = ["flashinfer_cutedsl", "flashinfer_cutlass", "triton", "deep_gemm"]
    hosts = ["h1", "h2", "h3", "h4"]
    plans = [run(tmp_path, backends=points, spread=True, hosts=hosts, host=h, host_inputs=_inputs(*hosts))
             ["moesweep_sweep"] for h in hosts]
    assert sorted(p for plan in plans for p in plan["points"]) == sorted(points)
    assert all(len(plan["points"]) == 1 and plan["all_points"] == points for plan in plans)
    assert len({plan["sweep_id"] for plan in plans}) == 1 and plans[0]["spread_group"] == hosts


def test_spread_refuses_a_host_whose_facts_differ_by_name(tmp_path):
    res = run(tmp_path, backends=["triton", "flashinfer_cutlass"], spread="true", hosts=["a", "b"], host="a",
              host_inputs=_inputs("a", "b", b={"gpu_count": 4}))
    assert res["failed"] and "gpu_count differs" in res["msg"] and "a has 8" in res["msg"] and "b has 4" in res["msg"]


def test_spread_needs_every_hosts_facts(tmp_path):
    inputs = _inputs("a", "b")
    inputs["b"]["gpu_facts"] = {}
    res = run(tmp_path, backend="triton", spread=True, hosts=["a", "b"], host="a", host_inputs=inputs)
    assert res["failed"] and "b has none" in res["msg"]


def test_spread_false_runs_everything_everywhere(tmp_path):
    plan = run(tmp_path, backends=["triton", "flashinfer_cutlass"], hosts=["a", "b"], host="b",
               host_inputs=_inputs("a", "b"))["moesweep_sweep"]
    assert plan["points"] == ["triton", "flashinfer_cutlass"] and plan["spread"] == "false"


@pytest.mark.parametrize("settings,needle", [
    ({"concurrency": [0, 8], "num_prompts": []}, "positive integers, got 0"),
    ({"concurrency": [8, 64], "num_prompts": [32]}, "num_prompts 32 is smaller than the concurrency 64"),
    ({"concurrency": [8], "num_prompts": [], "input_len": 0, "output_len": 8}, "input_len must be a positive"),
])
def test_the_benchmark_levels_are_checked_before_any_point_restarts(tmp_path, settings, needle):
    """#37: a level of 0 or fewer prompts than the concurrency was caught by the benchmark module, after the first
    point's restart; the plan refuses it with the module's own message."""
    res = run(tmp_path, backend="triton", concurrency=settings["concurrency"], bench_settings=settings)
    assert res["failed"] and needle in res["msg"] and "sglang_bench_" in res["msg"], res["msg"]
    ok = run(tmp_path, backend="triton", bench_settings={"concurrency": [1, 8, 64], "num_prompts": [],
                                                         "prompts_per_concurrency": 5, "min_prompts": 16})
    assert not ok.get("failed"), ok


MATRIX = {"axes": {"moe-runner-backend": ["flashinfer_cutlass", "flashinfer_trtllm", "triton"],
                   "attention-backend": ["flashinfer", "trtllm_mla"], "fp8-gemm-backend": ["cutlass", "triton"]}}


def test_a_matrix_plans_its_cells_as_points_and_names_the_refused_ones_with_reasons(tmp_path):
    res = run(tmp_path, matrix=MATRIX, host="gpu1")
    sweep = res["moesweep_sweep"]
    assert len(sweep["points"]) == 12 and sweep["points"][0] == "flashinfer_cutlass.flashinfer.cutlass"
    cell = "triton.trtllm_mla.triton"
    assert sweep["overlays"][cell] == {"flags": {"moe-runner-backend": "triton", "attention-backend": "trtllm_mla",
                                                 "fp8-gemm-backend": "triton"}}
    plan = sweep["matrix"]
    assert plan["cells"][cell] == sweep["overlays"][cell]["flags"]
    refused = {r["cell"]: r for r in plan["refused"]}
    # flashinfer_trtllm's trtllm-gen MoE kernels exist for SM100/SM103 only: its cells never start on SM120
    assert sorted(refused) == sorted(p for p in sweep["points"] if p.startswith("flashinfer_trtllm."))
    first = refused["flashinfer_trtllm.flashinfer.cutlass"]
    assert "SM100" in first["reasons"][0] and first["citations"][0].startswith("https://")
    assert plan["to_run"] == sweep["starts_server"] and len(plan["to_run"]) == 8
    assert plan["estimate_s"] is None and any("estimated time: none" in line for line in plan["lines"])
    assert "refused by the preflight, never started: 4" in res["msg"]


def test_a_matrix_estimate_comes_from_the_hosts_earlier_records(tmp_path):
    earlier = tmp_path / "results" / "sweep-old"
    earlier.mkdir(parents=True)
    lines = [{"kind": "point", "host": "gpu1", "point": "a", "status": "passed", "seconds": 200},
             {"kind": "point", "host": "gpu1", "point": "b", "status": "crashed", "seconds": 100},
             {"kind": "point", "host": "gpu1", "point": "c", "status": "refused", "seconds": 1},
             {"kind": "point", "host": "other", "point": "d", "status": "passed", "seconds": 9000}]
    (earlier / "points.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    plan = run(tmp_path, matrix=MATRIX, host="gpu1")["moesweep_sweep"]["matrix"]
    assert plan["estimate_s"] == 8 * 150.0
    assert "median 150 s of 2 point(s)" in plan["estimate_basis"]


def test_a_resumed_matrix_lists_the_cells_that_passed_before(tmp_path):
    first = run(tmp_path, matrix=MATRIX, host="gpu1")["moesweep_sweep"]
    Path(first["dir"]).mkdir(parents=True)
    done = {"kind": "point", "host": "gpu1", "point": first["matrix"]["to_run"][0], "status": "passed", "seconds": 60}
    Path(first["dir"], "points.jsonl").write_text(json.dumps(done) + "\n")
    again = run(tmp_path, matrix=MATRIX, host="gpu1")["moesweep_sweep"]
    assert again["sweep_id"] == first["sweep_id"] and again["points"] == first["points"]
    assert again["matrix"]["passed_before"] == [done["point"]] and len(again["matrix"]["to_run"]) == 7


@pytest.mark.parametrize("args,needle", [
    ({"matrix": MATRIX, "backends": ["triton"]}, "not both"),
    ({"matrix": {"axes": {"attention-backend": ["fa9"]}}}, "the matrix: axis 'attention-backend', value fa9"),
    ({"matrix": {"axes": {"moe-runner-backend": []}}}, "is empty"),
    ({"matrix": {"axes": {"attention-backend": ["fa3"]}, "exclude": [{"attn": "fa3"}]}}, "which is no axis"),
    ({"matrix": {"axes": {"fp8-gemm-backend": ["flashinfer_cutlass"]}}}, "invalid choice"),
])
def test_bad_matrix_is_refused_before_any_point(tmp_path, args, needle):
    res = run(tmp_path, **args)
    assert res["failed"] and needle in res["msg"] and res["msg"].startswith("sweep refused before any point ran")


def test_an_unreachable_precision_is_warned_about_when_the_sweep_is_planned(tmp_path):
    settings = {"concurrency": [1, 8, 64], "precision": 1e-6, "level_budget_s": 900}
    with mock.patch("ansible.plugins.action.display") as display:
        res = run(tmp_path, backend="flashinfer_cutlass", bench_settings=settings)
    (warning,) = res["moesweep_sweep"]["warnings"]
    assert "+-0.0001 %" in warning and "3 level(s) = about 45 min" in warning
    display.warning.assert_called_once_with(warning)
    assert run(tmp_path, backend="flashinfer_cutlass", bench_settings=dict(settings, precision=0.02))[
        "moesweep_sweep"]["warnings"] == []


def test_the_gsm8k_file_is_found_as_the_copy_would_find_it_or_refused(tmp_path):
    # empty: the shipped split, read at plan time; a relative path not found as ansible.builtin.copy looks for it
    # is refused naming the fix; an absolute one that is there is read
    assert "moesweep_sweep" in run(tmp_path, backend="triton", accuracy={"data_src": ""})
    from ansible.errors import AnsibleError

    with mock.patch.object(action.ActionModule, "_find_needle", side_effect=AnsibleError("not found")):
        res = run(tmp_path, backend="triton", accuracy={"data_src": "my/gsm8k.jsonl"})
    assert res["failed"]
    assert "sglang_bench_accuracy_data_src=my/gsm8k.jsonl is not found on the controller" in res["msg"]
    good = tmp_path / "gsm8k.jsonl"
    good.write_text('{"question": "q", "answer": "#### 4"}\n' * 10)
    res = run(tmp_path, backend="triton", accuracy={"data_src": str(good), "questions": 11, "shots": 1})
    assert res["failed"] and "the subset asks 11 questions but the GSM8K data holds 10" in res["msg"]
    assert run(tmp_path, backend="triton", accuracy={"data_src": str(good), "questions": 10, "shots": 1})[
        "moesweep_sweep"]["accuracy"]["questions"] == 10


def test_the_plan_predicts_which_points_run_the_kernels_of_an_earlier_one(tmp_path):
    # 0.5.9, NVFP4, SM120, no DeepEP: flashinfer_cutedsl, triton and auto all reach sgl-kernel's cutlass_moe_fp4
    # (data/compat.yml s9-nvfp4-cutedsl-is-sgl-kernel, s9-nvfp4-fallthrough-mislabelled); flashinfer_cutlass is
    # FlashInfer's own CUTLASS MoE, another kernel
    points = ["flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutlass", "triton", "auto"]
    sweep = run(tmp_path, backends=points)["moesweep_sweep"]
    assert sweep["equivalent"] == {"triton": "flashinfer_cutedsl", "auto": "flashinfer_cutedsl"}
    assert sweep["measure_equivalent"] is False
    every = run(tmp_path, backends=points, measure_equivalent=True)["moesweep_sweep"]
    assert every["equivalent"] == {} and every["measure_equivalent"] is True
    # a flag that differs is another configuration: measured
    other = run(tmp_path, matrix={"axes": {"moe-runner-backend": ["triton", "flashinfer_cutedsl"],
                                           "max-running-requests": [32, 64]}})["moesweep_sweep"]
    assert other["equivalent"] == {"flashinfer_cutedsl.max-running-requests-32": "triton.max-running-requests-32",
                                   "flashinfer_cutedsl.max-running-requests-64": "triton.max-running-requests-64"}
