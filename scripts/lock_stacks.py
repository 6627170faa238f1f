#!/usr/bin/env python3
"""Produce the hash-pinned requirement locks of the ``sglang_env`` role.

Each stack is declared once in ``STACKS`` below and written to
``roles/sglang_env/files/locks/<stack>.txt``.  The lock files are never edited by hand.

How a stack is resolved (no package is installed, no large wheel is downloaded):

1. ``pip install --dry-run --ignore-installed --report`` for the stack's top-level requirements,
   for the target interpreter and platform (``--python-version``, ``--abi``, ``--platform``,
   ``--only-binary=:all:``), against the stack's indexes.  pip reads wheel metadata only
   (PEP 658), so a multi-GB CUDA stack resolves without downloading it.
   Requirements listed under ``no_deps`` are resolved in a second ``--dry-run --no-deps`` pass:
   their dependency closure is deliberately left out (the CPU test stack uses this).
2. Hashes: for every pinned distribution, every file of that exact version listed by the
   index's PEP 691 JSON simple API (wheels for all platforms plus the sdist, as ``pip-compile
   --generate-hashes`` does), so ``pip install --require-hashes`` accepts whichever file the
   target picks.  Files found through ``find_links`` directories are hashed locally.
3. A stack whose indexes cannot be reached from this machine is written as an *incomplete*
   lock: its top-level pins only, no hashes, and ``"complete": false`` in the header.  The role
   refuses to install an incomplete lock and says how to finish it.  Nothing is guessed.

The first line of every lock is ``# moesweep-lock: {json}``, read by the role and by the tests.

Usage::

    python scripts/lock_stacks.py                 # every stack
    python scripts/lock_stacks.py --stack test-cpu-sglang-0.5.9 --check
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK_DIR = REPO / "roles" / "sglang_env" / "files" / "locks"
PYPI = "https://pypi.org/simple"

# Light dependencies that `import sglang` (0.5.9) and `import flashinfer` (0.6.3) need at
# import time, found by importing them in an empty venv and adding what was missing.
_IMPORT_DEPS_0_5_9 = [
    "numpy",
    "tqdm",
    "pybase64",
    "requests",
    "ipython",
    "pydantic",
    "aiohttp",
]
_FLASHINFER_IMPORT_DEPS_0_6_3 = [
    "packaging>=24.2",
    "apache-tvm-ffi>=0.1.6,!=0.1.8,!=0.1.8.post0,<0.2",
    "nvidia-ml-py",
]

STACKS: dict[str, dict] = {
    "cu128-sglang-0.5.9": {
        "description": "sglang 0.5.9, torch 2.9.1 (PyPI default build = CUDA 12.8), flashinfer 0.6.3 + cubin, "
        "sgl-kernel 0.3.21: the CUDA 12.8 / R570 lane",
        "requirements": ["sglang==0.5.9"],
        "index_url": PYPI,
        "extra_index_urls": [],
        "find_links": [],
    },
    "cu129-sglang-0.5.19": {
        "description": "sglang 0.5.19 (last CUDA 12 lane), torch 2.13.0+cu129 and sglang-kernel cu129 builds "
        "from the PyTorch and SGLang wheel indexes",
        "requirements": ["sglang==0.5.19", "torch==2.13.0", "sglang-kernel==0.4.6.post1"],
        "index_url": PYPI,
        "extra_index_urls": ["https://download.pytorch.org/whl/cu129", "https://docs.sglang.ai/whl/cu129/"],
        "find_links": [],
    },
    "cu130-sglang-0.5.23": {
        "description": "sglang 0.5.23, torch 2.14.1 (PyPI default build = CUDA 13.0), sglang-kernel 0.4.10: "
        "needs an R580+ driver",
        "requirements": ["sglang==0.5.23"],
        "index_url": PYPI,
        "extra_index_urls": [],
        "find_links": [],
    },
    "test-cpu-sglang-0.5.9": {
        "description": "TEST STACK for CI without GPUs: real sglang 0.5.9 and flashinfer-python 0.6.3 wheels "
        "installed --no-deps, the CPU build of torch 2.13.0, and only the light dependencies those "
        "imports need. Not a serving stack.",
        "requirements": ["torch==2.13.0+cpu", *_IMPORT_DEPS_0_5_9, *_FLASHINFER_IMPORT_DEPS_0_6_3],
        "no_deps": ["sglang==0.5.9", "flashinfer-python==0.6.3"],
        "index_url": PYPI,
        "extra_index_urls": [],
        "find_links": ["/opt/wheels"],
    },
    "client-sglang-0.5.9": {
        "description": "benchmark client: sglang 0.5.9 (--no-deps) for `python -m sglang.bench_serving`, "
        "with the dependencies its import needs; no torch",
        "requirements": [*_IMPORT_DEPS_0_5_9, "datasets", "pillow", "transformers==4.57.1"],
        "no_deps": ["sglang==0.5.9"],
        "index_url": PYPI,
        "extra_index_urls": [],
        "find_links": [],
    },
}

TARGET_PYTHON = "3.11"
TARGET_ARCH = "x86_64"
# Debian 12 has glibc 2.36; Ubuntu 22.04 2.35 and 24.04 2.39.  Binary sglang >= 0.5.11 needs 2_34.
TARGET_PLATFORMS = [f"manylinux_2_{minor}_{TARGET_ARCH}" for minor in range(35, 4, -1)] + [
    f"manylinux2014_{TARGET_ARCH}",
    f"manylinux2010_{TARGET_ARCH}",
    f"manylinux1_{TARGET_ARCH}",
    f"linux_{TARGET_ARCH}",
]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip_env() -> dict[str, str]:
    env = dict(os.environ)
    # Resolve against the stack's declared indexes only, never this machine's pip configuration
    # (local find-links, constraint caps).
    for key in list(env):
        if key.startswith("PIP_") and key not in ("PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
            del env[key]
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _index_args(stack: dict) -> list[str]:
    args = ["--index-url", stack["index_url"]]
    for url in stack["extra_index_urls"]:
        args += ["--extra-index-url", url]
    for link in stack["find_links"]:
        args += ["--find-links", link]
    return args


def _target_args(python: str) -> list[str]:
    abi = "cp" + python.replace(".", "")
    args = ["--python-version", python, "--implementation", "cp", "--abi", abi, "--only-binary=:all:"]
    for plat in TARGET_PLATFORMS:
        args += ["--platform", plat]
    return args


def dry_run(stack: dict, requirements: list[str], *, no_deps: bool, python: str) -> list[dict]:
    """Return the ``install`` entries of pip's installation report for these requirements."""
    if not requirements:
        return []
    with tempfile.TemporaryDirectory(prefix="moesweep-lock-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--report", str(report), "--target", str(Path(tmp) / "target"),
            *_target_args(python), *_index_args(stack),
        ]
        if no_deps:
            cmd.append("--no-deps")
        cmd += requirements
        proc = subprocess.run(cmd, env=_pip_env(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pip resolution failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}")
        return json.loads(report.read_text())["install"]


def unreachable_indexes(stack: dict) -> list[str]:
    bad = []
    for url in [stack["index_url"], *stack["extra_index_urls"]]:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=20) as resp:
                resp.read(1)
        except urllib.error.HTTPError as exc:  # reachable; the index answered
            if exc.code >= 500:
                bad.append(f"{url} (HTTP {exc.code})")
        except (urllib.error.URLError, OSError) as exc:
            bad.append(f"{url} ({getattr(exc, 'reason', exc)})")
    return bad


def _version_of_file(filename: str, name: str) -> str | None:
    stem = canonical(name).replace("-", "_")
    lowered = filename.lower()
    if lowered.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) >= 5 and canonical(parts[0]) == canonical(name):
            return parts[1]
        return None
    for ext in (".tar.gz", ".zip"):
        if lowered.endswith(ext):
            base = filename[: -len(ext)]
            if canonical(base.rsplit("-", 1)[0]) in (canonical(name), stem):
                return base.rsplit("-", 1)[1]
    return None


def index_hashes(index_url: str, name: str, version: str) -> list[str]:
    """sha256 of every file of name==version, from the index's PEP 691 JSON API."""
    req = urllib.request.Request(
        f"{index_url.rstrip('/')}/{canonical(name)}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        data = json.load(resp)
    hashes = []
    for entry in data.get("files", []):
        ver = _version_of_file(entry["filename"], name)
        if ver is not None and _same_version(ver, version) and "sha256" in entry.get("hashes", {}):
            hashes.append(entry["hashes"]["sha256"])
    return sorted(set(hashes))


def _same_version(a: str, b: str) -> bool:
    try:
        from packaging.version import Version
    except ImportError:  # pragma: no cover - pip always vendors packaging
        from pip._vendor.packaging.version import Version
    try:
        return Version(a) == Version(b)
    except Exception:
        return a == b


def _file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def hashes_for(entry: dict, stack: dict) -> tuple[list[str], str]:
    name, version = entry["metadata"]["name"], entry["metadata"]["version"]
    url = entry["download_info"]["url"]
    if url.startswith("file://"):
        path = Path(urllib.request.url2pathname(url[len("file://"):]))
        return [_file_sha256(path)], f"find-links file {path.name}"
    for index in [stack["index_url"], *stack["extra_index_urls"]]:
        found = index_hashes(index, name, version)
        if found:
            return found, f"all files of {version} on {index}"
    archive = entry["download_info"].get("archive_info", {})
    if "sha256" in archive.get("hashes", {}):
        return [archive["hashes"]["sha256"]], "the resolved file only"
    raise RuntimeError(f"no sha256 found for {name}=={version} ({url})")


def lock_stack(name: str, python: str) -> str:
    stack = STACKS[name]
    header = {
        "stack": name,
        "complete": True,
        "python": python,
        "platform": f"manylinux (glibc<=2.35) {TARGET_ARCH}",
        "index_url": stack["index_url"],
        "extra_index_urls": stack["extra_index_urls"],
        "find_links": stack["find_links"],
        "no_deps": stack.get("no_deps", []),
    }
    comments = [
        "Generated by scripts/lock_stacks.py: do not edit by hand.",
        stack["description"],
        f"Resolved for CPython {python}, {TARGET_ARCH}, with `pip install --dry-run --report` "
        "(metadata only); hashes: every file of each pinned version from the index's JSON API.",
    ]
    bad = unreachable_indexes(stack)
    lines: list[str] = []
    if bad:
        header["complete"] = False
        header["unresolved_reason"] = "indexes unreachable from the locking machine: " + "; ".join(bad)
        comments.append("INCOMPLETE: " + header["unresolved_reason"])
        comments.append("Top-level pins only, no hashes: the role refuses to install this lock. Re-run")
        comments.append(f"`python scripts/lock_stacks.py --stack {name}` where those indexes are reachable.")
        lines = sorted(stack["requirements"] + stack.get("no_deps", []), key=canonical)
    else:
        entries = dry_run(stack, stack["requirements"], no_deps=False, python=python)
        nodeps = dry_run(stack, stack.get("no_deps", []), no_deps=True, python=python)
        seen: dict[str, str] = {}
        for entry in entries + nodeps:
            key = canonical(entry["metadata"]["name"])
            if key in seen and seen[key] != entry["metadata"]["version"]:
                raise RuntimeError(f"{key}: {seen[key]} vs {entry['metadata']['version']} in one stack")
            seen[key] = entry["metadata"]["version"]
        by_name = {canonical(e["metadata"]["name"]): e for e in entries + nodeps}
        for key in sorted(by_name):
            entry = by_name[key]
            hashes, _how = hashes_for(entry, stack)
            pin = f"{key}=={entry['metadata']['version']}"
            lines.append(" ".join([pin, *[f"--hash=sha256:{h}" for h in hashes]]))
        header["count"] = len(lines)
    out = [f"# moesweep-lock: {json.dumps(header, sort_keys=True)}"]
    out += [f"# {c}" for c in comments]
    out += lines
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stack", action="append", choices=sorted(STACKS), help="default: every stack")
    parser.add_argument("--python", default=TARGET_PYTHON, help="target CPython major.minor")
    parser.add_argument("--out", type=Path, default=LOCK_DIR)
    parser.add_argument("--check", action="store_true", help="fail if a committed lock differs")
    args = parser.parse_args(argv)
    rc = 0
    for name in args.stack or sorted(STACKS):
        text = lock_stack(name, args.python)
        path = args.out / f"{name}.txt"
        if args.check:
            if not path.exists() or path.read_text() != text:
                print(f"{path}: out of date", file=sys.stderr)
                rc = 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        status = "complete" if "\"complete\": true" in text.splitlines()[0] else "INCOMPLETE"
        print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {status}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
