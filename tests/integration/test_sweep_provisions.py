"""After only `moesweep sim up`, the user's exact `ansible-playbook sweep.yml -e backend=flashinfer_cutedsl`
provisions the host (site.yml's roles, from the wheelhouse `sim up` serves on the host's link, named by the
inventory it wrote), stages the model from the hub `sim up` serves there (a tiny stand-in of the default model-path),
then records a benchmarked point whose record holds the model's revision and local path; a second run provisions
and downloads nothing. A model dir on a disk too small refuses the point before any byte moves, recorded. The
staging module itself on the host: an interrupted download resumes, a corrupted file is fetched again. -e
provision=false skips the provisioning look altogether.

A cluster of its own (1 host), booted bare for this module: the first run installs the test stack (minutes)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from conftest import wait_for

from moesweep.runner import run_ansible
from moesweep.sim import hub
from moesweep.sim.presets import SIM_FAST, SIM_RATES, SMALL_BENCH

pytestmark = pytest.mark.hosts

REPO_ID = "lukealonso/GLM-5-NVFP4"
MODEL_DIR = "/var/lib/sglang/models/" + REPO_ID


@pytest.fixture(scope="module")
def bare(sim_clusters, tmp_path_factory):
    cluster = sim_clusters("bare", hosts=1)
    results = tmp_path_factory.mktemp("bare-results")
    # only what makes the run short on 2 cores: the simulator's speed and small benchmark levels
    settings = results / "settings.json"
    settings.write_text(json.dumps({"sglang_server_extra_environment": {**SIM_FAST, **SIM_RATES},
                                    "results_dir": str(results), **SMALL_BENCH}))
    return cluster, settings, results


def test_the_users_command_provisions_a_bare_host_then_records_a_point(bare):
    cluster, settings, results = bare
    host = cluster.names[0]
    inventory = cluster.inventory.read_text()
    assert "sglang_env_index_url: http://10.213." in inventory and ":8701/simple/" in inventory
    assert cluster.sh(host, "test -e /etc/moesweep/provenance.json").returncode != 0  # bare
    first = cluster.playbook("sweep.yml", "-e", "backend=flashinfer_cutedsl", "-e", f"@{settings}", check=False)
    assert first.returncode == 0, first.stdout[-6000:]
    assert "PLAY [Provision GPU hosts]" in first.stdout and "Start the locked installs" in first.stdout
    provenance = json.loads(cluster.sh(host, "cat /etc/moesweep/provenance.json").stdout)
    assert provenance["stack"] == "test-cpu-sglang-0.5.9" and provenance["index_url"].endswith(":8701/simple/")
    points = [json.loads(line) for f in results.glob("*/points.jsonl") for line in f.read_text().splitlines()]
    point = [r for r in points if r.get("kind") == "point" and r["point"] == "flashinfer_cutedsl"][-1]
    assert point["status"] == "passed" and point["benchmark"]["levels"], point["status"]
    assert point["provenance"]["stack"] == "test-cpu-sglang-0.5.9"
    assert {c["name"] for c in point["facts"]["host_checks"]} >= {"p2p", "shm", "driver_cuda"}
    # the model: staged from the simulated hub once, served from its local copy with the hub out of the unit's way
    assert "TASK [Stage the model on the host before its first point, lukealonso/GLM-5-NVFP4]" in first.stdout
    assert "TASK [Wait for the model's staging job, reporting its progress, lukealonso/GLM-5-NVFP4]" in first.stdout
    model = point["model"]
    assert model["repo_id"] == "lukealonso/GLM-5-NVFP4" and re.fullmatch(r"[0-9a-f]{40}", model["revision"])
    assert model["local_path"] == MODEL_DIR and model["downloaded"] is True
    assert point["launch"]["flags"]["model-path"] == MODEL_DIR
    assert point["launch"]["environment"]["HF_HUB_OFFLINE"] == "1"
    staged = json.loads(cluster.sh(host, f"cat {MODEL_DIR}/.moesweep-staged.json").stdout)
    assert staged["revision"] == model["revision"] and "model.safetensors" in staged["files"]

    # rerun: the point runs again (not skipped as passed), and finds the revision staged and verified
    second = cluster.playbook("sweep.yml", "-e", "backend=flashinfer_cutedsl", "-e", f"@{settings}", "-e",
                              "rerun=true", check=False)
    assert second.returncode == 0, second.stdout[-6000:]
    assert "Start the locked installs" not in second.stdout and "Create the venvs" not in second.stdout
    assert "skipping: no hosts matched" in second.stdout  # the provisioning play has no host left
    points = [json.loads(line) for f in results.glob("*/points.jsonl") for line in f.read_text().splitlines()]
    again = [r for r in points if r.get("kind") == "point" and r["point"] == "flashinfer_cutedsl"][-1]
    assert again["status"] == "passed" and again["model"]["downloaded"] is False, again["model"]
    assert again["model"]["revision"] == model["revision"]


def test_a_disk_too_small_for_the_model_refuses_the_point_before_any_byte_moves(bare):
    cluster, settings, results = bare
    host = cluster.names[0]
    small = "/var/lib/sglang/models-small"
    run = cluster.playbook("sweep.yml", "-e", "backend=flashinfer_cutedsl", "-e", f"@{settings}", "-e",
                           f"sweep_model_dir={small}", "-e", f"model_stage_reserve_bytes={1 << 60}", check=False)
    assert run.returncode != 0  # the sweep says which point did not pass
    assert "PLAY RECAP" in run.stdout and "flashinfer_cutedsl refused" in run.stdout, run.stdout[-6000:]
    points = [json.loads(line) for f in results.glob("*/points.jsonl") for line in f.read_text().splitlines()]
    refused = [r for r in points if r.get("kind") == "point" and r["point"] == "flashinfer_cutedsl"][-1]
    assert refused["status"] == "refused" and "staging refused" in refused["failed_msg"], refused["failed_msg"]
    assert "kept free for the JIT caches need" in refused["failed_msg"] and " free" in refused["failed_msg"]
    assert refused["model"]["local_path"] == small + "/lukealonso/GLM-5-NVFP4"
    assert cluster.sh(host, f"test -e {small}").returncode != 0  # nothing was created, nothing downloaded


def _stage(cluster, host, url, dest):
    out = run_ansible("ansible", "-i", str(cluster.inventory), host, "-m", "moesweep.sweep.model_stage", "-a",
                      json.dumps({"repo_id": REPO_ID, "local_dir": dest, "endpoint": url, "reserve_bytes": 0,
                                  "python": "/opt/moesweep/venvs/client/bin/python"}), check=False)
    return out, yaml.safe_load(out.stdout.split("=>", 1)[1])  # the default callback's YAML result


@contextlib.contextmanager
def _knob_hub(gateway, knobs):
    """A second hub on the host's link serving the same repository with a fault knob (the one `sim up` serves
    has none)."""
    proc = subprocess.Popen([sys.executable, "-m", "moesweep_sim.hfhub", "serve", "--root", str(hub.root()),
                             "--bind", gateway, "--port", "0"], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(hub.SIMULATOR), **knobs))
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_staging_module_resumes_a_cut_download_and_fetches_a_corrupted_file_again(bare):
    cluster, _settings, _results = bare
    host = cluster.names[0]
    gateway = cluster.hosts[0].gateway
    served = hub.root() / REPO_ID / "model.safetensors"
    want = hashlib.sha256(served.read_bytes()).hexdigest()

    # the first GET of the weights ends after 64 KiB: the client resumes it (Range) within the same stage
    with _knob_hub(gateway, {"MOESWEEP_SIM_HUB_CUT_AFTER": "65536"}) as url:
        out, result = _stage(cluster, host, url, "/var/tmp/stage-cut")
    assert out.returncode == 0 and result["downloaded"] is True, out.stdout[-3000:]
    assert len(result["interrupted"]) == 1, result  # one client run broke off, the next resumed it
    assert cluster.sh(host, "sha256sum /var/tmp/stage-cut/model.safetensors").stdout.split()[0] == want

    # a hub that serves the weights with a flipped byte: caught by the LFS sha256, fetched again once, then refused
    # naming the file; the same stage from the good hub fetches it again and verifies
    with _knob_hub(gateway, {"MOESWEEP_SIM_HUB_CORRUPT": "model.safetensors"}) as url:
        out, result = _stage(cluster, host, url, "/var/tmp/stage-corrupt")
    assert out.returncode != 0 and result["refetched"] == ["model.safetensors"], out.stdout[-3000:]
    assert "model.safetensors (sha256" in result["msg"] and "still differ from the hub" in result["msg"]
    out, result = _stage(cluster, host, cluster.hosts[0].extra["hub_url"], "/var/tmp/stage-corrupt")
    assert out.returncode == 0 and result["downloaded"] is True, out.stdout[-3000:]
    assert cluster.sh(host, "sha256sum /var/tmp/stage-corrupt/model.safetensors").stdout.split()[0] == want


def test_the_staging_wait_reports_a_slow_downloads_progress_then_a_rerun_finishes_at_its_first_poll(bare, tmp_path):
    cluster, _settings, _results = bare
    host = cluster.names[0]
    dest = "/var/tmp/stage-slow"
    play = tmp_path / "stage.yml"
    play.write_text(yaml.safe_dump([{"hosts": host, "gather_facts": False, "tasks": [
        {"name": "Stage as an async job", "moesweep.sweep.model_stage": {
            "repo_id": REPO_ID, "local_dir": dest, "endpoint": "{{ url }}", "reserve_bytes": 0,
            "python": "/opt/moesweep/venvs/client/bin/python"},
         "async": 600, "poll": 0, "changed_when": False, "register": "job"},
        {"name": "Wait for the staging job", "moesweep.sweep.model_stage_wait": {
            "results_file": "{{ job.results_file }}", "local_dir": dest, "wait": "{{ wait | default(1) }}"},
         "register": "staged", "until": "staged.finished", "retries": 120, "delay": 0},
    ]}]))
    # the weights (1 MiB, LFS) at 128 KiB/s: about 8 s of download, a progress line a second
    with _knob_hub(cluster.hosts[0].gateway, {"MOESWEEP_SIM_HUB_RATE": str(128 << 10)}) as url:
        first = cluster.playbook(str(play), "-e", f"url={url}", check=False)
        assert first.returncode == 0, first.stdout[-4000:]
        lines = [ln for ln in first.stdout.splitlines() if ln.startswith(f"{host}: {REPO_ID}: ")]
        assert lines and all(" of 1.1 MB, " in ln for ln in lines), first.stdout[-4000:]
        assert "FAILED - RETRYING" not in first.stdout
        assert re.search(rf"changed: \[{re.escape(host)}\]", first.stdout.split("TASK [Wait for the staging job]")[1])
        # a re-run with the model staged (the sweep's poll of 10 s): the job ends at the first poll, nothing changed
        again = cluster.playbook(str(play), "-e", f"url={url}", "-e", "wait=30", check=False)
    assert again.returncode == 0, again.stdout[-4000:]
    assert not [ln for ln in again.stdout.splitlines() if ln.startswith(f"{host}: ")], again.stdout[-2000:]
    assert re.search(r"changed=0 ", again.stdout), again.stdout[-2000:]
    assert cluster.sh(host, f"test -e {dest}/.moesweep-stage-plan.json").returncode != 0  # the marker records it


def test_a_stop_during_staging_ends_the_download_at_the_next_poll_and_keeps_its_bytes(bare, tmp_path):
    # the sweep's stop file (what Ctrl-C, SIGTERM or the API create) appears while the weights arrive: the wait's
    # next poll ends the job's processes and the task fails as a stop
    cluster, _settings, _results = bare
    host = cluster.names[0]
    dest = "/var/tmp/stage-stopped"
    stop = tmp_path / "stop"
    play = tmp_path / "stage.yml"
    wait = {"results_file": "{{ job.results_file }}", "local_dir": dest, "wait": 1}
    play.write_text(yaml.safe_dump([{"hosts": host, "gather_facts": False, "tasks": [
        {"name": "Stage as an async job", "moesweep.sweep.model_stage": {
            "repo_id": REPO_ID, "local_dir": dest, "endpoint": "{{ url }}", "reserve_bytes": 0,
            "python": "/opt/moesweep/venvs/client/bin/python"},
         "async": 600, "poll": 0, "changed_when": False, "register": "job"},
        {"name": "Wait until bytes arrive", "moesweep.sweep.model_stage_wait": wait, "register": "staged",
         "until": "staged.finished or (staged.progress.bytes_done | default(0, true)) > 0", "retries": 60,
         "delay": 0},
        {"name": "Ask the stop", "delegate_to": "localhost", "ansible.builtin.file": {"path": str(stop),
                                                                                       "state": "touch"}},
        {"name": "Wait with the sweep's stop file", "moesweep.sweep.model_stage_wait": dict(wait, stop_file=str(stop)),
         "register": "stopped", "until": "stopped.finished", "retries": 60, "delay": 0, "ignore_errors": True},
        {"name": "Keep its result", "delegate_to": "localhost", "ansible.builtin.copy": {
            "content": "{{ stopped | to_json }}", "dest": str(tmp_path / "stopped.json"), "mode": "0600"}},
    ]}]))
    # the weights (1 MiB) at 64 KiB/s: about 16 s of download, stopped within the first few
    with _knob_hub(cluster.hosts[0].gateway, {"MOESWEEP_SIM_HUB_RATE": str(64 << 10)}) as url:
        out = cluster.playbook(str(play), "-e", f"url={url}", check=False)
    assert out.returncode == 0, out.stdout[-4000:]  # the stop's failure is the one ignored
    shown = json.loads((tmp_path / "stopped.json").read_text())
    assert shown["failed"] is True and shown["moesweep_stop"] is True, shown
    assert "the sweep was asked to stop" in shown["msg"] and "kept" in shown["msg"], shown["msg"]
    assert shown["downloaded"] is False and shown["repo_id"] == REPO_ID
    # the job's processes are gone; async_wrapper's watcher, outside the job's group, notices at its next check (5 s)
    def left():
        return cluster.sh(host, "pgrep -af '[m]odel_stage|[s]napshot_download|[A]nsiballZ' || true").stdout.strip()
    try:
        wait_for(lambda: not left(), timeout=20, what="the staging job's processes to end")
    except AssertionError:
        raise AssertionError(left()) from None
    # the weights never finished; what the client had written of them stays for the next stage (it writes in 10 MB
    # chunks: of the stand-in's 1 MiB nothing yet, test_model_stage.py keeps 10 MiB of a 24 MiB file)
    assert cluster.sh(host, f"test -e {dest}/model.safetensors").returncode != 0


def test_a_hub_that_goes_away_is_named_and_a_byte_flipped_in_place_is_fetched_again(bare):
    cluster, _settings, _results = bare
    host = cluster.names[0]
    dest = "/var/tmp/stage-down"
    want = hashlib.sha256((hub.root() / REPO_ID / "model.safetensors").read_bytes()).hexdigest()
    # the hub stops listening after 64 KiB of the weights: the stage fails naming the client's error, not as files
    # that "still differ". (The client writes what it receives in 10 MB chunks: of the stand-in's 1 MiB nothing is
    # kept; the unit test cuts a 24 MiB file after 12 and resumes from the 10 kept.)
    with _knob_hub(cluster.hosts[0].gateway, {"MOESWEEP_SIM_HUB_CUT_AFTER": "65536",
                                              "MOESWEEP_SIM_HUB_DOWN_AFTER_CUT": "1"}) as url:
        out, result = _stage(cluster, host, url, dest)
    assert out.returncode != 0, out.stdout[-3000:]
    assert "the hub could not be reached: " in result["msg"], result["msg"]
    assert "still differ" not in result["msg"], result["msg"]
    # the hub back: the stage finishes
    out, result = _stage(cluster, host, cluster.hosts[0].extra["hub_url"], dest)
    assert out.returncode == 0 and result["downloaded"] is True, out.stdout[-3000:]
    # one byte flipped in place at the same size: the re-run reads what the marker no longer vouches for (its mtime
    # moved), finds it is not the hub's and fetches it again; untouched, a re-run reads nothing
    flip = ("f = open('model.safetensors', 'r+b'); f.seek(100); b = f.read(1); f.seek(100); "
            "f.write(bytes([b[0] ^ 255])); f.close()")
    cluster.sh(host, f'cd {dest} && /opt/moesweep/venvs/client/bin/python -c "{flip}"', check=True)
    out, result = _stage(cluster, host, cluster.hosts[0].extra["hub_url"], dest)
    assert out.returncode == 0 and result["refetched"] == ["model.safetensors"], out.stdout[-3000:]
    assert cluster.sh(host, f"sha256sum {dest}/model.safetensors").stdout.split()[0] == want
    out, result = _stage(cluster, host, cluster.hosts[0].extra["hub_url"], dest)
    assert out.returncode == 0 and result["verified"] == [] and result["changed"] is False, result
