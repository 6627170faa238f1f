# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side half of sweep_lock: the owner is this controller and this ansible-playbook process, and a
lock whose holder was a process of this controller that no longer runs (a killed sweep) is taken over. A refresh
(O(owner) is the lock as taken, with its C(expires)) while more than half of the lease is left answers here,
without a round trip: nobody else can take an unexpired lease (only this controller, once this process is gone)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import os
import socket
import time

from ansible.plugins.action import ActionBase


def pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


# A refresh reaches the host once less than this share of the lease is left.
REFRESH_WHEN_LEFT = 0.5


def refresh_due(args, now):
    """Whether a call must reach the host: anything but the refresh of a lock whose lease (given, as sweep.yml
    gives it) is more than half left."""
    owner = args.get("owner") or {}
    if args.get("state", "acquired") != "acquired" or args.get("steal") or None in (owner.get("expires"),
                                                                                    args.get("lease")):
        return True
    try:
        return float(owner["expires"]) - now <= float(args["lease"]) * REFRESH_WHEN_LEFT
    except (TypeError, ValueError):
        return True


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        owner = dict(args.get("owner") or {})
        # the worker that runs this plugin is a child of the ansible-playbook process, which lives as long as the run
        owner.setdefault("controller", socket.getfqdn())
        owner.setdefault("pid", os.getppid())
        try:
            owner.setdefault("user", getpass.getuser())
        except Exception:  # noqa: BLE001 - no user name is not a reason to refuse
            owner.setdefault("user", str(os.getuid()))
        args["owner"] = owner
        now = time.time()
        if not refresh_due(args, now):
            return {"changed": False, "busy": False, "held_by": owner, "refreshed": False,
                    "msg": "the lease has %.0f s left (more than half of %s s): not refreshed yet"
                           % (float(owner["expires"]) - now, args["lease"])}
        result = self._execute_module(module_name="moesweep.sweep.sweep_lock", module_args=args, task_vars=task_vars)
        held = result.get("held_by") or {}
        if (result.get("busy") and held.get("controller") == owner["controller"]
                and not pid_alive(held.get("pid"))):
            args["steal"] = True
            result = self._execute_module(module_name="moesweep.sweep.sweep_lock", module_args=args,
                                          task_vars=task_vars)
            result["took_over"] = "the lock's holder (process %s on this controller) is gone" % held.get("pid")
        return result
