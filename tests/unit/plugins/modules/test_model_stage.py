"""model_stage with the real huggingface_hub client (0.36.2, from the test stack's wheelhouse) against the
simulator's hub: a first stage downloads and records the revision, a second downloads nothing, a disk too small is
refused before any byte moves naming the sizes, a cut download resumes, a corrupted file is fetched again."""

from __future__ import annotations

import json
import os
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
    # one byte flipped in place, the size the same (bit rot, a bad copy): the marker no longer vouches for the file
    # (its mtime moved), so the next stage reads it, finds it is not the hub's and fetches it again
    weights = tmp_path / "model" / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 0xFF]))
    fixed = stage(args, monkeypatch)
    assert not fixed["failed"] and fixed["refetched"] == ["model.safetensors"], fixed
    assert fixed["verified"] == ["model.safetensors"] and fixed["downloaded"] is True
    assert weights.read_bytes() == (repo / "model.safetensors").read_bytes()


def test_a_rerun_reads_only_what_the_marker_no_longer_vouches_for(python, hub, tmp_path, monkeypatch):
    server, url, repo = hub()
    args = {"repo_id": REPO_ID, "local_dir": str(tmp_path / "model"), "python": python, "endpoint": url}
    assert not stage(args, monkeypatch)["failed"]
    gets = len([r for r in server.requests if r[0] == "GET" and "/resolve/" in r[1]])
    quick = stage(args, monkeypatch)
    assert quick["changed"] is False and quick["verified"] == []  # nothing read: size and mtime vouch
    # touched, not changed (a copy back, a restore from backup): read once, found the hub's, nothing fetched, and
    # the marker learns the new mtime so the next stage reads nothing again
    weights = tmp_path / "model" / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    touched = stage(args, monkeypatch)
    assert touched["changed"] is False and touched["verified"] == ["model.safetensors"]
    assert touched["refetched"] == [] and stage(args, monkeypatch)["verified"] == []
    # verify=full reads every LFS file whatever the marker says
    full = stage(dict(args, verify="full"), monkeypatch)
    assert full["changed"] is False and full["verified"] == ["model.safetensors"]
    assert len([r for r in server.requests if r[0] == "GET" and "/resolve/" in r[1]]) == gets  # nothing fetched


def test_a_hub_that_goes_away_mid_download_is_named_and_what_arrived_is_kept(python, hub, tmp_path, monkeypatch):
    # the hub stops listening at the cut: snapshot_download would return the directory as it is (a warning only)
    _server, url, repo = hub(weight_bytes=24 << 20, MOESWEEP_SIM_HUB_CUT_AFTER=str(12 << 20),
                             MOESWEEP_SIM_HUB_DOWN_AFTER_CUT="1")
    args = {"repo_id": REPO_ID, "local_dir": str(tmp_path / "model"), "python": python, "endpoint": url}
    out = stage(args, monkeypatch)
    assert out["failed"] and f"failed for {REPO_ID} 3 times" in out["msg"], out
    assert "the hub could not be reached: " in out["msg"] and "Connection refused" in out["msg"], out["msg"]
    assert "still differ" not in out["msg"]
    partial = list((tmp_path / "model" / ".cache" / "huggingface" / "download").rglob("*.incomplete"))
    assert partial and sum(p.stat().st_size for p in partial) >= 10 << 20
    kept = sum(p.stat().st_size for p in partial)
    assert f"{kept} bytes of unfinished files are kept" in out["msg"]
    # the hub back (another address): the next stage asks only for the rest
    monkeypatch.delenv("MOESWEEP_SIM_HUB_DOWN_AFTER_CUT")
    server, url, _repo = hub(weight_bytes=24 << 20)
    again = stage(dict(args, endpoint=url), monkeypatch)
    assert not again["failed"], again
    assert [r[2] for r in server.requests if r[0] == "GET" and r[1].endswith("model.safetensors")] == [
        f"bytes={10 << 20}-"]


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


def test_what_a_marker_vouches_for():
    files = [{"name": "config.json", "size": 10, "sha256": None}, {"name": "w.safetensors", "size": 100,
                                                                   "sha256": "a" * 64}]
    stats = {"config.json": (10, 5), "w.safetensors": (100, 7)}
    marker = ms.record("o/m", "r" * 40, "/d", files, stats)
    assert marker["files"]["w.safetensors"] == {"size": 100, "sha256": "a" * 64, "mtime_ns": 7}
    assert ms.vouched(marker, "o/m", "r" * 40, files, stats) == {"config.json", "w.safetensors"}
    assert ms.vouched(marker, "o/m", "r" * 40, files, dict(stats, **{"w.safetensors": (100, 8)})) == {"config.json"}
    assert ms.vouched(marker, "o/m", "r" * 40, files, dict(stats, **{"w.safetensors": (99, 7)})) == {"config.json"}
    assert ms.vouched(marker, "o/m", "s" * 40, files, stats) == set()  # another revision
    assert ms.vouched(marker, "o/m", "r" * 40, files[:1], stats) == set()  # another set of files
    # a marker from before mtimes were recorded vouches by size, as it did
    legacy = {"repo_id": "o/m", "revision": "r" * 40, "files": {f["name"]: {"size": f["size"]} for f in files}}
    assert ms.vouched(legacy, "o/m", "r" * 40, files, dict(stats, **{"w.safetensors": (100, 9)})) == {
        "config.json", "w.safetensors"}
