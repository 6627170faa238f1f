"""The host checks against real recorded output (tests/fixtures/host_checks/SOURCES.md, and the project's H200
recordings): each check's reader, its verdict in the ok and in the failing state, and the fix it names."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from helpers.paths import FIXTURES

HC = FIXTURES / "host_checks"
SMI = FIXTURES / "nvidia-smi"


def read(path) -> str:
    return path.read_text(encoding="utf-8")


def by_name(checks):
    return {c["name"]: c for c in checks}


# ---- readers ------------------------------------------------------------------------------------------------


def test_q_h200_recording_reads_link_power_persistence_and_errors():
    (gpu,) = hc.parse_q_gpus(read(SMI / "h200-x1-device" / "nvidia-smi-q.txt"))
    assert gpu["bus_id"] == "00000000:00:06.0"
    assert gpu["persistence_mode"] is True
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"], gpu["pcie_width_current"], gpu["pcie_width_max"]) == (
        5, 5, 16, 16)
    assert (gpu["power_limit_w"], gpu["power_requested_w"], gpu["power_default_w"], gpu["power_max_w"]) == (
        700.0, 700.0, 700.0, 700.0)
    assert gpu["utilization_gpu"] == 0
    assert gpu["ecc_volatile_uncorrected"] == 0
    assert gpu["remapped_rows_pending"] is False and gpu["remapping_failure"] is False
    # "Retired Pages / Pending Page Blacklist : N/A" on an HBM3e card (row remapping replaces it)
    assert gpu["retired_pages_pending"] is None


def test_q_power_sections_of_r590_and_r595():
    (capped,) = hc.parse_q_gpus(read(HC / "q-power-capped-500-of-700-stackhpc-975.txt"))
    assert (capped["power_limit_w"], capped["power_requested_w"], capped["power_default_w"]) == (500.0, 700.0, 700.0)
    (laptop,) = hc.parse_q_gpus(read(HC / "q-power-default-below-max-ogkm-483.txt"))
    assert (laptop["power_limit_w"], laptop["power_default_w"], laptop["power_max_w"]) == (35.0, 35.0, 95.0)


def test_topo_p2p_reads_ok_gns_and_single_gpu():
    assert hc.parse_topo_p2p(read(SMI / "h200-x2" / "topo-p2p-r.txt")) == {
        "GPU0": {"GPU0": "X", "GPU1": "OK"}, "GPU1": {"GPU0": "OK", "GPU1": "X"}}
    assert hc.parse_topo_p2p(read(HC / "topo-p2p-gns-2x5090-club3090-1124.txt"))["GPU0"]["GPU1"] == "GNS"
    assert hc.parse_topo_p2p(read(SMI / "h200-x1-device" / "topo-p2p-r.txt")) == {"GPU0": {"GPU0": "X"}}


def test_topo_p2p_after_a_topo_matrix_and_a_failed_command_in_one_paste():
    # aikitoria/open-gpu-kernel-modules#13: `topo -m` (NODE / PHB), a `-p2p -p` usage error, then `-p2p p`, all OK
    p2p = hc.parse_topo_p2p(read(SMI / "public" / "topo-5x-node-phb-tabs-then-p2p-p-ok-aikitoria-13.txt"))
    gpus = [f"GPU{i}" for i in range(5)]
    assert p2p == {a: {b: "X" if a == b else "OK" for b in gpus} for a in gpus}
    assert hc.check_p2p(p2p, 5)["verdict"] == "ok"


def test_proc_limits_memlock_64k():
    limits = hc.parse_proc_limits(read(HC / "proc-limits-memlock-64k-gc3pie.txt"))
    assert limits == {"memlock": (65536, 65536), "nofile": (1024, 1048576)}


def test_lspci_acs_redirecting_and_disabled():
    on = hc.parse_lspci_acs(read(HC / "lspci-acsctl-redirect-nccl-523.txt"))
    assert len(on) == 12 and sum(a["redirect"] for a in on) == 7
    off = hc.parse_lspci_acs(read(HC / "lspci-acsctl-off-nccl-1405.txt"))
    assert len(off) == 14 and not any(a["redirect"] for a in off)


def test_xid_lines():
    xids = hc.parse_xid(read(HC / "dmesg-xid79-nvsentinel-155.txt"))
    assert [(x["xid"], x["pci"]) for x in xids] == [(79, "0000:44:00")]


def test_cap_sys_resource_bit():
    assert hc.has_cap_sys_resource("CapEff:\t000001ffffffffff\n") is True
    # the same set without bit 24 (CAP_SYS_RESOURCE), as systemd-nspawn --drop-capability leaves it
    assert hc.has_cap_sys_resource("CapEff:\t000001fffeffffff\n") is False
    assert hc.has_cap_sys_resource("") is None


def test_iommu_mode():
    assert hc.iommu_mode("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro iommu=pt intel_iommu=on", True)[0] == "passthrough"
    assert hc.iommu_mode("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on", True)[0] == "translated"
    assert hc.iommu_mode("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro", False)[0] == "none"


# ---- checks -------------------------------------------------------------------------------------------------


def test_p2p_ok_on_nvlink_pair_and_warn_on_gns():
    ok = hc.check_p2p(hc.parse_topo_p2p(read(SMI / "h200-x2" / "topo-p2p-r.txt")), 2)
    assert ok["verdict"] == "ok" and "1 GPU pairs" in ok["evidence"]
    bad = hc.check_p2p(hc.parse_topo_p2p(read(HC / "topo-p2p-gns-2x5090-club3090-1124.txt")), 2)
    assert bad["verdict"] == "warn"
    assert "GNS between 1 of 1 pairs (GPU0-GPU1)" in bad["evidence"]
    assert "--disable-custom-all-reduce" in bad["fix"] and bad["source"].startswith("https://docs.nvidia.com/")


def test_acs_warns_when_bridges_redirect():
    acs = hc.parse_lspci_acs(read(HC / "lspci-acsctl-redirect-nccl-523.txt"))
    c = hc.check_acs_iommu(acs, True, "passthrough", ["iommu=pt"], 8, False)
    assert c["verdict"] == "warn" and "7 of 12" in c["evidence"] and "ReqRedir+" in c["evidence"]
    assert "setpci" in c["fix"]
    off = hc.parse_lspci_acs(read(HC / "lspci-acsctl-off-nccl-1405.txt"))
    assert hc.check_acs_iommu(off, True, "passthrough", ["iommu=pt"], 8, False)["verdict"] == "ok"
    translated = hc.check_acs_iommu(off, True, "translated", ["intel_iommu=on"], 8, False)
    assert translated["verdict"] == "warn" and "iommu=pt" in translated["fix"]
    assert hc.check_acs_iommu([], False, "none", [], 1, True)["verdict"] == "ok"


def test_pcie_link_x8_of_x16_warns_and_recorded_h200_is_ok():
    ok = hc.check_pcie_links(hc.parse_q_gpus(read(SMI / "h200-x1-device" / "nvidia-smi-q.txt")))
    assert ok["verdict"] == "ok" and "x16" in ok["evidence"]
    bad = hc.check_pcie_links(hc.parse_q_gpus(read(HC / "q-h200-link-x8-edited.txt")))
    assert bad["verdict"] == "warn" and "GPU0 00000000:00:06.0 x8 of x16" in bad["evidence"]


def test_pcie_gen_below_max_only_counts_under_load():
    idle = [{"bus_id": "b", "pcie_gen_current": 1, "pcie_gen_max": 5, "pcie_width_current": 16,
             "pcie_width_max": 16, "utilization_gpu": 0}]
    assert hc.check_pcie_links(idle)["verdict"] == "ok"
    assert "judged under load only" in hc.check_pcie_links(idle)["evidence"]
    busy = [dict(idle[0], utilization_gpu=100)]
    assert hc.check_pcie_links(busy)["verdict"] == "warn"


def test_power_cap_below_default_warns_board_default_does_not():
    capped = hc.check_power(hc.parse_q_gpus(read(HC / "q-power-capped-500-of-700-stackhpc-975.txt")))
    assert capped["verdict"] == "warn" and "500 W of 700 W default" in capped["evidence"]
    assert "nvidia-smi -pl" in capped["fix"]
    assert hc.check_power(hc.parse_q_gpus(read(HC / "q-power-default-below-max-ogkm-483.txt")))["verdict"] == "ok"
    assert hc.check_power(hc.parse_q_gpus(read(SMI / "h200-x1-device" / "nvidia-smi-q.txt")))["verdict"] == "ok"


def test_persistence():
    gpus = hc.parse_q_gpus(read(SMI / "h200-x1-device" / "nvidia-smi-q.txt"))
    assert hc.check_persistence(gpus)["verdict"] == "ok"
    off = hc.check_persistence([dict(gpus[0], persistence_mode=False)])
    assert off["verdict"] == "warn" and "nvidia-persistenced" in off["fix"]


def test_memlock_64k_of_a_capped_manager_warns():
    manager = hc.parse_proc_limits(read(HC / "proc-limits-memlock-64k-gc3pie.txt"))
    # the role's unit asks for infinity; a manager without CAP_SYS_RESOURCE gives its own hard limit
    limits, how = hc.unit_limits({"memlock": None, "nofile": 1048576}, None, manager, False)
    assert limits == {"memlock": (65536, 65536), "nofile": (1048576, 1048576)}
    c = hc.check_limits(limits, how, 2)
    assert c["verdict"] == "warn" and "memlock 64 KiB" in c["evidence"] and "LimitMEMLOCK=infinity" in c["fix"]
    # the same manager with the capability raises them: what the unit asks for
    limits, how = hc.unit_limits({"memlock": None, "nofile": 1048576}, None, manager, True)
    assert hc.check_limits(limits, how, 2)["verdict"] == "ok"
    # a running unit's own limits decide
    limits, how = hc.unit_limits({}, manager, None, True)
    assert limits == {"memlock": (65536, 65536), "nofile": (1024, 1048576)} and "running" in how
    # sglang raises the soft open-files limit itself, up to the hard one: 1048576 is enough
    assert "open files" not in hc.check_limits(limits, how, 2)["evidence"].split("(")[0]
    low = hc.check_limits({"memlock": (None, None), "nofile": (1024, 20000)}, "test", 2)
    assert low["verdict"] == "warn" and "a hard open-files limit of 20000" in low["evidence"]


def test_shm_64m_warns_1g_ok():
    c = hc.check_shm(64 << 20, 8)
    assert c["verdict"] == "warn" and "64 MiB" in c["evidence"] and "remount,size=" in c["fix"]
    assert hc.check_shm(1 << 30, 8)["verdict"] == "ok"
    assert hc.check_shm(64 << 20, 1)["verdict"] == "ok"


def test_xid_79_fails_the_host():
    gpus = hc.parse_q_gpus(read(SMI / "h200-x1-device" / "nvidia-smi-q.txt"))
    c = hc.check_errors(gpus, hc.parse_xid(read(HC / "dmesg-xid79-nvsentinel-155.txt")), True)
    assert c["verdict"] == "fail" and "Xid (PCI:0000:44:00): 79" in c["evidence"]
    assert hc.check_errors(gpus, [], True)["verdict"] == "ok"
    unread = hc.check_errors(gpus, [], False)
    assert unread["verdict"] == "ok" and "not readable" in unread["evidence"]
    ecc = hc.check_errors([dict(gpus[0], ecc_volatile_uncorrected=3)], [], True)
    assert ecc["verdict"] == "fail" and "3 uncorrected ECC errors" in ecc["evidence"]


@pytest.mark.parametrize(("driver", "cuda", "stack", "verdict"), [
    ("570.172.08", "12.8", "13.0", "fail"),   # R570 with the 0.5.23 stack's CUDA 13 torch
    ("580.159.04", "13.0", "13.0", "ok"),
    ("570.172.08", "12.8", "12.9", "warn"),   # minor version compatibility
    ("570.172.08", "12.8", "12.8", "ok"),
    ("570.172.08", "12.8", None, "ok"),
])
def test_driver_against_the_stack(driver, cuda, stack, verdict):
    c = hc.check_driver(driver, cuda, stack)
    assert c["verdict"] == verdict
    if verdict == "fail":
        assert "needs driver >= 580.65.6" in c["evidence"] and "R580" in c["fix"]


def test_disk_and_ram():
    small = hc.check_disk([{"path": "/var/lib/sglang", "free_bytes": 64 << 20, "what": "server home"}], None)
    assert small["verdict"] == "warn" and "64 MiB free on /var/lib/sglang" in small["evidence"]
    assert "10 GiB needed for the JIT caches" in small["evidence"] and "larger disk" in small["fix"]
    no_room = hc.check_disk([{"path": "/var/lib/sglang", "free_bytes": 100 << 30, "what": "server home"}],
                            453 * 10 ** 9)
    assert no_room["verdict"] == "fail" and "100 GiB free" in no_room["evidence"]
    model = 453 * 10 ** 9
    big = hc.check_disk([{"path": "/var/lib/sglang", "free_bytes": 2 << 40, "what": "server home"}], model)
    assert big["verdict"] == "ok"
    assert hc.check_ram(256 << 30, model)["verdict"] == "warn"
    assert hc.check_ram(1 << 40, model)["verdict"] == "ok"


def test_numa_unit_cpus_against_gpu_affinity():
    topo = {"cpu_affinity": {"GPU0": "0-31", "GPU1": "32-63"}, "numa_affinity": {"GPU0": "0", "GPU1": "1"}}
    assert hc.check_numa(topo, "0-63")["verdict"] == "ok"
    far = hc.check_numa(topo, "0-7")
    assert far["verdict"] == "warn" and "GPU1" in far["evidence"] and "GPU0" not in far["evidence"]


def test_evaluate_on_the_h200_recording_and_summary():
    inputs = {
        "gpu_count": 1,
        "nvidia_smi_q": read(SMI / "h200-x1-device" / "nvidia-smi-q.txt"),
        "topo_p2p": read(SMI / "h200-x1-device" / "topo-p2p-r.txt"),
        "driver_version": "580.159.04", "driver_cuda_version": "13.0", "stack_cuda": "12.8",
        "cmdline": "BOOT_IMAGE=/vmlinuz ro", "iommu_groups": False, "lspci": None,
        "manager_limits": read(HC / "proc-limits-memlock-64k-gc3pie.txt"),
        "manager_status": "CapEff:\t000001ffffffffff\n",
        "unit_requested": {"memlock": "infinity", "nofile": "1048576"},
        "shm_bytes": 64 << 20, "kernel_log": "", "meminfo": "MemTotal:       2113253496 kB\n",
        "disk": [{"path": "/var/lib/sglang", "free_bytes": 1 << 40, "what": "server home"}],
    }
    checks = hc.evaluate(inputs)
    assert [c["name"] for c in checks] == ["driver_cuda", "p2p", "acs_iommu", "pcie_link", "numa", "shm", "limits",
                                           "power_cap", "persistence", "gpu_errors", "disk", "ram"]
    assert all(c["verdict"] in hc.VERDICTS for c in checks)
    assert {c["name"] for c in checks if c["verdict"] != "ok"} == set()
    summary = hc.summarise([hc.check_shm(64 << 20, 8), hc.check_driver("570.172.08", "12.8", "13.0")])
    assert summary["fail"][0].startswith("host check driver_cuda: driver 570.172.08") and "Fix: " in summary["fail"][0]
    assert summary["warn"][0].startswith("host check shm: /dev/shm is 64 MiB")
