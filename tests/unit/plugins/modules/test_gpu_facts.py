"""gpu_facts with run_command / get_bin_path patched to replay real recorded output."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from ansible.module_utils import basic

# isort: split
from ansible_collections.moesweep.sweep.plugins.modules import gpu_facts
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIX = FIXTURES_ROOT / "nvidia-smi"
H200 = FIX / "h200-x2"
RTX = FIX / "rtx-pro-6000-public"
FAIL = FIX / "driver-failure"


def h200_query() -> str:
    return "\n".join((H200 / "query-gpu.csv").read_text().splitlines()[:3]) + "\n"


def replay(outputs, calls=None, environ=None):
    """A run_command that answers by the argv shape, recording each call and its environment."""

    def run_command(self, args, **kwargs):
        if calls is not None:
            calls.append(list(args))
        if environ is not None:
            environ.append(dict(self.run_command_environ_update))
        key = args[1].split("=")[0] if len(args) > 1 else "plain"
        if args[0].endswith("nvcc"):
            key = "nvcc"
        elif args[0].endswith("systemd-detect-virt"):
            key = "virt"
        elif key == "topo":
            key = "topo"
        return outputs.get(key, (0, "", ""))

    return run_command


H200_OUTPUTS = {
    "--query-gpu": (0, h200_query(), ""),
    "plain": (0, (H200 / "nvidia-smi.txt").read_text(), ""),
    "topo": (0, (H200 / "topo-m.txt").read_text(), ""),
    "--query-compute-apps": (0, "gpu_bus_id, pid, process_name, used_memory [MiB]\n", ""),
}


def bin_path(found):
    def get_bin_path(self, name, required=False, opt_dirs=None):
        return found.get(name)

    return get_bin_path


@pytest.fixture
def run(run_module):
    """Run the module (the shared harness) on replayed output: ((kind, result), the commands run, their
    environments)."""

    def call(args, outputs, found, reads=None, nvcc_ok=False):
        calls, environ = [], []
        files = reads or {}
        real_access = gpu_facts.os.access

        def access(path, mode):
            if str(path).endswith("/bin/nvcc"):
                return nvcc_ok
            return real_access(path, mode)

        with (
            mock.patch.object(basic.AnsibleModule, "run_command", replay(outputs, calls, environ)),
            mock.patch.object(basic.AnsibleModule, "get_bin_path", bin_path(found)),
            mock.patch.object(gpu_facts, "_read", lambda p: files.get(p)),
            mock.patch.object(gpu_facts.os, "access", access),
        ):
            out = run_module(gpu_facts, args)
        return out, calls, environ

    return call


def test_h200_facts_from_real_output(run):
    outputs = dict(H200_OUTPUTS)
    outputs["nvcc"] = (0, "Cuda compilation tools, release 12.8, V12.8.93\n", "")
    reads = {"/sys/devices/system/node/online": "0\n", "/sys/class/dmi/id/sys_vendor": "Firecracker\n"}
    (kind, result), calls, environ = run(
        {"cuda_home": "/usr/local/cuda-12.8"},
        outputs,
        {"nvidia-smi": "/usr/bin/nvidia-smi"},
        reads,
        nvcc_ok=True,
    )
    assert kind == "exit"
    assert result["changed"] is False
    facts = result["ansible_facts"]["moesweep_gpu"]
    assert facts["gpu_count"] == 2
    assert facts["sm"] == "sm90" and facts["compute_cap"] == "9.0"
    assert facts["gpu_models"] == ["NVIDIA H200"] and facts["mixed_models"] is False
    assert facts["driver_version"] == "580.159.04" and facts["driver_cuda_version"] == "13.0"
    assert facts["interconnect"] == "nvlink" and facts["interconnect_pairs"] == {"nvlink": 1}
    assert facts["gpus"][1]["pci_bus_id"] == "00000000:00:07.0"
    assert facts["gpus"][0]["power_max_limit_w"] == 700.0
    assert facts["processes"] == []
    # systemd-detect-virt absent on that Firecracker VM: DMI decides
    assert facts["virtualization"] == {"type": "firecracker", "kind": "vm", "source": "dmi", "hypervisor": None}
    assert facts["cuda_toolkit"] == {
        "nvcc": "/usr/local/cuda-12.8/bin/nvcc",
        "release": "12.8",
        "version": "12.8.93",
    }
    assert facts["numa_nodes"] == [0] and facts["cpu_count"] >= 1
    assert calls[0][1].startswith("--query-gpu=index,name,pci.bus_id,compute_cap")
    assert all(env["LC_ALL"] == "C" for env in environ)
    json.dumps(result)  # facts must be serialisable


def test_check_mode_runs_read_only(run):
    (kind, result), calls, _ = run(
        {"_ansible_check_mode": True}, H200_OUTPUTS, {"nvidia-smi": "/usr/bin/nvidia-smi"}
    )
    assert kind == "exit" and result["changed"] is False
    assert all(c[0] in ("/usr/bin/nvidia-smi",) for c in calls)


def test_systemd_detect_virt_used_when_present(run):
    outputs = dict(H200_OUTPUTS, virt=(0, "kvm\n", ""))
    found = {"nvidia-smi": "/usr/bin/nvidia-smi", "systemd-detect-virt": "/usr/bin/systemd-detect-virt"}
    (kind, result), _, _ = run({}, outputs, found)
    assert result["ansible_facts"]["moesweep_gpu"]["virtualization"]["type"] == "kvm"


def test_pcie_phb_from_public_rtx_topology_and_mixed_models(run):
    query = (
        "index, name, pci.bus_id, compute_cap, memory.total [MiB], memory.used [MiB]\n"
        "0, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 00000000:01:00.0, 12.0, 97887 MiB, 0 MiB\n"
        "1, NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 00000000:02:00.0, 12.0, "
        "97887 MiB, 0 MiB\n"
    )
    outputs = dict(H200_OUTPUTS)
    outputs["--query-gpu"] = (0, query, "")
    outputs["topo"] = (0, (RTX / "topo-m-2x-workstation.txt").read_text(), "")
    (kind, result), _, _ = run({}, outputs, {"nvidia-smi": "/usr/bin/nvidia-smi"})
    facts = result["ansible_facts"]["moesweep_gpu"]
    assert facts["sm"] == "sm120" and facts["interconnect"] == "pcie-phb"
    assert facts["mixed_models"] is True and len(facts["gpu_models"]) == 2


def test_no_nvidia_smi_fails_clearly(run):
    (kind, result), _, _ = run({}, H200_OUTPUTS, {})
    assert kind == "fail"
    assert result["msg"].startswith("no NVIDIA driver found on ")
    assert "nvidia-smi not in PATH" in result["msg"]


@pytest.mark.parametrize("name", ["nvidia-smi-not-loaded.txt", "nvml-version-mismatch.txt"])
def test_driver_not_loaded_attaches_real_text(name, run):
    text = (FAIL / name).read_text()
    outputs = {"--query-gpu": (9, text, "")}
    (kind, result), _, _ = run({}, outputs, {"nvidia-smi": "/usr/bin/nvidia-smi"})
    assert kind == "fail"
    assert text.splitlines()[0].strip() in result["msg"]
    assert result["stdout"] == text and result["rc"] == 9 and "stderr" in result


def test_nvidia_smi_path_must_be_executable(tmp_path, run):
    (kind, result), _, _ = run({"nvidia_smi_path": str(tmp_path / "nope")}, H200_OUTPUTS, {})
    assert kind == "fail" and "nvidia_smi_path" in result["msg"]


def test_host_checks_from_recorded_h200_outputs_and_a_capped_service_manager(run):
    """The host checks gathered with the facts: the H200 recording's -q and topo -p2p r, a service manager whose
    memlock is 64 KiB without CAP_SYS_RESOURCE (the role's unit asks for infinity and gets 64 KiB), a 64 MiB
    /dev/shm is not read here (the test machine's is), and the R570 / CUDA 13 refusal from the stack's CUDA."""
    one = FIX / "h200-x1-device"
    outputs = dict(H200_OUTPUTS)
    outputs["-q"] = (0, (one / "nvidia-smi-q.txt").read_text(), "")
    outputs["topo"] = (0, (H200 / "topo-p2p-r.txt").read_text(), "")
    reads = {
        "/proc/1/limits": (FIXTURES_ROOT / "host_checks" / "proc-limits-memlock-64k-gc3pie.txt").read_text(),
        "/proc/1/status": "Name:\tsystemd\nCapEff:\t000001fffeffffff\nCpus_allowed_list:\t0-31\n",
        "/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro",
        "/proc/meminfo": "MemTotal:       2113253496 kB\n",
    }
    (kind, result), calls, _env = run({"stack_cuda": "13.0", "unit": "sglang.service"}, outputs,
                                  {"nvidia-smi": "/usr/bin/nvidia-smi"}, reads)
    facts = result["ansible_facts"]["moesweep_gpu"]
    checks = {c["name"]: c for c in facts["host_checks"]}
    assert checks["driver_cuda"]["verdict"] == "ok"  # 580.159.04 runs CUDA 13.0
    assert checks["p2p"]["verdict"] == "ok" and checks["pcie_link"]["verdict"] == "ok"
    assert checks["limits"]["verdict"] == "warn" and "memlock 64 KiB" in checks["limits"]["evidence"]
    assert any(line.startswith("host check limits:") for line in facts["host_check_summary"]["warn"])
    assert ["/usr/bin/nvidia-smi", "-q"] in calls and ["/usr/bin/nvidia-smi", "topo", "-p2p", "r"] in calls
    json.dumps(facts)


def test_host_checks_off(run):
    (kind, result), calls, _env = run({"host_checks": False}, dict(H200_OUTPUTS), {"nvidia-smi": "/usr/bin/nvidia-smi"})
    facts = result["ansible_facts"]["moesweep_gpu"]
    assert facts["host_checks"] == [] and facts["host_check_summary"] == {"fail": [], "warn": []}
    assert ["/usr/bin/nvidia-smi", "-q"] not in calls
