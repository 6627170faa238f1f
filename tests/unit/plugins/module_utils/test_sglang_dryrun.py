"""The dry-run program (plugins/module_utils/sglang_dryrun.py): its pure helpers, and the program itself run the
way the sandbox and the host module run it (``python -I -S -c SOURCE`` with the request on stdin) against a small
stand-in ``sglang`` package whose ``prepare_server_args`` fails the ways the real one does (argparse's exit 2, an
exception in ``__post_init__``, ``check_server_args``). The real wheels are exercised in
tests/unit/plugins/plugin_utils/test_sglang_sandbox.py."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_dryrun as dr
from helpers.fake_sglang import write_fake_sglang

H200 = {"count": 1, "capability": [9, 0], "name": "NVIDIA H200", "memory_total_mib": 143771, "cuda_version": "12.8"}

@pytest.fixture(scope="module")
def fake_sglang(tmp_path_factory):
    return write_fake_sglang(tmp_path_factory.mktemp("site"))


def run_program(req):
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", dr.program_source()], input=json.dumps(req),
                          capture_output=True, text=True, timeout=60)
    answer = dr.parse_output(proc.stdout)
    assert answer is not None, proc.stderr
    return answer


def sandbox_request(site, argv, gpus=H200, **kw):
    return dr.request(argv, gpus=gpus, stub_missing=True, sys_path=[str(site)], sglang_version="0.5.9",
                      offline=True, torch_version="2.9.1", stub_names=["torch", "zmq"], **kw)


def test_an_accepted_launch_returns_what_sglang_resolved_from_the_facts(fake_sglang):
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--tp", "1"]))
    assert ans["verdict"] == "accepted" and ans["gpus"] == "facts"
    assert ans["stages_run"] == ["arguments", "server_args", "scheduler_init", "model_init", "attention_init"]
    # torch's capability and nvidia-smi's memory.total both answered from the request's GPUs
    assert ans["resolved"]["attention_backend"] == "fa3" and ans["resolved"]["gpu_mem"] == 143771
    assert ans["notices"][0]["message"] == "Attention backend not specified. Use fa3 backend by default."
    assert set(ans["stubbed"]) == {"torch", "zmq"} and ans["gpu_ids"] == [0]


def test_argparse_exit_2_is_a_refusal_at_the_arguments_with_its_message(fake_sglang):
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--moe-runner-backend", "bogus"]))
    assert ans["verdict"] == "refused" and ans["stage"] == "arguments" and ans["exit_status"] == 2
    # the program name is launch_server.py's, as under `python -m sglang.launch_server`
    assert ans["error"]["message"].startswith("launch_server.py: error: argument --moe-runner-backend: invalid choice")


def test_an_exception_in_post_init_is_a_refusal_at_server_args_with_its_line(fake_sglang):
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--moe-runner-backend",
                                                    "flashinfer_trtllm"]))
    assert ans["verdict"] == "refused" and ans["stage"] == "server_args"
    assert ans["error"]["type"] == "ValueError" and ans["error"]["message"] == \
        "flashinfer_trtllm needs SM100, got (9, 0)"
    assert ans["error"]["file"] == "sglang/srt/server_args.py" and ans["error"]["function"] == "__post_init__"
    assert dr.error_url("0.5.9", ans["error"]) == (
        "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/server_args.py#L{}".format(
            ans["error"]["line"]))
    # the same launch on an SM100 host gets past it
    b200 = dict(H200, capability=[10, 0], name="NVIDIA B200", memory_total_mib=183359)
    assert run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--moe-runner-backend",
                                                     "flashinfer_trtllm"], gpus=b200))["verdict"] == "accepted"


def test_check_server_args_refuses_after_post_init(fake_sglang):
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--tp", "3", "--pp-size", "2"]))
    assert ans["verdict"] == "refused" and ans["stage"] == "server_args"
    assert ans["error"]["type"] == "AssertionError" and ans["error"]["function"] == "check_server_args"


def test_ranks_beyond_the_visible_gpus_die_at_the_schedulers_set_device(fake_sglang):
    eight = dict(H200, count=8)
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--tp", "8", "--dp", "2"], gpus=eight))
    assert ans["verdict"] == "refused" and ans["stage"] == "scheduler_init"
    assert ans["gpu_ids"] == list(range(16)) and ans["device_count"] == 8
    assert ans["error"]["message"].startswith("CUDA error: invalid device ordinal")
    assert (ans["error"]["file"], ans["error"]["line"]) == ("sglang/srt/model_executor/model_runner.py", 3)
    # CUDA_VISIBLE_DEVICES narrows what the process sees, as the CUDA runtime reads it
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--tp", "4"], gpus=eight,
                                      environment={"CUDA_VISIBLE_DEVICES": "0,1"}))
    assert ans["stage"] == "scheduler_init" and ans["device_count"] == 2
    # a count the facts do not give: every index answers, and the answer says the check was not made
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "m", "--tp", "8"], gpus=dict(H200, count=None)))
    assert ans["verdict"] == "accepted" and ans["scheduler_init"].startswith("not checked: the GPU count")


def test_a_hub_the_sandbox_may_not_reach_is_undecided_not_a_refusal(fake_sglang):
    ans = run_program(sandbox_request(fake_sglang, ["--model-path", "offline"]))
    assert ans["verdict"] == "undecided" and "config.json is not available" in ans["reason"]
    # on a host (no offline sandbox) the server meets the same failure: a refusal
    req = sandbox_request(fake_sglang, ["--model-path", "offline"])
    req["offline"] = False
    assert run_program(req)["verdict"] == "refused"


def test_a_package_the_stack_does_not_install_is_an_import_error_not_a_stub(fake_sglang):
    req = sandbox_request(fake_sglang, ["--model-path", "m"])
    req["stub_names"] = ["torch"]  # zmq is not installed on this "host"
    ans = run_program(req)
    assert ans["verdict"] == "undecided" and ans["stage"] == "import"
    assert ans["error"]["type"] == "ModuleNotFoundError" and "zmq" in ans["error"]["message"]


def test_no_sglang_is_undecided_and_says_so(tmp_path):
    ans = run_program(dr.request(["--model-path", "m"], stub_missing=True, sys_path=[str(tmp_path)]))
    assert ans["verdict"] == "undecided" and ans["reason"].startswith("sglang is not importable")


def test_gpus_from_facts_reads_gpu_facts():
    facts = {"gpu_count": 8, "sm": "sm120", "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
             "gpus": [{"memory_total_mib": 97887}, {"memory_total_mib": 97800}]}
    assert dr.gpus_from_facts(facts, cuda_version="12.8") == {
        "count": 8, "capability": [12, 0], "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "memory_total_mib": 97800, "cuda_version": "12.8"}
    assert dr.gpus_from_facts({"gpu_count": 2}) is None
    assert dr.gpus_from_facts({"sm": "sm103"})["capability"] == [10, 3]
    assert dr.gpus_from_facts({"sm": "sm90"})["count"] is None


def test_the_fake_nvidia_smi_prints_nvidia_smis_formats(tmp_path):
    path = dr._fake_nvidia_smi(dict(H200, count=2), str(tmp_path))

    def smi(*args):
        return subprocess.run([path, *args], capture_output=True, text=True, check=False)

    assert smi("--query-gpu=memory.total", "--format=csv,noheader,nounits").stdout == "143771\n143771\n"
    assert smi("--query-gpu=index,name,compute_cap", "--format=csv").stdout == (
        "index, name, compute_cap\n0, NVIDIA H200, 9.0\n1, NVIDIA H200, 9.0\n")
    assert smi("-L").stdout.startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
    assert smi("topo", "-m").returncode == 2


def test_gpu_ids_follow_the_launchers_formula():
    def sa(**kw):
        base = dict(tp_size=1, pp_size=1, dp_size=1, nnodes=1, node_rank=0, gpu_id_step=1, base_gpu_id=0,
                    enable_dp_attention=False)
        base.update(kw)
        return types.SimpleNamespace(**base)

    assert dr._gpu_ids(sa(tp_size=4)) == [0, 1, 2, 3]
    assert dr._gpu_ids(sa(tp_size=2, base_gpu_id=4, gpu_id_step=2)) == [4, 6]
    assert dr._gpu_ids(sa(tp_size=2, dp_size=2)) == [0, 1, 2, 3]
    assert dr._gpu_ids(sa(tp_size=4, dp_size=2, enable_dp_attention=True)) == [0, 1, 2, 3]
    assert dr._gpu_ids(sa(tp_size=2, pp_size=2)) == [0, 1, 2, 3]
    # two nodes of a tp 16 group: each starts its 8 ranks on GPUs 0-7
    assert dr._gpu_ids(sa(tp_size=16, nnodes=2, node_rank=1)) == list(range(8))


def test_parse_output_takes_the_last_marker_line_and_summary_reads_it():
    out = "noise\nMOESWEEP_DRYRUN {\"verdict\": \"accepted\"}\nMOESWEEP_DRYRUN " + json.dumps(
        {"verdict": "refused", "stage": "server_args", "sglang_version": "0.5.9",
         "error": {"file": "sglang/srt/server_args.py", "line": 2137, "message": "Invalid quantization 'fp8'."}})
    ans = dr.parse_output(out)
    assert dr.summary(ans) == ("sglang 0.5.9 refuses this launch at server_args (sglang/srt/server_args.py:2137): "
                               "Invalid quantization 'fp8'.")
    assert dr.parse_output("no marker") is None
    assert dr.summary({"verdict": "undecided", "reason": "x"}) == "the dry run could not decide: x"
