"""``moesweep check``: run the preflight's evaluator from the controller against gathered facts.

Same code as the ``sglang_preflight`` action (``plugin_utils.compat``), imported through the
in-repo collection, never copied. Exit 0 when the point may run (supported, caveat, unknown),
1 when it is refused, 2 on bad input.
"""

from __future__ import annotations

import json
import sys

import moesweep._collection  # noqa: F401  (puts the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat


def _flag(text: str) -> tuple[str, object]:
    """``K=V`` with V read as a YAML-ish scalar the way Ansible reads ``-e`` values: true/false are
    booleans, numbers are numbers, anything else a string; a bare ``K`` is a set boolean flag."""
    if "=" not in text:
        return text.lstrip("-"), True
    key, value = text.split("=", 1)
    low = value.strip().lower()
    if low in ("true", "yes", "on"):
        return key.lstrip("-"), True
    if low in ("false", "no", "off"):
        return key.lstrip("-"), False
    for cast in (int, float):
        try:
            return key.lstrip("-"), cast(value)
        except ValueError:
            pass
    return key.lstrip("-"), value


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="check one sweep point (backend, quantization, flags, sglang version) against host facts",
        description="Evaluate a sweep point against gathered GPU facts and data/compat.yml; exit 1 on refusal.",
    )
    p.add_argument("--facts", help="JSON file: gpu_facts output (ansible_facts.moesweep_gpu, or a result holding it)")
    p.add_argument("--sm", help="SM of the host when no facts file: 120, sm120 or 12.0")
    p.add_argument("--gpus", type=int, help="GPU count when no facts file")
    p.add_argument("--interconnect", help="nvlink, pcie-phb, ... when no facts file")
    p.add_argument("--virt", help="virtualization kind when no facts file: none, vm, container")
    p.add_argument("--backend", required=True, help="--moe-runner-backend value")
    p.add_argument("--quantization", help="--quantization value (omit for bf16)")
    p.add_argument("--sglang-version", required=True)
    p.add_argument("--cuda-version", help="CUDA toolkit release used for JIT (nvcc in CUDA_HOME)")
    p.add_argument("--flag", action="append", default=[], metavar="K=V", help="a launch flag (repeatable)")
    p.add_argument("--kb", help="knowledge base file (default: the collection's data/compat.yml)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=run)


def load_facts(args) -> dict:
    if args.facts:
        with open(args.facts, encoding="utf-8") as handle:
            data = json.load(handle)
        for key in ("ansible_facts", "moesweep_gpu"):
            if isinstance(data, dict) and key in data:
                data = data[key]
        return data
    facts: dict = {}
    if args.sm:
        sm = compat.sm_number(args.sm)
        if sm is None:
            raise ValueError(f"--sm {args.sm!r}: expected e.g. 120, sm120 or 12.0")
        facts["sm"] = f"sm{sm}"
    if args.gpus:
        facts["gpu_count"] = args.gpus
    if args.interconnect:
        facts["interconnect"] = args.interconnect
    if args.virt:
        facts["virtualization"] = {"kind": args.virt}
    return facts


def run(args) -> int:
    try:
        facts = load_facts(args)
    except (OSError, ValueError) as exc:
        print(f"moesweep check: {exc}", file=sys.stderr)
        return 2
    point = {
        "backend": args.backend,
        "quantization": args.quantization,
        "sglang_version": args.sglang_version,
        "cuda_version": args.cuda_version,
        "flags": dict(_flag(f) for f in args.flag),
    }
    kb = compat.load_kb(args.kb)
    flag_errors = None
    notes = []
    try:
        from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags

        flag_errors = list(sglang_flags.validate_flags(sglang_flags.load_schema(args.sglang_version), point["flags"]))
    except ImportError:
        notes.append("flag schema loader not available: flags checked only against compat.yml")
    except (OSError, ValueError, KeyError, LookupError) as exc:
        notes.append(f"no flag schema for sglang {args.sglang_version} ({exc})")
    verdict = compat.evaluate(point, facts, kb, flag_errors=flag_errors)
    verdict["warnings"].extend(notes)
    refused = verdict["status"] == "unsupported"
    if args.json:
        print(json.dumps(verdict, indent=2, sort_keys=True))
    else:
        if refused:
            print(compat.format_refusal(verdict))
        else:
            print(
                f"{verdict['status']}: --moe-runner-backend {verdict['backend']}"
                f" (runs {verdict['effective_backend']}) on {verdict['sm'] or 'unknown SM'}"
            )
        for warning in verdict["warnings"]:
            print(f"warning: {warning}")
        adv = verdict["advice"]
        if adv["env"] or adv["flags"]:
            env = " ".join(f"{k}={v}" for k, v in adv["env"].items())
            print(f"advice: {env} {' '.join(adv['flags'])}".rstrip())
    return 1 if refused else 0
