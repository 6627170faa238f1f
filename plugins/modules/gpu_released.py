#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: gpu_released
short_description: Wait until GPUs hold no compute process and a TCP port is free
version_added: "0.1.0"
description:
  - Part of the server restart protocol. After the old SGLang server was stopped, waits (bounded)
    until C(nvidia-smi --query-compute-apps) lists no process on any GPU (or none of the given PIDs),
    GPU memory use has dropped below O(max_memory_used_mib), and nothing listens on O(port).
  - Fails with a message naming every PID still holding a GPU or the port, instead of letting a new
    server start on GPUs whose memory is still taken.
  - It only observes; the server is stopped before it by a task of its own (M(ansible.builtin.systemd_service)).
  - In check mode it reports the current state once without waiting (RV(released) may then be false without the
    task failing).
options:
  port:
    description: TCP port that must be free. C(0) skips the port check.
    type: int
    default: 0
  pids:
    description:
      - Only these PIDs count as holders. Empty means any compute process on any GPU counts.
    type: list
    elements: int
    default: []
  max_memory_used_mib:
    description:
      - Largest C(memory.used) per GPU that counts as released. The driver keeps a few hundred MiB
        per GPU with no process at all.
    type: int
    default: 1024
  timeout:
    description: Seconds to wait before failing. Must be greater than 0.
    type: float
    default: 60
  poll_interval:
    description: Seconds between checks.
    type: float
    default: 0.25
  nvidia_smi_path:
    description: Path of nvidia-smi. Found in E(PATH) when omitted.
    type: path
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
attributes:
  check_mode:
    support: full
    details: The current state is reported once, without waiting and without failing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: It only observes.
  platform:
    support: full
    platforms: posix
seealso:
  - module: moesweep.sweep.port_owner
"""

EXAMPLES = r"""
- name: Wait for the old server's GPU memory and port to be released
  moesweep.sweep.gpu_released:
    port: 30000
    timeout: 120
"""

RETURN = r"""
released:
  description: Whether GPUs and port were free before O(timeout).
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 1.25
holders:
  description: Compute processes still on a GPU at the last check.
  returned: always
  type: list
  elements: dict
  sample:
    - {"pid": 4242, "process_name": "sglang::scheduler_TP0", "used_memory_mib": 81234, "gpu_bus_id": "00000000:01:00.0"}
port_holders:
  description: Processes still listening on O(port) at the last check.
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 4242, "cmdline": "python -m sglang.launch_server ..."}]
memory_used_mib:
  description: C(memory.used) per GPU index at the last check.
  returned: always
  type: list
  elements: int
  sample: [3, 3, 3, 3, 3, 3, 3, 3]
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from ansible_collections.moesweep.sweep.plugins.module_utils import release as rel


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", default=0),
            pids=dict(type="list", elements="int", default=[]),
            max_memory_used_mib=dict(type="int", default=1024),
            timeout=dict(type="float", default=60),
            poll_interval=dict(type="float", default=0.25),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problem = rel.bad_input(p["timeout"], p["poll_interval"], p["port"])
    if problem:
        module.fail_json(msg=problem, elapsed=0.0)
    binary = p["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not binary or not os.path.exists(binary):
        module.fail_json(msg="no NVIDIA driver found on this host (nvidia-smi not in PATH)", elapsed=0.0)
    try:
        # In check mode the current state is reported once, without waiting.
        result = rel.release(module.run_command, binary, port=p["port"], pids=p["pids"],
                             max_memory_used_mib=p["max_memory_used_mib"], timeout=p["timeout"],
                             poll_interval=p["poll_interval"], check_mode=module.check_mode, clock=time.monotonic,
                             sleep=time.sleep, listeners=ports.listeners)
    except rel.ReleaseError as e:
        module.fail_json(msg=e.msg, rc=e.rc, stdout=e.stdout, stderr=e.stderr, released=False, elapsed=0.0)
    del result["stopped"]  # nothing to stop: no unit was given
    result["changed"] = False
    if result["released"] or module.check_mode:
        result.pop("msg", None)
        module.exit_json(**result)
    module.fail_json(**result)


if __name__ == "__main__":
    main()
