# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller side of sglang_bench_wait: at every call (every ``until`` retry) it looks for the sweep's stop file
on the controller (``plugin_utils/stop_file.py``) and, when it is there, has the module ask the benchmark to stop
after the level that runs.

Documentation lives in plugins/modules/sglang_bench_wait.py; the module validates the arguments."""

from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import stop_file


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result.update(self._execute_module(module_name="moesweep.sweep.sglang_bench_wait",
                                           module_args=stop_file.requested(self._task.args), task_vars=task_vars))
        return result
