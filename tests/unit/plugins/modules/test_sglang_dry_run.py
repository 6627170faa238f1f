"""sglang_dry_run: the module runs the program with a server venv's interpreter (here a real venv holding the
stand-in sglang of tests/helpers/fake_sglang.py and a torch without CUDA, as a CPU build is), in a private temporary
directory, with a --config file of its own, and answers without failing for a refused launch."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from ansible_collections.moesweep.sweep.plugins.modules import sglang_dry_run as module
from helpers.fake_sglang import write_fake_sglang

CPU_TORCH = "class cuda:\n    @staticmethod\n    def is_available():\n        return False\n\nversion = None\n"
FACTS = {"gpu_count": 2, "sm": "sm90", "gpu_models": ["NVIDIA H200"], "gpus": [{"memory_total_mib": 143771}]}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    rel = sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
    site = write_fake_sglang(Path(rel))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(CPU_TORCH)
    (site / "zmq").mkdir()
    (site / "zmq" / "__init__.py").write_text("")
    return root


def test_a_refused_launch_is_an_answer_not_a_failure(run_module, venv):
    kind, res = run_module(module, {"python": str(venv / "bin" / "python"), "gpu_facts": FACTS,
                                    "argv": ["--model-path", "m", "--moe-runner-backend", "flashinfer_trtllm"]})
    assert kind == "exit" and not res["changed"]
    assert res["verdict"] == "refused" and res["stage"] == "server_args" and res["where"] == "host"
    assert res["error"]["message"] == "flashinfer_trtllm needs SM100, got (9, 0)"
    # a CPU build of torch sees no GPU: the facts answered, and the answer says so
    assert res["gpus"] == "facts"


def test_an_accepted_launch_returns_what_sglang_resolved(run_module, venv):
    kind, res = run_module(module, {"python": str(venv / "bin" / "python"), "gpu_facts": FACTS,
                                    "argv": ["--model-path", "m", "--tp", "2"], "environment": {"A": "1"}})
    assert res["verdict"] == "accepted" and res["resolved"]["attention_backend"] == "fa3"
    assert res["resolved"]["gpu_mem"] == 143771 and res["gpu_ids"] == [0, 1]


def test_its_own_config_file_stands_for_the_secret_one(tmp_path):
    argv = ["--model-path", "m", "--config", "/etc/sglang/sglang.secrets.yaml", "--tp", "2"]
    out = module.with_own_config(argv, ["api-key"], str(tmp_path))
    assert out == ["--model-path", "m", "--config", str(tmp_path / "config.yaml"), "--tp", "2"]
    assert (tmp_path / "config.yaml").read_text() == "api-key: moesweep-dry-run-placeholder\n"
    assert module.with_own_config(["--tp", "2"], ["api-key"], str(tmp_path)) == ["--tp", "2"]


def test_a_missing_interpreter_or_import_is_said_plainly(run_module, venv, tmp_path):
    kind, res = run_module(module, {"python": str(tmp_path / "nope" / "python"), "argv": ["--model-path", "m"]})
    assert kind == "exit" and res["verdict"] == "undecided" and "not an executable interpreter" in res["reason"]
    # a venv without sglang at all is not a stack to judge the launch with: undecided, with the reason
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    kind, res = run_module(module, {"python": str(bare / "bin" / "python"), "argv": ["--model-path", "m"]})
    assert res["verdict"] == "undecided" and res["reason"].startswith("sglang is not importable")
    assert run_module(module, {"python": str(venv / "bin" / "python"), "argv": [], "timeout": 0})[0] == "fail"
