"""interconnect_facts: the module's whole path on this machine - the GPUs checked with (recorded) nvidia-smi output,
the measuring program run under the unit's NCCL environment (the simulator's stand-in, or a stub that records what
it was given), its table parsed, the model's config found."""

from __future__ import annotations

import json
import os
import sys

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
from ansible_collections.moesweep.sweep.plugins.modules import interconnect_facts
from helpers.paths import FIXTURES, REPO

DEVICE = FIXTURES / "nvidia-smi" / "h200-x1-device"
SIM = REPO / "simulator" / "bin" / "allreduce-perf-sim"


def fake_smi(tmp_path, apps_csv):
    """An nvidia-smi that answers the compute-apps query with a recorded output (and the memory query plainly)."""
    data = tmp_path / "apps.csv"
    data.write_text(apps_csv)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncase \"$1\" in --query-compute-apps*) cat {data} ;; *) echo '0, 3' ;; esac\n")
    smi.chmod(0o755)
    return str(smi)


@pytest.fixture
def sim_profile(tmp_path, monkeypatch):
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"gpu_model": "rtx-pro-6000", "gpu_count": 8}))
    monkeypatch.setenv("MOESWEEP_SIM_PROFILE", str(prof))
    monkeypatch.setenv("MOESWEEP_SIM_TIME_SCALE", "0")
    monkeypatch.delenv("MOESWEEP_SIM_INTERCONNECT", raising=False)


@pytest.fixture
def run(run_module):
    """(kind, result) of the module through the shared harness."""
    return lambda args: run_module(interconnect_facts, args)


def test_measures_with_the_simulated_program_and_reads_the_model(tmp_path, sim_profile, run):
    args = {"ngpus": 8, "command": [sys.executable, str(SIM)], "nvidia_smi_path": fake_smi(
        tmp_path, (DEVICE / "compute-apps-idle.csv").read_text()),
        "environment": {"NCCL_P2P_LEVEL": "PHB", "NCCL_IB_DISABLE": "1", "OMP_NUM_THREADS": "8"},
        "model_config": str(REPO / "simulator" / "models" / "glm-5-nvfp4" / "config.json")}
    kind, r = run(args)
    assert kind == "exit", r
    m = r["interconnect"]
    assert r["changed"] is False and r["ansible_facts"]["moesweep_interconnect"] == m
    assert m["ranks"] == 8 and m["rows"][0]["size"] == 4096 and m["rows"][-1]["size"] == 256 << 20
    assert m["nccl_environment"] == {"NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "PHB"}
    assert m["environment_text"] == "NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=PHB" and len(m["key"]) == 12
    assert m["model"]["layers"] == 78 and m["model"]["hidden_size"] == 6144 and m["model_error"] is None
    assert m["p2p"] and not any(p["access"] for p in m["p2p"]) and m["elapsed"] < 30


@pytest.mark.parametrize("p2p_read, transport, changes", [
    ("NS", "SHM", "default P2P level PXB"),
    ("OK", "P2P/IPC", None),
])
def test_nccl_states_the_transport_of_every_pair_it_connected(tmp_path, monkeypatch, run, p2p_read, transport,
                                                              changes):
    """The simulated 8x RTX PRO 6000 VM (P2P "NS"): the measurement runs with NCCL's INFO lines on, and the simulated
    NCCL names SHM between every pair it connects; with P2P on (the knob p2p_read=OK) P2P/IPC, since sglang's
    NCCL_CUMEM_ENABLE=0 reaches the program. NCCL's lines stay out of the table's output."""
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"gpu_model": "rtx-pro-6000", "gpu_count": 8, "p2p_read": p2p_read}))
    monkeypatch.setenv("MOESWEEP_SIM_PROFILE", str(prof))
    monkeypatch.setenv("MOESWEEP_SIM_TIME_SCALE", "0")
    monkeypatch.delenv("MOESWEEP_SIM_INTERCONNECT", raising=False)
    args = {"ngpus": 8, "command": [sys.executable, str(SIM)], "max_bytes": 65536, "nvidia_smi_path": fake_smi(
        tmp_path, (DEVICE / "compute-apps-idle.csv").read_text())}
    kind, r = run(args)
    assert kind == "exit", r
    m = r["interconnect"]
    t = m["transport"]
    assert t["found"] and t["nccl_version"] == "2.27.3" and t["transports"] == {transport: 15}
    assert m["nccl_lines"] > 50 and "NCCL INFO" not in m["output"] and m["rows"]
    first = t["pairs"][0]
    assert (first["src"], first["dst"], first["channels"]) == (0, 1, 2) and "NCCL INFO Channel 00" in first["line"]
    assert first["line"].endswith("via SHM/direct/direct" if transport == "SHM" else "via P2P/IPC")
    assert t["environment"] == {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    text = " ".join(ic.what_would_change(m, {}, 43.0))
    assert (changes in text) if changes else "NCCL connected" not in text


@pytest.mark.parametrize("debug", [True, False])
def test_the_program_gets_only_the_nccl_environment_and_the_bound(tmp_path, monkeypatch, run, debug):
    """The unit's NCCL names reach the program, the controller's own NCCL_* do not; what sglang sets for its own
    processes (NCCL_CUMEM_ENABLE=0, NCCL_NVLS_ENABLE=0 without --enable-symm-mem) and, with nccl_debug, NCCL's INFO
    lines are added; the key stays the unit's. The program's arguments say the GPU count, the sizes and a time
    budget inside the timeout."""
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    stub = tmp_path / "stub.py"
    stub.write_text("import json, os, sys\n"
                    "print('# ' + json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items()"
                    " if k.startswith('NCCL_')}}))\n"
                    "print('       16384          8192  bfloat16     sum      -1    43.10    0.38    0.67    N/A"
                    "    43.10    0.38    0.67    N/A')\n")
    args = {"ngpus": 2, "command": [sys.executable, str(stub)], "timeout": 10,
            "nvidia_smi_path": fake_smi(tmp_path, (DEVICE / "compute-apps-idle.csv").read_text()),
            "environment": {"NCCL_P2P_LEVEL": "SYS"}, "nccl_debug": debug}
    kind, r = run(args)
    assert kind == "exit", r
    out = r["interconnect"]["output"]
    seen = json.loads(out.splitlines()[0][2:])
    want = {"NCCL_P2P_LEVEL": "SYS", "NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    if debug:
        want.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ENV,GRAPH")
    assert seen["env"] == want and r["interconnect"]["run_environment"] == dict(sorted(want.items()))
    assert r["interconnect"]["nccl_environment"] == {"NCCL_P2P_LEVEL": "SYS"}
    assert r["interconnect"]["transport"] == {"found": False}
    assert seen["argv"] == ["--ngpus", "2", "--min-bytes", "4096", "--max-bytes", str(256 << 20),
                            "--time-budget", "6.0"]


def test_refuses_while_a_server_holds_a_gpu(tmp_path, sim_profile, run):
    args = {"ngpus": 8, "command": [sys.executable, str(SIM)],
            "nvidia_smi_path": fake_smi(tmp_path, (DEVICE / "compute-apps-under-bf16-matmul.csv").read_text())}
    kind, r = run(args)
    assert kind == "fail", r
    assert "not measuring while a compute process holds a GPU" in r["msg"] and "stop the server first" in r["msg"]
    assert r["holders"]


def test_a_program_that_overruns_is_killed_at_the_timeout(tmp_path, run):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    args = {"ngpus": 1, "command": [sys.executable, str(slow)], "timeout": 1, "command_args": "none",
            "nvidia_smi_path": fake_smi(tmp_path, (DEVICE / "compute-apps-idle.csv").read_text())}
    kind, r = run(args)
    assert kind == "fail", r
    assert "did not finish in 1 s" in r["msg"] and r["elapsed"] < 10


def test_a_program_without_a_table_is_reported_with_its_stderr(tmp_path, run):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nsys.stderr.write('allreduce_perf: torch is not importable\\n')\nsys.exit(2)\n")
    args = {"ngpus": 1, "command": [sys.executable, str(bad)],
            "nvidia_smi_path": fake_smi(tmp_path, (DEVICE / "compute-apps-idle.csv").read_text())}
    kind, r = run(args)
    assert kind == "fail", r
    assert "gave no all-reduce table (rc 2)" in r["msg"]
    assert "torch is not importable" in r["msg"]


@pytest.mark.parametrize("args, words", [
    ({"ngpus": 0, "command": ["x"]}, "ngpus must be at least 1"),
    ({"ngpus": 8, "command": ["x"], "min_bytes": 0}, "min_bytes must be > 0"),
    ({"ngpus": 8}, "give program_source"),
    ({"ngpus": 8, "program_source": "x", "python": "/nonexistent/python"}, "is not an executable python"),
])
def test_bad_input_is_named_before_anything_runs(args, words, run):
    kind, r = run(args)
    assert kind == "fail", r
    assert words in r["msg"]


def test_model_config_is_found_in_the_hugging_face_cache(tmp_path):
    snap = tmp_path / "home" / ".cache" / "huggingface" / "hub" / "models--lukealonso--GLM-5-NVFP4"
    (snap / "refs").mkdir(parents=True)
    (snap / "refs" / "main").write_text("abc123")
    (snap / "snapshots" / "abc123").mkdir(parents=True)
    (snap / "snapshots" / "abc123" / "config.json").write_text('{"num_hidden_layers": 78, "hidden_size": 6144}')
    path = interconnect_facts.model_config_path("lukealonso/GLM-5-NVFP4", str(tmp_path / "home"), {})
    assert path == str(snap / "snapshots" / "abc123" / "config.json")
    model, err = interconnect_facts.read_model("lukealonso/GLM-5-NVFP4", str(tmp_path / "home"), {})
    assert err is None and model["layers"] == 78
    # the same cache under HF_HOME (the unit's environment) instead of HOME
    hf_home = tmp_path / "hf"
    (hf_home / "hub").mkdir(parents=True)
    os.rename(str(snap), str(hf_home / "hub" / snap.name))
    model, err = interconnect_facts.read_model("lukealonso/GLM-5-NVFP4", str(tmp_path / "home"), {})
    assert model is None and "no config.json for 'lukealonso/GLM-5-NVFP4'" in err
    model, err = interconnect_facts.read_model("lukealonso/GLM-5-NVFP4", str(tmp_path / "home"),
                                               {"HF_HOME": str(hf_home)})
    assert err is None and model["hidden_size"] == 6144
