# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""A launch matrix: several axes swept at once, each cell one sweep point.

The one schema of a matrix (``sweep.yml -e @matrix.yml``, ``moesweep sweep --matrix FILE``,
``moesweep.sweep(matrix=...)``)::

    matrix:
      axes:                                   # in order: the cells' names follow it
        moe-runner-backend: [flashinfer_cutlass, flashinfer_trtllm, triton]
        attention-backend: [flashinfer, trtllm_mla]
        fp8-gemm-backend: [cutlass, flashinfer_trtllm]
        env:NCCL_P2P_LEVEL: [PHB, SYS]        # an environment variable of the unit (null: unset)
      zip:                                    # axes that vary together (the i-th values go together)
        - [nsa-decode-backend, nsa-prefill-backend]
      exclude:                                # cells left out: every named axis has (one of) the given value(s)
        - {moe-runner-backend: triton, attention-backend: trtllm_mla}

An axis is any option of the host's sglang version, named as in ``sglang_server_flags`` (without dashes; an
abbreviation argparse accepts is written out, ``tp`` -> ``tp-size``), or ``env:NAME``. A flag value ``null``
leaves the flag to the common flags' value or sglang's default. ``check_matrix`` is the only validator: without a
schema it checks the structure (the API and the CLI, before anything runs), with the version's schema also every
name and value, the way the real parser takes them (``sglang_flags.validate_flags``). ``expand`` gives the cells:
each a point named by its values, with the overlay the server role applies (``sglang_server_backends``' form,
``flags`` and ``environment``) and the axes its record keeps. Pure standard library.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import itertools
import json
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import secrets
from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags

ENV_PREFIX = "env:"
KEYS = ("axes", "zip", "exclude", "max_cells")
# A point costs minutes on a real host (~3.5 min to start a large MoE model, then its benchmark): a matrix above this
# many cells is refused unless it says, with `max_cells`, that it means more.
MAX_CELLS = 64
# a point name (plan_checks.parse_points): letters, digits, . _ -, at most 128
_NAME_MAX = 128
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_-]+")
EXAMPLE = "matrix: {axes: {moe-runner-backend: [flashinfer_cutlass, triton], attention-backend: [flashinfer, fa3]}}"


class MatrixError(ValueError):
    """A matrix that cannot be swept: the message names the problem and the fix."""


def is_env(axis):
    return isinstance(axis, str) and axis.startswith(ENV_PREFIX)


def _shown(value):
    return json.dumps(value) if not isinstance(value, str) else value


def _values_text(values):
    return "[%s]" % ", ".join(_shown(v) for v in values)


def _check_env_axis(axis, values):
    name = axis[len(ENV_PREFIX):]
    if not _ENV_NAME_RE.match(name):
        raise MatrixError("axis %r: %r is not an environment variable name (letters, digits, _; not starting with a "
                          "digit), e.g. env:NCCL_P2P_LEVEL" % (axis, name))
    if secrets.is_secret_name(name):
        raise MatrixError("axis %r: %s looks like a secret, and a matrix's values are shown, recorded and part of "
                          "each cell's name; put it in sglang_server_environment from a vault instead" % (axis, name))
    for value in values:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
            raise MatrixError("axis %r: value %s is not a string or a number; quote it (environment values are "
                              "text), or write null to leave %s unset" % (axis, _shown(value), name))


def _canonical_axis(axis, schema):
    """The option name an axis stands for in this schema (``tp`` -> ``tp-size``), or MatrixError naming the fix."""
    found = sglang_flags.canonical_flags(schema, {axis: None})
    name = next(iter(found))
    errors = sglang_flags.validate_flags(schema, {name: None})
    if errors:
        raise MatrixError("axis %r: %s; name an option of sglang %s (without the dashes), or env:NAME for an "
                          "environment variable" % (axis, "; ".join(errors), schema.get("sglang_version", "?")))
    return name


def check_matrix(matrix, schema=None):
    """The matrix as a normalised dict {axes: [(axis, [values])], zip: [[axis]], exclude: [{axis: [values]}]}
    (axes named canonically when ``schema`` is given), or MatrixError naming the problem and the fix. Without a
    schema only the structure is checked; with it every flag name and value as sglang's own parser would."""
    if not isinstance(matrix, dict):
        raise MatrixError("the matrix must be a mapping with 'axes' (and optionally 'zip' and 'exclude'), got %s; "
                          "e.g. %s" % (type(matrix).__name__, EXAMPLE))
    stray = sorted(str(k) for k in matrix if k not in KEYS)
    if stray:
        raise MatrixError("the matrix has unknown key(s) %s: it takes %s (an axis goes under 'axes')"
                          % (", ".join(stray), ", ".join(KEYS)))
    axes_in = matrix.get("axes")
    if not isinstance(axes_in, dict) or not axes_in:
        raise MatrixError("the matrix has no axes: give 'axes' as a mapping of flag (or env:NAME) -> list of values, "
                          "e.g. %s" % EXAMPLE)
    axes, names = [], {}
    for axis, values in axes_in.items():
        if not isinstance(axis, str) or not axis or axis.startswith("-"):
            raise MatrixError("axis %r: name a flag without its dashes (attention-backend) or env:NAME" % (axis,))
        if not isinstance(values, (list, tuple)):
            raise MatrixError("axis %r must be a list of values, got %s; e.g. %s: [%s] (a fixed flag belongs in "
                              "sglang_server_extra_flags)" % (axis, _shown(values), axis, _shown(values)))
        if not values:
            raise MatrixError("axis %r is empty: give it at least one value, or remove the axis" % axis)
        values = list(values)
        if is_env(axis):
            _check_env_axis(axis, values)
            name = axis
        elif schema is not None:
            name = _canonical_axis(axis, schema)
            for value in values:
                errors = sglang_flags.validate_flags(schema, {name: value})
                if errors:
                    raise MatrixError("axis %r, value %s: %s; drop the value or pick a valid one"
                                      % (axis, _shown(value), "; ".join(errors)))
        else:
            name = axis
        if name in names:
            raise MatrixError("axes %r and %r are the same option (--%s): keep one of them" % (names[name], axis, name))
        names[name] = axis
        seen = {}
        for value in values:
            key = _identity(value)
            if key in seen:
                raise MatrixError("axis %r lists %s twice (as %s and %s): every cell would run twice; drop one"
                                  % (axis, _shown(value), _shown(seen[key]), _shown(value)))
            seen[key] = value
        axes.append((name, values))
    by_given = {given: name for name, given in names.items()}
    by_given.update({name: name for name in names})
    zips = _check_zip(matrix.get("zip"), by_given, dict(axes))
    exclude = _check_exclude(matrix.get("exclude"), by_given, dict(axes))
    cap = matrix.get("max_cells", MAX_CELLS)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise MatrixError("max_cells must be a whole number of cells (1 or more), got %s" % _shown(cap))
    return {"axes": axes, "zip": zips, "exclude": exclude, "max_cells": cap}


def cell_count(norm):
    """How many cells a checked matrix has before its exclude rules: the product of its axes' lengths, a zip group
    counting once."""
    lengths = dict((name, len(values)) for name, values in norm["axes"])
    count, done = 1, set()
    for name, _values in norm["axes"]:
        if name in done:
            continue
        group = next((g for g in norm["zip"] if name in g), [name])
        done.update(group)
        count *= lengths[group[0]]
    return count


def _identity(value):
    """What makes two values the same on the command line / in the environment (8 and "8" are)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _check_zip(zips, by_given, axes):
    if zips in (None, []):
        return []
    if not isinstance(zips, list) or not all(isinstance(g, list) for g in zips):
        raise MatrixError("'zip' must be a list of axis lists, e.g. zip: [[nsa-decode-backend, nsa-prefill-backend]]")
    out, used = [], set()
    for group in zips:
        if len(group) < 2:
            raise MatrixError("zip group %s has fewer than two axes: a zip ties axes together; drop it" % group)
        names = []
        for axis in group:
            if axis not in by_given:
                raise MatrixError("zip group %s names %r, which is no axis (axes: %s): add it to 'axes' or fix the "
                                  "name" % (group, axis, ", ".join(by_given[a] for a in axes)))
            name = by_given[axis]
            if name in used:
                raise MatrixError("axis %r is in two zip groups (or twice in one): an axis varies with one group only"
                                  % axis)
            used.add(name)
            names.append(name)
        lengths = {name: len(axes[name]) for name in names}
        if len(set(lengths.values())) > 1:
            raise MatrixError("zip group %s: its axes have different numbers of values (%s); the i-th values go "
                              "together, so give each the same number" % (
                                  group, ", ".join("%s %d" % (k, v) for k, v in lengths.items())))
        out.append(names)
    return out


def _check_exclude(rules, by_given, axes):
    if rules in (None, []):
        return []
    if not isinstance(rules, list):
        raise MatrixError("'exclude' must be a list of rules, each a mapping axis -> value (or list of values), "
                          "e.g. exclude: [{moe-runner-backend: triton, attention-backend: trtllm_mla}]")
    out = []
    for rule in rules:
        if not isinstance(rule, dict) or not rule:
            raise MatrixError("exclude rule %s must be a non-empty mapping axis -> value(s)" % _shown(rule))
        norm = {}
        for axis, wanted in rule.items():
            if axis not in by_given:
                raise MatrixError("exclude rule %s names %r, which is no axis of the matrix (axes: %s): fix the name "
                                  "or drop the rule" % (json.dumps(rule), axis, ", ".join(by_given[a] for a in axes)))
            name = by_given[axis]
            wanted = list(wanted) if isinstance(wanted, list) else [wanted]
            known = {_identity(v) for v in axes[name]}
            for value in wanted:
                if _identity(value) not in known:
                    raise MatrixError("exclude rule %s: %s is not a value of axis %r (%s), so the rule never "
                                      "matches; fix the value or drop the rule"
                                      % (json.dumps(rule), _shown(value), axis, _values_text(axes[name])))
            norm[name] = [_identity(v) for v in wanted]
        out.append(norm)
    return out


def _part(axis, value):
    """The piece of a cell name one axis gives: the value when it says what it is (a backend name), else the axis
    with the value (tp-size-8, disable-custom-all-reduce, no-disable-custom-all-reduce, NCCL_P2P_LEVEL-PHB)."""
    if is_env(axis):
        name = axis[len(ENV_PREFIX):]
        text = "%s-%s" % (name, "unset" if value is None else value)
    elif value is None:
        text = "%s-default" % axis
    elif value is True:
        text = axis
    elif value is False:
        text = "no-" + axis
    elif isinstance(value, str) and re.search(r"[A-Za-z]", value):
        text = value
    else:
        text = "%s-%s" % (axis, _identity(value))
    return _UNSAFE_RE.sub("-", text.replace(".", "_")).strip("-") or "x"


def cell_name(cell_axes):
    """A stable, readable point name for a cell from its axes in order: the parts joined by '.' (cut to the point
    name's 128 characters with a hash of the whole when longer)."""
    name = ".".join(_part(axis, value) for axis, value in cell_axes)
    if not re.match(r"^[A-Za-z0-9]", name):
        name = "c" + name
    if len(name) > _NAME_MAX:
        digest = hashlib.sha256(json.dumps(cell_axes, default=str).encode()).hexdigest()[:8]
        name = name[:_NAME_MAX - 9].rstrip(".-_") + "." + digest
    return name


def expand(matrix, schema=None):
    """{cells: [{name, axes, overlay}], excluded: [names]} of a matrix (checked by ``check_matrix`` first).
    ``overlay``: the cell's entry of ``sglang_server_backends`` (its flags and environment). MatrixError when two
    cells would get the same name, or every cell is excluded."""
    norm = check_matrix(matrix, schema)
    total = cell_count(norm)
    if total > norm["max_cells"]:
        # refused before a cell is built: counting is the product of the axes, whatever their size
        sizes = " x ".join("%d %s" % (len(values), name) for name, values in norm["axes"])
        raise MatrixError(
            "the matrix has %d cells (%s) before its exclude rules, above %d (max_cells): at minutes per cell on a "
            "real host that is %s; narrow it - fewer values on an axis, zip axes that move together, exclude "
            "combinations - or say that you mean it with max_cells: %d" % (
                total, sizes, norm["max_cells"], _duration(total * REAL_POINT_S), total))
    axes = dict(norm["axes"])
    order = [name for name, _values in norm["axes"]]
    zipped = {name: group for group in norm["zip"] for name in group}
    groups, done = [], set()
    for name in order:
        if name in done:
            continue
        group = zipped.get(name, [name])
        done.update(group)
        groups.append([tuple((axis, axes[axis][i]) for axis in group) for i in range(len(axes[group[0]]))])
    cells, excluded, names = [], [], {}
    for combo in itertools.product(*groups):
        chosen = dict(pair for part in combo for pair in part)
        ordered = [(axis, chosen[axis]) for axis in order]
        name = cell_name(ordered)
        if any(all(_identity(chosen[axis]) in wanted for axis, wanted in rule.items()) for rule in norm["exclude"]):
            excluded.append(name)
            continue
        if name in names:
            raise MatrixError("cells %s and %s get the same name %r (their values differ only in characters a point "
                              "name cannot hold): make the values distinct" % (
                                  json.dumps(dict(names[name])), json.dumps(dict(ordered)), name))
        names[name] = ordered
        flags = {axis: value for axis, value in ordered if not is_env(axis)}
        env = {axis[len(ENV_PREFIX):]: (None if value is None else str(value))
               for axis, value in ordered if is_env(axis)}
        overlay = {"flags": flags}
        if env:
            overlay["environment"] = env
        cells.append({"name": name, "axes": dict(ordered), "overlay": overlay})
    if not cells:
        raise MatrixError("the exclude rules leave no cell of the %d: loosen them" % len(excluded))
    return {"cells": cells, "excluded": excluded, "axes": [[name, values] for name, values in norm["axes"]],
            "zip": norm["zip"]}


# What one point costs on the reference deployment (simulator/moesweep_sim/reference_profile.py): a ~3.5 min start
# and a benchmark of 17-20 min at +-2 % (bench/README, precision_wall.py); the refusal's estimate, not a measurement.
REAL_POINT_S = 20 * 60


def _duration(seconds):
    hours = seconds / 3600.0
    return "about %.0f hours" % hours if hours >= 2 else "about %.0f minutes" % (seconds / 60.0)


def load_matrix_file(text, source="matrix file"):
    """The matrix of a vars file's text (YAML or JSON with a top-level ``matrix`` key, the file
    ``sweep.yml -e @FILE`` takes), or MatrixError naming the fix."""
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - PyYAML comes with ansible-core
        raise MatrixError("reading %s needs PyYAML" % source) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MatrixError("%s is not valid YAML: %s" % (source, exc)) from exc
    if not isinstance(data, dict) or "matrix" not in data:
        raise MatrixError("%s has no top-level 'matrix' key: write it as a vars file, e.g. %s" % (source, EXAMPLE))
    return data["matrix"]


def estimate(earlier, host, to_run):
    """(seconds or None, basis): the time ``to_run`` cells take, from the median time of the points this host started
    before (``earlier``: its records of every sweep in the results directory, refused points left out: they start
    nothing)."""
    times = sorted(float(r["seconds"]) for r in earlier
                   if r.get("kind") == "point" and r.get("host") == host and r.get("status") != "refused"
                   and isinstance(r.get("seconds"), (int, float)) and not isinstance(r.get("seconds"), bool)
                   and r["seconds"] > 0)
    if not times:
        return None, "no earlier record of %s started a point: no estimate" % host
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2.0
    return round(median * to_run, 1), "%d cell(s) x the median %.0f s of %d point(s) %s started before" % (
        to_run, median, len(times), host)


def plan_summary(expanded, points, verdicts, earlier, host, sweep_records=(), rerun=False):
    """What the plan says of a matrix before the first restart. ``points``: this host's cells; ``verdicts``:
    {cell: preflight result} (``preflight.run_preflight``); ``earlier``: the host's records in the results directory;
    ``sweep_records``: this sweep's own (a resumed matrix skips the cells that passed). Returns {cells, axes, zip,
    excluded, refused: [{cell, verdict, reasons, citations}], passed_before, to_run, estimate_s, estimate_basis,
    lines}."""
    refused, to_run, passed_before = [], [], []
    passed = {r.get("point") for r in sweep_records
              if r.get("kind") == "point" and r.get("host") == host and r.get("status") == "passed"}
    for name in points:
        result = verdicts.get(name) or {}
        if result.get("refused"):
            decisive = _decisive(result.get("reasons"))
            cited = [url for r in decisive if isinstance(r, dict) for url in r.get("citations") or []]
            refused.append({"cell": name, "verdict": result.get("verdict") or "refused",
                            "reasons": [_reason_text(r) for r in decisive] or
                            [str(result.get("msg") or "").split("\n")[0]],
                            "citations": list(dict.fromkeys(cited or result.get("citations") or []))})
        elif name in passed and not rerun:
            passed_before.append(name)
        else:
            to_run.append(name)
    seconds, basis = estimate(earlier, host, len(to_run))
    summary = {"cells": {c["name"]: c["axes"] for c in expanded["cells"]}, "axes": expanded["axes"],
               "zip": expanded["zip"], "excluded": list(expanded["excluded"]), "refused": refused,
               "passed_before": passed_before, "to_run": to_run, "estimate_s": seconds, "estimate_basis": basis}
    summary["lines"] = plan_lines(summary, host)
    return summary


def _decisive(reasons):
    """The findings that refuse (the knowledge base's unsupported ones), else every finding given."""
    reasons = list(reasons or [])
    refusing = [r for r in reasons if isinstance(r, dict) and r.get("status") == "unsupported"]
    return refusing or reasons


def _reason_text(reason):
    if isinstance(reason, dict):
        text = str(reason.get("reason") or reason.get("rule") or reason)
        return "%s (%s)" % (text, reason["rule"]) if reason.get("rule") else text
    return str(reason)


def plan_lines(summary, host):
    """The plan as lines a person reads before the first restart."""
    axes = "; ".join("%s: %s" % (name, _values_text(values)) for name, values in summary["axes"])
    lines = ["matrix on %s: %d cell(s) of %s%s" % (
        host, len(summary["cells"]), axes,
        " (%d excluded)" % len(summary["excluded"]) if summary["excluded"] else "")]
    lines.append("refused by the preflight, never started: %d" % len(summary["refused"]))
    for item in summary["refused"]:
        lines.append("  %s: %s%s" % (item["cell"], "; ".join(item["reasons"]),
                                     " [%s]" % ", ".join(item["citations"][:2]) if item["citations"] else ""))
    if summary["passed_before"]:
        lines.append("passed before with this sweep (resume skips them when unchanged): %s"
                     % ", ".join(summary["passed_before"]))
    lines.append("to run: %d%s" % (len(summary["to_run"]),
                                   ": " + ", ".join(summary["to_run"]) if summary["to_run"] else ""))
    if summary["estimate_s"] is not None:
        lines.append("estimated time: %.0f min (%s)" % (summary["estimate_s"] / 60.0, summary["estimate_basis"]))
    else:
        lines.append("estimated time: none (%s)" % summary["estimate_basis"])
    return lines
