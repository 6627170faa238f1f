# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side half of sweep_lock: the owner is a random id taken once per sweep run (a hostname is not unique:
two controllers may both be called localhost), with this controller's machine id and boot, and the ansible-playbook
process and its start time. A lock whose holder was a process of this very machine that no longer runs (a killed
sweep; a process this user may not signal is another user's live sweep, not a dead one) is taken over; any other
stale lock is broken only by name (O(break_id), C(-e sweep_lock_break=ID)); a holder in another PID namespace is never
judged gone from here. A refresh
(O(owner) is the lock as taken, with its C(expires)) while more than half of the lease is left answers here,
without a round trip: nobody else can take an unexpired lease (only this controller, once this process is gone)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import hashlib
import os
import socket
import time
import uuid

from ansible.plugins.action import ActionBase


def pid_alive(pid):
    """Whether process ``pid`` runs on this machine. EPERM means it runs under another user (kill(2))."""
    try:
        os.kill(int(pid), 0)
    except PermissionError:
        return True
    except (OSError, ValueError, TypeError):
        return False
    return True


def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except (IOError, OSError):
        return ""


def machine_id():
    """This controller (a digest of /etc/machine-id, machine-id(5)), or None where it has none: then no holder is
    ever judged gone from here."""
    value = _read("/etc/machine-id")
    return hashlib.sha256(value.encode()).hexdigest()[:16] if value else None


def boot_id():
    return _read("/proc/sys/kernel/random/boot_id") or None


def process_start(pid):
    """The start time of process ``pid`` in clock ticks since boot (proc(5), /proc/PID/stat field 22), or None: with
    the pid it names one process, not a later one that reused the pid."""
    try:
        with open("/proc/%d/stat" % int(pid)) as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (IOError, OSError, ValueError, TypeError, IndexError):
        return None


def pid_namespace(pid):
    """The PID namespace process ``pid`` lives in (``/proc/PID/ns/pid``, e.g. ``pid:[4026531836]``; namespaces(7)),
    or None: a pid means a process only inside its namespace."""
    try:
        return os.readlink("/proc/%d/ns/pid" % int(pid))
    except (OSError, ValueError, TypeError):
        return None


def holder_gone(held, me):
    """Whether the lock's holder was a process of this very machine (same machine id; never a hostname) that no
    longer runs: its boot is over, its pid is dead, or the pid now names a process started at another time. A holder
    in another PID namespace (two containers of one image share a machine id and a boot) is never judged from here:
    its pid means nothing in ours."""
    if not held or not held.get("machine") or held.get("machine") != me.get("machine"):
        return False
    if held.get("boot") and me.get("boot") and held["boot"] != me["boot"]:
        return True
    if held.get("pidns") != me.get("pidns") or not me.get("pidns"):
        return False
    if not pid_alive(held.get("pid")):
        return True
    return held.get("pid_start") is not None and process_start(held["pid"]) != held["pid_start"]


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
        owner.setdefault("id", uuid.uuid4().hex[:16])
        owner.setdefault("controller", socket.getfqdn())
        owner.setdefault("machine", machine_id())
        owner.setdefault("boot", boot_id())
        owner.setdefault("pid", os.getppid())
        owner.setdefault("pid_start", process_start(owner["pid"]))
        owner.setdefault("pidns", pid_namespace(owner["pid"]))
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
        if result.get("busy") and holder_gone(held, owner):
            args["break_id"] = held.get("id")
            result = self._execute_module(module_name="moesweep.sweep.sweep_lock", module_args=args,
                                          task_vars=task_vars)
            result["took_over"] = "the lock's holder (process %s on this controller) is gone" % held.get("pid")
        return result
