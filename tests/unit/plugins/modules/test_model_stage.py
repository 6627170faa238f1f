"""model_stage with the real huggingface_hub client (0.36.2, from the test stack's wheelhouse) against the
simulator's hub: a first stage downloads and records the revision, a second downloads nothing, a disk too small is
refused before any byte moves naming the sizes, a cut download resumes, a corrupted file is fetched again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import model_stage as ms
from ansible_collections.moesweep.sweep.plugins.modules import model_stage
from helpers.paths import REPO, TARGET_PYTHON

from moesweep.sim import wheelhouse

sys.path.insert(0, str(REPO / "simulator"))
from moesweep_sim import hfhub  # noqa: E402

REPO_ID = "moesweep-sim/tiny-llama"


class Done(Exception):
    pass


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    root = wheelhouse.build(wheelhouse.sim_locks())
    venv = tmp_path_factory.mktemp("stage-client") / "venv"
    subprocess.run([TARGET_PYTHON, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(root / "wheels"),
                    "huggingface_hub==0.36.2"], check=True, timeout=300)
    return str(venv / "bin" / "python")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    servers = []

    def start(weight_bytes=1 << 20, **env):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        root = tmp_path / "hub"
        hfhub.write_tiny_model(root / REPO_ID, REPO / "simulator" / "tokenizer", weight_bytes)
        # a file no server loads: left on the hub
        (root / REPO_ID / "README.md").write_text("# tiny\n")
        servers.append(hfhub.serve(root, "127.0.0.1", 0))
        return servers[-1], f"http://127.0.0.1:{servers[-1].server_address[1]}", root / REPO_ID

    yield start
    for server in servers:
        server.shutdown()


def stage(args, monkeypatch, check_mode=False):
    def exit_json(self, **kwargs):
        raise Done(dict(kwargs, failed=False))

    def fail_json(self, msg, **kwargs):
        raise Done(dict(kwargs, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    with patch_module_args(dict(args, _ansible_check_mode=check_mode)), pytest.raises(Done) as exc:
        model_stage.main()
    return exc.value.args[0]


def test_stages_once_records_the_revision_and_a_rerun_downloads_nothing(python, hub, tmp_path, monkeypatch):
    server, url, repo = hub()
    args = {"repo_id": REPO_ID, "local_dir": str(tmp_path / "model"), "python": python, "endpoint": url,
            "token": "hf_secret_never_logged"}
    first = stage(args, monkeypatch)
    assert not first["failed"], first
    assert first["changed"] is True and first["downloaded"] is True and first["files"] == 5
    assert first["revision"] == hfhub.commit_hash(hfhub.repo_files(repo))
    assert not (tmp_path / "model" / "README.md").exists() and (tmp_path / "model" / "model.safetensors").exists()
    marker = json.loads((tmp_path / "model" / ms.MARKER).read_text())
    assert marker["revision"] == first["revision"] and marker["local_path"] == str(tmp_path / "model")
    assert "hf_secret_never_logged" not in json.dumps(first)
    gets = len([r for r in server.requests if r[0] == "GET" and "/resolve/" in r[1]])
    second = stage(args, monkeypatch)
    assert second["changed"] is False and second["downloaded"] is False and second["revision"] == first["revision"]
    assert len([r for r in server.requests if r[0] == "GET" and "/resolve/" in r[1]]) == gets  # nothing fetched


def test_a_disk_too_small_is_refused_before_any_download_naming_the_sizes(python, hub, tmp_path, monkeypatch):
    server, url, _repo = hub()
    args = {"repo_id": REPO_ID, "local_dir": str(tmp_path / "model"), "python": python, "endpoint": url,
            "reserve_bytes": 1 << 60}
    out = stage(args, monkeypatch)
    assert out["failed"] and "staging refused" in out["msg"] and "in 5 files" in out["msg"] and " free" in out["msg"]
    assert not [r for r in server.requests if "/resolve/" in r[1]]  # not a byte moved
    assert not (tmp_path / "model").exists()


def test_a_cut_download_resumes_and_a_corrupted_file_is_fetched_again(python, hub, tmp_path, monkeypatch):
    server, url, repo = hub(weight_bytes=24 << 20, MOESWEEP_SIM_HUB_CUT_AFTER=str(12 << 20))
    args = {"repo_id": REPO_ID, "local_dir": str(tmp_path / "model"), "python": python, "endpoint": url}
    again = stage(args, monkeypatch)
    # the cut surfaces in the first client run, the next one resumes it within the same stage
    assert not again["failed"] and len(again["interrupted"]) == 1, again
    assert "ChunkedEncodingError" in again["interrupted"][0], again
    assert [r[2] for r in server.requests if r[0] == "GET" and r[1].endswith("model.safetensors") and r[2]] == [
        f"bytes={10 << 20}-"]
    # a copy that no longer matches (bit rot, a bad mirror): the next stage finds it and fetches it again
    (tmp_path / "model" / ms.MARKER).unlink()
    data = bytearray((tmp_path / "model" / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (tmp_path / "model" / "model.safetensors").write_bytes(bytes(data))
    fixed = stage(args, monkeypatch)
    assert not fixed["failed"] and fixed["refetched"] == ["model.safetensors"], fixed
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == (repo / "model.safetensors").read_bytes()


def test_pure_decisions():
    files = [{"name": "config.json", "size": 10, "sha256": None},
             {"name": "model-00001-of-00002.safetensors", "size": 100, "sha256": "a" * 64},
             {"name": "pytorch_model.bin", "size": 100, "sha256": "b" * 64},
             {"name": "README.md", "size": 5, "sha256": None}]
    assert [f["name"] for f in ms.wanted(files)] == ["config.json", "model-00001-of-00002.safetensors"]
    assert [f["name"] for f in ms.wanted(files[2:])] == ["pytorch_model.bin"]
    assert ms.space_problem(files[:2], {}, 1000, 0, "/d") is None
    assert "110 B to download" in ms.space_problem(files[:2], {}, 50, 0, "/d")
    assert ms.space_problem(files[:2], {"model-00001-of-00002.safetensors": 100}, 20, 0, "/d") is None
    assert ms.mismatches(files[:2], {"config.json": (10, None), "model-00001-of-00002.safetensors": (100, "c" * 64)}) \
        == [("model-00001-of-00002.safetensors", "sha256 " + "c" * 64 + ", the hub lists " + "a" * 64)]
