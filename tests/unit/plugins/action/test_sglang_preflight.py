"""The sglang_preflight action: refusal, force, caveats as warnings, bad input; and ansible-doc rendering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail

# isort: split
from ansible_collections.moesweep.sweep.plugins.action import sglang_preflight as action
from helpers.paths import REPO

SM120 = {
    "sm": "sm120",
    "gpu_count": 8,
    "interconnect": "pcie-phb",
    "virtualization": {"kind": "vm", "type": "kvm"},
    "cuda_toolkit": {"release": "12.8"},
}
SM90_H200 = {"sm": "sm90", "gpu_count": 2, "interconnect": "nvlink", "virtualization": {"kind": "vm"}}


# What the host's dry run answers where these tests have no host: undecided, so the knowledge base decides
NO_HOST = {"verdict": "undecided", "where": "host", "reason": "a unit test: no host to run on"}


def run_action(args, task_vars=None, host_answer=None):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    plugin = action.ActionModule(
        task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None
    )
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(action.ActionModule, "_execute_module", return_value=host_answer or NO_HOST) as ran:
        result = plugin.run(task_vars=task_vars or {})
    # the host's dry runs asked for (a stat of a local model path is the other module an action may run)
    run_action.module_calls = [c for c in ran.call_args_list if c.kwargs["module_name"].endswith("sglang_dry_run")]
    run_action.all_calls = ran.call_args_list
    return result


def test_refuses_trtllm_on_sm120_naming_everything():
    res = run_action(
        {
            "backend": "flashinfer_trtllm",
            "quantization": "modelopt_fp4",
            "sglang_version": "0.5.9",
            "gpu_facts": SM120,
            "flags": {"tp-size": 8},
        }
    )
    assert res["failed"] is True and res["verdict"] == "unsupported" and res["forced"] is False
    for word in ("flashinfer_trtllm", "sm120", "SM100", "source:", "flashinfer_cutlass", "major versions [10]"):
        assert word in res["msg"]
    assert res["advice"]["env"]["NCCL_P2P_LEVEL"] == "PHB"
    json.dumps(res)


def test_refuses_trtllm_nvfp4_on_h200_sm90():
    res = run_action(
        {
            "backend": "flashinfer_trtllm",
            "quantization": "modelopt_fp4",
            "sglang_version": "0.5.9",
            "gpu_facts": {"moesweep_gpu": SM90_H200},
        }
    )
    # sglang 0.5.9 has no marlin choice and no W4A16 fallback: the launch dies in ModelOptNvFp4FusedMoEMethod
    assert res["failed"] and res["sm"] == "sm90" and "Please use Blackwell and above." in res["msg"]
    assert "marlin" not in res["msg"]
    # what the launch prints first: the model loader's capability check (0.5.9 model_loader/loader.py:222-242)
    assert "Minimum capability: 100. Current capability: 90." in res["msg"]


def test_force_overrides_and_is_recorded():
    res = run_action(
        {
            "backend": "flashinfer_trtllm",
            "quantization": "modelopt_fp4",
            "sglang_version": "0.5.9",
            "gpu_facts": SM120,
            "force": True,
        }
    )
    assert "failed" not in res and res["forced"] is True and res["verdict"] == "unsupported"
    assert res["msg"].startswith("FORCED")


def test_caveat_is_a_warning_not_a_failure_and_facts_from_host():
    res = run_action(
        {"backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4", "sglang_version": "0.5.9"},
        task_vars={"ansible_facts": {"moesweep_gpu": SM120}},
    )
    assert "failed" not in res and res["verdict"] == "caveat"
    assert any("cutlass_moe_fp4" in w for w in res["preflight_warnings"])


def test_unknown_backend_lists_valid_choices():
    res = run_action(
        {"backend": "flashinfer_trtlm", "quantization": "modelopt_fp4", "sglang_version": "0.5.9", "gpu_facts": SM120}
    )
    assert res["failed"] and "valid choices: auto, deep_gemm" in res["msg"]


def test_flag_unknown_to_the_version():
    res = run_action(
        {
            "backend": "flashinfer_cutlass",
            "quantization": "modelopt_fp4",
            "sglang_version": "0.5.23",
            "gpu_facts": dict(SM120, cuda_toolkit={"release": "13.0"}),
            "flags": {"nsa-decode-backend": "trtllm"},
        }
    )
    assert res["failed"] and "nsa-decode-backend" in res["msg"] and "--dsa-decode-backend" in res["msg"]


def test_quantization_the_backend_rejects():
    res = run_action(
        {
            "backend": "flashinfer_cutedsl",
            "quantization": "fp8",
            "sglang_version": "0.5.23",
            "gpu_facts": {"sm": "sm100"},
        }
    )
    assert res["failed"] and "s23-flashinfer-cutedsl-quant" in res["msg"] and "Invalid quantization 'fp8'" in res["msg"]


def test_backend_given_as_list():
    with pytest.raises(AnsibleActionFail, match="backend must be one"):
        run_action({"backend": ["flashinfer_cutlass", "triton"], "sglang_version": "0.5.9", "gpu_facts": SM120})


def test_missing_required_argument():
    with pytest.raises(AnsibleActionFail, match="backend"):
        run_action({"sglang_version": "0.5.9"})


def test_no_version_and_no_provenance_is_a_refusal_naming_the_fix():
    res = run_action({"backend": "triton", "gpu_facts": SM120})
    assert res["failed"] and "sglang_server_sglang_version" in res["msg"] and "site.yml" in res["msg"]
    res = run_action({"backend": "triton", "gpu_facts": SM120, "provenance": {"versions": {"sglang": "0.5.9"}}})
    assert "failed" not in res and res["launch"]["sglang_version"] == "0.5.9"


@pytest.mark.parametrize("name", ["gpu_facts", "sglang_preflight"])
def test_ansible_doc_renders(name):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "--json", f"moesweep.sweep.{name}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)[f"moesweep.sweep.{name}"]
    assert doc["doc"]["module"] == name and doc["examples"] and doc["return"]


def test_model_from_the_model_path_or_its_config_decides_the_attention_rules():
    # 0.5.9 gives a DSA model `nsa` when no attention backend is set (server_args.py:1197-1213), SM90/SM100 only
    base = {"backend": "flashinfer_cutlass", "quantization": "modelopt_fp4", "sglang_version": "0.5.9",
            "gpu_facts": SM120, "environment": {"FLASHINFER_CUDA_ARCH_LIST": "12.0f"}}
    res = run_action(dict(base, flags={"model-path": "lukealonso/GLM-5-NVFP4", "tp": 8}))
    assert res["failed"] and "s9-dsa-nsa-sm12x" in res["msg"] and "--attention-backend flashinfer" in res["msg"]
    assert "--tp-size" in res["launch"]["argv"]
    ok = run_action(dict(base, flags={"model-path": "lukealonso/GLM-5-NVFP4", "attention-backend": "flashinfer",
                                      "nsa-decode-backend": "trtllm", "nsa-prefill-backend": "trtllm"}))
    assert not ok.get("failed") and ok["verdict"] in ("supported", "caveat")
    config = {"architectures": ["GlmMoeDsaForCausalLM"], "index_topk": 2048}
    res = run_action(dict(base, flags={"model-path": "/models/glm5"}, model_config=config))
    assert res["failed"] and "s9-dsa-nsa-sm12x" in res["msg"]
    unknown = run_action(dict(base, flags={"model-path": "/models/glm5"}))
    assert not unknown.get("failed")
    assert any("for lack of the model's architecture" in w for w in unknown["preflight_warnings"])


def test_driver_of_the_host_gates_the_0523_stack():
    args = {"backend": "triton", "sglang_version": "0.5.23", "gpu_facts": dict(SM90_H200, driver_version="570.172.08",
                                                                              driver_cuda_version="12.8")}
    res = run_action(args)
    assert res["failed"] and "s23-driver-cuda13" in res["msg"] and "found version 12080" in res["msg"]
    assert "R580" in res["msg"]
    args["gpu_facts"] = dict(SM90_H200, driver_version="580.159.04", driver_cuda_version="13.0")
    assert not run_action(args).get("failed")
def _host_facts(*checks):
    from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc

    return dict(SM120, host_checks=list(checks), host_check_summary=hc.summarise(checks))


def test_host_check_fail_refuses_and_warn_is_a_caveat():
    from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc

    shm = hc.check_shm(64 << 20, 8)
    driver = hc.check_driver("570.172.08", "12.8", "13.0")
    args = {"backend": "triton", "sglang_version": "0.5.9", "flags": {"tp-size": 8}}
    res = run_action(dict(args, gpu_facts=_host_facts(shm, driver)))
    assert res["failed"] is True and res["verdict"] == "unsupported" and res["forced"] is False
    assert "refused by the host checks, before anything restarted" in res["msg"]
    assert "host check driver_cuda: driver 570.172.08" in res["msg"] and "R580" in res["msg"]
    assert any(w.startswith("host check shm: /dev/shm is 64 MiB") for w in res["preflight_warnings"])
    assert [c["name"] for c in res["host_checks"]] == ["shm", "driver_cuda"]
    forced = run_action(dict(args, gpu_facts=_host_facts(shm, driver), force=True))
    assert not forced.get("failed") and forced["forced"] is True and forced["msg"].startswith("FORCED")
    warned = run_action(dict(args, gpu_facts=_host_facts(shm)))
    assert not warned.get("failed") and any("/dev/shm" in w for w in warned["preflight_warnings"])
    json.dumps(res)


def test_the_hosts_own_sglang_refuses_before_anything_restarts():
    # what sglang_dry_run returns on a host whose sglang refuses the line (its ServerArgs raised)
    refused = {"verdict": "refused", "stage": "server_args", "sglang_version": "0.5.9", "where": "host", "gpus": "real",
               "error": {"type": "AssertionError", "message": "Invalid quantization 'fp8'.",
                         "file": "sglang/srt/server_args.py", "line": 2137}}
    args = {"backend": "flashinfer_cutlass", "sglang_version": "0.5.9", "gpu_facts": SM120,
            "venv": "/opt/sglang/venv", "api_key_set": True, "secret_config_path": "/etc/sglang/s.secrets.yaml",
            "flags": {"model-path": "/models/m", "tp-size": 8}, "environment": {"NCCL_P2P_LEVEL": "PHB"}}
    result = run_action(args, host_answer=refused)
    assert result["failed"] and result["verdict"] == "unsupported"
    assert "AssertionError: Invalid quantization 'fp8'." in result["msg"]
    assert "server_args.py#L2137" in result["msg"] and result["dry_run"]["where"] == "host"
    # the module got the unit's exact line, its environment, the keys of its --config file, the facts
    (call,) = run_action.module_calls
    sent = call.kwargs["module_args"]
    assert call.kwargs["module_name"] == "moesweep.sweep.sglang_dry_run"
    assert sent["python"] == "/opt/sglang/venv/bin/python" and sent["launch_imports"] is True
    assert sent["argv"][:2] == ["--model-path", "/models/m"] and sent["config_keys"] == ["api-key"]
    assert sent["environment"]["NCCL_P2P_LEVEL"] == "PHB" and sent["gpu_facts"]["sm"] == "sm120"


def test_no_host_dry_run_where_a_stand_in_serves_or_the_stack_serves_nothing():
    base = {"backend": "triton", "sglang_version": "0.5.9", "gpu_facts": SM120, "flags": {"model-path": "/m"}}
    run_action(dict(base, command=["/opt/moesweep-sim/bin/sglang-sim"]))
    assert run_action.module_calls == []
    run_action(dict(base, provenance={"stack": "test-cpu-sglang-0.5.9", "versions": {"sglang": "0.5.9"}}))
    assert run_action.module_calls == []
    run_action(dict(base, dry_run="off"))
    assert run_action.module_calls == []
    # asked for: it runs on any stack, and a stand-in's import failure is then only undecided
    run_action(dict(base, dry_run="host", command=["/opt/moesweep-sim/bin/sglang-sim"]))
    assert run_action.module_calls[0].kwargs["module_args"]["launch_imports"] is False


def test_a_local_model_path_without_the_model_is_refused_before_anything_restarts():
    missing = {"changed": False, "stat": {"exists": False}}
    args = {"backend": "triton", "sglang_version": "0.5.9", "gpu_facts": SM120, "dry_run": "off",
            "flags": {"model-path": "/models/does-not-exist", "tp-size": 8}}
    result = run_action(args, host_answer=missing)
    assert result["failed"] and "holds no config.json on the host" in result["msg"]
    assert "OSError: Can't load the configuration of '/models/does-not-exist'" in result["msg"]
    assert run_action.all_calls[0].kwargs["module_args"]["path"] == "/models/does-not-exist/config.json"
    # the directory the sweep stages the model into is not there yet, and is not asked about
    result = run_action(dict(args, staged_model_path="/models/does-not-exist"), host_answer=missing)
    assert not result.get("failed") and run_action.all_calls == []
    # a hub id is the server's to fetch: nothing is asked
    run_action(dict(args, flags={"model-path": "org/model"}), host_answer=missing)
    assert run_action.all_calls == []
