"""nccl_log: the transport NCCL chose between every GPU pair, read from its INFO lines: public logs
(tests/fixtures/nccl/SOURCES.md) and the line forms of NCCL 2.27 / 2.28 / 2.30's source."""

from __future__ import annotations

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
from ansible_collections.moesweep.sweep.plugins.module_utils import nccl_log as nl
from helpers.paths import FIXTURES

NCCL = FIXTURES / "nccl"


def read(name):
    return nl.read((NCCL / name).read_text())


def pairs(summary):
    return {(p["src"], p["dst"]): (p["transport"], p["channels"]) for p in summary["pairs"]}


def test_every_fixture_is_listed_in_sources():
    listed = (NCCL / "SOURCES.md").read_text()
    for path in NCCL.glob("*.txt"):
        assert f"`{path.name}`" in listed, path.name


def test_shm_between_two_h800_ranks_with_their_channels():
    s = read("shm-h800-ranks-2-3-nccl-1609.txt")
    assert pairs(s) == {(2, 3): ("SHM", 9), (3, 2): ("SHM", 3)}
    first = s["pairs"][0]
    assert (first["src_dev"], first["dst_dev"]) == (6, 7) and first["via"] == "SHM/direct/direct"
    assert "GPU6 -> GPU7 via SHM (9 channels): through host memory" in nl.pair_text(first)
    assert s["found"] and s["refusals"] == []


def test_the_same_machine_with_and_without_p2p():
    shm = read("shm-8gpu-nccl-1817.txt")
    assert shm["transports"] == {"SHM": 9} and pairs(shm)[(0, 4)] == ("SHM", 2)
    p2p = read("p2p-direct-pointer-8gpu-nccl-1817.txt")
    assert p2p["transports"] == {"P2P/direct pointer": 5} and pairs(p2p)[(7, 6)] == ("P2P/direct pointer", 2)
    assert nl.what_would_change(p2p) == []
    assert read("header-8x-l20-nccl-tests-2.20.5-nccl-1817.txt")["nccl_version"] == "2.20.5"


def test_network_between_nodes_and_shm_within_each():
    s = read("net-socket-and-shm-two-nodes-nccl-tests-166.txt")
    assert pairs(s)[(15, 0)] == ("NET/Socket", 8)
    assert pairs(s)[(11, 12)] == ("SHM", 3) and s["transports"]["SHM"] == 5
    assert nl.family("NET/Socket") == "NET"


def test_an_old_nccl_without_prefix_with_bus_ids_and_direct_shared_memory():
    s = read("old-direct-shared-memory-2x2080ti-bus-ids-nccl-1190.txt")
    p = s["pairs"][0]
    assert (p["src"], p["dst"], p["transport"], p["channels"]) == (1, 0, "SHM", 2)
    assert p["src_dev"] is None and s["channels"] == 2  # bus ids, not devices, in the brackets; 2 rings
    parsed = nl.parse((NCCL / "old-direct-shared-memory-2x2080ti-bus-ids-nccl-1190.txt").read_text())
    assert parsed["ranks"][1]["bus_id"] == "89000" and parsed["nranks"] == 2
    assert parsed["warns"][0] == "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"
    assert parsed["channels"][0]["src_bus"] == "89000"


def test_refusals_of_p2p_with_their_reason():
    s = read("p2p-disabled-connected-gpus-4090-trtllm-2225.txt")
    assert not s["found"]
    assert [r["gpus"] for r in s["refusals"]] == [[6, 7], [4, 5], [4, 6], [4, 7], [5, 6], [5, 7]]
    r = s["refusals"][0]
    assert r["kind"] == "p2p_disabled" and "NVML reports their P2P read / write status not OK" in r["reason"]
    assert r["source"].endswith("src/graph/paths.cc:346") and r["line"].endswith("NCCL_IGNORE_DISABLED_P2P=1.")


@pytest.mark.parametrize("name, transport, count", [
    ("p2p-ipc-read-bus-ids-megatron-516.txt", "P2P/IPC", 6),
    ("p2p-cumem-8gpu-nccl-1538.txt", "P2P/CUMEM", 6),
    ("p2p-ipc-python-logging-prefix-broken-lines-easydistill-4.txt", "P2P/IPC", 3),
    ("p2p-level-sys-direct-pointer-nccl-tests-g8-nccl-1773.txt", "P2P/direct pointer", 5),
])
def test_p2p_forms_whatever_the_prefix(name, transport, count):
    s = read(name)
    assert s["transports"] == {transport: count}
    assert all(p["family"] == "P2P" for p in s["pairs"]) and nl.what_would_change(s) == []


def test_rings_give_the_channel_count():
    s = read("rings-16-channels-16-ranks-nccl-1538.txt")
    assert s["channels"] == 16 and not s["found"]
    parsed = nl.parse((NCCL / "rings-16-channels-16-ranks-nccl-1538.txt").read_text())
    assert parsed["rings"][1][:3] == [0, 8, 15] and len(parsed["rings"][1]) == 16


def test_no_channel_line_is_no_transport():
    s = read("header-2x5090-p2p-disable-2.25.1-nccl-1637.txt")
    assert s["nccl_version"] == "2.25.1" and not s["found"] and nl.evidence(s) == []


# The line forms of NCCL 2.27.3 / 2.28.9 / 2.30.7 as their printf formats produce them (the sources are in the module's
# docstring): a 2.30.7 SHM line has one "direct", a WARN of 2.30 a (function) before NCCL WARN.
FORMS = [
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "P2P/IPC", 0, 1),
    ("h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read/CE", "P2P/IPC", 0, 1),
    ("h:1:2 [3] NCCL INFO Channel 02/1 : 3[3] -> 4[4] via P2P/CUMEM/read", "P2P/CUMEM", 3, 4),
    ("h:1:2 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/MNNVL", "P2P/MNNVL", 3, 4),
    ("h:1:2 [3] NCCL INFO Channel 02/0 : 3[3] -> 5[5] via P2P/indirect/4[4]", "P2P/indirect", 3, 5),
    ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", "SHM", 0, 1),
    ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/CE/direct", "SHM", 0, 1),
    ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct", "SHM", 0, 1),
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA", "NET/IB", 0, 8),
    ("[2026-12-06 05:00:00] h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "P2P/IPC", 0, 1),
    ("Dec 06 05:00:00 vm sglang[123]: h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", "SHM",
     0, 1),
]


@pytest.mark.parametrize("line, transport, src, dst", FORMS)
def test_every_channel_line_form(line, transport, src, dst):
    c = nl.parse(line)["channels"][0]
    assert (c["transport"], c["src"], c["dst"]) == (transport, src, dst)


def test_settings_refusals_and_warns_of_every_version():
    text = "\n".join([
        "h:1:2 [0] NCCL INFO NCCL version 2.30.7+cuda13.0",
        "h:1:2 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to SYS",
        "h:1:2 [0] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.",
        "h:1:2 [0] NCCL INFO Could not enable P2P between dev 0(=1000) and dev 1(=2000)",
        "h:1:2 [0] NCCL INFO peer query failed between dev 0(=1000) and dev 2(=3000)",
        "h:1:2 [0] NCCL INFO Legacy IPC not supported",
        "h:1:2 [0] transport.cc:40 (selectTransport) NCCL WARN No transport found for rank 0[1000] -> rank 1[2000]",
        "h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct",
    ])
    s = nl.read(text)
    assert s["nccl_version"] == "2.30.7" and s["p2p_level"] == "SYS"
    assert s["environment"] == {"NCCL_P2P_LEVEL": "SYS", "NCCL_CUMEM_ENABLE": "0"}
    assert [r["kind"] for r in s["refusals"]] == ["peer_access", "peer_query", "legacy_ipc"]
    assert s["warns"] and "No transport found" in s["warns"][0]
    changes = " ".join(nl.what_would_change(s))
    assert "NCCL_P2P_LEVEL set by environment to SYS" in changes and "cudaDeviceCanAccessPeer" in changes
    assert "Legacy IPC not supported" in changes


def test_the_paths_nccl_computed_explain_a_silent_shm():
    """No refusal line: NCCL's path between the GPUs (GRAPH) is PHB, beyond its default P2P level PXB."""
    text = "\n".join([
        "vm:1:2 [0] NCCL INFO GPU/0-1000 :GPU/0-1000 (0/5000.0/LOC) GPU/0-2000 (2/24.0/PHB) CPU/0-0 (1/24.0/PHB) ",
        "vm:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
        "vm:1:2 [0] NCCL INFO ncclCommInitRankConfig comm 0x55 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x1 - Init COMPLETE",
        "vm:3:4 [1] NCCL INFO ncclCommInitRankConfig comm 0x56 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 "
        "commId 0x1 - Init COMPLETE",
    ])
    s = nl.read(text)
    assert s["paths"] == [{"src": 0, "dst": 1, "type": "PHB"}]
    change = nl.what_would_change(s)[0]
    assert "default P2P level PXB" in change and "GPU0 and GPU1: PHB" in change and "NCCL_P2P_LEVEL=SYS" in change


def test_the_diagnosis_cites_nccl_beside_the_measured_latency():
    """interconnect.estimate's evidence and changes name the transport NCCL printed, its line and what would change
    it, next to the latency read from the measured table."""
    transport = nl.record(read("shm-8gpu-nccl-1817.txt"))
    m = {"rows": [{"size": 4096, "bytes": 4096, "time_us": 43.0, "busbw_gbs": 0.17},
                  {"size": 1 << 20, "bytes": 1 << 20, "time_us": 222.8, "busbw_gbs": 8.2}],
         "ranks": 8, "p2p": [], "transport": transport}
    est = ic.estimate(m, {"layers": 78, "hidden_size": 6144}, 8, 50.0, 8)
    nccl = [e for e in est["evidence"] if e.startswith("NCCL ")]
    assert nccl and "via SHM" in nccl[0] and "every all-reduce goes through host memory" in nccl[0]
    assert "NCCL INFO Channel" in nccl[0]
    assert est["changes"][0].startswith("NCCL connected 9 of the 9 GPU pairs it names without P2P (SHM)")
    assert "NCCL printed no refusal of P2P" in est["changes"][1] and "default PXB" in est["changes"][1]


def test_a_one_gpu_communicator_connects_nothing():
    """What a single GPU's communicator prints (the device's H100 recording is of this kind; these lines are composed
    from NCCL 2.28.9's formats, init.cc:603 / 1170 / 1598 and rings.cc:47, not recorded): its version, rank and bus
    id, a ring of one, and no channel line, which is no missing log: there is no pair to connect."""
    text = "\n".join([
        "h100:4242:4242 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
        "h100:4242:4300 [0] NCCL INFO comm 0x5575f8a0 rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0",
        "h100:4242:4300 [0] NCCL INFO Channel 00/32 : 0",
        "h100:4242:4300 [0] NCCL INFO ncclCommInitRankConfig comm 0x5575f8a0 rank 0 nranks 1 cudaDev 0 nvmlDev 0 "
        "busId 60 commId 0x9a1f - Init COMPLETE",
    ])
    s = nl.read(text)
    assert s["nccl_version"] == "2.28.9" and s["nranks"] == 1 and s["single_rank"] and not s["found"]
    assert s["channels"] == 32 and nl.evidence(s) == [] and nl.what_would_change(s) == []
    assert nl.parse(text)["ranks"][0]["bus_id"] == "60"


def test_a_real_h100s_one_rank_communicator():
    """The device's recording (h100-x1-20261207/SOURCES.md): NCCL's own lines for one H100 agree with the composed
    ones above - its version, one rank, its channel count from the rings, no pair and no missing log."""
    s = nl.read((NCCL / "h100-x1-20261207" / "nccl-world1-allreduce.txt").read_text())
    assert s["nccl_version"] == "2.28.9" and s["nranks"] == 1 and s["nnodes"] == 1
    assert s["single_rank"] and not s["found"] and s["pairs"] == [] and s["refusals"] == []
    assert s["channels"] == 64
    assert nl.evidence(s) == [] and nl.what_would_change(s) == []
