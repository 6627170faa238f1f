"""A simulated host's life as a process: systemd-nspawn booting the cached image read-only
(``--volatile=overlay``: writes live in a tmpfs dropped at poweroff) inside the host's network namespace and
its own cgroup subtree; waiting for its systemd and sshd; provisioning; an orderly poweroff."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from moesweep.sim import state
from moesweep.sim.model import Host, SimError
from moesweep.util import atomic_write_text

CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))
PREREQUISITES = (
    ("systemd-nspawn", "systemd-container"),
    ("debootstrap", "debootstrap"),
    ("zstd", "zstd"),
    ("ip", "iproute2"),
    ("nsenter", "util-linux"),
    ("ssh-keygen", "openssh-client"),
    ("ssh", "openssh-client"),
)


def run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def alive(pid: int) -> bool:
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


def check_prerequisites() -> None:
    problems = []
    if os.geteuid() != 0:
        problems.append("simulated hosts need root (network namespaces, systemd-nspawn): run as root")
    for tool, pkg in PREREQUISITES:
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found: apt-get install -y {pkg}  (or `make sim-deps`)")
    if problems:
        raise SimError("cannot start simulated hosts:\n  " + "\n  ".join(problems))


def nsenter(h: Host, *cmd: str, check: bool = True, timeout: float = 30, input: str | None = None):
    return subprocess.run(
        ["nsenter", "-t", str(h.leader_pid), "-a", "--", *cmd],
        check=check,
        text=True,
        capture_output=True,
        timeout=timeout,
        input=input,
    )


# ---------------------------------------------------------------- cgroups


def _cgroup_dirs(h: Host) -> list[Path]:
    dirs = []
    for root in CGROUP_ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        base = root / "moesweep-sim"
        d = base / h.name
        if Path(os.path.realpath(d)).parent != Path(os.path.realpath(base)):
            raise SimError(f"{h.name!r}: its cgroup {d} would not be a child of {base}")
        dirs.append(d)
    return dirs


def make_cgroups(h: Host) -> list[Path]:
    """Give each host its own cgroup subtree. Without a host systemd, nspawn --keep-unit leaves every
    container in the caller's cgroup: their systemds then share one tree and fight over it
    (seen: boot units failing with status=219/CGROUP when hosts boot together)."""
    dirs = _cgroup_dirs(h)
    remove_cgroups(h)
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


def remove_cgroups(h: Host) -> None:
    for d in _cgroup_dirs(h):
        if not d.exists():
            continue
        # Children first: the container's systemd created its own slices below ours.
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


# ---------------------------------------------------------------- boot


def memlock_args(knobs: dict) -> list[str]:
    """The memlock knob: the container's hard limit, and no CAP_SYS_RESOURCE to raise it, as in an unprivileged
    container (systemd then gives a unit asking for LimitMEMLOCK=infinity its own hard limit)."""
    if not knobs.get("memlock_kb"):
        return []
    size = int(knobs["memlock_kb"]) * 1024
    return [f"--rlimit=RLIMIT_MEMLOCK={size}", "--drop-capability=CAP_SYS_RESOURCE"]


def start(h: Host, rootfs: Path, payload: Path) -> None:
    """Start systemd-nspawn for ``h`` in its (already created) network namespace."""
    hdir = state.host_dir(h)
    hdir.mkdir(parents=True, exist_ok=True)
    etc = hdir / "etc"
    etc.mkdir(exist_ok=True)
    atomic_write_text(etc / "profile.json", json.dumps(h.profile(), indent=2) + "\n")
    cgroups = make_cgroups(h)

    def enter_cgroup() -> None:
        for d in cgroups:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    log = open(hdir / "console.log", "w")  # noqa: SIM115 - handed to the child
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
            *memlock_args(h.extra.get("knobs", {})),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=enter_cgroup,
    )
    log.close()
    h.nspawn_pid = proc.pid


def wait_leader(h: Host, deadline: float) -> None:
    console = state.host_dir(h) / "console.log"
    while time.monotonic() < deadline:
        if not alive(h.nspawn_pid):
            raise SimError(f"{h.name}: systemd-nspawn exited during boot; see {console}")
        r = run(["pgrep", "-x", "systemd", "-P", str(h.nspawn_pid)], check=False)
        if r.stdout.strip():
            h.leader_pid = int(r.stdout.split()[0])
            return
        time.sleep(0.05)
    raise SimError(f"{h.name}: no systemd PID 1 appeared in time; see {console}")


def wait_running(h: Host, deadline: float) -> str:
    st = ""
    while time.monotonic() < deadline:
        r = nsenter(h, "systemctl", "is-system-running", check=False)
        st = r.stdout.strip()
        if st in ("running", "degraded"):
            return st
        time.sleep(0.1)
    raise SimError(f"{h.name}: systemd did not reach 'running' (last state {st!r})")


def repair_degraded(h: Host, log) -> None:
    """A boot-time oneshot (seen: systemd-tmpfiles-setup, systemd-user-sessions) occasionally fails
    when several hosts boot at once on 2 loaded cores. Restart it once; a host that stays degraded
    is reported with the unit's journal rather than handed to tests half-booted."""
    failed = nsenter(h, "systemctl", "--failed", "--no-legend", "--plain", check=False).stdout.split()
    units = [u for u in failed if "." in u and not u.startswith("●")]
    for unit in units:
        journal = nsenter(h, "journalctl", "-b", "-u", unit, "--no-pager", "-n", "20", check=False).stdout
        nsenter(h, "systemctl", "reset-failed", unit, check=False)
        r = nsenter(h, "systemctl", "restart", unit, check=False)
        if r.returncode != 0:
            raise SimError(f"{h.name}: boot unit {unit} failed and does not restart:\n{journal}")
        log(f"{h.name}: boot unit {unit} had failed and was restarted; its journal:\n{journal.strip()}")
    st = nsenter(h, "systemctl", "is-system-running", check=False).stdout.strip()
    if st != "running":
        raise SimError(f"{h.name}: systemd is {st!r} after repairing {units}")


def provision(h: Host, key: Path) -> None:
    pub = Path(str(key) + ".pub").read_text()
    script = (
        "set -e; install -d -m 700 /root/.ssh; "
        "cat > /root/.ssh/authorized_keys; chmod 600 /root/.ssh/authorized_keys; "
        f"hostname {h.name}; echo {h.name} > /etc/hostname; "
        "if [ -x /opt/moesweep-sim/bin/sim-init ]; then /opt/moesweep-sim/bin/sim-init; fi"
    )
    r = nsenter(h, "/bin/sh", "-c", script, check=False, input=pub)
    if r.returncode != 0:
        raise SimError(f"{h.name}: provisioning failed: {r.stderr.strip() or r.stdout.strip()}")


def ssh_answers(h: Host, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((h.address, 22), timeout=timeout) as s:
        return s.recv(4).startswith(b"SSH-")
    return False


def wait_ssh(h: Host, deadline: float) -> None:
    while time.monotonic() < deadline:
        if ssh_answers(h):
            return
        time.sleep(0.1)
    raise SimError(f"{h.name}: sshd did not answer on {h.address}:22")


def healthy(h: Host) -> bool:
    if not alive(h.nspawn_pid):
        return False
    with contextlib.suppress(OSError), socket.create_connection((h.address, 22), timeout=0.5):
        return True
    return False


# ---------------------------------------------------------------- poweroff


def stop(h: Host, timeout: float = 15) -> None:
    """Power the host off (SIGTERM to systemd-nspawn is an orderly poweroff), then SIGKILL its process group
    if it does not go in time; remove its cgroups and its directory of the state directory."""
    if alive(h.nspawn_pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(h.nspawn_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(h.nspawn_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(h.nspawn_pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(h.nspawn_pid, signal.SIGKILL)
            while alive(h.nspawn_pid):
                time.sleep(0.05)
    if h.nspawn_pid > 0:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(h.nspawn_pid, os.WNOHANG)
    remove_cgroups(h)
    state.remove_tree(state.host_dir(h))
