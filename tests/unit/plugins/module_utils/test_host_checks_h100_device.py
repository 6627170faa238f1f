"""The host checks on raw inputs recorded on a real single NVIDIA H100 80GB HBM3 (a Firecracker VM, driver
580.159.04, torch 2.11.0+cu130; tests/fixtures/host_checks/h100-x1-device/SOURCES.md): every input read the way
gpu_facts reads it on a host, every verdict as that machine earned it, under a bf16 matmul load and idle."""

from __future__ import annotations

import re

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi
from helpers.paths import FIXTURES

H100 = FIXTURES / "host_checks" / "h100-x1-device"


def output(name: str) -> str:
    """What the recorded command printed: the file without its first line (the command) and its last (its exit
    status, ``[rc=N]``)."""
    lines = (H100 / name).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("$ ") and re.fullmatch(r"\[rc=\d+\]", lines[-1]), name
    return "\n".join(lines[1:-1]) + "\n"


def df_bytes(mount: str, column: str) -> int:
    """A column of the recorded ``df -B1`` (its first table) for a mount point."""
    head, *rows = output("df.txt").split("\n\n")[0].splitlines()
    index = head.split().index(column)
    return int(next(r.split() for r in rows if r.split()[-1] == mount)[index])


def stack_cuda() -> str:
    torch_line = output("python-stack.txt").splitlines()[1]  # "2.11.0+cu130 13.0": torch.__version__, .version.cuda
    return torch_line.split()[1]


def inputs(q_file: str) -> dict:
    header = smi.parse_smi_header(output("nvidia-smi.txt"))
    lspci = output("lspci.txt")  # `which lspci` found none (rc=1): gpu_facts passes None
    numa = output("numa.txt")
    return {
        "gpu_count": 1,
        "nvidia_smi_q": output(q_file),
        "topo_p2p": output("topo-p2p-r.txt"),
        "topology": smi.parse_topo_matrix(output("topo-m.txt")),
        "driver_version": header["driver_version"],
        "driver_cuda_version": header["cuda_version"],
        "stack_cuda": stack_cuda(),
        "cmdline": output("cmdline.txt").splitlines()[0],
        # `ls /sys/kernel/iommu_groups` printed nothing: no group
        "iommu_groups": bool(output("iommu.txt").split("\n\n")[0].strip()),
        "lspci": lspci if lspci.strip() else None,
        "virtualized": "hypervisor" in output("virt.txt"),
        # the recording shell's /proc/self/limits: the limits a process of that machine's manager gets
        "manager_limits": output("limits.txt").split("\n\n", 1)[1],
        "manager_status": "",
        "unit_requested": {"memlock": "infinity", "nofile": "1048576"},
        "unit_cpus": re.search(r"Cpus_allowed_list:\s*(\S+)", numa).group(1),
        "shm_bytes": df_bytes("/dev/shm", "1B-blocks"),
        "kernel_log": output("dmesg-xid.txt"),
        "meminfo": output("meminfo.txt"),
        "disk": [{"path": "/", "free_bytes": df_bytes("/", "Available"), "what": "exists"}],
    }


def by_name(checks):
    return {c["name"]: c for c in checks}


def test_the_recorded_inputs_read_as_that_machine():
    header = smi.parse_smi_header(output("nvidia-smi.txt"))
    assert (header["driver_version"], header["cuda_version"]) == ("580.159.04", "13.0")
    assert "580.159.04" in output("driver-version.txt")
    assert stack_cuda() == "13.0"
    assert df_bytes("/dev/shm", "1B-blocks") == 128 << 30
    assert hc.parse_proc_limits(output("limits.txt").split("\n\n", 1)[1])["memlock"] == (None, None)
    assert hc.parse_topo_p2p(output("topo-p2p-r.txt")) == {"GPU0": {"GPU0": "X"}}
    (loaded,) = hc.parse_q_gpus(output("nvidia-smi-q-load.txt"))
    assert (loaded["pcie_gen_current"], loaded["pcie_gen_max"], loaded["pcie_width_current"],
            loaded["pcie_width_max"]) == (5, 5, 16, 16)
    assert (loaded["power_limit_w"], loaded["power_default_w"], loaded["power_max_w"]) == (700.0, 700.0, 700.0)
    assert loaded["persistence_mode"] is True and loaded["utilization_gpu"] > 0
    # the same link the CSV query gave under the same load
    csv = output("query-load.csv").splitlines()
    row = dict(zip([c.strip() for c in csv[0].split(",")], [v.strip() for v in csv[1].split(",")], strict=True))
    assert (row["pcie.link.gen.current"], row["pcie.link.width.current"], row["power.limit [W]"]) == (
        "5", "16", "700.00 W")


@pytest.mark.parametrize("q_file", ["nvidia-smi-q-load.txt", "nvidia-smi-q-idle.txt"])
def test_every_check_on_the_h100_recording(q_file):
    checks = by_name(hc.evaluate(inputs(q_file)))
    assert set(checks) == {"driver_cuda", "p2p", "acs_iommu", "pcie_link", "numa", "shm", "limits", "power_cap",
                           "persistence", "gpu_errors", "disk", "ram"}
    verdicts = {name: c["verdict"] for name, c in checks.items()}
    assert verdicts == {name: "ok" for name in checks}, {n: checks[n]["evidence"] for n, v in verdicts.items()
                                                         if v != "ok"}
    evidence = {name: c["evidence"] for name, c in checks.items()}
    assert evidence["driver_cuda"] == "driver 580.159.04 supports CUDA 13.0; the stack's torch is built for CUDA 13.0"
    assert evidence["pcie_link"] == "every link at its maximum width (x16, gen 5)"
    assert evidence["power_cap"] == "every GPU at its default power limit (700 W)"
    assert evidence["persistence"] == "persistence mode on for every GPU"
    assert evidence["limits"].startswith("the unit gets memlock unlimited")
    assert evidence["shm"].startswith("/dev/shm 128 GiB")
    assert evidence["gpu_errors"] == "no uncorrected ECC error, no pending remap, no fatal Xid since boot"
    assert evidence["numa"].startswith("the unit's CPUs 0-15 include CPUs near every GPU")


def test_the_h100_vm_has_no_room_for_the_reference_model():
    """The same machine judged for GLM-5-NVFP4 (about 453 GB): 64 GiB free on / fails the disk check before any
    download, and 126 GiB of RAM cannot keep the weights in the page cache."""
    checks = by_name(hc.evaluate(dict(inputs("nvidia-smi-q-load.txt"), model_bytes=453 * 10 ** 9)))
    assert checks["disk"]["verdict"] == "fail" and "64.0 GiB free on /" in checks["disk"]["evidence"]
    assert checks["ram"]["verdict"] == "warn"


def test_the_h100_driver_against_an_older_and_a_newer_stack():
    assert hc.check_driver("580.159.04", "13.0", "12.8")["verdict"] == "ok"
    newer = hc.check_driver("580.159.04", "13.0", "13.1")
    assert newer["verdict"] == "warn" and "minor version compatibility" in newer["evidence"]
