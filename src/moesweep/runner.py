"""Per-host outcomes of one playbook run (the last result of each watched module, the first failed task),
for tests and bench scripts. Runs through ``moesweep.api.run_playbook`` (one place that drives
ansible-runner); reads task results by action, never by parsing text.

:func:`run_ansible` runs Ansible's own command-line tools instead, for the tests and bench scripts that need
what the command prints or its exit status (ad-hoc modules, ``ansible-inventory``, a play's recap)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from moesweep._collection import REPO_ROOT

# Results worth keeping, by the action that produced them.
WATCHED_ACTIONS = {
    "moesweep.sweep.gpu_facts": "gpu_facts",
    "moesweep.sweep.sglang_preflight": "preflight",
    "moesweep.sweep.sglang_ready": "readiness",
    "moesweep.sweep.sglang_restart": "readiness",  # the restart's wait for the run it started
    "moesweep.sweep.gpu_released": "released",
    "moesweep.sweep.sglang_smoke": "smoke",
    "moesweep.sweep.sglang_bench_wait": "benchmark",  # the async benchmark job's result (roles/sglang_bench)
    "moesweep.sweep.sweep_plan": "plan",
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


def run_playbook(playbook: str, extravars: dict | None = None, inventory: str | None = None,
                 limit: str | None = None, on_event=None, check: bool = False) -> PlaybookRun:
    from moesweep import api

    hosts: dict[str, HostOutcome] = {}

    def handler(event: dict) -> None:
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event")
        if host and kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            out = hosts.setdefault(host, HostOutcome(host))
            res = dict(data.get("res") or {})
            if kind == "runner_on_failed":
                res.setdefault("failed", True)
            key = WATCHED_ACTIONS.get(api.action_of(data))
            if key:
                out.results[key] = res
            if key == "readiness" and res.get("released"):
                # a restart's stop and release wait, run by the restart call itself (sglang_restart's released)
                out.results["released"] = res["released"]
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

    run = api.run_playbook(playbook, inventory=inventory, extravars=extravars, limit=limit, on_event=handler,
                           check=check)
    return PlaybookRun(status=run.status, rc=run.rc, seconds=run.seconds, hosts=hosts)


def run_ansible(tool: str, *args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    """``tool`` (``ansible``, ``ansible-playbook``, ``ansible-inventory``) of this interpreter's environment, run in
    the repository with its ansible.cfg, without colours or deprecation warnings; output captured as text. With
    ``check``, a non-zero exit raises AssertionError carrying the command and the tail of its output."""
    full_env = dict(os.environ)
    full_env.update(
        ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"),
        ANSIBLE_DEPRECATION_WARNINGS="False",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PATH=f"{Path(sys.executable).parent}:{full_env.get('PATH', '')}",
    )
    full_env.update(env or {})
    proc = subprocess.run(
        [str(Path(sys.executable).parent / tool), *args],
        cwd=REPO_ROOT,
        env=full_env,
        text=True,
        capture_output=True,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} failed rc={proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n"
            f"--- stderr\n{proc.stderr[-3000:]}"
        )
    return proc
