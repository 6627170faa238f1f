# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""When the sweep stops a server early, and when the restore keeps the one that runs: one pure decision.

A server that is replaced anyway is stopped as soon as nothing more is read from it, without waiting for it
(the server role's ``stop`` entry point, ``systemctl stop --no-block``): its drain (seconds on a real server,
sglang's SIGTERM handling) then overlaps what the sweep does next (the next point's preflight and unit, or the
restore's) instead of preceding the next start. The restart protocol that follows waits for the GPUs and the port
anyway, so an early stop only ever moves time, never skips a check.

Two answers, ``stop_early`` and ``keep_running``, at three steps of a sweep on one host:

- ``sweep``: before the first point, for the server the host runs before the sweep;
- ``point``: when a point ends (its record counted);
- ``restore``: when the restore's choice is known.

Controller-side only (it reads the sweep's records through its caller)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.moesweep.sweep.plugins.plugin_utils.restore import choose_restore
from ansible_collections.moesweep.sweep.plugins.plugin_utils.status import PASSED

STEPS = ("sweep", "point", "restore")


def server_schedule(sweep, host, records, step, point=None, choice=None, running_point="", running_stopped=False,
                    stop_requested=False, check_mode=False, writable=True):
    """``{"stop_early": bool, "keep_running": bool, "reason": str}`` for ``host`` at ``step``.

    ``sweep``: the plan (``points`` of this host, ``starts_server`` - those of them the plan's preflight accepts -,
    ``restore``, ``rerun``, ``nodes``, ``reference_concurrency``); ``records``: the sweep's point records so far (at
    ``point``, with that point's own). ``choice``: the restore's (``restore.choose_restore``), at ``restore``;
    ``running_point``: the point whose unit the host has (empty when none); ``running_stopped``: that point's end
    already stopped it.

    Stopped early only when every part of it is known: one host (a node group stops and starts its ranks together,
    the restart protocol), a restore policy that puts a server back (``restore=none`` leaves the host as the last
    point left it), no request to stop the sweep, not in check mode, and, at ``point``, a results directory the
    record can be written to. Then:

    - before the sweep and after a point that is not this host's last: the next point of this host starts its own
      server - the plan's preflight accepts it, no passing record of it on this host could let resume skip it (or
      ``rerun``), and it does not run the kernels of a point that passed in this sweep (the plan's ``equivalent``,
      unless ``measure_equivalent``);
    - after this host's last point: restore=best puts back another point that passed;
    - at the restore: it puts back another point than the one whose unit runs (and that one was not stopped yet).

    ``keep_running`` only at the restore: the best point is the one whose unit the host has (applied by this run
    under the host's sweep lock, so nothing changed it since), on one host; the restore then only judges it."""
    if step not in STEPS:
        raise ValueError("step must be one of %s (got %r)" % (", ".join(STEPS), step))
    if step == "restore":
        return _at_restore(sweep, choice or {}, running_point, running_stopped)
    stop, reason = _stop_before_next(sweep, host, records, step, point, stop_requested)
    if stop and check_mode:
        stop, reason = False, "check mode: nothing is stopped"
    if stop and step == "point" and not writable:
        stop, reason = False, "the results directory is not writable: the sweep stops here"
    return {"stop_early": stop, "keep_running": False, "reason": reason}


def _stop_before_next(sweep, host, records, step, point, stop_requested):
    mine = list(sweep.get("points") or [])
    if step == "sweep":
        if not mine:
            return False, "no point runs on this host"
        return _starts_its_own(sweep, mine[0], records, host, stop_requested,
                               "the server that runs before the sweep is stopped now, its drain overlapping")
    if point not in mine:
        return False, "%s is not a point of this host" % point
    if mine.index(point) + 1 < len(mine):
        return _starts_its_own(sweep, mine[mine.index(point) + 1], records, host, stop_requested,
                               "this one is stopped now, its drain overlapping")
    return _restore_puts_back_another(sweep, point, records, host, stop_requested)


def _starts_its_own(sweep, nxt, records, host, stop_requested, then):
    if sweep.get("nodes"):
        return False, "a node group stops and starts its ranks together (the restart protocol)"
    if sweep.get("restore", "best") == "none":
        return False, "restore=none: the host is left as the last point left it"
    if stop_requested:
        return False, "the sweep was asked to stop"
    if nxt not in (sweep.get("starts_server") or []):
        return False, "the preflight refuses the next point %s (it would not start a server)" % nxt
    if not sweep.get("rerun"):
        for rec in records:
            if (rec.get("kind") == "point" and rec.get("host") == host and rec.get("point") == nxt
                    and rec.get("status") == PASSED):
                return False, "the next point %s passed before: resume may skip it" % nxt
    target = (sweep.get("equivalent") or {}).get(nxt)
    if target and not sweep.get("measure_equivalent"):
        since = str(sweep.get("created") or "") if sweep.get("rerun") else ""
        for rec in records:
            if (rec.get("kind") == "point" and rec.get("host") == host and rec.get("point") == target
                    and rec.get("status") == PASSED and not rec.get("same_as")
                    and str(rec.get("finished") or "") >= since):
                return False, ("the next point %s runs the kernels of %s, which passed: it is not started (same_as)"
                               % (nxt, target))
    return True, "the next point %s starts its own server: %s" % (nxt, then)


def _restore_puts_back_another(sweep, point, records, host, stop_requested):
    """The last point: the restore restarts anyway when it puts back another point, so the drain overlaps the
    restore's preflight and unit. Not when this point is the best (the restore keeps it running), nor when no point
    passed (the restore may put back what the host ran before the sweep)."""
    if sweep.get("nodes"):
        return False, "a node group stops and starts its ranks together (the restart protocol)"
    if sweep.get("restore", "best") != "best":
        return False, "restore=%s: the restore decides" % sweep.get("restore")
    if stop_requested:
        return False, "the sweep was asked to stop"
    mine = list(sweep.get("points") or [])
    choice = choose_restore(records, host, "best", sweep.get("reference_concurrency"), None, mine)
    if choice.get("action") != "point":
        return False, "no point passed: the restore decides"
    if choice.get("point") == point:
        return False, "%s is the best point: the restore keeps it running" % point
    return True, ("the restore puts back %s: this one is stopped now, its drain overlapping the restore's checks"
                  % choice["point"])


def _at_restore(sweep, choice, running_point, running_stopped):
    candidate = bool(choice.get("action") == "point" and not sweep.get("nodes") and running_point
                     and not running_stopped)
    stop = candidate and choice.get("point") != running_point
    keep = candidate and choice.get("point") == running_point
    if stop:
        reason = "the server of %s is stopped first (the restore starts another)" % running_point
    elif keep:
        reason = "the server of %s runs it: judged, restarted only when not serving" % running_point
    elif running_stopped and running_point:
        reason = "the server of %s was stopped when it ended" % running_point
    else:
        reason = ""
    return {"stop_early": stop, "keep_running": keep, "reason": reason}
