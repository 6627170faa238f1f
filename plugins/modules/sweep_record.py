# Copyright: moesweep developers
# Apache License 2.0
# This is an action-only module: the code is plugins/action/sweep_record.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sweep_record
short_description: The bookkeeping of a sweep point - start, resume check, record, restore
description:
  - Runs on the controller (and collects the point's artifacts from the host with M(moesweep.sweep.point_artifacts)).
    It writes nothing itself - the aggregate callback C(moesweep.sweep.results), the one writer of results,
    writes what it returns.
  - V(start) marks a point as started (the callback writes an in-flight marker, so a point a lost controller
    never finished is recorded C(interrupted) by the next run).
  - V(stop_check) fails when the sweep was asked to stop after the current step (a C(.stop) file in the sweep's
    directory, which C(moesweep sweep) writes on a first Ctrl-C); the point is then recorded C(interrupted), and
    V(start) answers C(stopped) for the points after it.
  - V(resume) computes the point's configuration hash (launch, benchmark settings, stack lock) and answers
    whether a passing record with that hash exists (then the point is skipped, unless the sweep's C(rerun)).
  - V(point) builds the point's record (docs/results.md) from what each stage returned or the task that failed,
    with secrets redacted, and returns it with its artifacts.
  - V(restore_plan) picks the configuration to leave the host on; V(restore) records that step with its readiness.
version_added: 0.1.0
author:
  - moesweep developers
extends_documentation_fragment:
  - moesweep.sweep.attributes
options:
  state:
    description: What to do.
    type: str
    required: true
    choices: [start, resume, stop_check, point, restore_plan, restore]
  sweep:
    description: The plan from M(moesweep.sweep.sweep_plan).
    type: dict
    required: true
  point:
    description: The point's name.
    type: str
  started:
    description: When the point started (ISO time, from V(start)).
    type: str
  started_at:
    description: When the point started (seconds since the epoch, from V(start)).
    type: float
  config_hash:
    description: The point's configuration hash (from V(resume)).
    type: str
  launch_hash:
    description: The launch's hash (from the preflight's C(launch)).
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
    description: The preflight's result.
    type: dict
    default: {}
  launch:
    description: The planned launch.
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
    description: What the host ran before the sweep (for V(restore_plan)).
    type: dict
    default: {}
  choice:
    description: The restore choice (for V(restore)).
    type: dict
    default: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the work happen on the controller.
    support: full
  check_mode:
    support: full
    details: In check mode nothing is collected from the host; the callback writes nothing.
  diff_mode:
    support: none
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
moesweep_event:
  description: What the callback does with the result - C(point_started), C(resume), C(record).
  returned: always
  type: str
moesweep_record:
  description: The record (docs/results.md), for V(point) and V(restore).
  returned: when state is point or restore
  type: dict
artifacts:
  description: Artifact name to text, written beside the record.
  returned: when state is point or restore
  type: dict
skip:
  description: For V(resume) - whether a passing record with this configuration exists.
  returned: when state is resume
  type: bool
config_hash:
  description: For V(resume) - the configuration hash.
  returned: when state is resume
  type: str
choice:
  description: For V(restore_plan) - C(action) (point, previous, none), C(point), C(reason).
  returned: when state is restore_plan
  type: dict
"""
