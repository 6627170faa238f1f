#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sweep_lock
short_description: One sweep at a time per host - take, refresh or release the host's sweep lock
description:
  - Runs on the target. The lock is a file (O(path), on C(/run), so it does not survive a reboot, nor need to) written
    with C(O_CREAT|O_EXCL), holding who took it (O(owner) - a random id per sweep run, the controller, its process,
    the sweep) and until when
    (a lease of O(lease) seconds, refreshed at a sweep's points; the action plugin answers a refresh itself, without
    reaching the host, while more than half of the lease is left).
  - V(acquired) takes the lock, or refreshes it when O(owner) already holds it; when another owner holds a lease
    that has not expired it fails naming that owner, since when, and how to break the lock if that sweep is dead
    (O(break_id), C(-e sweep_lock_break=ID) or C(moesweep sweep --break-lock ID)); the action plugin of the same name
    breaks it itself when it can tell the holder was a process of the same controller, in the same PID namespace,
    that is gone (a holder in another PID namespace of the same machine is never judged from here). V(released)
    removes the lock if O(owner) holds it.
  - Owners are told apart by their C(id) (a hostname is not unique); a lock without one (older moesweep) by its
    controller, process and sweep.
version_added: "0.1.0"
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
options:
  state:
    description: Take (or refresh) or release the lock.
    type: str
    choices: [acquired, released]
    default: acquired
  owner:
    description: Who takes it - C(id) (what tells owners apart), C(controller), C(machine), C(boot), C(pid),
      C(pid_start), C(pidns) (its PID namespace), C(sweep_id), C(user).
    type: dict
    required: true
  break_id:
    description:
      - Take the lock when, and only when, the lock held now has this C(id) (the one the busy message names) - the
        explicit way to clear a lock left by a sweep whose controller is gone. A lock taken since by another sweep
        has another id and is not broken.
    type: str
  lease:
    description: Seconds the lock holds without a refresh. Must be greater than 0.
    type: float
    default: 21600
  steal:
    description: Take the lock even when another owner's lease has not expired.
    type: bool
    default: false
  path:
    description: The lock file.
    type: path
    default: /run/moesweep/sweep.lock
attributes:
  check_mode:
    support: full
    details: In check mode it reports whether the lock could be taken, and takes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Take the host's sweep lock
  moesweep.sweep.sweep_lock:
    owner: {id: 3b1f0c9e6a7d4e21, controller: laptop, pid: 4242, sweep_id: sweep-3f2a9c1b0d4e, user: alice}

- name: Break the lock left by a sweep whose controller died (the id its busy message named)
  moesweep.sweep.sweep_lock:
    owner: {id: 9c0ffee1d2e3f405, controller: laptop, pid: 4343, sweep_id: sweep-3f2a9c1b0d4e, user: alice}
    break_id: 3b1f0c9e6a7d4e21
"""

RETURN = r"""
held_by:
  description: The lock's content after the call (or the other owner's, when busy), with C(since) and C(expires).
  returned: always
  type: dict
  sample: {"id": "3b1f0c9e6a7d4e21", "controller": "laptop", "pid": 4242, "sweep_id": "sweep-3f2a9c1b0d4e",
           "since": 1764451200.0}
broke:
  description: The lock that was broken (O(break_id), or a holder the action plugin found gone).
  returned: when a lock held by another owner was taken
  type: dict
busy:
  description: Another owner holds an unexpired lease.
  returned: always
  type: bool
refreshed:
  description: C(false) when the action plugin answered a refresh itself (more than half of the lease left).
  returned: when the refresh did not reach the host
  type: bool
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule


def _read(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (IOError, OSError, ValueError):
        return None


def same_owner(a, b):
    if not (a and b):
        return False
    if a.get("id") or b.get("id"):
        return a.get("id") == b.get("id")
    return all(a.get(k) == b.get(k) for k in ("controller", "pid", "sweep_id"))


def busy_message(current):
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(current.get("since", 0)))
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(current.get("expires", 0)))
    msg = ("the host is being swept by %s (user %s, process %s, sweep %s) since %s; lease until %s"
           % (current.get("controller"), current.get("user"), current.get("pid"), current.get("sweep_id"), when, until))
    if current.get("id"):
        msg += (". If that sweep is dead (its controller gone), break its lock by name: moesweep sweep --break-lock %s"
                " ... (ansible-playbook: -e sweep_lock_break=%s)" % (current["id"], current["id"]))
    return msg


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["acquired", "released"], default="acquired"),
            owner=dict(type="dict", required=True),
            lease=dict(type="float", default=21600.0),
            steal=dict(type="bool", default=False),
            break_id=dict(type="str"),
            path=dict(type="path", default="/run/moesweep/sweep.lock"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["lease"] <= 0:
        module.fail_json(msg="lease must be greater than 0", held_by={}, busy=False)
    now = time.time()
    current = _read(p["path"])
    mine = same_owner(current, p["owner"])
    if p["state"] == "released":
        if mine and not module.check_mode:
            os.unlink(p["path"])
        module.exit_json(changed=mine, held_by=current or {}, busy=False)
    expired = current is not None and float(current.get("expires", 0)) < now
    broken = bool(current and not mine and p["break_id"] and current.get("id") == p["break_id"])
    if current is not None and not mine and not expired and not p["steal"] and not broken:
        module.fail_json(msg=busy_message(current), held_by=current, busy=True)
    extra = {"broke": current} if current is not None and not mine and (broken or p["steal"]) else {}
    lock = dict(p["owner"], since=(current or {}).get("since", now) if mine else now, expires=now + p["lease"])
    if module.check_mode:
        module.exit_json(changed=not mine, held_by=lock, busy=False, **extra)
    directory = os.path.dirname(p["path"])
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    tmp = "%s.%d" % (p["path"], os.getpid())
    with open(tmp, "w") as fh:
        json.dump(lock, fh)
        fh.flush()
        os.fsync(fh.fileno())
    if mine or expired or p["steal"] or broken:
        os.replace(tmp, p["path"])  # refresh, or take over a lease that ran out / a holder that is gone
    else:
        try:
            os.link(tmp, p["path"])  # atomic: fails when another sweep took it in between
        except OSError:
            os.unlink(tmp)
            module.fail_json(msg="another sweep took the host's lock at the same moment: %s" % _read(p["path"]),
                             held_by=_read(p["path"]) or {}, busy=True)
        os.unlink(tmp)
    module.exit_json(changed=not mine, held_by=lock, busy=False, **extra)


if __name__ == "__main__":
    main()
