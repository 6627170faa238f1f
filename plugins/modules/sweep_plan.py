#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
# This is an action-only module: the code is plugins/action/sweep_plan.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sweep_plan
short_description: Plan a sweep on one host, refusing bad input before any point runs
description:
  - Runs on the controller. Turns the user's C(-e backend=NAME), C(-e backends=[a,b,c]) or
    C(-e backends=compatible) into the host's list of sweep points, and checks every input a sweep needs before
    anything restarts - one of O(backend) / O(backends), names that are overlays or C(--moe-runner-backend) choices of
    the host's sglang version (a typo gets the closest valid name), a writable results directory, a restore
    policy, a reference concurrency among the benchmark's levels.
  - With O(backends=compatible) the points are every choice the preflight (M(moesweep.sweep.sglang_preflight))
    accepts for the host's facts and launch flags.
  - The sweep id is stable for the same points, hosts and benchmark settings, so running the same sweep again
    resumes it. Every host of a spread sweep gets the same id, so all records land in one C(points.jsonl).
  - Returns RV(moesweep_sweep), also set as the fact RV(ansible_facts.moesweep_sweep).
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.ACTION
  - moesweep.sweep.attributes.FACTS
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  backend:
    description: One sweep point (C(-e backend=NAME)).
    type: raw
  backends:
    description: The sweep points, in order (a list, a comma-separated string, or V(compatible)).
    type: raw
  matrix:
    description:
      - A launch matrix instead of O(backend) / O(backends) - C(axes) (any sglang option by name without its dashes,
        or C(env:NAME), each with a list of values), optional C(zip) (lists of axes whose i-th values go together)
        and C(exclude) (rules, each a mapping axis -> value or values, dropping the cells that match every one).
      - Checked against the host's sglang version's real flag schema before any point runs (an unknown option, a
        value outside its choices, an empty axis, a duplicate cell, an exclude rule naming no axis are refused,
        naming the fix). Each cell becomes a point named by its values (for example
        V(flashinfer_cutlass.flashinfer.cutlass)), its overlay (its flags and C(environment)) added to
        O(backends_overlays); every cell is judged by the preflight here, and the plan lists the refused cells
        with their reasons, the cells to run and an estimated time from the host's earlier records.
      - C(max_cells) (default 64) caps the cells its axes span before C(exclude); a larger matrix is refused with
        its count, the axes' sizes and an estimate of its time on a real host, before a cell is built - unless
        C(max_cells) says that many are meant.
    type: raw
  restore:
    description:
      - What to leave the host on at the end - V(best) (the best point that passed, else the configuration before
        the sweep), V(previous), V(none).
    type: str
    default: best
  reference_concurrency:
    description: The benchmark level that ranks the points (default - the highest level).
    type: int
  concurrency:
    description: The benchmark's concurrency levels.
    type: list
    elements: int
    default: [1, 8, 32, 64]
  results_dir:
    description: Results directory on the controller (created if missing; must be writable).
    type: path
    required: true
  sweep_id:
    description: The sweep's id (default - derived from points, hosts and benchmark settings).
    type: str
  rerun:
    description: Run points again even when a passing record with the same configuration exists.
    type: bool
    default: false
  measure_equivalent:
    description:
      - Start and measure a point even when it runs the same kernels as a point measured in this sweep (by default
        it is recorded C(same_as) that point and not started, see M(moesweep.sweep.sweep_record)).
    type: bool
    default: false
  spread:
    description:
      - V(false) - every host runs every point. V(true) - each point runs on one host, the points dealt over the
        hosts in inventory-name order, after checking that the hosts are comparable (GPU models and count,
        driver, interconnect, virtualization kind, stack lock hash); a difference is refused naming the fact and
        the hosts. V(by_facts) - the hosts are grouped by identical facts and the points are dealt within each
        group (every group runs every point).
    type: raw
    default: false
  force:
    description:
      - The sweep runs points the preflight refuses (C(-e force=true)); they count among the points that start a
        server (C(starts_server) of RV(moesweep_sweep)).
    type: bool
    default: false
  hosts:
    description: The hosts the play targets (part of the sweep id).
    type: list
    elements: str
    default: []
  host:
    description: The host being planned (its share of the points when O(spread) is on).
    type: str
  host_inputs:
    description:
      - The C(gpu_facts) and C(provenance) of every host that reached the plan, by host name, gathered before any
        host plans; the hosts O(spread) deals the points to, and what it compares.
    type: dict
    default: {}
  bench_settings:
    description: The benchmark settings (part of the sweep id).
    type: dict
    default: {}
  accuracy:
    description:
      - The accuracy stage's settings - C(enabled), C(questions), C(shots), C(threshold) (null - the model family's
        published figure, when one exists) and C(reference) (the backend the others are compared with; null - the
        first point that passes), and C(data_src) (the controller's GSM8K file the stage copies to the host; empty -
        the shipped C(data/gsm8k/test.jsonl); a relative path is found as M(ansible.builtin.copy) finds its C(src)).
        Checked before any point (a subset of 0 or more questions than the data holds, a threshold outside 0..1, a
        reference that is not a point of the sweep, a GSM8K file that is missing, unreadable, not sglang's JSONL
        rows or with an answer without a number are refused); the plan's C(accuracy) holds them resolved.
    type: dict
    default: {}
  numbers:
    description: Settings that must be positive numbers (timeouts, lengths), by variable name; checked before any point.
    type: dict
    default: {}
  flags:
    description: The server role's common launch flags (for O(backends=compatible)).
    type: dict
    default: {}
  version_flags:
    description: The server role's per-version flags (for O(backends=compatible)).
    type: dict
    default: {}
  backends_overlays:
    description: The server role's per-backend overlays.
    type: dict
    default: {}
  extra_flags:
    description: The server role's extra flags.
    type: dict
    default: {}
  sglang_version:
    description: The host's sglang version (empty - from O(provenance)).
    type: str
  provenance:
    description: The host's provenance record.
    type: dict
    default: {}
  environment:
    description: The public part of the unit's environment.
    type: dict
    default: {}
  gpu_facts:
    description: The host's GPU facts.
    type: dict
    default: {}
  kb_path:
    description: Alternative knowledge base file (tests).
    type: path
  nodes_group:
    description:
      - The inventory group of a server spread over several hosts (the server role's C(sglang_server_nodes_group)).
        When the host is one of its nodes, C(nodes) of RV(moesweep_sweep) names the host that records the group's
        points (rank 0) and the host that writes those records (the first rank in the play); O(spread) is
        refused (every rank runs every point together); O(backends=compatible) is judged on the recording
        host's facts, so that every rank gets the same points.
    type: str
  node_inputs:
    description: The node group as read from the inventory (default - read from the task's host variables for O(nodes_group); tests).
    type: dict
attributes:
  action:
    support: full
    details: The plan is made on the controller; the host is not contacted.
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  idempotent:
    support: full
    details: It plans; the same input gives the same sweep id, which is how a sweep resumes.
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Plan the sweep
  moesweep.sweep.sweep_plan:
    backends: [flashinfer_trtllm, flashinfer_cutedsl, flashinfer_cutlass, triton]
    results_dir: "{{ playbook_dir }}/../results"
    gpu_facts: "{{ ansible_facts.moesweep_gpu }}"

- name: Plan a sweep spread over comparable hosts (each point on one host)
  moesweep.sweep.sweep_plan:
    backends: [flashinfer_cutedsl, flashinfer_cutlass, triton]
    results_dir: "{{ playbook_dir }}/../results"
    spread: true
    hosts: "{{ ansible_play_hosts_all }}"
    host: "{{ inventory_hostname }}"
    host_inputs: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'moesweep_sweep_inputs'))) }}"
    gpu_facts: "{{ ansible_facts.moesweep_gpu }}"

- name: Plan a launch matrix (MoE runner x attention backend x fp8 GEMM backend), each cell a point
  moesweep.sweep.sweep_plan:
    matrix:
      axes:
        moe-runner-backend: [flashinfer_cutlass, flashinfer_trtllm, triton]
        attention-backend: [flashinfer, trtllm_mla]
        fp8-gemm-backend: [cutlass, deep_gemm]
      exclude:
        - {moe-runner-backend: triton, attention-backend: trtllm_mla}
    results_dir: "{{ playbook_dir }}/../results"
    gpu_facts: "{{ ansible_facts.moesweep_gpu }}"
"""

RETURN = r"""
moesweep_sweep:
  description:
    - The plan - C(sweep_id), C(results_dir), C(dir), C(stop_file) (the file whose presence asks the sweep to stop
      after the current step; moesweep.api creates it), C(points) (this host's points), C(all_points) (the sweep's
      points before any spread), C(spread), C(spread_group) (the hosts this host shares the points with),
      C(restore), C(reference_concurrency), C(concurrency) (the benchmark levels), C(rerun), C(sglang_version),
      C(created) (when it was planned, ISO 8601), C(measure_equivalent), C(equivalent) (this host's points the
      plan's preflight predicts run the kernels of an earlier point, each with that point; such a point is not
      started once that one passed, and an early stop is not made for it), C(starts_server) (this host's points that start a server when
      they run - the ones the preflight accepts, all of them with O(force); empty on a node group; a point that
      ends before one of them stops its server at once, see M(moesweep.sweep.sweep_record)) and C(nodes) (on a
      node of O(nodes_group) - C(group), C(members), C(record_host), C(recorder), and C(error) when the group
      cannot serve; empty otherwise), C(accuracy) (the accuracy stage's settings, resolved - C(enabled),
      C(questions), C(shots), C(threshold), C(threshold_source), C(reference), C(alpha)), C(overlays) (the
      overlays the points run with - O(backends_overlays) and a matrix's cells), C(matrix) (with O(matrix) -
      C(cells) (each cell's axes), C(axes), C(zip), C(excluded), C(refused) (C(cell), C(verdict), C(reasons),
      C(citations)), C(passed_before), C(to_run), C(estimate_s), C(estimate_basis), C(lines) (the plan as text);
      null otherwise).
  returned: success
  type: dict
  sample: {"sweep_id": "sweep-3f2a9c1b0d4e", "points": ["flashinfer_cutlass", "triton"], "restore": "best"}
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: success
  type: complex
  contains:
    moesweep_sweep:
      description: The same plan as RV(moesweep_sweep), for the rest of the play.
      returned: success
      type: dict
msg:
  description: The sweep id, its points and its results directory in one line.
  returned: always
  type: str
  sample: "sweep sweep-3f2a9c1b0d4e: 2 point(s) flashinfer_cutlass, triton -> results/sweep-3f2a9c1b0d4e"
"""
