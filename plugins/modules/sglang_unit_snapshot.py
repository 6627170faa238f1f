#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_unit_snapshot
short_description: Read a server's systemd unit file, its environment and secrets files and its state in one call
version_added: "0.1.0"
description:
  - Runs on the target, once per sweep and host, before the first point. Reads the unit file at O(unit_path), the
    environment file at O(env_path), the secrets file at O(secret_config_path) (the C(--config) file with the API
    key that M(moesweep.sweep.sglang_unit) writes) with its owner, and the unit's state (C(systemctl show)), so that
    the sweep can put them back at its end (C(-e restore=previous)).
  - It only reads; it never changes the host.
  - RV(env_content) and RV(secret_config_content) may hold C(HF_TOKEN), the API key or other secrets; run the task
    with C(no_log=true).
options:
  name:
    description: The unit's name, for example C(sglang.service).
    type: str
    required: true
  unit_path:
    description: The unit file.
    type: path
    required: true
  env_path:
    description: The unit's environment file.
    type: path
    required: true
  secret_config_path:
    description: The unit's secrets file. Omitted, none is read.
    type: path
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
attributes:
  check_mode:
    details: Reads as outside check mode.
  platform:
    details: Linux with systemd.
seealso:
  - module: moesweep.sweep.sglang_unit
  - module: ansible.builtin.slurp
  - module: ansible.builtin.systemd_service
"""

EXAMPLES = r"""
- name: Read what the host runs before the sweep
  moesweep.sweep.sglang_unit_snapshot:
    name: sglang.service
    unit_path: /etc/systemd/system/sglang.service
    env_path: /etc/moesweep/sglang.env
    secret_config_path: /etc/moesweep/sglang.secrets.yaml
  register: previous
  no_log: true  # the environment and secrets files hold secrets
"""

RETURN = r"""
unit_content:
  description: The unit file's content; null when there is none.
  returned: always
  type: str
  sample: "[Unit]\nDescription=SGLang server (triton)\n"
env_content:
  description: The environment file's content (it may hold secrets); null when there is none.
  returned: always
  type: str
secret_config_content:
  description: The secrets file's content (it holds secrets); null when there is none or O(secret_config_path) is omitted.
  returned: always
  type: str
secret_config_owner:
  description: The secrets file's owner and group (names, or numeric ids the host has no name for); null when there is none.
  returned: always
  type: dict
  sample: {"owner": "sglang", "group": "sglang"}
status:
  description: C(systemctl show) of the unit (an unknown unit reads C(LoadState=not-found)).
  returned: always
  type: dict
  sample: {"ActiveState": "active", "SubState": "running", "LoadState": "loaded", "InvocationID": "5c1bd2f6a9e0"}
active:
  description: Whether the unit runs (C(ActiveState) C(active), C(activating) or C(reloading)).
  returned: always
  type: bool
  sample: true
"""

import grp
import io
import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, unit_running

STATUS_PROPS = ("ActiveState", "SubState", "LoadState", "UnitFileState", "MainPID", "InvocationID")


def read_file(module, path):
    """The file's text exactly as it is (line ends too), or None when it does not exist or cannot be read."""
    try:
        with io.open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except (IOError, OSError):
        return None
    except UnicodeDecodeError as exc:
        module.fail_json(msg="%s is not UTF-8 text (%s), so it could not be put back after the sweep: fix or remove it"
                             % (path, exc))


def owner_of(path):
    """{owner, group} of ``path`` by name (the id as a string when the host has no name for it), or None."""
    try:
        st = os.stat(path)
    except (IOError, OSError):
        return None
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    return {"owner": owner, "group": group}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            unit_path=dict(type="path", required=True),
            env_path=dict(type="path", required=True),
            secret_config_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    systemd = Systemctl(module.run_command, module.get_bin_path("systemctl", required=True))
    unit_content = read_file(module, p["unit_path"])
    env_content = read_file(module, p["env_path"])
    secret_content = secret_owner = None
    if p["secret_config_path"]:
        secret_content = read_file(module, p["secret_config_path"])
        secret_owner = owner_of(p["secret_config_path"]) if secret_content is not None else None
    status, failed = systemd.show(p["name"], STATUS_PROPS)
    if failed:
        module.fail_json(msg=failed)
    module.exit_json(changed=False, unit_content=unit_content, env_content=env_content,
                     secret_config_content=secret_content, secret_config_owner=secret_owner, status=status,
                     active=unit_running(status))


if __name__ == "__main__":
    main()
