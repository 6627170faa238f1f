"""sglang_bench_check reads, on the host, what a benchmark needs before its server restarts: a client venv with
sglang's bench_serving, a local tokenizer (given, the model directory, or the Hugging Face cache), a local dataset;
each missing one fails naming the fix, and a complete host passes naming the tokenizer it found."""

from __future__ import annotations

import os
import sys
import sysconfig

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.modules import sglang_bench_check


@pytest.fixture
def client(tmp_path):
    """A client interpreter as the check sees it: it answers the purelib query (``sysconfig``) with a directory
    that holds sglang/bench_serving.py."""
    purelib = tmp_path / "purelib"
    (purelib / "sglang").mkdir(parents=True)
    (purelib / "sglang" / "bench_serving.py").write_text("")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho {purelib}\n")
    python.chmod(0o755)
    return python


def test_a_host_with_client_and_model_directory_passes_naming_the_tokenizer(run_module, client, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    kind, res = run_module(sglang_bench_check, {"client_python": str(client), "model_path": str(model)})
    assert kind == "exit" and res["changed"] is False
    assert res["tokenizer"] == {"path": str(model), "found_in": "the model directory"}


def test_a_wrong_tokenizer_path_fails_naming_it(run_module, client, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": str(client), "tokenizer": str(tmp_path / "nope"),
                                                "model_path": "org/model"})
    assert kind == "fail"
    assert f"tokenizer directory {tmp_path / 'nope'} does not exist" in res["msg"]
    assert "the client never downloads one" in res["msg"]


def test_a_repo_id_not_in_the_cache_fails_naming_where_it_looked(run_module, client, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": str(client), "model_path": "org/model",
                                                "hf_home": str(tmp_path / "hf")})
    assert kind == "fail" and "org/model is not in the Hugging Face cache" in res["msg"]
    assert str(tmp_path / "hf" / "hub" / "models--org--model" / "snapshots") in res["msg"]


def test_a_missing_client_fails_naming_the_fix(run_module, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": str(tmp_path / "none"), "model_path": str(tmp_path)})
    assert kind == "fail" and "does not exist: provision the host with site.yml" in res["msg"]


def test_a_client_without_sglang_fails_naming_the_file_it_looked_for(run_module, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": sys.executable, "model_path": str(tmp_path)})
    if os.path.isfile(os.path.join(sysconfig.get_paths()["purelib"], "sglang", "bench_serving.py")):
        pytest.skip("this interpreter has sglang")
    assert kind == "fail" and "has no sglang (no " in res["msg"] and "bench_serving.py" in res["msg"]


def test_a_dataset_other_than_random_ids_needs_a_local_file(run_module, client, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": str(client), "model_path": str(tmp_path),
                                                "dataset_name": "sharegpt", "dataset_path": str(tmp_path / "x.json")})
    assert kind == "fail" and "dataset sharegpt needs a local dataset_path" in res["msg"]


def test_check_mode_checks_the_same(run_module, client, tmp_path):
    kind, res = run_module(sglang_bench_check, {"client_python": str(client), "tokenizer": str(tmp_path / "nope"),
                                                "_ansible_check_mode": True})
    assert kind == "fail" and "does not exist" in res["msg"]
