#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: sglang_dry_run
short_description: Run one SGLang launch line through the host's own sglang argument handling, without serving
version_added: "0.1.0"
description:
  - Runs the point's exact launch line (its server arguments, its environment, a C(--config) file with the same
    keys) through the argument handling of the sglang the host's server venv has, with the host's torch and GPUs,
    before anything restarts - the parser, C(ServerArgs)' resolution and C(check_server_args), the scheduler
    processes' GPUs against the GPUs the process sees, the loader's quantization gate
    (C(plugins/module_utils/sglang_dryrun.py) says what runs and cites each step).
  - Nothing serves - no port is bound, no weight loads, no GPU memory is allocated (torch answers the GPU count and
    capability; the model's config.json is read through sglang's own C(get_config)). The running server is not
    touched. The program runs in a private temporary directory (its C(HOME) and C(TMPDIR)), removed afterwards.
  - Returns sglang's verdict; it never fails for a refused launch (the caller judges the point with it,
    M(moesweep.sweep.sglang_preflight), O(moesweep.sweep.sglang_preflight#module:dry_run)). It fails only for bad input.
  - A host whose torch sees no GPU (a simulated host's CPU build) has its CUDA queries answered from O(gpu_facts),
    and the answer says C(gpus=facts).
options:
  python:
    description: The interpreter of the host's server venv (the one that imports sglang).
    type: path
    required: true
  argv:
    description: The server's arguments, the words after C(python -m sglang.launch_server), as the unit passes them.
    type: list
    elements: str
    required: true
  environment:
    description: The unit's environment (applied over the module's own; C(HOME) and C(TMPDIR) stay private).
    type: dict
    default: {}
  config_keys:
    description:
      - When O(argv) names a C(--config) file, the keys that file holds. The dry run writes its own file with these
        keys (a placeholder for each value; the API key the real file carries is never validated) so that sglang's
        C(ConfigArgumentMerger) runs as in the launch, without reading the secret.
    type: list
    elements: str
    default: []
  gpu_facts:
    description: M(moesweep.sweep.gpu_facts)' facts, which answer the CUDA queries where the host's torch sees no GPU.
    type: dict
  launch_imports:
    description:
      - V(true) - the launch itself runs this interpreter's sglang, so an import that fails fails the launch (a
        refusal).
      - V(false) - another program serves (a wrapper, or a simulated host's stand-in), so an import that fails leaves
        the dry run undecided.
    type: bool
    default: true
  timeout:
    description: Seconds the dry run may take before it is ended and answered undecided.
    type: int
    default: 180
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
attributes:
  platform:
    details: Linux, with the sglang stack installed (the sglang_env role).
seealso:
  - module: moesweep.sweep.sglang_preflight
"""

EXAMPLES = r"""
- name: Run the launch through the host's own sglang before anything restarts
  moesweep.sweep.sglang_dry_run:
    python: /opt/sglang/venv/bin/python
    argv: [--model-path, /var/lib/sglang/models/Qwen/Qwen3-30B-A3B, --tp-size, "8", --moe-runner-backend, triton]
    environment: {NCCL_P2P_LEVEL: PHB, HF_HUB_OFFLINE: "1"}
    gpu_facts: "{{ ansible_facts.moesweep_gpu }}"
  register: dry_run
"""

RETURN = r"""
verdict:
  description: V(accepted), V(refused) (sglang's own code refuses the line) or V(undecided) (the dry run could not
    run to the end; RV(reason) says why).
  returned: always
  type: str
  sample: refused
stage:
  description: Where a refusal came from - V(arguments), V(server_args), V(scheduler_init), V(model_init), V(import).
  returned: when refused
  type: str
  sample: server_args
error:
  description: sglang's exception - C(type), C(message), the sglang C(file) and C(line) it was raised at, C(function).
  returned: when refused
  type: dict
  sample: {"type": "AssertionError", "message": "Invalid quantization 'fp8'.", "file": "sglang/srt/server_args.py",
           "line": 2137, "function": "_handle_moe_kernel_config"}
key_fields:
  description: What sglang resolved (the backends, the KV cache dtype, the page size, the parallel layout, ...).
  returned: when the arguments resolved
  type: dict
  sample: {"attention_backend": "nsa", "kv_cache_dtype": "fp8_e4m3", "page_size": 64}
resolved:
  description: Every field of the resolved C(ServerArgs), JSON-safe.
  returned: when the arguments resolved
  type: dict
notices:
  description: What sglang logged while it resolved the arguments (level, logger, message).
  returned: always
  type: list
  elements: dict
gpus:
  description: V(real) (torch's answers) or V(facts) (answered from O(gpu_facts)).
  returned: always
  type: str
  sample: real
sglang_version:
  description: The sglang version the venv has.
  returned: when sglang imported
  type: str
  sample: 0.5.9
reason:
  description: Why the dry run is undecided.
  returned: when undecided
  type: str
elapsed_s:
  description: Seconds the dry run took, start to answer.
  returned: always
  type: float
  sample: 6.2
"""

import json
import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import sglang_dryrun

CONFIG_OPTION = "--config"


def with_own_config(argv, keys, directory):
    """``argv`` with its ``--config PATH`` replaced by a file of the same keys, placeholder values."""
    if CONFIG_OPTION not in argv:
        return list(argv)
    at = argv.index(CONFIG_OPTION)
    path = os.path.join(directory, "config.yaml")
    with open(path, "w") as handle:
        for key in keys:
            handle.write("%s: moesweep-dry-run-placeholder\n" % key)
    return argv[:at + 1] + [path] + argv[at + 2:]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            argv=dict(type="list", elements="str", required=True),
            environment=dict(type="dict", default={}),
            config_keys=dict(type="list", elements="str", default=[], no_log=False),
            gpu_facts=dict(type="dict"),
            launch_imports=dict(type="bool", default=True),
            timeout=dict(type="int", default=180),
        ),
        supports_check_mode=True,
    )
    p = module.params
    started = time.monotonic()
    if p["timeout"] <= 0:
        module.fail_json(msg="timeout must be > 0 seconds, got %d" % p["timeout"])
    if not os.access(p["python"], os.X_OK):
        module.exit_json(changed=False, verdict="undecided", gpus=None, notices=[],
                         reason="%s is not an executable interpreter on this host: the server venv is not "
                                "installed (site.yml's sglang_env role installs it)" % p["python"],
                         elapsed_s=round(time.monotonic() - started, 3))
    work = tempfile.mkdtemp(prefix="moesweep-dry-run-")
    try:
        argv = with_own_config(p["argv"], p["config_keys"], work)
        gpus = sglang_dryrun.gpus_from_facts(p["gpu_facts"]) if p["gpu_facts"] else None
        env = dict(p["environment"])
        req = sglang_dryrun.request(argv, environment=env, gpus=gpus, gpus_fallback=True,
                                    import_is_launch=p["launch_imports"])
        child_env = dict(HOME=work, TMPDIR=work, LC_ALL="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
        timeout = module.get_bin_path("timeout", required=True)
        rc, out, err = module.run_command(
            [timeout, "--kill-after=5", str(p["timeout"]), p["python"], "-I", "-c", sglang_dryrun.program_source()],
            data=json.dumps(req), binary_data=True, cwd=work, environ_update=child_env)
        answer = sglang_dryrun.parse_output(out)
        if answer is None and rc in (124, 137):
            answer = {"verdict": "undecided", "gpus": None, "notices": [],
                      "reason": "the dry run did not finish in %d s (timeout)" % p["timeout"]}
        elif answer is None:
            tail = " | ".join((err or "").strip().splitlines()[-4:])
            answer = {"verdict": "undecided", "gpus": None, "notices": [],
                      "reason": "the dry run gave no answer (rc %s): %s" % (rc, tail[-600:])}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    answer["where"] = "host"
    answer["elapsed_s"] = round(time.monotonic() - started, 3)
    module.exit_json(changed=False, **answer)


if __name__ == "__main__":
    main()
