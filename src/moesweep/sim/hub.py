"""The simulated hosts' Hugging Face hub: a tiny stand-in of the model the sglang_server role serves by default,
served on the machine side of each host's link (10.213.I.1:8703) by the simulator's hub (simulator/moesweep_sim/
hfhub.py, run as its own process), so that sweep.yml stages the model with the real ``huggingface_hub`` client
through ``HF_ENDPOINT`` exactly as an air-gapped VM stages it from a mirror.

The stand-in repository has the default ``model-path``'s id, the simulator's GLM-5 config.json (its dimensions, which
the simulated server and the all-reduce estimate read), the simulator's tokenizer and one 1 MiB safetensors file: a
download of a second, not of 453 GB. Its commit hash is a hash of its files, so every `sim up` serves the same
revision and a host that staged it stages nothing again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from moesweep._collection import REPO_ROOT
from moesweep.sim import state

# 8701 is the wheelhouse's (wheelhouse.PORT) and 8702 the molecule scenarios' apt repository (tests/helpers/aptrepo.py)
# on the same link address: a hub left on either answers their requests with 404s.
PORT = 8703
SIMULATOR = REPO_ROOT / "simulator"


def default_repo_id() -> str:
    """The sglang_server role's default ``model-path``: the repository the user's sweep stages."""
    import yaml

    defaults = yaml.safe_load((REPO_ROOT / "roles" / "sglang_server" / "defaults" / "main.yml").read_text())
    return str(defaults["sglang_server_flags"]["model-path"])


def root() -> Path:
    return state.STATE_DIR / "hub"


def _simulator(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "moesweep_sim.hfhub", *args], check=True, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(SIMULATOR)), timeout=60, **kw)


def write_repo(repo_id: str | None = None) -> Path:
    """The stand-in repository under ``root()`` (rewritten: the same bytes, so the same commit hash)."""
    dest = root() / (repo_id or default_repo_id())
    _simulator("write-tiny", str(dest), "--tokenizer", str(SIMULATOR / "tokenizer"),
               "--config", str(SIMULATOR / "models" / "glm-5-nvfp4" / "config.json"))
    return dest


def answers(bind: str, port: int = PORT, repo_id: str | None = None) -> bool:
    try:
        with urllib.request.urlopen(f"http://{bind}:{port}/api/models/{repo_id or default_repo_id()}", timeout=2) as r:
            return bool(json.load(r).get("sha"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start_server(bind: str, log_path: Path, port: int = PORT) -> int:
    """A detached hub on bind:port serving ``root()`` (it outlives `sim up`; `sim down` ends it by its pid). Returns
    its pid, 0 when one already answers there."""
    if answers(bind, port):
        return 0
    log = open(log_path, "w")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "moesweep_sim.hfhub", "serve", "--root", str(root()), "--bind", bind, "--port",
         str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env=dict(os.environ, PYTHONPATH=str(SIMULATOR)))
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None and not answers(bind, port):
        time.sleep(0.1)
    if not answers(bind, port):
        proc.kill()
        raise RuntimeError(f"the simulated hub on {bind}:{port} did not start; see {log_path}")
    return proc.pid


def stop_server(pid: int) -> None:
    """End the hub ``start_server`` started, by its pid, only while that pid still is such a server."""
    if pid <= 0:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if b"moesweep_sim.hfhub" in cmdline and b"serve" in cmdline:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)
