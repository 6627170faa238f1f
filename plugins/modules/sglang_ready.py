#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait until an SGLang server unit's current run is ready, or say why it is not
description:
  - Runs on the target. Judges one run of the unit, identified by its systemd C(InvocationID), and never starts,
    stops or restarts the unit (M(moesweep.sweep.sglang_start) starts it, M(moesweep.sweep.sglang_restart) restarts
    it and waits in one call). Every line that run wrote to the journal is read (never a line of an older run), the
    HTTP health endpoint is probed (refused, then 503, then 200) in a background thread so a slow C(/health) never
    blocks the journal watch, and the unit's state is watched.
  - Without O(invocation_id), the unit's current run is judged on everything it wrote. A server still loading is
    waited for, and a server whose log says ready but whose health endpoint no longer answers is reported as up but
    not serving (phase C(serving)), so the caller can restart it.
  - With O(invocation_id) - the run a M(moesweep.sweep.sglang_start) task returned - that run is judged as one the
    caller started (its log's ready line is the verdict); the task fails at once when the unit has started another
    run since. This is how the ranks of one server are started in an order and then waited for together.
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
  - The log classifier is the collection's module_utils C(sglang_log), the same one C(moesweep classify-log)
    runs on saved logs; the wait is module_utils C(readiness) (C(judge_run)), the one M(moesweep.sweep.sglang_restart)
    runs after its start.
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
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
  invocation_id:
    description:
      - The run to judge, as M(moesweep.sweep.sglang_start) returned it. That run is judged as one the caller
        started (its log's ready line is the verdict); the task fails at once when the unit has started another run
        since. Omitted, the unit's current run is judged as one found running.
    type: str
notes:
  - In check mode nothing is read and nothing waited for; RV(waited) is false and nothing changes.
attributes:
  idempotent:
    details: It only observes the unit, its journal and its health endpoint.
  platform:
    details: A systemd host (C(systemctl), C(journalctl)).
seealso:
  - module: moesweep.sweep.sglang_start
  - module: moesweep.sweep.sglang_restart
  - module: ansible.builtin.wait_for
"""

EXAMPLES = r"""
- name: Judge the server that is already running, branching on the outcome
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    port: 30000
    fail_on_error: false
  register: __ready

- name: Start a rank without waiting
  moesweep.sweep.sglang_start:
    unit: sglang.service
  register: __started

- name: Wait for the run that was started (fails with cause and decisive line on a crash, hang or timeout)
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    invocation_id: "{{ __started.invocation_id }}"
    port: 30000
    timeout: 1200
    stall_timeout: 300
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
  description: Seconds this module waited.
  returned: always
  type: float
  sample: 73.4
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

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import readiness
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, validate_unit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            invocation_id=dict(type="str"),
            **readiness.wait_spec()
        ),
        supports_check_mode=True,
    )
    p = module.params
    empty = readiness.no_verdict(p["node_rank"])
    unit, err = validate_unit(p["unit"])
    problem = err or readiness.bad_wait_input(p)
    if problem:
        module.fail_json(msg=problem, waited=False, **empty)
    systemctl = module.get_bin_path("systemctl", required=True)
    systemd = Systemctl(module.run_command, systemctl)

    def unit_state():
        return systemd.show(unit, readiness.UNIT_PROPS)[0]

    if module.check_mode:
        module.exit_json(changed=False, waited=False, msg="check mode: would wait for %s" % unit, **empty)
    journalctl = module.get_bin_path("journalctl", required=True)
    since = time.monotonic()
    props = unit_state()
    invocation = props.get("InvocationID") or None
    if p["invocation_id"] is not None and invocation != p["invocation_id"]:
        module.fail_json(msg="%s is on run %s, not on run %s that was started for this wait: something restarted or "
                             "stopped it in between" % (unit, invocation or "none", p["invocation_id"]),
                         waited=False, **dict(empty, unit_state=props, invocation_id=invocation))
    result = readiness.judge_run(module.run_command, journalctl, unit, props, unit_state, p,
                                 fresh=p["invocation_id"] is not None, since=since)
    if result["state"] != "ready" and p["fail_on_error"]:
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
