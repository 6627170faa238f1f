# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The sweep's inputs, checked on the controller before any point runs (``sweep_plan``).

Which points (``parse_points``, ``check_points``), where the results go (``check_results_dir``), the sweep's
settings (``check_settings``, ``check_numbers``) and its id (``sweep_id_for``, ``check_sweep_id``). They are here,
apart from the records, because they decide whether a sweep starts at all: each raises ``PlanError`` with a message
that names the problem and its fix, so a bad input is refused before a server restarts rather than after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import hashlib
import json
import math
import os
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import bench_stats
from ansible_collections.moesweep.sweep.plugins.plugin_utils.restore import RESTORE_POLICIES

SPREAD_MODES = ("false", "true", "by_facts")
# A sweep id and a point name become directory and file names under the results directory: one safe name rule.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class PlanError(ValueError):
    """Bad sweep input: the message names the problem and the fix."""


def _suggest(name, valid):
    close = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=0.6)
    return " (did you mean %r?)" % close[0] if close else ""


def sweep_id_for(points, hosts, settings):
    """A stable id for the same sweep (same points, hosts and benchmark settings): re-running it resumes."""
    blob = json.dumps({"points": list(points), "hosts": sorted(hosts), "settings": settings}, sort_keys=True)
    return "sweep-" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse_points(backend, backends):
    """The user's -e backend=X / -e backends=[...] / -e backends=compatible as (list or 'compatible')."""
    given_one = backend not in (None, "")
    given_many = backends not in (None, "", [])
    if given_one and given_many:
        raise PlanError("give either -e backend=NAME (one point) or -e backends=[a,b,c] (a sweep), not both")
    if backends == []:
        raise PlanError("-e backends is an empty list: name at least one backend, "
                        "e.g. -e backends=[flashinfer_cutlass]")
    if not given_one and not given_many:
        raise PlanError("no sweep point: give -e backend=NAME, -e backends=[a,b,c] or -e backends=compatible")
    if given_one:
        if not isinstance(backend, str):
            raise PlanError("-e backend must be one name, got %r; use -e backends=[...] for several" % (backend,))
        return [backend]
    if backends == "compatible":
        return "compatible"
    if isinstance(backends, str):
        # -e backends=a,b,c arrives as one string
        items = [b.strip() for b in backends.strip("[]").split(",")]
    elif isinstance(backends, (list, tuple)):
        items = list(backends)
    else:
        raise PlanError("-e backends must be a list of names or 'compatible', got %r" % (backends,))
    items = [i for i in items if i not in ("", None)]
    if not items:
        raise PlanError("-e backends is an empty list: name at least one backend")
    for item in items:
        if not isinstance(item, str) or not _NAME_RE.match(item):
            raise PlanError("sweep point name %r is not a plain name (letters, digits, . _ -)" % (item,))
    seen = set()
    for item in items:
        if item in seen:
            raise PlanError("-e backends lists %r twice" % item)
        seen.add(item)
    return items


def check_points(points, overlays, choices):
    """Every point must be an overlay or a --moe-runner-backend choice of the host's sglang version."""
    valid = sorted(set(overlays) | set(choices))
    for point in points:
        if point not in overlays and point not in choices:
            raise PlanError("unknown backend %r%s: it is neither an overlay of sglang_server_backends nor a "
                            "--moe-runner-backend choice of this host's sglang (%s)" % (
                                point, _suggest(point, valid), ", ".join(valid)))


def check_results_dir(path, isdir, exists, access):
    """The results directory must be a writable directory (or creatable)."""
    if not path:
        raise PlanError("results_dir is empty: give a directory, e.g. -e results_dir=results")
    if exists(path) and not isdir(path):
        raise PlanError("results_dir %s is a file, not a directory: give a directory path" % path)
    probe = path
    while not exists(probe):
        parent = os.path.dirname(probe.rstrip("/")) or "/"
        if parent == probe:
            break
        probe = parent
    if not access(probe, os.W_OK | os.X_OK):
        raise PlanError("results_dir %s is not writable (%s): give a directory you can write, or fix its "
                        "permissions, before any point runs" % (path, probe))


def check_settings(restore, reference_concurrency, concurrency, spread):
    if restore not in RESTORE_POLICIES:
        raise PlanError("restore must be one of %s, got %r" % (", ".join(RESTORE_POLICIES), restore))
    if str(spread).lower() not in SPREAD_MODES:
        raise PlanError("spread must be true, false or by_facts, got %r" % (spread,))
    if not isinstance(concurrency, (list, tuple)) or not concurrency:
        raise PlanError("the benchmark's concurrency levels (sglang_bench_concurrency) must be a non-empty list")
    if reference_concurrency not in concurrency:
        raise PlanError("reference concurrency %r is not one of the benchmark's levels %s: pick one of them "
                        "(-e reference_concurrency=N) or add it to sglang_bench_concurrency"
                        % (reference_concurrency, list(concurrency)))


def precision_warning(settings):
    """A warning when the benchmark's precision target cannot be reached inside a level's time budget, or None.

    A level's steady output tok/s is never known better than the GPU's own drift over the time it runs
    (``bench_stats.drift_se_rel``, measured on a real H100): its 95 % half-width is at least 1.96 times that over the
    whole budget. Below it, every level runs its whole budget and ends imprecise (its record says ``precise: false``),
    so the warning gives that time and the smallest target the budget can reach."""
    settings = settings or {}
    try:
        target = float(settings.get("precision") or 0)
        budget = float(settings.get("level_budget_s") or 0)
    except (TypeError, ValueError):
        return None
    if target <= 0 or budget <= 0:
        return None
    floor = 1.96 * bench_stats.drift_se_rel(budget)
    if target >= floor:
        return None
    levels = len(settings.get("concurrency") or []) or 1
    return ("the benchmark's precision target +-%.4g %% is below what a level can reach in its time budget of %d s "
            "(+-%.2g %%: the GPU's own drift over that time): every level will run its whole budget, %d level(s) = "
            "about %d min of benchmark per point, and its figure is marked imprecise; ask for +-%.2g %% or more "
            "(sglang_bench_precision=%.4f), or more time per level (sglang_bench_level_budget_s)"
            % (100 * target, budget, 100 * floor, levels, round(levels * budget / 60.0), 100 * floor,
               math.ceil(floor * 10000) / 10000.0))


def check_numbers(numbers):
    """Every named setting is a positive number (seconds, tokens, levels): ``-e sglang_server_ready_timeout=abc``
    is refused here, naming the variable, before any role sees it."""
    for name, value in sorted((numbers or {}).items()):
        try:
            ok = not isinstance(value, bool) and float(value) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise PlanError("%s=%r is not a positive number: give a number (seconds or tokens), e.g. -e %s=%s"
                            % (name, value, name, _EXAMPLES.get(name, 60)))


_EXAMPLES = {"sglang_server_ready_timeout": 1800, "sglang_server_stall_timeout": 600,
             "sglang_server_release_timeout": 120, "sglang_server_health_timeout": 25,
             "sglang_bench_level_timeout": 3600, "sglang_bench_input_len": 1024, "sglang_bench_output_len": 1024}


def check_sweep_id(sweep_id):
    if not _NAME_RE.match(str(sweep_id)):
        raise PlanError("sweep_id %r must be a plain name (letters, digits, . _ -; at most 128)" % (sweep_id,))
