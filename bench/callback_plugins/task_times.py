# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Bench-only callback: where a playbook run's time goes, per host and task.

Enabled by bench/sweep_wall.py (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins, task_times added to
ANSIBLE_CALLBACKS_ENABLED). Writes one JSON line per task result to the file named by MOESWEEP_TASK_TIMES:
host, task name, action, the seconds from the task's start on that host to its result, and the gap since the
host's previous result (the strategy's and the controller's own time between tasks: includes, templating).
Not part of the collection: it measures, it records nothing of a sweep.
"""



DOCUMENTATION = r"""
---
name: task_times
type: aggregate
short_description: Per-host task durations and the gaps between tasks, as JSON lines (bench only)
description:
  - Writes a JSON line per task result to the file named by E(MOESWEEP_TASK_TIMES).
options: {}
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        path = os.environ.get("MOESWEEP_TASK_TIMES")
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._out = open(path, "a", encoding="utf-8") if path else None
        self._started = {}
        self._last = {}

    def v2_runner_on_start(self, host, task):
        self._started[(host.get_name(), task._uuid)] = time.time()

    def _done(self, result, status):
        if self._out is None:
            return
        host, task, now = result._host.get_name(), result._task, time.time()
        start = self._started.pop((host, task._uuid), now)
        gap = start - self._last[host] if host in self._last else 0.0
        self._last[host] = now
        self._out.write(json.dumps({"host": host, "task": task.get_name(), "action": task.action,
                                    "status": status, "start": round(start, 3), "seconds": round(now - start, 3),
                                    "gap": round(gap, 3)}) + "\n")
        self._out.flush()

    def v2_runner_on_ok(self, result):
        self._done(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._done(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._done(result, "unreachable")
