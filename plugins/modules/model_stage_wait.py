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
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
attributes:
  check_mode:
    support: full
    details: It only reads the job's files; in check mode it reports their state once, without waiting.
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
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import stage_progress
from ansible_collections.moesweep.sweep.plugins.module_utils.async_job import alive, finished, job_result, read_text

POLL_S = 0.1
# A staging process that is gone and wrote no result: async_wrapper writes one within moments of its exit.
GONE_GRACE_S = 5.0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_file=dict(type="path", required=True),
            local_dir=dict(type="path", required=True),
            wait=dict(type="float", default=10.0),
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
