# Copyright: moesweep developers
# Apache License 2.0
"""Controller-side preflight: refuse an incompatible sweep point before any unit is touched.

Documentation lives in plugins/modules/sglang_preflight.py (action-only module stub)."""

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat

try:  # the per-version flag schema loader (data/sglang/flags-<V>.json); optional until it lands
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import sglang_flags
except ImportError:  # pragma: no cover - depends on the checkout
    sglang_flags = None

ARGUMENT_SPEC = dict(
    backend=dict(type="raw", required=True),
    quantization=dict(type="str"),
    flags=dict(type="dict", default={}),
    sglang_version=dict(type="str", required=True),
    gpu_facts=dict(type="dict"),
    cuda_version=dict(type="str"),
    force=dict(type="bool", default=False),
    kb_path=dict(type="path"),
)


def flag_schema_errors(version, flags):
    """Errors from the version's real flag schema, or (None, warning) when it is not available."""
    if sglang_flags is None:
        return (
            None,
            "flag schema loader (plugin_utils.sglang_flags) not available: flags checked only against compat.yml",
        )
    try:
        schema = sglang_flags.load_schema(version)
    except (OSError, ValueError, KeyError, LookupError) as exc:
        return None, "no flag schema for sglang %s (%s): flags checked only against compat.yml" % (version, exc)
    return list(sglang_flags.validate_flags(schema, flags or {})), None


def run_preflight(args, task_vars_facts=None):
    """Pure-ish core shared with tests: returns (result dict, failed bool)."""
    facts = args.get("gpu_facts") or task_vars_facts or {}
    if "moesweep_gpu" in facts:
        facts = facts["moesweep_gpu"]
    kb = compat.load_kb(args.get("kb_path"))
    point = {
        "backend": args["backend"],
        "quantization": args.get("quantization"),
        "sglang_version": args["sglang_version"],
        "cuda_version": args.get("cuda_version"),
        "flags": args.get("flags") or {},
    }
    warnings = []
    flag_errors = None
    if isinstance(args["backend"], str):
        flag_errors, warn = flag_schema_errors(args["sglang_version"], point["flags"])
        if warn:
            warnings.append(warn)
    verdict = compat.evaluate(point, facts, kb, flag_errors=flag_errors)
    warnings = verdict["warnings"] + warnings
    if not facts.get("sm"):
        warnings.append("no gpu_facts with an SM: architecture rules could not be checked")
    refused = verdict["status"] == "unsupported"
    result = dict(
        changed=False,
        verdict=verdict["status"],
        backend=verdict["backend"],
        effective_backend=verdict["effective_backend"],
        sm=verdict["sm"],
        quantization=verdict["quantization"],
        sglang_version=verdict["sglang_version"],
        reasons=verdict["reasons"],
        citations=verdict["citations"],
        alternatives=verdict["alternatives"],
        advice=verdict["advice"],
        forced=False,
        preflight_warnings=warnings,
    )
    if refused:
        result["msg"] = compat.format_refusal(verdict)
        if args.get("force"):
            result["forced"] = True
            result["msg"] = "FORCED past the preflight (force: true): " + result["msg"]
            return result, False
        return result, True
    result["msg"] = "sweep point %s on %s: %s" % (verdict["backend"], verdict["sm"], verdict["status"])
    return result, False


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        validator = ArgumentSpecValidator(ARGUMENT_SPEC)
        validated = validator.validate(self._task.args)
        if validated.error_messages:
            raise AnsibleActionFail("sglang_preflight: " + "; ".join(validated.error_messages))
        args = validated.validated_parameters
        if isinstance(args["backend"], (list, dict)):
            raise AnsibleActionFail(
                "sglang_preflight: backend must be one --moe-runner-backend name (a string), got a %s: %r; "
                "loop over the sweep points instead" % (type(args["backend"]).__name__, args["backend"])
            )
        host_facts = ((task_vars or {}).get("ansible_facts") or {}).get("moesweep_gpu")
        result, failed = run_preflight(args, host_facts)
        for warning in result["preflight_warnings"]:
            self._display.warning(warning)
        if failed:
            result["failed"] = True
        return result
