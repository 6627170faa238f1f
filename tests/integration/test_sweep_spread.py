"""``sweep.yml -e spread=true`` on 4 simulated SM120 hosts: each point runs on exactly one host, the hosts in
parallel, every record in the one points.jsonl with its host; a host whose facts differ is refused by name
before any point runs. The benchmark is off (the hosts are not provisioned with a client venv): what is tested
here is the dealing, the parallel run and the per-host restore; the benchmark of a point has its own tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moesweep.sim import state as simstate
from moesweep.sim.presets import SIM_FAST

pytestmark = pytest.mark.hosts

BACKENDS = ["flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutlass", "triton"]


@pytest.fixture(scope="module")
def fleet(sim_clusters):
    cluster = sim_clusters("spread", hosts=4)
    yield cluster
    for name in cluster.names:
        cluster.sh(name, "systemctl stop sglang.service; systemctl reset-failed sglang.service", timeout=60)


def sweep(cluster, results: Path, *args):
    settings = {"sglang_server_extra_environment": dict(SIM_FAST), "sglang_server_stall_timeout": 5,
                "sglang_server_ready_timeout": 120, "sglang_bench_enabled": False, "results_dir": str(results),
                "provision": False, "stage_model": False}
    return cluster.playbook("sweep.yml", "-e", json.dumps(settings), "-e", "backends=" + ",".join(BACKENDS),
                            *args, check=False)


def records(results: Path, kind="point"):
    files = sorted(results.glob("*/points.jsonl"))
    out = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
    return files, [r for r in out if r["kind"] == kind]


def test_spread_runs_each_point_once_over_four_hosts(fleet, tmp_path):
    proc = sweep(fleet, tmp_path, "-e", "spread=true")
    files, points = records(tmp_path)
    assert len(files) == 1, files  # one sweep id on every host: one points.jsonl
    assert sorted(r["point"] for r in points) == sorted(BACKENDS), [(r["host"], r["point"]) for r in points]
    hosts = sorted(fleet.names)
    # dealt in host-name order: host i runs point i (there are as many hosts as points)
    assert {r["host"]: r["point"] for r in points} == dict(zip(hosts, BACKENDS, strict=True))
    by_point = {r["point"]: r for r in points}
    assert by_point["flashinfer_trtllm"]["status"] == "refused"
    for name in BACKENDS[1:]:
        assert by_point[name]["status"] == "passed", (name, by_point[name].get("failed_msg"))
    assert proc.returncode != 0 and "1 of 1 point(s) did not pass on " + hosts[0] in " ".join(proc.stdout.split())
    # restore per host: each host that passed its point is left on it; the refused host had nothing to restore
    restores = {r["host"]: r for r in records(tmp_path, "restore")[1]}
    for host, point in zip(hosts[1:], BACKENDS[1:], strict=True):
        assert restores[host]["action"] == "point" and restores[host]["point"] == point, restores[host]
        unit = fleet.sh(host, "systemctl show sglang.service -p ExecStart --value").stdout
        assert f"--moe-runner-backend {point} " in unit
    assert restores[hosts[0]]["action"] == "none"
    # the hosts ran in parallel (strategy free): the points' run times overlap
    spans = sorted((r["started"], r["finished"]) for r in points if r["status"] == "passed")
    assert all(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans


def test_spread_refuses_a_host_whose_facts_differ_naming_it(fleet, tmp_path):
    odd = next(h for h in fleet.hosts if h.name == sorted(fleet.names)[-1])
    # the host's profile, bound read-only at /etc/moesweep-sim/profile.json: rewritten in place (same inode)
    profile_path = simstate.host_dir(odd) / "etc" / "profile.json"
    backup = profile_path.read_text()
    profile = json.loads(backup)
    profile["driver_version"] = "575.57.08"
    pids = {h: fleet.sh(h, "systemctl show sglang.service -p MainPID --value").stdout for h in fleet.names}
    profile_path.write_text(json.dumps(profile))
    try:
        assert "575.57.08" in fleet.sh(odd.name, "nvidia-smi").stdout
        proc = sweep(fleet, tmp_path, "-e", "spread=true")
    finally:
        profile_path.write_text(backup)
    odd = odd.name
    out = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "driver_version differs" in out and odd in out and "spread=by_facts" in out, out[-3000:]
    assert records(tmp_path)[1] == []  # refused before any point ran
    assert {h: fleet.sh(h, "systemctl show sglang.service -p MainPID --value").stdout for h in fleet.names} == pids
