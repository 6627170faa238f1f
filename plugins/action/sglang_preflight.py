# Copyright: moesweep developers
# Apache License 2.0
"""Controller-side preflight: plan the launch once, validate it once, and refuse an incompatible sweep
point before any unit is touched.

Documentation lives in plugins/modules/sglang_preflight.py (action-only module stub)."""

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, launch

ARGUMENT_SPEC = dict(
    backend=dict(type="raw", required=True),
    point=dict(type="str"),
    quantization=dict(type="str"),
    flags=dict(type="dict", default={}),
    backends=dict(type="dict", default={}),
    extra_flags=dict(type="dict", default={}),
    sglang_version=dict(type="str"),
    provenance=dict(type="dict", default={}),
    command=dict(type="list", elements="str", default=[]),
    venv=dict(type="path"),
    environment=dict(type="dict", default={}),
    secret_environment_keys=dict(type="list", elements="str", default=[]),
    api_key_set=dict(type="bool", default=False),
    home=dict(type="path"),
    cuda_home=dict(type="path"),
    gpu_facts=dict(type="dict"),
    cuda_version=dict(type="str"),
    force=dict(type="bool", default=False),
    kb_path=dict(type="path"),
)


def _refusal(msg, launch_plan=None):
    return dict(changed=False, failed=True, verdict="unsupported", msg=msg, reasons=[], citations=[],
                alternatives=[], advice={}, forced=False, preflight_warnings=[], launch=launch_plan)


def run_preflight(args, task_vars_facts=None):
    """Pure core shared with tests and the CLI: returns (result dict, failed bool)."""
    facts = args.get("gpu_facts") or task_vars_facts or {}
    if "moesweep_gpu" in facts:
        facts = facts["moesweep_gpu"]
    if args.get("point") and args["point"] != args["backend"]:
        return _refusal(
            "sweep point %r runs backend %r: the point's variables contradict its name (is "
            "sglang_server_backend set with -e?). Drop that variable, or sweep over %r."
            % (args["point"], args["backend"], args["backend"])), True
    try:
        plan = launch.plan(args)
    except launch.LaunchError as exc:
        return _refusal("sweep point %s: %s" % (args.get("point") or args.get("backend"), exc)), True
    point = {
        "backend": plan["backend"],
        "quantization": plan["flags"].get(launch.QUANT_FLAG),
        "sglang_version": plan["sglang_version"],
        "cuda_version": args.get("cuda_version"),
        "flags": {k: v for k, v in plan["flags"].items() if k not in (launch.BACKEND_FLAG, launch.QUANT_FLAG)},
        "environment": plan["environment"],
    }
    kb = compat.load_kb(args.get("kb_path"))
    verdict = compat.evaluate(point, facts, kb, flag_errors=plan["flag_errors"])
    warnings = list(verdict["warnings"])
    if not facts.get("sm"):
        warnings.append("no gpu_facts with an SM: architecture rules could not be checked")
    result = dict(
        changed=False,
        verdict=verdict["status"],
        backend=verdict["backend"],
        point=plan["point"],
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
        launch=plan,
    )
    if verdict["status"] == "unsupported":
        result["msg"] = compat.format_refusal(verdict)
        if plan["flag_errors"]:
            # a launch the real parser rejects cannot be forced: it would only exit 2
            result["failed"] = True
            return result, True
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
