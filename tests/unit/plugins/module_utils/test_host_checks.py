"""The host checks against real recorded output (tests/fixtures/host_checks/SOURCES.md, and the project's H200
recordings): each check's reader, its verdict in the ok and in the failing state, and the fix it names."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import host_checks as hc
from helpers.paths import FIXTURES, REPO

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


# ---- pasted outputs (moesweep facts --from-file, check --nvidia-smi) ----------------------------------------------


def pasted(*paths):
    """(checks by name, undecided names) of the host checks on pasted files, as the CLI runs them."""
    checks, undecided = hc.evaluate_pasted([hc.read_pasted(read(p)) for p in paths], {})
    return by_name(checks), [u["name"] for u in undecided]


@pytest.mark.parametrize("name, kind, codes", [
    ("grub-iommu-pt-then-topo-p2p-rw-gns-ns-4gpu-aikitoria-43.txt", "rw", {"GNS": 2, "NS": 4}),
    ("topo-p2p-rw-spaces-markdown-2x5090-club-3090-1130.txt", None, {"GNS": 1}),  # its command is in a title
    ("topo-m-phb-then-p2p-rw-tabs-2x5090-club-3090-1229.txt", "rw", {"GNS": 1}),
    ("topo-p2p-gns-2x5090-club3090-1124.txt", None, {"GNS": 1}),
])
def test_topo_p2p_matrices_of_every_alignment_and_kind(name, kind, codes):
    (m,) = hc.parse_topo_p2p_matrices(read(HC / name))
    assert m["kind"] == kind or (kind is None and m["kind"] in (None, "rw"))
    seen = {}
    gpus = sorted(m["matrix"])
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            seen[m["matrix"][a][b]] = seen.get(m["matrix"][a][b], 0) + 1
    assert seen == codes
    checks, _undecided = pasted(HC / name)
    assert checks["p2p"]["verdict"] == "warn" and "GNS between" in checks["p2p"]["evidence"]


def test_topo_p2p_kinds_from_their_command_lines_and_ansi_escapes():
    text = ("$ nvidia-smi topo -p2p n\n \t\x1b[4mGPU0\tGPU1\t\x1b[0m\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n"
            "$ nvidia-smi topo -p2p r\n \t\x1b[4mGPU0\tGPU1\t\x1b[0m\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n"
            "$ nvidia-smi topo -p2p a\n        GPU0    GPU1\n GPU0   X       TNS\n GPU1   TNS     X\n")
    found = hc.parse_topo_p2p_matrices(text)
    assert [m["kind"] for m in found] == ["n", "r", "a"]
    assert hc.parse_topo_p2p(text) == {"GPU0": {"GPU0": "X", "GPU1": "CNS"}, "GPU1": {"GPU0": "CNS", "GPU1": "X"}}
    assert "CNS between 1 of 1 pairs" in hc.check_p2p(hc.parse_topo_p2p(text), 2)["evidence"]


def test_the_kernel_command_line_from_proc_and_from_grub():
    proc = hc.parse_cmdline(read(HC / "proc-cmdline-intel-iommu-on-pt-sgpupt-28.txt"))
    assert proc["source"] == "proc" and hc.iommu_mode(proc["line"], None)[0] == "passthrough"
    grub = hc.parse_cmdline(read(HC / "etc-default-grub-commented-line-proxmox-kamilllooo-1.txt"))
    assert grub["source"] == "grub" and "iommu=pt" in grub["args"]  # the commented line is not the command line
    assert hc.iommu_mode("quiet splash intel_iommu=on", None) == ("translated", ["intel_iommu=on"])
    assert hc.iommu_mode("quiet splash", None)[0] == "unknown"
    assert hc.parse_cmdline((REPO / "README.md").read_text()) is None


def test_lspci_links_and_acs_with_and_without_their_headers():
    (riser,) = hc.parse_lspci(read(HC / "lspci-lnkcap-lnksta-downgraded-4090-riser-jan-183.txt"))
    assert riser["lnkcap"] == {"speed": "16", "gen": 4, "width": 16}
    assert riser["lnksta"]["gen"] == 1 and riser["lnksta"]["speed_downgraded"] and not riser["lnksta"][
        "width_downgraded"]
    checks, _u = pasted(HC / "lspci-lnkcap-lnksta-downgraded-4090-riser-jan-183.txt")
    # the speed drops with the load (nvidia-smi: "may be reduced when the GPU is not in use"): not judged here
    assert checks["pcie_link"]["verdict"] == "ok" and "gen 1 of 4 (load not known)" in checks["pcie_link"]["evidence"]
    checks, _u = pasted(HC / "lspci-lnksta-x1-downgraded-quadro-rtx8000-pi-geerlingguy-480.txt")
    assert checks["pcie_link"]["verdict"] == "warn" and "x1, below its capability" in checks["pcie_link"]["evidence"]
    (a100,) = hc.parse_lspci(read(HC / "lspci-vvv-a100-header-no-link-lines-hwloc-653.txt"))
    assert a100["device"] == "0000:da:00.0" and a100["nvidia"] and a100["lnksta"] is None
    checks, undecided = pasted(HC / "lspci-vvv-a100-header-no-link-lines-hwloc-653.txt")
    assert "pcie_link" in undecided and "acs_iommu" in undecided
    regs = hc.parse_lspci(read(HC / "lspci-acsctl-tabs-redirect-nccl-629.txt"))
    assert len(regs) == 15 and sum(1 for r in regs if r["redirect"]) == 4
    checks, _u = pasted(HC / "lspci-acsctl-tabs-redirect-nccl-629.txt")
    assert checks["acs_iommu"]["verdict"] == "warn" and "ACS redirects peer traffic on 4 of 15" in checks[
        "acs_iommu"]["evidence"]


def test_power_limits_wherever_the_driver_nests_them():
    """R595's readings as printed (stackhpc), and the same readings nested in a block of their own (an edited copy:
    SOURCES.md): the limit in force is 500 W of a 700 W default either way, for the checks and for gpu_facts."""
    from ansible_collections.moesweep.sweep.plugins.module_utils import nvidia_smi as smi

    for name in ("q-power-capped-500-of-700-stackhpc-975.txt", "q-power-nested-limits-edited.txt"):
        (gpu,) = hc.parse_q_gpus(read(HC / name))
        assert (gpu["power_limit_w"], gpu["power_default_w"], gpu["power_max_w"]) == (500.0, 700.0, 700.0), name
        assert smi.parse_smi_q(read(HC / name))["gpus"][0]["power_limit_w"] == 500.0
        assert hc.check_power([gpu])["verdict"] == "warn"
    module = "    Module Power Readings\n        Current Power Limit : 900.00 W\n"
    text = read(HC / "q-power-default-below-max-ogkm-483.txt") + module
    assert hc.parse_q_gpus(text)[0]["power_limit_w"] == 35.0  # the module's limit is not the GPU's


def test_pasted_pastes_decide_their_checks_and_name_the_rest():
    checks, undecided = pasted(HC / "grub-iommu-pt-then-topo-p2p-rw-gns-ns-4gpu-aikitoria-43.txt",
                               HC / "lspci-acsctl-off-nccl-1405.txt", SMI / "h200-x1-device" / "nvidia-smi-q.txt",
                               HC / "dmesg-xid79-nvsentinel-155.txt", FIXTURES / "nccl" / "shm-8gpu-nccl-1817.txt",
                               HC / "proc-limits-memlock-64k-gc3pie.txt")
    assert checks["p2p"]["verdict"] == "warn" and "topo -p2p rw" in checks["p2p"]["evidence"]
    assert checks["acs_iommu"]["verdict"] == "ok" and "[grub: intel_iommu=on iommu=pt]" in checks[
        "acs_iommu"]["evidence"]
    assert checks["pcie_link"]["verdict"] == "ok" and checks["persistence"]["verdict"] == "ok"
    errors = checks["gpu_errors"]
    assert errors["verdict"] == "fail" and "GPU has fallen off the bus" in errors["evidence"]
    assert checks["limits"]["verdict"] == "warn" and "memlock 64 KiB" in checks["limits"]["evidence"]
    nccl = checks["nccl_transport"]
    assert nccl["verdict"] == "warn" and "via SHM" in nccl["evidence"] and "NCCL INFO Channel" in nccl["evidence"]
    assert set(undecided) == {"driver_cuda", "numa", "shm", "disk", "ram"}
    for c in checks.values():  # the same shape as a host run's
        assert set(c) == {"name", "verdict", "evidence", "fix", "source"} and c["verdict"] in hc.VERDICTS


def test_nothing_a_host_check_reads_in_prose():
    assert hc.read_pasted((REPO / "README.md").read_text())["kinds"] == []
