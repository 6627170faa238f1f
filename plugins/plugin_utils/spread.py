# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Which points each host runs when a sweep spreads its points over several hosts (``-e spread=true|by_facts``).

``comparable_facts`` is what must be equal for two hosts' figures to be compared; ``spread_points`` deals the points
over comparable hosts the same way on every host (each host plans alone, so the assignment must be deterministic),
or refuses, naming the fact that differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.moesweep.sweep.plugins.plugin_utils.plan_checks import PlanError

COMPARED_FACTS = ("gpu_models", "gpu_count", "driver_version", "interconnect", "virtualization", "stack_lock")


def comparable_facts(facts, provenance):
    """What must be equal for two hosts' points to be compared: GPU model list and count, driver, interconnect,
    virtualization kind, and the stack's lock hash."""
    facts = facts or {}
    return {
        "gpu_models": list(facts.get("gpu_models") or []),
        "gpu_count": facts.get("gpu_count"),
        "driver_version": facts.get("driver_version"),
        "interconnect": facts.get("interconnect"),
        "virtualization": (facts.get("virtualization") or {}).get("kind"),
        "stack_lock": (provenance or {}).get("lock_sha256"),
    }


def spread_points(points, hosts, host, mode):
    """The points ``host`` runs. ``hosts``: {name: comparable_facts}. ``mode``: false (every host runs every
    point), true (the points are spread over the hosts, which must be comparable), by_facts (hosts are grouped
    by identical facts and the points are spread within each group). Deterministic: every host computes the
    same assignment. Raises PlanError naming the fact that differs and the hosts."""
    mode = str(mode).lower()
    if mode in ("false", "no", "0", "none", ""):
        return list(points), [host]
    names = sorted(hosts)
    if mode == "true":
        base = hosts[names[0]]
        for name in names[1:]:
            for key in COMPARED_FACTS:
                if hosts[name].get(key) != base.get(key):
                    raise PlanError(
                        "spread=true needs comparable hosts, but %s differs: %s has %r, %s has %r; make the hosts "
                        "identical, limit the sweep to one kind of host, or group them with -e spread=by_facts"
                        % (key, names[0], base.get(key), name, hosts[name].get(key)))
        group = names
    elif mode == "by_facts":
        key = json.dumps(hosts[host], sort_keys=True)
        group = [n for n in names if json.dumps(hosts[n], sort_keys=True) == key]
    else:
        raise PlanError("spread must be true, false or by_facts, got %r" % (mode,))
    index = group.index(host)
    return [p for i, p in enumerate(points) if i % len(group) == index], group
