# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: one barrier of a node group (every rank's results judged together, the same verdict on every
rank). Documentation: plugins/modules/sglang_nodes.py (action-only module stub); the decisions are
plugins/plugin_utils/nodes.py."""

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import action_args, nodes

ARGUMENT_SPEC = dict(
    check=dict(type="str", required=True, choices=["ports", "restart", "released", "ready"]),
    nodes=dict(type="dict", required=True),
    point=dict(type="str"),
    unit=dict(type="str", default="sglang.service"),
    ready_var=dict(type="str", default="__sglang_server_ready"),
    started_vars=dict(type="list", elements="str", default=[]),
)

# The role's registered results each barrier reads on every rank (host variables of that rank).
PORTS_VARS = {"preflight": "__sglang_server_preflight", "server_port": "__sglang_server_port_owner",
              "dist_port": "__sglang_server_dist_port_owner", "provenance": "sglang_server_provenance"}
RESTART_VAR = "__sglang_server_node_state"
RELEASED_VAR = "__sglang_server_released"
STAGES = {"ports": "preflight", "restart": "restart", "released": "restart", "ready": "readiness"}


def rank_values(hostvars, hosts, var):
    """host -> the value of ``var`` on that rank ({} when unset or not templatable)."""
    out = {}
    for host in hosts:
        try:
            value = (hostvars.get(host) or {}).get(var)
        except Exception:  # noqa: BLE001 - an unset or broken variable of another rank reads as no result
            value = None
        out[host] = dict(value) if isinstance(value, dict) else ({} if value is None else value)
    return out


def judge(args, hostvars, host=None):
    """The barrier's result (a dict; ``failed`` when the point fails on every rank); ``host``: the rank running it."""
    plan = args["nodes"]
    for key in ("group", "hosts", "dist_init_addr", "dist_init_port", "addresses"):
        if key not in plan:
            raise AnsibleActionFail("sglang_nodes: nodes must be the node plan sglang_preflight returned (no %r)" % key)
    hosts = plan["hosts"]
    check = args["check"]
    out = {"changed": False, "check": check, "stage": STAGES[check], "group": plan["group"]}
    if check == "ports":
        got = {key: rank_values(hostvars, hosts, var) for key, var in PORTS_VARS.items()}
        refusal = nodes.check_ports(plan, got["preflight"], got["server_port"], got["dist_port"].get(hosts[0]),
                                    args["unit"], args.get("point"))
        ident = nodes.identity(plan, got["preflight"], got["provenance"])
        out.update(nodes=dict(plan, **ident))
        if refusal:
            out.update(failed=True, msg=refusal, verdict="unsupported")
        else:
            out["msg"] = "node group %s: every rank's preflight passed and every port is free" % plan["group"]
        return out
    if check == "restart":
        decision = nodes.check_restart(plan, rank_values(hostvars, hosts, RESTART_VAR))
        out.update(decision, msg="node group %s: %s" % (
            plan["group"], "restart every rank (%s)" % "; ".join(decision["reasons"]) if decision["restart"]
            else "every rank serves this configuration: nothing restarts"))
        return out
    if check == "released":
        problem = nodes.check_released(plan, rank_values(hostvars, hosts, RELEASED_VAR))
        if problem:
            out.update(failed=True, msg=problem)
        else:
            out["msg"] = "node group %s: every rank stopped and released its GPUs and port" % plan["group"]
        return out
    started = {}
    for var in args["started_vars"]:
        for rank_host, value in rank_values(hostvars, hosts, var).items():
            if isinstance(value, dict) and not value.get("skipped") and "started" in value:
                started[rank_host] = started.get(rank_host, False) or bool(value["started"])
    results = rank_values(hostvars, hosts, args["ready_var"])
    verdict = nodes.group_readiness(plan, results, started)
    # the journal of this rank's own run (what a record's artifacts keep from the rank that writes it)
    verdict["local_invocation_id"] = (results.get(host) or {}).get("invocation_id") if host in results else None
    out.update(verdict)
    out["readiness"] = {k: v for k, v in verdict.items() if k != "msg"}
    if verdict.get("state") != "ready":
        out["failed"] = True
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        params = action_args.validated("sglang_nodes", ARGUMENT_SPEC, self._task.args)
        task_vars = task_vars or {}
        return judge(params, task_vars.get("hostvars") or {},
                     task_vars.get("inventory_hostname"))
