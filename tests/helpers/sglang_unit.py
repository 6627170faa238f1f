"""A systemd host with an SGLang unit, for the unit tests of the modules that start, restart or wait for it
(sglang_start, sglang_restart, sglang_ready): the real subprocess / HTTP / systemctl / nvidia-smi boundaries patched,
the modules' own code and module_utils run as they are (the wait loop itself is tested in
module_utils/test_readiness.py)."""

from __future__ import annotations

import json
import os

from ansible.module_utils import basic
from ansible_collections.moesweep.sweep.plugins.module_utils import ports, readiness
from helpers.paths import FIXTURES

LOGS = FIXTURES / "sglang-logs"
# nvidia-smi on the H200 device (bench/device): a process holding the GPU, then none
DEVICE = FIXTURES / "nvidia-smi" / "h200-x1-device"
BUSY = ((DEVICE / "compute-apps-under-bf16-matmul.csv").read_text(), "0, 21700\n")
IDLE = ((DEVICE / "compute-apps-idle.csv").read_text(), "0, 3\n")

# systemctl show of the unit: never run, running (run 0123abcd), killed by SIGKILL
INACTIVE = "ActiveState=inactive\nSubState=dead\nInvocationID=\n"
STARTED = "ActiveState=active\nSubState=running\nInvocationID=0123abcd\nMainPID=42\n"
FAILED = "ActiveState=failed\nSubState=failed\nExecMainCode=2\nExecMainStatus=9\nNRestarts=0\nMainPID=0\nInvocationID=0123abcd\n"  # noqa: E501

READY_TAIL = [
    "[2026-10-30 12:01:09] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    '[2026-10-30 12:01:12] INFO:     127.0.0.1:40004 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-10-30 12:01:12] The server is fired up and ready to roll!",
]


def corpus(name):
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def bin_path(monkeypatch):
    """Every tool found in /usr/bin."""
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/" + name)


def patch_sources(monkeypatch, lines, health_codes, show_outputs, start_rc=0, smi=()):
    """Patch the real subprocess / HTTP / systemctl boundaries: journalctl JSON on a pipe (``lines``, all in the
    history), the health probe (``health_codes`` in turn, then 503), run_command (systemctl show answers
    ``show_outputs`` in turn, then the last again; start fails with ``start_rc``; stop succeeds; nvidia-smi's answers
    ``smi``: (compute apps CSV, memory CSV) per look). Returns what was called: ``run`` (every command), ``history``
    (the journal read), ``cmd`` (the journal follower's), ``url`` (the first probe's)."""
    entries = "".join(json.dumps({"MESSAGE": line, "__CURSOR": f"c{i}"}) + "\n" for i, line in enumerate(lines))
    calls = {"run": []}

    class FakePopen:
        def __init__(self, cmd, **kw):
            calls["cmd"] = cmd
            r, w = os.pipe()
            os.close(w)  # everything was in the history
            self.stdout = os.fdopen(r, "rb")
            self.returncode = None

        def poll(self):
            return self.returncode

        def terminate(self):
            self.returncode = -15

        def wait(self, timeout=None):
            return self.returncode

        def kill(self):
            self.returncode = -9

    monkeypatch.setattr(readiness.subprocess, "Popen", FakePopen)
    codes = iter(health_codes)
    monkeypatch.setattr(readiness, "probe_health",
                        lambda url, key, timeout: calls.setdefault("url", url) and next(codes, 503))
    shows = iter(show_outputs)

    def run_command(self, args, **kw):
        calls["run"].append(list(args))
        if args[0].endswith("journalctl"):
            # the history read to the end first; the follower then starts after its last cursor
            calls["history"] = list(args)
            return 0, entries, ""
        if args[0].endswith("nvidia-smi"):
            if args[1].startswith("--query-compute-apps"):
                calls["smi"] = next(looks)
                return 0, calls["smi"][0], ""
            return 0, calls["smi"][1], ""
        if args[1] == "start":
            return start_rc, "", "Failed to start sglang.service: Unit sglang.service not found." if start_rc else ""
        if args[1] == "stop":
            return 0, "", ""
        return 0, next(shows, show_outputs[-1]), ""

    looks = iter(smi)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(ports, "listeners", lambda port: [])
    return calls
