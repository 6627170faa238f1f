# Copyright: moesweep developers
# Apache License 2.0
"""Evaluate a sweep point (MoE backend, quantization, flags, sglang version) against host facts and
the knowledge base ``data/compat.yml``.

``evaluate(point, facts, kb)`` is pure: no I/O, the KB is passed in (``load_kb`` reads it). Used by
the ``sglang_preflight`` action and the ``moesweep check`` CLI, so both give the same verdict.
"""

import os
import re

from ansible_collections.moesweep.sweep.plugins.module_utils.nvidia_smi import sm_number  # noqa: F401  (re-exported)

STATUS_ORDER = {"supported": 0, "unknown": 1, "caveat": 2, "unsupported": 3}
DEFAULT_KB_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "data", "compat.yml")


def load_kb(path=None):
    """Read the YAML knowledge base (controller side; needs PyYAML)."""
    import yaml

    with open(path or DEFAULT_KB_PATH, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def parse_version(text):
    """``'0.5.9'`` -> (0, 5, 9); ``'12.8'`` -> (12, 8); ``'0.5.10rc0'`` -> (0, 5, 10). None if unparsable."""
    if text is None:
        return None
    parts = re.findall(r"\d+", str(text).split("+")[0])
    if not parts:
        return None
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _in_range(version, rng):
    if not rng:
        return True
    if version is None:
        return None  # unknown
    lo = parse_version(rng.get("min"))
    hi = parse_version(rng.get("max"))
    if lo and version < lo:
        return False
    if hi and version > hi:
        return False
    return True


def normalise_quantization(quant):
    if quant is None:
        return "bf16"
    text = str(quant).strip().lower()
    return "bf16" if text in ("", "none", "null", "bf16", "bfloat16", "unquant") else text


def quant_families(kb, quant):
    """The set of names a quantization matches in rules: itself plus its family."""
    names = {quant}
    for family, members in (kb.get("quantization_families") or {}).items():
        members = ["null" if m is None else str(m) for m in members]
        if quant in members or quant == family:
            names.add(family)
    return names


def valid_backends(kb, version):
    """Backend choices of that sglang version (all known ones if the version is unknown)."""
    v = parse_version(version)
    out = []
    for name, info in (kb.get("backends") or {}).items():
        since = parse_version((info or {}).get("since"))
        if v is None or since is None or v >= since:
            out.append(name)
    return out


def _matches(rule, ctx):
    """True / False, or None when a fact the rule needs is unknown."""
    unknown = False
    if "backend" in rule and ctx["backend"] not in rule["backend"]:
        return False
    if "backend_not_in" in rule and ctx["backend"] in rule["backend_not_in"]:
        return False
    if "flag" in rule:
        names = [rule["flag"]] + list(rule.get("also") or [])
        hit = [f for f in names if f in ctx["flags"]]
        if not hit:
            return False
        if "value" in rule and not any(str(ctx["flags"][f]) == str(rule["value"]) for f in hit):
            return False
    sm = ctx["sm"]
    for key in ("sm_in", "sm_not_in", "sm_below"):
        if key in rule and sm is None:
            unknown = True
    if sm is not None:
        if "sm_in" in rule and sm not in rule["sm_in"]:
            return False
        if "sm_not_in" in rule and sm in rule["sm_not_in"]:
            return False
        if "sm_below" in rule and not sm < rule["sm_below"]:
            return False
    if "quant_in" in rule and not (ctx["quant_names"] & set(rule["quant_in"])):
        return False
    if "quant_not_in" in rule and ctx["quant_names"] & set(rule["quant_not_in"]):
        return False
    if "sglang" in rule:
        r = _in_range(ctx["sglang"], rule["sglang"])
        if r is False:
            return False
        if r is None:
            unknown = True
    if "cuda_below" in rule:
        if ctx["cuda"] is None:
            unknown = True
        elif not ctx["cuda"] < parse_version(rule["cuda_below"]):
            return False
    if "a2a_in" in rule and ctx["a2a"] not in rule["a2a_in"]:
        return False
    if "ep_size_above" in rule and not (ctx["ep_size"] or 1) > rule["ep_size_above"]:
        return False
    return None if unknown else True


def _finding(rule, kind):
    return {
        "rule": rule.get("id"),
        "kind": kind,
        "status": rule.get("status", "supported"),
        "reason": rule.get("reason"),
        "error": rule.get("error"),
        "citation": rule.get("citation"),
    }


def _context(point, facts, kb, backend):
    facts = facts or {}
    quant = normalise_quantization(point.get("quantization"))
    flags = {}
    for key, value in (point.get("flags") or {}).items():
        name = key if str(key).startswith("-") else "--" + str(key).replace("_", "-")
        flags[name] = value
    cuda = point.get("cuda_version") or ((facts.get("cuda_toolkit") or {}).get("release"))
    sm = point.get("sm") or facts.get("sm")
    return {
        "backend": backend,
        "quant": quant,
        "quant_names": quant_families(kb, quant),
        "flags": flags,
        "sm": sm_number(sm),
        "sglang": parse_version(point.get("sglang_version")),
        "cuda": parse_version(cuda),
        "a2a": str(flags.get("--moe-a2a-backend", point.get("moe_a2a_backend") or "none")),
        "ep_size": int(flags.get("--ep-size", flags.get("--ep", 1)) or 1),
    }


def resolve_auto(kb, ctx):
    for entry in kb.get("auto_resolution") or []:
        if _matches(entry, dict(ctx, backend="auto")):
            return entry
    return None


def _backend_findings(kb, ctx):
    findings = []
    for rule in kb.get("rules") or []:
        m = _matches(rule, ctx)
        if m:
            findings.append(_finding(rule, "backend"))
        elif m is None and rule.get("status") == "unsupported":
            f = _finding(rule, "backend")
            f["status"] = "unknown"
            f["reason"] = "needs a fact that is missing (SM, sglang or CUDA version): " + (rule.get("reason") or "")
            findings.append(f)
    return findings


def _worst(findings):
    status = None
    for f in findings:
        if status is None or STATUS_ORDER[f["status"]] > STATUS_ORDER[status]:
            status = f["status"]
    return status


def _backend_status(kb, ctx):
    """Status of the backend alone (no flags), following auto's resolution."""
    findings = []
    effective = ctx["backend"]
    if effective == "auto":
        entry = resolve_auto(kb, ctx)
        if entry:
            effective = entry["resolves_to"]
            f = _finding(entry, "auto")
            f["status"] = entry.get("status", "supported")
            f["reason"] = entry.get("reason") or ("auto resolves to " + effective)
            findings.append(f)
    findings.extend(_backend_findings(kb, dict(ctx, backend=effective)))
    backend_rules = [f for f in findings if f["kind"] == "backend"]
    status = _worst(findings)
    if effective != "auto" and not backend_rules:
        status = "unknown" if status in (None, "supported") else status
    elif status is None:
        status = "unknown"
    return status, effective, findings


def advise(facts, kb):
    """Launch advice (env vars, flags) from host facts; returned, never applied."""
    facts = facts or {}
    out = {"env": {}, "flags": [], "notes": [], "citations": []}
    virt = (facts.get("virtualization") or {}).get("kind")
    inter = facts.get("interconnect") or ""
    for item in kb.get("advice") or []:
        if item.get("interconnect_prefix") and not inter.startswith(item["interconnect_prefix"]):
            continue
        if item.get("virtualization_kind") and virt not in item["virtualization_kind"]:
            continue
        if (facts.get("gpu_count") or 0) < item.get("gpu_count_min", 0):
            continue
        out["env"].update(item.get("env") or {})
        out["flags"].extend(f for f in item.get("flags") or [] if f not in out["flags"])
        out["notes"].append(item.get("reason"))
        out["citations"].append(item.get("citation"))
    return out


def evaluate(point, facts, kb, flag_errors=None):
    """Verdict for one sweep point.

    point: {backend, quantization, sglang_version, cuda_version?, flags: {name: value}, sm?}
    facts: the gpu_facts dict (``ansible_facts.moesweep_gpu``) or {} (then ``point['sm']`` is used)
    flag_errors: errors from the version's flag schema (sglang_flags.validate_flags), if available.
    Returns {status, backend, effective_backend, sm, quantization, sglang_version, reasons,
    citations, alternatives, warnings, advice}.
    """
    facts = facts or {}
    backend = point.get("backend")
    version = point.get("sglang_version")
    verdict = {
        "status": "supported",
        "backend": backend,
        "effective_backend": backend,
        "sm": None,
        "quantization": None,
        "sglang_version": version,
        "reasons": [],
        "citations": [],
        "alternatives": [],
        "warnings": [],
        "advice": advise(facts, kb),
    }
    if isinstance(backend, (list, tuple, dict)) or not isinstance(backend, str) or not backend:
        verdict["status"] = "unsupported"
        verdict["reasons"].append(
            {
                "rule": "input",
                "status": "unsupported",
                "reason": "backend must be one name (a string), got %r" % (backend,),
                "error": None,
                "citation": None,
            }
        )
        return verdict
    ctx = _context(point, facts, kb, backend)
    verdict["sm"] = "sm%d" % ctx["sm"] if ctx["sm"] is not None else None
    verdict["quantization"] = ctx["quant"]
    if facts.get("mixed_models"):
        verdict["warnings"].append(
            "mixed GPU models on this host (%s): the SM is not a single value"
            % ", ".join(facts.get("gpu_models") or [])
        )

    choices = valid_backends(kb, version)
    findings = []
    if backend not in choices:
        findings.append(
            {
                "rule": "backend-choice",
                "kind": "input",
                "status": "unsupported",
                "reason": "unknown --moe-runner-backend %r for sglang %s; valid choices: %s"
                % (backend, version or "(any)", ", ".join(choices)),
                "error": "argparse: invalid choice: %r (exit 2)" % backend,
                "citation": kb.get("backends_citation"),
            }
        )
        status, effective = "unsupported", backend
    else:
        status, effective, bfind = _backend_status(kb, ctx)
        findings.extend(bfind)
    verdict["effective_backend"] = effective

    for rule in kb.get("flags") or []:
        m = _matches(rule, ctx)
        if m:
            f = _finding(rule, "flag")
            if rule.get("replacement"):
                f["replacement"] = rule["replacement"]
            findings.append(f)
    for err in flag_errors or []:
        findings.append(
            {
                "rule": "flag-schema",
                "kind": "flag",
                "status": "unsupported",
                "reason": err,
                "error": "rejected by the version's real argparse schema",
                "citation": "data/sglang/flags-%s.json" % version,
            }
        )

    worst = _worst(findings + [{"status": status}])
    verdict["status"] = worst
    verdict["reasons"] = [f for f in findings if f["status"] != "supported"]
    for f in findings:
        if f.get("citation") and f["citation"] not in verdict["citations"]:
            verdict["citations"].append(f["citation"])
        if f["status"] == "caveat":
            verdict["warnings"].append("%s: %s" % (f["rule"], f["reason"]))
    if worst in ("unsupported", "unknown"):
        verdict["alternatives"] = alternatives(point, facts, kb, exclude=backend)
    return verdict


def alternatives(point, facts, kb, exclude=None):
    """Backends of the same sglang version that are supported (or only caveated) for this SM/quant."""
    out = []
    for name in valid_backends(kb, point.get("sglang_version")):
        if name == exclude:
            continue
        ctx = _context(point, facts or {}, kb, name)
        status, effective, _ = _backend_status(kb, ctx)
        if status in ("supported", "caveat"):
            out.append({"backend": name, "status": status, "resolves_to": effective if name == "auto" else None})
    out.sort(key=lambda a: (STATUS_ORDER[a["status"]], a["backend"] != "auto", a["backend"]))
    return out


def format_refusal(verdict):
    """One message naming backend, SM, reason, error, citation and the compatible alternatives."""
    lines = [
        "sweep point refused: --moe-runner-backend %s%s on %s, quantization %s, sglang %s"
        % (
            verdict["backend"],
            ""
            if verdict["effective_backend"] == verdict["backend"]
            else " (resolves to %s)" % verdict["effective_backend"],
            verdict["sm"] or "unknown SM",
            verdict["quantization"],
            verdict["sglang_version"] or "unknown",
        )
    ]
    for r in verdict["reasons"]:
        if r["status"] not in ("unsupported", "unknown"):
            continue
        lines.append("- [%s] %s: %s" % (r["status"], r["rule"], r["reason"]))
        if r.get("error"):
            lines.append("  launch would hit: %s" % r["error"])
        if r.get("citation"):
            lines.append("  source: %s" % r["citation"])
        if r.get("replacement"):
            lines.append("  use instead: %s" % ", ".join("%s -> %s" % kv for kv in r["replacement"].items()))
    alts = [a["backend"] + (" (caveat)" if a["status"] == "caveat" else "") for a in verdict["alternatives"]]
    lines.append("compatible alternatives: %s" % (", ".join(alts) if alts else "none known"))
    return "\n".join(lines)
