"""The compatibility evaluator against data/compat.yml: the facts of shared/docs/sglang-facts.md §1-§2."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat

KB = compat.load_kb()
SM120_KVM = {
    "sm": "sm120",
    "gpu_count": 8,
    "interconnect": "pcie-phb",
    "virtualization": {"kind": "vm", "type": "kvm"},
    "cuda_toolkit": {"release": "12.8"},
}
SM90 = {"sm": "sm90", "gpu_count": 2, "interconnect": "nvlink", "virtualization": {"kind": "vm"}}


def ev(backend, quant="modelopt_fp4", version="0.5.9", facts=SM120_KVM, **flags):
    point = {"backend": backend, "quantization": quant, "sglang_version": version, "flags": flags}
    return compat.evaluate(point, facts, KB)


def test_every_rule_has_a_citation():
    for section in ("rules", "flags", "advice", "auto_resolution"):
        for rule in KB[section]:
            assert rule.get("citation"), rule


@pytest.mark.parametrize(
    "version,error", [("0.5.9", "major versions [10]"), ("0.5.23", "no kernels runnable on sm120")]
)
def test_trtllm_refused_on_sm120_with_error_of_that_version(version, error):
    v = ev("flashinfer_trtllm", version=version)
    assert v["status"] == "unsupported" and v["sm"] == "sm120"
    assert any(error in (r["error"] or "") for r in v["reasons"])
    assert "flashinfer_cutlass" in [a["backend"] for a in v["alternatives"]]
    msg = compat.format_refusal(v)
    assert "flashinfer_trtllm" in msg and "sm120" in msg and "source:" in msg and "alternatives" in msg


def test_trtllm_nvfp4_refused_on_sm90_marlin_offered():
    v = ev("flashinfer_trtllm", version="0.5.14", facts=SM90)
    assert v["status"] == "unsupported"
    assert {r["rule"] for r in v["reasons"]} >= {"nvfp4-needs-blackwell", "trtllm-sm10x-only"}
    assert [a["backend"] for a in v["alternatives"]][:2] == ["auto", "marlin"]


def test_trtllm_supported_on_sm100():
    assert ev("flashinfer_trtllm", version="0.5.23", facts={"sm": "sm100"})["status"] == "supported"


def test_cutlass_sm120_cuda128_slow_caveat_and_cuda13_clean():
    v = ev("flashinfer_cutlass", version="0.5.23")
    assert v["status"] == "caveat" and any("compute_120a" in w for w in v["warnings"])
    v13 = ev("flashinfer_cutlass", version="0.5.23", facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}))
    assert v13["status"] == "supported"


def test_cutlass_sm90_nvfp4_refused_and_bad_quant_refused():
    assert ev("flashinfer_cutlass", facts=SM90)["status"] == "unsupported"
    v = ev("flashinfer_cutlass", quant="mxfp4", version="0.5.23", facts={"sm": "sm100"})
    assert v["status"] == "unsupported" and v["reasons"][0]["rule"] == "cutlass-fi-quant-assert"


def test_cutedsl_old_sglang_is_mislabelled_caveat_new_sglang_refused_on_sm120():
    old = ev("flashinfer_cutedsl", version="0.5.9")
    assert old["status"] == "caveat" and any("cutlass_moe_fp4" in w for w in old["warnings"])
    assert ev("flashinfer_cutedsl", version="0.5.9", **{"moe-a2a-backend": "deepep"})["status"] != "caveat"
    assert ev("flashinfer_cutedsl", version="0.5.11")["status"] == "unsupported"
    assert ev("flashinfer_cutedsl", version="0.5.23", facts={"sm": "sm100"})["status"] == "supported"


def test_mxfp4():
    assert ev("flashinfer_mxfp4", quant="mxfp4", version="0.5.23")["status"] == "supported"
    assert ev("flashinfer_mxfp4", quant="mxfp4", version="0.5.9", facts=SM90)["status"] == "unsupported"
    assert ev("flashinfer_mxfp4", quant="modelopt_fp4", version="0.5.23")["status"] == "unsupported"


def test_triton_marlin_cutlass_deep_gemm():
    assert ev("triton", quant="fp8", version="0.5.9")["status"] == "supported"
    assert ev("triton", version="0.5.9")["status"] == "unknown"
    assert ev("marlin", version="0.5.14")["status"] == "supported"
    v = ev("cutlass", version="0.5.23")
    assert v["status"] == "unsupported" and "flashinfer_cutlass instead" in v["reasons"][0]["error"]
    assert ev("cutlass", quant="fp8", version="0.5.23", **{"ep-size": 8})["status"] == "unsupported"
    assert ev("deep_gemm", quant="fp8", version="0.5.23", facts=SM90)["status"] == "supported"


def test_auto_resolution_per_sm_and_version():
    assert ev("auto", version="0.5.14")["effective_backend"] == "flashinfer_cutlass"
    old = ev("auto", version="0.5.12")
    assert old["effective_backend"] == "flashinfer_trtllm" and old["status"] == "unsupported"
    assert ev("auto", version="0.5.14", facts=SM90)["effective_backend"] == "marlin"
    assert ev("auto", version="0.5.23", facts={"sm": "sm100"})["effective_backend"] == "flashinfer_trtllm"


def test_unknown_backend_lists_choices_of_that_version():
    v = ev("marlin", version="0.5.9")
    assert v["status"] == "unsupported"
    reason = v["reasons"][0]["reason"]
    assert "valid choices" in reason and "flashinfer_cutlass" in reason and "marlin" not in reason.split(":", 1)[1]


def test_backend_as_list_is_refused():
    v = ev(["flashinfer_cutlass", "triton"])
    assert v["status"] == "unsupported" and "one name" in v["reasons"][0]["reason"]


def test_flag_facts_per_version():
    assert ev("flashinfer_cutlass", version="0.5.20", **{"nsa-decode-backend": "trtllm"})["status"] == "unsupported"
    alias = ev(
        "flashinfer_cutlass",
        version="0.5.14",
        facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}),
        **{"nsa-decode-backend": "trtllm"},
    )
    assert alias["status"] == "caveat"
    assert ev("flashinfer_cutlass", version="0.5.8", **{"nsa-prefill-backend": "trtllm"})["status"] == "unsupported"
    tp = ev("flashinfer_cutlass", version="0.5.9", tp=8)
    assert any(w.startswith("tp-abbreviation") for w in tp["warnings"])
    assert ev("flashinfer_cutlass", version="0.5.23", **{"cuda-graph-max-bs": 64})["status"] == "unsupported"
    noop = ev("flashinfer_cutlass", version="0.5.9", **{"enable-flashinfer-allreduce-fusion": True})
    assert any(w.startswith("allreduce-fusion-noop") for w in noop["warnings"])
    boom = ev("flashinfer_cutlass", version="0.5.14", **{"enable-flashinfer-allreduce-fusion": True})
    assert boom["status"] == "unsupported" and "SM90 or SM10X" in boom["reasons"][-1]["error"]
    assert (
        ev(
            "flashinfer_cutlass",
            version="0.5.14",
            facts=SM90,
            quant=None,
            **{"enable-flashinfer-allreduce-fusion": True},
        )["status"]
        == "supported"
    )


def test_missing_sm_gives_unknown_not_supported():
    v = ev("flashinfer_trtllm", version="0.5.9", facts={})
    assert v["status"] == "unknown"


def test_nccl_advice_for_pcie_kvm_only():
    adv = ev("flashinfer_cutlass")["advice"]
    assert adv["env"] == {"NCCL_P2P_LEVEL": "PHB", "NCCL_IB_DISABLE": "1"}
    assert adv["flags"] == ["--disable-custom-all-reduce"]
    assert ev("flashinfer_trtllm", facts=SM90)["advice"]["env"] == {}


def test_mixed_models_warned():
    facts = dict(SM120_KVM, mixed_models=True, gpu_models=["A", "B"])
    assert any("mixed GPU models" in w for w in ev("flashinfer_cutlass", facts=facts)["warnings"])
