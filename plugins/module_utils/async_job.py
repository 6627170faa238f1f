# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Reading an Ansible async job from its host: the job's results file and whether a process still runs. The waits
that follow moesweep's async jobs (``sglang_bench_wait``, ``model_stage_wait``) read them the same way."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os


def read_text(path):
    """A file's text, or None when it cannot be read (not written yet, removed)."""
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def job_result(text):
    """The job's final result, or None while it runs: async_wrapper first writes ``{"started": ...}``, and
    ansible-core's async_status treats a result without ``started`` as finished and an unreadable one as running."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or "started" in data:
        return None
    return data


def alive(pid):
    """Whether a process with this pid runs (signal 0), a zombie (exited, not yet reaped by its parent) not
    counted: it answers signal 0 but runs nothing."""
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    try:
        with open("/proc/%d/stat" % int(pid)) as fh:
            # pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ')'
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (IOError, OSError, IndexError):
        return True


def finished(final, results_file, what, check_mode=False, **fields):
    """What a wait returns for a job that finished: its result (less ansible's ``invocation``) with ``finished`` and
    ``fields``, and whether the job failed (its ``msg`` then names it, ``what`` when it gave none). The results file
    is removed (not in check mode): ansible-core's async_status would, and nothing reads it again."""
    if not check_mode:
        try:
            os.unlink(results_file)
        except OSError:
            pass
    out = dict(final, finished=True, **fields)
    out.pop("invocation", None)
    failed = bool(out.pop("failed", False))
    if failed:
        out["msg"] = final.get("msg") or "the %s job failed" % what
    return out, failed
