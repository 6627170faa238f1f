"""Build and cache the Debian 12 root filesystem that simulated GPU hosts boot from.

The image is built once with debootstrap, trimmed, stored as ``rootfs.tar.zst`` under
``~/.cache/moesweep/image/<key>/`` and unpacked next to it.  The key hashes the recipe, so a
changed package list builds a new image instead of silently reusing a stale one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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
