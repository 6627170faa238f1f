"""After only `moesweep sim up`, the user's exact `ansible-playbook sweep.yml -e backend=flashinfer_cutedsl`
provisions the host (site.yml's roles, from the wheelhouse `sim up` serves on the host's link, named by the
inventory it wrote), then records a benchmarked point; a second run provisions nothing. -e provision=false skips
the provisioning look altogether.

A cluster of its own (1 host), booted bare for this module: the first run installs the test stack (minutes)."""

from __future__ import annotations

import json

import pytest
from conftest import SIM_FAST, SIM_RATES, SMALL_BENCH

pytestmark = pytest.mark.hosts


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

    second = cluster.playbook("sweep.yml", "-e", "backend=flashinfer_cutedsl", "-e", f"@{settings}", check=False)
    assert second.returncode == 0, second.stdout[-6000:]
    assert "Start the locked installs" not in second.stdout and "Create the venvs" not in second.stdout
    assert "skipping: no hosts matched" in second.stdout  # the provisioning play has no host left
