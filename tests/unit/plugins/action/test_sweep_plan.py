"""sweep_plan refuses bad sweep input before any point runs, each time naming the fix; backends=compatible
keeps what the preflight accepts for the host."""

from __future__ import annotations

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
