"""Shared pytest fixtures.

Simulated hosts are expensive to boot (~1-3 s each, plus Ansible's first connection), so tests
share them per session where that stays honest: a test that changes a host's state (installs,
faults, running servers) either cleans up after itself or asks for its own cluster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.paths import REPO

from moesweep.runner import run_ansible
from moesweep.sim.presets import SIM_FAST, SIM_RATES, SMALL_BENCH


def _can_boot_hosts() -> str | None:
    if os.geteuid() != 0:
        return "simulated hosts need root"
    for tool in ("systemd-nspawn", "debootstrap", "ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} missing (make sim-deps)"
    return None


@dataclass
class SimCluster:
    name: str
    inventory: Path
    hosts: list
    results_dir: Path | None = None
    # site.yml's first run on these hosts in this session: its process, wall seconds and the wheelhouse's port
    # (provision()).
    first_converge: tuple[subprocess.CompletedProcess, float, int] | None = None

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def ansible(self, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        return run_ansible("ansible", "-i", str(self.inventory), *args, check=check, env=env)

    def playbook(self, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        return run_ansible("ansible-playbook", "-i", str(self.inventory), *args, check=check, env=env)

    def sh(self, host: str, script: str, check: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a shell snippet inside a host without SSH (nsenter)."""
        from moesweep.sim import hosts

        return hosts.nsenter(host, "/bin/sh", "-c", script, check=check, timeout=timeout)


def server_account(cluster: SimCluster) -> None:
    """The server role's install phase (the service account and its directories), as site.yml leaves a host it
    provisioned: a cluster whose stack comes with the image, swept with provision=false, is then such a host, and a
    test that a refused point changes nothing sees only what the point changed."""
    cluster.playbook(str(REPO / "playbooks" / "site.yml"), "--tags", "sglang_server_install")


def sweep_point(cluster: SimCluster, backend: str, env: dict | None = None, bench: bool = False,
                results_dir: Path | None = None, **extravars):
    """Run playbooks/sweep.yml for one backend on a one-host cluster; returns (run, that host's outcome).
    Without ``bench`` the point stops after the smoke check (hosts without a client venv). The host is left as
    the point left it (restore=none) unless ``restore`` is given, so ``readiness`` is the point's own; and the
    point runs even when it passed before with the same configuration (rerun), unless ``rerun=False``."""
    from moesweep.runner import run_playbook

    variables = {"backend": backend, "sglang_server_extra_environment": {**SIM_FAST, **SIM_RATES, **(env or {})},
                 "sglang_server_stall_timeout": 5, "sglang_server_ready_timeout": 120,
                 "sglang_bench_enabled": bench, "results_dir": str(results_dir or cluster.results_dir),
                 # not provisioned: no venv with huggingface_hub to stage the model with (the simulator loads none)
                 "restore": "none", "rerun": True, "provision": False, "stage_model": False,
                 **SMALL_BENCH, **extravars}
    run = run_playbook("playbooks/sweep.yml", extravars=variables, inventory=str(cluster.inventory))
    return run, run.hosts[cluster.names[0]]


def wait_for(predicate, timeout=120.0, what="the condition"):
    """Poll ``predicate`` every 0.2 s until it is true; an AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def point_records(cluster: SimCluster, point: str | None = None, kind: str = "point") -> list[dict]:
    """The records the results callback wrote for this cluster (every sweep), oldest first."""
    import json

    out = []
    for path in sorted((cluster.results_dir or Path("/nonexistent")).glob("*/points.jsonl"),
                       key=lambda p: p.stat().st_mtime):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == kind and (point is None or rec.get("point") == point):
                out.append(rec)
    return out


class _ClusterFactory:
    def __init__(self, tmp_root: Path):
        self._made: dict[tuple, SimCluster] = {}
        self._booted: set[str] = set()
        self._owned: dict = {}
        self._tmp = tmp_root

    def __call__(self, name: str, hosts: int = 1, **profile) -> SimCluster:
        from moesweep.sim import hosts as simhosts

        key = (name, hosts, tuple(sorted((k, str(v)) for k, v in profile.items())))
        if key in self._made:
            return self._made[key]
        self._own(name)
        inventory = self._tmp / f"{name}.yml"
        res = simhosts.up(n=hosts, cluster=name, inventory=inventory, log=lambda m: None, **profile)
        cluster = SimCluster(name, res.inventory, res.hosts, results_dir=self._tmp / f"{name}-results")
        self._made[key] = cluster
        if not res.reused:
            self._booted.add(name)
        return cluster

    def _own(self, name: str) -> None:
        """Hold the cluster for this session (an flock, dropped when the session ends or dies): make test's serial
        part runs in two workers, and a cluster that tests of two workers asked for would be booted by one and
        powered off under the other. Such a test is refused here, naming the fix."""
        from moesweep.sim import lockfiles, state

        if name in self._owned:
            return
        lock = lockfiles.try_hold(state.STATE_DIR / f"{name}.pytest-owner")
        if lock is None:
            raise RuntimeError(
                f"the simulated cluster {name!r} is in use by another pytest session or worker: tests that use one "
                "cluster must run in one xdist group (tests/conftest.py, xdist_group_of)")
        self._owned[name] = lock

    def teardown(self) -> None:
        from moesweep.sim import hosts as simhosts

        # Only what this session booted: a cluster found running belongs to someone else.
        for name in self._booted:
            simhosts.down(cluster=name, log=lambda m: None)
        for lock in self._owned.values():
            lock.close()


@pytest.fixture(scope="session")
def sim_clusters(tmp_path_factory):
    """Factory: ``sim_clusters("name", hosts=2, gpu="h200", cuda_toolkits=[])`` boots (once per
    session) a named set of simulated hosts and returns a SimCluster; all are powered off at the end."""
    reason = _can_boot_hosts()
    if reason:
        pytest.skip(reason)
    factory = _ClusterFactory(tmp_path_factory.mktemp("sim-inventories"))
    yield factory
    factory.teardown()


@pytest.fixture(scope="session")
def sim_hosts(sim_clusters) -> SimCluster:
    """Two simulated 8x RTX PRO 6000 (SM120) hosts with sglang 0.5.9 and CUDA 12.8 + 13.1 toolkits,
    like the example inventory's VM. Shared by the session: tests must leave them as they found them."""
    return sim_clusters("shared", hosts=2)


def xdist_group_of(item) -> str:
    """The xdist group of a serial test (make test runs them in two workers with --dist loadgroup, one group in
    one worker): the session's shared clusters are one group each, every other test goes with its module, whose
    module-scoped clusters it may share. _ClusterFactory refuses a cluster asked for from two workers."""
    fixtures = getattr(item, "fixturenames", ())
    for fixture, group in (("bench_cluster", "cluster-bench"), ("sim_hosts", "cluster-shared")):
        if fixture in fixtures:
            return group
    return Path(str(item.path)).relative_to(Path(__file__).parent).as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks added here
def pytest_collection_modifyitems(config, items):
    integration = Path(__file__).parent / "integration"
    for item in items:
        if "sim_hosts" in getattr(item, "fixturenames", ()) or "sim_clusters" in getattr(
            item, "fixturenames", ()
        ):
            item.add_marker(pytest.mark.hosts)
        # After the parallel part of make test, in two workers (or alone): what boots hosts, installs into a
        # shared cache, or waits on simulated servers.
        if (item.get_closest_marker("hosts") or item.get_closest_marker("slow")
                or item.get_closest_marker("alone") or integration in Path(str(item.path)).parents):
            item.add_marker(pytest.mark.serial)
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))


def pytest_configure(config):
    """make test's serial part needs xdist's --dist loadgroup to group; with pytest 9.2 and pytest-xdist up to 3.8.0 it
    silently does not (xdist sets a node id field pytest 9.2 no longer reads), and tests sharing a cluster would be
    spread over both workers. Refused here, before any worker starts, naming the pins."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") != "loadgroup":
        return
    from importlib.metadata import version

    def release(name):
        return tuple(int(x) for x in version(name).split(".")[:3] if x.isdigit())

    if release("pytest") >= (9, 2) and release("pytest-xdist") <= (3, 8, 0):
        raise pytest.UsageError(
            f"--dist loadgroup does not group with pytest {version('pytest')} and pytest-xdist "
            f"{version('pytest-xdist')} (https://github.com/pytest-dev/pytest-xdist/issues/1386): install the pins "
            "of requirements-controller.txt (make venv)")


TEST_STACK = "test-cpu-sglang-0.5.9"


@contextlib.contextmanager
def served_wheelhouse(cluster: SimCluster, stack: str = TEST_STACK, port: int = 0):
    """The test stack's and the benchmark client's locked wheels served on each host's gateway (the air-gapped
    path); yields site.yml's extra vars for them and the port. Every gateway serves on the same port (0: a free
    one), and each host's index URL names its own gateway."""
    from moesweep.sim import wheelhouse

    locks = REPO / "roles" / "sglang_env" / "files" / "locks"
    root = wheelhouse.build([locks / f"{stack}.txt", locks / "client-sglang-0.5.9.txt"])
    gateways = sorted({host.gateway for host in cluster.hosts})
    with contextlib.ExitStack() as servers:
        url = servers.enter_context(wheelhouse.serve(root, gateways[0], port))
        port = int(url.rsplit(":", 1)[1])
        for gateway in gateways[1:]:
            servers.enter_context(wheelhouse.serve(root, gateway, port))
        yield {"sglang_env_stack": stack,
               "sglang_env_index_url": "http://{{ moesweep_sim_gateway }}:" + f"{port}/simple/",
               "sglang_env_trusted_hosts": ["{{ moesweep_sim_gateway }}"]}, port


def provision(cluster: SimCluster, stack: str = TEST_STACK) -> subprocess.CompletedProcess:
    """site.yml on the cluster from a served wheelhouse, as a real host gets the test stack's server venv and the
    benchmark client venv (cached wheels). One run for every host of the cluster (Ansible's forks install them
    in parallel). Kept in ``cluster.first_converge`` with its wall seconds and the wheelhouse's port (the index
    URL is part of the provenance record: a later run that should change nothing serves the wheels at the same
    URL)."""
    import json

    with served_wheelhouse(cluster, stack) as (extra, port):
        t0 = time.monotonic()
        proc = cluster.playbook(str(REPO / "site.yml"), "-e", json.dumps(extra))
        cluster.first_converge = (proc, time.monotonic() - t0, port)
        return proc


@pytest.fixture(scope="session")
def bench_cluster(sim_clusters) -> SimCluster:
    """One simulated 8x RTX PRO 6000 host provisioned with site.yml (CUDA toolkit, test stack, benchmark
    client): sweeps run their benchmarks here, and test_site_provision checks that first converge and the runs
    after it. Tests leave it serving a known-good point, as a sweep does."""
    cluster = sim_clusters("bench", hosts=1)
    probe = cluster.sh(cluster.names[0], "test -x /opt/moesweep/venvs/client/bin/python")
    if probe.returncode != 0:
        provision(cluster)
    return cluster
