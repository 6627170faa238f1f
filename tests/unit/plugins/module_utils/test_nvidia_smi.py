"""The nvidia-smi parsers against real recorded output (see SOURCES.md in each fixture folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as n
from helpers.paths import FIXTURES as FIXTURES_ROOT

FIX = FIXTURES_ROOT / "nvidia-smi"
H200 = FIX / "h200-x2"
RTX = FIX / "rtx-pro-6000-public"
FAIL = FIX / "driver-failure"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def h200_query_blocks() -> tuple[str, str, str]:
    lines = read(H200 / "query-gpu.csv").splitlines()
    return "\n".join(lines[:3]), "\n".join(lines[3:5]), lines[5]


def test_query_gpu_with_units_and_header():
    gpus = n.parse_query_gpu(h200_query_blocks()[0])
    assert [g["index"] for g in gpus] == [0, 1]
    g0 = gpus[0]
    assert g0["name"] == "NVIDIA H200"
    assert g0["pci_bus_id"] == "00000000:00:06.0"
    assert g0["compute_cap"] == "9.0" and g0["sm"] == "sm90"
    assert g0["memory_total_mib"] == 143771 and g0["memory_used_mib"] == 0
    assert g0["driver_version"] == "580.159.04"
    assert g0["power_limit_w"] == 700.0 and g0["power_max_limit_w"] == 700.0
    assert (g0["pcie_gen_current"], g0["pcie_gen_max"]) == (5, 5)
    assert (g0["pcie_width_current"], g0["pcie_width_max"]) == (16, 16)
    assert g0["persistence_mode"] is True and g0["mig_mode"] is False
    assert gpus[1]["pci_bus_id"] == "00000000:00:07.0"


def test_query_gpu_noheader_nounits_needs_fields():
    gpus = n.parse_query_gpu(h200_query_blocks()[1], ["index", "name", "compute_cap", "memory.total"])
    assert [(g["index"], g["sm"], g["memory_total_mib"]) for g in gpus] == [
        (0, "sm90", 143771),
        (1, "sm90", 143771),
    ]


def test_compute_apps_header_only_is_empty():
    assert n.parse_compute_apps(h200_query_blocks()[2]) == []


def test_compute_apps_rows_and_comma_in_name():
    text = (
        "pid, process_name, used_gpu_memory [MiB]\n1234, sglang::scheduler_TP0, 81234 MiB\n99, a, b, 5 MiB\n"
    )
    apps = n.parse_compute_apps(text)
    assert apps[0] == {
        "gpu_bus_id": None,
        "pid": 1234,
        "process_name": "sglang::scheduler_TP0",
        "used_memory_mib": 81234,
    }
    assert apps[1]["process_name"] == "a, b" and apps[1]["used_memory_mib"] == 5


def test_plain_table_header_versions():
    assert n.parse_smi_header(read(H200 / "nvidia-smi.txt")) == {
        "smi_version": "580.159.04",
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
    }


def test_q_header_cuda_not_found_on_vgpu_host():
    head = n.parse_smi_header(read(RTX / "nvidia-smi-q-server-edition-header.txt"))
    assert head["driver_version"] == "580.105.06"
    assert head["cuda_version"] is None


def test_topo_h200_ansi_header_and_nvlink():
    raw = read(H200 / "topo-m.txt")
    assert "\x1b[4m" in raw  # the real header is underlined
    topo = n.parse_topo_matrix(raw)
    assert topo["devices"] == ["GPU0", "GPU1"]
    assert topo["links"]["GPU0"]["GPU1"] == "NV18"
    assert topo["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "0-31"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "0"}
    assert n.summarise_interconnect(topo) == ("nvlink", {"nvlink": 1})


def test_topo_rtx_pro_6000_pcie_phb_spaces_instead_of_tabs():
    topo = n.parse_topo_matrix(read(RTX / "topo-m-2x-workstation.txt"))
    assert topo["links"]["GPU1"]["GPU0"] == "PHB"
    assert topo["numa_affinity"]["GPU0"] == "0"
    assert n.summarise_interconnect(topo) == ("pcie-phb", {"pcie-phb": 1})


def test_topo_mixed_and_worst_pcie_level_with_nics():
    text = (
        "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV4\tSYS\tPIX\t0-15\t0\t\tN/A\n"
        "GPU1\tNV4\t X \tNODE\tPXB\t0-15\t0\t\tN/A\n"
        "GPU2\tSYS\tNODE\t X \tSYS\t16-31\t1\t\tN/A\n"
        "NIC0\tPIX\tPXB\tSYS\t X \n\nLegend:\n"
    )
    topo = n.parse_topo_matrix(text)
    summary, counts = n.summarise_interconnect(topo)
    assert summary == "mixed"
    assert counts == {"nvlink": 1, "pcie-sys": 1, "pcie-node": 1}
    pcie_only = n.parse_topo_matrix(text.replace("NV4", "PHB"))
    assert n.summarise_interconnect(pcie_only)[0] == "pcie-sys"


def test_topo_single_gpu():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n"
    assert n.summarise_interconnect(n.parse_topo_matrix(text))[0] == "single"


@pytest.mark.parametrize(
    "code,cls",
    [
        ("NV18", "nvlink"),
        ("PIX", "pcie-pix"),
        ("PXB", "pcie-pxb"),
        ("PHB", "pcie-phb"),
        ("NODE", "pcie-node"),
        ("SYS", "pcie-sys"),
        ("X", "self"),
        ("??", None),
    ],
)
def test_classify_link(code, cls):
    assert n.classify_link(code) == cls


@pytest.mark.parametrize(
    "cap,sm",
    [
        ("12.0", "sm120"),
        ("9.0", "sm90"),
        ("10.0", "sm100"),
        ("10.3", "sm103"),
        ("8.9", "sm89"),
        ("[N/A]", None),
        ("", None),
    ],
)
def test_compute_cap_to_sm(cap, sm):
    assert n.compute_cap_to_sm(cap) == sm


def test_sm_number_forms():
    assert [n.sm_number(x) for x in ("sm120", "120", 90, "12.0", "sm_100a", None, "gpu")] == [
        120,
        120,
        90,
        120,
        100,
        None,
        None,
    ]


def test_torch_name_for_server_edition_is_sm120():
    line = read(RTX / "torch-capability-warning.txt")
    assert "NVIDIA RTX PRO 6000 Blackwell Server Edition" in line and "sm_120" in line
    assert n.compute_cap_to_sm("12.0") == "sm120"


@pytest.mark.parametrize(
    "name,expected",
    [
        (
            "nvidia-smi-not-loaded.txt",
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
        ),
        (
            "nvidia-smi-not-loaded-curly-quote.txt",
            "NVIDIA-SMI has failed because it couldn\u2018t communicate",
        ),
        ("nvml-version-mismatch.txt", "Failed to initialize NVML: Driver/library version mismatch"),
    ],
)
def test_driver_failure_detected(name, expected):
    found = n.detect_driver_failure(read(FAIL / name))
    assert found is not None and found.startswith(expected)


def test_driver_failure_on_stderr_and_healthy_output():
    assert n.detect_driver_failure("", read(FAIL / "nvidia-smi-not-loaded.txt"))
    assert n.detect_driver_failure(read(H200 / "nvidia-smi.txt")) is None


def test_nvcc_version():
    assert n.parse_nvcc_version(read(FAIL / "nvcc-version-10.0.txt")) == {
        "release": "10.0",
        "version": "10.0.130",
    }
    assert n.parse_nvcc_version("Cuda compilation tools, release 12.8, V12.8.93\n") == {
        "release": "12.8",
        "version": "12.8.93",
    }
    assert n.parse_nvcc_version("garbage") == {"release": None, "version": None}


def test_cpu_list_and_virtualization():
    assert n.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert n.classify_virtualization("kvm\n")["kind"] == "vm"
    assert n.classify_virtualization("systemd-nspawn")["kind"] == "container"
    assert n.classify_virtualization("none")["type"] == "none"
    # systemd-detect-virt absent (the H200 Firecracker VM): fall back on DMI, then cpuinfo
    assert n.classify_virtualization(None, None, "Firecracker\n", "")["type"] == "firecracker"
    assert n.classify_virtualization(None, None, "QEMU\nStandard PC\n")["type"] == "qemu"
    assert (
        n.classify_virtualization(None, None, "", "flags\t\t: fpu vme hypervisor lahf_lm\n")["type"] == "vm"
    )
    assert n.classify_virtualization(None, None, "", "flags\t\t: fpu vme\n")["type"] == "none"
    assert n.classify_virtualization(None, "docker")["kind"] == "container"
    assert n.classify_virtualization()["type"] == "unknown"


def test_models_summary_reports_mixed_without_guessing():
    gpus = n.parse_query_gpu(h200_query_blocks()[0])
    assert n.summarise_models(gpus) == (["NVIDIA H200"], False)
    assert n.summarise_sm(gpus) == "sm90"
    mixed = gpus + [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "sm": "sm120"}]
    assert n.summarise_models(mixed) == (
        ["NVIDIA H200", "NVIDIA RTX PRO 6000 Blackwell Server Edition"],
        True,
    )
    assert n.summarise_sm(mixed) is None
