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
  - With O(stop_unit) it stops that systemd unit first (C(systemctl stop) sends SIGTERM and returns once the unit's
    processes have exited or systemd killed them after C(TimeoutStopSec)), so that a restart's stop and release
    wait are one call. Without it the module only observes.
  - In check mode it reports the current state once without waiting (RV(released) may then be false without the
    task failing), and stops nothing.
options:
  stop_unit:
    description: A systemd unit to stop before waiting, for example C(sglang.service). Omitted, nothing is stopped.
    type: str
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
    details: It only observes, and with O(stop_unit) stops a unit that runs (changed only then).
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
stopped:
  description: O(stop_unit) was running and was stopped (in check mode, would be).
  returned: always
  type: bool
  sample: true
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
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from ansible_collections.moesweep.sweep.plugins.module_utils.readiness import parse_show, poll_until


def _snapshot(module, binary, wanted_pids, port):
    env = {"LC_ALL": "C"}
    rc, out, err = module.run_command(
        [binary, "--query-compute-apps=pid,process_name,used_memory,gpu_bus_id", "--format=csv,nounits"],
        environ_update=env,
    )
    failure = smi.detect_driver_failure(out, err)
    if rc != 0 or failure:
        module.fail_json(msg="nvidia-smi failed: %s" % (failure or err.strip() or out.strip()), rc=rc,
                         stdout=out, stderr=err)
    apps = smi.parse_compute_apps(out)
    if wanted_pids:
        apps = [a for a in apps if a["pid"] in wanted_pids]
    rc, out, err = module.run_command([binary, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                                      environ_update=env)
    used = []
    if rc == 0:
        used = [int(r["memory_used_mib"] or 0) for r in smi.parse_query_gpu(out, ["index", "memory.used"])]
    port_holders = ports.listeners(port) if port else []
    return apps, used, port_holders


# ActiveState values of a unit that has processes to stop (systemctl show; as ansible.builtin.systemd_service's
# is_running_service and is_deactivating_service count them)
RUNNING_STATES = ("active", "activating", "deactivating")


def stop_unit(module, unit):
    """Stop ``unit`` when it runs (systemctl stop blocks until it has stopped); whether it ran."""
    systemctl = module.get_bin_path("systemctl", required=True)
    env = {"LC_ALL": "C"}
    rc, out, err = module.run_command([systemctl, "show", unit, "-p", "ActiveState"], environ_update=env)
    if rc != 0 or parse_show(out).get("ActiveState") not in RUNNING_STATES:
        return False
    if not module.check_mode:
        rc, out, err = module.run_command([systemctl, "stop", unit], environ_update=env)
        if rc != 0:
            module.fail_json(msg="systemctl stop %s failed (rc %d): %s" % (unit, rc, (err or out).strip()),
                             stopped=False, released=False, elapsed=0.0)
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", default=0),
            pids=dict(type="list", elements="int", default=[]),
            max_memory_used_mib=dict(type="int", default=1024),
            timeout=dict(type="float", default=60),
            poll_interval=dict(type="float", default=0.25),
            nvidia_smi_path=dict(type="path"),
            stop_unit=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be greater than 0 (got %s)" % p["timeout"], elapsed=0.0)
    if p["poll_interval"] <= 0:
        module.fail_json(msg="poll_interval must be greater than 0", elapsed=0.0)
    if not 0 <= p["port"] <= 65535:
        module.fail_json(msg="port must be between 0 and 65535", elapsed=0.0)
    binary = p["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not binary or not os.path.exists(binary):
        module.fail_json(msg="no NVIDIA driver found on this host (nvidia-smi not in PATH)", elapsed=0.0)
    wanted = set(p["pids"])
    stopped = stop_unit(module, p["stop_unit"]) if p["stop_unit"] else False

    def observe():
        apps, used, port_holders = _snapshot(module, binary, wanted, p["port"])
        return dict(holders=apps, port_holders=port_holders, memory_used_mib=used)

    def released(seen):
        return (not seen["holders"] and not seen["port_holders"]
                and all(u <= p["max_memory_used_mib"] for u in seen["memory_used_mib"]))

    # In check mode the current state is reported once, without waiting.
    timeout = 0.0 if module.check_mode else p["timeout"]
    ok, seen, elapsed = poll_until(observe, released, timeout, p["poll_interval"], clock=time.monotonic,
                                   sleep=time.sleep)
    result = dict(changed=stopped, stopped=stopped, released=ok, elapsed=round(elapsed, 3), **seen)
    if ok or module.check_mode:
        module.exit_json(**result)
    who = ["PID %s (%s) holds %s MiB on GPU %s" % (a["pid"], a["process_name"], a["used_memory_mib"], a["gpu_bus_id"])
           for a in seen["holders"]]
    who += ["PID %s (%s) listens on port %s" % (h["pid"], h["cmdline"], p["port"]) for h in seen["port_holders"]]
    if not who:
        who = ["GPU memory still in use: %s MiB (limit %s MiB per GPU)" % (seen["memory_used_mib"],
                                                                           p["max_memory_used_mib"])]
    module.fail_json(msg="GPUs not released after %.1f s: %s" % (elapsed, "; ".join(who)), **result)


if __name__ == "__main__":
    main()
