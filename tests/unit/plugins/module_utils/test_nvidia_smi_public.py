"""The nvidia-smi readers against real output collected from public issues.

Sources in tests/fixtures/nvidia-smi/public/SOURCES.md: driver generations R450-R610, the R610
`KMD Version` / `CUDA UMD Version` labels, truncated names, MIG, vGPU hosts, pass-through VMs, 1000 W
caps, and pastes with prompts, wrappers, lost tabs and missing rows."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as n
from helpers.paths import FIXTURES

PUB = FIXTURES / "nvidia-smi" / "public"
FIX = FIXTURES / "nvidia-smi"


def read(name: str) -> str:
    return (PUB / name).read_text(encoding="utf-8")


def facts(*names: str) -> dict:
    return n.merge_saved_outputs([n.read_saved_output(read(name)) for name in names])


# ---- version headers: R610 renamed the labels ------------------------------------------------------


@pytest.mark.parametrize(
    "name,expected",
    [
        ("table-610-b200-sglang-27487.txt", ("610.43.02", "610.43.02", "13.3")),
        ("table-610-rtx3080-finpilot-160.txt", ("610.43.03", "610.43.03", "13.3")),
        ("table-610-rtx5070-mistralrs-2287.txt", ("610.43.02", "610.43.02", "13.3")),
        ("table-580-a800-hami-1903.txt", ("580.119.02", "580.119.02", "13.0")),
        ("table-550-h100-gpu-burn-114.txt", ("550.90.07", "550.90.07", "12.4")),
        ("table-536-rtx4060-wddm-h2ogpt-620.txt", ("536.67", "536.67", "12.2")),
        ("table-535-quadro-rtx4000-list-akash-12.txt", ("535.129.03", "535.129.03", "12.2")),
        ("table-460-vgpu-host-prompt-glued-vgpu-unlock-30.txt", ("460.32.04", "460.32.04", None)),
        # the tool and the driver can differ: the driver's version is the one that counts
        ("table-450-smi-driver-mismatch-err-fah-1557.txt", ("450.66", "418.67", "10.1")),
    ],
)
def test_table_header_versions(name, expected):
    head = n.parse_smi_header(read(name))
    assert (head["smi_version"], head["driver_version"], head["cuda_version"]) == expected


def test_q_header_r610_prefers_kmd_and_umd_rows_and_drops_the_deprecation_note():
    text = read("q-610-header-vs-jetpack-295.txt")
    assert "[Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]" in text
    assert n.parse_smi_header(text) == {"smi_version": None, "driver_version": "610.47", "cuda_version": "13.3"}
    # the deprecated rows alone (what an R610 -q excerpt may show) still give clean versions
    old_rows = "\n".join(line for line in text.splitlines() if not line.startswith(("KMD", "CUDA UMD")))
    assert n.parse_smi_header(old_rows)["cuda_version"] == "13.3"
    assert n.parse_smi_header(old_rows)["driver_version"] == "610.47"


def test_q_header_older_drivers_and_a_wrapper_line_between_rows():
    assert n.parse_smi_header(read("q-535-v100-wrapper-line-hami-347.txt"))["cuda_version"] == "12.2"
    assert n.parse_smi_header(read("q-450-a100-x8-mig-disabled-k8s-device-plugin-343.txt"))["driver_version"] == (
        "450.203.03"
    )


def test_wrapper_driver_line_is_not_nvidia_smi_output():
    # sglang's check_env prints "CUDA Driver Version: 570.172.08": not an nvidia-smi label
    assert n.parse_smi_header(read("topo-check-env-wrapper-gb200-570-sglang-11208.txt"))["driver_version"] is None


@pytest.mark.parametrize(
    "value,expected",
    [
        ("610.47 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]", "610.47"),
        ("13.3", "13.3"),
        ("Not Found", None),
        ("N/A", None),
        ("garbage 1.2", None),
    ],
)
def test_version_value(value, expected):
    assert n.version_value(value) == expected


# ---- the plain table ---------------------------------------------------------------------------


def test_table_b200_four_digit_power_cap():
    gpus = n.parse_smi_table(read("table-610-b200-sglang-27487.txt"))["gpus"]
    assert [(g["index"], g["name"], g["pci_bus_id"]) for g in gpus] == [
        (0, "NVIDIA B200", "00000000:63:00.0"),
        (1, "NVIDIA B200", "00000000:68:00.0"),
    ]
    assert [g["power_limit_w"] for g in gpus] == [1000, 1000]
    assert [g["memory_total_mib"] for g in gpus] == [183359, 183359]
    assert [g["mig_mode"] for g in gpus] == [False, False]
    assert all(g["persistence_mode"] is True and g["name_truncated"] is False for g in gpus)


def test_table_truncated_names_and_layouts():
    rtx = n.parse_smi_table(read("table-580-rtx-pro-6000-vgpu-host-mig-cubecos-312.txt"))["gpus"]
    assert [g["name"] for g in rtx] == ["NVIDIA RTX PRO 6000 Blac..."] * 3
    assert all(g["name_truncated"] for g in rtx)
    assert [g["mig_mode"] for g in rtx] == [False, False, True]  # GPU 2: "Enabled"
    assert rtx[2]["pci_bus_id"] == "00000001:04:00.0"
    win = n.parse_smi_table(read("table-536-rtx4060-wddm-h2ogpt-620.txt"))["gpus"][0]
    assert win["name"] == "NVIDIA GeForce RTX 4060 ..." and win["persistence_mode"] is None  # WDDM column
    assert (win["power_limit_w"], win["memory_total_mib"]) == (45, 8188)
    old = n.parse_smi_table(read("table-450-smi-driver-mismatch-err-fah-1557.txt"))["gpus"][0]
    assert (old["name"], old["power_limit_w"], old["mig_mode"]) == ("Tesla T4", 70, None)  # "ERR!"
    vgpu = n.parse_smi_table(read("table-460-vgpu-host-prompt-glued-vgpu-unlock-30.txt"))["gpus"][0]
    assert (vgpu["name"], vgpu["power_limit_w"], vgpu["memory_total_mib"]) == ("Quadro P400", None, 2047)


def test_table_processes_and_mig_boxes_are_not_gpu_rows():
    box = n.parse_smi_table(read("table-510-mig-devices-box-nvitop-8.txt"))
    assert box["gpus"] == []
    assert [(d["gpu"], d["gpu_instance"], d["device"], d["memory_total_mib"]) for d in box["mig_devices"]] == [
        (1, 3, 0, 19968),
        (1, 5, 1, 19968),
        (1, 6, 2, 19968),
    ]


def test_list_output_needs_the_uuid():
    listed = n.parse_smi_list(read("table-535-quadro-rtx4000-list-akash-12.txt"))
    assert listed["gpus"] == [{"index": 0, "name": "Quadro RTX 4000"}, {"index": 1, "name": "Quadro RTX 4000"}]
    assert n.parse_smi_list("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition\n")["gpus"] == []


# ---- -q and -q -x ------------------------------------------------------------------------------


def test_q_blocks():
    a100 = n.parse_smi_q(read("q-450-a100-x8-mig-disabled-k8s-device-plugin-343.txt"))
    assert a100["attached_gpus"] == 8
    assert [(g["pci_bus_id"], g["name"], g["mig_mode"]) for g in a100["gpus"]] == [
        ("00000000:07:00.0", "A100-SXM4-40GB", False)
    ]
    l40s = n.parse_smi_q(read("q-l40s-excerpt-isaacsim-228.txt"))["gpus"][0]
    assert (l40s["name"], l40s["architecture"], l40s["mig_mode"]) == ("NVIDIA L40S", "Ada Lovelace", None)
    v100 = n.parse_smi_q(read("q-535-v100-wrapper-line-hami-347.txt"))["gpus"][0]
    assert (v100["name"], v100["architecture"]) == ("Tesla V100-PCIE-16GB", "Volta")


def test_q_device_h200_passthrough_and_vgpu_host_header():
    h200 = n.parse_smi_q((FIX / "h200-x1-device" / "nvidia-smi-q.txt").read_text())["gpus"][0]
    assert h200["virtualization_mode"] == "passthrough" and h200["memory_total_mib"] == 143771
    assert h200["power_limit_w"] == 700.0
    host = n.parse_smi_q((FIX / "rtx-pro-6000-public" / "nvidia-smi-q-server-edition-header.txt").read_text())
    assert host["vgpu_host"] is True and host["attached_gpus"] == 4


def test_xml_mig_and_passthrough_reads_the_gpu_not_its_mig_devices():
    xml = n.parse_smi_xml(read("qx-510-a100-mig-passthrough-netdata.xml"))
    assert (xml["driver_version"], xml["cuda_version"], xml["attached_gpus"], xml["complete"]) == (
        "510.47.03",
        "11.6",
        1,
        True,
    )
    gpu = xml["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB" and gpu["mig_mode"] is True and gpu["mig_devices"] == 2
    assert gpu["virtualization_mode"] == "passthrough"
    assert gpu["memory_total_mib"] == 40960  # the GPU's, not a MIG device's 19968
    assert gpu["power_limit_w"] == 400.0


def test_xml_cut_short_and_html_escaped():
    cut = n.parse_smi_xml(read("qx-535-rtx4090-truncated-netdata-15755.xml"))
    assert cut["complete"] is False and cut["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert cut["driver_version"] == "535.86.05"
    escaped = n.parse_smi_xml(read("qx-591-rtx4090-html-escaped-1panel-11910.txt"))
    assert (escaped["driver_version"], escaped["cuda_version"]) == ("591.74", "13.1")
    assert escaped["gpus"][0]["pci_bus_id"] == "00000000:01:00.0"
    assert n.parse_smi_xml(read("table-610-b200-sglang-27487.txt")) is None


# ---- topo -m: pastes that lost their header, tabs or indentation ---------------------------------


def test_topo_glued_cells_keep_every_column_in_place():
    topo = n.parse_topo_matrix_details(read("topo-glued-cells-tabs-vllm-13855.txt"))
    assert topo["header"] is True and topo["warnings"] == []
    assert topo["devices"][16:18] == ["NIC8", "NIC9"] and len(topo["devices"]) == 20
    assert topo["links"]["GPU4"]["NIC8"] == "NODE" and topo["links"]["GPU4"]["NIC9"] == "NODE"
    assert topo["links"]["GPU5"]["NIC8"] == "NODE" and topo["links"]["GPU5"]["NIC9"] == "PXB"
    assert topo["links"]["GPU6"]["NIC10"] == "PXB" and topo["links"]["GPU7"]["NIC11"] == "PXB"
    assert topo["cpu_affinity"]["GPU4"] == "56-111,168-223" and topo["numa_affinity"]["GPU4"] == "1"
    assert topo["gpu_numa_id"]["GPU0"] is None
    assert n.summarise_interconnect(topo) == ("nvlink", {"nvlink": 28})


def test_topo_without_its_header_row():
    text = read("topo-glued-cells-tabs-vllm-13855.txt")
    headerless = "\n".join(line for line in text.splitlines() if "CPU Affinity" not in line)
    topo = n.parse_topo_matrix_details(headerless)
    assert topo["header"] is False
    assert topo["devices"][:8] == [f"GPU{i}" for i in range(8)] and len(topo["devices"]) == 20
    assert topo["links"]["GPU3"]["GPU3"] == "X" and topo["links"]["GPU0"]["NIC0"] == "PXB"
    assert topo["numa_affinity"]["GPU7"] == "1" and topo["cpu_affinity"]["GPU0"] == "0-55,112-167"
    assert n.summarise_interconnect(topo)[0] == "nvlink"
    # No header and only rows GPU0-GPU3 of eight: the split between GPU and NIC columns cannot be known,
    # so the reading covers the pairs it can see and says what it assumed.
    pcie = read("topo-mp-pcie-only-prompt-deepep-60.txt")
    topo = n.parse_topo_matrix_details("\n".join(pcie.splitlines()[2:]))  # prompt and header dropped
    assert topo["header"] is False and n.summarise_interconnect(topo)[0] == "pcie-node"
    assert topo["cpu_affinity"]["GPU3"] == "0-47,96-143"
    assert any("taken for NICs" in w for w in topo["warnings"])


def test_topo_shifted_row_is_left_out_not_misread():
    text = read("topo-nv18-9nics-sglang-13973.txt")
    broken = text.replace("GPU2    NV18    NV18     X      NV18", "GPU2    NV18     X      NV18", 1)
    topo = n.parse_topo_matrix_details(broken)
    assert "GPU2" not in topo["links"] and any(w.startswith("GPU2") for w in topo["warnings"])
    assert topo["links"]["GPU3"]["GPU3"] == "X"


@pytest.mark.parametrize(
    "name,rows,summary,cpu0,numa0",
    [
        ("topo-nv8-9nics-nccl-933.txt", 7, "nvlink", "0-47,96-143", "0"),
        ("topo-dgx-a100-12nics-nccl-1505.txt", 4, "nvlink", "48-63,176-191", "3"),
        ("topo-nv18-9nics-sglang-13973.txt", 6, "nvlink", "0-23,96-119", "0"),
        ("topo-nv18-18nics-prompt-deepep-145.txt", 4, "nvlink", "0-55,112-167", "0"),
        ("topo-nv12-no-leading-indent-nccl-2157.txt", 4, "nvlink", "48-63,176-191", "3"),
        ("topo-mp-pcie-only-prompt-deepep-60.txt", 4, "pcie-sys", "0-47,96-143", "0"),
        ("topo-collect-env-wrapper-vllm-19176.txt", 4, "nvlink", "0-31,64-95", "0"),
        ("topo-collect-env-wrapper-18nics-vllm-25848.txt", 3, "nvlink", "0-23,144-167", "0"),
        ("topo-check-env-wrapper-gb200-570-sglang-11208.txt", 3, "nvlink", "0-71", "0,3-9,11-17"),
        ("topo-collect-env-tabs-6nics-vllm-9763.txt", 4, "nvlink", "0-31,64-95", "0"),
        ("topo-nv18-10nics-vllm-29944.txt", 5, "nvlink", "0-55,112-167", "0"),
        ("topo-8x4090-all-sys-nic-rows-go-gpuallocator-17.txt", 8, "pcie-sys", "0-55,112-167", "0"),
        # the header glues the last NIC to the affinity column: "NIC11CPU Affinity"
        ("topo-collect-env-b200-header-glued-nic11cpu-vllm-20862.txt", 4, "nvlink", "0-27,112-139", "0"),
        # CPU affinity as comma lists, NUMA ids 3 / 1 / 7 / 5
        ("topo-4x-h100-nv6-cpu-lists-nic-rows-nccl-1617.txt", 4, "nvlink", "6,14,22,30", "3"),
        # V100 hybrid cube-mesh: NV1 / NV2 between some pairs, SYS between others
        ("topo-collect-env-v100-nv1-nv2-sys-column0-header-vllm-5727.txt", 3, "mixed", "0-23,48-71", "0"),
        # four NUMA nodes of 28 CPUs, narrow affinity cells
        ("topo-collect-env-b200-four-numa-nodes-unsloth-3872.txt", 5, "nvlink", "0-27", "0"),
    ],
)
def test_topo_public_matrices(name, rows, summary, cpu0, numa0):
    topo = n.parse_topo_matrix_details(read(name))
    gpu_rows = [d for d in topo["links"] if d.startswith("GPU")]
    assert len(gpu_rows) == rows and topo["warnings"] == []
    assert all(topo["links"][g][g] == "X" for g in gpu_rows)
    assert n.summarise_interconnect(topo)[0] == summary
    assert (topo["cpu_affinity"]["GPU0"], topo["numa_affinity"]["GPU0"]) == (cpu0, numa0)


def test_topo_gb200_gpu_numa_ids():
    topo = n.parse_topo_matrix_details(read("topo-check-env-wrapper-gb200-570-sglang-11208.txt"))
    assert topo["gpu_numa_id"] == {"GPU0": "2", "GPU1": "10", "GPU2": "18"}
    assert topo["numa_affinity"]["GPU2"] == "1,19-25,27-33"


# ---- compute capability from the name -----------------------------------------------------------


@pytest.mark.parametrize(
    "name,cap",
    [
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GB200", "10.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA A100-SXM4-40GB", "8.0"),
        ("A100-SXM4-40GB", "8.0"),
        ("Tesla V100-PCIE-16GB", "7.0"),
        ("Tesla T4", "7.5"),
        ("Quadro RTX 4000", "7.5"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
        ("NVIDIA RTX PRO 6000 Blac...", "12.0"),  # every entry it can be the start of says 12.0
        ("NVIDIA GeForce RTX 3080 ...", "8.6"),
        ("NVIDIA GeForce RTX 5070 ...", "12.0"),
        ("NVIDIA GeForce RTX 4060 ...", "8.9"),
        ("NVIDIA A10", "8.6"),
        ("NVIDIA A1...", None),  # A10 (8.6) or A100 (8.0): not guessed
        ("NVIDIA A800 80GB PCIe", None),  # not on NVIDIA's table
        ("Quadro P400", None),
        (None, None),
    ],
)
def test_compute_cap_from_name(name, cap):
    assert n.compute_cap_from_name(name) == cap


def test_name_table_values_are_known_compute_caps():
    assert {cap for _name, cap in n.COMPUTE_CAP_BY_NAME} <= set(n.KNOWN_COMPUTE_CAPS)


# ---- everything one paste establishes ----------------------------------------------------------


def test_saved_output_b200_r610():
    f = facts("table-610-b200-sglang-27487.txt")
    assert f["formats"] == ["table"]
    assert f["gpu_count"] == 2 and f["gpu_models"] == ["NVIDIA B200"]
    assert [(g["name"], g["compute_cap"], g["compute_cap_source"]) for g in f["gpus"]] == [
        ("NVIDIA B200", "10.0", "gpu-name")
    ] * 2
    assert (f["driver_version"], f["cuda_version"], f["sm"]) == ("610.43.02", "13.3", "sm100")
    assert f["interconnect"] is None  # two GPUs, and the table does not say how they are linked
    assert f["mig"] is False and f["driver_failure"] is None


def test_saved_output_table_and_topo_merge():
    f = facts("table-550-h100-gpu-burn-114.txt", "topo-nv18-9nics-sglang-13973.txt")
    assert f["formats"] == ["table", "topo"]
    assert f["gpu_count"] == 8  # the topology shows 8 GPU columns; the table excerpt names 2
    assert [g["name"] for g in f["gpus"]][:3] == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", None]
    assert f["interconnect"] == "nvlink" and f["compute_cap"] == "9.0"
    assert any("known for 2 of 8" in w for w in f["warnings"])


def test_saved_output_list_fills_the_rows_the_excerpt_left_out():
    f = facts("table-535-quadro-rtx4000-list-akash-12.txt")
    assert f["formats"] == ["table", "list"]
    assert f["gpu_count"] == 2 and [g["name"] for g in f["gpus"]] == ["Quadro RTX 4000"] * 2
    assert f["gpus"][0]["pci_bus_id"] == "00000000:06:00.0" and f["compute_cap"] == "7.5"


def test_saved_output_csv_compute_cap_is_printed_not_derived():
    text = (FIX / "rtx-pro-6000" / "query-gpu-index-name-cc-mem-driver.csv").read_text()
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert f["formats"] == ["query-gpu"] and f["gpu_count"] == 6
    assert {g["compute_cap_source"] for g in f["gpus"]} == {"nvidia-smi"}
    assert f["driver_version"] == "580.65.06" and f["sm"] == "sm120"


def test_saved_output_noheader_csv_after_its_command_line():
    text = "user@gpu:~$ nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader\n0, NVIDIA B200, 10.0\n"
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert f["gpu_count"] == 1 and f["gpus"][0]["compute_cap_source"] == "nvidia-smi"
    h200 = (FIX / "h200-x2" / "query-gpu.csv").read_text()
    f = n.merge_saved_outputs([n.read_saved_output(h200)])
    assert f["gpu_count"] == 2 and f["gpus"][1]["pci_bus_id"] == "00000000:00:07.0"


def test_saved_output_mig_virtualization_and_vgpu_host():
    a100 = facts("qx-510-a100-mig-passthrough-netdata.xml")
    assert (a100["mig"], a100["mig_devices"], a100["virtualization"], a100["interconnect"]) == (
        True,
        2,
        "passthrough",
        "single",
    )
    assert n.virtualization_kind(a100["virtualization"]) == "vm"
    rtx = facts("table-580-rtx-pro-6000-vgpu-host-mig-cubecos-312.txt")
    assert rtx["mig"] is True and rtx["compute_cap"] == "12.0" and rtx["gpus"][0]["name_truncated"] is True
    host = n.merge_saved_outputs(
        [n.read_saved_output((FIX / "rtx-pro-6000-public" / "nvidia-smi-q-server-edition-header.txt").read_text())]
    )
    assert host["virtualization"] == "vgpu-host" and host["cuda_version"] is None and host["gpu_count"] == 4
    assert n.virtualization_kind(host["virtualization"]) == "none"


def test_saved_output_driver_failure_is_never_zero_gpus():
    for name in ("nvidia-smi-not-loaded.txt", "nvml-version-mismatch.txt", "nvidia-smi-not-loaded-curly-quote.txt"):
        f = n.merge_saved_outputs([n.read_saved_output((FIX / "driver-failure" / name).read_text())])
        assert f["driver_failure"] and f["gpu_count"] is None and f["gpus"] == []
        assert f["formats"] == ["driver-failure"]


def test_saved_output_unreadable_text_has_no_format():
    assert n.read_saved_output("hello\nworld\n")["formats"] == []
    assert n.read_saved_output("")["formats"] == []


def test_saved_output_truncated_name_gives_way_to_the_full_one():
    table = n.read_saved_output((FIX / "rtx-pro-6000" / "nvidia-smi-570.172.08.txt").read_text())
    csv = n.read_saved_output("index, name, compute_cap\n0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0\n")
    f = n.merge_saved_outputs([table, csv])
    assert f["gpus"][0]["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert f["gpus"][0]["name_truncated"] is False and f["warnings"] == []


def test_saved_output_conflicts_are_reported():
    a = n.read_saved_output(read("table-610-b200-sglang-27487.txt"))
    b = n.read_saved_output(read("table-550-h100-gpu-burn-114.txt"))
    f = n.merge_saved_outputs([a, b])
    assert any("driver_version" in w for w in f["warnings"])
    assert f["mixed_models"] is True and f["sm"] is None


@pytest.mark.parametrize(
    "name,count,driver,cuda,cap,interconnect",
    [
        ("table-610-rtx3080-finpilot-160.txt", 1, "610.43.03", "13.3", "8.6", "single"),
        ("table-610-rtx5070-mistralrs-2287.txt", 1, "610.43.02", "13.3", "12.0", "single"),
        ("table-580-a800-hami-1903.txt", 2, "580.119.02", "13.0", None, None),
        ("table-536-rtx4060-wddm-h2ogpt-620.txt", 1, "536.67", "12.2", "8.9", "single"),
        ("table-450-smi-driver-mismatch-err-fah-1557.txt", 1, "418.67", "10.1", "7.5", "single"),
        ("q-450-a100-x8-mig-disabled-k8s-device-plugin-343.txt", 8, "450.203.03", "11.0", "8.0", None),
        ("q-l40s-excerpt-isaacsim-228.txt", 1, None, None, "8.9", "single"),
        ("q-535-v100-wrapper-line-hami-347.txt", 1, "535.86.10", "12.2", "7.0", "single"),
        ("qx-591-rtx4090-html-escaped-1panel-11910.txt", 1, "591.74", "13.1", "8.9", "single"),
        ("topo-check-env-wrapper-gb200-570-sglang-11208.txt", 4, None, None, None, "nvlink"),
        ("topo-mp-pcie-only-prompt-deepep-60.txt", 8, None, None, None, "pcie"),
        ("table-580-a100-bottlerocket-prompt-e-process-834.txt", 2, "580.126.09", "13.0", "8.0", None),
        # FreeBSD's own driver: no CUDA library, so "CUDA Version: N/A" -- not a vGPU host
        ("table-575-rtx5070-freebsd-cuda-na-libc6-shim-14.txt", 1, "575.64.03", None, "12.0", "single"),
        ("table-580-rtx3060-arm-pci-domain1-pi-pcie-790.txt", 1, "580.95.05", "13.0", "8.6", "single"),
        ("topo-8x4090-all-sys-nic-rows-go-gpuallocator-17.txt", 8, None, None, None, "pcie"),
        ("topo-nv18-10nics-vllm-29944.txt", 8, None, None, None, "nvlink"),
        # DGX Spark: GB10 (12.1), no power cap, memory "Not Supported"
        (
            "table-580-gb10-dgx-spark-memory-not-supported-arctictraining-345.txt",
            1,
            "580.126.09",
            "13.0",
            "12.1",
            "single",
        ),
        # WSL2: the Linux nvidia-smi 570.124.06 over the Windows driver 572.70; the driver's version counts
        ("table-wsl-smi-570-driver-572-rtx5090-flash-attention-1563.txt", 1, "572.70", "12.8", "12.0", "single"),
        # RTX 6000D: not on NVIDIA's compute capability table, so none is given; 2 of the 16 GPUs in the excerpt
        ("table-590-rtx6000d-2-of-16-prose-aikitoria-20.txt", 2, "590.44.01", "13.1", None, None),
        # an RTX 5090 (12.0) and an RTX 4090 (8.9): no single compute capability
        ("table-580-rtx5090-rtx4090-mixed-aikitoria-p2p-5.txt", 2, "580.82.09", "13.0", None, None),
        ("list-4x-a100-mig-on-gpu0-telegraf-5812.txt", 4, None, None, "8.0", None),
        ("query-gpu-compute-cap-only-with-header-dfdx-619.txt", 1, None, None, "8.9", "single"),
        ("query-gpu-compute-cap-only-noheader-4gpus-aitemplate-330.txt", 4, None, None, "8.6", None),
        ("topo-4x-l40s-pcie-only-nic-rows-nic-legend-miss-alignment-106.txt", 4, None, None, None, "pcie"),
        ("topo-collect-env-b200-header-glued-nic11cpu-vllm-20862.txt", 8, None, None, None, "nvlink"),
        ("topo-4x-h100-nv6-cpu-lists-nic-rows-nccl-1617.txt", 4, None, None, None, "nvlink"),
        ("topo-collect-env-v100-nv1-nv2-sys-column0-header-vllm-5727.txt", 8, None, None, None, "mixed"),
        ("topo-collect-env-b200-four-numa-nodes-unsloth-3872.txt", 8, None, None, None, "nvlink"),
    ],
)
def test_saved_output_public_samples(name, count, driver, cuda, cap, interconnect):
    f = facts(name)
    assert f["gpu_count"] == count and len(f["gpus"]) == count
    assert (f["driver_version"], f["cuda_version"], f["compute_cap"], f["interconnect"]) == (
        driver,
        cuda,
        cap,
        interconnect,
    )


# ---- --query-gpu read by its header, whatever the field list ---------------------------------------------------

# Field names of `nvidia-smi --help-query-gpu` (R535 as quoted in https://github.com/netdata/netdata/issues/15755,
# R550+ additions: gsp.mode, c2c.mode, protected_memory, fabric, platform). Assembled here as the header of a query
# of them all: camelCase names (heterogenous_multivGPU, fractional_multiVgpu, cliqueId, clusterUuid) and inforom
# versions ("2.1", "7.0") that look like compute capabilities.
ALL_FIELDS = (
    "timestamp, driver_version, vgpu_driver_capability.heterogenous_multivGPU, count, name, serial, uuid, "
    "pci.bus_id, pci.domain, pci.bus, pci.device, pci.device_id, pci.sub_device_id, "
    "vgpu_device_capability.fractional_multiVgpu, vgpu_device_capability.heterogeneous_timeSlice_profile, "
    "vgpu_device_capability.heterogeneous_timeSlice_sizes, pcie.link.gen.current, pcie.link.gen.gpucurrent, "
    "pcie.link.gen.max, pcie.link.gen.gpumax, pcie.link.gen.hostmax, pcie.link.width.current, pcie.link.width.max, "
    "index, display_mode, display_active, persistence_mode, addressing_mode, accounting.mode, "
    "accounting.buffer_size, driver_model.current, driver_model.pending, vbios_version, inforom.img, inforom.oem, "
    "inforom.ecc, inforom.pwr, gom.current, gom.pending, fan.speed [%], pstate, clocks_event_reasons.supported, "
    "clocks_event_reasons.active, clocks_event_reasons.gpu_idle, clocks_event_reasons.applications_clocks_setting, "
    "clocks_event_reasons.sw_power_cap, clocks_event_reasons.hw_slowdown, clocks_event_reasons.hw_thermal_slowdown, "
    "clocks_event_reasons.hw_power_brake_slowdown, clocks_event_reasons.sw_thermal_slowdown, "
    "clocks_event_reasons.sync_boost, memory.total [MiB], memory.reserved [MiB], memory.used [MiB], "
    "memory.free [MiB], compute_mode, compute_cap, utilization.gpu [%], utilization.memory [%], "
    "encoder.stats.sessionCount, encoder.stats.averageFps, encoder.stats.averageLatency, ecc.mode.current, "
    "ecc.mode.pending, temperature.gpu, temperature.memory, power.management, power.draw [W], "
    "power.draw.average [W], power.draw.instant [W], power.limit [W], enforced.power.limit [W], "
    "power.default_limit [W], power.min_limit [W], power.max_limit [W], clocks.current.graphics [MHz], "
    "clocks.current.sm [MHz], clocks.current.memory [MHz], clocks.current.video [MHz], mig.mode.current, "
    "mig.mode.pending, gsp.mode.current, gsp.mode.default, c2c.mode, protected_memory.total [MiB], "
    "fabric.state, fabric.status, fabric.cliqueId, fabric.clusterUuid, platform.chassis_serial_number, "
    "platform.slot_number"
)


def _all_fields_row(name, bus, index, cap, memory, inforom_ecc):
    values = {
        "timestamp": "2026/12/06 05:00:00.000", "driver_version": "580.65.06", "count": "2", "name": name,
        "pci.bus_id": bus, "index": str(index), "inforom.img": "G525.0200.00.05", "inforom.oem": "2.1",
        "inforom.ecc": inforom_ecc, "inforom.pwr": "N/A", "compute_cap": cap, "memory.total": f"{memory} MiB",
        "fan.speed": "30 %", "power.limit": "450.00 W", "pstate": "P8", "mig.mode.current": "[N/A]",
    }  # fmt: skip
    names = [f.split(" [")[0] for f in ALL_FIELDS.split(", ")]
    return ", ".join(values.get(f, "[N/A]") for f in names)


def test_query_gpu_with_every_field_reads_compute_cap_from_its_column():
    text = "\n".join([
        ALL_FIELDS,
        _all_fields_row("NVIDIA GeForce RTX 4090", "00000000:01:00.0", 0, "8.9", 24564, "6.0"),
        _all_fields_row("NVIDIA H100 80GB HBM3", "00000000:18:00.0", 1, "9.0", 81559, "7.0"),
    ]) + "\n"
    assert len(ALL_FIELDS.split(", ")) > 90
    gpus = n.parse_query_gpu_any(text)
    assert [(g["index"], g["compute_cap"], g["sm"], g["memory_total_mib"]) for g in gpus] == [
        (0, "8.9", "sm89", 24564),
        (1, "9.0", "sm90", 81559),
    ]
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert f["gpu_count"] == 2 and f["mixed_models"] is True
    assert [g["compute_cap_source"] for g in f["gpus"]] == ["nvidia-smi", "nvidia-smi"]
    # noheader and no command line above it: by shape, the inforom versions make the capability ambiguous, so
    # none is taken from the row (the name decides it instead)
    rows = text.splitlines()[1:]
    f = n.merge_saved_outputs([n.read_saved_output("\n".join(rows) + "\n")])
    assert [(g["compute_cap"], g["compute_cap_source"]) for g in f["gpus"]] == [
        ("8.9", "gpu-name"),
        ("9.0", "gpu-name"),
    ]


def test_query_gpu_columns_in_any_order_triton_8070():
    f = facts("query-gpu-cc-first-index-last-triton-8070.txt")
    assert f["formats"] == ["query-gpu"] and f["gpu_count"] == 2
    assert [(g["index"], g["name"], g["compute_cap"]) for g in f["gpus"]] == [
        (0, "NVIDIA TITAN V", "7.0"),
        (1, "NVIDIA RTX 5880 Ada Generation", "8.9"),
    ]
    assert f["driver_version"] == "570.86.15" and f["compute_cap"] is None  # mixed


def test_query_gpu_units_in_values_and_a_second_run_bpytop_26():
    # the command line with the header glued to it, the header, two GPUs with units in every value, `time`'s
    # lines, then the same command again (its rows cut in the issue): two GPUs, not four
    f = facts("query-gpu-two-runs-glued-command-bpytop-26.txt")
    assert f["formats"] == ["query-gpu"] and f["gpu_count"] == 2
    assert [(g["name"], g["memory_total_mib"]) for g in f["gpus"]] == [
        ("GeForce GTX 1080 Ti", 11175),
        ("GeForce GTX 1060 6GB", 6078),
    ]
    # both runs whole: each lists the GPUs once, so they merge
    text = read("query-gpu-two-runs-glued-command-bpytop-26.txt")
    rows = [line for line in text.splitlines() if line.startswith("GeForce")]
    f = n.merge_saved_outputs([n.read_saved_output(text + "\n".join(rows) + "\n")])
    assert f["gpu_count"] == 2


def test_telemetry_loops_are_query_gpu_output_that_names_no_gpu():
    # our own recording (tests/fixtures/nvidia-smi/h200-x1-loads): noheader, nounits, no name column
    loop = (FIX / "h200-x1-loads" / "compute.csv").read_text()
    r = n.read_saved_output(loop)
    assert r["formats"] == ["query-gpu"] and r["gpus"] == []
    assert any("telemetry" in w for w in r["warnings"])
    f = n.merge_saved_outputs([r])
    assert f["gpu_count"] is None and f["compute_cap"] is None
    # with its header, units in the values, and the index column: each GPU once, whatever the number of samples
    with_index = (FIX / "h200-x2" / "query-lms250-under-bf16-matmul-on-gpu0.csv").read_text()
    f = n.merge_saved_outputs([n.read_saved_output(with_index)])
    assert f["gpu_count"] == 2 and [g["index"] for g in f["gpus"]] == [0, 1]
    # the same loop without the index column: samples, not GPUs
    lines = [", ".join(c for i, c in enumerate(line.split(", ")) if i != 1) for line in with_index.splitlines()]
    r = n.read_saved_output("\n".join(lines) + "\n")
    assert r["formats"] == ["query-gpu"] and r["gpus"] == []
    assert any("names no GPU" in w for w in r["warnings"])
    # together with the table of the same host, the table's GPUs stand
    table = n.read_saved_output((FIX / "h200-x2" / "nvidia-smi.txt").read_text())
    f = n.merge_saved_outputs([table, r])
    assert f["gpu_count"] == 2 and f["sm"] == "sm90"


# ---- topo -m: NIC columns by RDMA device name, PCIe-only hosts, the pre-2018 legend -----------------------------


@pytest.mark.parametrize(
    "name,devices,detail,rows",
    [
        # R384-era: the NIC column is "mlx4_0", links SYS between the two CPU sockets
        (
            "topo-pre2018-mlx4-column-k8s-53497.txt",
            [f"GPU{i}" for i in range(8)] + ["mlx4_0"],
            "pcie-sys",
            ["GPU0", "GPU1", "GPU2", "GPU3", "GPU4"],
        ),
        # before R384 "SOC" was SYS's name
        ("topo-pre2018-soc-p100-gearshifft-82.txt", ["GPU0", "GPU1"], "pcie-sys", ["GPU0", "GPU1"]),
        # two RTX 5090 on one host bridge, tabs, an empty cell before GPU NUMA ID
        ("topo-pcie-only-2x5090-club-3090-1229.txt", ["GPU0", "GPU1"], "pcie-phb", ["GPU0", "GPU1"]),
        # Markdown-indented, the p2p matrix (NS / X) after it is not read as links
        ("topo-markdown-indented-p2p-after-club-3090-1125.txt", ["GPU0", "GPU1"], "pcie-node", ["GPU0", "GPU1"]),
        # 4 GPUs (L40S per the issue) on two sockets, the NIC rows and the "NIC Legend:" after the legend
        (
            "topo-4x-l40s-pcie-only-nic-rows-nic-legend-miss-alignment-106.txt",
            ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"],
            "pcie-sys",
            ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"],
        ),
    ],
)
def test_topo_layouts_without_nvlink(name, devices, detail, rows):
    topo = n.parse_topo_matrix_details(read(name))
    assert topo["devices"] == devices and topo["header"] is True and topo["warnings"] == []
    assert sorted(topo["links"]) == sorted(rows)
    f = facts(name)
    assert f["gpu_count"] == sum(1 for d in devices if d.startswith("GPU"))
    assert f["interconnect_detail"] == detail and f["interconnect"] == "pcie"


def test_topo_pre2018_nic_column_and_affinity():
    topo = n.parse_topo_matrix(read("topo-pre2018-mlx4-column-k8s-53497.txt"))
    assert topo["links"]["GPU0"]["mlx4_0"] == "PHB" and topo["links"]["GPU4"]["mlx4_0"] == "SYS"
    assert topo["cpu_affinity"]["GPU4"] == "10-19,30-39"
    numa = n.parse_topo_matrix_details(read("topo-pcie-only-2x5090-club-3090-1229.txt"))
    assert numa["numa_affinity"] == {"GPU0": "0", "GPU1": "0"} and numa["gpu_numa_id"] == {"GPU0": None, "GPU1": None}


# ---- quoted and indented tables, vGPU type names ---------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["> ", ">> ", "    ", "> > "])
def test_a_quoted_or_indented_table_reads_like_the_table(prefix):
    for name in ("table-550-h100-gpu-burn-114.txt", "table-460-vgpu-host-prompt-glued-vgpu-unlock-30.txt"):
        text = read(name)
        quoted = "".join(prefix + line for line in text.splitlines(keepends=True))
        plain, got = facts(name), n.merge_saved_outputs([n.read_saved_output(quoted)])
        assert got["gpus"] == plain["gpus"] and got["gpu_count"] == plain["gpu_count"] >= 1
        assert (got["driver_version"], got["cuda_version"]) == (plain["driver_version"], plain["cuda_version"])


@pytest.mark.parametrize(
    "name,cap",
    [
        ("GRID T4-16Q", "7.5"),
        ("NVIDIA A100-40C", "8.0"),
        ("NVIDIA L40S-48Q", "8.9"),
        ("NVIDIA RTXA6000-48Q", "8.6"),
        ("GRID V100DX-32Q", "7.0"),
        ("NVIDIA H100XM-80C", "9.0"),
        ("NVIDIA A16-4Q", "8.6"),
        # a board the tables do not list stays unknown
        ("GRID P4-8Q", None),
    ],
)
def test_vgpu_type_names_give_their_boards_compute_capability(name, cap):
    assert n.compute_cap_from_name(name) == cap


def test_a_serial_printed_na_names_no_gpu():
    # consumer boards print "[N/A]" for serial: two such rows are two GPUs, not one
    row = "NVIDIA GeForce RTX 4090, [N/A], 24564 MiB\n"
    text = "name, serial, memory.total [MiB]\n" + row + row
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert f["gpu_count"] == 2 and f["compute_cap"] == "8.9"


def test_vgpu_host_table_and_vgpu_guest_query():
    host = facts("table-550-a100-vgpu-host-mig-immich-14808.txt")
    assert (host["gpu_count"], host["compute_cap"], host["mig"], host["cuda_version"]) == (1, "8.0", True, None)
    assert host["virtualization"] is None  # the table does not say; -q's "vGPU Driver Capability" would
    guest = facts("q-535-vgpu-guest-grid-p40-ollama-6364.txt")
    assert guest["gpus"][0]["name"] == "GRID P40-24Q" and guest["gpu_count"] == 1
    # a vGPU type as the GPU's name: a guest; P40 is not in NVIDIA's current table, so no capability is guessed
    assert guest["virtualization"] == "vgpu" and n.virtualization_kind(guest["virtualization"]) == "vm"
    assert guest["compute_cap"] is None
    assert n.is_vgpu_type_name("NVIDIA A100-40C") and not n.is_vgpu_type_name("NVIDIA A100-PCIE-40GB")
    assert not n.is_vgpu_type_name("NVIDIA H100 80GB HBM3")


def test_dmon_names_the_gpus_it_samples():
    quoted = facts("dmon-quoted-escaped-hash-deepspeech-178.txt")
    assert quoted["formats"] == ["dmon"] and quoted["gpu_count"] == 4
    assert [g["index"] for g in quoted["gpus"]] == [0, 1, 2, 3]
    # our H200 x2 recording: many samples, two GPUs
    ours = n.parse_dmon((FIX / "h200-x2" / "dmon-pucm-under-bf16-matmul-on-gpu0.txt").read_text())
    assert ours["gpus"] == [0, 1] and ours["samples"] > 2
    assert n.parse_dmon(read("table-550-h100-gpu-burn-114.txt")) is None


def test_table_lines_in_quotes_or_in_docker_json_records():
    import json

    text = read("table-550-h100-gpu-burn-114.txt")
    plain = facts("table-550-h100-gpu-burn-114.txt")
    as_list = "\n".join(repr(line) + "," for line in text.splitlines())  # a Python list of the lines
    docker = "\n".join(
        json.dumps({"log": line + "\n", "stream": "stdout", "time": "2024-06-01T00:00:00.000000000Z"},
                   separators=(",", ":"))
        for line in text.splitlines()
    )  # docker's json-file log driver (`docker logs` files under /var/lib/docker/containers)
    for variant in (as_list, docker):
        got = n.merge_saved_outputs([n.read_saved_output(variant)])
        assert got["gpus"] == plain["gpus"] and got["gpu_count"] == 2
        assert got["driver_version"] == "550.90.07" and got["compute_cap"] == "9.0"


# ---- #30 item 6: readings a blind check of public output got wrong -----------------------------------------------


def test_topo_without_header_counts_the_gpu_columns_its_nvlink_cells_reach():
    # 8 B200, rows GPU0-GPU5 only, no header: columns 7 and 8 hold NV18 in GPU0's row, so they are GPU6 and GPU7
    # (a NIC is never NV#), and GPU2 -- NODE / SYS to every GPU -- is the one off the NVLink fabric
    topo = n.parse_topo_matrix_details(read("topo-b200-no-header-gpu2-off-nvlink-vllm-16336.txt"))
    assert topo["header"] is False
    assert topo["devices"][:9] == [f"GPU{i}" for i in range(8)] + ["NIC0"] and len(topo["devices"]) == 20
    assert topo["links"]["GPU0"]["GPU7"] == "NV18" and topo["links"]["GPU2"]["GPU6"] == "SYS"
    assert topo["links"]["GPU0"]["NIC0"] == "PXB" and topo["links"]["GPU5"]["NIC5"] == "PXB"
    summary, pairs = n.summarise_interconnect(topo)
    assert summary == "mixed" and pairs["nvlink"] == 20  # the 21 pairs of 7 NVLink GPUs but GPU6-GPU7 (no row)
    f = facts("topo-b200-no-header-gpu2-off-nvlink-vllm-16336.txt")
    assert f["gpu_count"] == 8 and f["interconnect"] == "mixed"
    # no NV# cell, no header, no NIC row: nothing tells GPU columns from NIC columns, as before
    pcie = read("topo-mp-pcie-only-prompt-deepep-60.txt")
    assert any("taken for NICs" in w for w in n.parse_topo_matrix_details("\n".join(pcie.splitlines()[2:]))["warnings"])


def test_q_rows_grepped_out_of_their_gpu_block():
    # `nvidia-smi -q | grep -E "Product Name|..."`: no "GPU 00000000:..." line, one H200
    f = facts("q-grep-h200-product-lines-mig-parted-120.txt")
    assert f["formats"] == ["query"] and f["gpu_count"] == 1
    assert (f["gpus"][0]["name"], f["compute_cap"], f["sm"]) == ("NVIDIA H200", "9.0", "sm90")
    q = n.parse_smi_q(read("q-grep-h200-product-lines-mig-parted-120.txt"))
    assert [(g["pci_bus_id"], g["architecture"]) for g in q["gpus"]] == [(None, "Hopper")]
    # two GPUs grepped: two blocks; a full -q keeps its blocks by bus id
    two = "    Product Name                          : NVIDIA H100 80GB HBM3\n" * 2
    assert len(n.parse_smi_q(two)["gpus"]) == 2
    full = n.parse_smi_q(read("q-450-a100-x8-mig-disabled-k8s-device-plugin-343.txt"))
    assert full["gpus"][0]["pci_bus_id"] and full["gpus"][0]["name"] == "A100-SXM4-40GB"


# ---- R570-R590, Blackwell, GB10, WSL, MIG in -L, one-field queries, more topologies --------------------------------


def test_table_gb10_dgx_spark_no_power_cap_and_memory_not_supported():
    # DGX Spark: unified memory, so NVML gives no framebuffer size ("Not Supported") and no power cap ("3W /  N/A")
    gpu = n.parse_smi_table(read("table-580-gb10-dgx-spark-memory-not-supported-arctictraining-345.txt"))["gpus"]
    assert [(g["index"], g["name"], g["pci_bus_id"], g["persistence_mode"]) for g in gpu] == [
        (0, "NVIDIA GB10", "0000000F:01:00.0", True)
    ]
    assert (gpu[0]["power_limit_w"], gpu[0]["memory_total_mib"], gpu[0]["memory_used_mib"], gpu[0]["mig_mode"]) == (
        None,
        None,
        None,
        None,
    )
    f = facts("table-580-gb10-dgx-spark-memory-not-supported-arctictraining-345.txt")
    assert (f["gpu_count"], f["compute_cap"], f["sm"], f["mig"]) == (1, "12.1", "sm121", None)
    assert (f["driver_version"], f["cuda_version"]) == ("580.126.09", "13.0")


def test_table_wsl_linux_tool_over_a_windows_driver():
    text = read("table-wsl-smi-570-driver-572-rtx5090-flash-attention-1563.txt")
    assert n.parse_smi_header(text) == {"smi_version": "570.124.06", "driver_version": "572.70", "cuda_version": "12.8"}
    gpu = n.parse_smi_table(text)["gpus"]
    assert [(g["name"], g["pci_bus_id"], g["power_limit_w"], g["memory_total_mib"]) for g in gpu] == [
        ("NVIDIA GeForce RTX 5090", "00000000:0B:00.0", 600, 32607)
    ]
    f = facts("table-wsl-smi-570-driver-572-rtx5090-flash-attention-1563.txt")
    assert (f["gpu_count"], f["compute_cap"], f["sm"]) == (1, "12.0", "sm120")


def test_table_rtx6000d_excerpt_two_of_sixteen():
    gpus = n.parse_smi_table(read("table-590-rtx6000d-2-of-16-prose-aikitoria-20.txt"))["gpus"]
    assert [(g["index"], g["name"], g["pci_bus_id"]) for g in gpus] == [
        (0, "NVIDIA RTX 6000D", "00000000:13:00.0"),
        (1, "NVIDIA RTX 6000D", "00000000:14:00.0"),
    ]
    assert [(g["power_limit_w"], g["memory_total_mib"]) for g in gpus] == [(600, 85651), (600, 85651)]
    assert [g["mig_mode"] for g in gpus] == [False, None]  # GPU 1's MIG line is cut in the issue
    f = facts("table-590-rtx6000d-2-of-16-prose-aikitoria-20.txt")
    assert f["gpu_count"] == 2 and f["mig"] is None  # known for GPU 0 only
    # not "RTX 6000 Ada" (8.9), and not on NVIDIA's table: no compute capability guessed
    assert [g["compute_cap"] for g in f["gpus"]] == [None, None]


def test_table_two_gpu_models_r580():
    f = facts("table-580-rtx5090-rtx4090-mixed-aikitoria-p2p-5.txt")
    assert [(g["name"], g["compute_cap"], g["sm"], g["power_limit_w"], g["memory_total_mib"]) for g in f["gpus"]] == [
        ("NVIDIA GeForce RTX 5090", "12.0", "sm120", 600, 32607),
        ("NVIDIA GeForce RTX 4090", "8.9", "sm89", 525, 24564),
    ]
    assert f["mixed_models"] is True and (f["compute_cap"], f["sm"]) == (None, None)
    assert f["interconnect"] is None and f["mig"] is None


def test_list_mig_devices_sit_under_their_gpu():
    # `nvidia-smi -L`: four 1g.20gb MIG devices under GPU 0, none under GPUs 1-3
    f = facts("list-4x-a100-mig-on-gpu0-telegraf-5812.txt")
    assert f["formats"] == ["list"] and f["gpu_count"] == 4
    assert f["gpu_models"] == ["NVIDIA A100-SXM4-80GB"] and f["compute_cap"] == "8.0"
    assert (f["mig"], f["mig_devices"]) == (True, 4)
    # MIG devices exist only on a GPU in MIG mode: GPU 0's is on; the others' is not shown by -L
    assert [g["mig"] for g in f["gpus"]] == [True, None, None, None]


def test_query_gpu_of_the_compute_cap_field_alone_with_its_header():
    # one field, with its header: one GPU, 8.9 as printed
    f = facts("query-gpu-compute-cap-only-with-header-dfdx-619.txt")
    assert f["formats"] == ["query-gpu"] and f["gpu_count"] == 1
    assert [(g["compute_cap"], g["compute_cap_source"]) for g in f["gpus"]] == [("8.9", "nvidia-smi")]
    assert f["sm"] == "sm89"


def test_query_gpu_of_the_compute_cap_field_alone_noheader():
    # one field, noheader, after its command line: four GPUs
    f = facts("query-gpu-compute-cap-only-noheader-4gpus-aitemplate-330.txt")
    assert f["formats"] == ["query-gpu"] and f["gpu_count"] == 4
    assert [(g["index"], g["compute_cap"], g["compute_cap_source"]) for g in f["gpus"]] == [
        (i, "8.6", "nvidia-smi") for i in range(4)
    ]


def test_topo_more_layouts_read_cell_by_cell():
    l40s = n.parse_topo_matrix_details(read("topo-4x-l40s-pcie-only-nic-rows-nic-legend-miss-alignment-106.txt"))
    assert l40s["links"]["GPU0"]["GPU1"] == "NODE" and l40s["links"]["GPU1"]["GPU2"] == "SYS"
    assert l40s["links"]["NIC0"]["GPU2"] == "NODE" and l40s["links"]["NIC1"]["NIC0"] == "PIX"
    assert l40s["cpu_affinity"]["GPU2"] == "96-191,288-383" and l40s["numa_affinity"]["GPU3"] == "1"
    assert l40s["gpu_numa_id"] == {"GPU0": None, "GPU1": None, "GPU2": None, "GPU3": None}
    glued = n.parse_topo_matrix_details(read("topo-collect-env-b200-header-glued-nic11cpu-vllm-20862.txt"))
    assert glued["header"] is True and glued["warnings"] == []
    assert glued["devices"] == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(12)]
    assert glued["links"]["GPU1"]["NIC3"] == "PIX" and glued["links"]["GPU3"]["NIC11"] == "SYS"
    assert glued["cpu_affinity"]["GPU2"] == "28-55,140-167" and glued["numa_affinity"]["GPU2"] == "1"
    h100 = n.parse_topo_matrix_details(read("topo-4x-h100-nv6-cpu-lists-nic-rows-nccl-1617.txt"))
    assert h100["numa_affinity"] == {"GPU0": "3", "GPU1": "1", "GPU2": "7", "GPU3": "5"}
    assert h100["cpu_affinity"]["GPU3"] == "5,13,21,29" and h100["links"]["NIC3"]["GPU3"] == "PIX"
    assert n.summarise_interconnect(h100) == ("nvlink", {"nvlink": 6})
    v100 = n.parse_topo_matrix_details(read("topo-collect-env-v100-nv1-nv2-sys-column0-header-vllm-5727.txt"))
    assert v100["header"] is True and v100["warnings"] == []
    assert (v100["links"]["GPU0"]["GPU1"], v100["links"]["GPU0"]["GPU2"], v100["links"]["GPU0"]["GPU4"]) == (
        "NV1",
        "NV2",
        "SYS",
    )
    assert v100["links"]["GPU2"]["GPU5"] == "NV1" and v100["links"]["GPU2"]["NIC1"] == "PIX"
    f = facts("topo-collect-env-v100-nv1-nv2-sys-column0-header-vllm-5727.txt")
    assert (f["gpu_count"], f["interconnect"], f["interconnect_detail"]) == (8, "mixed", "mixed")
    b200 = n.parse_topo_matrix_details(read("topo-collect-env-b200-four-numa-nodes-unsloth-3872.txt"))
    assert len(b200["devices"]) == 17 and b200["devices"][-1] == "NIC8"
    assert b200["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1", "GPU4": "2"}
    assert b200["cpu_affinity"]["GPU4"] == "56-83" and b200["links"]["GPU4"]["NIC4"] == "PIX"


def test_every_public_sample_is_cited():
    sources = read("SOURCES.md")
    samples = [p.name for p in PUB.iterdir() if p.name != "SOURCES.md"]
    assert len(samples) >= 45
    for name in samples:
        assert f"`{name}`" in sources, name


# ---- round 2: driver failures, power limits in -q, PCIe-only topologies, a sampling loop, Windows -q ---------------

FAIL = FIX / "driver-failure"
HC = FIXTURES / "host_checks"


@pytest.mark.parametrize(
    "name,failure",
    [
        # Synology NAS, Tesla P4: the handle of the one GPU cannot be had
        ("device-handle-unknown-error-synology-syno-22.txt",
         "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"),
        # Windows cmd, the console wrapped the message after "Reboot"
        ("device-handle-gpu-lost-windows-wrapped-darknet-86.txt",
         "Unable to determine the device handle for GPU 0000:03:00.0: GPU is lost."),
        # RTX 5090 whose adapter did not initialise (syslog lines after it)
        ("no-devices-found-rtx5090-syslog-ogkm-862.txt", "No devices were found"),
        # R580: the mismatch with the library-version line newer drivers add, then /proc's kernel module line
        ("nvml-mismatch-580-library-line-proc-version-truenas-19.txt",
         "Failed to initialize NVML: Driver/library version mismatch"),
        # a CI task log that prefixes every line: nvidia-smi's own text is behind "[nvidia-smi(stdout)] "
        ("nvml-mismatch-550-task-log-prefixed-mozilla-translations-1167.txt",
         "Failed to initialize NVML: Driver/library version mismatch"),
    ],
)  # fmt: skip
def test_driver_failures_round_2(name, failure):
    text = (FAIL / name).read_text(encoding="utf-8")
    found = n.detect_driver_failure(text)
    assert found is not None and found.startswith(failure)
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert f["driver_failure"] and f["gpu_count"] is None and f["gpus"] == []
    assert f["formats"] == ["driver-failure"]


@pytest.mark.parametrize(
    "name,attached,driver,cuda,bus,limit",
    [
        # R595, first of 4 GPUs: "Current Power Limit 500.00 W" under "Max Power Limit 700.00 W" (a user cap)
        ("q-power-capped-500-of-700-stackhpc-975.txt", 4, "595.71.05", "13.2", "00000000:06:00.0", 500.0),
        # R590 laptop GPU: current = default 35 W, max 95 W
        ("q-power-default-below-max-ogkm-483.txt", 1, "590.48.01", "13.1", "00000000:01:00.0", 35.0),
    ],
)
def test_q_power_limit_is_the_one_in_force_not_the_max(name, attached, driver, cuda, bus, limit):
    # the public `-q -d power` excerpts the host checks read (tests/fixtures/host_checks/SOURCES.md); power_limit_w
    # means what the table's "Pwr:Usage/Cap" and --query-gpu's power.limit print: the limit in force
    text = (HC / name).read_text(encoding="utf-8")
    q = n.parse_smi_q(text)
    assert q["attached_gpus"] == attached
    assert [(g["pci_bus_id"], g["power_limit_w"]) for g in q["gpus"]] == [(bus, limit)]
    f = n.merge_saved_outputs([n.read_saved_output(text)])
    assert (f["gpu_count"], f["driver_version"], f["cuda_version"]) == (attached, driver, cuda)
    assert f["gpus"][0]["power_limit_w"] == limit


def test_topo_five_gpus_node_and_phb_then_the_p2p_matrix():
    text = read("topo-5x-node-phb-tabs-then-p2p-p-ok-aikitoria-13.txt")
    topo = n.parse_topo_matrix_details(text)
    assert topo["header"] is True and topo["warnings"] == []
    assert topo["devices"] == [f"GPU{i}" for i in range(5)]
    assert sorted(topo["links"]) == [f"GPU{i}" for i in range(5)]  # the -p2p rows ("OK") are not links
    assert topo["links"]["GPU0"] == {"GPU0": "X", "GPU1": "NODE", "GPU2": "NODE", "GPU3": "NODE", "GPU4": "NODE"}
    assert topo["links"]["GPU3"]["GPU4"] == "PHB" and topo["links"]["GPU4"]["GPU3"] == "PHB"
    assert topo["cpu_affinity"] == {f"GPU{i}": "0-63" for i in range(5)}
    assert topo["numa_affinity"] == {f"GPU{i}": "0" for i in range(5)}
    assert topo["gpu_numa_id"] == {f"GPU{i}": None for i in range(5)}
    assert n.summarise_interconnect(topo) == ("pcie-node", {"pcie-node": 9, "pcie-phb": 1})
    f = facts("topo-5x-node-phb-tabs-then-p2p-p-ok-aikitoria-13.txt")
    assert (f["gpu_count"], f["interconnect"], f["interconnect_detail"]) == (5, "pcie", "pcie-node")
    assert f["formats"] == ["topo"] and f["driver_failure"] is None


@pytest.mark.parametrize(
    "name,cpu,numa,pairs,detail",
    [
        # the command on the header's line: 2 RTX 5070 through the host bridge
        ("topo-command-glued-to-header-2x-phb-aikitoria-12.txt", ["0-23", "0-23"], ["0", "0"], {"pcie-phb": 1},
         "pcie-phb"),
        # 2 L4 on two sockets, NUMA nodes 0 and 2
        ("topo-2x-l4-sys-numa-0-and-2-tabs-cuda-samples-284.txt", ["0-7,32-39", "16-23,48-55"], ["0", "2"],
         {"pcie-sys": 1}, "pcie-sys"),
        # 4 GPUs, every pair PHB
        ("topo-4x-all-phb-spaces-legend-aikitoria-1.txt", ["0-15"] * 4, ["0"] * 4, {"pcie-phb": 6}, "pcie-phb"),
    ],
)  # fmt: skip
def test_topo_pcie_only_round_2(name, cpu, numa, pairs, detail):
    topo = n.parse_topo_matrix_details(read(name))
    gpus = [f"GPU{i}" for i in range(len(cpu))]
    assert topo["header"] is True and topo["warnings"] == []
    assert topo["devices"] == gpus and sorted(topo["links"]) == gpus
    assert all(topo["links"][g][g] == "X" for g in gpus)
    assert [topo["cpu_affinity"][g] for g in gpus] == cpu
    assert [topo["numa_affinity"][g] for g in gpus] == numa
    assert n.summarise_interconnect(topo) == (detail, pairs)
    f = facts(name)
    assert (f["gpu_count"], f["interconnect"], f["interconnect_detail"]) == (len(gpus), "pcie", detail)


def test_query_gpu_sampling_loop_with_the_index_column_is_one_gpu():
    # 13 samples of GPU 0 (index, temperature, utilization, ..., clocks; no name): one GPU, its name unknown
    r = n.read_saved_output(read("query-gpu-loop-index-no-name-1gpu-13-samples-ksysguard-gpu-27.txt"))
    assert r["formats"] == ["query-gpu"]
    f = n.merge_saved_outputs([r])
    assert f["gpu_count"] == 1 and [g["index"] for g in f["gpus"]] == [0]
    assert f["gpus"][0]["name"] is None and f["compute_cap"] is None
    assert f["interconnect"] == "single" and f["driver_version"] is None
    assert not any("names no GPU" in w for w in f["warnings"])


def test_q_windows_one_block_of_four_attached():
    # `nvidia-smi.exe -q -i 0`: the system has 4 GPUs, the block is GPU 0's
    text = read("q-windows-442-i0-attached-4-wddm-gtx1080ti-gputil-38.txt")
    q = n.parse_smi_q(text)
    assert q["attached_gpus"] == 4 and q["vgpu_host"] is False
    assert [(g["pci_bus_id"], g["name"], g["mig_mode"], g["virtualization_mode"]) for g in q["gpus"]] == [
        ("00000000:18:00.0", "GeForce GTX 1080 Ti", None, None)
    ]
    f = facts("q-windows-442-i0-attached-4-wddm-gtx1080ti-gputil-38.txt")
    assert f["formats"] == ["query"]
    assert (f["gpu_count"], f["driver_version"], f["cuda_version"]) == (4, "442.92", "10.2")
    assert [(g["index"], g["name"]) for g in f["gpus"]] == [(0, "GeForce GTX 1080 Ti"), (1, None), (2, None), (3, None)]
    assert f["mig"] is None and f["virtualization"] is None and f["interconnect"] is None


@pytest.mark.parametrize("text", ["Here is what I ran:\nname\nthanks\n", "hostname\n", "index\n"])
def test_a_lone_field_name_in_prose_is_no_query(text):
    # a one-field header is read only under the command line that queried that field, as in
    # query-gpu-compute-cap-only-with-header-dfdx-619.txt
    assert "query-gpu" not in n.read_saved_output(text)["formats"]
