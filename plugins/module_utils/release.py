# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The restart protocol's stop and release wait: stop the old server's unit, then wait (bounded) until no compute
process holds a GPU, every GPU's memory use is back near the driver's own, and nothing listens on the port.

One owner for the modules that wait for a server's GPUs before another starts: ``gpu_released`` (the wait alone, after
a stop task of its own - a node group's ranks, the restore of a previous configuration, the all-reduce measurement)
and ``sglang_restart`` (stop, wait, start and the wait for that run in one call). ``run_command`` is an
``AnsibleModule.run_command``; nothing here fails a module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from ansible_collections.moesweep.sweep.plugins.module_utils import ports
from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, unit_running, unit_stopping


class ReleaseError(Exception):
    """A command of the protocol failed (nvidia-smi, systemctl stop); ``rc`` its exit status."""

    def __init__(self, msg, rc=None, stdout="", stderr=""):
        super(ReleaseError, self).__init__(msg)
        self.msg, self.rc, self.stdout, self.stderr = msg, rc, stdout, stderr


def bad_input(timeout, poll_interval, port):
    """The message for settings the wait cannot run with, or None."""
    if timeout is None or timeout <= 0:
        return "timeout must be greater than 0 (got %s)" % timeout
    if poll_interval is None or poll_interval <= 0:
        return "poll_interval must be greater than 0"
    if not 0 <= port <= 65535:
        return "port must be between 0 and 65535"
    return None


def stop_unit(run_command, systemctl, unit, check_mode=False):
    """Stop ``unit`` when it runs (``systemctl stop`` returns once its processes exited or systemd killed them after
    TimeoutStopSec); whether it ran. In check mode nothing is stopped."""
    systemd = Systemctl(run_command, systemctl)
    props, failed = systemd.show(unit, ("ActiveState",))
    # a unit still stopping has processes that hold the GPUs: systemctl stop waits for them too
    if failed or not (unit_running(props) or unit_stopping(props)):
        return False
    if not check_mode:
        rc, out, err, failed = systemd.run("stop", unit)
        if failed:
            raise ReleaseError(failed, rc=rc, stdout=out, stderr=err)
    return True


def observe(run_command, nvidia_smi, pids=(), port=0, listeners=ports.listeners):
    """One look: ``{"holders": [compute apps], "port_holders": [listeners], "memory_used_mib": [per GPU]}``.
    With ``pids`` only those processes count as holders."""
    env = {"LC_ALL": "C"}
    rc, out, err = run_command(
        [nvidia_smi, "--query-compute-apps=pid,process_name,used_memory,gpu_bus_id", "--format=csv,nounits"],
        environ_update=env)
    failure = smi.detect_driver_failure(out, err)
    if rc != 0 or failure:
        raise ReleaseError("nvidia-smi failed: %s" % (failure or err.strip() or out.strip()), rc=rc, stdout=out,
                           stderr=err)
    apps = smi.parse_compute_apps(out)
    if pids:
        wanted = set(pids)
        apps = [a for a in apps if a["pid"] in wanted]
    rc, out, err = run_command([nvidia_smi, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                               environ_update=env)
    used = []
    if rc == 0:
        used = [int(r["memory_used_mib"] or 0) for r in smi.parse_query_gpu(out, ["index", "memory.used"])]
    return dict(holders=apps, port_holders=listeners(port) if port else [], memory_used_mib=used)


def is_released(seen, max_memory_used_mib):
    return (not seen["holders"] and not seen["port_holders"]
            and all(u <= max_memory_used_mib for u in seen["memory_used_mib"]))


def not_released_message(seen, port, max_memory_used_mib, elapsed):
    """Who still holds a GPU or the port after ``elapsed`` seconds, every PID named."""
    who = ["PID %s (%s) holds %s MiB on GPU %s" % (a["pid"], a["process_name"], a["used_memory_mib"], a["gpu_bus_id"])
           for a in seen["holders"]]
    who += ["PID %s (%s) listens on port %s" % (h["pid"], h["cmdline"], port) for h in seen["port_holders"]]
    if not who:
        who = ["GPU memory still in use: %s MiB (limit %s MiB per GPU)" % (seen["memory_used_mib"],
                                                                           max_memory_used_mib)]
    return "GPUs not released after %.1f s: %s" % (elapsed, "; ".join(who))


def release(run_command, nvidia_smi, systemctl=None, unit=None, port=0, pids=(), max_memory_used_mib=1024,
            timeout=60.0, poll_interval=0.25, check_mode=False, clock=time.monotonic, sleep=time.sleep,
            listeners=ports.listeners):
    """Stop ``unit`` (when given and running), then wait until released. In check mode nothing is stopped and the
    state is looked at once, without waiting. Returns the result every caller reports: ``stopped``, ``released``,
    ``elapsed``, ``holders``, ``port_holders``, ``memory_used_mib``, ``stop_s`` and, when not released, ``msg``.
    ``stop_s`` is the stop's own time: ``systemctl stop`` returns once the unit's processes exited, so it is the old
    server's shutdown (sglang drains on SIGTERM at its next 5 s watchdog tick), not this wait's; ``elapsed`` the
    release wait after it."""
    began = time.perf_counter()  # the stop's duration, measured apart from the wait's clock
    stopped = stop_unit(run_command, systemctl, unit, check_mode) if unit else False
    stop_s = time.perf_counter() - began

    def look():
        return observe(run_command, nvidia_smi, pids, port, listeners)

    ok, seen, elapsed = poll_until(look, lambda s: is_released(s, max_memory_used_mib),
                                   0.0 if check_mode else timeout, poll_interval, clock=clock, sleep=sleep)
    result = dict(stopped=stopped, released=ok, elapsed=round(elapsed, 3), stop_s=round(stop_s, 3), **seen)
    if not ok:
        result["msg"] = not_released_message(seen, port, max_memory_used_mib, elapsed)
    return result
