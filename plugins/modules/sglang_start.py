#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_start
short_description: Start an SGLang server unit when it does not run, and return its run's InvocationID
description:
  - Runs on the target. C(systemctl start) of the unit when it does not run, and nothing else - no stop, no wait.
    It returns the run's systemd C(InvocationID), so that a later M(moesweep.sweep.sglang_ready) task with
    O(moesweep.sweep.sglang_ready#module:invocation_id) judges exactly that run (its log's ready line is the verdict)
    and fails when the unit has started another run since.
  - This is how several units are started in an order and then waited for together - the ranks of one server over
    several hosts (rank 0 first, it serves the dist-init rendezvous the others join) - or a unit is started after
    a stop and release wait of its own.
  - A unit that runs already is left alone (RV(started=false)) and its current run is returned.
    M(ansible.builtin.systemd_service) with O(ansible.builtin.systemd_service#module:state=started) does the same
    start but does not return the run.
  - To stop, wait until the GPUs and the port are free, start and wait in one call, use
    M(moesweep.sweep.sglang_restart).
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
notes:
  - In check mode the unit's state is read and nothing is started; C(changed) says whether the unit would be started.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Starts the unit only when it does not run; a running unit is only observed.
  platform:
    support: full
    platforms: posix
    details: A systemd host (C(systemctl)).
seealso:
  - module: moesweep.sweep.sglang_ready
  - module: moesweep.sweep.sglang_restart
  - module: ansible.builtin.systemd_service
"""

EXAMPLES = r"""
- name: Start rank 0 first (it serves the dist-init rendezvous the other ranks join)
  moesweep.sweep.sglang_start:
    unit: sglang.service
  register: __started

- name: Wait for that run, not for one that may replace it
  moesweep.sweep.sglang_ready:
    unit: sglang.service
    invocation_id: "{{ __started.invocation_id }}"
"""

RETURN = r"""
started:
  description: Whether this task started the unit (in check mode, whether it would).
  returned: always
  type: bool
  sample: true
invocation_id:
  description:
    - The systemd InvocationID of the unit's run after the task - the one it started, or the one that ran already.
      Null when the unit has no run (check mode on a unit that does not run, a start that failed).
  returned: always
  type: str
  sample: 553f7b6e4b6b437d80a3bf9fa38b34ae
unit_state:
  description: C(systemctl show) properties of the unit after the task.
  returned: always
  type: dict
  sample: {"ActiveState": "activating", "SubState": "start", "MainPID": "4242",
           "InvocationID": "553f7b6e4b6b437d80a3bf9fa38b34ae"}
msg:
  description: One-line summary.
  returned: always
  type: str
  sample: "started sglang.service (run 553f7b6e4b6b437d80a3bf9fa38b34ae)"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils.readiness import UNIT_PROPS
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, validate_unit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    unit, err = validate_unit(module.params["unit"])
    if err:
        module.fail_json(msg=err, started=False, invocation_id=None, unit_state={})
    systemd = Systemctl(module.run_command, module.get_bin_path("systemctl", required=True))
    started, props, rc, failed = systemd.start(unit, UNIT_PROPS, check_mode=module.check_mode)
    invocation = props.get("InvocationID") or None
    if failed:
        module.fail_json(msg=failed, rc=rc, changed=False, started=False, invocation_id=invocation, unit_state=props)
    if module.check_mode:
        msg = "check mode: would start %s" % unit if started else "%s runs already (run %s)" % (unit, invocation)
    else:
        msg = "%s %s (run %s)" % ("started" if started else "already running:", unit, invocation or "unknown")
    module.exit_json(changed=started, started=started, invocation_id=invocation, unit_state=props, msg=msg)


if __name__ == "__main__":
    main()
