# Copyright: moesweep developers
# Apache License 2.0
# This is an action-only module: the code is plugins/action/sglang_preflight.py (runs on the controller).

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Refuse an SGLang MoE sweep point the host cannot run, before the server is touched
description:
  - Checks one sweep point (MoE runner backend, quantization, launch flags, sglang version) against the
    host's GPU facts (from M(moesweep.sweep.gpu_facts)), the knowledge base C(data/compat.yml) and the
    version's real flag schema (C(data/sglang/flags-<version>.json)).
  - Fails with a message naming the backend, the SM, the reason, the error the launch would hit, the
    citation and the compatible alternatives when the point is unsupported.
  - Caveats (the point runs but e.g. is mislabelled or slow) are returned as warnings, never silently.
  - Suggests NCCL/launch settings from the facts (e.g. PCIe-only GPUs in a KVM guest) as O(advice) only.
  - Runs on the controller; makes no change on the host.
version_added: 0.1.0
author:
  - moesweep developers
options:
  backend:
    description: The C(--moe-runner-backend) value; one name (a list is refused).
    type: raw
    required: true
  quantization:
    description: The C(--quantization) value (e.g. V(modelopt_fp4)); omit for an unquantized (bf16) checkpoint.
    type: str
  flags:
    description: The other launch flags, name (with or without leading dashes) to value.
    type: dict
    default: {}
  sglang_version:
    description: The sglang version installed on the host (the provenance fact).
    type: str
    required: true
  gpu_facts:
    description:
      - The facts returned by M(moesweep.sweep.gpu_facts) (C(ansible_facts.moesweep_gpu)).
      - Defaults to the host's C(ansible_facts.moesweep_gpu) when gathered.
    type: dict
  cuda_version:
    description: CUDA toolkit release used for JIT (nvcc in CUDA_HOME); defaults to the facts' C(cuda_toolkit.release).
    type: str
  force:
    description: Proceed past a refusal; the result records C(forced=true).
    type: bool
    default: false
  kb_path:
    description: Alternative knowledge base file (tests).
    type: path
attributes:
  action:
    support: full
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - The knowledge base is data; every entry carries its citation (sglang/flashinfer wheel file:line or upstream issue/PR).
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
verdict:
  description: V(supported), V(caveat), V(unknown) or V(unsupported).
  returned: always
  type: str
  sample: unsupported
backend:
  description: The backend asked for.
  returned: always
  type: str
  sample: flashinfer_trtllm
effective_backend:
  description: The backend that would run (what V(auto) resolves to).
  returned: always
  type: str
  sample: flashinfer_cutlass
sm:
  description: The host's SM string.
  returned: always
  type: str
  sample: sm120
quantization:
  description: Normalised quantization (V(bf16) when none).
  returned: always
  type: str
  sample: modelopt_fp4
sglang_version:
  description: The sglang version checked.
  returned: always
  type: str
  sample: 0.5.9
reasons:
  description: The rules that did not say V(supported), each with C(rule), C(status), C(reason), C(error), C(citation).
  returned: always
  type: list
  elements: dict
  sample:
    - rule: trtllm-sm10x-only-old-flashinfer
      status: unsupported
      reason: trtllm-gen fused MoE kernels exist only for SM100/SM103
      error: "RuntimeError: No supported CUDA architectures found for major versions [10]."
      citation: FIgit@v0.6.3 flashinfer/jit/fused_moe.py:215-238
citations:
  description: Every citation behind the verdict.
  returned: always
  type: list
  elements: str
  sample: ["S23 srt/arg_groups/moe_hook.py:69-160"]
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
forced:
  description: True when O(force) let an unsupported point through.
  returned: always
  type: bool
  sample: false
"""
