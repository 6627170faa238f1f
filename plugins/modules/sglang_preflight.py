#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
# This is an action-only module: the code is plugins/action/sglang_preflight.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Plan and validate one SGLang launch; refuse a MoE sweep point the host cannot run
description:
  - Plans the launch of one sweep point once, on the controller - the common flags, the backend's overlay and
    the extra flags merged; the sglang version (given, or recorded on the host by the sglang_env role); the
    program; the unit's public environment - and validates the flags against that version's real argparse
    schema (C(data/sglang/flags-<version>.json)). This is the only place a launch is validated.
  - Checks the point (MoE runner backend, quantization, flags, environment, sglang version) against the
    host's GPU facts (from M(moesweep.sweep.gpu_facts)) and the knowledge base C(data/compat.yml).
  - Fails with a message naming the backend, the SM, the reason, the error the launch would hit, the
    citation and the compatible alternatives when the point is unsupported.
  - Caveats (the point runs but e.g. is mislabelled or slow) are returned as warnings, never silently.
  - Suggests NCCL/launch settings from the facts (e.g. PCIe-only GPUs in a KVM guest) as RV(advice) only.
  - Returns the planned launch (RV(launch)) - argv, command line, ExecStart lines, port, environment - which the
    server role's unit template renders as is. Secrets never enter it.
  - Runs on the controller; makes no change on the host (the host's dry run, O(dry_run), only reads).
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.ACTION
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  backend:
    description:
      - The sweep point's backend - a key of O(backends) or a C(--moe-runner-backend) choice of the version; one
        name (a list is refused). A point named after a choice must run that choice.
    type: raw
    required: true
  point:
    description: The name the sweep gave this point; it must equal O(backend) (catches variables that contradict it).
    type: str
  quantization:
    description: The C(--quantization) value (e.g. V(modelopt_fp4)); may also be given in O(flags).
    type: str
  flags:
    description:
      - The common launch flags, name (without leading dashes) to value.
      - An abbreviation the version's parser resolves to one option (C(tp) for C(tp-size)) is accepted and planned
        under the full name; an ambiguous one is refused with argparse's message.
      - C(api-key) and C(config) are refused here, in O(extra_flags) and in O(backends) alike - the key goes in
        O(api_key_set) and its file, and moesweep passes the one C(--config) sglang takes.
    type: dict
    default: {}
  model_config:
    description:
      - The model's config.json (parsed). Its C(architectures) and C(index_topk) decide the attention rules (GLM-5
        and DeepSeek V3.2 run DeepSeek Sparse Attention).
      - Without it the model is looked up by its C(model-path) flag in the knowledge base's table of known model
        ids; a model found in neither leaves those rules unchecked (a warning says so).
    type: dict
  version_flags:
    description: Flags of one sglang version (C("0.5.9"), C("0.5.23")) merged over O(flags) when the launch runs
      that version, before the backend overlay.
    type: dict
    default: {}
  backends:
    description: "Per-backend overlays: name to C({flags: {...}, remove: [...]})."
    type: dict
    default: {}
  extra_flags:
    description: Flags merged last, after the overlay.
    type: dict
    default: {}
  sglang_version:
    description: The sglang version on the host. Empty means the one recorded in O(provenance).
    type: str
  provenance:
    description: The host's provenance record (C(/etc/moesweep/provenance.json), written by the sglang_env role).
    type: dict
    default: {}
  command:
    description: Program words of ExecStart before the flags. Empty means C(<venv>/bin/python -m sglang.launch_server).
    type: list
    elements: str
    default: []
  venv:
    description: Virtual environment holding sglang (used when O(command) is empty).
    type: path
  environment:
    description: The public part of the unit's environment (no secrets).
    type: dict
    default: {}
  secret_environment_keys:
    description: Names of secret environment variables the unit also gets (their values never reach this plugin).
    type: list
    elements: str
    default: []
  api_key_set:
    description:
      - The server gets an API key. The launch then passes C(--config) O(secret_config_path), the 0600 YAML file that
        holds the key (M(moesweep.sweep.sglang_unit) writes it), so the key is never on the server's command line.
    type: bool
    default: false
  secret_config_path:
    description:
      - The absolute path of the unit's C(--config) file, ending in C(.yaml) or C(.yml) (sglang refuses any other
        suffix). Required with O(api_key_set=true).
    type: path
  log_filter_dir:
    description:
      - The directory of the log filter that keeps API keys out of the server's log (the server role's
        C(files/log_filter/sitecustomize.py), installed there by its C(install) entry point). With
        O(api_key_set=true) the unit's environment puts it first on C(PYTHONPATH), so that every interpreter of the
        server loads it (sglang logs its whole ServerArgs, the key included, at start).
    type: path
  home:
    description: Writable HOME of the service (JIT caches); sets C(HOME), C(SGLANG_CACHE_DIR), C(FLASHINFER_WORKSPACE_BASE).
    type: path
  cuda_home:
    description: CUDA_HOME of the unit. Empty means the one in O(provenance), else C(/usr/local/cuda).
    type: path
  gpu_facts:
    description:
      - The facts returned by M(moesweep.sweep.gpu_facts) (RV(moesweep.sweep.gpu_facts#module:ansible_facts.moesweep_gpu)).
      - Defaults to the host's C(ansible_facts.moesweep_gpu) when gathered.
      - Their host checks decide too - a check whose verdict is V(fail) refuses the point (O(force) runs it anyway),
        a V(warn) is a caveat in RV(preflight_warnings).
    type: dict
  cuda_version:
    description: CUDA toolkit release used for JIT (nvcc in CUDA_HOME); defaults to the facts' C(cuda_toolkit.release).
    type: str
  dry_run:
    description:
      - Before the knowledge base judges the point, the planned launch runs through its sglang version's own
        argument handling (C(plugins/module_utils/sglang_dryrun.py)). Its refusal carries sglang's own exception and
        the line it came from; the knowledge base's rules of the stages it got past yield to it.
      - V(auto) runs it on the controller - the pinned wheel in a sandbox, the GPU queries answered from
        O(gpu_facts) (C(plugins/plugin_utils/sglang_sandbox.py)) - where the model's config.json is at hand
        (O(model_config), or the published files of a known model id in C(data/models/)), then on the host with
        M(moesweep.sweep.sglang_dry_run) where the unit launches the server venv's own sglang (O(command) empty)
        and the host's stack is a serving stack (O(provenance)'s C(stack) not a test or client stack). The host's
        answer, from its own sglang, torch, GPUs and model files, decides over the controller's copy.
      - V(controller) or V(host) runs only that one (V(host) on any stack); V(off) leaves the verdict to the
        knowledge base alone. RV(dry_run) says what ran and, when none could, why.
    type: str
    choices: [auto, controller, host, "off"]
    default: auto
  staged_model_path:
    description:
      - The local directory the sweep stages the model into before the point's unit (M(moesweep.sweep.model_stage)).
      - Any other absolute C(model-path) the launch names must hold the model's C(config.json) on the host now, or
        the point is refused before anything restarts (sglang would die at its arguments); the check is a read
        (C(ansible.builtin.stat)) on the host.
    type: path
  dry_run_timeout:
    description: Seconds the host's dry run may take (O(moesweep.sweep.sglang_dry_run#module:timeout)).
    type: int
    default: 180
  force:
    description: Proceed past a compatibility refusal; the result records RV(forced=true). A flag error cannot be forced.
    type: bool
    default: false
  kb_path:
    description: Alternative knowledge base file (tests).
    type: path
  nodes_group:
    description:
      - The inventory group whose hosts serve one server together (multi-node). When the host is in it, the launch
        is this rank's - C(--nnodes) (the group's size), C(--node-rank) (the host's place in the group, or its
        C(sglang_server_node_rank) when every host of the group sets one), C(--dist-init-addr) (rank 0's
        C(ansible_host) and O(dist_init_port)) - and RV(nodes) is the group's plan.
      - Refused before anything changes, with the problem and the fix named - a group of one host; ranks set on
        some hosts only, duplicated or with gaps; hosts disagreeing on the port; a member not in the play
        (unreachable, failed, left out by C(--limit)); launch flags with another C(--nnodes), C(--node-rank) or
        C(--dist-init-addr); a C(--tp-size) x C(--pp-size) the nodes cannot split (sglang asserts it before it
        starts); a play whose strategy is not linear.
    type: str
  dist_init_port:
    description:
      - The dist-init port on rank 0 (this host's C(sglang_server_dist_init_port); each member's own inventory value
        is read from its host variables and must agree).
    type: int
    default: 25000
attributes:
  action:
    support: full
    details: The whole preflight runs on the controller; the host is not contacted.
  idempotent:
    details: It plans and checks; nothing changes.
notes:
  - The knowledge base is data; every entry carries its citation (sglang/flashinfer source at a version, or an upstream issue/PR).
seealso:
  - module: moesweep.sweep.gpu_facts
"""

EXAMPLES = r"""
- name: Gather GPU facts
  moesweep.sweep.gpu_facts:

- name: Refuse flashinfer_trtllm on an SM120 host in seconds
  moesweep.sweep.sglang_preflight:
    backend: flashinfer_trtllm
    quantization: modelopt_fp4
    sglang_version: 0.5.9
    flags:
      tp-size: 8
      enable-flashinfer-allreduce-fusion: true
  register: preflight

- name: Run a known-bad point anyway, recorded as forced
  moesweep.sweep.sglang_preflight:
    backend: flashinfer_trtllm
    quantization: modelopt_fp4
    sglang_version: 0.5.9
    force: true
"""

RETURN = r"""
dry_run:
  description:
    - What the dry run of sglang's own argument handling answered (null when O(dry_run=off) or the launch had a
      flag error); C(verdict) V(refused) decides the point, V(undecided) leaves it to the knowledge base, with
      C(reason).
    - C(resolved) holds the arguments sglang resolved (what V(auto) became, the attention, sampling, MoE and FP8
      GEMM backends, the memory settings); C(notices) what sglang logged while resolving them.
  returned: when the launch could be planned
  type: dict
  sample:
    verdict: refused
    stage: server_args
    sglang_version: 0.5.9
    where: controller
    gpus: facts
    error:
      type: AssertionError
      message: "Invalid quantization 'fp8'. FlashInfer Cutlass MOE supports only: 'modelopt_fp4', 'modelopt_fp8', or bfloat16 (None)."
      file: sglang/srt/server_args.py
      line: 2137
      url: https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/server_args.py#L2137
verdict:
  description: V(supported), V(caveat), V(unknown) or V(unsupported).
  returned: always
  type: str
  sample: unsupported
backend:
  description: The backend asked for.
  returned: when the launch could be planned
  type: str
  sample: flashinfer_trtllm
effective_backend:
  description: The backend that would run (what V(auto) resolves to).
  returned: when the launch could be planned
  type: str
  sample: flashinfer_cutlass
sm:
  description: The host's SM string.
  returned: when the launch could be planned
  type: str
  sample: sm120
quantization:
  description: Normalised quantization (V(bf16) when none).
  returned: when the launch could be planned
  type: str
  sample: modelopt_fp4
sglang_version:
  description: The sglang version checked.
  returned: when the launch could be planned
  type: str
  sample: 0.5.9
reasons:
  description: The rules that did not say V(supported), each with C(rule), C(status), C(reason), C(error), C(citation).
  returned: always
  type: list
  elements: dict
  sample:
    - rule: s9-trtllm-sm10x-only
      status: unsupported
      reason: trtllm-gen fused MoE kernels exist only for SM100/SM103
      error: "RuntimeError: No supported CUDA architectures found for major versions [10]."
      citation: https://github.com/flashinfer-ai/flashinfer/blob/v0.6.3/flashinfer/jit/fused_moe.py#L215-L238
citations:
  description: Every citation behind the verdict.
  returned: always
  type: list
  elements: str
  sample: ["https://github.com/flashinfer-ai/flashinfer/blob/v0.6.3/flashinfer/jit/fused_moe.py#L215-L238"]
alternatives:
  description: Backends of the same sglang version that are supported (or only caveated) here.
  returned: always
  type: list
  elements: dict
  sample: [{backend: flashinfer_cutlass, status: caveat, resolves_to: null}]
advice:
  description: Suggested environment (C(env)) and launch flags (C(flags)) from the facts, with C(notes) and C(citations).
  returned: always
  type: dict
  sample: {env: {NCCL_P2P_LEVEL: PHB, NCCL_IB_DISABLE: "1"}, flags: [--disable-custom-all-reduce]}
preflight_warnings:
  description: Caveats and missing-fact warnings (also shown as Ansible warnings).
  returned: always
  type: list
  elements: str
  sample: ["cutlass-fi-sm120-cuda128-slow: with CUDA 12.8 flashinfer JIT targets compute_120a ..."]
host_checks:
  description: The host checks of O(gpu_facts) the verdict took into account (name, verdict, evidence, fix, source).
  returned: always
  type: list
  elements: dict
  sample: [{name: shm, verdict: warn, evidence: "/dev/shm is 64 MiB, below NCCL's 1 GiB example (--shm-size=1g)",
            fix: "enlarge /dev/shm", source: "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"}]
forced:
  description: True when O(force) let an unsupported point through.
  returned: always
  type: bool
  sample: false
point:
  description: The sweep point's name (O(backend) as given).
  returned: when the launch could be planned
  type: str
  sample: flashinfer_cutlass
msg:
  description: The verdict in one line, or the refusal naming backend, SM, reason, error, citation and alternatives.
  returned: always
  type: str
  sample: "sweep point flashinfer_cutlass on sm120: caveat"
nodes:
  description:
    - The node group plan when the host is in O(nodes_group) - C(group), C(nnodes), C(rank) (this host's),
      C(hosts) (rank order), C(addresses), C(dist_init_port), C(dist_init_addr), C(record_host) (rank 0, whose
      records a sweep's points of the group are) and C(recorder) (the first rank in the play, which writes them).
      On a refusal of the group only C(group), C(members), C(record_host) and C(recorder). Empty on one host.
  returned: always
  type: dict
  sample: {"group": "sglang_nodes", "nnodes": 2, "rank": 1, "hosts": ["node-a", "node-b"],
           "dist_init_addr": "10.0.0.1:25000", "record_host": "node-a", "recorder": "node-a"}
launch:
  description: The planned launch, rendered by the server role as is. Null when it could not be planned.
  returned: always
  type: dict
  contains:
    sglang_version:
      description: The version whose schema validated the launch.
      type: str
      sample: 0.5.9
    backend:
      description: The C(--moe-runner-backend) the launch runs.
      type: str
      sample: flashinfer_cutlass
    flags:
      description: The effective flags (common, version, overlay, extra), abbreviations written in full.
      type: dict
    argv:
      description: ExecStart as a list (with an API key it ends with C(--config) and the path of the file that holds it).
      type: list
      elements: str
    command_line:
      description: The launch as a person would type it.
      type: str
      sample: /opt/moesweep/venvs/sglang/bin/python -m sglang.launch_server --model-path lukealonso/GLM-5-NVFP4 --tp-size 8
    exec_lines:
      description: ExecStart split into lines, escaped for systemd.
      type: list
      elements: str
    port:
      description: The server port.
      type: int
      sample: 8000
    host:
      description: The address the server binds.
      type: str
      sample: 0.0.0.0
    environment:
      description: The unit's public environment (secrets left out).
      type: dict
    secret_environment_keys:
      description: Names of the secret variables the environment file also carries.
      type: list
      elements: str
    launch_hash:
      description: sha256 of argv, public environment and secret names (what identifies the launch).
      type: str
    point:
      description: The sweep point's name (O(backend) as given).
      type: str
      sample: flashinfer_cutlass
    nodes:
      description: The node plan the launch's node flags come from (RV(nodes)); empty on one host.
      type: dict
    flag_errors:
      description: What the version's real argparse schema rejects in the flags (empty when they validate).
      type: list
      elements: str
      sample: []
"""
