# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""systemd for the collection's modules: unit names, one ``systemctl show`` reader and what its states mean.

Every module that asks systemd about a unit reads it through ``Systemctl.show`` with the properties it needs, so the
command line is built here only, and "running" is defined here only (``unit_running``). After community.general's
``module_utils/_systemd.py`` (one runner for systemctl). ``run_command`` is an ``AnsibleModule.run_command``;
nothing here fails a module.

Stdlib only; runs on the target (Python 3.9+).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# systemd.unit(5): names are [A-Za-z0-9:_.\\-] plus one "@" for templates; at most 255 characters.
UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?$")
UNIT_SUFFIXES = (".service", ".scope")
# systemctl's output is parsed: its words, not the host locale's (as ansible.builtin.systemd_service sets LANG)
ENV = {"LC_ALL": "C"}

# ActiveState values (systemd.unit(5), org.freedesktop.systemd1(5) "ActiveState"): a unit whose process is up or
# coming up (as ansible.builtin.systemd_service's is_running_service, plus reloading, which keeps its process) ...
RUNNING_STATES = ("active", "activating", "reloading")
# ... one whose process is being stopped (is_deactivating_service) ...
STOPPING_STATES = ("deactivating",)
# ... and one with no process at all.
STOPPED_STATES = ("inactive", "failed")


def validate_unit(unit):
    """Return (normalised unit, error message or None)."""
    if not unit or len(unit) > 255 or not UNIT_RE.match(unit) or unit.startswith("-"):
        return unit, "unit %r is not a valid systemd unit name" % (unit,)
    if not unit.endswith(UNIT_SUFFIXES):
        if "." in unit.rsplit("@", 1)[-1] and not unit.endswith("@"):
            return unit, "unit %r: only .service units can run SGLang" % (unit,)
        unit += ".service"
    return unit, None


def parse_show(text):
    """``systemctl show -p A,B`` output -> {A: value, B: value}."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def unit_running(props):
    """The unit's process is up or coming up: the one definition of a running unit."""
    return props.get("ActiveState") in RUNNING_STATES


def unit_stopping(props):
    """systemd is stopping the unit: its process may still hold the GPUs and the port."""
    return props.get("ActiveState") in STOPPING_STATES


def unit_gone(props):
    """The unit's main process is gone (or going)."""
    return props.get("ActiveState") in STOPPED_STATES + STOPPING_STATES


def show_argv(systemctl, unit, props):
    """The one ``systemctl show`` command line: ``props`` (a sequence of property names) of ``unit``."""
    return [systemctl, "show", unit, "-p", ",".join(props)]


def failure(argv, rc, out, err):
    """The message for a systemctl command that failed, its own words included."""
    return "systemctl %s failed (rc %d): %s" % (" ".join(argv[1:]), rc, (err or out).strip())


class Systemctl:
    """systemctl on the target through the caller's ``run_command``: ``show`` reads, ``run`` acts."""

    def __init__(self, run_command, systemctl):
        self.run_command = run_command
        self.systemctl = systemctl

    def show(self, unit, props):
        """(properties, error message or None): ``props`` of ``unit``; {} and the message when systemctl failed.
        An unknown unit is no error (systemctl answers ``LoadState=not-found``, ``ActiveState=inactive``)."""
        argv = show_argv(self.systemctl, unit, props)
        rc, out, err = self.run_command(argv, environ_update=ENV)
        if rc != 0:
            return {}, failure(argv[:3], rc, out, err)
        return parse_show(out), None

    def run(self, *args):
        """(rc, out, err, error message or None) of ``systemctl ARGS`` (start, stop, daemon-reload, enable, ...)."""
        argv = [self.systemctl] + list(args)
        rc, out, err = self.run_command(argv, environ_update=ENV)
        return rc, out, err, (failure(argv, rc, out, err) if rc != 0 else None)

    def start(self, unit, props, check_mode=False):
        """Start ``unit`` when it does not run (``systemctl start``, which returns once the start job is done; systemd
        gives the new run its own ``InvocationID``). Returns (whether it started - in check mode, would start -, the
        unit's ``props`` after it, rc, error message or None). A unit that runs is left alone; in check mode nothing is
        started. A ``show`` that fails reads as a unit that does not run (its start then says why)."""
        before = self.show(unit, props)[0]
        if unit_running(before) or check_mode:
            return not unit_running(before), before, 0, None
        rc, _out, _err, failed = self.run("start", unit)
        return failed is None, self.show(unit, props)[0], rc, failed
