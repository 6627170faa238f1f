"""Which names and values are secret, and the redaction every writer applies."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import secrets


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "sglang_server_api_key",
                                  "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "NGC_API_KEY", "sglang_server_hf_token",
                                  "vault_password", "GITHUB_AUTH"])
def test_secret_names(name):
    assert secrets.is_secret_name(name)


@pytest.mark.parametrize("name", ["NCCL_P2P_LEVEL", "max_new_tokens", "output_tokens", "tokenizer", "CUDA_HOME",
                                  "joules_per_token_mean", "OMP_NUM_THREADS", "author"])
def test_public_names(name):
    assert not secrets.is_secret_name(name)


def test_redact_keeps_figures_and_removes_known_and_looking_secrets():
    rec = {"extravars": {"sglang_server_hf_token": "hf_abcdefghijklmnopqrstuvwx", "backend": "triton"},
           "joules_per_token": 1.5, "log": "using token hf_abcdefghijklmnopqrstuvwxyz1 and key s3cr3tvalue",
           "argv": ["--api-key", "s3cr3tvalue"]}
    out = secrets.redact(rec, known=["s3cr3tvalue"])
    assert out["extravars"]["sglang_server_hf_token"] == secrets.REDACTED and out["extravars"]["backend"] == "triton"
    assert out["joules_per_token"] == 1.5
    assert "hf_abc" not in out["log"] and "s3cr3tvalue" not in out["log"] and out["argv"][1] == secrets.REDACTED


def test_split():
    env = {"HF_TOKEN": "x", "NCCL_DEBUG": "WARN"}
    assert secrets.secret_items(env) == {"HF_TOKEN": "x"} and secrets.public_items(env) == {"NCCL_DEBUG": "WARN"}
