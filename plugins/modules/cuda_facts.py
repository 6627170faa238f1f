#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: cuda_facts
short_description: Gather the NVIDIA driver's version and CUDA ceiling and the CUDA toolkits installed
description:
  - Runs C(nvidia-smi) for the driver version and the highest CUDA version the driver supports (the
    table header's C(Driver Version) / C(CUDA Version), from R610 C(KMD Version) / C(CUDA UMD Version)),
    lists the versioned toolkits C(<prefix>/cuda-X.Y), and runs each one's C(bin/nvcc --version).
  - Returns them as RV(ansible_facts.moesweep_cuda). With O(driver_min_cuda) it also decides whether the
    driver can run that CUDA release (RV(ansible_facts.moesweep_cuda.driver_ok)).
  - A missing or failing driver is a fact (RV(ansible_facts.moesweep_cuda.driver_failure)), not a
    module failure; provisioning decides what to do about it. Use M(moesweep.sweep.gpu_facts) for the GPUs themselves.
  - Read-only; runs in check mode too.
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  # first: the support it states wins over the base fragment's platform N/A
  - moesweep.sweep.attributes.READ_ONLY
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.FACTS
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  prefix:
    description:
      - Directory holding versioned toolkits C(cuda-X.Y) (where NVIDIA's packages and runfiles put them).
    type: path
    default: /usr/local
  cuda_home:
    description:
      - A toolkit root to report on its own as RV(ansible_facts.moesweep_cuda.selected) (its C(bin/nvcc)
        run), whether or not it is under O(prefix).
    type: path
  nvidia_smi:
    description:
      - The C(nvidia-smi) command, a name looked up in E(PATH) or a path.
    type: str
    default: nvidia-smi
  gather_driver:
    description:
      - Run C(nvidia-smi) for the driver facts.
    type: bool
    default: true
  gather_toolkits:
    description:
      - List the toolkits under O(prefix) and run each one's C(nvcc --version).
    type: bool
    default: true
  driver_min_cuda:
    description:
      - CUDA release (C(major.minor)) the driver must support; sets RV(ansible_facts.moesweep_cuda.driver_ok).
    type: str
  driver_min_version:
    description:
      - The minimum driver for O(driver_min_cuda), compared when the driver prints no CUDA version
        (a vGPU host prints C(Not Found)).
    type: str
attributes:
  facts:
    support: full
notes:
  - Sets E(LC_ALL=C) for every command so the text parsed is the C locale's.
  - Parsing is C(plugins/module_utils/nvidia_smi.py), shared with M(moesweep.sweep.gpu_facts) and the
    C(moesweep facts) command.
seealso:
  - module: moesweep.sweep.gpu_facts
"""

EXAMPLES = r"""
- name: Read the driver and the toolkits in /usr/local
  moesweep.sweep.cuda_facts:

- name: Check the driver can run CUDA 12.8 and report the pinned toolkit
  moesweep.sweep.cuda_facts:
    cuda_home: /usr/local/cuda-12.8
    driver_min_cuda: "12.8"
    driver_min_version: "570.26"
  register: cuda

- name: Only run the selected toolkit's nvcc
  moesweep.sweep.cuda_facts:
    cuda_home: /usr/local/cuda-12.8
    gather_driver: false
    gather_toolkits: false
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    moesweep_cuda:
      description: Driver and CUDA toolkit facts.
      returned: always
      type: complex
      contains:
        nvidia_smi:
          description: Path of the nvidia-smi that was run; null when not found or not gathered.
          type: str
          sample: /usr/bin/nvidia-smi
        driver_version:
          description: NVIDIA driver version; null when the driver is absent, unusable or not gathered.
          type: str
          sample: 570.172.08
        driver_cuda_version:
          description: Highest CUDA version the driver supports, as nvidia-smi prints it; null when not shown.
          type: str
          sample: "12.8"
        driver_failure:
          description: Why there is no driver version (nvidia-smi's own failure text, not found, exit status); null otherwise.
          type: str
          sample: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        driver_ok:
          description: >-
            Whether the driver can run O(driver_min_cuda); null without O(driver_min_cuda) or when the
            driver was not gathered.
          type: bool
          sample: true
        driver_ok_basis:
          description: >-
            What decided RV(ansible_facts.moesweep_cuda.driver_ok): V(cuda) (the driver's CUDA version),
            V(driver-version) (compared with O(driver_min_version)), V(no-driver), V(unknown); null when not decided.
          type: str
          sample: cuda
        toolkits:
          description: Versioned toolkits under O(prefix), oldest first (empty when not gathered).
          type: list
          elements: dict
          contains:
            version: {description: Release from the directory name., type: str, sample: "12.8"}
            home: {description: Toolkit root., type: str, sample: /usr/local/cuda-12.8}
            nvcc:
              description: Path of its executable nvcc; null when absent.
              type: str
              sample: /usr/local/cuda-12.8/bin/nvcc
            release: {description: Release nvcc reports; null when nvcc is absent or says none., type: str, sample: "12.8"}
            nvcc_version: {description: Full version nvcc reports., type: str, sample: 12.8.93}
        selected:
          description: >-
            O(cuda_home)'s toolkit, as in RV(ansible_facts.moesweep_cuda.toolkits) plus C(output) (nvcc's text)
            and C(error); null without O(cuda_home).
          type: dict
          sample: {home: /usr/local/cuda-12.8, nvcc: /usr/local/cuda-12.8/bin/nvcc, release: "12.8", nvcc_version: 12.8.93,
                   output: "Cuda compilation tools, release 12.8, V12.8.93", error: null}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi


def read_toolkit(module, home):
    """One toolkit root: its nvcc and what ``nvcc --version`` reports."""
    nvcc = os.path.join(home, "bin", "nvcc")
    entry = {"home": home, "nvcc": None, "release": None, "nvcc_version": None, "output": None, "error": None}
    if not os.access(nvcc, os.X_OK):
        entry["error"] = "%s is missing or not executable" % nvcc
        return entry
    entry["nvcc"] = nvcc
    rc, out, err = module.run_command([nvcc, "--version"])
    entry["output"] = (out or err or "").strip()
    if rc != 0:
        entry["error"] = "%s --version exited %d" % (nvcc, rc)
        return entry
    parsed = smi.parse_nvcc_version(out)
    entry["release"], entry["nvcc_version"] = parsed["release"], parsed["version"]
    if not entry["release"]:
        entry["error"] = "%s --version printed no release" % nvcc
    return entry


def gather_toolkits(module, prefix):
    try:
        names = [n for n in os.listdir(prefix) if os.path.isdir(os.path.join(prefix, n))]
    except OSError:
        names = []
    toolkits = []
    for version in smi.toolkit_versions(names):
        entry = read_toolkit(module, os.path.join(prefix, "cuda-" + version))
        toolkits.append(dict(version=version, **{k: entry[k] for k in ("home", "nvcc", "release", "nvcc_version")}))
    return toolkits


def gather_driver(module, command):
    """``(nvidia_smi_path, header, failure)``: the plain table's header, or why there is none."""
    path = command if "/" in command else module.get_bin_path(command)
    if not path or not os.access(path, os.X_OK):
        where = "not executable" if "/" in command else "not found in PATH"
        return None, {}, "%s %s" % (command, where)
    rc, out, err = module.run_command([path])
    failure = smi.detect_driver_failure(out, err)
    header = smi.parse_smi_header(out) if not failure else {}
    if not failure and not header.get("driver_version"):
        detail = (err or out or "").strip().splitlines()
        failure = "%s exited %d%s" % (path, rc, (": " + detail[0]) if detail else " and printed no driver version")
    return path, header, failure


def main():
    module = AnsibleModule(
        argument_spec=dict(
            prefix=dict(type="path", default="/usr/local"),
            cuda_home=dict(type="path"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            gather_driver=dict(type="bool", default=True),
            gather_toolkits=dict(type="bool", default=True),
            driver_min_cuda=dict(type="str"),
            driver_min_version=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    module.run_command_environ_update = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C")
    params = module.params
    for name in ("driver_min_cuda", "driver_min_version"):
        if params[name] is not None and smi.version_tuple(params[name]) is None:
            module.fail_json(msg="%s %r is not a version (expected e.g. 12.8 / 570.26)" % (name, params[name]))

    facts = dict(
        nvidia_smi=None,
        driver_version=None,
        driver_cuda_version=None,
        driver_failure=None,
        driver_ok=None,
        driver_ok_basis=None,
        toolkits=[],
        selected=None,
    )
    if params["gather_driver"]:
        path, header, failure = gather_driver(module, params["nvidia_smi"])
        facts.update(
            nvidia_smi=path,
            driver_version=header.get("driver_version"),
            driver_cuda_version=header.get("cuda_version"),
            driver_failure=failure,
        )
        if params["driver_min_cuda"]:
            ok, basis = smi.driver_supports(
                facts["driver_version"],
                facts["driver_cuda_version"],
                params["driver_min_cuda"],
                params["driver_min_version"],
            )
            facts.update(driver_ok=ok, driver_ok_basis=basis)
    if params["gather_toolkits"]:
        facts["toolkits"] = gather_toolkits(module, params["prefix"])
    if params["cuda_home"]:
        facts["selected"] = read_toolkit(module, params["cuda_home"])
    module.exit_json(changed=False, ansible_facts=dict(moesweep_cuda=facts))


if __name__ == "__main__":
    main()
