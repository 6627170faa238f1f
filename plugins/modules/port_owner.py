#!/usr/bin/python
# Copyright: moesweep developers
# Apache License 2.0

DOCUMENTATION = r"""
---
module: port_owner
short_description: Tell which processes (and systemd units) listen on a TCP port
version_added: "0.1.0"
description:
  - Reads C(/proc/net/tcp) and C(/proc/net/tcp6) and maps listening sockets to processes and their
    systemd unit (from C(/proc/PID/cgroup)). Read-only; supports check mode.
  - The server role uses it before writing anything, so that a port already taken by something other
    than its own unit is reported with the owning process instead of surfacing later as a crash.
options:
  port:
    description: TCP port to inspect.
    type: int
    required: true
author:
  - moesweep developers
"""

EXAMPLES = r"""
- name: Who holds the SGLang port?
  moesweep.sweep.port_owner:
    port: 30000
  register: owner
"""

RETURN = r"""
listeners:
  description: Processes with a listening socket on the port.
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 812, "cmdline": "python3 -m http.server 30000", "unit": "foo.service"}]
in_use:
  description: Whether anything listens on the port.
  returned: always
  type: bool
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import ports


def unit_of(pid):
    """The systemd unit a process runs in, from the last path element of its cgroup, or None."""
    if pid is None:
        return None
    try:
        with open("/proc/%d/cgroup" % pid) as fh:
            text = fh.read()
    except OSError:
        return None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.split("/")):
            if part.endswith((".service", ".scope")):
                return part
    return None


def main():
    module = AnsibleModule(argument_spec=dict(port=dict(type="int", required=True)), supports_check_mode=True)
    port = module.params["port"]
    if not 1 <= port <= 65535:
        module.fail_json(msg="port must be between 1 and 65535 (got %d)" % port)
    found = ports.listeners(port)
    for entry in found:
        entry["unit"] = unit_of(entry["pid"])
    module.exit_json(changed=False, listeners=found, in_use=bool(found))


if __name__ == "__main__":
    main()
