"""Where the two derivations meet: the simulated nvidia-smi (simulator/, written from the recordings) read by the
host checks (plugins/module_utils/host_checks.py, written from real output). Each profile knob must put its check in
the failing state, and the default profiles must pass (but for the reference VM's missing P2P), exactly as the real
output they were written from does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from helpers.paths import FIXTURES, REPO

SMI = REPO / "simulator" / "bin" / "nvidia-smi"


@pytest.fixture
def sim(tmp_path):
    def run(*args, fault=None, **profile):
        prof = {"simulated": True, "gpu_model": "rtx-pro-6000", "gpu_count": 2, "host_index": 1, **profile}
        path = tmp_path / "profile.json"
        path.write_text(json.dumps(prof))
        env = dict(os.environ, MOESWEEP_SIM_PROFILE=str(path), MOESWEEP_SIM_STATE=str(tmp_path / "state.json"))
        env.pop("MOESWEEP_SIM_FAULT", None)
        if fault:
            env["MOESWEEP_SIM_FAULT"] = fault
        out = subprocess.run([sys.executable, str(SMI), *args], env=env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return out.stdout

    return run


def test_sim_q_prints_the_recorded_link_and_power_rows(sim):
    """Same section paths as the H200 recording for every value the checks read."""
    recorded_text = (FIXTURES / "nvidia-smi" / "h200-x1-device" / "nvidia-smi-q.txt").read_text()
    simulated_text = sim("-q", gpu_model="h200-x2")
    recorded, simulated = hc.parse_q_sections(recorded_text), hc.parse_q_sections(simulated_text)
    wanted = [k for k in recorded[0]["values"] if k.startswith(("PCI/GPU Link Info/", "GPU Power Readings/",
                                                                  "ECC Errors/Volatile/DRAM"))]
    assert wanted and all(k in simulated[0]["values"] for k in wanted), set(wanted) - set(simulated[0]["values"])
    rec, got = hc.parse_q_gpus(recorded_text)[0], hc.parse_q_gpus(simulated_text)[0]
    for key in ("pcie_gen_max", "pcie_width_max", "pcie_width_current", "power_limit_w", "power_default_w",
                "power_max_w", "persistence_mode", "ecc_volatile_uncorrected"):
        assert got[key] == rec[key], key


def test_default_profile_passes_the_gpu_checks(sim):
    gpus = hc.parse_q_gpus(sim("-q"))
    assert [hc.check_pcie_links(gpus)["verdict"], hc.check_power(gpus)["verdict"],
            hc.check_persistence(gpus)["verdict"], hc.check_errors(gpus, [], True)["verdict"]] == ["ok"] * 4
    # the reference VM has no P2P (its all-reduce goes through host memory): NS between every pair, a warning
    p2p = hc.check_p2p(hc.parse_topo_p2p(sim("topo", "-p2p", "r")), 2)
    assert p2p["verdict"] == "warn" and "NS between 1 of 1 pairs" in p2p["evidence"], p2p
    assert hc.check_p2p(hc.parse_topo_p2p(sim("topo", "-p2p", "r", p2p_read="OK")), 2)["verdict"] == "ok"


@pytest.mark.parametrize(("knob", "check", "needle"), [
    ({"p2p_read": "GNS"}, "p2p", "GNS between 1 of 1 pairs"),
    ({"pcie_width_current": 8}, "pcie_link", "x8 of x16"),
    ({"power_limit_w": 300}, "power_cap", "300 W of 600 W default"),
    ({"persistence_mode": "Disabled"}, "persistence", "persistence mode off"),
])
def test_each_knob_puts_its_check_in_the_failing_state(sim, knob, check, needle):
    gpus = hc.parse_q_gpus(sim("-q", **knob))
    result = {
        "p2p": lambda: hc.check_p2p(hc.parse_topo_p2p(sim("topo", "-p2p", "r", **knob)), 2),
        "pcie_link": lambda: hc.check_pcie_links(gpus),
        "power_cap": lambda: hc.check_power(gpus),
        "persistence": lambda: hc.check_persistence(gpus),
    }[check]()
    assert result["verdict"] == "warn" and needle in result["evidence"], result


def test_the_ecc_error_fault_fails_the_gpu_errors_check(sim):
    """The simulator's Xid-like fault: an uncorrected ECC error counted on GPU 1, as `nvidia-smi -q` prints it."""
    gpus = hc.parse_q_gpus(sim("-q", fault="ecc_error:1"))
    assert [g["ecc_volatile_uncorrected"] for g in gpus] == [0, 1]
    result = hc.check_errors(gpus, [], True)
    assert result["verdict"] == "fail" and "GPU1 00000000:02:00.0: 1 uncorrected ECC errors" in result["evidence"]
    assert "nvidia-smi -r" in result["fix"]
