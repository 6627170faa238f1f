"""A local, signed APT repository standing in for NVIDIA's CUDA network repository in tests.

It carries two TEST FIXTURE packages (nothing of NVIDIA's):

* ``cuda-toolkit-12-8`` — "moesweep test fixture standing in for NVIDIA's cuda-toolkit-12-8": installs
  ``/usr/local/cuda-12.8/bin/nvcc``, a shell script printing the real CUDA 12.8 ``nvcc --version`` text.
* ``cuda-keyring`` — like NVIDIA's keyring package: installs the repository's public key at
  ``/usr/share/keyrings/cuda-archive-keyring.gpg`` and an apt source for the repository.

Built with dpkg-deb and apt-ftparchive (Debian package apt-utils); Release is signed with a key made
by gpg in a temporary GNUPGHOME.  Layout mirrors NVIDIA's flat repositories:
``<root>/debian12/x86_64/{Packages,Packages.gz,Release,InRelease,Release.gpg,*.deb}``.

CLI: ``python tests/helpers/aptrepo.py serve --bind 10.213.1.1 --port 8702``
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

from moesweep.sim.wheelhouse import serve

DIST = "debian12"
ARCH_DIR = "x86_64"

NVCC_12_8 = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""


def _deb(workdir: Path, name: str, version: str, description: str, files: dict[str, tuple[str | bytes, int]],
         conffiles: list[str] = ()) -> Path:
    root = workdir / f"{name}_{version}"
    (root / "DEBIAN").mkdir(parents=True)
    for rel, (content, mode) in files.items():
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        path.chmod(mode)
    (root / "DEBIAN" / "control").write_text(
        textwrap.dedent(
            f"""\
            Package: {name}
            Version: {version}
            Architecture: all
            Maintainer: moesweep tests <tests@example.invalid>
            Priority: optional
            Section: devel
            Description: {description}
            """
        )
    )
    if conffiles:
        (root / "DEBIAN" / "conffiles").write_text("\n".join(conffiles) + "\n")
    out = workdir / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out)],
                   check=True, capture_output=True)
    shutil.rmtree(root)
    return out


def build(root: Path, url: str, toolkit_versions: tuple[str, ...] = ("12.8",)) -> Path:
    """Build the signed repository under ``root``; ``url`` is where it will be served (the apt source
    inside the keyring package points there). Returns the repository directory."""
    if shutil.which("apt-ftparchive") is None:
        raise RuntimeError("apt-ftparchive missing: apt-get install apt-utils")
    repo = root / DIST / ARCH_DIR
    repo.mkdir(parents=True, exist_ok=True)
    gnupg = Path(tempfile.mkdtemp(prefix="moesweep-gnupg-"))
    gnupg.chmod(0o700)
    env = dict(os.environ, GNUPGHOME=str(gnupg))
    try:
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                        "moesweep test repository <tests@example.invalid>", "rsa2048", "sign", "never"],
                       check=True, env=env, capture_output=True)
        pubkey = subprocess.run(["gpg", "--batch", "--export"], check=True, env=env, capture_output=True).stdout
        for version in toolkit_versions:
            pkg = "cuda-toolkit-" + version.replace(".", "-")
            nvcc = NVCC_12_8 if version == "12.8" else NVCC_12_8.replace("12.8", version)
            _deb(repo, pkg, f"{version}.0-1",
                 f"moesweep test fixture standing in for NVIDIA's {pkg} (only a fake nvcc)",
                 {f"/usr/local/cuda-{version}/bin/nvcc": ("#!/bin/sh\ncat <<'EOF'\n" + nvcc + "EOF\n", 0o755)})
        source = f"/etc/apt/sources.list.d/cuda-{DIST}-{ARCH_DIR}.list"
        _deb(repo, "cuda-keyring", "1.1-1",
             "moesweep test fixture standing in for NVIDIA's cuda-keyring (test repository key)",
             {"/usr/share/keyrings/cuda-archive-keyring.gpg": (pubkey, 0o644),
              source: (f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {url}/{DIST}/{ARCH_DIR}/ /\n",
                       0o644)},
             conffiles=[source])
        packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True,
                                  capture_output=True).stdout
        (repo / "Packages").write_bytes(packages)
        (repo / "Packages.gz").write_bytes(gzip.compress(packages))
        release = subprocess.run(["apt-ftparchive", "release", "."], cwd=repo, check=True,
                                 capture_output=True).stdout
        (repo / "Release").write_bytes(release)
        for out, flag in (("InRelease", "--clearsign"), ("Release.gpg", "-abs")):
            target = repo / out
            target.unlink(missing_ok=True)
            subprocess.run(["gpg", "--batch", "--yes", flag, "-o", str(target), str(repo / "Release")],
                           check=True, env=env, capture_output=True)
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, capture_output=True)
        shutil.rmtree(gnupg, ignore_errors=True)
    return repo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=8702)
    s.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="moesweep-aptrepo-"))
    build(root, f"http://{args.bind}:{args.port}")
    with serve(root, args.bind, args.port) as url:
        print(f"{url}/{DIST}/{ARCH_DIR}/", flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
