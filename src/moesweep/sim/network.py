"""The simulated hosts' network: one namespace per host and a veth to the machine.

Host I lives at 10.213.I.2 in namespace ``moesweep-hI``; the machine side of its veth ``msw-vhI`` carries
10.213.I.1, where tests serve package indexes (an air-gapped GPU VM reaching its internal mirror). The
namespace has no default route: the host reaches 10.213.I.1 and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from moesweep.sim.model import NETNS_PREFIX, Host
from moesweep.sim.nspawn import run

NETNS_DIR = Path("/run/netns")


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def setup(h: Host) -> None:
    """The host's namespace and veth: it reaches 10.213.I.1 and nothing else (no default route)."""
    teardown(h)
    run(["ip", "netns", "add", h.netns])
    run(["ip", "link", "add", h.veth_host, "type", "veth", "peer", "name", h.veth_cont, "netns", h.netns])
    run(["ip", "addr", "add", f"{h.gateway}/24", "dev", h.veth_host])
    run(["ip", "link", "set", h.veth_host, "up"])
    run(["ip", "-n", h.netns, "link", "set", "lo", "up"])
    run(["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.veth_cont])
    run(["ip", "-n", h.netns, "link", "set", h.veth_cont, "up"])


def teardown(h: Host) -> None:
    """Remove the host's veth and namespace. Idempotent."""
    if _link_exists(h.veth_host):
        run(["ip", "link", "del", h.veth_host], check=False)
    if netns_exists(h.netns):
        run(["ip", "netns", "del", h.netns], check=False)


def orphan_indices() -> list[int]:
    """Indices of our namespaces present on the machine (any cluster, also of interrupted runs)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(int(e.name[len(NETNS_PREFIX):]) for e in NETNS_DIR.iterdir()
                  if e.name.startswith(NETNS_PREFIX) and e.name[len(NETNS_PREFIX):].isdigit())


def _is_mountpoint(path: Path) -> bool:
    # os.path.ismount misses a bind mount of a directory onto itself, which is what `ip netns` makes.
    with open("/proc/self/mountinfo") as fh:
        return any(line.split()[4] == str(path) for line in fh)


def release_netns_dir() -> None:
    """Nothing of ours runs: unmount /run/netns when `ip netns` left it mounted and empty."""
    if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()) and _is_mountpoint(NETNS_DIR):
        run(["umount", str(NETNS_DIR)], check=False)
