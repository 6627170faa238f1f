#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: port_owner
short_description: Tell which processes (and systemd units) listen on a TCP port
version_added: "0.1.0"
description:
  - Reads C(/proc/net/tcp) and C(/proc/net/tcp6) and maps listening sockets to processes and their
    systemd unit (from C(/proc/PID/cgroup)). Read-only; supports check mode.
  - A listening socket whose process cannot be found (another PID namespace, no permission) is listed
    with C(pid) null rather than dropped, so RV(in_use) stays true.
  - With O(allowed_unit), fails when a process outside that unit listens on the port, naming each process, its
    command line and unit, and O(fix). The server role uses it before it writes the unit (a sweep point, the restore)
    and in its check entry point, so that a port already taken by something other than the server's own unit is
    reported with the owning process instead of surfacing later as a crash.
options:
  port:
    description: TCP port to inspect.
    type: int
    required: true
  allowed_unit:
    description: The systemd unit that may listen on O(port) (the server's own). Given, any other listener fails the task.
    type: str
  fix:
    description: How the user frees the O(port), the end of the refusal (with O(allowed_unit)).
    type: str
    default: stop that process or choose another port
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
attributes:
  platform:
    details: Linux (C(/proc)).
seealso:
  - module: moesweep.sweep.gpu_released
"""

EXAMPLES = r"""
- name: Who holds the SGLang port?
  moesweep.sweep.port_owner:
    port: 30000
  register: owner

- name: Refuse the port when anything but the server's unit listens on it
  moesweep.sweep.port_owner:
    port: 8000
    allowed_unit: sglang.service
    fix: stop that process or choose another port in sglang_server_flags.port
"""

RETURN = r"""
listeners:
  description: Processes with a listening socket on O(port).
  returned: always
  type: list
  elements: dict
  contains:
    pid:
      description: The process; null when no process could be matched to the socket.
      type: int
      sample: 812
    cmdline:
      description: Its command line (at most 200 characters), or its C(comm) when that is unreadable.
      type: str
      sample: python3 -m http.server 30000
    unit:
      description: Its systemd service or scope; null outside one.
      type: str
      sample: foo.service
  sample: [{"pid": 812, "cmdline": "python3 -m http.server 30000", "unit": "foo.service"}]
in_use:
  description: Whether anything listens on the port.
  returned: always
  type: bool
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import ports


def main():
    module = AnsibleModule(argument_spec=dict(port=dict(type="int", required=True), allowed_unit=dict(type="str"),
                                              fix=dict(type="str", default="stop that process or choose another port")),
                           supports_check_mode=True)
    port = module.params["port"]
    problem = ports.bad_port(port)
    if problem:
        module.fail_json(msg=problem)
    found = ports.owners(port)
    taken = ports.foreign(found, module.params["allowed_unit"]) if module.params["allowed_unit"] else []
    if taken:
        module.fail_json(msg=ports.in_use_message(port, taken, module.params["fix"]), listeners=found, in_use=True)
    module.exit_json(changed=False, listeners=found, in_use=bool(found))


if __name__ == "__main__":
    main()
