#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU, interconnect, virtualization and CUDA toolkit facts
description:
  - Runs C(nvidia-smi) (query, C(topo -m), the plain table for the driver's CUDA version),
    C(nvcc --version) under the CUDA toolkit, and C(systemd-detect-virt) when present, and
    returns them as RV(ansible_facts.moesweep_gpu).
  - Read-only; supports check mode.
  - Fails when C(nvidia-smi) is absent or cannot talk to the driver, with its output attached.
  - Mixed GPU models are reported (RV(ansible_facts.moesweep_gpu.gpu_models),
    RV(ansible_facts.moesweep_gpu.mixed_models)), never guessed away.
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
  nvidia_smi_path:
    description:
      - Path to C(nvidia-smi). When unset it is looked up in E(PATH) and the usual sbin directories.
    type: path
  cuda_home:
    description:
      - CUDA toolkit root whose C(bin/nvcc) is queried.
      - Defaults to E(CUDA_HOME) on the target, else C(/usr/local/cuda).
    type: path
  gather_processes:
    description:
      - Also list compute processes (C(--query-compute-apps)).
    type: bool
    default: true
  host_checks:
    description:
      - Also run the host checks (RV(ansible_facts.moesweep_gpu.host_checks)), what decides multi-GPU serving
        beside the GPUs themselves - P2P, ACS / IOMMU, PCIe links, NUMA, C(/dev/shm), the unit's limits, power
        caps, persistence, Xid / ECC errors, the driver against the stack's CUDA, disk and RAM.
    type: bool
    default: true
  unit:
    description:
      - The server's systemd unit whose limits the checks judge (its running process's, else what it asks for).
    type: str
    default: sglang.service
  unit_limits:
    description:
      - What the unit asks for when it is not installed yet (systemd C(LimitMEMLOCK=) / C(LimitNOFILE=) values).
      - The default is what the sglang_server role's unit sets.
    type: dict
    default: {LimitMEMLOCK: infinity, LimitNOFILE: "1048576"}
  stack_cuda:
    description:
      - The CUDA release the serving stack's torch is built for (the sglang_env provenance's C(torch_cuda)),
        judged against the driver. Unset, the driver check only reports the driver.
    type: str
  model_bytes:
    description:
      - The model's size in bytes, for the disk and RAM checks; unset when not known yet.
    type: int
  disk_paths:
    description:
      - Paths whose free space must hold the model and the JIT caches (the server's HOME); the nearest existing
        parent is measured when a path does not exist yet.
    type: list
    elements: path
    default: []
attributes:
  facts:
    support: full
notes:
  - Sets E(LC_ALL=C) for every command so the text parsed is the C locale's.
  - The host checks read C(nvidia-smi -q), C(nvidia-smi topo -p2p r), C(lspci -vvv) when pciutils is installed,
    C(/proc/cmdline), C(/sys/kernel/iommu_groups), C(/dev/shm), C(systemctl show) of O(unit), C(/proc/1/limits) and
    C(/proc/1/status), the kernel log (C(journalctl -k -b), else C(dmesg)) and C(/proc/meminfo); decisions are
    C(plugins/module_utils/host_checks.py).
  - Without C(systemd-detect-virt) (e.g. Firecracker VMs without systemd) the virtualization fact
    falls back on C(/run/systemd/container), PID 1's C(container=) variable, DMI vendor/product and
    the C(hypervisor) CPU flag; C(source) in RV(ansible_facts.moesweep_gpu.virtualization) says which decided.
seealso:
  - module: moesweep.sweep.sglang_preflight
"""

EXAMPLES = r"""
- name: Gather GPU facts
  moesweep.sweep.gpu_facts:

- name: Use a CUDA 12.8 toolkit for nvcc and a non-standard nvidia-smi
  moesweep.sweep.gpu_facts:
    cuda_home: /usr/local/cuda-12.8
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi

- name: Show the SM and interconnect
  ansible.builtin.debug:
    msg: "{{ ansible_facts.moesweep_gpu.sm }} x{{ ansible_facts.moesweep_gpu.gpu_count }}
          over {{ ansible_facts.moesweep_gpu.interconnect }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    moesweep_gpu:
      description: GPU host facts.
      returned: always
      type: complex
      contains:
        gpu_count:
          description: Number of GPUs nvidia-smi lists.
          type: int
          sample: 8
        gpus:
          description: One entry per GPU, in index order.
          type: list
          elements: dict
          contains:
            index: {description: GPU index., type: int, sample: 0}
            name: {description: Model name., type: str, sample: NVIDIA RTX PRO 6000 Blackwell Server Edition}
            pci_bus_id: {description: PCI bus id., type: str, sample: "00000000:00:06.0"}
            compute_cap: {description: Compute capability., type: str, sample: "12.0"}
            sm: {description: SM string derived from compute_cap., type: str, sample: sm120}
            memory_total_mib: {description: Total memory (MiB)., type: int, sample: 97887}
            memory_used_mib: {description: Used memory (MiB)., type: int, sample: 0}
            driver_version: {description: Driver version., type: str, sample: 580.159.04}
            power_limit_w: {description: Current power limit (W)., type: float, sample: 600.0}
            power_max_limit_w: {description: Maximum settable power limit (W)., type: float, sample: 600.0}
            pcie_gen_current: {description: Current PCIe generation., type: int, sample: 5}
            pcie_gen_max: {description: Maximum PCIe generation., type: int, sample: 5}
            pcie_width_current: {description: Current PCIe link width., type: int, sample: 16}
            pcie_width_max: {description: Maximum PCIe link width., type: int, sample: 16}
            persistence_mode: {description: Persistence mode on., type: bool, sample: true}
            mig_mode: {description: MIG mode on (null where not supported)., type: bool, sample: false}
        gpu_models:
          description: Distinct model names, in index order.
          type: list
          elements: str
          sample: [NVIDIA H200]
        mixed_models:
          description: True when more than one GPU model is present.
          type: bool
          sample: false
        sm:
          description: The SM string shared by every GPU; null when they differ.
          type: str
          sample: sm90
        compute_cap:
          description: The compute capability shared by every GPU; null when they differ.
          type: str
          sample: "9.0"
        driver_version:
          description: NVIDIA driver version.
          type: str
          sample: 580.159.04
        driver_cuda_version:
          description: Highest CUDA version the driver supports (plain nvidia-smi header); null if not shown.
          type: str
          sample: "13.0"
        interconnect:
          description: >-
            GPU-to-GPU interconnect from C(nvidia-smi topo -m): V(nvlink) (all pairs NV#),
            V(pcie-pix), V(pcie-pxb), V(pcie-phb), V(pcie-node), V(pcie-sys) (no NVLink; the
            farthest PCIe level seen), V(mixed) (NVLink and PCIe pairs), V(single), V(unknown).
          type: str
          sample: nvlink
        interconnect_pairs:
          description: Number of unordered GPU pairs per link class.
          type: dict
          sample: {nvlink: 1}
        topology:
          description: The parsed C(topo -m) matrix (links, cpu_affinity, numa_affinity per GPU).
          type: dict
          sample: {links: {GPU0: {GPU1: NV18}}, cpu_affinity: {GPU0: 0-31}, numa_affinity: {GPU0: "0"}}
        processes:
          description: Compute processes using the GPUs (empty when none, or not gathered).
          type: list
          elements: dict
          sample:
            - pid: 1234
              process_name: "sglang::scheduler_TP0"
              used_memory_mib: 81234
              gpu_bus_id: "00000000:00:06.0"
        virtualization:
          description: >-
            C(type) (systemd-detect-virt vocabulary: V(none), V(kvm), V(qemu), V(systemd-nspawn), ...; V(vm)
            when only the hypervisor CPU flag says so; V(unknown)), C(kind) (V(none), V(vm), V(container),
            V(unknown)), C(source) (which evidence decided) and C(hypervisor) (the CPU's hypervisor flag,
            whatever decided C(kind): a container in a VM shows both layers; null when unreadable).
          type: dict
          sample: {type: kvm, kind: vm, source: systemd-detect-virt, hypervisor: true}
        cuda_home:
          description: The CUDA toolkit root looked at.
          type: str
          sample: /usr/local/cuda
        cuda_toolkit:
          description: C(nvcc --version) under cuda_home; nulls when nvcc is absent.
          type: dict
          sample: {nvcc: /usr/local/cuda/bin/nvcc, release: "12.8", version: 12.8.93}
        cpu_count:
          description: Logical CPUs usable by this process.
          type: int
          sample: 32
        numa_nodes:
          description: Online NUMA node ids.
          type: list
          elements: int
          sample: [0]
        nvidia_smi:
          description: Path of the nvidia-smi that was run.
          type: str
          sample: /usr/bin/nvidia-smi
        host_checks:
          description: >-
            One entry per host check (empty with O(host_checks=false)): C(name), C(verdict) (V(ok), V(warn): a
            caveat, V(fail): the preflight refuses the point), C(evidence) (what was read), C(fix) and C(source)
            (the public document of the threshold).
          type: list
          elements: dict
          sample:
            - name: shm
              verdict: warn
              evidence: /dev/shm is 64 MiB, below NCCL's 1 GiB example (--shm-size=1g)
              fix: enlarge /dev/shm (`mount -o remount,size=16G /dev/shm`, or the container's --shm-size)
              source: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/runtime_and_mpi_issues.html
        host_check_summary:
          description: The checks that are not ok, one line each (name, evidence, fix), by verdict.
          type: dict
          sample: {fail: [], warn: ["host check shm: /dev/shm is 64 MiB ... Fix: ..."]}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl

SBIN_DIRS = ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib"]


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _fail_if_driver_failed(module, cmd, rc, out, err):
    failure = smi.detect_driver_failure(out, err)
    if failure or rc != 0:
        host = os.uname()[1]
        reason = failure or f"nvidia-smi exited {rc}"
        module.fail_json(
            msg=f"NVIDIA driver not usable on {host}: {reason}",
            cmd=" ".join(cmd),
            rc=rc,
            stdout=out,
            stderr=err,
        )


def gather_virtualization(module):
    detect = module.get_bin_path("systemd-detect-virt")
    detect_out = None
    if detect:
        # exit 1 with "none" when not virtualized: both are answers.
        _rc, detect_out, _err = module.run_command([detect])
    container = _read("/run/systemd/container")
    if not container:
        environ = _read("/proc/1/environ") or ""
        for item in environ.split("\x00"):
            if item.startswith("container="):
                container = item.split("=", 1)[1]
    dmi = "\n".join(
        x for x in (_read("/sys/class/dmi/id/sys_vendor"), _read("/sys/class/dmi/id/product_name")) if x
    )
    return smi.classify_virtualization(detect_out, container, dmi, _read("/proc/cpuinfo"))


def gather_cuda_toolkit(module, cuda_home):
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    result = {"nvcc": None, "release": None, "version": None}
    if not os.access(nvcc, os.X_OK):
        return result
    rc, out, _err = module.run_command([nvcc, "--version"])
    result["nvcc"] = nvcc
    if rc == 0:
        result.update(smi.parse_nvcc_version(out))
    return result


def gather_cpus():
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count()
    online = _read("/sys/devices/system/node/online")
    nodes = smi.parse_cpu_list(online) if online else [0]
    return count, nodes


def _shm_bytes():
    try:
        if not os.path.ismount("/dev/shm"):
            return None
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def _free_bytes(path):
    """Free bytes for an unprivileged writer at ``path`` or its nearest existing parent: (measured path, bytes)."""
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return probe, None
    return probe, st.f_bavail * st.f_frsize


def _cpus_allowed(status_text):
    for line in (status_text or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def _kernel_log(module):
    """The kernel's messages of this boot (``journalctl -k -b``, else ``dmesg``); None when neither can be read."""
    journalctl = module.get_bin_path("journalctl")
    if journalctl:
        rc, out, _err = module.run_command([journalctl, "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"])
        if rc == 0:
            return "\n".join(line for line in out.splitlines() if "NVRM" in line)
    dmesg = module.get_bin_path("dmesg")
    if dmesg:
        rc, out, _err = module.run_command([dmesg])
        if rc == 0:
            return "\n".join(line for line in out.splitlines() if "NVRM" in line)
    return None


def gather_host_inputs(module, nvidia_smi, facts):
    """What the host checks read (``host_checks.evaluate``'s inputs), read-only."""
    params = module.params
    inputs = dict(
        gpu_count=facts["gpu_count"],
        driver_version=facts["driver_version"],
        driver_cuda_version=facts["driver_cuda_version"],
        stack_cuda=params["stack_cuda"],
        topology=facts["topology"],
        virtualized=facts["virtualization"].get("kind") == "vm",
        model_bytes=params["model_bytes"],
    )
    rc, out, _err = module.run_command([nvidia_smi, "-q"])
    inputs["nvidia_smi_q"] = out if rc == 0 else ""
    rc, out, _err = module.run_command([nvidia_smi, "topo", "-p2p", "r"])
    inputs["topo_p2p"] = out if rc == 0 else ""
    inputs["cmdline"] = _read("/proc/cmdline")
    try:
        inputs["iommu_groups"] = bool(os.listdir("/sys/kernel/iommu_groups"))
    except OSError:
        inputs["iommu_groups"] = False
    lspci = module.get_bin_path("lspci", opt_dirs=SBIN_DIRS)
    inputs["lspci"] = None
    if lspci:
        rc, out, _err = module.run_command([lspci, "-vvv"])
        inputs["lspci"] = out if rc == 0 else None
    inputs["shm_bytes"] = _shm_bytes()
    inputs["manager_limits"] = _read("/proc/1/limits")
    inputs["manager_status"] = _read("/proc/1/status")
    inputs["unit_cpus"] = _cpus_allowed(inputs["manager_status"])
    inputs["unit_requested"] = dict((k.replace("Limit", "").lower(), str(v))
                                    for k, v in (params["unit_limits"] or {}).items())
    systemctl = module.get_bin_path("systemctl")
    if systemctl and params["unit"]:
        shown = Systemctl(module.run_command, systemctl).show(
            params["unit"], ("LoadState", "MainPID", "LimitMEMLOCK", "LimitNOFILE"))[0]
        if shown.get("LoadState") == "loaded":
            inputs["unit_requested"] = {"memlock": shown.get("LimitMEMLOCK", "infinity"),
                                        "nofile": shown.get("LimitNOFILE", "infinity")}
        pid = shown.get("MainPID", "0")
        if pid.isdigit() and int(pid) > 0:
            inputs["unit_proc_limits"] = _read("/proc/%s/limits" % pid)
            inputs["unit_cpus"] = _cpus_allowed(_read("/proc/%s/status" % pid)) or inputs["unit_cpus"]
    inputs["kernel_log"] = _kernel_log(module)
    inputs["meminfo"] = _read("/proc/meminfo")
    disk = []
    for path in params["disk_paths"] or []:
        measured, free = _free_bytes(path)
        disk.append({"path": path, "free_bytes": free,
                     "what": "measured on %s" % measured if measured != path else "exists"})
    inputs["disk"] = disk
    return inputs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type="path"),
            cuda_home=dict(type="path"),
            gather_processes=dict(type="bool", default=True),
            host_checks=dict(type="bool", default=True),
            unit=dict(type="str", default="sglang.service"),
            unit_limits=dict(type="dict", default={"LimitMEMLOCK": "infinity", "LimitNOFILE": "1048576"}),
            stack_cuda=dict(type="str"),
            model_bytes=dict(type="int"),
            disk_paths=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    module.run_command_environ_update = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C")

    nvidia_smi = module.params["nvidia_smi_path"]
    if nvidia_smi:
        if not os.access(nvidia_smi, os.X_OK):
            module.fail_json(
                msg=f"no NVIDIA driver found on {os.uname()[1]} "
                f"(nvidia_smi_path {nvidia_smi} is not executable)"
            )
    else:
        nvidia_smi = module.get_bin_path("nvidia-smi", opt_dirs=SBIN_DIRS)
        if not nvidia_smi:
            module.fail_json(
                msg="no NVIDIA driver found on {} (nvidia-smi not in PATH nor in {}); install the driver "
                "or set nvidia_smi_path".format(os.uname()[1], ", ".join(SBIN_DIRS))
            )

    cmd = [nvidia_smi, "--query-gpu=" + ",".join(smi.QUERY_GPU_FIELDS), "--format=csv,nounits"]
    rc, out, err = module.run_command(cmd)
    _fail_if_driver_failed(module, cmd, rc, out, err)
    gpus = smi.parse_query_gpu(out)
    if not gpus:
        module.fail_json(
            msg=f"nvidia-smi listed no GPU on {os.uname()[1]}",
            cmd=" ".join(cmd),
            rc=rc,
            stdout=out,
            stderr=err,
        )

    header_cmd = [nvidia_smi]
    rc, out, err = module.run_command(header_cmd)
    _fail_if_driver_failed(module, header_cmd, rc, out, err)
    header = smi.parse_smi_header(out)

    topo_cmd = [nvidia_smi, "topo", "-m"]
    rc, out, err = module.run_command(topo_cmd)
    topology = (
        smi.parse_topo_matrix(out) if rc == 0 else {"links": {}, "cpu_affinity": {}, "numa_affinity": {}}
    )
    if len(gpus) == 1:
        interconnect, pairs = "single", {}
    else:
        interconnect, pairs = smi.summarise_interconnect(topology)

    processes = []
    if module.params["gather_processes"]:
        apps_cmd = [
            nvidia_smi,
            "--query-compute-apps=" + ",".join(smi.QUERY_APPS_FIELDS),
            "--format=csv,nounits",
        ]
        rc, out, err = module.run_command(apps_cmd)
        if rc == 0:
            processes = smi.parse_compute_apps(out)

    cuda_home = module.params["cuda_home"] or os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    models, mixed = smi.summarise_models(gpus)
    caps = set(g["compute_cap"] for g in gpus)
    cpu_count, numa_nodes = gather_cpus()

    facts = dict(
        gpu_count=len(gpus),
        gpus=gpus,
        gpu_models=models,
        mixed_models=mixed,
        sm=smi.summarise_sm(gpus),
        compute_cap=caps.pop() if len(caps) == 1 else None,
        driver_version=gpus[0].get("driver_version") or header["driver_version"],
        driver_cuda_version=header["cuda_version"],
        interconnect=interconnect,
        interconnect_pairs=pairs,
        topology=topology,
        processes=processes,
        virtualization=gather_virtualization(module),
        cuda_home=cuda_home,
        cuda_toolkit=gather_cuda_toolkit(module, cuda_home),
        cpu_count=cpu_count,
        numa_nodes=numa_nodes,
        nvidia_smi=nvidia_smi,
        host_checks=[],
        host_check_summary={"fail": [], "warn": []},
    )
    if module.params["host_checks"]:
        facts["host_checks"] = hc.evaluate(gather_host_inputs(module, nvidia_smi, facts))
        facts["host_check_summary"] = hc.summarise(facts["host_checks"])
    module.exit_json(changed=False, ansible_facts=dict(moesweep_gpu=facts))


if __name__ == "__main__":
    main()
