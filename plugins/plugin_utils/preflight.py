# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The preflight of one sweep point: plan the launch (``launch.plan``), validate it once, evaluate it against
the knowledge base (``compat.evaluate``). Shared by the ``sglang_preflight`` action, the ``sweep_plan``
action (``backends=compatible``) and the ``moesweep check`` CLI, so they all give the same verdict."""

from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat, launch, nodes, sglang_sandbox

# auto: the controller's sandbox where the model's config.json is at hand, then the host's own sglang where the host
# runs a serving stack and the unit launches that sglang; controller / host: that one alone; off: neither.
DRY_RUN_MODES = ("auto", "controller", "host", "off")
_NOT_SERVING_STACKS = ("test-", "client-")  # sglang_env's stacks that install sglang but serve nothing with it


def wants_host_dry_run(args):
    """Whether this point's dry run runs on the host too: asked (``host``), or ``auto`` where the unit launches the
    server venv's own sglang (no stand-in command) and the host's stack is a serving one."""
    mode = args.get("dry_run") or "auto"
    if mode == "host":
        return True
    stack = str(((args.get("provenance") or {}).get("stack")) or "")
    return mode == "auto" and not args.get("command") and not stack.startswith(_NOT_SERVING_STACKS)


def host_dry_run_args(plan, args, facts):
    """The ``sglang_dry_run`` module's arguments for this launch on its host."""
    venv = args.get("venv")
    return {
        "python": (str(venv).rstrip("/") + "/bin/python") if venv else "python3",
        "argv": list(plan.get("server_argv") or []),
        "environment": dict(plan.get("environment") or {}),
        "config_keys": [launch.API_KEY_FLAG] if args.get("api_key_set") else [],
        "gpu_facts": facts or None,
        "launch_imports": not args.get("command"),
    }


def _refusal(msg, launch_plan=None, node_info=None):
    return dict(changed=False, failed=True, verdict="unsupported", msg=msg, reasons=[], citations=[],
                alternatives=[], advice={}, forced=False, preflight_warnings=[], host_checks=[], launch=launch_plan,
                nodes=node_info or {})


# Addresses that accept connections from every interface (ServerArgs.host is handed to uvicorn as is).
_ALL_INTERFACES = ("0.0.0.0", "::", "[::]", "")


def public_bind_warning(host, port, api_key_set):
    """A warning when the server listens on every interface without an API key (anyone who reaches the port
    can use the model and its /flush_cache, /update_weights... endpoints), else None."""
    if str(host) in _ALL_INTERFACES and not api_key_set:
        return ("the server listens on all interfaces (--host %s, port %s) without --api-key: anyone who can reach "
                "that port can use it; set sglang_server_api_key (vault it) or bind 127.0.0.1 "
                "(sglang_server_flags.host)" % (host or "0.0.0.0", port))
    return None


def controller_dry_run(plan, args, facts, run_fn=None):
    """The dry run of the planned launch with its version's own argument handling, in the controller's sandbox
    (``sglang_sandbox.dry_run_point``, the function ``moesweep check`` calls too). The secrets file the unit
    passes with ``--config`` exists only on the host and carries only the API key: it is left out here."""
    argv = list(plan.get("server_argv") or [])
    if "--" + launch.CONFIG_FLAG in argv:
        at = argv.index("--" + launch.CONFIG_FLAG)
        del argv[at:at + 2]
    config = args.get("model_config")
    model = config if isinstance(config, dict) and config.get("architectures") else None
    return sglang_sandbox.dry_run_point(plan["sglang_version"], argv, plan.get("environment") or {}, facts,
                                        model=model, cuda_version=args.get("cuda_version"), run_fn=run_fn)


# transformers' own text when a model path is a directory without config.json or no directory at all (sglang's
# get_config -> AutoConfig.from_pretrained, at ServerArgs; transformers v4.57.1 configuration_utils.py
# _get_config_dict), as the dry run of sglang 0.5.9's argument handling printed it for such a path.
MISSING_MODEL = ("OSError: Can't load the configuration of '{path}'. If you were trying to load it from "
                 "'https://huggingface.co/models', make sure you don't have a local directory with the same name. "
                 "Otherwise, make sure '{path}' is the correct path to a directory containing a config.json file")


def model_path_refusal(plan, args, host_file_exists, node_plan):
    """The refusal of a launch whose model path is a local directory the host does not have (no config.json
    there), unless the sweep stages the model into that very directory before the point's unit; None otherwise
    (``host_file_exists(path)``: True, False, or None when it cannot tell)."""
    flags = plan.get("flags") or {}
    path = flags.get("model-path") or flags.get("model")
    if not host_file_exists or not isinstance(path, str) or not path.startswith("/"):
        return None
    if path.rstrip("/") == str(args.get("staged_model_path") or "").rstrip("/"):
        return None
    if host_file_exists(path.rstrip("/") + "/config.json") is not False:
        return None
    return _refusal(
        "sweep point %s refused before anything restarted: its --model-path %s holds no config.json on the host, so "
        "the server would die at its arguments with %s; stage the model there, or give a Hugging Face id (the sweep "
        "stages it)" % (plan.get("point"), path, MISSING_MODEL.format(path=path)), launch_plan=plan,
        node_info=node_plan)


def run_preflight(args, task_vars_facts=None, node_inputs=None, dry_run_fn=None, host_dry_run=None,
                  host_file_exists=None):
    """Pure core shared with tests and the CLI: returns (result dict, failed bool). ``node_inputs``
    (``nodes.inputs_from_vars``): this host serves in a node group; the launch is this rank's, and the result's
    ``nodes`` is the group's plan (on a refusal: which host records it, and which host writes that record).
    ``args["dry_run"]`` (``DRY_RUN_MODES``): the launch runs through its version's own argument handling in the
    controller's sandbox where the model's config.json is at hand (``controller_dry_run``; ``dry_run_fn`` replaces
    the sandbox's runner in tests), then on the host (``host_dry_run(module_args)``, the caller's way to run the
    ``sglang_dry_run`` module there) where ``wants_host_dry_run``: the host's answer, from its own sglang, torch,
    GPUs and model files, decides over the controller's copy, unless that already refused. ``host_file_exists``
    (the caller's way to ask the host) refuses a local model path without the model (``model_path_refusal``)."""
    facts = args.get("gpu_facts") or task_vars_facts or {}
    if "moesweep_gpu" in facts:
        facts = facts["moesweep_gpu"]
    name = args.get("point") or args.get("backend")
    node_plan = {}
    if node_inputs:
        try:
            node_plan = nodes.plan_nodes(node_inputs)
        except nodes.NodeError as exc:
            return _refusal("sweep point %s: %s" % (name, exc), node_info=exc.info), True
    if args.get("point") and args["point"] != args["backend"]:
        return _refusal(
            "sweep point %r runs backend %r: the point's variables contradict its name (is "
            "sglang_server_backend set with -e?). Drop that variable, or sweep over %r."
            % (args["point"], args["backend"], args["backend"]), node_info=node_plan), True
    try:
        plan = launch.plan(dict(args, nodes=node_plan))
    except launch.LaunchError as exc:
        return _refusal("sweep point %s: %s" % (name, exc), node_info=node_plan), True
    missing = model_path_refusal(plan, args, host_file_exists, node_plan)
    if missing:
        return missing, True
    point = {
        "backend": plan["backend"],
        "quantization": plan["flags"].get(launch.QUANT_FLAG),
        "sglang_version": plan["sglang_version"],
        "cuda_version": args.get("cuda_version"),
        "flags": {k: v for k, v in plan["flags"].items() if k not in (launch.BACKEND_FLAG, launch.QUANT_FLAG)},
        "environment": plan["environment"],
        # the model's architecture for the attention rules: its config.json when the caller read it, else the
        # knowledge base's table of known model ids (a --model-path it does not know leaves the rules unchecked)
        "model": args.get("model_config") or plan["flags"].get("model-path") or plan["flags"].get("model"),
    }
    # a caller that plans many points (sweep_plan, a launch matrix's cells) loads the knowledge base once
    kb = args.get("kb") or compat.load_kb(args.get("kb_path"))
    mode = args.get("dry_run") or "auto"
    if mode not in DRY_RUN_MODES:
        return _refusal("sweep point %s: dry_run %r: expected one of %s" % (name, mode, ", ".join(DRY_RUN_MODES)),
                        launch_plan=plan, node_info=node_plan), True
    dry = None
    if mode in ("auto", "controller") and not plan["flag_errors"]:
        dry = controller_dry_run(plan, args, facts, run_fn=dry_run_fn)
    if host_dry_run is not None and wants_host_dry_run(args) and not plan["flag_errors"] and \
            not (dry and dry.get("verdict") == "refused"):
        dry = dict(host_dry_run(host_dry_run_args(plan, args, facts)), ran=True)
    verdict = compat.evaluate(point, facts, kb, flag_errors=plan["flag_errors"],
                              dry_run=dry if dry and dry.get("ran") else None)
    if dry and not dry.get("ran"):
        verdict["dry_run"] = compat.dry_run_summary(dry)  # why it did not run, for the record
    elif dry:
        verdict["warnings"].extend(dry.get("assumptions") or [])
    warnings = list(verdict["warnings"])
    if not facts.get("sm"):
        warnings.append("no gpu_facts with an SM: architecture rules could not be checked")
    public = public_bind_warning(plan["host"], plan["port"], bool(args.get("api_key_set")))
    if public:
        warnings.append(public)
    # gpu_facts' host checks (module_utils/host_checks.py): a warn is a caveat, a fail refuses the point
    host = facts.get("host_check_summary") or {}
    warnings.extend(host.get("warn") or [])
    host_failures = list(host.get("fail") or [])
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
        host_checks=list(facts.get("host_checks") or []),
        launch=plan,
        nodes=node_plan,
        dry_run=verdict.get("dry_run"),
    )
    if host_failures and verdict["status"] != "unsupported":
        result["verdict"] = "unsupported"
        result["msg"] = ("sweep point %s refused by the host checks, before anything restarted:\n- %s"
                         % (verdict["backend"], "\n- ".join(host_failures)))
        if args.get("force"):
            result["forced"] = True
            result["msg"] = "FORCED past the preflight (force: true): " + result["msg"]
            return result, False
        return result, True
    if verdict["status"] == "unsupported":
        result["msg"] = compat.format_refusal(verdict) + "".join("\n- " + line for line in host_failures)
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
