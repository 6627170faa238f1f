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


# NCCL's own printf formats of the lines the simulated NCCL prints, quoted from https://github.com/NVIDIA/nccl at each
# tag (file:line there): the simulator was written from the same source, this test holds its output to the formats.
NCCL_FORMATS = {
    "2.27.3": {
        "prefix": "%s:%d:%d [%d] NCCL INFO ",  # src/debug.cc:352 + :366
        "version": "NCCL version %d.%d.%d+cuda%d.%d",  # src/init.cc:538 VERSION_STRING
        "comm": "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d",  # src/init.cc:998
        "ring": "Channel %02d/%02d :",  # src/graph/rings.cc:41 (then " %*d" per rank, dumpLine)
        "ipc": "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/IPC%s%s",  # src/transport/p2p.cc:398
        "shm": "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s",  # src/transport/shm.cc:128
        "disabled": "P2P is disabled between connected GPUs %d and %d. You can repress this message with "
                    "NCCL_IGNORE_DISABLED_P2P=1.",  # src/graph/paths.cc:346
        "level": "%s set by environment to %s",  # src/graph/paths.cc:240
        "param": "%s set by environment to %lld.",  # src/misc/param.cc:87
        "rings": "Connected all rings, use ring PXN %d GDR %d",  # src/transport/generic.cc:31
        "complete": "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE",
    },  # init.cc:1469
    "2.28.9": {
        "shm": "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s",  # src/transport/shm.cc:128
        "ipc": "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/IPC%s%s",  # src/transport/p2p.cc:398
        "disabled": "P2P is disabled between connected GPUs %d and %d. You can repress this message with "
                    "NCCL_IGNORE_DISABLED_P2P=1.",  # src/graph/paths.cc:359
        "rings": "Connected all rings, use ring PXN %d GDR %d",  # src/transport/generic.cc:37
    },
    "2.30.7": {
        "shm": "Channel %02d : %d[%d] -> %d[%d] via SHM/direct",  # src/transport/shm.cc:116
        "ipc": "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/IPC%s%s",  # src/transport/p2p.cc:429
        "disabled": "P2P is disabled between connected GPUs %d and %d. You can repress this message with "
                    "NCCL_IGNORE_DISABLED_P2P=1.",  # src/graph/paths.cc:402-403
        "rings": "Connected all rings, use ring PXN %d GDR %d",  # src/transport/generic.cc:40
    },
}


def _printf_re(fmt):
    """A regular expression for what printf prints with ``fmt`` (the conversions NCCL's formats use)."""
    import re

    out, i = "", 0
    conv = re.compile(r"%(0?\d*)(lld|llx|lx|ld|d|s|p|f|\*d)")
    for m in conv.finditer(fmt):
        out += re.escape(fmt[i:m.start()])
        kind = m.group(2)
        out += {"s": r"[^ ]*", "p": r"0x[0-9a-f]+", "lx": r"[0-9a-f]+", "llx": r"[0-9a-f]+", "f": r"[\d.]+"}.get(
            kind, r"\d+")
        i = m.end()
    return out + re.escape(fmt[i:])


def nccl_lines(tmp_path, p2p_read, version, extra=None):
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV", "NCCL_CUMEM_ENABLE": "0",
           "MOESWEEP_SIM_NCCL_VERSION": version, **(extra or {})}
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8, "p2p_read": p2p_read}, "--ngpus", "8",
            "--max-bytes", "8192", env=env)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if "NCCL INFO" in line], r.stdout


@pytest.mark.parametrize("version", sorted(NCCL_FORMATS))
def test_the_simulated_nccl_prints_the_lines_of_that_version(tmp_path, version):
    """On the 8x RTX PRO 6000 VM (P2P "NS", every GPU behind the host bridge: PHB, beyond NCCL's default level PXB)
    NCCL connects every ring and tree neighbour through host memory; with P2P on (the knob) through P2P/IPC
    (sglang's NCCL_CUMEM_ENABLE=0). Every line is in NCCL's own format of that version."""
    import re

    fmt = dict(NCCL_FORMATS["2.27.3"], **NCCL_FORMATS[version])
    prefix = _printf_re(fmt["prefix"])
    lines, out = nccl_lines(tmp_path, "NS", version)
    body = [re.sub("^" + prefix, "", line) for line in lines]
    assert all(re.match("^" + prefix, line) for line in lines)
    shm = [b for b in body if "via SHM" in b]
    assert shm and all(re.fullmatch(_printf_re(fmt["shm"]), b) for b in shm)
    assert len(shm) == 2 * (8 + 7)  # 2 channels: the ring's 8 connections and the chain tree's 7
    assert not any("P2P is disabled" in b for b in body)  # PHB is beyond PXB: P2P is never tried, so never refused
    for key in ("version", "comm", "rings", "complete", "param"):
        assert any(re.fullmatch(_printf_re(fmt[key]), b) for b in body), key
    assert any(re.fullmatch(_printf_re(fmt["ring"]) + r"( \d)+", b) for b in body)
    assert out.index("NCCL INFO") > out.index("#        (B)") and out.index("NCCL INFO") < out.index("  4096  ")
    lines, _out = nccl_lines(tmp_path, "OK", version)
    ipc = [re.sub("^" + prefix, "", line) for line in lines if "via P2P" in line]
    assert len(ipc) == 30 and all(re.fullmatch(_printf_re(fmt["ipc"]), b) for b in ipc)


def test_a_raised_p2p_level_makes_nccl_try_p2p_and_refuse_it(tmp_path):
    """NCCL_P2P_LEVEL=SYS takes the PHB pairs within the level: NCCL asks NVML, which says NS, and prints its refusal
    (paths.cc:346 at 2.27.3) before connecting through SHM; NCCL_P2P_DISABLE=1 takes the level to LOC, silently."""
    import re

    lines, _out = nccl_lines(tmp_path, "NS", "2.27.3", {"NCCL_P2P_LEVEL": "SYS"})
    body = [line.split("NCCL INFO ", 1)[1] for line in lines]
    assert "NCCL_P2P_LEVEL set by environment to SYS" in body
    refusals = [b for b in body if b.startswith("P2P is disabled")]
    assert len(refusals) == 8 * 7 and all(re.fullmatch(_printf_re(NCCL_FORMATS["2.27.3"]["disabled"]), b)
                                          for b in refusals)
    assert all("via SHM" in b for b in body if b.startswith("Channel") and "->" in b)
    lines, _out = nccl_lines(tmp_path, "OK", "2.27.3", {"NCCL_P2P_DISABLE": "1"})
    body = [line.split("NCCL INFO ", 1)[1] for line in lines]
    assert "NCCL_P2P_DISABLE set by environment to 1" in body and not any("via P2P" in b for b in body)


def test_without_nccl_debug_nccl_prints_nothing_and_an_unknown_version_is_named(tmp_path):
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8}, "--ngpus", "8", "--max-bytes", "8192")
    assert r.returncode == 0 and "NCCL INFO" not in r.stdout
    r = run(tmp_path, {"gpu_model": "rtx-pro-6000", "gpu_count": 8}, "--ngpus", "8",
            env={"NCCL_DEBUG": "INFO", "MOESWEEP_SIM_NCCL_VERSION": "2.99.0"})
    assert r.returncode != 0 and "NCCL 2.99.0 is not simulated" in r.stderr
