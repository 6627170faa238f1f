"""``moesweep facts --from-file``: saved nvidia-smi output of every kind, real samples from public issues."""

from __future__ import annotations

import json

import pytest
from helpers.paths import FIXTURES

from moesweep import cli

SMI = FIXTURES / "nvidia-smi"
PUB = SMI / "public"


def run(capsys, *argv):
    rc = cli.main(["facts", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def facts_json(capsys, *paths):
    rc, out, err = run(capsys, "--from-file", *[str(p) for p in paths], "--json")
    return rc, (json.loads(out) if out else None), err


def test_r610_table_json(capsys):
    rc, f, _ = facts_json(capsys, PUB / "table-610-b200-sglang-27487.txt")
    assert rc == 0
    assert f["gpu_count"] == 2
    assert [(g["name"], g["compute_cap"]) for g in f["gpus"]] == [("NVIDIA B200", "10.0")] * 2
    assert (f["driver_version"], f["cuda_version"]) == ("610.43.02", "13.3")
    assert f["interconnect"] is None and f["mig"] is False and f["driver_failure"] is None
    assert f["sources"] == [{"file": str(PUB / "table-610-b200-sglang-27487.txt"), "formats": ["table"]}]


def test_table_and_topo_merged_from_two_files(capsys):
    rc, f, _ = facts_json(capsys, PUB / "table-550-h100-gpu-burn-114.txt", PUB / "topo-nv18-9nics-sglang-13973.txt")
    assert rc == 0 and f["gpu_count"] == 8 and f["interconnect"] == "nvlink"
    assert [g["name"] for g in f["gpus"]].count("NVIDIA H100 80GB HBM3") == 2
    assert f["gpus"][7]["name"] is None and f["gpus"][7]["compute_cap"] is None
    assert [s["formats"] for s in f["sources"]] == [["table"], ["topo"]]


def test_repeated_from_file_is_the_same_as_a_list(capsys):
    a = PUB / "table-535-quadro-rtx4000-list-akash-12.txt"
    b = PUB / "topo-mp-pcie-only-prompt-deepep-60.txt"
    _, one, _ = facts_json(capsys, a, b)
    rc = cli.main(["facts", "--from-file", str(a), "--from-file", str(b), "--json"])
    two = json.loads(capsys.readouterr().out)
    assert rc == 0 and one == two and one["interconnect"] == "pcie"


@pytest.mark.parametrize(
    "path,interconnect,mig,virt",
    [
        (PUB / "qx-510-a100-mig-passthrough-netdata.xml", "single", True, "passthrough"),
        (PUB / "table-580-rtx-pro-6000-vgpu-host-mig-cubecos-312.txt", None, True, None),
        (SMI / "rtx-pro-6000-public" / "nvidia-smi-q-server-edition-header.txt", None, None, "vgpu-host"),
        (SMI / "h200-x1-device" / "nvidia-smi-q-x.xml", "single", False, "passthrough"),
        (PUB / "topo-glued-cells-tabs-vllm-13855.txt", "nvlink", None, None),
    ],
)
def test_layouts(capsys, path, interconnect, mig, virt):
    rc, f, _ = facts_json(capsys, path)
    assert rc == 0 and (f["interconnect"], f["mig"], f["virtualization"]) == (interconnect, mig, virt)


def test_h200_device_recordings_of_every_kind_agree(capsys):
    dev = SMI / "h200-x1-device"
    names = ("nvidia-smi.txt", "nvidia-smi-q.txt", "nvidia-smi-q-x.xml", "query-gpu.csv", "topo-m.txt")
    rc, f, _ = facts_json(capsys, *[dev / n for n in names])
    assert rc == 0 and f["warnings"] == []
    assert f["gpu_count"] == 1 and f["gpus"][0]["name"] == "NVIDIA H200"
    assert f["gpus"][0]["compute_cap"] == "9.0" and f["gpus"][0]["compute_cap_source"] == "nvidia-smi"
    assert (f["driver_version"], f["cuda_version"], f["interconnect"]) == ("580.159.04", "13.0", "single")
    assert f["virtualization"] == "passthrough" and f["mig"] is False
    assert [s["formats"] for s in f["sources"]] == [["table"], ["query"], ["query-xml"], ["query-gpu"], ["topo"]]


@pytest.mark.parametrize("name", ["nvidia-smi-not-loaded.txt", "nvml-version-mismatch.txt"])
def test_driver_failure_exits_3_and_is_not_zero_gpus(capsys, name):
    rc, f, _ = facts_json(capsys, SMI / "driver-failure" / name)
    assert rc == 3 and f["driver_failure"] and f["gpu_count"] is None
    rc, out, _ = run(capsys, "--from-file", str(SMI / "driver-failure" / name))
    assert rc == 3 and out.startswith("driver failure: ") and "GPUs: unknown" in out


def test_text_output(capsys):
    rc, out, _ = run(
        capsys,
        "--from-file",
        str(SMI / "rtx-pro-6000" / "nvidia-smi-570.172.08.txt"),
        str(PUB / "topo-nv18-9nics-sglang-13973.txt"),
    )
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("GPUs: 8 (1 x NVIDIA RTX PRO 6000 Blac..., compute capability 12.0 (from the GPU name)")
    assert "driver: 570.172.08; highest CUDA it supports: 12.8" in lines
    assert lines[2] == "interconnect: nvlink (GPU pairs: 27 nvlink)"
    assert any(line.startswith("warning: compute capability known for 1 of 8") for line in lines)


def test_stdin_and_utf16_from_powershell(capsys, monkeypatch, tmp_path):
    text = (PUB / "table-610-rtx5070-mistralrs-2287.txt").read_text()
    utf16 = tmp_path / "smi.txt"
    utf16.write_bytes(text.encode("utf-16"))  # BOM + UTF-16LE, as PowerShell's `>` writes it
    rc, f, _ = facts_json(capsys, utf16)
    assert rc == 0 and f["gpus"][0]["compute_cap"] == "12.0"

    class Stdin:
        buffer = __import__("io").BytesIO(text.encode())

    monkeypatch.setattr("sys.stdin", Stdin)
    rc, f, _ = facts_json(capsys, "-")
    assert rc == 0 and f["driver_version"] == "610.43.02"


@pytest.mark.parametrize(
    "content,reason",
    [
        (None, "cannot open it"),
        (b"", "the file is empty"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00" * 20, "not text"),
        (b"total 0\ndrwxr-xr-x 2 root root 40 Jan  1 00:00 .\n", "no nvidia-smi output found"),
    ],
)
def test_unreadable_input_exits_2_with_the_reason(capsys, tmp_path, content, reason):
    path = tmp_path / "input.txt"
    if content is not None:
        path.write_bytes(content)
    good = PUB / "table-610-b200-sglang-27487.txt"
    rc, out, err = run(capsys, "--from-file", str(good), str(path), "--json")
    assert rc == 2 and out == ""
    assert err.startswith(f"moesweep facts: {path}: ") and reason in err


def test_device_list_and_noheader_csv_with_their_command_lines(capsys):
    dev = SMI / "h200-x1-device-20261201"
    rc, f, _ = facts_json(capsys, dev / "list-and-noheader-csv.txt", dev / "nvidia-smi.txt")
    assert rc == 0 and f["warnings"] == []
    assert [s["formats"] for s in f["sources"]] == [["list", "query-gpu"], ["table"]]
    assert f["gpu_count"] == 1 and f["gpus"][0]["compute_cap_source"] == "nvidia-smi"
    assert (f["gpus"][0]["name"], f["gpus"][0]["pci_bus_id"], f["sm"]) == ("NVIDIA H200", "00000000:00:06.0", "sm90")


def test_facts_from_hosts_prints_each_host_check_and_the_fix_of_those_not_ok(monkeypatch, capsys):
    import argparse

    from moesweep import api
    from moesweep.commands import facts as facts_cmd

    found = {"gpu-1": {"gpu_count": 8, "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "sm": "sm120",
                       "driver_version": "570.172.08", "interconnect": "pcie-phb",
                       "virtualization": {"kind": "vm"}, "cuda_toolkit": {"release": "12.8"},
                       "host_checks": [
                           {"name": "p2p", "verdict": "ok", "evidence": "P2P read OK between all 28 GPU pairs",
                            "fix": "", "source": ""},
                           {"name": "shm", "verdict": "warn", "evidence": "/dev/shm is 64 MiB", "fix": "enlarge it",
                            "source": ""}]}}
    monkeypatch.setattr(api, "gather_facts", lambda inventory, limit=None: found)
    rc = facts_cmd.from_hosts(argparse.Namespace(inventory="inv.yml", limit=None, json=False))
    out = capsys.readouterr().out
    assert rc == 0
    assert "  ok    p2p: P2P read OK between all 28 GPU pairs" in out
    assert "  warn  shm: /dev/shm is 64 MiB\n        fix: enlarge it" in out


HC = FIXTURES / "host_checks"


def test_host_check_inputs_of_every_kind_in_any_order(capsys):
    """Pastes that are not nvidia-smi's own (lspci, a grub line with a -p2p matrix, NCCL's lines, a kernel log)
    are read, listed with their kinds, and the host checks run on them; the checks no file decides are named."""
    files = [FIXTURES / "nccl" / "shm-h800-ranks-2-3-nccl-1609.txt", HC / "lspci-acsctl-tabs-redirect-nccl-629.txt",
             HC / "grub-iommu-pt-then-topo-p2p-rw-gns-ns-4gpu-aikitoria-43.txt", HC / "dmesg-xid79-nvsentinel-155.txt"]
    rc, f, err = facts_json(capsys, *files)
    assert rc == 0 and err == ""
    assert [s["formats"] for s in f["sources"]] == [["nccl"], ["lspci"], ["topo-p2p", "cmdline"], ["kernel-log"]]
    verdicts = {c["name"]: c["verdict"] for c in f["host_checks"]}
    assert verdicts == {"p2p": "warn", "acs_iommu": "warn", "gpu_errors": "fail", "nccl_transport": "warn"}
    assert "pcie_link" in [u["name"] for u in f["host_checks_undecided"]]
    rc, out, _err = run(capsys, "--from-file", *[str(p) for p in files])
    assert "host checks (from the files):" in out and "  fail  gpu_errors: 1 Xid line(s)" in out
    assert "  not decided  shm: needs `df -h /dev/shm`" in out


def test_an_unreadable_file_among_readable_ones_is_named(capsys, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("the GPUs seem slow, any idea?\n")
    rc, out, err = run(capsys, "--from-file", str(HC / "lspci-acsctl-off-nccl-1405.txt"), str(bad))
    assert rc == 2 and out == "" and err.startswith(f"moesweep facts: {bad}: no nvidia-smi output found")
    assert "lspci -vvv" in err and "NCCL INFO lines" in err
