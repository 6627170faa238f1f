"""The compatibility evaluator against data/compat.yml: the whole (backend x SM x quantization x pinned
version) matrix derived from the wheels (tests/fixtures/compat/), the knowledge base's own rules (a version
range and public citations on every rule), and the facts that are not in the matrix."""

from __future__ import annotations

import copy
import csv
import re

import pytest
import yaml
from helpers.paths import FIXTURES, REPO

# isort: split
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, sglang_flags

KB = compat.load_kb()
PINNED = ("0.5.9", "0.5.23")
MATRIX = list(csv.DictReader((FIXTURES / "compat" / "matrix.csv").open(encoding="utf-8")))
# the CUDA toolkit of each version's provisioning lane (cu128-sglang-0.5.9, cu130-sglang-0.5.23)
LANE_TOOLKIT = {"0.5.9": "12.8", "0.5.23": "13.0"}
SM120_KVM = {
    "sm": "sm120",
    "gpu_count": 8,
    "interconnect": "pcie-phb",
    "virtualization": {"kind": "vm", "type": "kvm"},
    "cuda_toolkit": {"release": "12.8"},
}
SM90 = {
    "sm": "sm90",
    "gpu_count": 2,
    "interconnect": "nvlink",
    "virtualization": {"kind": "vm"},
    "cuda_toolkit": {"release": "12.8"},
}
H200_NO_TOOLKIT = {
    "sm": "sm90",
    "gpu_count": 8,
    "interconnect": "nvlink",
    "cuda_home": "/usr/local/cuda",
    "cuda_toolkit": {"nvcc": None, "release": None, "version": None},
}


def ev(backend, quant="modelopt_fp4", version="0.5.9", facts=SM120_KVM, env=None, **flags):
    point = {
        "backend": backend,
        "quantization": quant,
        "sglang_version": version,
        "flags": flags,
        "environment": env or {},
    }
    return compat.evaluate(point, facts, KB)


# ------------------------------------------------------------------------------ the whole matrix
def test_matrix_covers_every_choice_of_each_pinned_version():
    for version in PINNED:
        choices = sglang_flags.load_schema(version)["_options"]["--moe-runner-backend"]["choices"]
        cells = {(r["backend"], r["sm"], r["quantization"]) for r in MATRIX if r["sglang"] == version}
        assert cells == {
            (b, sm, q) for b in choices for sm in ("90", "100", "120", "121") for q in ("modelopt_fp4", "fp8", "none")
        }


@pytest.mark.parametrize(
    "cell", MATRIX, ids=lambda r: "{}-{}-sm{}-{}".format(r["sglang"], r["backend"], r["sm"], r["quantization"])
)
def test_matrix_cell(cell):
    """Each derived cell: the verdict, what runs, the error the launch hits first, and the citation."""
    version = cell["sglang"]
    facts = {"sm": "sm" + cell["sm"], "gpu_count": 8, "cuda_toolkit": {"release": LANE_TOOLKIT[version]}}
    point = {
        "backend": cell["backend"],
        "quantization": None if cell["quantization"] == "none" else cell["quantization"],
        "sglang_version": version,
        "flags": {},
        "environment": {},
    }
    v = compat.evaluate(point, facts, KB)
    assert (v["status"], v["effective_backend"]) == (cell["verdict"], cell["runs"]), cell["note"]
    assert (v["error"] or "") == cell["error"]
    assert cell["citation"] in v["citations"]
    if cell["verdict"] == "unsupported":
        assert v["stage"] in compat.STAGES and "source: " + cell["citation"] in compat.format_refusal(v)


# ------------------------------------------------------------------------------ the knowledge base itself
def test_kb_is_valid_and_every_rule_is_bounded_to_audited_versions():
    assert compat.kb_problems(KB) == []
    assert set(KB["versions"]) == set(PINNED)
    for section in ("rules", "flags", "auto_resolution"):
        for rule in KB[section]:
            rng = rule["sglang"]
            assert rng["min"] in PINNED and rng["max"] in PINNED, rule["id"] if "id" in rule else rule
            assert rule["cite"] and all(c in KB["sources"] for c in rule["cite"])


def test_a_rule_without_a_version_bound_is_refused():
    broken = copy.deepcopy(KB)
    broken["rules"][0].pop("sglang")
    broken["rules"][1]["sglang"] = {"min": "0.5.9"}
    broken["rules"][2]["sglang"] = {"min": "0.5.9", "max": "0.5.14"}
    problems = compat.kb_problems(broken)
    assert any(broken["rules"][0]["id"] in p and "both bounds" in p for p in problems)
    assert any(broken["rules"][1]["id"] in p and "both bounds" in p for p in problems)
    assert any(broken["rules"][2]["id"] in p and "0.5.14 is not an audited version" in p for p in problems)


def test_unsupported_rules_name_stage_and_error():
    for rule in KB["rules"] + KB["flags"]:
        if rule["status"] == "unsupported":
            assert rule["stage"] in compat.STAGES and rule["error"], rule["id"]


def test_citations_are_public_primary_sources_and_no_internal_keys_reach_users():
    for key, url in KB["sources"].items():
        assert url.startswith("https://"), key
        assert (
            re.match(r"^https://github\.com/[^/]+/[^/]+/(blob/(v\d|[0-9a-f]{40})|issues/|pull/)", url)
            or re.match(r"^https://(github\.com/[^/]+/[^/#]+#|docs\.nvidia\.com/)", url)
            # a model's own config.json (the primary source of its architecture), for the models table only
            or (
                key.startswith("hf.")
                and re.match(r"^https://huggingface\.co/[^/]+/[^/]+/blob/[^/]+/config\.json$", url)
            )
            # a pinned wheel with no public source tag (sgl-deep-gemm), read in the wheel by the agreement test
            or (key.startswith("dg") and re.match(r"^https://pypi\.org/project/[\w.-]+/[\w.+-]+/$", url))
        ), (key, url)
    # citations users cannot open: the old internal abbreviations, pointers to a notes file outside the repo
    # ("facts" + section sign), a machine's own paths (written in pieces: this file is searched for them too)
    notes_ref, machine_path = "facts \u00a7", "/" + "work/"
    internal = re.compile(r"\b(S9|S23|S5\.\d+|FI072|FIgit)\b|" + notes_ref + "|sglang-facts|shared/")
    text = (REPO / "data" / "compat.yml").read_text(encoding="utf-8")
    assert not internal.search(yaml.safe_dump({k: KB[k] for k in ("rules", "flags", "auto_resolution", "advice")}))
    assert notes_ref not in text and machine_path not in text
    for row in MATRIX:
        assert not internal.search(row["citation"] + row["error"])


def test_a_bad_source_url_is_a_kb_problem():
    broken = copy.deepcopy(KB)
    broken["sources"]["s9.nvfp4_platform"] = "S9 srt/layers/quantization/modelopt_quant.py:1334"
    assert any("s9.nvfp4_platform" in p and "primary-source URL" in p for p in compat.kb_problems(broken))


# ------------------------------------------------------------------------------ one owner of the valid names
def test_valid_backends_come_from_the_flag_schema_only():
    assert "backends" not in KB
    for version in PINNED:
        assert (
            compat.valid_backends(version)
            == sglang_flags.load_schema(version)["_options"]["--moe-runner-backend"]["choices"]
        )
    assert "marlin" not in compat.valid_backends("0.5.9")


def test_unknown_version_is_a_clear_error_naming_the_known_versions():
    v = ev("flashinfer_cutlass", version="0.5.14")
    assert v["status"] == "unsupported" and v["reasons"][0]["rule"] == "sglang-version"
    assert "0.5.14 has no flag schema" in v["reasons"][0]["reason"]
    assert "known versions: 0.5.9, 0.5.15, 0.5.23" in compat.format_refusal(v)


def test_version_with_a_schema_but_no_audit_is_unknown():
    kb = copy.deepcopy(KB)
    del kb["versions"]["0.5.23"]
    v = compat.evaluate(
        {"backend": "flashinfer_cutlass", "quantization": "modelopt_fp4", "sglang_version": "0.5.23"}, SM120_KVM, kb
    )
    assert v["status"] == "unknown" and "audits only 0.5.9" in v["reasons"][0]["reason"]


def test_unknown_backend_and_quantization_list_choices_of_that_version():
    v = ev("marlin", version="0.5.9")
    assert v["status"] == "unsupported" and v["reasons"][0]["rule"] == "backend-choice"
    reason = v["reasons"][0]["reason"]
    assert "valid choices" in reason and "flashinfer_cutlass" in reason and "marlin" not in reason.split(":", 1)[1]
    q = ev("flashinfer_cutlass", quant="modelopt_mixed", version="0.5.9")
    assert q["status"] == "unsupported" and q["reasons"][0]["rule"] == "quantization-choice"


# ------------------------------------------------------------------------------ what `auto` does (reviewer's points)
def test_auto_nvfp4_on_sm120_runs_sgl_kernel_cutlass_on_059_and_flashinfer_cutlass_on_0523():
    old = ev("auto", version="0.5.9")
    assert (old["status"], old["effective_backend"]) == ("supported", "cutlass")
    assert not any("flashinfer_trtllm" in (r["reason"] or "") for r in old["reasons"])
    new = ev("auto", version="0.5.23", facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}))
    assert (new["status"], new["effective_backend"]) == ("supported", "flashinfer_cutlass")


def test_auto_nvfp4_on_sm90_is_refused_on_059_and_marlin_on_0523():
    old = ev("auto", version="0.5.9", facts=SM90)
    assert old["status"] == "unsupported"
    # the model loader refuses first (0.5.9 model_loader/loader.py:222-242, ModelOptFp4Config.get_min_capability
    # 100), before ModelOptNvFp4FusedMoEMethod's "Please use Blackwell" could
    assert old["error"] == (
        "ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. "
        "Minimum capability: 100. Current capability: 90."
    )
    assert "marlin" not in compat.format_refusal(old)
    new = ev("auto", version="0.5.23", facts=SM90)
    assert (new["status"], new["effective_backend"]) == ("supported", "marlin")


def test_059_refusals_never_offer_marlin():
    for facts in (SM90, SM120_KVM, {"sm": "sm121", "cuda_toolkit": {"release": "12.8"}}):
        for backend in compat.valid_backends("0.5.9"):
            v = ev(backend, version="0.5.9", facts=facts)
            assert "marlin" not in compat.format_refusal(v)


def test_alternatives_are_only_backends_that_run_themselves():
    v = ev("flashinfer_trtllm", version="0.5.9")
    alts = {a["backend"]: a for a in v["alternatives"]}
    assert alts["auto"]["resolves_to"] == "cutlass" and "cutlass" in alts and "flashinfer_cutlass" in alts
    assert "triton" not in alts and "flashinfer_cutedsl" not in alts  # they fall through to cutlass_moe_fp4


# ------------------------------------------------------------------------------ environment and toolkit facts
def test_flashinfer_cutlass_sm120_120a_caveat_holds_only_without_flashinfer_cuda_arch_list():
    v = ev("flashinfer_cutlass", version="0.5.9")
    assert v["status"] == "caveat" and any("compute_120a" in w for w in v["warnings"])
    pinned = ev("flashinfer_cutlass", version="0.5.9", env={"FLASHINFER_CUDA_ARCH_LIST": "12.0f"})
    assert pinned["status"] == "supported"


def test_flashinfer_cutlass_sm120_cuda_version_on_0523():
    assert ev("flashinfer_cutlass", version="0.5.23")["status"] == "caveat"
    assert (
        ev("flashinfer_cutlass", version="0.5.23", facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}))["status"]
        == "supported"
    )


def test_h200_without_cuda_toolkit_warns_for_jit_backends_only():
    jit = ev("flashinfer_trtllm", quant="fp8", version="0.5.23", facts={**H200_NO_TOOLKIT, "sm": "sm100"})
    assert jit["status"] == "caveat" and any("Could not find nvcc" in w for w in jit["warnings"])
    assert any("cpp_ext.py" in c for c in jit["citations"])
    dg = ev("deep_gemm", quant="fp8", version="0.5.9", facts=H200_NO_TOOLKIT)
    assert dg["status"] == "caveat" and any(w.startswith("jit-needs-cuda-toolkit") for w in dg["warnings"])
    assert ev("triton", quant="fp8", version="0.5.9", facts=H200_NO_TOOLKIT)["status"] == "supported"
    assert ev("deep_gemm", quant="fp8", version="0.5.9", facts=SM90)["status"] == "supported"


def test_triton_on_sm121_with_059_needs_a_newer_ptxas():
    sm121 = {"sm": "sm121", "cuda_toolkit": {"release": "12.9"}}
    # dense block-FP8 GEMMs on Triton too (under the default auto they die in DeepGEMM first: see
    # test_059_block_fp8_on_sm12x_needs_a_dense_gemm_backend)
    triton_gemm = {"fp8-gemm-backend": "triton"}
    v = ev("triton", quant="fp8", version="0.5.9", facts=sm121, **triton_gemm)
    assert v["status"] == "unsupported" and "sm_121a" in v["error"]
    assert (
        ev(
            "triton",
            quant="fp8",
            version="0.5.9",
            facts=sm121,
            env={"TRITON_PTXAS_PATH": "/usr/local/cuda-12.9/bin/ptxas"},
            **triton_gemm,
        )["status"]
        == "supported"
    )
    assert ev("triton", quant="fp8", version="0.5.23", facts=sm121)["status"] == "supported"


def test_experimental_sgl_trtllm_depends_on_its_environment_switch():
    off = ev("experimental_sgl_trtllm", version="0.5.23", facts={"sm": "sm100", "cuda_toolkit": {"release": "13.0"}})
    assert off["status"] == "unsupported" and "fused func" in off["error"]
    on = ev(
        "experimental_sgl_trtllm",
        version="0.5.23",
        facts={"sm": "sm100", "cuda_toolkit": {"release": "13.0"}},
        env={"SGLANG_EXPERIMENTAL_LORA_OPTI": "1"},
    )
    assert on["status"] == "unknown"


def test_lora_runners_need_enable_lora():
    v = ev("lora_triton", quant=None, version="0.5.23")
    assert v["status"] == "unsupported" and "requires --enable-lora" in v["error"]
    assert ev("lora_triton", quant=None, version="0.5.23", **{"enable-lora": True})["status"] == "unknown"


def test_missing_sm_gives_unknown_not_supported():
    assert ev("flashinfer_trtllm", version="0.5.9", facts={})["status"] == "unknown"


def test_other_quantizations_are_unknown_not_supported():
    v = ev("triton", quant="awq", version="0.5.9")
    assert v["status"] == "unknown" and v["reasons"][0]["rule"] == "not-audited"


def test_mxfp4():
    assert ev("flashinfer_mxfp4", quant="mxfp4", version="0.5.23")["status"] == "supported"
    assert ev("flashinfer_mxfp4", quant="mxfp4", version="0.5.9", facts=SM90)["status"] == "unsupported"
    assert ev("flashinfer_mxfp4", quant="modelopt_fp4", version="0.5.23")["status"] == "unsupported"


def test_backend_as_list_is_refused():
    v = ev(["flashinfer_cutlass", "triton"])
    assert v["status"] == "unsupported" and "one name" in v["reasons"][0]["reason"]


# ------------------------------------------------------------------------------ flags
@pytest.mark.parametrize("version", PINNED)
def test_mem_fraction_static_outside_zero_one(version):
    facts = dict(SM120_KVM, cuda_toolkit={"release": "13.0"})
    high = ev("flashinfer_cutlass", version=version, facts=facts, **{"mem-fraction-static": 1.5})
    assert high["status"] == "unsupported" and high["stage"] == "kv_cache" and "OutOfMemoryError" in high["error"]
    assert any("model_runner_kv_cache_mixin.py" in c or "kv_cache_configurator.py" in c for c in high["citations"])
    capped = ev(
        "flashinfer_cutlass", version=version, facts=facts, **{"mem-fraction-static": 1.5, "max-total-tokens": 200000}
    )
    assert capped["status"] != "unsupported" and any("not a fraction" in w for w in capped["warnings"])
    zero = ev("flashinfer_cutlass", version=version, facts=facts, **{"mem-fraction-static": 0})
    assert zero["status"] == "unsupported"
    assert ("Not enough memory" if version == "0.5.9" else "Loaded weights leave no GPU memory") in zero["error"]
    assert "=0" in zero["error"]
    ok = ev("flashinfer_cutlass", version=version, facts=facts, **{"mem-fraction-static": 0.88})
    assert not any(r["rule"].startswith("mem-fraction") for r in ok["reasons"])


def test_flags_checked_by_the_schema_reach_the_verdict():
    schema = sglang_flags.load_schema("0.5.23")
    errors = sglang_flags.validate_flags(schema, {"nsa-decode-backend": "trtllm", "cuda-graph-max-bs": 64})
    v = compat.evaluate(
        {"backend": "flashinfer_cutlass", "quantization": "modelopt_fp4", "sglang_version": "0.5.23"},
        dict(SM120_KVM, cuda_toolkit={"release": "13.0"}),
        KB,
        flag_errors=errors,
    )
    msg = compat.format_refusal(v)
    assert v["status"] == "unsupported" and "--dsa-decode-backend" in msg and "ambiguous" in msg


def test_allreduce_fusion_per_version():
    noop = ev("flashinfer_cutlass", version="0.5.9", **{"enable-flashinfer-allreduce-fusion": True})
    assert any(w.startswith("allreduce-fusion-noop") for w in noop["warnings"])
    boom = ev(
        "flashinfer_cutlass",
        version="0.5.23",
        facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}),
        **{"enable-flashinfer-allreduce-fusion": True},
    )
    assert boom["status"] == "unsupported" and "SM90 or SM10X" in boom["error"]
    h200 = ev("triton", quant=None, version="0.5.23", facts=SM90, **{"enable-flashinfer-allreduce-fusion": True})
    assert h200["status"] == "supported"
    # the spelling 0.5.23's deprecation message recommends resolves the same backend, and raises the same way
    for value in ("auto", "trtllm"):
        new = ev("triton", quant=None, version="0.5.23", facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}),
                 **{"flashinfer-allreduce-fusion-backend": value})
        assert new["status"] == "unsupported" and new["stage"] == "first_forward" and "SM90 or SM10X" in new["error"]
    assert ev("triton", quant=None, version="0.5.23", facts=SM90,
              **{"flashinfer-allreduce-fusion-backend": "auto"})["status"] == "supported"


def test_nccl_advice_for_pcie_kvm_only():
    adv = ev("flashinfer_cutlass")["advice"]
    assert adv["env"] == {"NCCL_P2P_LEVEL": "PHB", "NCCL_IB_DISABLE": "1"}
    assert adv["flags"] == ["--disable-custom-all-reduce"] and adv["citations"][0].startswith("https://")
    assert ev("flashinfer_trtllm", facts=SM90)["advice"]["env"] == {}


def test_mixed_models_warned():
    facts = dict(SM120_KVM, mixed_models=True, gpu_models=["A", "B"])
    assert any("mixed GPU models" in w for w in ev("flashinfer_cutlass", facts=facts)["warnings"])


def test_refusal_names_backend_sm_error_source_and_alternatives():
    v = ev("flashinfer_trtllm", version="0.5.23", facts=dict(SM120_KVM, cuda_toolkit={"release": "13.0"}))
    msg = compat.format_refusal(v)
    assert v["status"] == "unsupported" and "flashinfer_trtllm" in msg and "sm120" in msg
    assert (
        "no kernels runnable on sm120" in msg
        and "source: https://github.com/flashinfer-ai/flashinfer/blob/v0.7.2/" in msg
    )
    assert "compatible alternatives: auto (-> flashinfer_cutlass)" in msg


# ------------------------------------------------------------------------------ cells the code decides at startup
@pytest.mark.parametrize("quant", ["modelopt_fp8", "w8a8_fp8", "mxfp4"])
@pytest.mark.parametrize("sm", ["sm90", "sm100", "sm120"])
def test_0523_trtllm_routed_asserts_its_quantization(quant, sm):
    # 0.5.23 arg_groups/moe_hook.py:137-148: ServerArgs asserts the quantization before any process spawns
    v = ev("flashinfer_trtllm_routed", quant=quant, version="0.5.23", facts={"sm": sm, "driver_version": "580.1"})
    assert (v["status"], v["stage"]) == ("unsupported", "server_args")
    assert v["error"].startswith(f"AssertionError: Invalid quantization '{quant}'.")
    assert "moe_hook.py#L137-L148" in compat.format_refusal(v)
    fp8 = ev("flashinfer_trtllm_routed", quant="fp8", version="0.5.23", facts={"sm": sm})
    assert not any(r["rule"] == "s23-flashinfer-trtllm-routed-quant" for r in fp8["reasons"])


def test_059_modelopt_fp8_runs_the_triton_runner_whatever_the_backend():
    # 0.5.9 modelopt_quant.py:791-795: ModelOptFp8MoEMethod.create_moe_runner builds TRITON for every backend
    assert (ev("triton", quant="modelopt_fp8")["status"], ev("auto", quant="modelopt_fp8")["effective_backend"]) == (
        "supported",
        "triton",
    )
    v = ev("cutlass", quant="modelopt_fp8", facts=SM90)
    assert (v["status"], v["effective_backend"]) == ("caveat", "triton")
    sm121 = ev("triton", quant="modelopt_fp8", facts={"sm": "sm121", "cuda_toolkit": {"release": "12.9"}})
    assert sm121["status"] == "unsupported" and "sm_121a" in sm121["error"]


def test_0523_allreduce_fusion_fails_at_kernel_warmup_before_the_moe():
    # 0.5.23 model_executor/runner/base_runner.py:257-299: the allreduce workspace is set up at kernel warm-up,
    # after the weights and the KV cache, before flashinfer autotune (where trtllm's cubin check would fail)
    facts = dict(SM120_KVM, cuda_toolkit={"release": "13.0"})
    v = ev("flashinfer_trtllm", version="0.5.23", facts=facts, **{"enable-flashinfer-allreduce-fusion": True})
    assert (v["stage"], v["error"]) == (
        "first_forward",
        "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.",
    )
    assert any("cubin manifest" in (r["error"] or "") for r in v["reasons"])


def test_059_nvfp4_on_sm90_fails_in_the_model_loader_first():
    # 0.5.9 model_loader/loader.py:222-242 with ModelOptFp4Config.get_min_capability() == 100
    v = ev("flashinfer_cutlass", version="0.5.9", facts=SM90)
    assert (v["stage"], v["error"]) == (
        "model_init",
        "ValueError: The quantization method modelopt_fp4 is not supported for the current GPU. "
        "Minimum capability: 100. Current capability: 90.",
    )
    assert "loader.py#L222-L242" in compat.format_refusal(v)


@pytest.mark.parametrize("version", PINNED)
def test_w8a8_fp8_runs_the_triton_runner_whatever_the_backend(version):
    # W8A8FP8MoEMethod.create_moe_runner: MoeRunner(TRITON) (0.5.9 w8a8_fp8.py:283-305, 0.5.23 :282-307)
    facts = {"sm": "sm90", "driver_version": "580.1", "cuda_toolkit": {"release": "13.0"}}
    v = ev("auto", quant="w8a8_fp8", version=version, facts=facts)
    assert (v["status"], v["effective_backend"]) == ("supported", "triton")
    assert ev("triton", quant="w8a8_fp8", version=version, facts=facts)["status"] == "supported"
    # ServerArgs refuses it for flashinfer_cutlass before any process spawns
    assert ev("flashinfer_cutlass", quant="w8a8_fp8", version=version, facts=facts)["stage"] == "server_args"
    if version == "0.5.23":
        hpc = ev("hpc_ops", quant="w8a8_fp8", version=version, facts=facts)
        assert hpc["status"] == "unsupported" and "selected the 'triton' runner" in hpc["error"]
    else:
        cutlass = ev("cutlass", quant="w8a8_fp8", version=version, facts=facts)
        assert (cutlass["status"], cutlass["effective_backend"]) == ("caveat", "triton")


def test_models_and_launch_sections_are_validated():
    broken = copy.deepcopy(KB)
    broken["models"].append({"id": "acme/x", "architecture": "X", "cite": ["no-such-source"]})
    broken["models"].append({"id": "acme/y", "arch": "Y"})
    broken["launch"][0].pop("sglang")
    problems = compat.kb_problems(broken)
    assert any("acme/x" in p and "needs cite" in p for p in problems)
    assert any("needs id and architecture" in p for p in problems)
    assert any(broken["launch"][0]["id"] in p and "both bounds" in p for p in problems)


def test_model_table_and_config_agree_on_dsa():
    assert compat.known_model(KB, "zai-org/GLM-5")["architecture"] == "GlmMoeDsaForCausalLM"
    assert compat.known_model(KB, "/data/hf/lukealonso/GLM-5-NVFP4")["id"] == "lukealonso/GLM-5-NVFP4"
    assert compat.known_model(KB, "GLM-5") is None  # an id needs its organisation
    glm5 = compat.model_facts({"architectures": ["GlmMoeDsaForCausalLM"], "index_topk": 2048})
    assert compat.is_dsa(glm5, "0.5.9") and compat.is_dsa(glm5, "0.5.23")
    # DeepSeek V3 shares the architecture list but has no index_topk: no DSA (model_config.py:54-67)
    assert not compat.is_dsa(compat.model_facts({"architectures": ["DeepseekV3ForCausalLM"]}), "0.5.9")
    # GLM-5 NextN names are DSA only from 0.5.23's list (model_config.py:191-211)
    nextn = compat.model_facts({"architectures": ["GlmMoeDsaForCausalLMNextN"], "index_topk": 2048})
    assert not compat.is_dsa(nextn, "0.5.9") and compat.is_dsa(nextn, "0.5.23")
    assert compat.is_dsa({}, "0.5.9") is None


def test_missing_optional_facts_are_warned_only_where_they_would_matter():
    sm90 = ev("flashinfer_trtllm", quant="fp8", version="0.5.9", facts=SM90)
    assert not any("s9-dsa-nsa-sm12x" in w for w in sm90["warnings"])  # the rule is for SM12x only
    sm120 = ev("flashinfer_cutlass", version="0.5.9")
    assert any("s9-dsa-nsa-sm12x" in w and "model's architecture" in w for w in sm120["warnings"])
    told = compat.evaluate(
        {
            "backend": "flashinfer_cutlass",
            "quantization": "modelopt_fp4",
            "sglang_version": "0.5.9",
            "flags": {
                "attention-backend": "flashinfer",
                "nsa-decode-backend": "trtllm",
                "nsa-prefill-backend": "trtllm",
            },
            "model": "zai-org/GLM-5",
        },
        dict(SM120_KVM, driver_version="570.172.08"),
        KB,
    )
    assert not any(w.startswith("not checked") for w in told["warnings"]), told["warnings"]


@pytest.mark.parametrize("version", PINNED)
def test_rules_see_flags_under_any_spelling_the_parser_accepts(version):
    # --ep and --expert-parallel-size are aliases of --ep-size, `ep-si` an argparse abbreviation of it: the cutlass
    # fp8 ep-size rule applies under each
    for spelling in ("ep-size", "ep", "expert-parallel-size", "ep-si"):
        v = ev("cutlass", quant="fp8", version=version, facts=SM90, **{spelling: 8})
        assert v["status"] == "unsupported" and "ep_size == 1" in v["error"], spelling


def test_megamoe_nvfp4_token_budget_names_the_model_and_follows_the_budget():
    """0.5.23 megamoe with NVFP4 experts: the start-up budget check on SM10x names the model's architecture when the
    point gives the model; the env var or a smaller --chunked-prefill-size lifts it, a larger one trips it on SM90."""
    point = {"backend": "megamoe", "quantization": "modelopt_fp4", "sglang_version": "0.5.23", "flags": {},
             "environment": {}, "model": {"architecture": "GlmMoeDsaForCausalLM", "index_topk": 2048}}
    facts = {"sm": "sm100", "gpu_count": 8, "cuda_toolkit": {"release": "13.0"}}
    v = compat.evaluate(point, facts, KB)
    assert (v["status"], v["stage"]) == ("unsupported", "server_args")
    assert v["error"].startswith("ValueError: GlmMoeDsaForCausalLM with MegaMoE requires ")
    bare = compat.evaluate(dict(point, model=None), facts, KB)
    assert bare["error"].startswith("ValueError: with MegaMoE requires ")
    for lifted in ({"environment": {"SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK": "16384"}},
                   {"flags": {"chunked-prefill-size": "8192"}}):
        v = compat.evaluate(dict(point, **lifted), facts, KB)
        assert (v["status"], v["effective_backend"]) == ("caveat", "megamoe"), lifted
    v = compat.evaluate(dict(point, flags={"chunked-prefill-size": "16384"}), dict(facts, sm="sm90"), KB)
    assert (v["status"], v["stage"]) == ("unsupported", "server_args")
