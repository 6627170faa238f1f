"""``moesweep check``: the preflight's evaluator from the controller."""

from __future__ import annotations

import json

import pytest
from helpers.paths import FIXTURES, REPO

from moesweep import cli

SMI = FIXTURES / "nvidia-smi"
PUB = SMI / "public"


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


# ---- nonsense is a clear error naming the fix (exit 2), before anything is evaluated --------------


def run_err(capsys, *argv):
    rc = cli.main(["check", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--sm", "999"], "--sm 999: sm999 is not the compute capability of any NVIDIA GPU"),
        (["--sm", ""], "--sm is empty: give the host's compute capability, e.g. --sm 120"),
        (["--sm", "   "], "--sm is empty"),
        (["--sm", "12.7"], "sm127 is not the compute capability of any NVIDIA GPU"),
        (["--sm", "120", "--gpus", "-3"], "--gpus -3: a GPU count is 1 or more"),
        (["--sm", "120", "--gpus", "0"], "--gpus 0: a GPU count is 1 or more"),
        (["--sm", "120", "--sglang-version", "9.9.9"], "--sglang-version '9.9.9': no flag schema for it"),
        (["--sm", "120", "--flag", "tp-size=8"], "--flag needs --sglang-version"),
        (["--sm", "120", "--sglang-version", "0.5.9", "--flag", "=8"], "--flag '=8': expected NAME or NAME=VALUE"),
        (["--sm", "120", "--cuda-version", "twelve"], "--cuda-version 'twelve': expected a release like 12.8"),
        (["--sm", "120", "--kb", "/nonexistent/compat.yml"], "--kb /nonexistent/compat.yml: cannot read it"),
    ],
)
def test_bad_arguments_exit_2_naming_the_fix(capsys, argv, message):
    rc, out, err = run_err(capsys, "--backend", "triton", *argv)
    assert rc == 2 and out == ""
    assert err.startswith("moesweep check: ") and message in err
    assert "Traceback" not in err


def test_sglang_version_message_lists_the_schemas_there_are(capsys):
    _, _, err = run_err(capsys, "--backend", "triton", "--sm", "120", "--sglang-version", "9.9.9")
    assert "(have: 0.5.9, 0.5.15, 0.5.23)" in err and "scripts/extract_sglang_flags.py" in err


@pytest.mark.parametrize(
    "content,message",
    [
        (b"\x7fELF\x02\x01\x01\x00\xff\xfe\xfd" * 50, "not a text file"),
        (b"rules: [unclosed\n", "not valid YAML at line"),
        (b"- just\n- a list\n", "moesweep knowledge base"),
        (b"backends: {}\n", "moesweep knowledge base"),
    ],
)
def test_bad_kb_exits_2(capsys, tmp_path, content, message):
    kb = tmp_path / "kb.yml"
    kb.write_bytes(content)
    rc, _, err = run_err(capsys, "--backend", "triton", "--sm", "120", "--kb", str(kb))
    assert rc == 2 and message in err and "Traceback" not in err


def test_bad_facts_file_exits_2(capsys, tmp_path):
    bad = tmp_path / "facts.json"
    bad.write_text("{not json")
    rc, _, err = run_err(capsys, "--backend", "triton", "--facts", str(bad))
    assert rc == 2 and "not JSON" in err
    bad.write_text("[1, 2]")
    rc, _, err = run_err(capsys, "--backend", "triton", "--facts", str(bad))
    assert rc == 2 and "not gpu_facts output" in err


def test_choices_are_argparse_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "--backend", "triton", "--interconnect", "infiniband"])
    assert exc.value.code == 2 and "invalid choice: 'infiniband'" in capsys.readouterr().err


def test_a_good_kb_still_works_and_the_smallest_valid_sm(capsys, tmp_path):
    rc, out = run(capsys, "--sm", "12.0", "--backend", "flashinfer_cutlass", "--kb", str(REPO / "data" / "compat.yml"))
    assert rc == 0 and "on sm120" in out
    assert "no --sglang-version" in out


# ---- --nvidia-smi: the preflight on a pasted nvidia-smi ------------------------------------------


def test_nvidia_smi_table_b200_r610(capsys):
    rc, out = run(
        capsys,
        "--nvidia-smi",
        str(PUB / "table-610-b200-sglang-27487.txt"),
        "--backend",
        "flashinfer_trtllm",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
    )
    lines = out.splitlines()
    assert rc == 0
    assert lines[0].endswith("2 x NVIDIA B200, sm100, interconnect not shown, driver 610.43.02")
    # the verdict itself is the knowledge base's; what the file gave the evaluator is sm100
    assert lines[1].endswith("--moe-runner-backend flashinfer_trtllm (runs flashinfer_trtllm) on sm100")


def test_nvidia_smi_truncated_rtx_pro_6000_refuses_trtllm(capsys):
    rc, out = run(
        capsys,
        "--nvidia-smi",
        str(SMI / "rtx-pro-6000" / "nvidia-smi-570.172.08.txt"),
        "--backend",
        "flashinfer_trtllm",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
        "--json",
    )
    verdict = json.loads(out)
    assert rc == 1 and verdict["status"] == "unsupported" and verdict["sm"] == "sm120"
    assert verdict["facts"]["gpu_models"] == ["NVIDIA RTX PRO 6000 Blac..."]
    assert "flashinfer_cutlass" in [alt["backend"] for alt in verdict["alternatives"]]


def test_nvidia_smi_table_and_topo_give_pcie_advice_in_a_vm(capsys):
    rc, out = run(
        capsys,
        "--nvidia-smi",
        str(PUB / "table-550-h100-gpu-burn-114.txt"),
        str(PUB / "topo-mp-pcie-only-prompt-deepep-60.txt"),
        "--virt",
        "vm",
        "--backend",
        "triton",
        "--sglang-version",
        "0.5.9",
        "--json",
    )
    verdict = json.loads(out)
    assert rc == 0 and verdict["facts"]["interconnect"] == "pcie-sys" and verdict["facts"]["gpu_count"] == 8
    assert verdict["advice"]["env"].get("NCCL_P2P_LEVEL") == "PHB"
    assert any(w.startswith("nvidia-smi output: compute capability known for 2 of 8") for w in verdict["warnings"])


def test_nvidia_smi_passthrough_xml_is_a_vm(capsys):
    rc, out = run(
        capsys,
        "--nvidia-smi",
        str(SMI / "h200-x1-device" / "nvidia-smi-q-x.xml"),
        "--backend",
        "flashinfer_trtllm",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
        "--json",
    )
    verdict = json.loads(out)
    assert verdict["facts"]["virtualization"] == {"kind": "vm"} and verdict["sm"] == "sm90"
    assert rc == 1 and verdict["status"] == "unsupported"


def test_nvidia_smi_without_compute_capability_asks_for_sm(capsys):
    path = str(PUB / "table-580-a800-hami-1903.txt")
    rc, _, err = run_err(capsys, "--nvidia-smi", path, "--backend", "triton")
    assert rc == 2 and "does not establish the compute capability (NVIDIA A800 80GB PCIe" in err
    assert "add --sm" in err
    rc, out = run(capsys, "--nvidia-smi", path, "--sm", "80", "--backend", "triton", "--sglang-version", "0.5.9")
    assert rc == 0 and "on sm80" in out


def test_nvidia_smi_driver_failure_exits_3(capsys):
    path = str(SMI / "driver-failure" / "nvml-version-mismatch.txt")
    rc, out, err = run_err(capsys, "--nvidia-smi", path, "--backend", "triton")
    assert rc == 3 and out == ""
    assert "driver is not usable: Failed to initialize NVML: Driver/library version mismatch" in err


def test_nvidia_smi_unreadable_and_exclusive_with_facts(capsys, tmp_path):
    rc, _, err = run_err(capsys, "--nvidia-smi", str(REPO / "README.md"), "--backend", "triton")
    assert rc == 2 and "no nvidia-smi output found" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", "--nvidia-smi", "a", "--facts", "b", "--backend", "triton"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    "version,sm,cuda,first_line",
    [
        # 0.5.9: ModelOptNvFp4FusedMoEMethod refuses non-Blackwell GPUs for every backend (no marlin choice)
        ("0.5.9", "90", "12.8", "sweep point refused: --moe-runner-backend auto on sm90"),
        # 0.5.9: auto stays auto off SM100 and NVFP4 experts run sgl-kernel cutlass_moe_fp4
        ("0.5.9", "120", "12.8", "supported: --moe-runner-backend auto (runs cutlass) on sm120"),
        ("0.5.23", "90", "13.0", "supported: --moe-runner-backend auto (runs marlin) on sm90"),
        ("0.5.23", "120", "13.0", "supported: --moe-runner-backend auto (runs flashinfer_cutlass) on sm120"),
    ],
)
def test_auto_nvfp4_verdict_per_version_follows_the_code(capsys, version, sm, cuda, first_line):
    rc, out = run(
        capsys,
        "--sm",
        sm,
        "--backend",
        "auto",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        version,
        "--cuda-version",
        cuda,
    )
    assert out.splitlines()[0].startswith(first_line)
    assert rc == (1 if first_line.startswith("sweep point refused") else 0)
    if rc:
        assert "Please use Blackwell and above." in out and "marlin" not in out
        assert "Minimum capability: 100. Current capability: 90." in out  # the loader's check comes first


# ---- the verdicts of issue #30, each against the wheel line that decides it ------------------------------
BLOCK_FP8_SM120 = ("--sm", "120", "--backend", "auto", "--quantization", "fp8", "--sglang-version", "0.5.9")


def test_059_block_fp8_on_sm120_refused_until_a_dense_gemm_backend_is_named(capsys):
    # 0.5.9 layers/deep_gemm_wrapper/configurer.py:9-25 enables DeepGEMM on SM >= 90; fp8_utils.py:254-272 sends
    # dense block-FP8 GEMMs to it under --fp8-gemm-backend auto; sgl-kernel 0.3.21's DeepGEMM is SM90/SM100 only
    rc, out = run(capsys, *BLOCK_FP8_SM120)
    assert rc == 1 and "s9-fp8-gemm-deepgemm-sm12x" in out
    assert "Unsupported architecture or scaling factor types" in out and "fp8_utils.py#L254-L272" in out
    assert "another --moe-runner-backend does not avoid this failure" in out
    for fix in ("triton", "cutlass"):
        rc, out = run(capsys, *BLOCK_FP8_SM120, "--flag", f"fp8-gemm-backend={fix}")
        assert rc == 0 and out.startswith("supported: --moe-runner-backend auto (runs triton)"), out
    # SGLANG_ENABLE_JIT_DEEPGEMM=0 alone is no fix: auto then takes flashinfer's trtllm groupwise GEMM
    # (fp8_utils.py:254-272), whose requirement admits capability 100/103 only (flashinfer gemm_base.py:3190)
    rc, out = run(capsys, *BLOCK_FP8_SM120, "--flag", "fp8-gemm-backend=flashinfer_trtllm")
    assert rc == 1 and "gemm_fp8_nt_groupwise does not support backend 'trtllm' with capability 120" in out


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_tp_abbreviation_accepted_on_both_versions(capsys, version):
    # both real parsers accept `--tp 8` (argparse allow_abbrev; the schema probe tp_abbrev exits 0)
    rc, out = run(
        capsys,
        "--sm",
        "100",
        "--backend",
        "flashinfer_trtllm",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        version,
        "--cuda-version",
        "13.0",
        "--flag",
        "tp=8",
        "--json",
    )
    verdict = json.loads(out)
    assert rc == 0 and verdict["status"] == "supported", verdict["reasons"]
    assert not any(r["rule"] == "flag-schema" for r in verdict["reasons"])


def test_ambiguous_prefix_refused_as_the_real_parser_refuses_it(capsys):
    rc, out = run(
        capsys, "--sm", "100", "--backend", "triton", "--sglang-version", "0.5.23", "--flag", "cuda-graph-max-bs=64"
    )
    assert rc == 1
    assert (
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
        in out
    )


def test_0523_against_an_r570_driver_is_refused_with_the_fix(capsys):
    # 0.5.23's torch 2.14.1 is a CUDA 13.0 build; CUDA 13.x needs R580+ (NVIDIA CUDA minor-version compatibility)
    smi = SMI / "rtx-pro-6000" / "nvidia-smi-570.172.08.txt"
    rc, out = run(
        capsys,
        "--nvidia-smi",
        str(smi),
        "--backend",
        "flashinfer_cutlass",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.23",
    )
    assert rc == 1 and "driver 570.172.08" in out and "s23-driver-cuda13" in out
    assert "The NVIDIA driver on your system is too old (found version 12080)" in out
    assert "upgrade the host's driver to R580+" in out and "minor-version-compatibility" in out
    rc, out = run(
        capsys,
        "--sm",
        "120",
        "--driver",
        "580.95.05",
        "--backend",
        "flashinfer_cutlass",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.23",
        "--cuda-version",
        "13.0",
    )
    assert rc == 0 and "s23-driver-cuda13" not in out
    rc, out = run(
        capsys,
        "--sm",
        "120",
        "--driver",
        "570",
        "--backend",
        "flashinfer_cutlass",
        "--quantization",
        "modelopt_fp4",
        "--sglang-version",
        "0.5.9",
        "--cuda-version",
        "12.9",
    )
    assert rc == 0 and "driver" not in out.split("\n")[0]
    rc, out = run(capsys, "--sm", "120", "--backend", "triton", "--sglang-version", "0.5.23")
    assert rc == 0 and "not checked, for lack of the NVIDIA driver version" in out and "s23-driver-cuda13" in out


def test_bad_driver_is_bad_input(capsys):
    assert cli.main(["check", "--sm", "120", "--backend", "triton", "--driver", "R570"]) == 2
    assert "--driver 'R570': expected an NVIDIA driver version" in capsys.readouterr().err


# The knowledge base's attention rules alone (--no-dry-run): past sglang's argument handling, which the dry run of the
# pinned wheel decides (tests/unit/plugins/plugin_utils/test_sglang_sandbox.py), and which on 0.5.9 stops GLM-5
# earlier, at the pinned transformers' AutoConfig.
GLM5_SM120 = (
    "--sm",
    "120",
    "--backend",
    "flashinfer_cutlass",
    "--quantization",
    "modelopt_fp4",
    "--sglang-version",
    "0.5.9",
    "--cuda-version",
    "12.9",
    "--no-dry-run",
)


def test_glm5_on_sm120_059_needs_attention_backend_flashinfer(capsys, tmp_path):
    # 0.5.9 server_args.py:1197-1213 gives a DSA model (configs/model_config.py:54-67) `nsa` when no attention
    # backend is set; nsa's indexer runs DeepGEMM MQA logits (nsa_indexer.py:374-435), SM90/SM100 only there
    rc, out = run(capsys, *GLM5_SM120, "--model", "zai-org/GLM-5")
    assert rc == 1 and "s9-dsa-nsa-sm12x" in out and "--attention-backend flashinfer" in out
    assert "server_args.py#L1197-L1213" in out
    rc, out = run(
        capsys,
        *GLM5_SM120,
        "--model",
        "zai-org/GLM-5",
        "--flag",
        "attention-backend=flashinfer",
        "--flag",
        "nsa-decode-backend=trtllm",
        "--flag",
        "nsa-prefill-backend=trtllm",
    )
    assert rc == 0 and "s9-dsa" not in out
    # the same from the model's own config.json; without the nsa trtllm flags the KV layout is a caveat
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["GlmMoeDsaForCausalLM"], "index_topk": 2048}))
    rc, out = run(capsys, *GLM5_SM120, "--model-config", str(config))
    assert rc == 1 and "s9-dsa-nsa-sm12x" in out
    rc, out = run(capsys, *GLM5_SM120, "--model-config", str(config), "--flag", "attention-backend=flashinfer")
    assert rc == 0 and "s9-dsa-flashinfer-nsa-kv-layout" in out
    # a DeepSeek V3 (no index_topk: no DSA) and an unknown model are not refused; the latter is warned about
    assert run(capsys, *GLM5_SM120, "--model", "deepseek-ai/DeepSeek-V3")[0] == 0
    rc, out = run(capsys, *GLM5_SM120)
    assert rc == 0 and "not checked, for lack of the model's architecture" in out


def test_model_inputs_are_checked(capsys, tmp_path):
    assert cli.main(["check", *GLM5_SM120, "--model", "acme/unknown"]) == 2
    err = capsys.readouterr().err
    assert "not in the knowledge base's model table" in err and "zai-org/GLM-5" in err and "--model-config" in err
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "x"}')
    assert cli.main(["check", *GLM5_SM120, "--model-config", str(bad)]) == 2
    assert "no `architectures` list" in capsys.readouterr().err


# ---- --nvidia-smi: the host checks on pasted outputs -----------------------------------------------------------


HC = FIXTURES / "host_checks"


def test_nvidia_smi_pastes_get_the_host_checks_verdicts(capsys):
    """Real pastes of each kind (a -q of a power-capped card, a -p2p rw matrix after a grub line, lspci's ACSCtl
    redirecting, NCCL's SHM lines): the host checks' verdicts, evidence and fixes, the undecided ones named; a
    host check that fails would refuse the point (exit 1), a warning does not."""
    rc, out = run(capsys, "--nvidia-smi", str(HC / "q-power-capped-500-of-700-stackhpc-975.txt"),
                  str(HC / "grub-iommu-pt-then-topo-p2p-rw-gns-ns-4gpu-aikitoria-43.txt"),
                  str(HC / "lspci-acsctl-tabs-redirect-nccl-629.txt"),
                  str(FIXTURES / "nccl" / "shm-8gpu-nccl-1817.txt"),
                  "--sm", "120", "--backend", "triton", "--sglang-version", "0.5.9", "--json")
    verdict = json.loads(out)
    checks = {c["name"]: c for c in verdict["host_checks"]}
    assert rc == 0 and verdict["status"] != "unsupported"
    assert checks["power_cap"]["verdict"] == "warn" and "500 W of 700 W default" in checks["power_cap"]["evidence"]
    assert checks["p2p"]["verdict"] == "warn" and checks["acs_iommu"]["verdict"] == "warn"
    assert checks["nccl_transport"]["verdict"] == "warn" and "setpci" in checks["acs_iommu"]["fix"]
    assert {u["name"] for u in verdict["host_checks_undecided"]} >= {"driver_cuda", "shm", "numa"}
    rc, out = run(capsys, "--nvidia-smi", str(HC / "dmesg-xid79-nvsentinel-155.txt"),
                  str(PUB / "table-610-b200-sglang-27487.txt"), "--backend", "triton", "--sglang-version", "0.5.9")
    assert rc == 1 and "  fail  gpu_errors: 1 Xid line(s)" in out and "fix: reset the GPU" in out


def test_nvidia_smi_host_checks_print_even_when_the_preflight_needs_sm(capsys):
    paste = HC / "lspci-lnksta-x1-downgraded-quadro-rtx8000-pi-geerlingguy-480.txt"
    rc, out, err = run_err(capsys, "--nvidia-smi", str(paste), "--backend", "triton")
    assert rc == 2 and "add --sm" in err
    assert "  warn  pcie_link: downtrained PCIe link" in out


def test_the_compatibility_tables_in_docs_are_current(tmp_path, capsys):
    # docs/compatibility.md is `moesweep check --table` at this commit: regenerate it after changing the knowledge base
    out = tmp_path / "compatibility.md"
    assert cli.main(["check", "--table", "--out", str(out)]) == 0
    committed = (REPO / "docs" / "compatibility.md").read_text()
    assert out.read_text() == committed, "docs/compatibility.md is stale: run moesweep check --table --out " \
                                         "docs/compatibility.md"
    # what a cell says, read back: 0.5.9 flashinfer_trtllm on an SM120 dies at the first forward, by its rule
    assert "| flashinfer_trtllm | no at first_forward [s9-trtllm-sm10x-only] |" in committed
    assert "- `s9-trtllm-sm10x-only` (unsupported):" in committed and "Sources: <https://github.com/" in committed


def test_table_input_errors(capsys, tmp_path):
    assert cli.main(["check", "--table", "--sglang-version", "0.5.15"]) == 2
    assert "the knowledge base audits 0.5.9, 0.5.23" in capsys.readouterr().err
    assert cli.main(["check", "--sm", "120"]) == 2
    assert "--backend is required" in capsys.readouterr().err
    assert cli.main(["check", "--table", "--sglang-version", "0.5.23"]) == 0
    text = capsys.readouterr().out
    assert "## sglang 0.5.23" in text and "## sglang 0.5.9" not in text
    assert cli.main(["check", "--table", "--out", str(tmp_path / "no" / "such" / "dir.md")]) == 2
