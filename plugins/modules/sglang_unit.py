#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_unit
short_description: Install a server's systemd unit, its environment and secrets files, reload systemd when needed, read the unit's state
version_added: "0.1.0"
description:
  - Runs on the target, one call per sweep point. Writes O(unit_content) to O(unit_path) (root, mode 0644) and
    O(env_content) to O(env_path) (root, mode 0600, as it may carry C(HF_TOKEN) or the API key), each only when its
    content, owner or mode differ, each atomically (a temporary file in the same directory, then a rename).
  - Writes O(secret_config_content) to O(secret_config_path) (mode 0600, owned by O(secret_config_owner)), the
    C(--config) YAML file through which the server reads its API key, so that the key is never on its command line,
    where any local user reads it (C(/proc/PID/cmdline)). With O(secret_config_path) and no O(secret_config_content)
    a file left at that path is removed (a server without a key has no such file).
  - With O(verify=true) a changed unit is first checked by C(systemd-analyze verify) under its real name; any output
    (systemd reports unknown keys and bad values as warnings, with exit status 0) fails the task, and nothing is written.
  - Runs C(systemctl daemon-reload) when the unit file changed or when systemd runs an older copy than the file on
    disk (C(NeedDaemonReload=yes), left by a run that stopped between writing and reloading); enables or disables
    the unit at boot when O(enabled) is given; then reads the unit's state with C(systemctl show).
  - RV(config_changed) is the decision a restart hangs on, true when the unit, its environment file or its secrets
    file changed (written or removed), or systemd had not loaded the unit file on disk. Owner or mode repairs alone
    change no configuration.
  - The content is rendered on the controller by the caller (C(lookup('ansible.builtin.template', ...))). The service
    account and the directories the unit names are made before (the server role's C(install) entry point), and a
    port another process holds is refused before (M(moesweep.sweep.port_owner)).
options:
  name:
    description: The unit's name, for example C(sglang.service).
    type: str
    required: true
  unit_path:
    description: Where the unit file goes.
    type: path
    required: true
  unit_content:
    description: The unit file's content.
    type: str
    required: true
  env_path:
    description: Where the environment file goes. Required with O(env_content).
    type: path
  env_content:
    description:
      - The environment file's content. Never logged or shown in a diff. Omitted, the environment file is left alone.
    type: str
  secret_config_path:
    description:
      - Where the server's secrets file goes (for sglang, the C(--config) YAML file that holds C(api-key)), beside the
        environment file. Omitted, no secrets file is looked at.
    type: path
  secret_config_content:
    description:
      - The secrets file's content. Never logged or shown in a diff. Omitted with O(secret_config_path) given, a file
        at that path is removed.
    type: str
  secret_config_owner:
    description:
      - The secrets file's owner, the user the server runs as (the server reads the file itself, unlike the
        environment file, which systemd reads as root). Defaults to C(root); the user must exist.
    type: str
  secret_config_group:
    description: The secrets file's group. Defaults to C(root); the group must exist.
    type: str
  verify:
    description: Check a changed unit with C(systemd-analyze verify) before it replaces the old one.
    type: bool
    default: true
  enabled:
    description: Enable (V(true)) or disable (V(false)) the unit at boot. Omitted, left as it is.
    type: bool
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
attributes:
  check_mode:
    support: full
    details: Reports what would change (and RV(config_changed)) from the files and systemd's state, writes and reloads nothing.
  diff_mode:
    support: full
    details: The unit file's before and after; the environment file's and the secrets file's contents are never shown.
  idempotent:
    support: full
    details: A second call with the same content changes nothing.
  platform:
    support: full
    platforms: posix
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.systemd_service
  - module: moesweep.sweep.sglang_restart
  - module: moesweep.sweep.sglang_ready
  - module: moesweep.sweep.port_owner
"""

EXAMPLES = r"""
- name: Install the unit and its environment file, reload systemd when needed
  moesweep.sweep.sglang_unit:
    name: sglang.service
    unit_path: /etc/systemd/system/sglang.service
    unit_content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
    env_path: /etc/sglang/sglang.env
    env_content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
    # the API key, read by sglang through --config (the unit's ExecStart names this file); no key, no file
    secret_config_path: /etc/sglang/sglang.secrets.yaml
    secret_config_content: "{{ ('api-key: ' ~ (api_key | to_json) ~ '\n') if api_key | length > 0 else omit }}"
    enabled: false
    secret_config_owner: sglang
    secret_config_group: sglang
  register: unit

- name: Restart only when the configuration changed
  ansible.builtin.debug:
    msg: "restart needed: {{ unit.config_changed }}"
"""

RETURN = r"""
config_changed:
  description: The unit, the environment file or the secrets file changed, or systemd had not loaded the unit file on disk.
  returned: always
  type: bool
  sample: true
unit_changed:
  description: The unit file's content changed (or it was created).
  returned: always
  type: bool
env_changed:
  description: The environment file's content changed (or it was created).
  returned: always
  type: bool
secret_config_changed:
  description: The secrets file's content changed, it was created, or it was removed.
  returned: always
  type: bool
reloaded:
  description: C(systemctl daemon-reload) ran (in check mode, would run).
  returned: always
  type: bool
stale:
  description: Before the call, systemd ran an older copy of the unit than the file on disk (C(NeedDaemonReload=yes)).
  returned: always
  type: bool
enabled:
  description: Whether the unit is enabled at boot after the call (in check mode, would be).
  returned: always
  type: bool
running:
  description: The unit's process is up or coming up after the call (C(ActiveState) active, activating or reloading).
  returned: always
  type: bool
  sample: true
status:
  description: C(systemctl show) of the unit after the call.
  returned: always
  type: dict
  sample: {"ActiveState": "active", "SubState": "running", "NeedDaemonReload": "no", "UnitFileState": "disabled"}
"""

import grp
import os
import pwd
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, unit_running

STATUS_PROPS = ("ActiveState", "SubState", "LoadState", "NeedDaemonReload", "UnitFileState", "MainPID",
                "InvocationID")
# systemctl show UnitFileState values that start the unit at boot (a unit not loaded yet shows none: not enabled)
ENABLED_STATES = ("enabled", "enabled-runtime")
UNIT_MODE = 0o644
ENV_MODE = 0o600
SECRET_MODE = 0o600


def file_state(path, content, mode, uid=0, gid=0):
    """(content differs, owner or mode differ) of ``path`` against what it must be (``uid``:``gid``, ``mode``;
    ``uid`` / ``gid`` None: an owner not made yet, which differs)."""
    try:
        with open(path, "rb") as fh:
            current = fh.read()
        st = os.stat(path)
    except (IOError, OSError):
        return True, True
    differs = current != content.encode("utf-8")
    attrs = (st.st_mode & 0o7777) != mode or st.st_uid != uid or st.st_gid != gid
    return differs, attrs


def read_text(path):
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError):
        return ""


def write_atomic(path, content, mode, uid=0, gid=0):
    """Write ``content`` to a temporary file beside ``path`` (``uid``:``gid``, ``mode``, fsynced), then rename it
    over. mkstemp makes the file 0600: no other user can read a secret in it before its mode is set."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        os.fchmod(fd, mode)
        os.fchown(fd, uid, gid)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fix_attrs(path, mode, uid=0, gid=0):
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def owner_ids(module, user, group):
    """(uid, gid) of ``user`` and ``group``; (None, None) in check mode while one of them is not made yet (the
    account is only predicted then); a missing one fails the task otherwise."""
    try:
        return pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError:
        if module.check_mode:
            return None, None
        module.fail_json(msg="secret_config: the secrets file's owner %s or group %s does not exist on the host: "
                             "make the service account first (the server role's install entry point)" % (user, group))


def secret_state(module, p):
    """(write, attrs, remove, uid, gid) of the secrets file: its content differs (write), only its owner or mode
    does (attrs), or a file is left where none must be (remove)."""
    path, content = p["secret_config_path"], p["secret_config_content"]
    if path is None:
        return False, False, False, None, None
    if content is None:
        return False, False, os.path.lexists(path), None, None
    uid, gid = owner_ids(module, p["secret_config_owner"] or "root", p["secret_config_group"] or "root")
    write, attrs = file_state(path, content, SECRET_MODE, uid, gid)
    return write, attrs, False, uid, gid


def verify_unit(module, name, content):
    """(ok, output) of ``systemd-analyze verify`` on the candidate unit under its real name, from a private temporary
    directory (systemd never sees it)."""
    analyze = module.get_bin_path("systemd-analyze", required=True)
    directory = tempfile.mkdtemp(prefix="moesweep-unit-", dir=module.tmpdir)
    candidate = os.path.join(directory, name)
    with open(candidate, "w") as fh:
        fh.write(content)
    try:
        rc, out, err = module.run_command([analyze, "verify", "--man=no", "%s:%s" % (candidate, name)],
                                          environ_update={"LC_ALL": "C"})
    finally:
        os.unlink(candidate)
        os.rmdir(directory)
    text = (out + err).replace(candidate, name).strip()
    return rc == 0 and not text, text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            unit_path=dict(type="path", required=True),
            unit_content=dict(type="str", required=True),
            env_path=dict(type="path"),
            env_content=dict(type="str", no_log=True),
            secret_config_path=dict(type="path"),
            secret_config_content=dict(type="str", no_log=True),
            # names, not secrets (validate-modules asks of every option named *secret*)
            secret_config_owner=dict(type="str", no_log=False),
            secret_config_group=dict(type="str", no_log=False),
            verify=dict(type="bool", default=True),
            enabled=dict(type="bool"),
        ),
        required_together=[("env_path", "env_content")],
        required_by={"secret_config_content": "secret_config_path"},
        supports_check_mode=True,
    )
    p = module.params
    systemd = Systemctl(module.run_command, module.get_bin_path("systemctl", required=True))

    def show():
        status, failed = systemd.show(p["name"], STATUS_PROPS)
        if failed:
            module.fail_json(msg=failed)
        return status

    def run(*argv):
        failed = systemd.run(*argv)[3]
        if failed:
            module.fail_json(msg=failed)

    unit_changed, unit_attrs = file_state(p["unit_path"], p["unit_content"], UNIT_MODE)
    env_changed = env_attrs = False
    if p["env_content"] is not None:
        env_changed, env_attrs = file_state(p["env_path"], p["env_content"], ENV_MODE)
    before = show()
    stale = before.get("NeedDaemonReload") == "yes"
    before_text = read_text(p["unit_path"]) if unit_changed and module._diff else None

    if unit_changed and p["verify"]:
        ok, text = verify_unit(module, p["name"], p["unit_content"])
        if not ok:
            module.fail_json(msg="the rendered unit %s does not pass systemd-analyze verify, nothing was written: %s"
                             % (p["name"], text or "(it failed without saying why)"),
                             verify_output=text, config_changed=False, unit_changed=False, env_changed=False,
                             secret_config_changed=False, reloaded=False, stale=stale, enabled=None,
                             status=before)

    reloaded = unit_changed or stale
    secret_write, secret_attrs, secret_remove, secret_uid, secret_gid = secret_state(module, p)
    if not module.check_mode:
        # the environment and secrets files first: a unit that names them never starts against a missing one
        if env_changed:
            write_atomic(p["env_path"], p["env_content"], ENV_MODE)
        elif env_attrs:
            fix_attrs(p["env_path"], ENV_MODE)
        if secret_write:
            write_atomic(p["secret_config_path"], p["secret_config_content"], SECRET_MODE, secret_uid, secret_gid)
        elif secret_attrs:
            fix_attrs(p["secret_config_path"], SECRET_MODE, secret_uid, secret_gid)
        if unit_changed:
            write_atomic(p["unit_path"], p["unit_content"], UNIT_MODE)
        elif unit_attrs:
            fix_attrs(p["unit_path"], UNIT_MODE)
        if secret_remove:
            os.unlink(p["secret_config_path"])  # after the unit that named it was replaced
        if reloaded:
            run("daemon-reload")

    after = before if module.check_mode else show()
    is_enabled = after.get("UnitFileState", "") in ENABLED_STATES
    enabled_changed = p["enabled"] is not None and is_enabled != p["enabled"]
    if enabled_changed:
        is_enabled = p["enabled"]
        if not module.check_mode:
            run("enable" if p["enabled"] else "disable", p["name"])
            after = show()
            is_enabled = after.get("UnitFileState", "") in ENABLED_STATES

    secret_changed = secret_write or secret_remove
    changed = (unit_changed or env_changed or secret_changed or unit_attrs or env_attrs or secret_attrs or reloaded
               or enabled_changed)
    result = dict(changed=changed, config_changed=unit_changed or env_changed or secret_changed or stale,
                  unit_changed=unit_changed, env_changed=env_changed, secret_config_changed=secret_changed,
                  reloaded=reloaded, stale=stale, enabled=is_enabled,
                  status=after,
                  running=unit_running(after))
    if before_text is not None:
        result["diff"] = {"before_header": p["unit_path"], "after_header": p["unit_path"], "before": before_text,
                          "after": p["unit_content"]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
