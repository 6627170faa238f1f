"""Drive playbooks from Python with ansible-runner and pull the sweep-relevant results out of its
event stream (by task action, never by parsing text)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from moesweep._collection import REPO_ROOT

# Results worth keeping, by the action that produced them.
WATCHED_ACTIONS = {
    "moesweep.sweep.gpu_facts": "gpu_facts",
    "moesweep.sweep.sglang_preflight": "preflight",
    "moesweep.sweep.sglang_ready": "readiness",
    "moesweep.sweep.gpu_released": "released",
}


@dataclass
class HostOutcome:
    host: str
    results: dict = field(default_factory=dict)
    failed_task: str | None = None
    failed_msg: str | None = None
    unreachable: bool = False
    changed: int = 0


@dataclass
class PlaybookRun:
    status: str
    rc: int
    seconds: float
    hosts: dict[str, HostOutcome]
    artifact_dir: str


def run_playbook(
    playbook: str,
    extravars: dict | None = None,
    inventory: str | None = None,
    limit: str | None = None,
    ident: str | None = None,
    private_data_dir: str | None = None,
    quiet: bool = True,
    on_event=None,
    cmdline_extra: list[str] | None = None,
) -> PlaybookRun:
    import ansible_runner

    hosts: dict[str, HostOutcome] = {}

    def handler(event: dict) -> bool:
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event")
        if host and kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            out = hosts.setdefault(host, HostOutcome(host))
            res = dict(data.get("res") or {})
            if kind == "runner_on_failed":
                res.setdefault("failed", True)
            key = WATCHED_ACTIONS.get(data.get("task_action") or data.get("resolved_action") or "")
            if key:
                out.results[key] = res
            if res.get("changed"):
                out.changed += 1
            if kind == "runner_on_failed" and not data.get("ignore_errors") and out.failed_task is None:
                # the first failure says why; later ones (a sweep's closing summary) repeat it
                out.failed_task = data.get("task")
                out.failed_msg = res.get("msg")
            if kind == "runner_on_unreachable":
                out.unreachable = True
                out.failed_msg = res.get("msg")
        if on_event:
            on_event(event)
        return True  # ansible-runner drops events unless the handler returns True

    pdd = private_data_dir or tempfile.mkdtemp(prefix="moesweep-runner-")
    envvars = {
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_NOCOLOR": "1",
    }
    # The ansible-playbook of this interpreter's environment first, whatever PATH says
    # (ansible-runner looks the binary up in our own PATH).
    bindir = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(bindir, "ansible-playbook")):
        path = os.environ.get("PATH", "")
        if not path.startswith(bindir + os.pathsep):
            os.environ["PATH"] = bindir + os.pathsep + path
    cmdline = []
    if inventory:
        cmdline += ["-i", str(inventory)]
    cmdline += list(cmdline_extra or [])
    t0 = time.monotonic()
    r = ansible_runner.run(
        private_data_dir=pdd,
        project_dir=str(REPO_ROOT),
        playbook=str(REPO_ROOT / playbook) if not os.path.isabs(playbook) else playbook,
        extravars=extravars or {},
        limit=limit,
        ident=ident,
        envvars=envvars,
        cmdline=" ".join(cmdline) or None,
        event_handler=handler,
        quiet=quiet,
        suppress_env_files=True,
    )
    return PlaybookRun(
        status=r.status,
        rc=r.rc,
        seconds=time.monotonic() - t0,
        hosts=hosts,
        artifact_dir=str(Path(pdd) / "artifacts" / (ident or r.config.ident)),
    )
