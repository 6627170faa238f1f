# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Equivalent points: two points of a sweep that run the same kernels, so that one measurement stands for both.

On sglang 0.5.9 with NVFP4 and no DeepEP, ``--moe-runner-backend flashinfer_cutedsl``, ``triton`` and ``auto``
all reach sgl-kernel's ``cutlass_moe_fp4`` (``ModelOptNvFp4FusedMoEMethod.apply()`` has no branch of their own;
data/compat.yml ``s9-nvfp4-cutedsl-is-sgl-kernel``, ``s9-nvfp4-fallthrough-mislabelled``): a second server start
and benchmark of such a point measure the same code again. A point's kernel path is what decides the code it runs:

- the MoE runner that actually runs (the preflight's ``effective_backend``: ``auto`` followed, a fall-through
  followed, each by a cited rule of the knowledge base);
- every other flag of its launch and its environment, as given (attention / DSA backends, fp8 GEMM, a2a, parallel
  layout, quantization...), and the sglang version;
- where sglang's own argument handling ran (the dry run), its resolved arguments but the MoE runner's own field:
  what ``auto`` became for every other backend.

A point is ``same_as`` an earlier point of the same sweep on the same host when their kernel paths, benchmark
settings and stack are equal and that point passed: it is not started, its record stands on the measured one's
figures (``same_as`` names it, with the evidence). Conservative by construction: any other difference, a forced
or refused point, an undecided resolution, measures it. ``measure_equivalent`` measures every point anyway.

Pure functions of the records and the preflight's result; the ``sweep_record`` action's ``resume`` state and the
plan (``sweep_plan``) call them."""

from __future__ import annotations

import copy
import hashlib
import json

from ansible_collections.moesweep.sweep.plugins.plugin_utils import records
from ansible_collections.moesweep.sweep.plugins.plugin_utils.status import PASSED

# the MoE runner's own flag and resolved field: the rest of the launch must be equal
MOE_FLAG = "moe-runner-backend"
MOE_FIELDS = ("moe_runner_backend",)
ACCEPTED = ("supported", "caveat")


def kernel_path(launch, preflight):
    """The kernel path of a point from its launch plan and its preflight's result (a record's ``launch`` and
    ``preflight`` hold the same fields), or None when it cannot be told: no resolved MoE runner, a verdict
    other than supported / caveat, a forced point."""
    launch, preflight = launch or {}, preflight or {}
    effective = preflight.get("effective_backend")
    if not effective or preflight.get("verdict") not in ACCEPTED or preflight.get("forced"):
        return None
    flags = {k: v for k, v in (launch.get("flags") or {}).items() if k != MOE_FLAG}
    resolved = ((preflight.get("dry_run") or {}).get("resolved")) or None
    if resolved:
        resolved = {k: v for k, v in resolved.items() if k not in MOE_FIELDS}
    return {"moe_runner": effective, "sglang_version": launch.get("sglang_version"), "flags": flags,
            "environment": dict(launch.get("environment") or {}), "resolved": resolved}


def path_key(path):
    """A short stable key of a kernel path (None for None)."""
    if path is None:
        return None
    return hashlib.sha256(json.dumps(path, sort_keys=True, default=str).encode()).hexdigest()[:16]


def evidence(preflight):
    """Why the preflight resolved the MoE runner as it did: each finding that followed ``auto`` or a fall-through
    (``runs``), its rule, reason and sources."""
    out = []
    for finding in (preflight or {}).get("reasons") or []:
        if not isinstance(finding, dict):
            continue
        if finding.get("runs") or finding.get("rule") == "auto":
            out.append({"rule": finding.get("rule"), "reason": finding.get("reason"),
                        "citations": list(finding.get("citations") or [])})
    return out


def _lock(record_or_provenance):
    prov = record_or_provenance.get("provenance", record_or_provenance) or {}
    return prov.get("lock_sha256")


def _same_bench(recorded, current):
    """Whether a record's benchmark settings are the ones this point would run with. A record keeps the accuracy
    threshold resolved (the model family's floor where none was given): an unset one matches it."""
    a, b = copy.deepcopy(recorded or {}), copy.deepcopy(current or {})
    acc_a, acc_b = a.get("accuracy") or {}, b.get("accuracy") or {}
    if acc_a.get("threshold") is None or acc_b.get("threshold") is None:
        acc_a.pop("threshold", None)
        acc_b.pop("threshold", None)
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _measured(records, host, sweep_id, point):
    """The records of this sweep's other points on ``host`` that passed and were measured (not ``same_as``)."""
    for rec in records or []:
        if (rec.get("kind") == "point" and rec.get("host") == host and rec.get("sweep_id") == sweep_id
                and rec.get("status") == PASSED and not rec.get("same_as") and rec.get("point") != point):
            yield rec


def measured_equivalent(records, host, sweep_id, point, launch, preflight, bench_settings, lock_sha256):
    """The record of another point of this sweep on ``host`` that passed, was measured (not itself ``same_as``)
    and runs the same kernel path as ``point`` under the same benchmark settings and stack; None otherwise. The
    last such record wins (a point measured again)."""
    mine = kernel_path(launch, preflight)
    found = None
    for rec in _measured(records, host, sweep_id, point) if mine is not None else ():
        if (_same_bench((rec.get("benchmark") or {}).get("settings"), bench_settings)
                and (_lock(rec) or "") == (lock_sha256 or "")
                and kernel_path(rec.get("launch"), rec.get("preflight")) == mine):
            found = rec
    return found


def differences(a, b):
    """The parts of two kernel paths that differ (``flags.NAME``, ``environment.VAR``, ``resolved.FIELD`` or a
    top-level key), sorted: why two points of the same MoE runner are measured apart."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += ["%s.%s" % (key, k) for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)]
        elif va != vb:
            out.append(key)
    return out


def near_miss(records, host, sweep_id, point, launch, preflight):
    """(point, differences) of the last passed, measured point of this sweep on ``host`` that runs the same MoE
    runner as this one but another kernel path; None when there is none."""
    mine = kernel_path(launch, preflight)
    found = None
    for rec in _measured(records, host, sweep_id, point) if mine is not None else ():
        theirs = kernel_path(rec.get("launch"), rec.get("preflight"))
        if theirs is not None and theirs["moe_runner"] == mine["moe_runner"] and theirs != mine:
            found = (rec.get("point"), differences(theirs, mine))
    return found


def same_as_record(measured, point, launch, preflight, config_hash, started, finished):
    """The record of ``point`` standing on ``measured``'s figures: the point's own launch, preflight and
    configuration, the measured record's smoke, accuracy, benchmark and interconnect, no readiness of its own (it
    never started), and ``same_as`` naming the measured point with the evidence. Its status is the measured one's
    (passed); the summary shows it in that point's row group, the ranking and the restore count that point once."""
    record = copy.deepcopy(measured)
    record.update({
        "point": point,
        "backend": (launch or {}).get("backend") or point,
        "config_hash": config_hash,
        "started": started,
        "finished": finished,
        "seconds": 0.0,
        "readiness": {},
        "launch": {k: v for k, v in (launch or {}).items() if k in records.LAUNCH_KEYS},
        "preflight": {k: v for k, v in (preflight or {}).items() if k in records.PREFLIGHT_KEYS},
        "same_as": {
            "point": measured.get("point"),
            "backend": measured.get("backend"),
            "finished": measured.get("finished"),
            "config_hash": measured.get("config_hash"),
            "moe_runner": (preflight or {}).get("effective_backend"),
            "kernel_path": path_key(kernel_path(launch, preflight)),
            "resolution": "sglang's own argument handling and the knowledge base"
            if ((preflight or {}).get("dry_run") or {}).get("resolved") else "the knowledge base",
            "evidence": evidence(preflight),
        },
        "artifacts": [],
    })
    record.pop("resumed", None)
    return record


def plan_equivalents(points, details):
    """{point: earlier point} for the points whose kernel path, by the plan's preflight (``details[point]``: its
    result with ``launch``), equals an earlier point's: a prediction the point's own preflight confirms before it
    is skipped (``measured_equivalent``)."""
    seen, out = {}, {}
    for point in points:
        result = details.get(point) or {}
        if result.get("refused"):
            continue
        key = path_key(kernel_path(result.get("launch"), result))
        if key is None:
            continue
        if key in seen:
            out[point] = seen[key]
        else:
            seen[key] = point
    return out
