"""What a simulated GPU host boots from: the cached Debian 12 root filesystem, the per-cluster payload
(the simulator tree, bind-mounted read-only at /opt/moesweep-sim) and the SSH key it is reached with.

The image is built once with debootstrap, trimmed, stored as ``rootfs.tar.zst`` under
``~/.cache/moesweep/image/<key>/`` and unpacked next to it.  The key hashes the recipe, so a
changed package list builds a new image instead of silently reusing a stale one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from moesweep._collection import REPO_ROOT
from moesweep.sim import state
from moesweep.sim.model import SimError

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Everything a role or the simulator needs at boot: the hosts have no route to any archive.
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "python3-venv",
    "python3-pip",
    "python3-apt",
    "sudo",
    "acl",
    "iproute2",
    "procps",
    "gnupg",
    "ca-certificates",
)
RECIPE_VERSION = "1"


def cache_root() -> Path:
    base = os.environ.get("MOESWEEP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "moesweep"
    )
    return Path(base)


def image_key() -> str:
    recipe = "\n".join([RECIPE_VERSION, SUITE, *PACKAGES]).encode()
    return f"debian12-{hashlib.sha256(recipe).hexdigest()[:12]}"


def image_dir() -> Path:
    return cache_root() / "image" / image_key()


def rootfs_path() -> Path:
    return image_dir() / "rootfs"


def _trim_and_prepare(root: Path) -> None:
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    lists = root / "var/lib/apt/lists"
    if lists.is_dir():
        for entry in lists.iterdir():
            if entry.is_file():
                entry.unlink()
    # DNS pitfall: the machine's resolver is unreachable from the namespace and reverse
    # lookups would hang for 10 s each.
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    resolv = root / "etc/resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    resolv.write_text("")
    hostname = root / "etc/hostname"
    if hostname.exists():
        hostname.unlink()
    # No getty on the console: the host is driven over SSH and nsenter only.
    for unit in ("getty@tty1.service", "console-getty.service"):
        link = root / "etc/systemd/system/getty.target.wants" / unit
        if link.is_symlink():
            link.unlink()
    sshd = root / "etc/ssh/sshd_config.d/moesweep-sim.conf"
    sshd.parent.mkdir(parents=True, exist_ok=True)
    sshd.write_text("PermitRootLogin prohibit-password\nUseDNS no\nPasswordAuthentication no\n")


def build(mirror: str | None = None, log=print) -> Path:
    """Return the unpacked rootfs, building and caching it first when absent."""
    target = image_dir()
    rootfs = target / "rootfs"
    archive = target / "rootfs.tar.zst"
    if (rootfs / ".moesweep-complete").exists():
        return rootfs
    target.mkdir(parents=True, exist_ok=True)
    if not archive.exists():
        for tool in ("debootstrap", "zstd", "systemd-nspawn"):
            if shutil.which(tool) is None:
                raise RuntimeError(
                    f"{tool} not found: install it with "
                    "`apt-get install -y debootstrap zstd systemd-container` (make sim-deps does this)"
                )
        work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=target))
        log(f"building the simulated host image with debootstrap into {work} (once, ~3 min)")
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(PACKAGES),
                SUITE,
                str(work),
                mirror or os.environ.get("MOESWEEP_DEBIAN_MIRROR", DEFAULT_MIRROR),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _trim_and_prepare(work)
        tmp_archive = archive.with_suffix(".partial")
        subprocess.run(
            f"tar -C {work} --numeric-owner -cf - . | zstd -q -T0 -o {tmp_archive}",
            shell=True,
            check=True,
        )
        os.replace(tmp_archive, archive)
        shutil.rmtree(work)
    if rootfs.exists():
        shutil.rmtree(rootfs)
    tmp_root = target / "rootfs.partial"
    if tmp_root.exists():
        shutil.rmtree(tmp_root)
    tmp_root.mkdir()
    subprocess.run(
        f"zstd -q -d -c {archive} | tar -C {tmp_root} --numeric-owner -xf -", shell=True, check=True
    )
    (tmp_root / ".moesweep-complete").write_text(image_key() + "\n")
    os.replace(tmp_root, rootfs)
    return rootfs


def ssh_key() -> Path:
    """The key every simulated host authorises for root (generated once, kept with the image cache)."""
    key = cache_root() / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = key.with_name("id_ed25519.tmp")
        for p in (tmp, tmp.with_suffix(".tmp.pub")):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "moesweep-sim", "-f", str(tmp)],
                       check=True, text=True, capture_output=True)
        os.replace(str(tmp) + ".pub", str(key) + ".pub")
        os.replace(tmp, key)
    return key


def build_payload(cluster: str) -> Path:
    """Copy the simulator, the flag schema data and the GSM8K test split (the simulated server answers the accuracy
    stage's questions from it) into one read-only tree for the cluster's hosts.

    One tree per cluster: hosts bind-mount the directory itself, so replacing it while another
    cluster's hosts run would leave them looking at a deleted directory."""
    src = REPO_ROOT / "simulator"
    if not src.is_dir():
        raise SimError(f"simulator sources missing at {src}: is this a complete moesweep checkout?")
    dest = state.payload_dir(cluster)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{cluster}.partial")
    state.remove_tree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "README.md"))
    for name in ("sglang", "gsm8k"):
        data = REPO_ROOT / "data" / name
        if data.is_dir():
            shutil.copytree(data, tmp / "data" / name)
    if dest.exists() or dest.is_symlink():
        old = dest.with_name(f"{cluster}.old")
        state.remove_tree(old)
        os.replace(dest, old)
        os.replace(tmp, dest)
        state.remove_tree(old)
    else:
        os.replace(tmp, dest)
    return dest
