"""The controller's sandbox of the pinned sglang wheels (plugins/plugin_utils/sglang_sandbox.py) and, through it,
the real argument handling of sglang 0.5.9 and 0.5.23 on launch lines whose outcome is traced in their code.

The sandbox is prepared once per version and interpreter in ~/.cache/moesweep/dryrun (a download of the pinned
wheel and transformers' stack from PyPI, hash-checked against the stack locks); a machine that cannot reach PyPI
skips the real-wheel tests, saying so."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, preflight, sglang_sandbox
from helpers.paths import REPO

RTX_PRO_6000_X8 = {"gpu_count": 8, "sm": "sm120", "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
                   "gpus": [{"memory_total_mib": 97887}] * 8}
H100_X8 = {"gpu_count": 8, "sm": "sm90", "gpu_models": ["NVIDIA H100 80GB HBM3"], "gpus": [{"memory_total_mib": 81559}]}


def test_each_serving_version_has_its_complete_stack_lock():
    path, header, pins = sglang_sandbox.stack_lock("0.5.9")
    assert path.name == "cu128-sglang-0.5.9.txt" and header["complete"] and pins["transformers"][0] == "4.57.1"
    assert sglang_sandbox.stack_lock("0.5.23")[0].name == "cu130-sglang-0.5.23.txt"
    with pytest.raises(sglang_sandbox.SandboxError, match="no complete stack lock pins sglang 0.5.15"):
        sglang_sandbox.stack_lock("0.5.15")
    assert sglang_sandbox.cuda_of_stack("cu128-sglang-0.5.9") == "12.8"
    assert sglang_sandbox.cuda_of_stack("cu130-sglang-0.5.23") == "13.0"
    assert sglang_sandbox.cuda_of_stack("test-cpu-sglang-0.5.9") is None


def test_import_names_of_distributions():
    assert sglang_sandbox.import_names("pyzmq") == ["zmq"]
    assert sglang_sandbox.import_names("sglang-kernel") == ["sgl_kernel"]
    assert sglang_sandbox.import_names("partial-json-parser") == ["partial_json_parser"]
    assert sglang_sandbox.import_names("nvidia-cublas-cu12") == ["nvidia"]


def test_known_models_are_the_published_configs_in_data_models():
    ids = sglang_sandbox.known_model_ids()
    assert {"zai-org/GLM-5", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-30B-A3B"} <= set(ids)
    for model_id in ids:
        config = json.loads((REPO / "data" / "models" / model_id / "config.json").read_text())
        assert config["architectures"], model_id
    assert sglang_sandbox.known_model_dir("acme/unknown") is None
    assert sglang_sandbox.known_model_dir("/models/local") is None


def test_a_dry_run_that_cannot_run_says_why_without_running():
    never = lambda *a, **k: pytest.fail("ran")  # noqa: E731
    ans = sglang_sandbox.dry_run_point("0.5.9", ["--model-path", "acme/unknown"], {}, RTX_PRO_6000_X8, run_fn=never)
    assert ans["verdict"] == "undecided" and not ans["ran"] and "config.json is not on the controller" in ans["reason"]
    ans = sglang_sandbox.dry_run_point("0.5.9", ["--model-path", "Qwen/Qwen3-30B-A3B"], {}, {}, run_fn=never)
    assert "no GPU count and SM" in ans["reason"]
    assert "no sglang version" in sglang_sandbox.dry_run_point(None, [], {}, {}, run_fn=never)["reason"]


def test_the_model_files_and_assumed_memory_reach_the_run():
    seen = {}

    def fake_run(version, argv, environment, gpus, model_config=None, model_files=None):
        seen.update(version=version, argv=argv, gpus=gpus, files=model_files)
        return {"verdict": "accepted"}

    ans = sglang_sandbox.dry_run_point("0.5.9", ["--tp", "8"], {}, {"sm": "sm120", "gpu_count": 8},
                                       model="Qwen/Qwen3-30B-A3B", run_fn=fake_run)
    assert ans["ran"] and seen["argv"] == ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8"]
    assert seen["files"] == REPO / "data" / "models" / "Qwen" / "Qwen3-30B-A3B"
    assert seen["gpus"]["memory_total_mib"] == 97887 and "assumed 97887 MiB" in ans["assumptions"][0]


# ---- the real wheels ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandboxes():
    ready = {}
    for version in ("0.5.9", "0.5.23"):
        try:
            ready[version] = sglang_sandbox.prepare(version)
        except (sglang_sandbox.SandboxError, subprocess.SubprocessError, OSError) as exc:
            if "pip download failed" in str(exc) or "pip install failed" in str(exc):
                pytest.skip(f"the pinned wheels cannot be fetched here ({str(exc)[:200]})")
            raise
    return ready


# (name, version, facts, server argv, verdict, stage, what sglang's own error says, where it comes from)
CELLS = [
    # _handle_moe_kernel_config's assert on --quantization (v0.5.9 python/sglang/srt/server_args.py:2136-2145)
    ("059-flashinfer-cutlass-fp8", "0.5.9", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B-FP8", "--tp", "8", "--moe-runner-backend", "flashinfer_cutlass",
      "--quantization", "fp8"],
     "refused", "server_args", "Invalid quantization 'fp8'", "sglang/srt/server_args.py"),
    # ... which reads the flag, not the model: the same FP8 model without --quantization gets past it (and runs its
    # config's fp8 method, which the answer names: test_the_models_own_quantization_is_named)
    ("059-flashinfer-cutlass-fp8-model-only", "0.5.9", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B-FP8", "--tp", "8", "--moe-runner-backend", "flashinfer_cutlass"],
     "accepted", None, None, None),
    # 16 scheduler processes on 8 GPUs: the ninth's torch.cuda.set_device (v0.5.9 model_runner.py:734)
    ("059-tp8-dp2-on-8-gpus", "0.5.9", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--dp", "2"],
     "refused", "scheduler_init", "invalid device ordinal", "sglang/srt/model_executor/model_runner.py"),
    ("059-tp4-dp2-on-8-gpus", "0.5.9", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "4", "--dp", "2"], "accepted", None, None, None),
    # the pinned transformers 4.57.1 has no glm_moe_dsa; sglang's get_config re-raises AutoConfig's ValueError
    # (v0.5.9 srt/utils/hf_transformers_utils.py:313-323; the same traceback: github.com/zai-org/GLM-5/issues/22)
    ("059-glm5-pinned-transformers", "0.5.9", RTX_PRO_6000_X8, ["--model-path", "zai-org/GLM-5", "--tp", "8"],
     "refused", "server_args", "model type `glm_moe_dsa` but Transformers does not recognize",
     "sglang/srt/utils/hf_transformers_utils.py"),
    # 0.5.23 --moe-runner-backend flashinfer_cutedsl needs an NVFP4 model (srt/arg_groups/moe_hook.py)
    ("0523-cutedsl-bf16", "0.5.23", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--moe-runner-backend", "flashinfer_cutedsl"],
     "refused", "server_args", "FlashInfer CuteDSL MOE currently supports only", "sglang/srt/arg_groups/moe_hook.py"),
    ("0523-tp8-dp2-on-8-gpus", "0.5.23", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--dp", "2"],
     "refused", "scheduler_init", "invalid device ordinal", "sglang/srt/distributed/bootstrap.py"),
    # the loader's capability gate, after the weights' download and before they load (v0.5.9
    # srt/model_loader/loader.py:222-240): ModelOpt NVFP4 needs SM100
    ("059-nvfp4-on-sm90", "0.5.9", H100_X8,
     ["--model-path", "nvidia/DeepSeek-V3-0324-NVFP4", "--tp", "8", "--quantization", "modelopt_fp4"],
     "refused", "model_init", "Minimum capability: 100. Current capability: 90.", "sglang/srt/model_loader/loader.py"),
    # the attention backends' gates, after the KV pool (v0.5.9 srt/layers/attention/attention_registry.py:126-139,
    # 155-161; v0.5.23 the same file, :238-262)
    ("059-fa3-on-sm120", "0.5.9", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--attention-backend", "fa3"],
     "refused", "attention_init", "FlashAttention v3 Backend requires SM>=80 and SM<=90",
     "sglang/srt/layers/attention/attention_registry.py"),
    ("059-fa3-on-sm90", "0.5.9", H100_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--attention-backend", "fa3"], "accepted", None, None, None),
    ("0523-fa3-on-sm120", "0.5.23", RTX_PRO_6000_X8,
     ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8", "--attention-backend", "fa3"],
     "refused", "attention_init", "FlashAttention v3 Backend requires SM>=80 and SM<=90",
     "sglang/srt/layers/attention/attention_registry.py"),
    ("059-trtllm-mha-on-an-mla-model", "0.5.9", {"gpu_count": 8, "sm": "sm100"},
     ["--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--attention-backend", "trtllm_mha"],
     "refused", "attention_init", "trtllm_mha backend can only be used with non-MLA models",
     "sglang/srt/layers/attention/attention_registry.py"),
]


@pytest.mark.parametrize("name,version,facts,argv,verdict,stage,message,source", CELLS, ids=[c[0] for c in CELLS])
def test_real_argument_handling(sandboxes, name, version, facts, argv, verdict, stage, message, source):
    ans = sglang_sandbox.dry_run_point(version, argv, {}, facts)
    assert ans["verdict"] == verdict, ans.get("error") or ans.get("reason")
    assert ans.get("stage") == stage
    if verdict == "refused":
        assert message in ans["error"]["message"] and ans["error"]["file"] == source


def test_what_sglang_resolved_for_dsa_models_on_sm120(sandboxes):
    # 0.5.9: DeepSeek V3.2 on Blackwell gets the nsa backends, an FP8 KV cache and 64-token pages
    # (v0.5.9 srt/server_args.py _handle_model_specific_adjustments, 1197-1240)
    ans = sglang_sandbox.dry_run_point("0.5.9", ["--model-path", "deepseek-ai/DeepSeek-V3.2", "--tp", "8"], {},
                                       RTX_PRO_6000_X8)
    assert ans["verdict"] == "accepted"
    assert {k: ans["key_fields"][k] for k in ("attention_backend", "kv_cache_dtype", "page_size")} == {
        "attention_backend": "nsa", "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
    # 0.5.23 knows GLM-5 (transformers 5.19): the dsa backend, FP8 KV on SM12x
    ans = sglang_sandbox.dry_run_point("0.5.23", ["--model-path", "zai-org/GLM-5", "--tp", "8"], {}, RTX_PRO_6000_X8)
    assert ans["verdict"] == "accepted" and ans["key_fields"]["attention_backend"] == "dsa"
    assert ans["key_fields"]["kv_cache_dtype"] == "fp8_e4m3" and ans["key_fields"]["page_size"] == 64
    # dp attention asked without data parallelism is switched off, silently, as sglang does
    ans = sglang_sandbox.dry_run_point("0.5.9", ["--model-path", "Qwen/Qwen3-30B-A3B", "--tp", "8",
                                                 "--enable-dp-attention"], {}, H100_X8)
    assert ans["verdict"] == "accepted" and ans["key_fields"]["enable_dp_attention"] is False


def test_the_models_own_quantization_is_named(sandboxes):
    argv = ["--model-path", "Qwen/Qwen3-30B-A3B-FP8", "--tp", "8", "--moe-runner-backend", "flashinfer_cutlass"]
    ans = sglang_sandbox.dry_run_point("0.5.9", argv, {}, RTX_PRO_6000_X8)
    assert ans["model_quantization"] == "fp8" and ans["quantization_gate"].startswith("passed")
    # the knowledge base then judges the runner with the fp8 the model brings, not as unquantized
    verdict = compat.evaluate({"backend": "flashinfer_cutlass", "sglang_version": "0.5.9", "flags": {}},
                              RTX_PRO_6000_X8, compat.load_kb(), dry_run=ans)
    assert verdict["quantization"] == "fp8"


def test_moesweep_check_and_the_sweeps_preflight_give_one_verdict(sandboxes, capsys):
    from moesweep import cli

    rc = cli.main(["check", "--sm", "120", "--gpus", "8", "--backend", "triton", "--sglang-version", "0.5.9",
                   "--flag", "model-path=Qwen/Qwen3-30B-A3B", "--flag", "tp=8", "--flag", "dp=2", "--json"])
    checked = json.loads(capsys.readouterr().out)
    result, failed = preflight.run_preflight({
        "backend": "triton", "sglang_version": "0.5.9", "gpu_facts": {"sm": "sm120", "gpu_count": 8},
        "flags": {"model-path": "Qwen/Qwen3-30B-A3B", "tp-size": 8, "dp-size": 2}})
    assert rc == 1 and failed
    assert checked["status"] == result["verdict"] == "unsupported"
    assert checked["stage"] == "scheduler_init" and checked["error"].startswith("RuntimeError: CUDA error: invalid")
    assert result["dry_run"]["stage"] == checked["dry_run"]["stage"] == "scheduler_init"
    assert result["dry_run"]["error"]["url"] == checked["dry_run"]["error"]["url"]
    # the record keeps what sglang resolved (here the ranks' layout it got to)
    assert result["dry_run"]["resolved"]["dp_size"] == 2


def test_the_sandbox_leaves_the_controllers_python_alone(sandboxes):
    probe = "import importlib.util as u; print(u.find_spec('sglang') is None, u.find_spec('transformers') is None)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "True"  # sglang is never installed on the controller
    assert compat.dry_run_summary(None) is None


def test_the_set_device_lines_the_knowledge_base_cites_are_the_wheels(sandboxes):
    # compat.SET_DEVICE_LINES (cited where no dry run ran) against the line the dry run finds in each wheel
    for version, (rel, line) in compat.SET_DEVICE_LINES.items():
        src = sglang_sandbox.cache_root() / "dryrun" / f"sglang-{version}-py{sandboxes[version]['python']}" / "src"
        text = (src / rel).read_text().splitlines()[line - 1]
        assert ".set_device(" in text and "gpu_id" in text, (version, text)
