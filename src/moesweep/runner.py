"""Per-host outcomes of one playbook run (the last result of each watched module, the first failed task),
for tests and bench scripts. Runs through ``moesweep.api.run_playbook`` (one place that drives
ansible-runner); reads task results by action, never by parsing text."""

from __future__ import annotations

from dataclasses import dataclass, field

# Results worth keeping, by the action that produced them.
WATCHED_ACTIONS = {
    "moesweep.sweep.gpu_facts": "gpu_facts",
    "moesweep.sweep.sglang_preflight": "preflight",
    "moesweep.sweep.sglang_ready": "readiness",
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
            key = WATCHED_ACTIONS.get(data.get("task_action") or data.get("resolved_action") or "")
            if key:
                out.results[key] = res
            if key == "readiness" and res.get("released"):
                # a restart's stop and release wait, run by the readiness call itself (sglang_ready's release)
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
