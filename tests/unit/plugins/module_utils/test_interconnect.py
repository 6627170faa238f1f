"""module_utils/interconnect: all_reduce_perf tables recorded on real machines (tests/fixtures/interconnect/SOURCES.md),
the busbw definition, the latency read at a decode message size, and the share of a decode step."""

from __future__ import annotations

import pytest
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect as ic
from helpers.paths import FIXTURES

FIX = FIXTURES / "interconnect"
GLM5 = {"layers": 78, "hidden_size": 6144, "model_type": "glm_moe_dsa"}


def table(name):
    return ic.parse_all_reduce_perf((FIX / name).read_text())


def test_eight_pcie_gpus_without_p2p_full_table():
    t = table("rtx4090-x8-sys-no-p2p.txt")
    assert t["ranks"] == 8 and len(t["rows"]) == 25
    assert [d["name"] for d in t["devices"]] == ["NVIDIA GeForce RTX 4090"] * 8
    first, last = t["rows"][0], t["rows"][-1]
    assert (first["size"], first["count"], first["type"], first["redop"], first["time_us"]) == (8, 2, "float", "sum",
                                                                                                38.83)
    assert (last["size"], last["time_us"], last["algbw_gbs"], last["busbw_gbs"]) == (134217728, 16253.0, 8.26, 14.45)
    assert last["in_place"] == {"time_us": 16227.0, "algbw_gbs": 8.27, "busbw_gbs": 14.47}
    assert t["avg_busbw_gbs"] == 4.85265 and t["out_of_bounds"] == "0 OK"
    assert t["nccl_version"] is None and t["p2p"] == []


@pytest.mark.parametrize("name, ranks", [
    ("rtx4090-x8-sys-no-p2p.txt", None),
    ("rtx4090-x8-sys-p2p.txt", None),
    ("h100-x16-two-nodes-mpirun.txt", None),
    ("rtx2080ti-x2-nvlink-old-format-excerpt.txt", 2),
    ("h20-x16-two-nodes-nvlstree-old-format-excerpt.txt", 16),
    ("gb10-x2-two-nodes-v2.20-excerpt.txt", None),
])
def test_every_recorded_table_speaks_the_busbw_definition(name, ranks):
    """busbw = algbw x 2(n-1)/n in every real row (nccl-tests doc/PERFORMANCE.md): the estimate reads times that mean
    what the field means, whatever the format's vintage (root column or not, #wrong or error)."""
    t = table(name)
    if ranks:
        assert t["ranks"] is None  # an excerpt without its '# Rank' lines: the rank count comes from the source
        t = dict(t, ranks=ranks)
    assert t["rows"] and ic.check_busbw(t) == []


def test_sixteen_ranks_under_mpirun_and_the_factor():
    t = table("h100-x16-two-nodes-mpirun.txt")
    assert t["ranks"] == 16 and len(t["rows"]) == 31 and t["devices"][8]["host"] == "ztan-mig-gq73"
    assert ic.bus_factor(16) == pytest.approx(1.875)
    big = t["rows"][-1]
    assert ic.busbw_gbs(big["size"], big["time_us"], 16) == pytest.approx(big["busbw_gbs"], abs=0.01)


def test_older_format_without_root_and_with_error_column():
    t = table("rtx2080ti-x2-nvlink-old-format-excerpt.txt")
    assert [r["size"] for r in t["rows"]][:2] == [32768, 65536] and t["rows"][0]["redop"] is None
    assert t["rows"][0]["time_us"] == 13.39 and t["rows"][0]["in_place"]["time_us"] == 11.85
    t = table("h20-x16-two-nodes-nvlstree-old-format-excerpt.txt")
    assert t["rows"][0]["size"] == 4 and t["rows"][0]["time_us"] == 47.54 and t["rows"][0]["redop"] == "sum"


def test_nccl_tests_2_20_header():
    t = table("gb10-x2-two-nodes-v2.20-excerpt.txt")
    assert t["ranks"] == 2 and [r["time_us"] for r in t["rows"]] == [35.15, 31.67, 39.56, 67.93]


def test_not_a_table_is_refused_naming_what_was_expected():
    with pytest.raises(ic.InterconnectError, match="no all_reduce_perf result row"):
        ic.parse_all_reduce_perf("Traceback (most recent call last):\nRuntimeError: NCCL error\n")


def test_p2p_lines_and_version_of_the_measuring_program():
    text = "\n".join([
        "#  Rank  0 Group  0 Pid    101 on       gpu1 device  0 [0x01] NVIDIA H200",
        "#  Rank  1 Group  0 Pid    101 on       gpu1 device  1 [0x02] NVIDIA H200",
        "NCCL version 2.27.3+cuda12.8",
        "# P2P GPU0 -> GPU1: yes",
        "# P2P GPU1 -> GPU0: no",
        "       16384          8192  bfloat16     sum      -1    20.00    0.82    0.82    N/A    20.00    0.82    0.82"
        "    N/A",
    ])
    t = ic.parse_all_reduce_perf(text)
    assert t["nccl_version"] == "2.27.3+cuda12.8" and t["ranks"] == 2
    assert t["p2p"] == [{"from": 0, "to": 1, "access": True}, {"from": 1, "to": 0, "access": False}]


def test_latency_reads_between_sizes_and_extrapolates_past_the_largest():
    rows = table("rtx4090-x8-sys-no-p2p.txt")["rows"]
    assert ic.latency_us(rows, 16384) == 43.10
    # 12 KiB: between 8192 (44.02) and 16384 (43.10)
    assert ic.latency_us(rows, 12288) == pytest.approx(43.56)
    assert ic.latency_us(rows, 4) == 38.83  # below the smallest: its time
    # past 128 MiB: the extra bytes at the last algbw (8.26 GB/s)
    last_algbw = 134217728 / 1e9 / 16253e-6
    assert ic.latency_us(rows, 2 * 134217728) == pytest.approx(16253 + 134217728 / 1e9 / last_algbw * 1e6, rel=1e-6)


def test_p2p_changes_little_at_decode_sizes_on_sys_paths():
    """The recorded 4090 machine with and without P2P: at one decode token row of GLM-5 (12 KiB) both are ~43 us - the
    latency of NCCL's protocol over the CPUs, which P2P alone does not remove there."""
    off, on = table("rtx4090-x8-sys-no-p2p.txt")["rows"], table("rtx4090-x8-sys-p2p.txt")["rows"]
    assert abs(ic.latency_us(off, 12288) - ic.latency_us(on, 12288)) < 2.0


def test_glm5_decode_at_c64_on_eight_pcie_gpus_without_p2p_is_interconnect_bound():
    t = table("rtx4090-x8-sys-no-p2p.txt")
    # GLM-5 on 8x RTX PRO 6000 at c=64: 9.5 tok/s per request, ITL ~105 ms
    # (https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/epyc9124-direct-attach.md)
    est = ic.estimate(t, GLM5, 64, 105.0, 8, max_batch=64)
    assert est["count"] == 157 and est["message_bytes"] == 6144 * 64 * 2 and est["batch"] == 64
    assert est["latency_us"] == pytest.approx(196.9 + (222.8 - 196.9) * 0.5)
    assert est["share"] == pytest.approx(157 * est["latency_us"] / 1000 / 105.0)
    assert est["verdict"] == "interconnect_bound"
    assert est["evidence"][0].startswith("157 all-reduces x 209.9 us = 32.9 ms of a 105.0 ms decode step (31 %)")
    assert "768 KiB each (hidden 6144 x batch 64 x 2 bytes)" in est["evidence"][0]
    # the recorded machine printed no P2P lines: nothing is said about P2P
    assert not any(c.startswith("P2P") for c in est["changes"])
    assert any("fully NVLink-connected" in c for c in est["changes"])


def test_what_would_change_names_p2p_and_the_launchs_flag():
    t = dict(table("rtx4090-x8-sys-no-p2p.txt"), p2p=[{"from": a, "to": b, "access": False}
                                                      for a in range(8) for b in range(8) if a != b])
    changes = ic.what_would_change(t, {"disable-custom-all-reduce": True}, 43.6)
    assert changes[0].startswith("P2P: 56 of 56 GPU pairs have no peer access") and "43.6 us here" in changes[0]
    assert "this launch turns it off (--disable-custom-all-reduce)" in changes[1]
    two = ic.what_would_change(dict(t, ranks=2, p2p=[]), {}, 20.0)
    assert len(two) == 2 and "turns it off" not in two[0]


def test_the_batch_is_capped_by_max_running_requests():
    est = ic.estimate(table("rtx4090-x8-sys-no-p2p.txt"), GLM5, 256, 105.0, 8, max_batch=64)
    assert est["batch"] == 64


def test_no_verdict_below_the_share():
    est = ic.estimate(table("rtx4090-x8-sys-no-p2p.txt"), GLM5, 1, 100.0, 8, share_min=0.5)
    assert est["verdict"] is None and est["share"] < 0.5 and est["evidence"]


@pytest.mark.parametrize("measured, model, itl, tp, why", [
    (None, GLM5, 20.0, 8, "no all-reduce measurement"),
    ("h100", GLM5, 20.0, 8, "the measurement ran on 16 GPU(s), the point uses TP 8"),
    ("4090", None, 20.0, 8, "the model's config"),
    ("4090", GLM5, None, 8, "no inter-token latency"),
])
def test_what_the_estimate_cannot_use_is_said(measured, model, itl, tp, why):
    m = {"h100": table("h100-x16-two-nodes-mpirun.txt"), "4090": table("rtx4090-x8-sys-no-p2p.txt")}.get(measured, {})
    est = ic.estimate(m, model, 8, itl, tp)
    assert est["verdict"] is None and why in est["skipped"]


def test_one_rank_all_reduces_nothing():
    t = dict(table("rtx4090-x8-sys-no-p2p.txt"), ranks=1)
    est = ic.estimate(t, GLM5, 8, 20.0, 1)
    assert est["share"] == 0.0 and "TP 1" in est["skipped"]


def test_the_measuring_program_on_a_real_h100_at_world_size_one():
    """The role's program through interconnect_facts on a real H100 (SOURCES.md): its table parses as nccl-tests',
    one rank's busbw is 0 by the definition, and the time is the launch floor at every size (~20-25 us)."""
    t = table("h100-x1-device-moesweep-allreduce-perf.txt")
    assert t["ranks"] == 1 and t["nccl_version"] == "2.28.9+cuda13.0" and len(t["rows"]) == 17
    assert [r["size"] for r in t["rows"]] == [4096 << i for i in range(17)]
    assert all(r["busbw_gbs"] == 0.0 and 20.0 < r["time_us"] < 26.0 for r in t["rows"])
    assert not ic.check_busbw(t)
    assert 20.0 < ic.latency_us(t["rows"], ic.decode_message_bytes(6144, 64)) < 26.0
    assert "TP 1" in ic.estimate(t, GLM5, 64, 20.0, 1)["skipped"]


def test_model_dims_from_a_config_and_a_multimodal_text_config():
    assert ic.model_dims({"model_type": "glm_moe_dsa", "num_hidden_layers": 78, "hidden_size": 6144}) == GLM5
    nested = {"model_type": "llava", "text_config": {"num_hidden_layers": 32, "hidden_size": 4096}}
    assert ic.model_dims(nested) == {"layers": 32, "hidden_size": 4096, "model_type": "llava"}
    with pytest.raises(ic.InterconnectError, match="no integer num_hidden_layers"):
        ic.model_dims({"hidden_size": 10})


def test_the_nccl_environment_and_its_key():
    env = {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8", "NCCL_IB_DISABLE": 1, "CUDA_VISIBLE_DEVICES": "0,1"}
    assert ic.nccl_environment(env) == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "PHB"}
    key = ic.environment_key(env, 8)
    assert key == ic.environment_key(dict(reversed(list(env.items())), OMP_NUM_THREADS="16"), 8)
    assert key != ic.environment_key(env, 4)
    assert key != ic.environment_key(dict(env, NCCL_P2P_LEVEL="SYS"), 8)
    assert ic.environment_text({}) == "(NCCL defaults)"
    assert ic.environment_text(env) == "CUDA_VISIBLE_DEVICES=0,1 NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=PHB"


def _levels():
    return {"levels": [
        {"concurrency": 1, "ok": True, "figures": {"median_itl_ms": 200.0},
         "diagnosis": {"verdict": "launch_bound", "evidence": ["util 99 %"]}},
        {"concurrency": 64, "ok": True, "figures": {"median_itl_ms": 105.0},
         "diagnosis": {"verdict": "launch_bound", "label": "x", "evidence": ["util 99 %"]}},
        {"concurrency": 32, "ok": True, "figures": {"median_itl_ms": 60.0},
         "diagnosis": {"verdict": "invalid_gpu_state", "evidence": ["Xid 79"]}},
        {"concurrency": 128, "ok": False, "figures": {}, "diagnosis": None},
    ]}


def test_annotate_levels_names_interconnect_bound_beside_the_telemetry():
    bench = ic.annotate_levels(_levels(), table("rtx4090-x8-sys-no-p2p.txt"), GLM5, 8, max_batch=64)
    c1, c64, c32, c128 = bench["levels"]
    assert c1["diagnosis"]["verdict"] == "launch_bound" and c1["diagnosis"]["interconnect"]["verdict"] is None
    d = c64["diagnosis"]
    assert d["verdict"] == "interconnect_bound" and d["telemetry_verdict"] == "launch_bound"
    assert d["evidence"][0].startswith("157 all-reduces") and d["evidence"][-1] == "util 99 %"
    assert d["label"].startswith("interconnect bound")
    assert c32["diagnosis"]["verdict"] == "invalid_gpu_state" and c32["diagnosis"]["interconnect"]["share"] > 0.15
    assert c128["diagnosis"] is None


# ---------------------------------------------------------------- the simulator's stand-in, read by the real parser


def _simulated(tmp_path, gpu_model):
    import json
    import os
    import subprocess
    import sys

    from helpers.paths import REPO

    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"gpu_model": gpu_model, "gpu_count": 8}))
    env = dict(os.environ, MOESWEEP_SIM_PROFILE=str(prof), MOESWEEP_SIM_TIME_SCALE="0")
    env.pop("MOESWEEP_SIM_INTERCONNECT", None)
    out = subprocess.run([sys.executable, str(REPO / "simulator" / "bin" / "allreduce-perf-sim"), "--ngpus", "8"],
                         capture_output=True, text=True, env=env, check=True, timeout=30).stdout
    return ic.parse_all_reduce_perf(out)


def _sim_itl_ms(gpu_model, batch):
    """The simulator's decode step at ``batch`` running requests (its token model, flashinfer_cutlass)."""
    import sys

    from helpers.paths import REPO

    sys.path.insert(0, str(REPO / "simulator"))
    from moesweep_sim import tokenmodel

    base, alpha, _prefill = tokenmodel.params("flashinfer_cutlass", gpu_model)
    return tokenmodel.step_time(batch, base, alpha) * 1000.0


@pytest.mark.parametrize("gpu_model, bound", [("rtx-pro-6000", True), ("h200", False)])
def test_simulated_hosts_judged_at_the_top_level(tmp_path, gpu_model, bound):
    """The reference VM's profile (PCIe through the host bridge, no P2P) is interconnect bound at c64 for GLM-5 at TP 8;
    the 8x H200 NVLink profile is not: the simulator's curve read by the module's parser and estimate."""
    t = _simulated(tmp_path, gpu_model)
    assert t["ranks"] == 8 and ic.check_busbw(t) == []
    assert all(p["access"] is (gpu_model == "h200") for p in t["p2p"])
    est = ic.estimate(t, GLM5, 64, _sim_itl_ms(gpu_model, 64), 8, max_batch=64)
    assert (est["verdict"] == "interconnect_bound") is bound, est["evidence"]
    assert (est["share"] > 0.25) if bound else (est["share"] < 0.05)
