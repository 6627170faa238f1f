#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_restart
short_description: Restart an SGLang server unit (stop, wait until its GPUs and port are free, start) and wait until it serves
description:
  - Runs on the target. The restart protocol in one call, so that a restart costs one round trip - stop the unit when
    it runs (C(systemctl stop), which sends SIGTERM, and SGLang drains and exits), wait (bounded) until no compute
    process holds a GPU, every GPU's memory use is at most O(release.max_memory_used_mib) and nothing listens on
    O(release.port), then start the unit (C(systemctl start)) and wait until that run serves.
  - When the GPUs or the port are not released in time the task fails naming every PID that still holds them, and
    nothing is started (RV(released) says what was seen).
  - The stop and release wait are the ones M(moesweep.sweep.gpu_released) runs (module_utils C(release)); the wait
    after the start is the one M(moesweep.sweep.sglang_ready) runs (module_utils C(readiness)), on the run this task
    started, identified by its systemd C(InvocationID) (the old run's shutdown lines are never read as the new one's).
  - Returns RV(state=ready), RV(state=crashed) with a RV(cause), RV(state=hang), RV(state=timeout) or
    RV(state=stopped), as M(moesweep.sweep.sglang_ready) does, plus RV(released) and RV(started).
  - The ranks of a server over several hosts must all be stopped and released before any starts; they use
    M(ansible.builtin.systemd_service), M(moesweep.sweep.gpu_released), M(moesweep.sweep.sglang_start) and
    M(moesweep.sweep.sglang_ready) instead.
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
  - moesweep.sweep.readiness
options:
  unit:
    description:
      - The systemd unit running SGLang, for example C(sglang.service). C(.service) is added when no
        unit type suffix is given. Only the characters systemd allows in unit names are accepted.
    type: str
    required: true
  release:
    description: The wait between the stop and the start. Omitted, every suboption's default.
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
notes:
  - In check mode nothing is stopped, looked at, started or waited for; C(changed) is true, since the unit would be
    started (and stopped first when it runs).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: none
    details: Every call stops the unit when it runs and starts it again; call it only when a restart is wanted.
  platform:
    support: full
    platforms: posix
    details: A systemd host (C(systemctl), C(journalctl)) with an NVIDIA driver (C(nvidia-smi)).
seealso:
  - module: moesweep.sweep.sglang_ready
  - module: moesweep.sweep.sglang_start
  - module: moesweep.sweep.gpu_released
"""

EXAMPLES = r"""
- name: Restart the server - stop it, wait until its GPUs and port are free, start it and wait until it serves
  moesweep.sweep.sglang_restart:
    unit: sglang.service
    port: 30000
    timeout: 1200
    stall_timeout: 300
    release:
      timeout: 120
  register: __restarted
"""

RETURN = r"""
state:
  description: V(ready), V(crashed), V(hang), V(timeout) or V(stopped). Null when nothing was started, and in check mode.
  returned: always
  type: str
  choices: [ready, crashed, hang, timeout, stopped]
  sample: crashed
cause:
  description: >-
    For RV(state=crashed): V(unsupported_arch), V(oom), V(nccl), V(stuck), V(jit_compile), V(flag_error),
    V(port_in_use), V(warmup_failed), V(killed), V(segfault), V(aborted) or V(other) (V(stuck): SGLang's forward
    watchdog ended a batch that made no progress for C(--watchdog-timeout); the process's signal tells the last three
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
  description: Seconds from the start to the verdict (the stop and release wait are RV(released)'s C(elapsed)).
  returned: always
  type: float
  sample: 73.4
started:
  description:
    - Whether this task started the unit. False when the release failed (nothing was started), and when the unit ran
      again after the stop without this task starting it (that run is then judged as one found running).
  returned: always
  type: bool
  sample: true
invocation_id:
  description: The systemd InvocationID of the run that was judged (null when nothing was started).
  returned: always
  type: str
  sample: 553f7b6e4b6b437d80a3bf9fa38b34ae
health_sequence:
  description: Observed health results in order, repeats compressed.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "refused", "count": 600}, {"code": 503, "count": 12}, {"code": 200, "count": 1}]
running:
  description: The unit's process is up or coming up at the verdict (C(ActiveState) active, activating or reloading, from
    RV(unit_state)); a server that runs but does not serve is running.
  returned: always
  type: bool
  sample: false
unit_state:
  description: Last C(systemctl show) properties of the unit.
  returned: always
  type: dict
  sample: {"ActiveState": "failed", "SubState": "failed", "ExecMainCode": "2", "ExecMainStatus": "9",
           "NRestarts": "0", "MainPID": "0"}
waited:
  description: Whether the task waited for a verdict (false in check mode and when nothing was started).
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
  returned: when the module waited for a run
  type: float
  sample: 1764451200.123456
released:
  description:
    - The stop and release wait before the start - C(stopped) (the unit ran and was stopped), C(released),
      C(elapsed) (seconds), C(holders) (compute processes still on a GPU at the last check), C(port_holders)
      (processes still listening on the port) and C(memory_used_mib) (per GPU). Empty in check mode and when a
      command of the wait failed (nvidia-smi, C(systemctl stop)).
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
from ansible_collections.moesweep.sweep.plugins.module_utils import ports, readiness
from ansible_collections.moesweep.sweep.plugins.module_utils import release as rel
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, validate_unit

RELEASE_SPEC = dict(
    port=dict(type="int"),
    timeout=dict(type="float", default=60.0),
    max_memory_used_mib=dict(type="int", default=1024),
    poll_interval=dict(type="float", default=0.25),
    nvidia_smi_path=dict(type="path"),
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            release=dict(type="dict", options=RELEASE_SPEC, apply_defaults=True),
            **readiness.wait_spec()
        ),
        supports_check_mode=True,
    )
    p = module.params
    release = p["release"]
    if release["port"] is None:
        release["port"] = p["port"]
    empty = dict(readiness.no_verdict(p["node_rank"]), started=False, released={})
    unit, err = validate_unit(p["unit"])
    problem = err or readiness.bad_wait_input(p)
    bad_release = rel.bad_input(release["timeout"], release["poll_interval"], release["port"])
    if problem or bad_release:
        module.fail_json(msg=problem or "release: " + bad_release, waited=False, **empty)
    # every tool found before the stop: a missing one never leaves the unit stopped
    systemctl = module.get_bin_path("systemctl", required=True)
    journalctl = module.get_bin_path("journalctl", required=True)
    nvidia_smi = release["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not nvidia_smi or not os.path.exists(nvidia_smi):
        module.fail_json(msg="no NVIDIA driver found on this host (nvidia-smi not in PATH), so the release of the "
                             "GPUs cannot be checked; %s was not started" % unit, waited=False, **empty)
    if module.check_mode:
        module.exit_json(changed=True, waited=False,
                         msg="check mode: would stop %s, wait for its GPUs and port, start it and wait" % unit, **empty)

    # stop and release wait (module_utils release), before anything is started
    try:
        released = rel.release(module.run_command, nvidia_smi, systemctl, unit, port=release["port"],
                               max_memory_used_mib=release["max_memory_used_mib"], timeout=release["timeout"],
                               poll_interval=release["poll_interval"], clock=time.monotonic, sleep=time.sleep,
                               listeners=ports.listeners)
    except rel.ReleaseError as e:
        module.fail_json(msg="%s; %s was not started" % (e.msg, unit), rc=e.rc, waited=False,
                         **dict(empty, changed=False))
    empty["released"], stopped = released, released["stopped"]
    if not released["released"]:
        module.fail_json(msg="%s; %s was not started" % (released.pop("msg"), unit), waited=False, changed=stopped,
                         **empty)

    # start, then the wait for that run (module_utils readiness)
    systemd = Systemctl(module.run_command, systemctl)
    since = time.monotonic()
    started, props, rc, failed = systemd.start(unit, readiness.UNIT_PROPS)
    if failed:
        module.fail_json(msg=failed, rc=rc, changed=stopped, waited=False, **dict(empty, unit_state=props))
    result = readiness.judge_run(module.run_command, journalctl, unit, props,
                                 lambda: systemd.show(unit, readiness.UNIT_PROPS)[0], p, fresh=started, since=since)
    result.update(started=started, released=released)
    changed = started or stopped
    if result["state"] != "ready" and p["fail_on_error"]:
        module.fail_json(changed=changed, **result)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
