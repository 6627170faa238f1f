"""A wheelhouse and PEP 503 simple index of the test stack, served on the machine side of a simulated host's
namespace (10.213.I.1): the hosts reach no registry, exactly like an air-gapped GPU VM reaching an internal
mirror. `moesweep sim up` serves it for as long as the cluster runs (``start_server``), the tests and
`make demo` for one provisioning (``serve``).

build(): ``pip download --no-deps --require-hashes`` of every pin of the given locks (run on the
machine, which reaches PyPI; ``find_links`` of a lock, e.g. /opt/wheels for the CPU torch wheel,
are honoured), cached under ~/.cache/moesweep/wheelhouse/<hash of the locks>/.  Layout::

    wheels/<file>.whl                 flat directory (pip --find-links URL)
    simple/<project>/index.html       PEP 503 pages linking ../../wheels/<file>#sha256=...

serve(): http.server bound to one address only (never 0.0.0.0).

CLI: ``python -m moesweep.sim.wheelhouse build LOCK... ; ... serve --bind 10.213.1.1 --port 8701 LOCK...``
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import html
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from moesweep._collection import REPO_ROOT

PYPI = "https://pypi.org/simple"
# The Python of the target hosts and of the simulated ones: Debian 12's python3.11. The wheelhouse's wheels, the
# client venvs the roles build on a host and the simulator's extracted data are for it, whichever Python runs the
# controller's venv (3.11 with ansible-core 2.19; 3.12 or 3.13 with 2.20 and later: scripts/controller-venv).
TARGET_PYTHON = (sys.executable if sys.version_info[:2] == (3, 11)
                 else shutil.which("python3.11") or "/usr/bin/python3.11")


def cache_root() -> Path:
    base = os.environ.get("MOESWEEP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "moesweep"
    )
    return Path(base) / "wheelhouse"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_header(lock: Path) -> dict:
    first = lock.read_text().splitlines()[0]
    return json.loads(first.removeprefix("# moesweep-lock: "))


def _key(locks: list[Path]) -> str:
    digest = hashlib.sha256()
    for lock in sorted(locks):
        digest.update(lock.read_bytes())
    return digest.hexdigest()[:16]


def build(locks: list[Path], python: str = "3.11") -> Path:
    """Download every pinned file of the locks (cached) and write the simple index; return the root."""
    root = cache_root() / _key(locks)
    if (root / ".complete").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    # two builders of the same wheelhouse (pytest workers, a test and `sim up`): one downloads, the other waits
    with open(root.with_name(root.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _build(root, locks, python)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(root: Path, locks: list[Path], python: str) -> Path:
    done = root / ".complete"
    if done.exists():
        return root
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in ("PIP_CERT",)}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for lock in locks:
        header = lock_header(lock)
        if not header.get("complete"):
            raise RuntimeError(f"{lock} is an incomplete lock: nothing to download")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--quiet",
               "--only-binary=:all:", "--python-version", header.get("python", python),
               "--implementation", "cp", "--abi", "cp" + header.get("python", python).replace(".", ""),
               "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
               "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_5_x86_64",
               "--platform", "manylinux1_x86_64", "--platform", "linux_x86_64",
               "-d", str(wheels), "--index-url", header.get("index_url") or PYPI, "-r", str(lock)]
        for link in header.get("find_links", []):
            cmd += ["--find-links", link]
        subprocess.run(cmd, check=True, env=env)
    write_simple_index(root)
    done.write_text("ok\n")
    return root


def write_simple_index(root: Path) -> None:
    by_project: dict[str, list[Path]] = {}
    for whl in sorted((root / "wheels").iterdir()):
        if whl.suffix in (".whl",) or whl.name.endswith((".tar.gz", ".zip")):
            by_project.setdefault(canonical(whl.name.split("-")[0]), []).append(whl)
    simple = root / "simple"
    simple.mkdir(exist_ok=True)
    links = []
    for project, files in sorted(by_project.items()):
        (simple / project).mkdir(exist_ok=True)
        body = "\n".join(
            f'<a href="../../wheels/{html.escape(f.name)}#sha256={_sha256(f)}">{html.escape(f.name)}</a><br/>'
            for f in files
        )
        (simple / project / "index.html").write_text(
            f"<!DOCTYPE html><html><body><h1>Links for {project}</h1>\n{body}\n</body></html>\n"
        )
        links.append(f'<a href="{project}/">{project}</a><br/>')
    (simple / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # noqa: D401 - silence per-request logging
        pass


@contextlib.contextmanager
def serve(root: Path, bind: str, port: int = 0):
    """Serve ``root`` on bind:port (0 = any free port) in a thread; yields the base URL."""
    if bind in ("", "0.0.0.0", "::"):
        raise ValueError("bind to one address (the namespace's machine side), never all interfaces")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer((bind, port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{bind}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# What `moesweep sim up` serves: the test stack and the benchmark client (the stacks the inventory names).
TEST_STACK = "test-cpu-sglang-0.5.9"
CLIENT_STACK = "client-sglang-0.5.9"
PORT = 8701


def sim_locks() -> list[Path]:
    locks = REPO_ROOT / "roles" / "sglang_env" / "files" / "locks"
    return [locks / f"{TEST_STACK}.txt", locks / f"{CLIENT_STACK}.txt"]


def answers(bind: str, port: int = PORT) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((bind, port), timeout=0.5):
        return True
    return False


def start_server(bind: str, log_path: Path, port: int = PORT) -> int:
    """A detached server of the simulated hosts' wheelhouse on bind:port (it outlives `sim up`; `sim down` ends
    it by its pid). Returns its pid, 0 when one already answers there."""
    if answers(bind, port):
        return 0
    log = open(log_path, "w")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "moesweep.sim.wheelhouse", "serve", "--bind", bind, "--port", str(port),
         *map(str, sim_locks())],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "src")))
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None and not answers(bind, port):
        time.sleep(0.1)
    if not answers(bind, port):
        proc.kill()
        raise RuntimeError(f"the wheelhouse server on {bind}:{port} did not start; see {log_path}")
    return proc.pid


def stop_server(pid: int) -> None:
    """End the server ``start_server`` started, by its pid, only while that pid still is such a server."""
    if pid <= 0:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return
    if b"moesweep.sim.wheelhouse" in cmdline and b"serve" in cmdline:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("locks", nargs="+", type=Path)
    s = sub.add_parser("serve")
    s.add_argument("locks", nargs="+", type=Path)
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=8701)
    args = parser.parse_args(argv)
    root = build(args.locks)
    if args.cmd == "build":
        print(root)
        return 0
    with serve(root, args.bind, args.port) as url:
        print(f"{url}/simple/  {url}/wheels/", flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
