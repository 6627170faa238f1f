"""Real output of one H200 (the workplace's device machine) through the parsers, gpu_facts and the evaluator.

Recorded by bench/device/h200_facts.sh on 2026-11-29 (tests/fixtures/nvidia-smi/h200-x1-device/SOURCES.md).
The gpu_facts result recorded on the same machine in the same run (tests/fixtures/gpu_facts/) is
the reference: replaying the raw output through gpu_facts here must give the same facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as n
from ansible_collections.moesweep.sweep.plugins.modules import gpu_facts
from ansible_collections.moesweep.sweep.plugins.plugin_utils import compat
from helpers.paths import FIXTURES as FIXTURES_ROOT
from helpers.paths import REPO

FIXTURES = FIXTURES_ROOT
DEV = FIXTURES_ROOT / "nvidia-smi" / "h200-x1-device"
FACTS_FILE = FIXTURES_ROOT / "gpu_facts" / "h200-x1-device.json"
FACTS_LOAD_FILE = FIXTURES_ROOT / "gpu_facts" / "h200-x1-device-under-load.json"
RESULTS = REPO / "bench" / "device" / "results" / "h200-x1-20261129"
KB = compat.load_kb()

DRIVER = "580.159.04"
CUDA = "13.0"
BUS_ID = "00000000:00:06.0"


def read(name: str) -> str:
    return (DEV / name).read_text(encoding="utf-8")


def recorded_facts(path: Path = FACTS_FILE) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["ansible_facts"]["moesweep_gpu"]


# ---- nvidia-smi parsers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["query-gpu.csv", "query-gpu-nounits.csv"])
def test_query_gpu_one_h200_sm90(name):
    gpus = n.parse_query_gpu(read(name))
    assert len(gpus) == 1
    g = gpus[0]
    assert g["index"] == 0 and g["name"] == "NVIDIA H200" and g["pci_bus_id"] == BUS_ID
    assert g["compute_cap"] == "9.0" and g["sm"] == "sm90"
    assert g["memory_total_mib"] == 143771 and g["memory_used_mib"] == 0
    assert g["driver_version"] == DRIVER
    assert g["power_limit_w"] == 700.0 and g["power_max_limit_w"] == 700.0
    assert (g["pcie_gen_current"], g["pcie_gen_max"], g["pcie_width_current"], g["pcie_width_max"]) == (5, 5, 16, 16)
    assert g["persistence_mode"] is True and g["mig_mode"] is False
    assert n.summarise_sm(gpus) == "sm90"
    assert n.summarise_models(gpus) == (["NVIDIA H200"], False)


def test_units_and_nounits_read_the_same():
    assert n.parse_query_gpu(read("query-gpu.csv")) == n.parse_query_gpu(read("query-gpu-nounits.csv"))


def test_query_gpu_under_load_sees_the_memory_held():
    (g,) = n.parse_query_gpu(read("query-gpu-under-bf16-matmul.csv"))
    assert g["memory_used_mib"] == 21709 and g["sm"] == "sm90"


@pytest.mark.parametrize(
    "name,smi_version",
    [("nvidia-smi.txt", DRIVER), ("nvidia-smi-under-bf16-matmul.txt", DRIVER), ("nvidia-smi-q.txt", None)],
)
def test_driver_and_cuda_versions_from_the_header(name, smi_version):
    # -q prints no "NVIDIA-SMI x.y" banner, only "Driver Version : ..." and "CUDA Version : ..."
    assert n.parse_smi_header(read(name)) == {
        "smi_version": smi_version,
        "driver_version": DRIVER,
        "cuda_version": CUDA,
    }


def test_no_driver_failure_detected_in_real_output():
    for name in ("nvidia-smi.txt", "nvidia-smi-q.txt", "query-gpu.csv", "topo-m.txt", "nvlink-s.txt"):
        assert n.detect_driver_failure(read(name)) is None, name


def test_topo_single_gpu_matrix_and_summary():
    text = read("topo-m.txt")
    assert "\x1b[4m" in text and "\t" in text  # the recording kept nvidia-smi's underline and tabs
    topo = n.parse_topo_matrix(text)
    assert topo["devices"] == ["GPU0"]
    assert topo["links"] == {"GPU0": {"GPU0": "X"}}
    assert topo["cpu_affinity"] == {"GPU0": "0-15"}
    assert topo["numa_affinity"] == {"GPU0": "0"}
    assert n.summarise_interconnect(topo) == ("single", {})


def test_compute_apps_idle_is_empty():
    assert n.parse_compute_apps(read("compute-apps-idle.csv")) == []


@pytest.mark.parametrize(
    "name", ["compute-apps-under-bf16-matmul.csv", "compute-apps-under-bf16-matmul-module-order.csv"]
)
def test_compute_apps_under_load_either_field_order(name):
    # nvidia-smi names the column used_gpu_memory even when asked for used_memory
    assert "used_gpu_memory [MiB]" in read(name)
    assert n.parse_compute_apps(read(name)) == [
        {"gpu_bus_id": BUS_ID, "pid": 891, "process_name": "/opt/torch/.venv/bin/python3", "used_memory_mib": 21700}
    ]


def test_lms_samples_parse_as_csv_with_units():
    rows = n.parse_csv(read("query-lms250-under-bf16-matmul.csv"))
    assert len(rows) == 32
    # asked for clocks.sm; nvidia-smi's header says clocks.current.sm
    assert set(rows[0]) == {
        "timestamp",
        "index",
        "utilization.gpu",
        "power.draw",
        "power.limit",
        "clocks.current.sm",
        "clocks.max.sm",
        "memory.used",
    }
    assert all(n.to_number(r["memory.used"]) == 21709 for r in rows)
    assert all(n.to_number(r["clocks.max.sm"]) == 1980 for r in rows)
    assert all(680.0 < n.to_number(r["power.draw"]) <= 700.0 for r in rows)


def test_nvcc_13_0():
    assert n.parse_nvcc_version(read("nvcc-version.txt")) == {"release": "13.0", "version": "13.0.88"}


def test_virtualization_evidence():
    flags = read("cpuinfo-flags.txt")
    assert n.cpuinfo_has_hypervisor(flags)
    # no systemd-detect-virt, no DMI; only the stale container file and the hypervisor flag
    assert n.classify_virtualization(None, None, "", flags) == {"type": "vm", "kind": "vm", "source": "cpuinfo",
                                                                "hypervisor": True}
    assert n.classify_virtualization(None, "docker", "", flags)["source"] == "container-hint"
    assert "Hypervisor vendor:                       KVM" in read("lscpu.txt")
    assert "-fc-" in read("uname.txt")


def test_virtualization_of_the_device_vm_reports_both_layers():
    # /run/systemd/container reads 'docker' on this Firecracker VM (baked into the image it boots) while
    # the CPU says hypervisor (lscpu: Hypervisor vendor KVM): both layers are reported, neither guessed away.
    virt = n.classify_virtualization(
        None, "docker", "", (DEV / "cpuinfo-flags.txt").read_text())
    assert virt["kind"] == "container" and virt["hypervisor"] is True


# ---- gpu_facts replayed on the real output == gpu_facts as it ran on the machine ------------------


class _Exit(Exception):
    pass


def _replay_run_command(load: bool):
    suffix = "-under-bf16-matmul" if load else ""

    def run_command(self, args, **kwargs):
        if args[0].endswith("nvcc"):
            return 0, read("nvcc-version.txt"), ""
        if len(args) == 1:
            return 0, read(f"nvidia-smi{suffix}.txt"), ""
        if args[1].startswith("--query-gpu="):
            assert args[1] == "--query-gpu=" + ",".join(n.QUERY_GPU_FIELDS)
            assert args[2] == "--format=csv,nounits"
            if load:
                return 0, read("query-gpu-under-bf16-matmul.csv"), ""
            return 0, read("query-gpu-nounits.csv"), ""
        if args[1:] == ["topo", "-m"]:
            return 0, read("topo-m.txt"), ""
        if args[1].startswith("--query-compute-apps="):
            assert args[1] == "--query-compute-apps=gpu_bus_id,pid,process_name,used_memory"
            return 0, read("compute-apps-under-bf16-matmul-module-order.csv" if load else "compute-apps-idle.csv"), ""
        raise AssertionError(f"unexpected command {args}")

    return run_command


def _replay_gpu_facts(load: bool) -> dict:
    reads = {
        "/run/systemd/container": read("virt-evidence.txt").splitlines()[0].split(": ", 1)[1] + "\n",
        "/proc/1/environ": None,  # unreadable there, even as root
        "/sys/class/dmi/id/sys_vendor": None,
        "/sys/class/dmi/id/product_name": None,
        "/proc/cpuinfo": read("cpuinfo-flags.txt"),
        "/sys/devices/system/node/online": "0\n",
    }

    def exit_json(self, **kwargs):
        raise _Exit(kwargs)

    def fail_json(self, msg, **kwargs):
        raise AssertionError(msg)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return {"nvidia-smi": "/usr/local/nvidia/bin/nvidia-smi"}.get(name)

    real_access = gpu_facts.os.access

    def access(path, mode):
        return True if str(path) == "/usr/local/cuda/bin/nvcc" else real_access(path, mode)

    with (
        # the device run predates the host checks (their inputs from that machine: test_host_checks.py)
        patch_module_args({"cuda_home": "/usr/local/cuda", "host_checks": False}),
        mock.patch.object(basic.AnsibleModule, "exit_json", exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", fail_json),
        mock.patch.object(basic.AnsibleModule, "run_command", _replay_run_command(load)),
        mock.patch.object(basic.AnsibleModule, "get_bin_path", get_bin_path),
        mock.patch.object(gpu_facts, "_read", lambda p: reads.get(p)),
        mock.patch.object(gpu_facts.os, "access", access),
        mock.patch.object(gpu_facts, "gather_cpus", lambda: (16, [0])),
    ):
        with pytest.raises(_Exit) as exc:
            gpu_facts.main()
    return exc.value.args[0]["ansible_facts"]["moesweep_gpu"]


@pytest.mark.parametrize("load,path", [(False, FACTS_FILE), (True, FACTS_LOAD_FILE)])
def test_gpu_facts_replay_matches_the_real_run(load, path):
    replayed = _replay_gpu_facts(load)
    # `hypervisor` was added to the virtualization fact after the device run: the CPU flag says VM.
    assert replayed["virtualization"].pop("hypervisor") is True
    assert replayed.pop("host_checks") == [] and replayed.pop("host_check_summary") == {"fail": [], "warn": []}
    assert replayed == recorded_facts(path)


def test_recorded_gpu_facts_figures():
    f = recorded_facts()
    assert f["sm"] == "sm90" and f["compute_cap"] == "9.0"
    assert f["gpu_count"] == 1 and f["gpu_models"] == ["NVIDIA H200"] and f["mixed_models"] is False
    assert f["gpus"][0]["memory_total_mib"] == 143771
    assert f["driver_version"] == DRIVER and f["driver_cuda_version"] == CUDA
    assert f["interconnect"] == "single" and f["interconnect_pairs"] == {}
    assert f["cuda_toolkit"] == {"nvcc": "/usr/local/cuda/bin/nvcc", "release": "13.0", "version": "13.0.88"}
    assert f["cpu_count"] == 16 and f["numa_nodes"] == [0]
    assert f["processes"] == []
    assert recorded_facts(FACTS_LOAD_FILE)["processes"][0]["used_memory_mib"] == 21700


# ---- the compatibility evaluator on the real facts -------------------------------------------------


def evaluate(backend, quant="modelopt_fp4", version="0.5.9"):
    point = {"backend": backend, "quantization": quant, "sglang_version": version, "flags": {}}
    return compat.evaluate(point, recorded_facts(), KB)


def test_trtllm_nvfp4_refused_on_real_sm90_with_reasons():
    v = evaluate("flashinfer_trtllm")
    assert v["status"] == "unsupported" and v["sm"] == "sm90" and v["quantization"] == "modelopt_fp4"
    rules = {r["rule"]: r for r in v["reasons"]}
    assert "s9-nvfp4-needs-blackwell" in rules
    # the loader refuses first (sglang 0.5.9 model_loader/loader.py:222-242), before the model is built or any JIT
    assert "Minimum capability: 100. Current capability: 90." in rules["s9-nvfp4-needs-blackwell"]["error"]
    assert v["error"] == rules["s9-nvfp4-needs-blackwell"]["error"]
    trtllm = [r for r in v["reasons"] if r["rule"].startswith("s9-trtllm-sm10x-only")]
    assert trtllm and "major versions [10]" in trtllm[0]["error"]
    assert all(r["citation"] for r in v["reasons"])
    msg = compat.format_refusal(v)
    assert "flashinfer_trtllm on sm90" in msg and "compatible alternatives:" in msg
    # sglang 0.5.9 runs NVFP4 MoE on Blackwell only, whatever the backend: nothing to offer on an H200
    assert v["alternatives"] == [] and "compatible alternatives: none known" in msg
    new = {a["backend"]: a for a in evaluate("flashinfer_trtllm", version="0.5.23")["alternatives"]}
    assert "flashinfer_trtllm" not in new and "flashinfer_cutlass" not in new
    assert new["auto"]["resolves_to"] == "marlin"


def test_cutlass_nvfp4_refused_on_real_sm90():
    v = evaluate("flashinfer_cutlass")
    assert v["status"] == "unsupported"
    assert "s9-nvfp4-needs-blackwell" in [r["rule"] for r in v["reasons"]]


def test_marlin_nvfp4_on_real_sm90():
    assert evaluate("marlin", version="0.5.9")["status"] == "unsupported"  # not a 0.5.9 choice
    assert evaluate("marlin", version="0.5.23")["status"] == "supported"
    assert evaluate("auto", version="0.5.9")["status"] == "unsupported"  # no marlin fallback in 0.5.9
    auto = evaluate("auto", version="0.5.23")
    assert auto["status"] == "supported" and auto["effective_backend"] == "marlin"


def test_single_gpu_gets_no_nccl_advice():
    assert compat.advise(recorded_facts(), KB) == {"env": {}, "flags": [], "notes": [], "citations": []}


def test_recorded_device_preflight_results():
    """What the real run returned (bench/device/results/): refusals failed the play in seconds."""
    results = json.loads((RESULTS / "preflight-results.json").read_text(encoding="utf-8"))
    by_point = {(r["backend"], r["sglang_version"]): r for r in results}
    trtllm = by_point[("flashinfer_trtllm", "0.5.9")]
    assert trtllm["playbook_rc"] == 2 and trtllm["wall_s"] < 10
    assert trtllm["result"]["verdict"] == "unsupported" and trtllm["result"]["sm"] == "sm90"
    assert by_point[("flashinfer_cutlass", "0.5.9")]["result"]["verdict"] == "unsupported"
    assert by_point[("marlin", "0.5.23")]["playbook_rc"] == 0
    assert by_point[("marlin", "0.5.23")]["result"]["verdict"] == "supported"
