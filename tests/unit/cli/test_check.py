"""``moesweep check``: the preflight's evaluator from the controller."""

from __future__ import annotations

import json

from moesweep import cli


def run(capsys, *argv):
    rc = cli.main(["check", *argv])
    return rc, capsys.readouterr().out


def test_quick_flags_refuse_trtllm_on_sm120(capsys):
    rc, out = run(
        capsys,
        "--sm",
        "120",
        "--gpus",
        "8",
        "--interconnect",
        "pcie-phb",
        "--virt",
        "vm",
        "--backend",
        "flashinfer_trtllm",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
    )
    assert rc == 1
    assert "refused" in out and "sm120" in out and "flashinfer_cutlass" in out
    assert "NCCL_P2P_LEVEL=PHB" in out and "--disable-custom-all-reduce" in out


def test_facts_file_and_json(tmp_path, capsys):
    facts = {
        "ansible_facts": {
            "moesweep_gpu": {
                "sm": "sm120",
                "gpu_count": 8,
                "interconnect": "pcie-phb",
                "cuda_toolkit": {"release": "13.0"},
            }
        }
    }
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    rc, out = run(
        capsys,
        "--facts",
        str(path),
        "--backend",
        "auto",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.23",
        "--json",
    )
    verdict = json.loads(out)
    assert rc == 0 and verdict["effective_backend"] == "flashinfer_cutlass" and verdict["status"] == "supported"


def test_caveat_exits_zero_with_warning(capsys):
    rc, out = run(
        capsys,
        "--sm",
        "sm120",
        "--backend",
        "flashinfer_cutedsl",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
    )
    assert rc == 0 and out.startswith("caveat") and "cutlass_moe_fp4" in out


def test_flag_refusal_and_bad_sm(capsys):
    rc, out = run(
        capsys,
        "--sm",
        "12.0",
        "--backend",
        "flashinfer_cutlass",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.23",
        "--cuda-version",
        "13.0",
        "--flag",
        "enable-flashinfer-allreduce-fusion",
        "--flag",
        "cuda-graph-max-bs=64",
    )
    assert rc == 1 and "SM90 or SM10X" in out and "ambiguous" in out
    rc, _ = run(capsys, "--sm", "gpu", "--backend", "triton", "--sglang-version", "0.5.9")
    assert rc == 2


def test_flag_values_are_typed_like_ansible_extra_vars():
    from moesweep.commands.check import _flag

    assert _flag("enable-flashinfer-allreduce-fusion=true") == ("enable-flashinfer-allreduce-fusion", True)
    assert _flag("--tp-size=8") == ("tp-size", 8)
    assert _flag("mem-fraction-static=0.9") == ("mem-fraction-static", 0.9)
    assert _flag("trust-remote-code") == ("trust-remote-code", True)
    assert _flag("served-model-name=glm-5") == ("served-model-name", "glm-5")
