# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Which configuration a host is left on when its sweep ends (``restore`` policy ``best``, ``previous`` or
``none``).

A pure choice from the sweep's records (``choose_restore``): the best point is ``summary.ranking``'s, so the host is
left on the point the summary marks best, and a choice is explained in words the restore record keeps. The
``sweep_record`` action asks it; the sweep's restore tasks act on it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary
from ansible_collections.moesweep.sweep.plugins.plugin_utils.status import PASSED

RESTORE_POLICIES = ("best", "previous", "none")


def reference_figures(record, concurrency):
    for level in ((record.get("benchmark") or {}).get("levels") or []):
        if level.get("concurrency") == concurrency and level.get("ok"):
            return level.get("figures") or {}
    return None


def choose_restore(records, host, policy, reference_concurrency, previous, sweep_points):
    """Which configuration to leave ``host`` on: {action, point, reason}. ``action``: ``point`` (re-render that
    point's unit), ``previous`` (put back the unit the host had before the sweep), ``none``. The best point is
    ``summary.best_point`` (the table's *best*), so what the summary marks is what the host is left on."""
    if policy == "none":
        return {"action": "none", "point": None, "reason": "restore=none: the host is left as the last point left it"}
    if sweep_points is not None and not list(sweep_points):
        return {"action": "none", "point": None,
                "reason": "this host ran no point of the sweep (the spread gave it none): left as it was"}
    mine = [r for r in records if r.get("host") == host and (sweep_points is None or r.get("point") in sweep_points)]
    has_previous = bool((previous or {}).get("unit"))
    if policy == "previous":
        if has_previous:
            return {"action": "previous", "point": None,
                    "reason": "restore=previous: the configuration the host had before the sweep"}
        return {"action": "none", "point": None,
                "reason": "restore=previous, but the host had no server unit before the sweep"}
    best, tied = summary.ranking(mine, reference_concurrency, host=host) if mine else (None, [])
    if best is not None:
        figs = reference_figures(best, reference_concurrency) or {}
        reason = "the best point that passed: %.1f output tok/s at concurrency %s" % (
            figs.get("output_throughput") or 0.0, reference_concurrency)
        thr = summary.throughput_at(best, reference_concurrency) or {}
        if thr.get("half_width") is not None:
            reason += " (steady state %s)" % summary.interval_text(thr)
        choice = {"action": "point", "point": best["point"], "backend": best.get("backend"), "reason": reason,
                  "ties": [r["point"] for r in tied]}
        if tied:
            # the rule for ties, stated where the choice is recorded
            choice["reason"] += "; it ties with %s: %s" % (", ".join(r["point"] for r in tied), summary.TIE_RULE)
        return choice
    # a point recorded same_as another did not start: the one it stands on is the known-good one
    passed = [r for r in summary.point_records(mine) if r.get("status") == PASSED and not r.get("same_as")]
    if passed:
        # a sweep without a benchmark (sglang_bench_enabled: false): the last point that passed is known-good
        last = passed[-1]
        return {"action": "point", "point": last["point"], "backend": last.get("backend"),
                "reason": "the last point that passed (no benchmark figures to rank the points by)"}
    if has_previous:
        return {"action": "previous", "point": None,
                "reason": "no point passed: putting back the configuration the host had before the sweep"}
    return {"action": "none", "point": None,
            "reason": "no point passed and the host had no server before the sweep: nothing to restore"}
