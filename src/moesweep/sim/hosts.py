"""Simulated GPU hosts: real Debian 12 systemd hosts booted with systemd-nspawn, one network
namespace each, reachable over real SSH at 10.213.I.2.

Each host boots the cached image read-only (``--volatile=overlay``: writes live in a tmpfs that is
dropped at poweroff), carries the simulator payload read-only at ``/opt/moesweep-sim`` and its
profile at ``/etc/moesweep-sim/profile.json``.  The namespaces have no default route: a host reaches
only the machine side of its own veth (10.213.I.1), where tests serve package indexes, exactly like
an air-gapped GPU VM reaching an internal mirror.  Nothing binds the machine's own port 22.

State lives under ``/run/moesweep/sim`` (gone at reboot, like the namespaces themselves).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from moesweep._collection import REPO_ROOT
from moesweep.sim import image
from moesweep.util import atomic_write_text

STATE_DIR = Path(os.environ.get("MOESWEEP_SIM_STATE_DIR", "/run/moesweep/sim"))
NETNS_PREFIX = "moesweep-h"
SUBNET = "10.213"
MAX_INDEX = 250
GPU_MODELS = ("rtx-pro-6000", "h200", "h200-x2")
DEFAULT_DRIVER = {"rtx-pro-6000": "570.172.08", "h200": "570.172.08", "h200-x2": "570.172.08"}
SGLANG_VERSIONS = ("0.5.9", "0.5.23")


class SimError(RuntimeError):
    """A clear, user-facing failure: what went wrong and how to fix it."""


@dataclass
class Host:
    name: str
    index: int
    cluster: str
    gpu_model: str
    gpu_count: int
    sglang_version: str
    cuda_toolkits: list[str]
    driver_version: str
    nspawn_pid: int = 0
    leader_pid: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{SUBNET}.{self.index}.2"

    @property
    def gateway(self) -> str:
        return f"{SUBNET}.{self.index}.1"

    @property
    def netns(self) -> str:
        return f"{NETNS_PREFIX}{self.index}"

    @property
    def veth_host(self) -> str:
        return f"msw-vh{self.index}"

    @property
    def veth_cont(self) -> str:
        return f"msw-vc{self.index}"

    @property
    def dir(self) -> Path:
        return STATE_DIR / "hosts" / self.name

    def profile(self) -> dict:
        return {
            "simulated": True,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "sglang_version": self.sglang_version,
            "cuda_toolkits": list(self.cuda_toolkits),
            "driver_version": self.driver_version,
            "host_index": self.index,
            "host_name": self.name,
        }


def _run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------- state


def _locked(fn):
    """Serialise state changes between processes (parallel test sessions, molecule, a user's shell):
    the state file, host indices and cgroup names are shared by every cluster on the machine."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        with open(STATE_DIR / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return fn(*args, **kwargs)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    return wrapper


def _state_file() -> Path:
    return STATE_DIR / "hosts.json"


def load_hosts() -> list[Host]:
    try:
        data = json.loads(_state_file().read_text())
    except FileNotFoundError:
        return []
    return [Host(**h) for h in data.get("hosts", [])]


def _save_hosts(hosts: list[Host]) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    atomic_write_text(_state_file(), json.dumps({"hosts": [asdict(h) for h in hosts]}, indent=2) + "\n")


# ---------------------------------------------------------------- preconditions


def check_prerequisites() -> None:
    problems = []
    if os.geteuid() != 0:
        problems.append("simulated hosts need root (network namespaces, systemd-nspawn): run as root")
    for tool, pkg in (
        ("systemd-nspawn", "systemd-container"),
        ("debootstrap", "debootstrap"),
        ("zstd", "zstd"),
        ("ip", "iproute2"),
        ("nsenter", "util-linux"),
        ("ssh-keygen", "openssh-client"),
        ("ssh", "openssh-client"),
    ):
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found: apt-get install -y {pkg}  (or `make sim-deps`)")
    if problems:
        raise SimError("cannot start simulated hosts:\n  " + "\n  ".join(problems))


def ssh_key() -> Path:
    key = image.cache_root() / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = key.with_name("id_ed25519.tmp")
        for p in (tmp, tmp.with_suffix(".tmp.pub")):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "moesweep-sim", "-f", str(tmp)])
        os.replace(str(tmp) + ".pub", str(key) + ".pub")
        os.replace(tmp, key)
    return key


# ---------------------------------------------------------------- payload


def _payload_dir(cluster: str) -> Path:
    return STATE_DIR / "payload" / cluster


def _build_payload(cluster: str) -> Path:
    """Copy the simulator and the flag schema data into one read-only tree for the cluster's hosts.

    One tree per cluster: hosts bind-mount the directory itself, so replacing it while another
    cluster's hosts run would leave them looking at a deleted directory."""
    src = REPO_ROOT / "simulator"
    if not src.is_dir():
        raise SimError(f"simulator sources missing at {src}: is this a complete moesweep checkout?")
    dest = _payload_dir(cluster)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{cluster}.partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "README.md"))
    data = REPO_ROOT / "data" / "sglang"
    if data.is_dir():
        shutil.copytree(data, tmp / "data" / "sglang")
    if dest.exists():
        old = dest.with_name(f"{cluster}.old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)
    return dest


# ---------------------------------------------------------------- network


def _netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def _setup_network(h: Host) -> None:
    _teardown_network(h)
    _run(["ip", "netns", "add", h.netns])
    _run(["ip", "link", "add", h.veth_host, "type", "veth", "peer", "name", h.veth_cont, "netns", h.netns])
    _run(["ip", "addr", "add", f"{h.gateway}/24", "dev", h.veth_host])
    _run(["ip", "link", "set", h.veth_host, "up"])
    _run(["ip", "-n", h.netns, "link", "set", "lo", "up"])
    _run(["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.veth_cont])
    _run(["ip", "-n", h.netns, "link", "set", h.veth_cont, "up"])
    # Deliberately no default route: the host reaches 10.213.I.1 and nothing else.


def _teardown_network(h: Host) -> None:
    if Path("/sys/class/net", h.veth_host).exists():
        _run(["ip", "link", "del", h.veth_host], check=False)
    if _netns_exists(h.netns):
        _run(["ip", "netns", "del", h.netns], check=False)


# ---------------------------------------------------------------- boot / stop


def _nsenter(h: Host, *cmd: str, check: bool = True, timeout: float = 30, input: str | None = None):
    return subprocess.run(
        ["nsenter", "-t", str(h.leader_pid), "-a", "--", *cmd],
        check=check,
        text=True,
        capture_output=True,
        timeout=timeout,
        input=input,
    )


CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))


def _cgroup_dirs(h: Host) -> list[Path]:
    return [root / "moesweep-sim" / h.name for root in CGROUP_ROOTS if (root / "cgroup.procs").exists()]


def _make_cgroups(h: Host) -> list[Path]:
    """Give each host its own cgroup subtree. Without a host systemd, nspawn --keep-unit leaves every
    container in the caller's cgroup: their systemds then share one tree and fight over it
    (seen: boot units failing with status=219/CGROUP when hosts boot together)."""
    dirs = _cgroup_dirs(h)
    _remove_cgroups(h)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def _remove_cgroups(h: Host) -> None:
    for d in _cgroup_dirs(h):
        if not d.exists():
            continue
        # Children first: the container's systemd created its own slices below ours.
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


def _start(h: Host, rootfs: Path, payload: Path) -> None:
    h.dir.mkdir(parents=True, exist_ok=True)
    etc = h.dir / "etc"
    etc.mkdir(exist_ok=True)
    atomic_write_text(etc / "profile.json", json.dumps(h.profile(), indent=2) + "\n")
    _setup_network(h)
    cgroups = _make_cgroups(h)

    def enter_cgroup() -> None:
        for d in cgroups:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    log = open(h.dir / "console.log", "w")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [
            "systemd-nspawn",
            "-b",
            "-q",
            "-D",
            str(rootfs),
            "-M",
            h.name,
            "--register=no",
            "--keep-unit",
            "--volatile=overlay",
            "--resolv-conf=off",
            "--timezone=off",
            f"--network-namespace-path=/run/netns/{h.netns}",
            "--console=read-only",
            f"--bind-ro={payload}:/opt/moesweep-sim",
            f"--bind-ro={etc}:/etc/moesweep-sim",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=enter_cgroup,
    )
    log.close()
    h.nspawn_pid = proc.pid


def _wait_leader(h: Host, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not _alive(h.nspawn_pid):
            raise SimError(f"{h.name}: systemd-nspawn exited during boot; see {h.dir / 'console.log'}")
        r = _run(["pgrep", "-x", "systemd", "-P", str(h.nspawn_pid)], check=False)
        if r.stdout.strip():
            h.leader_pid = int(r.stdout.split()[0])
            return
        time.sleep(0.05)
    raise SimError(f"{h.name}: no systemd PID 1 appeared in time; see {h.dir / 'console.log'}")


def _wait_running(h: Host, deadline: float) -> str:
    state = ""
    while time.monotonic() < deadline:
        r = _nsenter(h, "systemctl", "is-system-running", check=False)
        state = r.stdout.strip()
        if state in ("running", "degraded"):
            return state
        time.sleep(0.1)
    raise SimError(f"{h.name}: systemd did not reach 'running' (last state {state!r})")


def _repair_degraded(h: Host, log) -> None:
    """A boot-time oneshot (seen: systemd-tmpfiles-setup, systemd-user-sessions) occasionally fails
    when several hosts boot at once on 2 loaded cores. Restart it once; a host that stays degraded
    is reported with the unit's journal rather than handed to tests half-booted."""
    failed = _nsenter(h, "systemctl", "--failed", "--no-legend", "--plain", check=False).stdout.split()
    units = [u for u in failed if "." in u and not u.startswith("●")]
    for unit in units:
        journal = _nsenter(h, "journalctl", "-b", "-u", unit, "--no-pager", "-n", "20", check=False).stdout
        _nsenter(h, "systemctl", "reset-failed", unit, check=False)
        r = _nsenter(h, "systemctl", "restart", unit, check=False)
        if r.returncode != 0:
            raise SimError(f"{h.name}: boot unit {unit} failed and does not restart:\n{journal}")
        log(f"{h.name}: boot unit {unit} had failed and was restarted; its journal:\n{journal.strip()}")
    state = _nsenter(h, "systemctl", "is-system-running", check=False).stdout.strip()
    if state != "running":
        raise SimError(f"{h.name}: systemd is {state!r} after repairing {units}")


def _provision(h: Host, key: Path) -> None:
    pub = Path(str(key) + ".pub").read_text()
    script = (
        "set -e; install -d -m 700 /root/.ssh; "
        "cat > /root/.ssh/authorized_keys; chmod 600 /root/.ssh/authorized_keys; "
        f"hostname {h.name}; echo {h.name} > /etc/hostname; "
        "if [ -x /opt/moesweep-sim/bin/sim-init ]; then /opt/moesweep-sim/bin/sim-init; fi"
    )
    r = _nsenter(h, "/bin/sh", "-c", script, check=False, input=pub)
    if r.returncode != 0:
        raise SimError(f"{h.name}: provisioning failed: {r.stderr.strip() or r.stdout.strip()}")


def _wait_ssh(h: Host, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((h.address, 22), timeout=0.5) as s:
            if s.recv(4).startswith(b"SSH-"):
                return
        time.sleep(0.1)
    raise SimError(f"{h.name}: sshd did not answer on {h.address}:22")


def _stop(h: Host, timeout: float = 15) -> None:
    if _alive(h.nspawn_pid):
        # SIGTERM to systemd-nspawn = orderly poweroff of the container.
        with contextlib.suppress(ProcessLookupError):
            os.kill(h.nspawn_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(h.nspawn_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(h.nspawn_pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(h.nspawn_pid, signal.SIGKILL)
            while _alive(h.nspawn_pid):
                time.sleep(0.05)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(h.nspawn_pid, os.WNOHANG)
    _teardown_network(h)
    _remove_cgroups(h)
    shutil.rmtree(h.dir, ignore_errors=True)


# ---------------------------------------------------------------- inventory


def default_inventory_path(cluster: str) -> Path:
    if cluster == "default":
        return REPO_ROOT / "inventory" / "sim.yml"
    return STATE_DIR / "clusters" / cluster / "inventory.yml"


SIM_COMMAND = ["/opt/moesweep-sim/bin/sglang-sim"]
SIM_TOKENIZER = "/opt/moesweep-sim/tokenizer"
INVENTORY_HEADER = (
    "---\n"
    "# Written by `moesweep sim up`: SIMULATED GPU hosts (systemd-nspawn, no GPU).\n"
    "# Regenerated on every `sim up`; `moesweep sim down` removes it.\n"
)


def inventory_data(hosts: list[Host], key: Path) -> dict:
    """The inventory of simulated hosts: group gpu_hosts, each host's simulated profile, and the role
    variables that differ from a real host (ExecStart runs the simulator; its sglang version is declared)."""
    members = {}
    for h in hosts:
        members[h.name] = {
            "ansible_host": h.address,
            "moesweep_sim_gpu_model": h.gpu_model,
            "moesweep_sim_gpu_count": h.gpu_count,
            "moesweep_sim_sglang_version": h.sglang_version,
            "moesweep_sim_cuda_toolkits": list(h.cuda_toolkits),
            "moesweep_sim_gateway": h.gateway,
            "sglang_server_sglang_version": h.sglang_version,
        }
    return {"all": {"children": {"gpu_hosts": {
        "hosts": members,
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key),
            "ansible_python_interpreter": "/usr/bin/python3",
            "moesweep_simulated": True,
            "sglang_server_command": list(SIM_COMMAND),
            "sglang_bench_tokenizer": SIM_TOKENIZER,
        },
    }}}}


def render_inventory(hosts: list[Host], key: Path) -> str:
    import yaml

    return INVENTORY_HEADER + yaml.safe_dump(inventory_data(hosts, key), sort_keys=False, default_flow_style=False)


# ---------------------------------------------------------------- public API


@dataclass
class UpResult:
    hosts: list[Host]
    inventory: Path
    boot_seconds: float
    reused: bool


def _validate(n: int, gpu: str, gpu_count: int, sglang_version: str, toolkits: list[str]) -> None:
    if not 1 <= n <= 16:
        raise SimError(f"--hosts must be between 1 and 16 (got {n})")
    if gpu not in GPU_MODELS:
        raise SimError(f"unknown --gpu {gpu!r}: choose one of {', '.join(GPU_MODELS)}")
    if not 1 <= gpu_count <= 8:
        raise SimError(f"--gpu-count must be between 1 and 8 (got {gpu_count})")
    if sglang_version not in SGLANG_VERSIONS:
        raise SimError(
            f"unknown --sglang-version {sglang_version!r}: the simulator emulates {', '.join(SGLANG_VERSIONS)}"
        )
    for t in toolkits:
        parts = t.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise SimError(f"bad CUDA toolkit version {t!r} in --cuda-toolkits: use X.Y, e.g. 12.8,13.1")


@_locked
def up(
    n: int = 1,
    gpu: str = "rtx-pro-6000",
    gpu_count: int | None = None,
    sglang_version: str = "0.5.9",
    cuda_toolkits: list[str] | None = None,
    cluster: str = "default",
    inventory: Path | None = None,
    driver_version: str | None = None,
    boot_timeout: float = 90,
    log=print,
) -> UpResult:
    """Boot ``n`` simulated hosts for ``cluster``; idempotent when an identical set already runs."""
    if gpu_count is None:
        gpu_count = 2 if gpu == "h200-x2" else 8
    toolkits = ["12.8", "13.1"] if cuda_toolkits is None else list(cuda_toolkits)
    _validate(n, gpu, gpu_count, sglang_version, toolkits)
    if not cluster.replace("-", "").replace("_", "").isalnum() or len(cluster) > 20:
        raise SimError(f"bad cluster name {cluster!r}: letters, digits, - and _ only, at most 20")
    check_prerequisites()
    inventory = inventory or default_inventory_path(cluster)
    key = ssh_key()
    t0 = time.monotonic()
    all_hosts = [h for h in load_hosts() if _alive(h.nspawn_pid)]
    mine = [h for h in all_hosts if h.cluster == cluster]
    wanted = {
        "gpu_model": gpu,
        "gpu_count": gpu_count,
        "sglang_version": sglang_version,
        "cuda_toolkits": toolkits,
    }
    if mine:
        same = len(mine) == n and all(
            all(getattr(h, k) == v for k, v in wanted.items()) for h in mine
        )
        if same and all(_healthy(h) for h in mine):
            _write_inventory(inventory, mine, key)
            return UpResult(mine, inventory, time.monotonic() - t0, reused=True)
        log(f"cluster {cluster!r} runs a different set of hosts: replacing it")
        _down(cluster, log)
        all_hosts = [h for h in load_hosts() if _alive(h.nspawn_pid)]
    used = {h.index for h in all_hosts}
    free = [i for i in range(1, MAX_INDEX + 1) if i not in used and not _netns_exists(f"{NETNS_PREFIX}{i}")]
    if len(free) < n:
        raise SimError("no free host index left in 10.213.0.0/16: run `moesweep sim down --all`")
    rootfs = image.build(log=log)
    payload = _build_payload(cluster)
    prefix = "sim-gpu" if cluster == "default" else f"sim-{cluster}"
    new = [
        Host(
            name=f"{prefix}-{i + 1}",
            index=free[i],
            cluster=cluster,
            driver_version=driver_version or DEFAULT_DRIVER[gpu],
            **wanted,
        )
        for i in range(n)
    ]
    names_in_use = {h.name for h in all_hosts}
    clash = [h.name for h in new if h.name in names_in_use]
    if clash:
        raise SimError(f"host names {clash} already in use by another cluster")
    try:
        for h in new:
            _start(h, rootfs, payload)
        _save_hosts(all_hosts + new)
        deadline = time.monotonic() + boot_timeout
        for h in new:
            _wait_leader(h, deadline)
        _save_hosts(all_hosts + new)
        for h in new:
            state = _wait_running(h, deadline)
            if state == "degraded":
                _repair_degraded(h, log)
            _provision(h, key)
        for h in new:
            _wait_ssh(h, deadline)
    except BaseException:
        for h in new:
            _stop(h)
        _save_hosts(all_hosts)
        raise
    _write_inventory(inventory, new, key)
    return UpResult(new, inventory, time.monotonic() - t0, reused=False)


def _healthy(h: Host) -> bool:
    if not _alive(h.nspawn_pid):
        return False
    with contextlib.suppress(OSError), socket.create_connection((h.address, 22), timeout=0.5):
        return True
    return False


def _write_inventory(path: Path, hosts: list[Host], key: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, render_inventory(hosts, key))
    marker = STATE_DIR / "clusters" / hosts[0].cluster / "inventory-path"
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, str(path) + "\n")


def _is_mountpoint(path: Path) -> bool:
    # os.path.ismount misses a bind mount of a directory onto itself, which is what `ip netns` makes.
    with open("/proc/self/mountinfo") as fh:
        return any(line.split()[4] == str(path) for line in fh)


def _orphan_namespaces() -> list[int]:
    found = []
    netns_dir = Path("/run/netns")
    if netns_dir.is_dir():
        for entry in netns_dir.iterdir():
            if entry.name.startswith(NETNS_PREFIX) and entry.name[len(NETNS_PREFIX):].isdigit():
                found.append(int(entry.name[len(NETNS_PREFIX):]))
    return found


@_locked
def down(cluster: str | None = "default", log=print) -> list[str]:
    """Power off the cluster's hosts (all clusters with ``cluster=None``). Idempotent: succeeds when
    nothing runs, and also removes what an interrupted run left behind (netns, veth, state)."""
    return _down(cluster, log)


def _down(cluster: str | None, log) -> list[str]:
    if cluster is not None and (not cluster.replace("-", "").replace("_", "").isalnum() or len(cluster) > 20):
        raise SimError(f"bad cluster name {cluster!r}: letters, digits, - and _ only, at most 20")
    hosts = load_hosts()
    gone = [h for h in hosts if cluster is None or h.cluster == cluster]
    keep = [h for h in hosts if h not in gone]
    for h in gone:
        _stop(h)
    if cluster is None:
        # Leftovers of a crashed run that never reached the state file.
        for idx in _orphan_namespaces():
            _teardown_network(Host("orphan", idx, "", "", 0, "", [], ""))
    _save_hosts(keep)
    clusters = {h.cluster for h in gone} | ({cluster} if cluster else set())
    for c in clusters:
        marker = STATE_DIR / "clusters" / c / "inventory-path"
        with contextlib.suppress(FileNotFoundError):
            Path(marker.read_text().strip()).unlink()
        shutil.rmtree(STATE_DIR / "clusters" / c, ignore_errors=True)
        shutil.rmtree(_payload_dir(c), ignore_errors=True)
    if not keep:
        with contextlib.suppress(FileNotFoundError):
            _state_file().unlink()
        shutil.rmtree(STATE_DIR / "payload", ignore_errors=True)
        netns_dir = Path("/run/netns")
        if netns_dir.is_dir() and not any(netns_dir.iterdir()) and _is_mountpoint(netns_dir):
            _run(["umount", str(netns_dir)], check=False)
    return [h.name for h in gone]


def status() -> list[dict]:
    rows = []
    for h in load_hosts():
        alive = _alive(h.nspawn_pid)
        system = ""
        if alive and _alive(h.leader_pid):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                system = _nsenter(h, "systemctl", "is-system-running", check=False, timeout=5).stdout.strip()
        rows.append(
            {
                "name": h.name,
                "cluster": h.cluster,
                "address": h.address,
                "gpu": f"{h.gpu_count}x {h.gpu_model}",
                "sglang": h.sglang_version,
                "toolkits": ",".join(h.cuda_toolkits) or "-",
                "state": system or ("running" if alive else "gone"),
                "ssh": _healthy(h) if alive else False,
            }
        )
    return rows


def nsenter(name: str, *cmd: str, check: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a command inside a simulated host without SSH (tests, debugging)."""
    for h in load_hosts():
        if h.name == name:
            return _nsenter(h, *cmd, check=check, timeout=timeout)
    raise SimError(f"no simulated host named {name!r}: see `moesweep sim status`")
