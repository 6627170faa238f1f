#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Start an SGLang server unit and wait until it is ready, or say why it is not
description:
  - Runs on the target. Judges one run of the unit, identified by its systemd C(InvocationID). Every line
    that run wrote to the journal is read (never a line of an older run), the HTTP health endpoint is
    probed (refused, then 503, then 200) in a background thread so a slow C(/health) never blocks the
    journal watch, and the unit's state is watched.
  - With O(start=true) the unit is started first when it is not running. Without it, a unit found running
    is judged on its whole current run. A server still loading is waited for, and a server whose log
    says ready but whose health endpoint no longer answers is reported as up but not serving (phase
    C(serving)), so the caller can restart it.
  - Returns RV(state=ready), RV(state=crashed) with a RV(cause), RV(state=hang) (no log progress for
    O(stall_timeout) while starting, or a ready server that stopped answering), RV(state=timeout), or
    RV(state=stopped) (the unit never ran); always with the phase RV(timeline) and RV(elapsed).
  - A slow JIT compile or CUDA graph capture that still prints progress (tqdm, compiler lines) is not a
    hang. Health-check access lines written by this module's own polling are not progress.
  - On a multi-node server (O(node_rank) >= 1) the rank runs schedulers only, and then sglang's dummy health
    server on the same host and port, which answers C(/ping), C(/health) and C(/health_generate) and nothing
    else (sglang 0.5.9 C(srt/entrypoints/engine.py:1040-1061), C(srt/utils/common.py:2656-2712)). Such a rank
    is ready when its health endpoint answers 200, and O(health_path) falls back to C(/health) when it names
    anything else. Rank 0 serves the API and is judged as a server on one host is.
  - To start several units in an order and then wait for all of them (the ranks of one server),
    O(start=true) with O(wait=false) only starts the unit and returns its RV(invocation_id); a later call with
    that O(invocation_id) judges that run as one it started.
  - The log classifier is the collection's module_utils C(sglang_log), the same one C(moesweep classify-log)
    runs on saved logs; the wait loop is module_utils C(readiness).
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  unit:
    description:
      - The systemd unit running SGLang, for example C(sglang.service). C(.service) is added when no
        unit type suffix is given. Only the characters systemd allows in unit names are accepted.
    type: str
    required: true
  start:
    description:
      - Start the unit (C(systemctl start)) when it is not running, then wait for that run.
      - When V(false), nothing is started; a unit that is not running is judged on its last run.
    type: bool
    default: false
  host:
    description: Address the server listens on, for the health probe.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  health_path:
    description: HTTP path polled for readiness. SGLang returns 503 until warmup succeeds, then 200.
    type: str
    default: /health
  health_timeout:
    description:
      - Seconds one health probe may take. SGLang's C(/health) sleeps 1 s and then waits up to
        C(SGLANG_HEALTH_CHECK_TIMEOUT) (20 s) for a one-token generation before it answers, so the
        default outlasts that.
    type: float
    default: 25
  timeout:
    description: Seconds to wait in total before giving up with RV(state=timeout). Must be greater than 0.
    type: float
    default: 900
  stall_timeout:
    description:
      - Seconds without any new log line while still starting before the server is declared hung
        (RV(state=hang)). Must be greater than 0.
    type: float
    default: 300
  poll_interval:
    description: Seconds between health and unit polls; the journal is read as soon as it has data.
    type: float
    default: 0.1
  api_key:
    description: Bearer token sent with the health probe (SGLang C(--api-key)).
    type: str
  fail_on_error:
    description: Fail the task when the state is not V(ready). Set to V(false) to branch on RV(state).
    type: bool
    default: true
  wait:
    description:
      - Wait for a verdict. V(false) with O(start=true) starts the unit (when it is not running) and returns at
        once with its RV(invocation_id) and RV(state) null; judge that run later with O(invocation_id).
    type: bool
    default: true
  invocation_id:
    description:
      - The run to judge, as a start with O(wait=false) returned it. That run is judged as one this task
        started (its log's ready line is the verdict, as with O(start=true)); the task fails at once when the
        unit has started another run since.
    type: str
  release:
    description:
      - With O(start=true), the restart protocol in one call - stop the unit when it runs (C(systemctl stop), which
        sends SIGTERM, and SGLang drains and exits), wait (bounded) until no compute process holds a GPU, every GPU's memory
        use is at most O(release.max_memory_used_mib) and nothing listens on O(release.port), and only then start
        the unit and wait for that run. The stop and wait are the ones M(moesweep.sweep.gpu_released) runs (one
        module_utils, C(release)).
      - When the GPUs or the port are not released in time the task fails naming every PID that still holds them,
        and nothing is started (RV(released) says what was seen).
      - Omitted, nothing is stopped. Only with O(start=true).
    type: dict
    suboptions:
      port:
        description: TCP port that must be free before the start. Omitted, O(port). V(0) skips the port check.
        type: int
      timeout:
        description: Seconds to wait for the release before failing. Must be greater than 0.
        type: float
        default: 60
      max_memory_used_mib:
        description:
          - Largest C(memory.used) per GPU that counts as released. The driver keeps a few hundred MiB per GPU with
            no process at all.
        type: int
        default: 1024
      poll_interval:
        description: Seconds between checks of the release.
        type: float
        default: 0.25
      nvidia_smi_path:
        description: Path of nvidia-smi. Found in E(PATH) when omitted.
        type: path
  node_rank:
    description:
      - The unit's C(--node-rank) on a multi-node server. V(0) (the default, also on one host) serves the API;
        a rank >= 1 serves only the dummy health endpoints and is ready when its health endpoint answers 200.
    type: int
    default: 0
notes:
  - In check mode nothing is stopped, started or read; C(changed) says whether O(start=true) would start the unit
    (with O(release), always, since the unit would be stopped and started again).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Starts the unit only when it is not running; a running unit is only observed.
  platform:
    support: full
    platforms: posix
    details: A systemd host (C(systemctl), C(journalctl)).
seealso:
  - module: ansible.builtin.wait_for
  - module: moesweep.sweep.gpu_released
"""

EXAMPLES = r"""
- name: Start SGLang and wait (fails with cause and decisive line on a crash, hang or timeout)
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    start: true
    port: 30000
    timeout: 1200
    stall_timeout: 300

- name: Restart - stop the old server, wait until its GPUs and port are free, start the new one and wait
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    start: true
    port: 30000
    release:
      timeout: 120

- name: Judge the server that is already running, branching on the outcome
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    port: 30000
    fail_on_error: false
  register: __ready
"""

RETURN = r"""
state:
  description: V(ready), V(crashed), V(hang), V(timeout) or V(stopped). Null in check mode.
  returned: always
  type: str
  choices: [ready, crashed, hang, timeout, stopped]
  sample: crashed
cause:
  description: >-
    For RV(state=crashed): V(unsupported_arch), V(oom), V(nccl), V(jit_compile), V(flag_error), V(port_in_use),
    V(warmup_failed), V(killed), V(segfault), V(aborted) or V(other) (the process's signal tells the last three
    apart; a SIGKILL from the kernel's OOM killer is V(oom)). Null otherwise.
  returned: always
  type: str
  sample: oom
phase:
  description: Phase reached (or died in) - init, load_weights, kv_cache, cuda_graph, http_up, warmup, ready, serving.
  returned: always
  type: str
  sample: cuda_graph
after_ready:
  description: Whether the failure happened after the server had been ready.
  returned: always
  type: bool
  sample: false
decisive_line:
  description: The log line (or observation) that decided the verdict (the exception line for a crash).
  returned: always
  type: str
  sample: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
traceback:
  description: Excerpt of the first traceback (head and tail), or null.
  returned: always
  type: str
timeline:
  description: Phase to C(at) (seconds after the first log line) and C(duration) (seconds), plus C(events).
  returned: always
  type: dict
  sample: {"load_weights": {"at": 5.0, "duration": 40.0}, "ready": {"at": 72.0, "duration": null}}
elapsed:
  description: Seconds this module waited.
  returned: always
  type: float
  sample: 73.4
started:
  description: Whether this task started the unit.
  returned: always
  type: bool
  sample: true
invocation_id:
  description: The systemd InvocationID of the run that was judged (null when the unit never ran).
  returned: always
  type: str
  sample: 553f7b6e4b6b437d80a3bf9fa38b34ae
health_sequence:
  description: Observed health results in order, repeats compressed.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "refused", "count": 600}, {"code": 503, "count": 12}, {"code": 200, "count": 1}]
unit_state:
  description: Last C(systemctl show) properties of the unit.
  returned: always
  type: dict
  sample: {"ActiveState": "failed", "SubState": "failed", "ExecMainCode": "2", "ExecMainStatus": "9",
           "NRestarts": "0", "MainPID": "0"}
waited:
  description: False in check mode, true otherwise.
  returned: always
  type: bool
lines_read:
  description: Journal lines read.
  returned: always
  type: int
verdict_at:
  description:
    - Wall-clock time (seconds since the epoch, this host's clock) when the verdict was reached. Compared
      with the journal timestamp of the decisive line it gives the detection delay (C(bench/readiness_latency.py)).
  returned: when the module waited
  type: float
  sample: 1764451200.123456
released:
  description:
    - With O(release), the stop and release wait before the start - C(stopped) (the unit ran and was stopped),
      C(released), C(elapsed) (seconds), C(holders) (compute processes still on a GPU at the last check),
      C(port_holders) (processes still listening on the port) and C(memory_used_mib) (per GPU). Empty without
      O(release) and in check mode.
  returned: always
  type: dict
  sample: {"stopped": true, "released": true, "elapsed": 0.41, "holders": [], "port_holders": [],
           "memory_used_mib": [3, 3, 3, 3, 3, 3, 3, 3]}
node_rank:
  description: The rank that was judged (O(node_rank)).
  returned: always
  type: int
  sample: 0
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from ansible_collections.moesweep.sweep.plugins.module_utils import release as rel
from ansible_collections.moesweep.sweep.plugins.module_utils.readiness import (
    DEFAULT_HEALTH_TIMEOUT,
    FOLLOWER_HEALTH_PATHS,
    HealthProber,
    JournalFollower,
    Waiter,
    probe_health,
    read_history,
)
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, unit_running, validate_unit

SHOW = ("ActiveState", "SubState", "ExecMainCode", "ExecMainStatus", "NRestarts", "MainPID", "InvocationID")


def summary(unit, state, result, stall_timeout, timeout, node_rank=0):
    if node_rank:
        unit = "%s (node rank %d, health endpoint only)" % (unit, node_rank)
    if state == "ready":
        return "%s is ready after %.1f s" % (unit, result["elapsed"])
    if state == "crashed":
        return "%s crashed (%s) %s after %.1f s: %s" % (
            unit, result["cause"], "after ready" if result["after_ready"] else "during " + str(result["phase"]),
            result["elapsed"], result["decisive_line"])
    if state == "hang":
        if result.get("after_ready"):
            return "%s is up but not serving: %s" % (unit, result["decisive_line"])
        return "%s hung in %s: no log line for %s s" % (unit, result["phase"], stall_timeout)
    if state == "stopped":
        return "%s is not running and has not run since boot" % unit
    return "%s not ready after %s s (phase %s)" % (unit, timeout, result["phase"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            start=dict(type="bool", default=False),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            health_path=dict(type="str", default="/health"),
            health_timeout=dict(type="float", default=DEFAULT_HEALTH_TIMEOUT),
            timeout=dict(type="float", default=900.0),
            stall_timeout=dict(type="float", default=300.0),
            poll_interval=dict(type="float", default=0.1),
            api_key=dict(type="str", no_log=True),
            fail_on_error=dict(type="bool", default=True),
            wait=dict(type="bool", default=True),
            invocation_id=dict(type="str"),
            node_rank=dict(type="int", default=0),
            release=dict(type="dict", options=dict(
                port=dict(type="int"),
                timeout=dict(type="float", default=60.0),
                max_memory_used_mib=dict(type="int", default=1024),
                poll_interval=dict(type="float", default=0.25),
                nvidia_smi_path=dict(type="path"),
            )),
        ),
        supports_check_mode=True,
    )
    p = module.params
    empty = dict(state=None, cause=None, phase=None, after_ready=False, decisive_line=None, traceback=None,
                 timeline={}, elapsed=0.0, health_sequence=[], unit_state={}, lines_read=0, started=False,
                 invocation_id=None, node_rank=p["node_rank"], released={})
    unit, err = validate_unit(p["unit"])
    if err:
        module.fail_json(msg=err, waited=False, **empty)
    for name in ("timeout", "stall_timeout", "poll_interval", "health_timeout"):
        if p[name] is None or p[name] <= 0:
            module.fail_json(msg="%s must be greater than 0, got %s" % (name, p[name]), waited=False, **empty)
    if not 0 < p["port"] < 65536:
        module.fail_json(msg="port must be 1-65535, got %s" % p["port"], waited=False, **empty)
    if p["node_rank"] < 0:
        module.fail_json(msg="node_rank must be >= 0, got %s" % p["node_rank"], waited=False, **empty)
    if p["invocation_id"] is not None and (p["start"] or not p["wait"]):
        module.fail_json(msg="invocation_id judges a run started earlier: give it without start and wait=false",
                         waited=False, **empty)
    path = p["health_path"] if p["health_path"].startswith("/") else "/" + p["health_path"]
    if p["node_rank"] >= 1 and path not in FOLLOWER_HEALTH_PATHS:
        path = "/health"  # a rank >= 1 serves nothing else

    systemctl = module.get_bin_path("systemctl", required=True)
    systemd = Systemctl(module.run_command, systemctl)

    def unit_state():
        return systemd.show(unit, SHOW)[0]

    # The restart protocol's stop and release wait, before anything is started (module_utils release).
    release = p["release"]
    stopped_old = False
    if release is not None:
        if not p["start"] or not p["wait"]:
            module.fail_json(msg="release stops the unit before this task starts it: give it with start=true and "
                                 "wait=true", waited=False, **empty)
        if release["port"] is None:
            release["port"] = p["port"]
        problem = rel.bad_input(release["timeout"], release["poll_interval"], release["port"])
        if problem:
            module.fail_json(msg="release: " + problem, waited=False, **empty)
        nvidia_smi = release["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
        if not nvidia_smi or not os.path.exists(nvidia_smi):
            module.fail_json(msg="no NVIDIA driver found on this host (nvidia-smi not in PATH), so the release of the "
                                 "GPUs cannot be checked; %s was not started" % unit, waited=False, **empty)
        if module.check_mode:
            module.exit_json(changed=True, waited=False,
                             msg="check mode: would stop %s, wait for its GPUs and port, start it and wait" % unit,
                             **empty)
        try:
            released = rel.release(module.run_command, nvidia_smi, systemctl, unit, port=release["port"],
                                   max_memory_used_mib=release["max_memory_used_mib"], timeout=release["timeout"],
                                   poll_interval=release["poll_interval"], clock=time.monotonic, sleep=time.sleep,
                                   listeners=ports.listeners)
        except rel.ReleaseError as e:
            module.fail_json(msg="%s; %s was not started" % (e.msg, unit), rc=e.rc, waited=False,
                             **dict(empty, changed=False))
        empty["released"], stopped_old = released, released["stopped"]
        if not released["released"]:
            module.fail_json(msg="%s; %s was not started" % (released.pop("msg"), unit), waited=False,
                             changed=stopped_old, **empty)

    before = unit_state()
    will_start = p["start"] and not unit_running(before)
    fresh = will_start or p["invocation_id"] is not None
    if module.check_mode:
        module.exit_json(changed=will_start, waited=False,
                         msg="check mode: would %s %s" % ("start and wait for" if will_start else "wait for", unit),
                         **empty)

    journalctl = module.get_bin_path("journalctl", required=True)
    started = time.monotonic()
    if will_start:
        rc, _out, _err, failed = systemd.run("start", unit)
        if failed:
            module.fail_json(msg=failed, rc=rc,
                             changed=stopped_old, waited=False,
                             **dict(empty, unit_state=unit_state()))
        before = unit_state()
    invocation = before.get("InvocationID") or ""
    if not p["wait"]:
        result = dict(empty, started=will_start, invocation_id=invocation or None, unit_state=before, waited=False)
        result["msg"] = "%s %s (run %s); not waiting" % (
            "started" if will_start else "already running:", unit, invocation or "unknown")
        module.exit_json(changed=will_start, **result)
    if p["invocation_id"] is not None and invocation != p["invocation_id"]:
        module.fail_json(msg="%s is on run %s, not on run %s that was started for this wait: something restarted or "
                             "stopped it in between" % (unit, invocation or "none", p["invocation_id"]),
                         waited=False, **dict(empty, unit_state=before, invocation_id=invocation or None))
    if not invocation:
        result = dict(empty, state="stopped", unit_state=before, waited=True)
        result["msg"] = summary(unit, "stopped", result, p["stall_timeout"], p["timeout"], p["node_rank"])
        if p["fail_on_error"]:
            module.fail_json(changed=stopped_old, **result)
        module.exit_json(changed=stopped_old, **result)

    host = p["host"]
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    prober = HealthProber("http://%s:%d%s" % (host, p["port"], path), p["api_key"], timeout=p["health_timeout"],
                          interval=p["poll_interval"], probe=probe_health).start()
    history, cursor = read_history(module.run_command, journalctl, invocation)
    journal = JournalFollower(journalctl, invocation, after_cursor=cursor, history=history)
    try:
        waiter = Waiter(journal, prober, unit_state, timeout=p["timeout"], stall_timeout=p["stall_timeout"],
                        poll_interval=p["poll_interval"], confirm_with_health=not fresh,
                        health_timeout=p["health_timeout"])
        state, _elapsed = waiter.run()
        verdict_at = time.time()
        result = waiter.result(state, time.monotonic() - started)
        result["verdict_at"] = round(verdict_at, 6)
    finally:
        prober.stop()
        journal.close()

    result.update(waited=True, started=will_start, invocation_id=invocation, node_rank=p["node_rank"],
                  released=empty["released"])
    result["msg"] = summary(unit, state, result, p["stall_timeout"], p["timeout"], p["node_rank"])
    changed = will_start or stopped_old
    if state != "ready" and p["fail_on_error"]:
        module.fail_json(changed=changed, **result)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
