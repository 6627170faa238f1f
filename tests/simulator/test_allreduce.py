"""The simulated all-reduce measurement (simulator/moesweep_sim/allreduce.py) against the published tables its
profiles cite. Runs it as a subprocess, as the hosts do; imports nothing from plugins/ or src/."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.paths import FIXTURES, REPO

SIM = REPO / "simulator" / "bin" / "allreduce-perf-sim"
sys.path.insert(0, str(REPO / "simulator"))
from moesweep_sim import allreduce  # noqa: E402


def run(tmp_path, profile, *args, env=None):
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps(profile))
    e = {k: v for k, v in os.environ.items() if k != "MOESWEEP_SIM_INTERCONNECT"}
    e.update(MOESWEEP_SIM_PROFILE=str(prof), MOESWEEP_SIM_TIME_SCALE="0", **(env or {}))
    return subprocess.run([sys.executable, str(SIM), *args], capture_output=True, text=True, env=e, timeout=30)


def rows(text):
    out = []
    for line in text.splitlines():
        t = line.split()
        if t and t[0].isdigit():
            out.append((int(t[0]), float(t[5])))
    return out


def published(name):
    """(size, out-of-place time) of a recorded nccl-tests table."""
    return [(s, t) for s, t in rows((FIXTURES / "interconnect" / name).read_text())]


def test_vm_profile_is_the_recorded_no_p2p_table(tmp_path):
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8}, "--ngpus", "8", "--min-bytes", "8",
            "--max-bytes", str(128 << 20))
    assert r.returncode == 0, r.stderr
    assert rows(r.stdout) == published("rtx4090-x8-sys-no-p2p.txt")
    assert "# P2P GPU0 -> GPU1: no" in r.stdout and r.stdout.count("# P2P GPU") == 56
    assert "interconnect profile vm_phb" in r.stdout.splitlines()[0]


@pytest.mark.parametrize(("p2p_read", "curve", "peer"), [("NS", "vm_phb", "no"), ("GNS", "vm_phb", "no"),
                                                          ("OK", "pix", "yes")])
def test_the_vms_curve_follows_the_p2p_that_nvidia_smi_prints(tmp_path, p2p_read, curve, peer):
    """The knob that makes `topo -p2p r` print OK gives the all-reduce P2P too: what the host checks read and what the
    measurement says never disagree."""
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8, "p2p_read": p2p_read}, "--ngpus", "8")
    assert r.returncode == 0, r.stderr
    assert f"interconnect profile {curve}" in r.stdout.splitlines()[0]
    assert f"# P2P GPU0 -> GPU1: {peer}" in r.stdout


def test_nvlink_profile_for_h200(tmp_path):
    r = run(tmp_path, {"gpu_model": "h200", "gpu_count": 8}, "--ngpus", "8", "--min-bytes", "4096")
    assert r.returncode == 0, r.stderr
    got = dict(rows(r.stdout))
    assert got[4096] == 16.69  # https://github.com/deepseek-ai/DeepEP/issues/303
    big = 256 << 20
    busbw = big / got[big] / 1e3 * 2 * 7 / 8
    assert 460 < busbw <= 475  # https://github.com/NVIDIA/nccl-tests/issues/272
    assert "# P2P GPU3 -> GPU5: yes" in r.stdout


def test_pix_profile_by_profile_key(tmp_path):
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8, "interconnect": "pix"}, "--ngpus", "8",
            "--min-bytes", "1024", "--max-bytes", "262144")
    got = dict(rows(r.stdout))
    assert got[1024] == 24.1 and got[8192] == 24.2 and got[65536] == 24.1 and got[262144] == 28.0


def test_the_columns_are_nccl_tests_and_the_time_format_too(tmp_path):
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8}, "--ngpus", "8", "--min-bytes", "65536",
            "--max-bytes", str(32 << 20))
    lines = r.stdout.splitlines()
    header = [ln for ln in lines if "redop" in ln][0]
    assert header.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                              "time", "algbw", "busbw", "#wrong"]
    table = {int(ln.split()[0]): ln.split()[5] for ln in lines if ln.split() and ln.split()[0].isdigit()}
    # src/common.cu: 2 decimals below 100 us, 1 below 10 ms, none above
    assert table[65536] == "45.66" and table[262144] == "124.8" and table[33554432] == "3905.6"
    assert allreduce.time_text(16253.0).strip() == "16253"


def test_more_gpus_than_the_host_has_is_refused_like_the_real_program(tmp_path):
    r = run(tmp_path, {"gpu_model": "h200-x2", "gpu_count": 2}, "--ngpus", "8")
    assert r.returncode == 2 and "--ngpus 8, but 2 GPU(s) are visible" in r.stderr


def test_unknown_profile_is_named(tmp_path):
    r = run(tmp_path, {"gpu_model": "h200", "gpu_count": 8, "interconnect": "nvl72"}, "--ngpus", "8")
    assert r.returncode != 0 and "unknown interconnect profile 'nvl72'" in r.stderr


@pytest.mark.parametrize("name", sorted(allreduce.PROFILES))
def test_curves_grow_with_size(name):
    times = [allreduce.time_us(allreduce.PROFILES[name], 1 << k, 8) for k in range(12, 29)]
    assert all(b >= a * 0.95 for a, b in zip(times, times[1:], strict=False))
