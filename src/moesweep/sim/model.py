"""What a simulated host is: its record, the names derived from its index, the profiles it can carry, and
the checks of everything a user may pass to ``moesweep sim`` (run before anything is touched)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NETNS_PREFIX = "moesweep-h"
VETH_MACHINE_PREFIX = "msw-vh"
VETH_HOST_PREFIX = "msw-vc"
SUBNET = "10.213"
MAX_INDEX = 250
MAX_HOSTS = 16
GPU_MODELS = ("rtx-pro-6000", "h200", "h200-x2", "b200")
DEFAULT_DRIVER = {"rtx-pro-6000": "570.172.08", "h200": "570.172.08", "h200-x2": "570.172.08", "b200": "570.172.08"}
SGLANG_VERSIONS = ("0.5.9", "0.5.23")

# Host-check knobs (`moesweep sim up --knob NAME=VALUE`): each puts one host check of gpu_facts in its failing state
# the way a real host shows it. The nvidia-smi ones are read by the simulated nvidia-smi from profile.json, the
# /dev/shm and disk ones by sim-init at boot (mounts inside the host), memlock by systemd-nspawn (the container's
# hard limit, without CAP_SYS_RESOURCE: an unprivileged container's systemd cannot raise a unit above it).
KNOBS = {
    "p2p_read": (str, ("OK", "NS", "CNS", "GNS", "TNS", "DR", "U"),
                 "the code `nvidia-smi topo -p2p r` prints between pairs"),
    "pcie_width_current": (int, (1, 2, 4, 8, 16), "current PCIe link width (the maximum stays the card's)"),
    "pcie_gen_current": (int, (1, 2, 3, 4, 5), "current PCIe generation (the maximum stays the card's)"),
    "power_limit_w": (float, None, "a user power cap in W (nvidia-smi -pl), below the card's default"),
    "persistence_mode": (str, ("Enabled", "Disabled"), "persistence mode"),
    "shm_size_mb": (int, None, "size of /dev/shm in MiB"),
    "memlock_kb": (int, None, "the host's hard memlock limit in KiB (services cannot raise it)"),
    "disk_size_mb": (int, None, "a disk of this many MiB mounted on /var/lib/sglang (the server's HOME)"),
}

# ASCII only: the name ends up in host names, machine names, cgroup and state paths.
_CLUSTER_RE = re.compile(r"[A-Za-z0-9_-]{1,20}")
_HOST_RE = re.compile(r"sim-[A-Za-z0-9_-]{1,20}-[0-9]{1,2}")


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
        """The machine side of the host's link (carries the gateway address)."""
        return f"{VETH_MACHINE_PREFIX}{self.index}"

    @property
    def veth_cont(self) -> str:
        """The host side of its link, inside the host's network namespace."""
        return f"{VETH_HOST_PREFIX}{self.index}"

    def profile(self) -> dict:
        return {
            **self.extra.get("knobs", {}),
            "simulated": True,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "sglang_version": self.sglang_version,
            "cuda_toolkits": list(self.cuda_toolkits),
            "driver_version": self.driver_version,
            "host_index": self.index,
            "host_name": self.name,
        }


def host_name(cluster: str, n: int) -> str:
    prefix = "sim-gpu" if cluster == "default" else f"sim-{cluster}"
    return f"{prefix}-{n}"


def check_cluster_name(cluster) -> str:
    if not isinstance(cluster, str) or not _CLUSTER_RE.fullmatch(cluster):
        raise SimError(f"bad cluster name {cluster!r}: letters, digits, - and _ only, at most 20")
    return cluster


def record_problem(h: Host) -> str | None:
    """Why a host record read from the state file cannot be acted on (names and paths derive from it)."""
    if not isinstance(h.name, str) or not _HOST_RE.fullmatch(h.name):
        return f"host name {h.name!r} is not one `moesweep sim up` gives"
    if not isinstance(h.cluster, str) or not _CLUSTER_RE.fullmatch(h.cluster):
        return f"cluster name {h.cluster!r} is not valid"
    if not isinstance(h.index, int) or isinstance(h.index, bool) or not 1 <= h.index <= MAX_INDEX:
        return f"host index {h.index!r} is outside 1..{MAX_INDEX}"
    for attr in ("nspawn_pid", "leader_pid"):
        v = getattr(h, attr)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"{attr} {v!r} is not a process id"
    return None


def parse_knobs(items: list[str] | dict | None) -> dict:
    """``["p2p_read=NS", "shm_size_mb=64"]`` (or a dict) -> {"p2p_read": "NS", "shm_size_mb": 64}; SimError naming
    the knob and its choices otherwise."""
    pairs = items.items() if isinstance(items, dict) else [
        (i.split("=", 1) if "=" in i else (i, None)) for i in (items or [])]
    out = {}
    for name, value in pairs:
        if name not in KNOBS:
            raise SimError(f"unknown --knob {name!r}: choose one of {', '.join(KNOBS)}")
        kind, choices, what = KNOBS[name]
        try:
            typed = kind(value)
        except (TypeError, ValueError):
            raise SimError(f"--knob {name}={value!r}: expected a {kind.__name__} ({what})") from None
        if choices and typed not in choices:
            raise SimError(f"--knob {name}={value!r}: choose one of {', '.join(map(str, choices))} ({what})")
        if kind in (int, float) and typed <= 0:
            raise SimError(f"--knob {name}={value!r}: must be > 0 ({what})")
        out[name] = typed
    return out


def check_up_args(n: int, gpu: str, gpu_count: int, sglang_version: str, toolkits: list[str]) -> None:
    if not 1 <= n <= MAX_HOSTS:
        raise SimError(f"--hosts must be between 1 and {MAX_HOSTS} (got {n})")
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
