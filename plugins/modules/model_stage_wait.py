#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_stage_wait
short_description: Wait for an async M(moesweep.sweep.model_stage) job, reporting the download's progress
version_added: "0.1.0"
description:
  - The poller of a model staging run as an Ansible async job (C(async), C(poll=0)), as
    M(ansible.builtin.async_status) is for any job, and used the same way (C(until) RV(finished), C(delay=0)). One
    call returns as soon as the job finished, or after O(wait) seconds with the download's progress - the bytes of
    the model's files on the disk of O(local_dir) against the total the job planned, the rate over the call's
    O(wait) seconds and the time left at that rate - so every C(until) retry tells where the download is (a
    C(v2_runner_retry) callback, an ansible-runner C(runner_retry) event).
  - The bytes on the disk are the finished files at their place plus the C(.incomplete) files huggingface_hub is
    still receiving under C(<local_dir>/.cache/huggingface/download/).
  - When the job finished it returns the job's result (M(moesweep.sweep.model_stage)'s return values) with
    RV(finished=true), and removes the job's results file as C(async_status mode=cleanup) does; the task fails when
    the job failed, with the job's message and its result's keys. A job whose process is gone without a result (the
    host rebooted, it was killed) fails with that said.
  - A plan an earlier, interrupted stage left in O(local_dir) is never reported as this job's (it predates the job).
  - Asked to stop (O(stop), or the controller file O(stop_file) exists, as when a sweep is asked to stop after its step
    by Ctrl-C, SIGTERM or the API), it ends the job that still runs - its process group is sent SIGTERM, then SIGKILL
    after O(stop_grace) seconds - removes the job's results file, and fails with RV(moesweep_stop=true); the bytes
    received stay on the disk (C(.incomplete) files huggingface_hub resumes), so the next stage goes on from them,
    and nothing after the staging (the point's unit, a restart) runs. A job that has not yet planned its download
    (the hub's listing, seconds) is ended as soon as it has; a job that already finished is reported as it
    finished, with the stop left to the sweep's next step.
options:
  results_file:
    description:
      - The job's results file (C(results_file) of the async task's registered result; C(~/.ansible_async/<jid>)
        of the remote user unless C(ANSIBLE_ASYNC_DIR) says otherwise).
    type: path
    required: true
  local_dir:
    description: The job's O(moesweep.sweep.model_stage#module:local_dir).
    type: path
    required: true
  wait:
    description: Longest time one call waits for the job to finish, in seconds (then it returns its progress).
    type: float
    default: 10
  stop:
    description: End the job if it still runs (see the description), and fail with RV(moesweep_stop=true).
    type: bool
    default: false
  stop_file:
    description:
      - A file on the controller whose presence means O(stop=true) (a sweep's C(stop_file), which C(moesweep.api)
        and C(moesweep sweep) create when asked to stop after the current step). Read by the action plugin at every
        call; the module itself ignores it.
    type: path
  stop_grace:
    description: Seconds the job's processes get to exit after SIGTERM before SIGKILL.
    type: float
    default: 10
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.ACTION
attributes:
  action:
    support: full
  check_mode:
    support: full
    details: It only reads the job's files; in check mode it reports their state once, without waiting, and never
      ends a job.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - The measure, the rate and the line shown are C(plugins/module_utils/stage_progress.py).
seealso:
  - module: moesweep.sweep.model_stage
  - module: ansible.builtin.async_status
"""

EXAMPLES = r"""
- name: Stage the model as an async job
  moesweep.sweep.model_stage:
    repo_id: lukealonso/GLM-5-NVFP4
    local_dir: /var/lib/sglang/models/GLM-5-NVFP4
    python: /opt/moesweep/venvs/sglang/bin/python
  async: 86400
  poll: 0
  changed_when: false
  register: staging

- name: Wait for it, every retry a line with the bytes, the rate and the time left
  moesweep.sweep.model_stage_wait:
    results_file: "{{ staging.results_file }}"
    local_dir: /var/lib/sglang/models/GLM-5-NVFP4
    wait: 10
  register: staged
  until: staged.finished
  retries: 8640
  delay: 0
"""

RETURN = r"""
moesweep_stop:
  description:
    - True when the call ended a running job because it was asked to stop (the task then fails). The plan's
      C(repo_id) and C(revision), the O(local_dir) as C(local_path) and C(downloaded=false) come with it, what a
      record keeps of the model.
  returned: when asked to stop while the job ran
  type: bool
  sample: true
finished:
  description: Whether the job finished; its result's keys (see M(moesweep.sweep.model_stage)) are then returned too.
  returned: always
  type: bool
  sample: false
progress:
  description: Where the download is; null once the job finished before it planned a download (nothing to move).
  returned: always
  type: dict
  contains:
    bytes_done:
      description: Bytes of the model's files on the disk (null before the job planned its download).
      type: int
      sample: 120300000000
    bytes_total:
      description: Bytes of the files the job stages.
      type: int
      sample: 453000000000
    rate_bytes_s:
      description: Bytes per second over the call's O(wait) seconds (since the download began, for a shorter call).
      type: float
      sample: 210000000.0
    eta_s:
      description: Seconds left at that rate (null when it cannot be told).
      type: float
      sample: 1585.7
    msg:
      description: The progress in one line, as the stdout callback C(moesweep.sweep.quiet_polls) shows it.
      type: str
      sample: "lukealonso/GLM-5-NVFP4: 120.3 of 453.0 GB, 210.0 MB/s, about 26 min left"
"""

import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import stage_progress
from ansible_collections.moesweep.sweep.plugins.module_utils.async_job import alive, finished, job_result, read_text

POLL_S = 0.1
# A staging process that is gone and wrote no result: async_wrapper writes one within moments of its exit.
GONE_GRACE_S = 5.0


def end_job(pid, grace, sleep=time.sleep, kill=os.killpg, getpgid=os.getpgid):
    """End the async job whose staging process is ``pid``: its process group (async_wrapper's job, the module and
    the download it runs) gets SIGTERM, then SIGKILL after ``grace`` seconds if one is still there. Never this
    process's own group. Returns what was done, in words."""
    try:
        group = getpgid(int(pid))
    except (OSError, TypeError, ValueError):
        return "the staging process (pid %s) had already exited" % pid
    if group == os.getpgrp():
        kill = None  # never this module's own group: the process alone
    send = (lambda sig: kill(group, sig)) if kill else (lambda sig: os.kill(int(pid), sig))
    try:
        send(signal.SIGTERM)
    except OSError:
        return "the staging process (pid %s) had already exited" % pid
    deadline = time.monotonic() + max(0.0, grace)
    while time.monotonic() < deadline:
        if not alive(pid):
            return "the staging job (pid %s) ended on SIGTERM" % pid
        sleep(POLL_S)
    try:
        send(signal.SIGKILL)
    except OSError:
        return "the staging job (pid %s) ended on SIGTERM" % pid
    return "the staging job (pid %s) was killed after %g s" % (pid, grace)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_file=dict(type="path", required=True),
            local_dir=dict(type="path", required=True),
            wait=dict(type="float", default=10.0),
            stop=dict(type="bool", default=False),
            stop_file=dict(type="path"),
            stop_grace=dict(type="float", default=10.0),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def fail(msg, progress=None):
        module.fail_json(msg="model_stage_wait: %s" % msg, finished=True, progress=progress)

    if p["wait"] < 0:
        fail("wait must be >= 0 seconds")
    try:
        job_started = os.stat(p["results_file"]).st_mtime
    except OSError:
        fail("no async job results file %s: pass the results_file the async model_stage task registered"
             % p["results_file"])
    deadline = time.monotonic() + (0 if module.check_mode else p["wait"])

    def sample(doc):
        return time.time(), stage_progress.measure(p["local_dir"], doc["files"])

    def progress(doc, first):
        """The progress now, its rate over the call's window from ``first``; None before the job planned."""
        if doc is None:
            return None
        now, now_bytes = sample(doc)
        return stage_progress.progress(doc, (first, (now, now_bytes)), now_bytes, now)

    first = None  # the call's first sample of the bytes on the disk (time, bytes)
    doc = None
    gone_since = None
    while True:
        final = job_result(read_text(p["results_file"]))
        if doc is None:
            plan = stage_progress.read_plan(p["local_dir"])
            doc = plan if stage_progress.of_job(plan, job_started) else None
            if doc is not None:
                first = sample(doc)
        if final is not None:
            out, failed = finished(final, p["results_file"], "staging", module.check_mode,
                                   progress=progress(doc, first))
            if failed:
                module.fail_json(**out)
            module.exit_json(**out)
        # the job's pid comes with its plan (async_wrapper's results file names none), written seconds after the
        # job starts, once the hub has listed the files: until then the stop waits for it, poll by poll
        if p["stop"] and not module.check_mode and doc is not None:
            how = end_job(doc.get("pid"), p["stop_grace"])
            try:
                os.unlink(p["results_file"])
            except OSError:
                pass
            module.fail_json(
                msg="model_stage_wait: the sweep was asked to stop: %s; the bytes received are kept in %s and the "
                    "next stage resumes them; nothing after the staging ran" % (how, p["local_dir"]),
                finished=True, moesweep_stop=True, progress=progress(doc, first), repo_id=doc.get("repo_id"),
                revision=doc.get("revision"), local_path=p["local_dir"], downloaded=False)
        if doc is not None and not alive(doc.get("pid")):
            gone_since = gone_since or time.monotonic()
            if time.monotonic() - gone_since > GONE_GRACE_S:
                fail("the staging process (pid %s) is gone and its job wrote no result (the host rebooted or the "
                     "process was killed); what arrived is kept, the next stage resumes it" % doc.get("pid"),
                     progress=progress(doc, first))
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    module.exit_json(changed=False, finished=False, progress=progress(doc, first) or stage_progress.planning())


if __name__ == "__main__":
    main()
