"""The real wheels the simulator tests read (cached in ~/.cache/moesweep/wheels, `pip download --no-deps`
when missing; a test skips when neither cache nor network has one)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.path.expanduser("~/.cache/moesweep/wheels"))
WHEELS = {
    ("sglang", "0.5.9"): "sglang==0.5.9",
    ("sglang", "0.5.23"): "sglang==0.5.23",
    ("flashinfer", "0.5.9"): "flashinfer-python==0.6.3",
    ("flashinfer", "0.5.23"): "flashinfer-python==0.7.2",
    ("deep_gemm", "0.5.23"): "sgl-deep-gemm==0.2.3.post2",
    ("uvicorn", None): "uvicorn==0.54.0",
    ("tqdm", None): "tqdm==4.70.1",
    ("prometheus_client", None): "prometheus-client==0.26.0",
    ("starlette", None): "starlette==1.10.0",
    ("fastapi", None): "fastapi==0.165.0",
}


def wheel_path(req: str) -> Path:
    name, ver = req.split("==")
    pat = name.replace("-", "_") + "-" + ver + "-"
    found = [p for p in CACHE.glob("*.whl") if p.name.startswith(pat)]
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.11", req, "-d", str(CACHE)], capture_output=True, text=True)
        found = [p for p in CACHE.glob("*.whl") if p.name.startswith(pat)]
        if r.returncode != 0 or not found:
            pytest.skip(f"cannot get wheel {req}: {r.stderr[-300:]}")
    return found[0]


_SRC_CACHE: dict = {}


def source(req: str, path: str) -> str:
    key = (req, path)
    if key not in _SRC_CACHE:
        with zipfile.ZipFile(wheel_path(req)) as z:
            _SRC_CACHE[key] = z.read(path).decode()
    return _SRC_CACHE[key]
