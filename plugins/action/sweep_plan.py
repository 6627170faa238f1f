# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: plan a sweep on one host before any point runs. Documentation: plugins/modules/sweep_plan.py."""

import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_serving
from ansible_collections.moesweep.sweep.plugins.plugin_utils import (
    accuracy,
    action_args,
    compat,
    equivalence,
    launch,
    matrix,
    nodes,
    plan_checks,
    preflight,
    records,
)
from ansible_collections.moesweep.sweep.plugins.plugin_utils.spread import comparable_facts, spread_points

# The GSM8K test split the collection ships (data/gsm8k/SOURCES.md): what the accuracy stage copies by default.
SHIPPED_GSM8K = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "data", "gsm8k", "test.jsonl")

ARGUMENT_SPEC = dict(
    backend=dict(type="raw"),
    backends=dict(type="raw"),
    # a launch matrix (plugin_utils/matrix.py): its cells are the points
    matrix=dict(type="raw"),
    restore=dict(type="str", default="best"),
    reference_concurrency=dict(type="int"),
    concurrency=dict(type="list", elements="int", default=[1, 8, 32, 64]),
    results_dir=dict(type="path", required=True),
    sweep_id=dict(type="str"),
    rerun=dict(type="bool", default=False),
    # measure a point even when it runs the kernels of a point measured in this sweep (plugin_utils/equivalence.py)
    measure_equivalent=dict(type="bool", default=False),
    spread=dict(type="raw", default=False),
    force=dict(type="bool", default=False),
    hosts=dict(type="list", elements="str", default=[]),
    host=dict(type="str"),
    host_inputs=dict(type="dict", default={}),
    bench_settings=dict(type="dict", default={}),
    accuracy=dict(type="dict", default={}),
    numbers=dict(type="dict", default={}),
    # what the host's point preflights need: the server role's launch inputs and the host's facts
    flags=dict(type="dict", default={}),
    version_flags=dict(type="dict", default={}),
    backends_overlays=dict(type="dict", default={}),
    extra_flags=dict(type="dict", default={}),
    sglang_version=dict(type="str"),
    provenance=dict(type="dict", default={}),
    environment=dict(type="dict", default={}),
    gpu_facts=dict(type="dict", default={}),
    kb_path=dict(type="path"),
    # a node group (one server over several hosts): which host records its points, which host writes them
    nodes_group=dict(type="str"),
    node_inputs=dict(type="dict"),
)


def node_roles(node_inputs):
    """This host's part in a node group: {group, members, record_host, recorder} (empty on one host). A group that
    cannot serve still names them: its points are refused one by one, and recorded by that host."""
    if not node_inputs:
        return {}
    try:
        plan = nodes.plan_nodes(node_inputs)
    except nodes.NodeError as exc:
        return dict(exc.info, error=str(exc))
    return {"group": plan["group"], "members": list(node_inputs["members"]), "record_host": plan["record_host"],
            "recorder": plan["recorder"]}


def check_bench(settings):
    """The benchmark's levels and lengths, checked as the sglang_bench module checks them (one owner:
    module_utils/bench_serving), here before any point restarts a server: a level of 0, or fewer prompts than the
    concurrency, is refused with the module's own message instead of after the first point's restart."""
    settings = settings or {}
    if "concurrency" not in settings:
        return
    try:
        bench_serving.plan_levels(settings.get("concurrency"), bench_serving.prompt_counts(settings.get("num_prompts")),
                                  settings.get("prompts_per_concurrency", 5), settings.get("min_prompts", 16))
        if settings.get("input_len") is not None and settings.get("output_len") is not None:
            bench_serving.check_lengths(settings["input_len"], settings["output_len"],
                                        settings.get("range_ratio", 1.0))
    except (bench_serving.BenchInputError, TypeError, ValueError) as exc:
        raise plan_checks.PlanError("the benchmark's settings (sglang_bench_*): %s" % exc) from exc


def plan(args):
    """The sweep plan, or PlanError naming the problem."""
    matrix_in = args.get("matrix")
    if matrix_in in (None, "", {}):
        points = plan_checks.parse_points(args.get("backend"), args.get("backends"))
    elif args.get("backend") not in (None, "") or args.get("backends") not in (None, "", []):
        raise plan_checks.PlanError("give either a matrix (-e @matrix.yml) or -e backend / -e backends, not both: "
                                    "a matrix's cells are its points (add moe-runner-backend as one of its axes)")
    else:
        points = []
    requested = points if points == "compatible" else list(points)
    plan_checks.check_numbers(args.get("numbers"))
    concurrency = args["concurrency"]
    reference = args.get("reference_concurrency")
    if reference is None:
        reference = max(concurrency) if concurrency else None
    check_bench(args.get("bench_settings"))
    plan_checks.check_settings(args["restore"], reference, concurrency, str(args["spread"]).lower())
    results_dir = os.path.abspath(os.path.expanduser(args["results_dir"]))
    plan_checks.check_results_dir(results_dir, os.path.isdir, os.path.exists, os.access)
    try:
        version = launch.resolve_version(args.get("sglang_version"), args.get("provenance"))
        schema_choices = launch.backend_choices(launch.schema_for(version))
    except (launch.LaunchError, OSError, ValueError) as exc:
        raise plan_checks.PlanError(str(exc)) from exc
    overlays = args.get("backends_overlays") or {}
    expanded = None
    if matrix_in not in (None, "", {}):
        try:
            expanded = matrix.expand(matrix_in, launch.schema_for(version))
        except matrix.MatrixError as exc:
            raise plan_checks.PlanError("the matrix: %s" % exc) from exc
        # each cell is a point whose overlay the server role applies, like any entry of sglang_server_backends
        overlays = dict(overlays, **{cell["name"]: cell["overlay"] for cell in expanded["cells"]})
        points = requested = [cell["name"] for cell in expanded["cells"]]
    roles = node_roles(args.get("node_inputs"))
    if roles and str(args["spread"]).lower() not in ("false", "no", "0"):
        raise plan_checks.PlanError("spread=%s deals points to hosts one by one, but %s is a node of group %s, "
                                    "which serves one server from %s together: sweep a node group without spread"
                                    % (args["spread"], args.get("host"), roles["group"], ", ".join(roles["members"])))
    facts = args.get("gpu_facts") or {}
    if roles:
        # every rank of a node group must get the same points: judge them on the recording host's facts
        facts = ((args.get("host_inputs") or {}).get(roles["record_host"]) or {}).get("gpu_facts") or facts

    kb = compat.load_kb(args.get("kb_path"))  # once for every point asked, not once per point
    verdicts = {}  # one preflight per backend: backends=compatible and starts_server ask the same
    details = {}  # the preflight's result of each point asked (a matrix's plan names the refused cells' reasons)

    def accepts(choice):
        if choice in verdicts:
            return verdicts[choice]
        result, failed = preflight.run_preflight({
            "backend": choice, "flags": args.get("flags") or {}, "version_flags": args.get("version_flags") or {},
            "backends": overlays,
            "extra_flags": args.get("extra_flags") or {}, "sglang_version": version,
            "provenance": args.get("provenance") or {}, "environment": args.get("environment") or {},
            "gpu_facts": facts, "kb": kb,
            # the knowledge base alone here: each point's own preflight runs sglang's argument handling
            "dry_run": "off"})
        verdicts[choice] = (not failed and result.get("verdict") in ("supported", "caveat"),
                            result.get("verdict") or "refused")
        details[choice] = dict(result, refused=not verdicts[choice][0])
        return verdicts[choice]

    if points == "compatible":
        accepted, refused = [], []
        for choice in schema_choices:
            ok, verdict = accepts(choice)
            if ok:
                accepted.append(choice)
            else:
                refused.append("%s (%s)" % (choice, verdict))
        if not accepted:
            raise plan_checks.PlanError("backends=compatible: the preflight accepts no --moe-runner-backend of "
                                        "sglang %s on this host (%s)" % (version, "; ".join(refused)))
        points = accepted
    else:
        plan_checks.check_points(points, overlays, schema_choices)
    try:
        accuracy_settings = accuracy.plan_settings(args.get("accuracy"), list(points),
                                                   (args.get("flags") or {}).get("model-path"))
    except accuracy.AccuracySettingsError as exc:
        raise plan_checks.PlanError(str(exc)) from exc
    hosts = args.get("hosts") or []
    sweep_id = args.get("sweep_id") or plan_checks.sweep_id_for(requested, hosts, args.get("bench_settings"))
    plan_checks.check_sweep_id(sweep_id)
    mine, group = spread(points, args)
    # which of this host's points start a server when they run: a point ending before one of them stops its server
    # at once (plugin_utils/schedule.py). force=true runs refused points too; a node group never stops early.
    starts = [] if roles else [p for p in mine if args.get("force") or accepts(p)[0]]
    # the plan's prediction of the points that run the kernels of an earlier one (the knowledge base's resolution):
    # such a point is not started once that one passed, each confirmed by its own preflight before it is skipped
    equivalent = {} if roles or args.get("force") or args["measure_equivalent"] else \
        equivalence.plan_equivalents(mine, {p: details[p] for p in mine if p in details})
    summary = None
    if expanded is not None:
        for point in mine:
            accepts(point)
        sweep_dir = os.path.join(results_dir, sweep_id)
        summary = matrix.plan_summary(
            expanded, mine, {} if args.get("force") else details,
            earlier_records(results_dir, args.get("host")), args.get("host") or "localhost",
            records.read_points(os.path.join(sweep_dir, records.POINTS_FILE)), bool(args["rerun"]))
    return {"starts_server": starts, "overlays": overlays, "matrix": summary,
            "sweep_id": sweep_id, "results_dir": results_dir, "dir": os.path.join(results_dir, sweep_id),
            "stop_file": os.path.join(results_dir, sweep_id, records.STOP_FILE), "points": mine,
            "all_points": points, "spread": str(args["spread"]).lower(), "spread_group": group,
            "restore": args["restore"], "reference_concurrency": reference, "concurrency": list(concurrency),
            "rerun": bool(args["rerun"]), "sglang_version": version, "created": records.now_iso(),
            "measure_equivalent": bool(args["measure_equivalent"]), "equivalent": equivalent,
            "nodes": roles, "accuracy": accuracy_settings,
            "warnings": [w for w in [plan_checks.precision_warning(args.get("bench_settings"))] if w]}


def earlier_records(results_dir, host):
    """The point records of ``host`` in every sweep of the results directory (the matrix plan's time estimate)."""
    found = []
    try:
        names = sorted(os.listdir(results_dir))
    except OSError:
        return found
    for name in names:
        path = os.path.join(results_dir, name, records.POINTS_FILE)
        if os.path.isfile(path):
            found.extend(r for r in records.read_points(path) if r.get("host") == host)
    return found


def spread(points, args):
    """This host's share of the points and the hosts it shares them with (``spread.spread_points``), from
    the facts and provenance of every host that reached the plan (``host_inputs``, gathered before any host
    plans, so every host deals the same hands)."""
    host = args.get("host")
    mode = str(args["spread"]).lower()
    if mode in ("false", "no", "0") or not host:
        return list(points), [host] if host else []
    inputs = args.get("host_inputs") or {}
    if host not in inputs:
        raise plan_checks.PlanError("spread=%s: host_inputs has no entry for %s (the facts play did not run there)"
                                    % (mode, host))
    missing = sorted(h for h, value in inputs.items() if not (value or {}).get("gpu_facts"))
    if missing:
        raise plan_checks.PlanError("spread=%s needs every host's GPU facts, but %s has none: check that the host "
                                    "is reachable and that nvidia-smi works there" % (mode, ", ".join(missing)))
    comparable = {h: comparable_facts(v["gpu_facts"], v.get("provenance")) for h, v in inputs.items()}
    return spread_points(points, comparable, host, mode)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def _accuracy_data(self, given):
        """The accuracy settings with ``data_src`` resolved to the controller file the stage will copy: the shipped
        GSM8K split when empty, a relative path found as ansible.builtin.copy finds its src."""
        src = given.get("data_src") or ""
        if not src:
            return dict(given, data_src=SHIPPED_GSM8K)
        src = os.path.expanduser(str(src))
        if not os.path.isabs(src):
            try:
                src = self._find_needle("files", src)
            except AnsibleError:
                raise plan_checks.PlanError(
                    "sglang_bench_accuracy_data_src=%s is not found on the controller (looked for it as "
                    "ansible.builtin.copy does, under the playbook's files/ and folder): give its absolute path, or "
                    "leave it empty for the shipped data/gsm8k/test.jsonl" % given.get("data_src")) from None
        return dict(given, data_src=src)

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        params = action_args.validated("sweep_plan", ARGUMENT_SPEC, self._task.args)
        if params.get("nodes_group") and params.get("node_inputs") is None:
            task_vars = task_vars or {}
            params["node_inputs"] = nodes.inputs_from_vars(
                params["nodes_group"], task_vars.get("hostvars") or {}, task_vars.get("groups") or {},
                task_vars.get("ansible_play_hosts") or [], params.get("host") or task_vars.get("inventory_hostname"),
                (task_vars.get(nodes.PORT_VAR) if task_vars.get(nodes.PORT_VAR) is not None else nodes.DEFAULT_PORT))
        try:
            params["accuracy"] = self._accuracy_data(params.get("accuracy") or {})
            sweep = plan(params)
        except plan_checks.PlanError as exc:
            return {"failed": True, "changed": False, "msg": "sweep refused before any point ran: %s" % exc}
        for warning in sweep["warnings"]:
            self._display.warning(warning)
        if sweep.get("matrix"):
            return {"changed": False, "moesweep_sweep": sweep, "ansible_facts": {"moesweep_sweep": sweep},
                    "msg": "\n".join(["sweep %s -> %s" % (sweep["sweep_id"], sweep["dir"])] + sweep["matrix"]["lines"])}
        return {"changed": False, "moesweep_sweep": sweep, "ansible_facts": {"moesweep_sweep": sweep},
                "msg": "sweep %s: %d point(s) %s -> %s" % (sweep["sweep_id"], len(sweep["points"]),
                                                           ", ".join(sweep["points"]), sweep["dir"])}
