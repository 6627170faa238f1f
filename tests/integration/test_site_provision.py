"""playbooks/site.yml on simulated hosts: the cuda_toolkit apt path against a local signed repository,
the preinstalled-toolkit path, the sglang_env test stack from a wheelhouse served on the namespace's
machine side, idempotence (second run changed=0), honest check mode, and bad input failing before
anything changes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import REPO, TEST_STACK, provision, served_wheelhouse
from helpers import aptrepo

from moesweep.runner import run_ansible
from moesweep.sim import wheelhouse


def recap(proc) -> dict[str, dict[str, int]]:
    out = {}
    for host, fields in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", proc.stdout, re.M):
        out[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
    return out


def changed(proc) -> int:
    return sum(r["changed"] for r in recap(proc).values())


def site(cluster, *args, check=True, extra: dict | None = None):
    ev = ["-e", json.dumps(extra)] if extra else []
    return cluster.playbook(str(REPO / "playbooks" / "site.yml"), *ev, *args, check=check)


@pytest.fixture(scope="module")
def apt_cluster(sim_clusters, tmp_path_factory):
    """One host WITHOUT any CUDA toolkit, and a signed test repository served on its gateway."""
    cluster = sim_clusters("cuda-apt", hosts=1, cuda_toolkits=[])
    gw = cluster.hosts[0].gateway
    root = tmp_path_factory.mktemp("aptrepo")
    with wheelhouse.serve(root, gw, 0) as url:
        aptrepo.build(root, url)
        yield cluster, url


def test_cuda_toolkit_installs_from_repository_then_changes_nothing(apt_cluster):
    cluster, url = apt_cluster
    host = cluster.names[0]
    extra = {"cuda_toolkit_repo_base_url": url}
    first = site(cluster, "--tags", "cuda_toolkit", extra=extra)
    assert changed(first) >= 3, first.stdout[-3000:]
    nvcc = cluster.sh(host, "bash -lc 'echo $CUDA_HOME; $CUDA_HOME/bin/nvcc --version'")
    assert nvcc.stdout.splitlines()[0] == "/usr/local/cuda-12.8"
    assert "release 12.8, V12.8.93" in nvcc.stdout
    pkg = cluster.sh(host, "dpkg-query -W -f='${Version}' cuda-toolkit-12-8 cuda-keyring")
    assert "12.8.0-1" in pkg.stdout and "1.1-1" in pkg.stdout
    second = site(cluster, "--tags", "cuda_toolkit", extra=extra)
    assert changed(second) == 0, second.stdout[-3000:]
    dry = site(cluster, "--tags", "cuda_toolkit", "--check", extra=extra)
    assert changed(dry) == 0, dry.stdout[-3000:]


def test_toolkit_missing_from_a_reachable_repository_fails_before_anything_changes(apt_cluster):
    """The repository answers, but its Packages index has no cuda-toolkit-12-9: a clear error naming
    the package and the URL, and nothing on the host changes."""
    cluster, url = apt_cluster
    host = cluster.names[0]
    before = cluster.sh(host, "ls /etc/apt/sources.list.d/ /usr/local; dpkg -l | wc -l").stdout
    extra = {"cuda_toolkit_repo_base_url": url, "cuda_toolkit_version": "12.9", "cuda_toolkit_driver_min_cuda": "12.8"}
    proc = site(cluster, "--tags", "cuda_toolkit", check=False, extra=extra)
    words = " ".join(proc.stdout.split())
    assert proc.returncode != 0
    assert "package cuda-toolkit-12-9 is not available from" in words, proc.stdout[-3000:]
    assert "not listed in its Packages index" in words
    assert changed(proc) == 0
    assert cluster.sh(host, "ls /etc/apt/sources.list.d/ /usr/local; dpkg -l | wc -l").stdout == before


def test_hosts_have_no_route_to_any_registry(sim_hosts):
    """The air-gapped premise of every install test: no default route, only the gateway."""
    host = sim_hosts.names[0]
    assert sim_hosts.sh(host, "ip route show default").stdout.strip() == ""
    # A routing-table lookup only (no packet leaves): pypi.org's address has no route.
    probe = sim_hosts.sh(host, "ip route get 151.101.0.223")
    assert probe.returncode != 0 and "unreachable" in probe.stderr.lower(), probe.stderr


def test_preinstalled_toolkits_select_12_8_and_install_nothing(sim_hosts):
    host = sim_hosts.names[0]
    first = site(sim_hosts, "--tags", "cuda_toolkit", "--limit", host, "-v")
    words = " ".join(first.stdout.split())  # the yaml callback wraps long messages
    assert "CUDA_HOME=/usr/local/cuda-12.8 (nvcc 12.8, SM120 JIT target 120a)" in words
    login = sim_hosts.sh(host, "bash -lc 'echo $CUDA_HOME'")
    assert login.stdout.strip() == "/usr/local/cuda-12.8"
    assert sim_hosts.sh(host, "test -e /etc/apt/sources.list.d/cuda-debian12-x86_64.list").returncode != 0
    again = site(sim_hosts, "--tags", "cuda_toolkit", "--limit", host)
    assert changed(again) == 0
    sim_hosts.sh(host, "rm -f /etc/profile.d/moesweep-cuda-toolkit.sh")


BAD_INPUTS = [
    ({"cuda_toolkit_version": "11.8"}, "cuda_toolkit", "is not supported; supported versions: 12.8, 12.9, 13.0, 13.1"),
    ({"cuda_toolkit_version": "12.9", "cuda_toolkit_driver_min_cuda": "12.8",
      "cuda_toolkit_repo_base_url": "http://{gw}:9"}, "cuda_toolkit",
     "CUDA 12.9 is not installed"),
    ({"cuda_toolkit_driver_min_cuda": "13.0"}, "cuda_toolkit", "needs driver branch R580"),
    ({"sglang_env_stack": "cu999-nope"}, "sglang_env", "sglang_env_stack must be one of: cu128-sglang-0.5.9,"),
    ({"sglang_env_venv": "relative/venv"}, "sglang_env", "must be an absolute path"),
    ({"sglang_env_stack": "cu129-sglang-0.5.19"}, "sglang_env", "is incomplete"),
    ({"sglang_env_stack": TEST_STACK, "sglang_env_index_url": "http://{gw}:9/simple"}, "sglang_env",
     "is unreachable"),
    ({"sglang_env_stack": TEST_STACK, "sglang_env_python": "/tmp/moesweep-old-python"}, "sglang_env",
     "is too old for stack"),
]


@pytest.mark.parametrize("extra,tag,message", BAD_INPUTS, ids=[m for _, _, m in BAD_INPUTS])
def test_bad_input_fails_clearly_before_anything_changes(sim_hosts, extra, tag, message):
    host = sim_hosts.names[0]
    gw = sim_hosts.hosts[0].gateway
    old_python = "/tmp/moesweep-old-python"
    sim_hosts.sh(host, f"printf '#!/bin/sh\\necho 3.9.18\\n' > {old_python}; chmod +x {old_python}")
    extra = {k: (v.format(gw=gw) if isinstance(v, str) else v) for k, v in extra.items()}
    proc = site(sim_hosts, "--tags", tag, "--limit", host, check=False, extra=extra)
    assert proc.returncode != 0
    assert message in proc.stdout, proc.stdout[-3000:]
    assert changed(proc) == 0
    leftovers = "test -e /etc/moesweep || test -e /etc/profile.d/moesweep-cuda-toolkit.sh"
    assert sim_hosts.sh(host, leftovers).returncode != 0


@pytest.mark.slow
def test_site_installs_test_stack_from_wheelhouse_idempotently(bench_cluster, sim_clusters):
    # The benchmark host's provisioning is a first converge on a fresh host: checked here, not paid twice. Only
    # a bench host found already provisioned (left up by an earlier session) makes this test boot its own.
    cluster = bench_cluster if bench_cluster.first_converge else sim_clusters("site-1", hosts=1)
    if cluster.first_converge is None:
        provision(cluster)
    first, first_s, port = cluster.first_converge
    host = cluster.hosts[0]
    # The wheels at the first converge's URL, which the record names.
    with served_wheelhouse(cluster, TEST_STACK, port) as (extra, _):
        assert changed(first) >= 5
        t0 = time.monotonic()
        second = site(cluster, extra=extra)
        noop_s = time.monotonic() - t0
        assert changed(second) == 0, second.stdout[-4000:]
        dry = site(cluster, "--check", extra=extra)
        assert changed(dry) == 0, dry.stdout[-4000:]
        assert "unchanged since verified" in second.stdout  # the no-change run skipped the imports
        prov = json.loads(cluster.sh(host.name, "cat /etc/moesweep/provenance.json").stdout)
        # Something lands in the venv behind the role's back: the fingerprint no longer matches the
        # record, so the imports and pip freeze run again and the record is rewritten.
        sp = "/opt/moesweep/venvs/sglang/lib/python3.11/site-packages/moesweep_probe-1.0.dist-info"
        cluster.sh(host.name, f"mkdir -p {sp} && printf 'Metadata-Version: 2.1\\nName: moesweep-probe\\n"
                              f"Version: 1.0\\n' > {sp}/METADATA", check=True)
        dry = site(cluster, "--check", extra=extra)
        assert changed(dry) == 1, dry.stdout[-4000:]  # check mode predicts the record's rewrite
        third = site(cluster, extra=extra)
        assert changed(third) == 1 and "Verify the imports" in third.stdout, third.stdout[-4000:]
        assert "server (unchanged since verified)" not in third.stdout
        after = json.loads(cluster.sh(host.name, "cat /etc/moesweep/provenance.json").stdout)
        assert after["freeze_sha256"] != prov["freeze_sha256"]
        assert after["dist_fingerprint"] != prov["dist_fingerprint"]
        assert changed(site(cluster, extra=extra)) == 0
        cluster.sh(host.name, f"rm -rf {sp}", check=True)
        # Gone again: the record is rewritten back to what the first converge recorded.
        assert changed(site(cluster, extra=extra)) == 1
    restored = json.loads(cluster.sh(host.name, "cat /etc/moesweep/provenance.json").stdout)
    assert restored["freeze_sha256"] == prov["freeze_sha256"]
    assert restored["dist_fingerprint"] == prov["dist_fingerprint"]
    prov = restored
    assert prov["versions"] == {"sglang": "0.5.9", "flashinfer": "0.6.3", "torch": "2.13.0+cpu"}
    assert prov["client"]["versions"]["sglang"] == "0.5.9"
    assert prov["cuda_home"] == "/usr/local/cuda-12.8"
    assert len(prov["lock_sha256"]) == 64 and len(prov["freeze_sha256"]) == 64
    assert len(prov["dist_fingerprint"]) == 64
    print(f"site.yml first converge {first_s:.1f}s, no-change re-run {noop_s:.1f}s")


def test_repo_root_group_vars_are_loaded():
    inv = run_ansible("ansible-inventory", "-i", str(REPO / "inventory" / "example-proxmox.yml"),
                      "--host", "seed-vm")
    assert json.loads(inv.stdout)["moesweep_group_vars_loaded"] is True
    assert Path(REPO / "inventory" / "group_vars").resolve() == (REPO / "group_vars").resolve()
