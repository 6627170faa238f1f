"""compat.evaluate once sglang's own argument handling has spoken (the dry run, module_utils/sglang_dryrun.py): its
refusal decides with sglang's message and line; knowledge-base rules of the stages it got past yield; an undecided
dry run leaves the knowledge base to decide and says so. The answers here are shaped as the program returns them;
the real wheels' answers are in test_sglang_sandbox.py."""

from __future__ import annotations

from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat

KB = compat.load_kb()
SM120 = {"sm": "sm120", "gpu_count": 8}


def point(backend, quant=None, version="0.5.9", **flags):
    return {"backend": backend, "quantization": quant, "sglang_version": version, "flags": flags}


def refused(stage, type_, message, file_, line, **extra):
    return {"verdict": "refused", "stage": stage, "sglang_version": "0.5.9", "where": "controller",
            "gpus": "facts", "error": dict({"type": type_, "message": message, "file": file_, "line": line}, **extra)}


ACCEPTED = {"verdict": "accepted", "sglang_version": "0.5.9", "where": "controller", "gpus": "facts",
            "stages_run": ["arguments", "server_args", "scheduler_init", "model_init"],
            "key_fields": {"moe_runner_backend": "triton", "attention_backend": "flashinfer"}}


def test_a_dry_run_refusal_decides_with_sglangs_message_and_line():
    dry = refused("scheduler_init", "RuntimeError", "CUDA error: invalid device ordinal",
                  "sglang/srt/model_executor/model_runner.py", 734,
                  detail="the node's scheduler processes take GPUs [0, ..., 15]; the process sees 8")
    v = compat.evaluate(point("triton", tp=8, dp=2), SM120, KB, dry_run=dry)
    assert v["status"] == "unsupported" and v["stage"] == "scheduler_init"
    assert v["error"] == "RuntimeError: CUDA error: invalid device ordinal"
    assert v["decided_by"] == "dryrun" and v["reasons"][0]["rule"] == "sglang-dry-run"
    assert "https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/model_executor/model_runner.py#L734" \
        in v["citations"]
    assert v["dry_run"]["error"]["url"].endswith("model_runner.py#L734")
    text = compat.format_refusal(v)
    assert "the launch would fail at scheduler init with: RuntimeError: CUDA error: invalid device ordinal" in text
    assert "the process sees 8" in text


def test_where_both_refuse_at_server_args_sglangs_own_exception_is_the_one_shown():
    message = ("Invalid quantization 'fp8'. \nFlashInfer Cutlass MOE supports only: 'modelopt_fp4', 'modelopt_fp8', "
               "or bfloat16 (None).")
    dry = refused("server_args", "AssertionError", message, "sglang/srt/server_args.py", 2137)
    v = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB, dry_run=dry)
    assert v["status"] == "unsupported" and v["reasons"][0]["rule"] == "sglang-dry-run"
    assert v["error"] == "AssertionError: " + message
    # the knowledge base's copy of the same assert stays, as a second reason
    assert "s9-flashinfer-cutlass-quant" in [r["rule"] for r in v["reasons"]]


def test_a_rule_of_a_stage_the_dry_run_got_past_yields_and_is_named():
    # the knowledge base refuses flashinfer_cutlass + fp8 at server_args; a dry run that got past server_args
    # (here: as if sglang had accepted it) outranks that hand-written rule
    v = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB, dry_run=ACCEPTED)
    assert "s9-flashinfer-cutlass-quant" not in [r["rule"] for r in v["reasons"]]
    assert any("knowledge base rule s9-flashinfer-cutlass-quant expected the launch to fail at server_args" in w
               for w in v["warnings"])
    # a refusal at a later stage is kept: the dry run does not reach the first forward
    later = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB)
    kept = [r["rule"] for r in later["reasons"] if r["stage"] not in ("server_args", None)]
    assert kept and all(r in [x["rule"] for x in v["reasons"]] for r in kept)


def test_an_undecided_dry_run_leaves_the_knowledge_base_to_decide():
    undecided = {"verdict": "undecided", "reason": "the sandbox of sglang 0.5.9 could not be prepared: offline"}
    with_dry = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB, dry_run=undecided)
    alone = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB)
    assert with_dry["status"] == alone["status"] == "unsupported"
    assert [r["rule"] for r in with_dry["reasons"]] == [r["rule"] for r in alone["reasons"]]
    assert any("was not run to the end (the sandbox of sglang 0.5.9 could not be prepared: offline)" in w
               for w in with_dry["warnings"])


def test_auto_takes_the_runner_server_args_resolved_it_to():
    resolved = dict(ACCEPTED, key_fields={"moe_runner_backend": "flashinfer_trtllm"})
    v = compat.evaluate(point("auto", "modelopt_fp4"), {"sm": "sm100", "gpu_count": 8}, KB, dry_run=resolved)
    assert v["backend"] == "auto" and v["effective_backend"] == "flashinfer_trtllm"
    assert v["dry_run"]["resolved"] == {"moe_runner_backend": "flashinfer_trtllm"}


def test_an_unchecked_gpu_count_keeps_the_scheduler_stage_open_and_says_so():
    dry = dict(ACCEPTED, scheduler_init="not checked: the GPU count is not known (the launch takes GPUs [0, 1])")
    v = compat.evaluate(point("triton"), {"sm": "sm120"}, KB, dry_run=dry)
    assert any(w.startswith("the dry run did not check the ranks' GPUs against the host's") for w in v["warnings"])
    assert v["dry_run"]["not_checked"] == [dry["scheduler_init"]]


def test_an_undecided_dry_run_still_decides_the_stages_it_got_through():
    # the sandbox resolved the arguments, then could not build the model's class: ServerArgs spoke, the rest did not
    partial = {"verdict": "undecided", "stage": "model_init", "sglang_version": "0.5.9",
               "stages_run": ["arguments", "server_args", "scheduler_init"],
               "reason": "the sandbox could not build this model's class"}
    v = compat.evaluate(point("flashinfer_cutlass", "fp8"), SM120, KB, dry_run=partial)
    assert "s9-flashinfer-cutlass-quant" not in [r["rule"] for r in v["reasons"]]
    assert any("was not run to the end (the sandbox could not build this model's class)" in w for w in v["warnings"])


def test_without_a_dry_run_the_ranks_gpus_are_checked_from_the_flags():
    v = compat.evaluate(point("triton", tp=8, dp=2), SM120, KB)
    assert v["status"] == "unsupported" and v["stage"] == "scheduler_init" and v["decided_by"] == "launch"
    assert v["error"] == "RuntimeError: CUDA error: invalid device ordinal"
    assert v["reasons"][0]["citation"].endswith("/v0.5.9/python/sglang/srt/model_executor/model_runner.py#L734")
    # dp attention shares the tp group's GPUs; a count the facts do not give is not judged
    assert compat.evaluate(point("triton", tp=8, dp=2, **{"enable-dp-attention": True}), SM120, KB)["status"] != \
        "unsupported"
    assert compat.evaluate(point("triton", tp=16), {"sm": "sm120"}, KB)["stage"] != "scheduler_init"
    # the GPUs a process sees are what CUDA_VISIBLE_DEVICES leaves it
    narrowed = dict(point("triton", tp=4), environment={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert compat.evaluate(narrowed, SM120, KB)["stage"] == "scheduler_init"
    # a dry run that got past the schedulers' start (the real formula on the resolved arguments) outranks it
    assert compat.evaluate(point("triton", tp=8, dp=2), SM120, KB, dry_run=ACCEPTED)["status"] != "unsupported"
