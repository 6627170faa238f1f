# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side preflight: plan the launch once, validate it once, and refuse an incompatible sweep
point before any unit is touched.

Documentation lives in plugins/modules/sglang_preflight.py (action-only module stub)."""

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import action_args, nodes
from ansible_collections.moesweep.sweep.plugins.plugin_utils.preflight import run_preflight

ARGUMENT_SPEC = dict(
    backend=dict(type="raw", required=True),
    point=dict(type="str"),
    quantization=dict(type="str"),
    flags=dict(type="dict", default={}),
    version_flags=dict(type="dict", default={}),
    backends=dict(type="dict", default={}),
    extra_flags=dict(type="dict", default={}),
    sglang_version=dict(type="str"),
    provenance=dict(type="dict", default={}),
    command=dict(type="list", elements="str", default=[]),
    venv=dict(type="path"),
    environment=dict(type="dict", default={}),
    secret_environment_keys=dict(type="list", elements="str", default=[]),
    api_key_set=dict(type="bool", default=False),
    secret_config_path=dict(type="path"),
    log_filter_dir=dict(type="path"),
    home=dict(type="path"),
    cuda_home=dict(type="path"),
    gpu_facts=dict(type="dict"),
    model_config=dict(type="dict"),
    cuda_version=dict(type="str"),
    dry_run=dict(type="str", default="auto", choices=["auto", "controller", "host", "off"]),
    dry_run_timeout=dict(type="int", default=180),
    staged_model_path=dict(type="path"),
    force=dict(type="bool", default=False),
    kb_path=dict(type="path"),
    nodes_group=dict(type="str"),
    dist_init_port=dict(type="int", default=nodes.DEFAULT_PORT),
)


def node_inputs(args, task_vars, strategy):
    """This host's node group inputs from the task's variables (None when it serves alone)."""
    group = args.get("nodes_group")
    if not group:
        return None
    return nodes.inputs_from_vars(group, task_vars.get("hostvars") or {}, task_vars.get("groups") or {},
                                  task_vars.get("ansible_play_hosts") or [], task_vars.get("inventory_hostname"),
                                  args.get("dist_init_port"), strategy=strategy)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def _host_dry_run(self, module_args, task_vars):
        """The launch through the host's own sglang (the read-only ``sglang_dry_run`` module, run on the host)."""
        result = self._execute_module(module_name="moesweep.sweep.sglang_dry_run",
                                      module_args=dict(module_args, timeout=self._dry_run_timeout),
                                      task_vars=task_vars)
        if result.get("failed"):
            return {"verdict": "undecided", "where": "host",
                    "reason": "the host's dry run failed: %s" % (result.get("msg") or "no message")}
        return {k: v for k, v in result.items() if not k.startswith("_ansible") and k not in ("changed", "invocation")}

    def _host_file_exists(self, path, task_vars):
        """Whether ``path`` exists on the host (ansible.builtin.stat, read-only), or None when it cannot tell."""
        result = self._execute_module(module_name="ansible.builtin.stat",
                                      module_args={"path": path, "get_checksum": False}, task_vars=task_vars)
        stat = result.get("stat") if isinstance(result, dict) and not result.get("failed") else None
        return stat.get("exists") if isinstance(stat, dict) else None

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        args = action_args.validated("sglang_preflight", ARGUMENT_SPEC, self._task.args)
        if isinstance(args["backend"], (list, dict)):
            raise AnsibleActionFail(
                "sglang_preflight: backend must be one --moe-runner-backend name (a string), got a %s: %r; "
                "loop over the sweep points instead" % (type(args["backend"]).__name__, args["backend"])
            )
        task_vars = task_vars or {}
        host_facts = (task_vars.get("ansible_facts") or {}).get("moesweep_gpu")
        play = self._task.get_play() if hasattr(self._task, "get_play") else None
        strategy = getattr(play, "strategy", None)
        self._dry_run_timeout = args["dry_run_timeout"]
        result, failed = run_preflight(args, host_facts, node_inputs(args, task_vars,
                                                                     strategy if isinstance(strategy, str) else None),
                                       host_dry_run=lambda module_args: self._host_dry_run(module_args, task_vars),
                                       host_file_exists=lambda path: self._host_file_exists(path, task_vars))
        for warning in result["preflight_warnings"]:
            self._display.warning(warning)
        if failed:
            result["failed"] = True
        return result
