"""gpu_facts against a simulated SM120 host: the module (written from real recorded output) and the
simulated nvidia-smi (written independently) must agree on what an 8x RTX PRO 6000 VM looks like."""

from __future__ import annotations

import pytest

from moesweep.runner import run_playbook

pytestmark = pytest.mark.hosts


def _facts(sim_hosts, check: bool):
    extra = {"cuda_home": "/usr/local/cuda-12.8"}
    run = run_playbook("tests/integration/playbooks/gpu_facts.yml", inventory=str(sim_hosts.inventory),
                       limit=sim_hosts.names[0], extravars=extra, check=check)
    out = run.hosts[sim_hosts.names[0]]
    assert run.rc == 0, out.failed_msg
    return out.results["gpu_facts"]


@pytest.mark.parametrize("check", [False, True], ids=["run", "check-mode"])
def test_sm120_host_facts(sim_hosts, check):
    res = _facts(sim_hosts, check)
    assert res["changed"] is False
    gpu = res["ansible_facts"]["moesweep_gpu"]
    assert gpu["sm"] == "sm120"
    assert gpu["gpu_count"] == 8
    assert gpu["interconnect"] == "pcie-phb"
    assert gpu["virtualization"]["kind"] in ("vm", "container")
    assert gpu["mixed_models"] is False
    assert gpu["gpu_models"] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    assert all(g["compute_cap"] == "12.0" for g in gpu["gpus"])
    assert gpu["cuda_toolkit"]["release"] == "12.8"
