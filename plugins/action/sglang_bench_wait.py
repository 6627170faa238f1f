# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller side of sglang_bench_wait: at every call (every ``until`` retry) it looks for the sweep's stop file
on the controller and, when it is there, has the module ask the benchmark to stop after the level that runs.

Documentation lives in plugins/modules/sglang_bench_wait.py; the module validates the arguments."""

import os

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        stop_file = args.get("stop_file")
        if stop_file and os.path.exists(os.path.expanduser(str(stop_file))):
            args["stop"] = True
        result.update(self._execute_module(module_name="moesweep.sweep.sglang_bench_wait", module_args=args,
                                           task_vars=task_vars))
        return result
