#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_bench_wait
short_description: Follow an async M(moesweep.sweep.sglang_bench) job level by level, then return its result
version_added: "0.1.0"
description:
  - The poller of a benchmark run as an Ansible async job (C(async), C(poll=0)), as M(ansible.builtin.async_status)
    is for any job, and used the same way (C(until) RV(finished), C(delay=0)). It long-polls - it returns as soon as
    the benchmark's progress document (C(progress.json) in O(output_dir)) has a version this task has not returned,
    or the job finished, or O(wait) seconds passed - so the controller sees each level start and finish while the
    benchmark runs (every C(until) retry is a C(v2_runner_retry) callback, an ansible-runner C(runner_retry) event).
  - When the job finished it returns the job's result (the module's own return values, see
    M(moesweep.sweep.sglang_bench)) with RV(finished=true), and removes the job's results file as
    C(async_status mode=cleanup) does (each benchmark's would otherwise stay in the async directory); the task
    fails when the job failed, with the job's message. A job whose benchmark process is gone without a result (the host rebooted, it was killed) fails
    with that said.
  - Every call touches C(controller.alive) in O(output_dir) - a job started with C(controller_timeout) stops itself
    when these calls stop coming (its controller is gone).
  - Progress left in O(output_dir) by an earlier run is never reported as this job's (it predates the job).
  - Asked to stop (O(stop), or the controller file O(stop_file) exists), it asks the benchmark to stop after the
    level that runs (a C(stop) file in O(output_dir)); the job then fails with C(state=stopped) and
    C(moesweep_stop=true), its finished levels kept. The action plugin checks O(stop_file) at every C(until) retry.
options:
  results_file:
    description: The job's results file (C(results_file) of the async task's registered result).
    type: path
    required: true
  output_dir:
    description: The benchmark's O(moesweep.sweep.sglang_bench#module:output_dir).
    type: path
    required: true
  job_key:
    description:
      - The job's O(moesweep.sweep.sglang_bench#module:job_key). Only a progress document that carries it is the
        job's (reported, and its gate opened with O(go=true)); without it, any document that started after the job's results
        file was first written is, a later job's in the same O(output_dir) too.
    type: str
  wait:
    description: Longest time one call waits for news, in seconds (then it returns RV(finished=false) unchanged).
    type: float
    default: 30
  stop:
    description:
      - Ask the benchmark to stop after the level that runs; a gated job (O(moesweep.sweep.sglang_bench#module:gated))
        that waits at its gate ends without a request.
    type: bool
    default: false
  go:
    description:
      - Open a gated job's gate (O(moesweep.sweep.sglang_bench#module:gated)) - a C(go) file in O(output_dir),
        written once the job's own progress document is there (the job clears an earlier run's files before it
        writes that, so the opening is never lost to that cleanup). Harmless for a job that is not gated.
    type: bool
    default: false
  stop_file:
    description:
      - A file on the controller whose presence means O(stop=true) (a sweep's C(stop_file), which
        C(moesweep.api) creates when asked to stop after the current step). Read by the action plugin; the module
        on the target ignores it.
    type: path
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
    details: It only reads the job's files; in check mode it reports their state once, without waiting.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
notes:
  - It remembers the last version it returned in C(progress.json.seen) beside the document (Ansible templates a
    task's arguments once, not at every C(until) retry).
seealso:
  - module: moesweep.sweep.sglang_bench
  - module: ansible.builtin.async_status
"""

EXAMPLES = r"""
- name: Benchmark as an async job
  moesweep.sweep.sglang_bench:
    port: 30000
    output_dir: /var/lib/moesweep/bench/triton
  async: 15000
  poll: 0
  register: bench_job

- name: Wait for its levels, each start and end a retry the controller sees
  moesweep.sweep.sglang_bench_wait:
    results_file: "{{ bench_job.results_file }}"
    output_dir: /var/lib/moesweep/bench/triton
  register: bench
  until: bench.finished
  retries: 1000
  delay: 0
"""

RETURN = r"""
finished:
  description: Whether the job finished; its result's keys are then returned too.
  returned: always
  type: bool
  sample: false
progress:
  description:
    - The job's progress document, null before it wrote one - C(version), C(pid), C(started), C(job_key) (when the
      job was given one) and C(levels), one entry per level in order with C(concurrency), C(num_prompts), C(state) (V(pending), V(running), V(done),
      V(failed), V(reused)), and once it ended C(ok), C(figures) (output / total / request throughput, median and
      p99 TTFT, median ITL, duration, completed), C(t_start), C(t_end), C(error).
  returned: always
  type: dict
stop_requested:
  description: Whether this call asked the benchmark to stop after the level that runs.
  returned: always
  type: bool
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_progress
from ansible_collections.moesweep.sweep.plugins.module_utils.async_job import alive, finished, job_result, read_text
from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until

POLL_S = 0.05
# A benchmark process that is gone and wrote no result: the wrapper writes one within moments of its exit.
GONE_GRACE_S = 5.0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_file=dict(type="path", required=True),
            output_dir=dict(type="path", required=True),
            job_key=dict(type="str", no_log=False),
            wait=dict(type="float", default=30.0),
            stop=dict(type="bool", default=False),
            go=dict(type="bool", default=False),
            stop_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    os.umask(0o077)  # what it writes into the benchmark's output directory (the stop and seen files) is 0600

    def fail(msg, finished=True, progress=None, stop_requested=False):
        module.fail_json(msg="sglang_bench_wait: %s" % msg, finished=finished, progress=progress,
                         stop_requested=stop_requested)

    if p["wait"] < 0:
        fail("wait must be >= 0 seconds")
    try:
        job_started = os.stat(p["results_file"]).st_mtime
    except OSError:
        fail("no async job results file %s: pass the results_file the async sglang_bench task registered"
             % p["results_file"])
    bench_dir = bench_progress.BenchDir(p["output_dir"])
    seen = bench_dir.read_seen()
    asked = bool(p["stop"]) and not module.check_mode
    if asked and job_result(read_text(p["results_file"])) is None:
        try:
            bench_dir.ask_stop(time.time())
        except (IOError, OSError) as exc:
            fail("cannot ask the benchmark to stop (%s)" % exc, finished=False)
    if not module.check_mode:
        try:
            bench_dir.beat(time.time())  # the job stops itself when these stop coming
        except (IOError, OSError):
            pass
    found = {"doc": None, "gone_since": None}

    def look():
        """One look at the job: ``("finished", its result)``, ``("news", None)`` (a version not returned yet),
        ``("gone", None)`` (its process ended without a result), or None (nothing to return yet)."""
        final = job_result(read_text(p["results_file"]))
        mine = bench_dir.read_progress()
        if bench_progress.of_job(mine, job_started, p["job_key"]):
            found["doc"] = mine
            if p["go"] and not module.check_mode and not asked:
                try:
                    bench_dir.open_gate(p["results_file"], time.time(), key=p["job_key"])
                except (IOError, OSError) as exc:
                    fail("cannot open the benchmark's gate (%s)" % exc, finished=False, progress=mine)
        doc = found["doc"]
        if final is not None:
            return "finished", final
        if doc is not None and bench_progress.newer(doc, seen):
            return "news", None
        if doc is not None and not alive(doc.get("pid")):
            found["gone_since"] = found["gone_since"] or time.monotonic()
            if time.monotonic() - found["gone_since"] > GONE_GRACE_S:
                return "gone", None
        return None

    _told, said, _elapsed = poll_until(look, lambda s: s is not None, 0 if module.check_mode else p["wait"], POLL_S)
    doc = found["doc"]
    kind, final = said or (None, None)
    if kind == "finished":
        out, failed = finished(final, p["results_file"], "benchmark", module.check_mode, progress=doc,
                               stop_requested=asked)
        if failed:
            module.fail_json(**out)
        module.exit_json(**out)
    if kind == "gone":
        fail("the benchmark (pid %s) is gone and its job wrote no result (the host rebooted or the process "
             "was killed)" % doc.get("pid"), progress=doc, stop_requested=asked)
    if kind == "news" and not module.check_mode:
        try:
            bench_dir.write_seen(doc)
        except (IOError, OSError):
            pass  # then the next call returns the same version again: nothing is lost
    module.exit_json(changed=False, finished=False, progress=doc, stop_requested=asked)


if __name__ == "__main__":
    main()
