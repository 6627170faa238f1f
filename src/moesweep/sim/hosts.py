"""Simulated GPU hosts: real Debian 12 systemd hosts booted with systemd-nspawn, one network
namespace each, reachable over real SSH at 10.213.I.2. The public API: :func:`up`, :func:`down`,
:func:`status`, :func:`nsenter`, :func:`load_hosts`.

Each host boots the cached image read-only, carries the simulator payload read-only at
``/opt/moesweep-sim`` and its profile at ``/etc/moesweep-sim/profile.json`` (:mod:`.image`,
:mod:`.nspawn`). A host reaches the machine side of its own veth (10.213.I.1), where tests serve
package indexes, and the other hosts of its cluster, and nothing else: no default route, like an
air-gapped GPU VM reaching an internal mirror (:mod:`.network`). Nothing binds the machine's own port 22.
State and locking: :mod:`.state`; the inventory and what moesweep may overwrite or remove: :mod:`.inventory`.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from moesweep.sim import hub, image, network, nspawn, state, wheelhouse
from moesweep.sim import inventory as _inventory
from moesweep.sim.inventory import (
    SIM_COMMAND,
    SIM_TOKENIZER,
    default_inventory_path,
    inventory_data,
    render_inventory,
)
from moesweep.sim.model import (
    DEFAULT_DRIVER,
    GPU_MODELS,
    MAX_INDEX,
    NETNS_PREFIX,
    SGLANG_VERSIONS,
    SUBNET,
    Host,
    SimError,
    check_cluster_name,
    check_up_args,
    host_name,
    parse_knobs,
)
from moesweep.sim.nspawn import check_prerequisites
from moesweep.sim.state import load_hosts

__all__ = [
    "DEFAULT_DRIVER", "GPU_MODELS", "MAX_INDEX", "NETNS_PREFIX", "SGLANG_VERSIONS", "SIM_COMMAND",
    "SIM_TOKENIZER", "SUBNET", "Host", "SimError", "UpResult", "check_prerequisites", "default_inventory_path",
    "down", "inventory_data", "load_hosts", "nsenter", "render_inventory", "ssh_key", "status", "up",
]

ssh_key = image.ssh_key


@dataclass
class UpResult:
    hosts: list[Host]
    inventory: Path
    boot_seconds: float
    reused: bool


def _live(log) -> list[Host]:
    return [h for h in state.load_hosts(warn=log) if nspawn.alive(h.nspawn_pid)]


@state.locked
def up(
    n: int = 1,
    gpu: str = "rtx-pro-6000",
    gpu_count: int | None = None,
    sglang_version: str = "0.5.9",
    cuda_toolkits: list[str] | None = None,
    cluster: str = "default",
    inventory: Path | None = None,
    driver_version: str | None = None,
    knobs: list[str] | dict | None = None,
    boot_timeout: float = 90,
    log=print,
) -> UpResult:
    """Boot ``n`` simulated hosts for ``cluster``; idempotent when an identical set already runs.
    Everything the user passed is checked before anything is started or written."""
    if gpu_count is None:
        gpu_count = 2 if gpu == "h200-x2" else 8
    toolkits = ["12.8", "13.1"] if cuda_toolkits is None else list(cuda_toolkits)
    check_up_args(n, gpu, gpu_count, sglang_version, toolkits)
    knobs = parse_knobs(knobs)
    check_cluster_name(cluster)
    inventory = Path(inventory).absolute() if inventory else default_inventory_path(cluster)
    all_hosts = _live(log)
    _inventory.check_target(inventory, cluster, {h.cluster for h in all_hosts})
    check_prerequisites()
    key = image.ssh_key()
    t0 = time.monotonic()
    mine = [h for h in all_hosts if h.cluster == cluster]
    wanted = {
        "gpu_model": gpu,
        "gpu_count": gpu_count,
        "sglang_version": sglang_version,
        "cuda_toolkits": toolkits,
    }
    if mine:
        same = len(mine) == n and all(
            all(getattr(h, k) == v for k, v in wanted.items()) and h.extra.get("knobs", {}) == knobs
            and (driver_version is None or h.driver_version == driver_version) for h in mine
        )
        if same and all(nspawn.healthy(h) for h in mine):
            _serve_wheelhouse(mine, log)
            _serve_hub(mine, log)
            state.save_hosts(all_hosts)
            _inventory.write(inventory, mine, key)
            return UpResult(mine, inventory, time.monotonic() - t0, reused=True)
        log(f"cluster {cluster!r} runs a different set of hosts: replacing it")
        _down(cluster, log)
        all_hosts = _live(log)
    used = {h.index for h in all_hosts}
    free = [i for i in range(1, MAX_INDEX + 1) if i not in used and not network.netns_exists(f"{NETNS_PREFIX}{i}")]
    if len(free) < n:
        raise SimError(f"no free host index left in {SUBNET}.0.0/16: power clusters off with "
                       "`moesweep sim down --cluster NAME` (see `moesweep sim status`)")
    new = [
        Host(
            name=host_name(cluster, i + 1),
            index=free[i],
            cluster=cluster,
            driver_version=driver_version or DEFAULT_DRIVER[gpu],
            extra={"knobs": knobs} if knobs else {},
            **wanted,
        )
        for i in range(n)
    ]
    names_in_use = {h.name for h in all_hosts}
    clash = [h.name for h in new if h.name in names_in_use]
    if clash:
        raise SimError(f"host names {clash} already in use by another cluster")
    rootfs = image.build(log=log)
    payload = image.build_payload(cluster)
    try:
        for h in new:
            network.setup(h)
        network.link_cluster(new, log=log)
        for h in new:
            nspawn.start(h, rootfs, payload)
        state.save_hosts(all_hosts + new)
        deadline = time.monotonic() + boot_timeout
        for h in new:
            nspawn.wait_leader(h, deadline)
        state.save_hosts(all_hosts + new)
        for h in new:
            if nspawn.wait_running(h, deadline) == "degraded":
                nspawn.repair_degraded(h, log)
            nspawn.provision(h, key)
        for h in new:
            nspawn.wait_ssh(h, deadline)
    except BaseException:
        for h in new:
            _stop(h)
        state.save_hosts(all_hosts)
        raise
    _serve_wheelhouse(new, log)
    _serve_hub(new, log)
    state.save_hosts(all_hosts + new)
    _inventory.write(inventory, new, key)
    return UpResult(new, inventory, time.monotonic() - t0, reused=False)


def _serve_wheelhouse(hosts: list[Host], log) -> None:
    """Serve the test stack's wheelhouse on each host's gateway (what a real VM downloads from its mirror), so that
    site.yml and sweep.yml provision the host with nothing but the inventory; a host keeps its running server."""
    try:
        wheelhouse.build(wheelhouse.sim_locks())
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        log(f"the test stack's wheelhouse could not be built ({exc}): provision these hosts with your own index "
            "(-e sglang_env_index_url=...)")
        return
    for h in hosts:
        if h.extra.get("wheelhouse_pid") and wheelhouse.answers(h.gateway):
            continue
        log_path = state.host_dir(h) / "wheelhouse.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            pid = wheelhouse.start_server(h.gateway, log_path)
        except RuntimeError as exc:
            log(str(exc))
            continue
        h.extra = dict(h.extra, wheelhouse_pid=pid or h.extra.get("wheelhouse_pid", 0),
                       wheelhouse_url=f"http://{h.gateway}:{wheelhouse.PORT}")


def _serve_hub(hosts: list[Host], log) -> None:
    """Serve the simulated Hugging Face hub (a tiny stand-in of the default model) on each host's gateway, so that
    sweep.yml stages the model from it through HF_ENDPOINT, as a real air-gapped VM stages it from a mirror."""
    try:
        hub.write_repo()
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"the simulated hub's model repository could not be written ({exc}): sweeps on these hosts refuse their "
            "points until a model is staged (a local directory in sglang_server_flags.model-path)")
        return
    for h in hosts:
        if h.extra.get("hub_pid") and hub.answers(h.gateway):
            continue
        log_path = state.host_dir(h) / "hub.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            pid = hub.start_server(h.gateway, log_path)
        except RuntimeError as exc:
            log(str(exc))
            continue
        h.extra = dict(h.extra, hub_pid=pid or h.extra.get("hub_pid", 0), hub_url=f"http://{h.gateway}:{hub.PORT}")


def _stop(h: Host) -> None:
    wheelhouse.stop_server(int(h.extra.get("wheelhouse_pid") or 0))
    hub.stop_server(int(h.extra.get("hub_pid") or 0))
    nspawn.stop(h)
    network.teardown(h)


@state.locked
def down(cluster: str | None = "default", log=print) -> list[str]:
    """Power off the cluster's hosts (all clusters with ``cluster=None``). Idempotent: succeeds when
    nothing runs, and also removes what an interrupted run left behind (netns, veth, rules, state).
    Removes nothing outside the state directory but the inventories `sim up` wrote for the cluster."""
    if cluster is not None:
        check_cluster_name(cluster)
    return _down(cluster, log)


def _down(cluster: str | None, log) -> list[str]:
    hosts = state.load_hosts(warn=log)
    gone = [h for h in hosts if cluster is None or h.cluster == cluster]
    keep = [h for h in hosts if h not in gone]
    for h in gone:
        _stop(h)
    if cluster is None:
        # Leftovers of a crashed run that never reached the state file.
        for idx in network.orphan_indices():
            network.teardown(Host(f"orphan-{idx}", idx, "", "", 0, "", [], ""))
    state.save_hosts(keep)
    clusters = {h.cluster for h in gone} | ({cluster} if cluster else set())
    if cluster is None:
        clusters |= _recorded_clusters()
    for c in sorted(clusters):
        _inventory.remove(c, log)
        state.forget_cluster(c)
    if not keep:
        state.forget_all()
        network.release_netns_dir()
    return [h.name for h in gone]


def _recorded_clusters() -> set[str]:
    d = state.STATE_DIR / "clusters"
    found = set()
    if d.is_dir():
        for e in d.iterdir():
            with contextlib.suppress(SimError):
                found.add(check_cluster_name(e.name))
    return found


def status() -> list[dict]:
    rows = []
    for h in state.load_hosts():
        alive = nspawn.alive(h.nspawn_pid)
        system = ""
        if alive and nspawn.alive(h.leader_pid):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                system = nspawn.nsenter(h, "systemctl", "is-system-running", check=False, timeout=5).stdout.strip()
        rows.append(
            {
                "name": h.name,
                "cluster": h.cluster,
                "address": h.address,
                "gpu": f"{h.gpu_count}x {h.gpu_model}",
                "sglang": h.sglang_version,
                "toolkits": ",".join(h.cuda_toolkits) or "-",
                "state": system or ("running" if alive else "gone"),
                "ssh": nspawn.healthy(h) if alive else False,
            }
        )
    return rows


def nsenter(name: str, *cmd: str, check: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a command inside a simulated host without SSH (tests, debugging)."""
    for h in state.load_hosts():
        if h.name == name:
            return nspawn.nsenter(h, *cmd, check=check, timeout=timeout)
    raise SimError(f"no simulated host named {name!r}: see `moesweep sim status`")
