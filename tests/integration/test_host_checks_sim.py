"""The host checks on a simulated host booted with every failing knob (moesweep sim up --knob ...): each check
names its evidence and fix, gpu_facts reports them, and the sweep's preflight refuses the point before anything is
started (a fail) or records the warnings as caveats, in the record too.

One small cluster (1 host, 2 GPUs), booted once for the module."""

from __future__ import annotations

import json

import pytest
from conftest import point_records, sweep_point

from moesweep.runner import run_playbook

pytestmark = pytest.mark.hosts

KNOBS = {"p2p_read": "GNS", "pcie_width_current": 8, "power_limit_w": 300, "persistence_mode": "Disabled",
         "shm_size_mb": 64, "memlock_kb": 64, "disk_size_mb": 64}
# What sglang_env records for the 0.5.23 stack (torch cu130) on this host: R570 cannot run it
PROVENANCE = {"stack": "cu130-sglang-0.5.23", "venv": "/opt/moesweep/venvs/sglang", "torch_cuda": "13.0",
              "versions": {"sglang": "0.5.23"}}


@pytest.fixture(scope="module")
def host(sim_clusters):
    return sim_clusters("hostchk", hosts=1, gpu_count=2, knobs=KNOBS)


def test_every_failing_knob_gets_its_check_and_fix(host):
    run = run_playbook("tests/integration/playbooks/host_checks.yml", inventory=str(host.inventory),
                       extravars={"stack_cuda": "13.0"})
    out = run.hosts[host.names[0]]
    assert run.rc == 0, out.failed_msg
    facts = out.results["gpu_facts"]["ansible_facts"]["moesweep_gpu"]
    checks = {c["name"]: c for c in facts["host_checks"]}
    expected = {
        "p2p": ("warn", "GNS between 1 of 1 pairs", "--disable-custom-all-reduce"),
        "pcie_link": ("warn", "x8 of x16", "reseat"),
        "power_cap": ("warn", "300 W of 600 W default", "nvidia-smi -pl"),
        "persistence": ("warn", "persistence mode off", "nvidia-persistenced"),
        "shm": ("warn", "/dev/shm is 64 MiB", "remount,size="),
        "limits": ("warn", "memlock 64 KiB", "LimitMEMLOCK=infinity"),
        "disk": ("warn", "64 MiB free on /var/lib/sglang", "larger disk"),
        "driver_cuda": ("fail", "driver 570.172.08 supports CUDA 12.8; the stack's torch is built for CUDA 13.0",
                        "R580"),
    }
    for name, (verdict, evidence, fix) in expected.items():
        got = checks[name]
        assert got["verdict"] == verdict and evidence in got["evidence"] and fix in got["fix"], got
    assert all(c["verdict"] in ("ok", "warn", "fail") and c["evidence"] for c in facts["host_checks"])


def test_the_sweep_refuses_before_anything_starts_and_records_the_checks(host):
    name = host.names[0]
    host.sh(name, "install -d /etc/moesweep && cat > /etc/moesweep/provenance.json <<'EOF'\n"
            + json.dumps(PROVENANCE) + "\nEOF", check=True)
    # tp 2 on the host's 2 GPUs: the host checks alone refuse it (tp 8 would die at scheduler init too)
    run, out = sweep_point(host, "triton", sglang_server_extra_flags={"tp-size": 2})
    assert run.rc != 0
    pre = out.results["preflight"]
    assert pre["failed"] and pre["verdict"] == "unsupported"
    assert "refused by the host checks, before anything restarted" in pre["msg"], pre["msg"]
    assert "host check driver_cuda" in pre["msg"] and "R580" in pre["msg"]
    warned = " | ".join(pre["preflight_warnings"])
    for needle in ("host check shm: /dev/shm is 64 MiB", "host check limits:", "host check p2p:",
                   "host check power_cap:", "host check pcie_link:"):
        assert needle in warned, warned
    record = point_records(host, "triton")[-1]
    assert record["status"] == "refused" and record["readiness"] == {}
    assert {c["name"] for c in record["facts"]["host_checks"]} >= {"p2p", "shm", "limits", "driver_cuda", "disk"}
    # nothing was started: the unit never ran on this host
    shown = host.sh(name, "systemctl show sglang.service -p ActiveEnterTimestampMonotonic --value").stdout.strip()
    assert shown in ("", "0"), shown


def test_a_default_simulated_host_passes_every_check(sim_clusters):
    """The stand-in for the reference VM (8x RTX PRO 6000, no knob) fails nothing: a sweep there is not refused. Its
    one GPU warning is the VM's: no P2P between any pair (`NS`), as its all-reduce measurement says too."""
    cluster = sim_clusters("hostok", hosts=1)
    run = run_playbook("tests/integration/playbooks/host_checks.yml", inventory=str(cluster.inventory))
    out = run.hosts[cluster.names[0]]
    assert run.rc == 0, out.failed_msg
    checks = out.results["gpu_facts"]["ansible_facts"]["moesweep_gpu"]["host_checks"]
    verdicts = {c["name"]: (c["verdict"], c["evidence"]) for c in checks}
    assert not [c for c in checks if c["verdict"] == "fail"], verdicts
    print(json.dumps(verdicts, indent=1))
    for name in ("pcie_link", "power_cap", "persistence", "gpu_errors", "shm"):
        assert verdicts[name][0] == "ok", verdicts
    assert verdicts["p2p"][0] == "warn" and "NS between 28 of 28 pairs" in verdicts["p2p"][1], verdicts
    # the unit's limits are this machine's: a machine without CAP_SYS_RESOURCE caps every simulated host's units at
    # its own hard limits, and the check says so (truthfully) as a warning
    assert verdicts["limits"][0] == "ok" or "PID 1's hard limit" in verdicts["limits"][1], verdicts
