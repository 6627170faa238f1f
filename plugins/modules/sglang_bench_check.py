#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: sglang_bench_check
short_description: Check on the host what a benchmark needs before its server is restarted
version_added: "0.1.0"
description:
  - Reads, on the target, what M(moesweep.sweep.sglang_bench) needs before its first request - a local dataset file
    (never downloaded), the client venv with sglang's C(bench_serving), and a local tokenizer (O(tokenizer), else
    O(model_path) as a directory, else the Hugging Face cache snapshot of the repo id O(model_path) under O(hf_home))
    - and fails naming the problem and its fix. Read-only; supports check mode.
  - The benchmark itself runs as an async job started before the server's restart, whose failure the controller reads
    only once the server is up; this check runs first, so a wrong tokenizer path or a missing client costs no restart.
    M(moesweep.sweep.sglang_bench) makes the same checks (module_utils C(bench_serving.host_inputs)).
options:
  client_python:
    description: The client venv's interpreter (M(moesweep.sweep.sglang_bench)'s O(moesweep.sweep.sglang_bench#module:client_python)).
    type: path
    default: /opt/moesweep/venvs/client/bin/python
  tokenizer:
    description: A local tokenizer directory; empty to find one from O(model_path).
    type: path
  model_path:
    description: The server's C(--model-path) (a local directory or a hub repo id).
    type: str
  hf_home:
    description: The Hugging Face home the server's unit uses (its C(hub/) cache).
    type: path
  dataset_name:
    description: bench_serving's C(--dataset-name); every dataset but C(random-ids) needs O(dataset_path).
    type: str
    default: random-ids
    choices: [random-ids, random, sharegpt]
  dataset_path:
    description: A local dataset file.
    type: path
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
seealso:
  - module: moesweep.sweep.sglang_bench
"""

EXAMPLES = r"""
- name: Check the benchmark's client and tokenizer before restarting the server
  moesweep.sweep.sglang_bench_check:
    model_path: lukealonso/GLM-5-NVFP4
    hf_home: /var/lib/sglang/.cache/huggingface
"""

RETURN = r"""
tokenizer:
  description: The tokenizer the benchmark will use - its C(path) and where it was C(found_in).
  returned: success
  type: dict
  sample: {"path": "/var/lib/sglang/models/lukealonso/GLM-5-NVFP4", "found_in": "the model directory"}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_serving as bs


def _read(path):
    with open(path) as fh:
        return fh.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            client_python=dict(type="path", default="/opt/moesweep/venvs/client/bin/python"),
            tokenizer=dict(type="path"),
            model_path=dict(type="str"),
            hf_home=dict(type="path"),
            dataset_name=dict(type="str", default="random-ids", choices=["random-ids", "random", "sharegpt"]),
            dataset_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    problem, tok, how = bs.host_inputs(module.run_command, module.params, lambda path: os.access(path, os.X_OK),
                                       os.path.isfile, os.path.isdir, os.listdir, _read)
    if problem:
        module.fail_json(msg="sglang_bench_check: %s" % problem)
    module.exit_json(changed=False, tokenizer={"path": tok, "found_in": how})


if __name__ == "__main__":
    main()
