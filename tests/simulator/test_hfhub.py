"""The simulator's Hugging Face-compatible hub against the real huggingface_hub client (0.36.2, the test stack's
pin, installed from the test stack's wheelhouse into a venv of its own): snapshot_download of the tiny model, the
metadata the hub gives (commit, LFS sha256 and sizes), a resumed download after a cut, a corrupted file whose
sha256 no longer matches, and the hub's errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.paths import REPO, TARGET_PYTHON

from moesweep.sim import wheelhouse

sys.path.insert(0, str(REPO / "simulator"))
from moesweep_sim import hfhub  # noqa: E402

REPO_ID = "moesweep-sim/tiny-llama"
CLIENT = r"""
import json, sys
from huggingface_hub import HfApi, snapshot_download
endpoint, local = sys.argv[1], sys.argv[2]
out = {}
try:
    out["dir"] = snapshot_download(sys.argv[3], local_dir=local, endpoint=endpoint)
    info = HfApi(endpoint=endpoint).model_info(sys.argv[3], files_metadata=True)
    out["sha"] = info.sha
    out["files"] = {s.rfilename: {"size": s.size, "sha256": s.lfs.sha256 if s.lfs else None} for s in info.siblings}
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = wheelhouse.build(wheelhouse.sim_locks())
    venv = tmp_path_factory.mktemp("hf-client") / "venv"
    subprocess.run([TARGET_PYTHON, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(root / "wheels"),
                    "huggingface_hub==0.36.2"], check=True, timeout=300)
    return venv / "bin" / "python"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    def start(weight_bytes=1 << 20, **env):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        root = tmp_path / "hub"
        hfhub.write_tiny_model(root / REPO_ID, REPO / "simulator" / "tokenizer", weight_bytes)
        server = hfhub.serve(root, "127.0.0.1", 0)
        return server, f"http://127.0.0.1:{server.server_address[1]}", root / REPO_ID

    servers = []
    yield lambda **env: servers.append(start(**env)) or servers[-1]
    for server, _url, _root in servers:
        server.shutdown()


def download(client, url, local, repo_id=REPO_ID):
    env = dict(os.environ, HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(local.parent / "hf-home"),
               HF_HUB_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.run([str(client), "-c", CLIENT, url, str(local), repo_id], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_snapshot_download_of_the_tiny_model(client, hub, tmp_path):
    server, url, repo = hub()
    out = download(client, url, tmp_path / "model")
    assert "error" not in out, out
    files = out["files"]
    assert set(files) == {".gitattributes", "config.json", "model.safetensors", "special_tokens_map.json",
                          "tokenizer.json", "tokenizer_config.json"}
    assert files["model.safetensors"]["sha256"] == sha256(repo / "model.safetensors")  # LFS: sha256 known
    assert files["config.json"]["sha256"] is None  # a regular file
    assert len(out["sha"]) == 40 and out["sha"] == hfhub.commit_hash(hfhub.repo_files(repo))
    for name in files:
        assert (tmp_path / "model" / name).read_bytes() == (repo / name).read_bytes()
    # the client asked the documented endpoints: the revision's info, then HEAD and GET of each file
    paths = [(m, p.split("?")[0]) for m, p, _r in server.requests]
    assert ("GET", f"/api/models/{REPO_ID}/revision/main") in paths
    assert ("HEAD", f"/{REPO_ID}/resolve/{out['sha']}/model.safetensors") in paths
    assert ("GET", f"/{REPO_ID}/resolve/{out['sha']}/model.safetensors") in paths


def test_a_cut_download_resumes_with_a_range_request(client, hub, tmp_path):
    """huggingface_hub writes in 10 MiB chunks (constants.DOWNLOAD_CHUNK_SIZE) and gives up on a broken body
    (ChunkedEncodingError is not one of the errors http_get retries): the next run resumes from the .incomplete
    file's 10 MiB with `Range: bytes=10485760-`."""
    server, url, repo = hub(weight_bytes=24 << 20, MOESWEEP_SIM_HUB_CUT_AFTER=str(12 << 20))
    first = download(client, url, tmp_path / "model")
    assert "ChunkedEncodingError" in first.get("error", ""), first
    out = download(client, url, tmp_path / "model")
    assert "error" not in out, out
    assert sha256(tmp_path / "model" / "model.safetensors") == sha256(repo / "model.safetensors")
    ranges = [r for m, p, r in server.requests if m == "GET" and p.endswith("model.safetensors") and r]
    assert ranges == [f"bytes={10 << 20}-"], [r for r in server.requests if "safetensors" in r[1]]


def test_a_corrupted_file_no_longer_matches_its_lfs_sha256(client, hub, tmp_path):
    server, url, repo = hub(MOESWEEP_SIM_HUB_CORRUPT="model.safetensors")
    out = download(client, url, tmp_path / "model")
    assert "error" not in out, out
    # the client itself does not hash what it downloaded: whoever stages the model must compare
    assert sha256(tmp_path / "model" / "model.safetensors") != out["files"]["model.safetensors"]["sha256"]


def test_unknown_repo_and_revision_are_the_hubs_errors(client, hub, tmp_path):
    _server, url, _repo = hub()
    out = download(client, url, tmp_path / "missing", repo_id="moesweep-sim/nothing-here")
    assert out["error"].startswith("RepositoryNotFoundError"), out


def test_a_slow_hub_serves_lfs_bodies_at_about_its_rate(hub):
    """MOESWEEP_SIM_HUB_RATE: a download long enough to watch model_stage_wait report its progress."""
    import time
    import urllib.request

    _server, url, repo = hub(weight_bytes=1 << 20, MOESWEEP_SIM_HUB_RATE=str(4 << 20))
    sha = json.loads(urllib.request.urlopen(f"{url}/api/models/{REPO_ID}").read())["sha"]
    t0 = time.monotonic()
    body = urllib.request.urlopen(f"{url}/{REPO_ID}/resolve/{sha}/model.safetensors").read()
    took = time.monotonic() - t0
    assert body == (repo / "model.safetensors").read_bytes()
    assert 0.2 <= took < 5, took  # 1 MiB at 4 MiB/s
    t0 = time.monotonic()
    urllib.request.urlopen(f"{url}/{REPO_ID}/resolve/{sha}/config.json").read()  # not LFS: at once
    assert time.monotonic() - t0 < 0.2
