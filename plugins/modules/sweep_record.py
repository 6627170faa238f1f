#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
# This is an action-only module: the code is plugins/action/sweep_record.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sweep_record
short_description: The bookkeeping of a sweep point - start, resume check, record, restore
description:
  - Runs on the controller (and collects the point's artifacts from the host with M(moesweep.sweep.point_artifacts)).
    It writes nothing itself - the aggregate callback C(moesweep.sweep.results), the one writer of results,
    writes what it returns.
  - O(state=start) marks a point as started (the callback writes an in-flight marker, so a point a lost controller
    never finished is recorded C(interrupted) by the next run).
  - O(state=stop_check) fails when the sweep was asked to stop after the current step (a C(.stop) file in the sweep's
    directory, which C(moesweep sweep) writes on a first Ctrl-C); the point is then recorded C(interrupted), and
    O(state=start) answers RV(stopped=true) for the points after it.
  - O(state=previous) says whether the server the host runs before the sweep is to be stopped as soon as its state
    was read (RV(stop_early) - the sweep's first point on this host starts its own server anyway; never in check
    mode). It stops nothing - the playbook does, with the server role's C(stop) entry point.
  - O(state=resume) computes the point's configuration hash (RV(config_hash) - launch, benchmark settings, stack
    lock) and answers whether a passing record with that hash exists (RV(skip) - then the point is skipped, unless
    the sweep's C(rerun)); that record is returned again (RV(moesweep_record), with C(resumed)) for the callback to
    write as the point's latest, so the summary, the restore and the exit status read the configuration asked for.
    Otherwise, unless the sweep's C(measure_equivalent), it looks for a point measured in this sweep on this host
    that runs the same kernels under the same benchmark settings and stack (C(plugins/plugin_utils/equivalence.py),
    from O(launch) and O(preflight)); the point is then skipped too, RV(same_as) names that point with the evidence,
    and RV(moesweep_record) is the point's record standing on that one's figures.
  - O(state=start) answers RV(stopped=true) too when a record of the sweep could not be written (it was kept aside,
    see the C(moesweep.sweep.results) callback) - no point runs that could not be recorded. Resume and the restore
    read kept records as well as C(points.jsonl).
  - O(state=point) builds the point's record (RV(moesweep_record), see docs/results.md) from what each stage
    returned or the task that failed, with secrets redacted, and returns it with its RV(artifacts).
    It says whether the point's server is to be stopped at once, without waiting (RV(stop_early)) - when the next
    point of this host starts its own server anyway (the plan's C(starts_server), no passing record that resume
    could skip it for, no request to stop, one host, a restore policy other than V(none)) - its drain then overlaps
    the next point's preflight and unit - or, at the host's last point, when the restore puts back another point
    (restore=best, this record counted). It stops nothing - the playbook does, with the server role's C(stop) entry
    point. The decision is C(plugins/plugin_utils/schedule.py).
  - O(state=restore_plan) picks the configuration to leave the host on (RV(choice)), and says whether the server
    that runs now is to be stopped first (RV(stop_early) - the restore puts back another point than
    O(running_point)) or only judged (RV(keep_running) - the best point is O(running_point)); O(state=restore)
    records that step with its readiness.
  - O(state=interconnect) without O(interconnect) answers whether the TP group's all-reduce was measured on the host
    under the NCCL environment and TP size of O(launch) (RV(found), RV(measurement) - this run's O(measured), else
    C(interconnect.jsonl) in the sweep's directory, also when the sweep reruns its points); with O(interconnect) (the result of
    M(moesweep.sweep.interconnect_facts)) it returns that measurement's record, which the callback appends to
    C(interconnect.jsonl).
  - O(state=verify) fails when a record of this run (O(written)) did not reach C(points.jsonl) - kept aside (their
    paths named in RV(moesweep_unrecorded)) or written nowhere - so a sweep that could not record never ends with
    success.
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.ACTION
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  state:
    description: What to do.
    type: str
    required: true
    choices: [start, previous, resume, stop_check, point, restore_plan, restore, interconnect, verify]
  sweep:
    description: The plan from M(moesweep.sweep.sweep_plan).
    type: dict
    required: true
  point:
    description: The point's name.
    type: str
  started:
    description: When the point started (ISO time, RV(started) of O(state=start)).
    type: str
  started_at:
    description: When the point started (seconds since the epoch, RV(started_at) of O(state=start)).
    type: float
  config_hash:
    description: The point's configuration hash (RV(config_hash) of O(state=resume)).
    type: str
  launch_hash:
    description: The launch's hash (RV(moesweep.sweep.sglang_preflight#module:launch.launch_hash)).
    type: str
  bench_settings:
    description: The benchmark settings.
    type: dict
    default: {}
  lock_sha256:
    description: The sha256 of the host's stack lock (provenance).
    type: str
  facts:
    description: The host's GPU facts.
    type: dict
    default: {}
  provenance:
    description: The host's provenance record.
    type: dict
    default: {}
  preflight:
    description: The preflight's result (O(state=resume) and O(state=point)).
    type: dict
    default: {}
  launch:
    description: The planned launch (O(state=resume) and O(state=point)).
    type: dict
    default: {}
  readiness:
    description: The readiness result.
    type: dict
    default: {}
  smoke:
    description: The smoke check's result.
    type: dict
    default: {}
  accuracy:
    description: The accuracy stage's result (M(moesweep.sweep.sglang_accuracy)).
    type: dict
    default: {}
  benchmark:
    description: The benchmark's result.
    type: dict
    default: {}
  failed_task:
    description: Name of the task that ended the point (in a rescue).
    type: str
  failed_action:
    description: Module or action of that task.
    type: str
  failed_result:
    description: Its result.
    type: dict
    default: {}
  interrupted:
    description: The point was stopped on request (a stop file) rather than by a failure.
    type: bool
    default: false
  files:
    description: Artifact name to path on the host.
    type: dict
    default: {}
  env_files:
    description: Artifact names that are environment files (secret values redacted on the host).
    type: list
    elements: str
    default: []
  invocation_id:
    description: The server run whose journal is an artifact.
    type: str
    default: ""
  previous:
    description: What the host ran before the sweep (for O(state=restore_plan)).
    type: dict
    default: {}
  choice:
    description: The restore choice (RV(choice) of O(state=restore_plan), for O(state=restore)).
    type: dict
    default: {}
  record_host:
    description:
      - The host the record is under (default - the host running the task). A node group's points and restores are
        one record each, under its rank 0, written by one rank; resume and the restore choice read that host's
        records.
    type: str
  nodes:
    description: The node group plan (M(moesweep.sweep.sglang_preflight)'s C(nodes)), kept in the record's C(nodes).
    type: dict
    default: {}
  recorder:
    description:
      - For O(state=resume) - whether this host writes the point's records (a node group's ranks other than its
        recorder do not), so a skipped point's record is written again once.
    type: bool
    default: true
  written:
    description:
      - For O(state=verify) - the records of this run (C(kind), C(point), C(finished) of each), each of which must be
        in C(points.jsonl).
    type: list
    elements: dict
    default: []
  running_point:
    description: For O(state=restore_plan) - the point whose unit the host has now (empty - none or unknown).
    type: str
    default: ""
  running_stopped:
    description:
      - For O(state=restore_plan) - the server of O(running_point) was already stopped when that point ended
        (RV(stop_early) of its record), so the restore neither stops it again nor keeps it running.
    type: bool
    default: false
  interconnect:
    description:
      - For O(state=interconnect) - a measurement of M(moesweep.sweep.interconnect_facts) to record; for O(state=point)
        - the host's measurement under the point's NCCL environment (RV(measurement)), from which each benchmark level
        gets its all-reduce share of the decode step and, where it dominates, the verdict C(interconnect_bound).
    type: dict
    default: {}
  measured:
    description: For O(state=interconnect) - this run's measurements by key (RV(key)), looked at before the results.
    type: dict
    default: {}
  model:
    description:
      - For O(state=point) - the model the point served, recorded as its C(model) key - M(moesweep.sweep.model_stage)'s
        C(repo_id), C(revision) (the commit hash), C(local_path), C(bytes) and C(downloaded), or only C(local_path) for
        a pre-staged directory.
    type: dict
    default: {}
attributes:
  action:
    support: full
    details: The bookkeeping runs on the controller; only O(state=point) contacts the host, to read the artifacts.
  check_mode:
    support: full
    details: In check mode nothing is collected from the host; the callback writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details:
      - O(state=start), O(state=previous), O(state=resume), O(state=stop_check) and O(state=restore_plan) only read.
      - O(state=point) and O(state=restore) return a record the results callback appends, so running either twice
        records the step twice (a resumed sweep skips passing points through O(state=resume) instead).
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Record the point
  moesweep.sweep.sweep_record:
    state: point
    sweep: "{{ moesweep_sweep }}"
    point: flashinfer_cutlass
    readiness: "{{ sglang_server_result.readiness }}"
"""

RETURN = r"""
moesweep_sweep:
  description: The sweep's plan (O(sweep)), by which the callback finds the sweep's directory.
  returned: always
  type: dict
moesweep_host:
  description: The host the step is about (its inventory name).
  returned: always
  type: str
  sample: sim-h1
moesweep_event:
  description: What the callback does with the result - V(point_started), V(resume), V(record), V(interconnect).
  returned: when state is start (unless stopped), resume, point, restore or interconnect (with O(interconnect))
  type: str
  choices: [point_started, resume, record, interconnect]
point:
  description: The point's name.
  returned: when state is start or resume
  type: str
  sample: flashinfer_cutlass
started:
  description: When the point started (ISO 8601).
  returned: when state is start, unless stopped
  type: str
started_at:
  description: When the point started (seconds since the epoch).
  returned: when state is start, unless stopped
  type: float
simulated:
  description:
    - For O(state=start) - the host is simulated (C(moesweep_simulated)); the records the callback writes itself for the
      point (C(interrupted), C(unreachable)) carry it.
  returned: when state is start, unless stopped
  type: bool
stopped:
  description: For O(state=start) - the sweep was asked to stop, so this point does not run.
  returned: when state is start
  type: bool
  sample: false
moesweep_stop:
  description: For O(state=stop_check) - the sweep was asked to stop after this step (the task fails).
  returned: when the sweep was asked to stop
  type: bool
  sample: true
moesweep_record:
  description:
    - The record (docs/results.md), for O(state=point) and O(state=restore); for O(state=resume), the passing record
      the skipped point stands on (with C(resumed)).
  returned: when state is point or restore, or resume skips the point on its recorder
  type: dict
key:
  description: For O(state=interconnect) - the NCCL environment and TP size hashed, what a measurement is recorded under.
  returned: when state is interconnect
  type: str
  sample: 3f2a9c1d0b7e
found:
  description: For O(state=interconnect) without O(interconnect) - a measurement under RV(key) exists.
  returned: when state is interconnect
  type: bool
measurement:
  description: For O(state=interconnect) - the measurement found, or the record of the one given.
  returned: when state is interconnect
  type: dict
moesweep_unrecorded:
  description: For O(state=verify) - the paths of this host's records that were kept aside (the task fails).
  returned: when state is verify and a record did not reach points.jsonl
  type: list
  elements: str
artifacts:
  description: Artifact name to text, written beside the record.
  returned: when state is point or restore
  type: dict
skip:
  description:
    - For O(state=resume) - whether a passing record with this configuration exists, or the point runs the kernels
      of a point measured in this sweep (RV(same_as)).
  returned: when state is resume
  type: bool
same_as:
  description:
    - For O(state=resume) - the measured point this one stands on (C(point), C(backend), C(finished),
      C(config_hash), C(moe_runner), C(kernel_path), C(resolution), C(evidence)).
  returned: when state is resume and the point runs the kernels of a point measured in this sweep
  type: dict
config_hash:
  description: For O(state=resume) - the configuration hash.
  returned: when state is resume
  type: str
previous_record:
  description: For O(state=resume) - the passing record found (C(finished), C(status), C(backend), C(config_hash)).
  returned: when state is resume and skip is true
  type: dict
choice:
  description: For O(state=restore_plan) - C(action) (V(point), V(previous), V(none)), C(point), C(reason).
  returned: when state is restore_plan
  type: dict
stop_early:
  description:
    - For O(state=point) - stop the point's server now, without waiting; the next point of this host starts its own, or
      this is the host's last point and the restore puts back another one (restore=best).
    - For O(state=previous) - stop the server that runs before the sweep once its state was read.
    - For O(state=restore_plan) - stop the running server before the restore's preflight and unit.
  returned: when state is point, previous or restore_plan
  type: bool
  sample: true
stop_reason:
  description: For O(state=point) and O(state=previous) - why the server is to be stopped now, or why not.
  returned: when state is point or previous
  type: str
  sample: "the next point triton starts its own server: this one is stopped now, its drain overlapping"
keep_running:
  description:
    - For O(state=restore_plan) - the best point is O(running_point), whose unit this run applied on the host (one
      host, not a node group), so the restore judges the server that runs instead of planning and rendering it again,
      and restarts it through the server role only when it is not serving.
  returned: when state is restore_plan
  type: bool
  sample: true
msg:
  description: What the step did, in one line.
  returned: always, except for stop_check when the sweep goes on
  type: str
  sample: "point flashinfer_cutlass: to run"
"""
