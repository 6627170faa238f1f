# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""ansible-core's default stdout callback, without a FAILED - RETRYING line for a poll of a job that still runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: quiet_polls
type: stdout
short_description: Ansible's default screen output, without FAILED - RETRYING for the polls of a running job
description:
  - ansible-core's C(default) stdout callback, unchanged except for one event. A task that follows a job with
    C(until) - moesweep's benchmark wait (M(moesweep.sweep.sglang_bench_wait), which answers at every level's start
    and end) and the stack install's C(async_status) - is retried at every poll, and the default callback prints each
    retry as C(FAILED - RETRYING), though nothing failed (a sweep printed 152 of them in a passing run).
  - Here a retry whose result says the job has not C(finished) yet, and did not fail, prints nothing below C(-vv),
    unless its result carries a line of progress, C(progress.msg) (the model staging's wait,
    M(moesweep.sweep.model_stage_wait), says the bytes, rate and time left of a download that takes hours), which is
    printed after the host's name instead; at C(-vv) and above, and for any other retry, the default callback's line is
    printed as before.
  - ansible-core has no setting for this (its default callback prints every retry, at every verbosity).
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - default_callback
  - result_format_callback
requirements:
  - set as stdout in configuration (the repository's ansible.cfg sets C(stdout_callback = moesweep.sweep.quiet_polls))
"""

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# The verbosity from which a poll's retry is shown again (the default callback adds the result there).
SHOWN_FROM_VERBOSITY = 2


def _result_dict(result):
    value = getattr(result, "result", None)
    if isinstance(value, dict):
        return value
    return getattr(result, "_result", {}) or {}


def is_running_poll(res):
    """Whether a retried task's result is a poll of a job that runs on (not finished, not failed)."""
    return "finished" in res and not res.get("finished") and not res.get("failed")


def progress_line(res):
    """The line a running poll's result asks to show (its ``progress.msg``), or None."""
    progress = res.get("progress")
    msg = progress.get("msg") if isinstance(progress, dict) else None
    return msg if isinstance(msg, str) and msg else None


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "moesweep.sweep.quiet_polls"

    def v2_runner_retry(self, result):
        res = _result_dict(result)
        if is_running_poll(res) and self._display.verbosity < SHOWN_FROM_VERBOSITY:
            line = progress_line(res)
            if line:
                self._display.display("%s: %s" % (self.host_label(result), line))
            return
        super(CallbackModule, self).v2_runner_retry(result)
