"""What limited the GPUs, decided on real recordings (see tests/fixtures/telemetry/SOURCES.md).

The six loads recorded on a real H200 by both samplers must get six honest verdicts: idle with no process,
idle with a CUDA context held, host bound (eager launches), launch bound (CUDA graph replay), memory bound
(HBM copies) and power bound (bf16 matmul at the 700 W cap). Faults that no healthy machine produces on
request (slowdowns, ECC errors, Xids) are exercised by editing named cells of the real recordings or by
the real public Xid captures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import diagnosis as d
from ansible_collections.moesweep.sweep.plugins.module_utils import telemetry as t
from helpers.paths import FIXTURES

DEV = FIXTURES / "telemetry" / "h200-x1-20261201"
PUB = FIXTURES / "telemetry" / "public"
SMI = FIXTURES / "nvidia-smi"
WINDOWS = json.loads((DEV / "windows.json").read_text())
LOADS_FIELDS = (
    "timestamp",
    "utilization.gpu",
    "power.draw",
    "enforced.power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "clocks_event_reasons.active",
    "memory.used",
)
COL = {name: i for i, name in enumerate(t.QUERY_FIELDS)}


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def summary(load: str, sampler: str = "nvml", text: str | None = None):
    rows = t.parse_samples(text if text is not None else read(DEV / f"{sampler}-{load}.csv"), utc_offset_s=0)
    return t.summarise(rows, WINDOWS[load]["t_start"], WINDOWS[load]["t_end"])


def edit(load: str, column: str, value: str, every: int = 1, sampler: str = "nvml") -> str:
    """The real CSV with one column set to ``value`` in every ``every``-th line."""
    out = []
    for i, line in enumerate(read(DEV / f"{sampler}-{load}.csv").splitlines()):
        cells = [c.strip() for c in line.split(",")]
        if i % every == 0:
            cells[COL[column]] = value
        out.append(", ".join(cells))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------
# The six real loads

VERDICTS = {
    "noctx": "idle",
    "idle": "idle",
    "eager": "host_bound",
    "cudagraph": "launch_bound",
    "membw": "memory_bound",
    "compute": "power_bound",
}


@pytest.mark.parametrize("sampler", ["nvml", "smi"])
@pytest.mark.parametrize("load", sorted(VERDICTS))
def test_each_real_load_gets_its_verdict(sampler, load):
    out = d.diagnose(summary(load, sampler))
    assert out["verdict"] == VERDICTS[load], out["evidence"]
    assert out["bottleneck"] == out["verdict"]
    assert out["invalid"] is False and out["invalid_reasons"] == []
    assert out["label"] == d.LABELS[out["verdict"]]
    assert "40 samples per GPU at 4.0 Hz over 10.0 s" in out["evidence"][-1] or sampler == "smi"


def test_the_verdicts_tell_the_loads_apart():
    verdicts = [d.diagnose(summary(load))["verdict"] for load in ("noctx", "eager", "cudagraph", "membw", "compute")]
    assert len(set(verdicts)) == 5


def test_launch_bound_names_its_figures():
    out = d.diagnose(summary("cudagraph"))
    assert out["evidence"][0] == "util 100 % (p5 99 %), power 123 W = 18 % of 700 W, SM clock 1980/1980 MHz"
    assert "at power <= 60 % of the limit" in out["evidence"][1]
    assert out["evidence"][2] == "no clock event reason active"
    assert out["label"] == "launch / latency bound: many small kernels or interconnect waits, not compute bound"
    fig = out["figures"]
    assert fig["util_pct"] == pytest.approx(99.9, abs=0.2) and fig["power_frac"] == pytest.approx(0.176, abs=0.002)


def test_power_bound_names_the_cap():
    out = d.diagnose(summary("compute"))
    assert out["evidence"][0].startswith("util 100 % (p5 99 %), power 692 W = 99 % of 700 W, SM clock 14")
    assert "SW power cap active in 100 % of samples" in out["evidence"]
    assert "clock event reasons: sw_power_cap in 100 % of samples" in out["evidence"]


def test_memory_bound_names_memory_utilization():
    out = d.diagnose(summary("membw"))
    assert out["evidence"][0] == "util 100 % (p5 99 %), power 619 W = 88 % of 700 W, SM clock 1980/1980 MHz"
    assert "memory busy 100 % of the time (>= 60 %) at 88 % of the power limit" in out["evidence"]


def test_idle_tells_a_held_context_from_nothing_running():
    noctx = d.diagnose(summary("noctx"))
    held = d.diagnose(summary("idle"))
    assert noctx["verdict"] == held["verdict"] == "idle"
    assert "SM clock down at idle (17 % of max): nothing runs on the GPUs" in noctx["evidence"][1]
    assert "clock event reasons: gpu_idle in 100 % of samples" in noctx["evidence"]
    assert "SM clock at 100 % of max: a process holds the GPUs awake (CUDA context)" in held["evidence"][1]
    assert held["evidence"][0] == "util 0 % (p5 0 %), power 119 W = 17 % of 700 W, SM clock 1980/1980 MHz"


def test_host_bound_eager_launches_are_not_idle():
    out = d.diagnose(summary("eager"))
    assert out["verdict"] == "host_bound"
    assert out["evidence"][0] == "util 24 % (p5 20 %), power 120 W = 17 % of 700 W, SM clock 1980/1980 MHz"
    assert "kernels run only part of the time" in out["evidence"][1]
    assert "eager launches from Python" in out["label"]


def test_compute_bound_when_memory_is_not_the_limit():
    # the real copy load's figures with the memory rule moved out of the way: high power, no cap
    out = d.diagnose(summary("membw"), {"memory_busy_pct": 101})
    assert out["verdict"] == "compute_bound"
    assert "power 88 % of the limit (> 60 %) without the SW power cap, memory busy 100 % of the time" in out["evidence"]


# --------------------------------------------------------------------------------------------------
# Older recordings


def loads_summary(name: str, skip: int = 0):
    rows = t.parse_samples(read(SMI / "h200-x1-loads" / f"{name}.csv"), fields=LOADS_FIELDS, utc_offset_s=0)
    return t.summarise(rows[skip:])


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("idle", "idle"),
        ("compute", "power_bound"),
        ("launch-eager", "host_bound"),
        ("launch-cudagraph", "launch_bound"),
    ],
)
@pytest.mark.parametrize("skip", [0, 3])  # with and without the first samples, taken before the load began
def test_h200_x1_loads_recording(name, verdict, skip):
    out = d.diagnose(loads_summary(name, skip))
    assert out["verdict"] == verdict, out["evidence"]
    assert "clock event reason" in " ".join(out["evidence"])


def test_h200_x1_loads_launch_bound_figures():
    out = d.diagnose(loads_summary("launch-cudagraph", 3))
    assert out["evidence"][0] == "util 100 % (p5 100 %), power 125 W = 18 % of 700 W, SM clock 1980/1980 MHz"


def test_one_gpu_busy_one_idle_is_imbalanced():
    rows = t.parse_samples(read(SMI / "h200-x2" / "query-lms250-under-bf16-matmul-on-gpu0.csv"), utc_offset_s=0)
    out = d.diagnose(t.summarise(rows))
    assert out["verdict"] == "imbalanced"
    assert out["evidence"][0].startswith("mean of 2 GPUs: util 45 %")
    assert "GPU 0 util 90 % while GPU 1 util 0 % (spread 90 points > 40)" in out["evidence"]
    assert any(e.startswith("GPU 1: util 0 % (p5 0 %), power 78 W = 11 % of 700 W") for e in out["evidence"])


def test_power_bound_without_clock_event_reasons():
    rows = t.parse_samples(read(SMI / "h200-x1-device" / "query-lms250-under-bf16-matmul.csv"), utc_offset_s=0)
    out = d.diagnose(t.summarise(rows))
    assert out["verdict"] == "power_bound"
    assert "power at 99 % of the limit (clock event reasons not sampled)" in out["evidence"]
    assert "clock event reasons not sampled" in out["evidence"]


# --------------------------------------------------------------------------------------------------
# Invalid GPU state


def test_hw_slowdown_makes_the_level_invalid():
    out = d.diagnose(summary("compute", text=edit("compute", "clocks_event_reasons.hw_slowdown", "Active", every=4)))
    assert out["verdict"] == "invalid_gpu_state" and out["invalid"] is True
    assert out["invalid_reasons"] == ["GPU 0: HW slowdown active in 10 of 40 samples"]
    assert out["evidence"][0] == out["invalid_reasons"][0]
    assert out["bottleneck"] == "power_bound"  # what the figures alone would say


def test_one_slowdown_sample_is_tolerated_by_default():
    text = edit("compute", "clocks_event_reasons.hw_slowdown", "Active", every=1000)  # the first line only
    assert d.diagnose(summary("compute", text=text))["verdict"] == "power_bound"  # line 0 is before the window
    lines = read(DEV / "nvml-compute.csv").splitlines()
    cells = [c.strip() for c in lines[20].split(",")]
    cells[COL["clocks_event_reasons.hw_slowdown"]] = "Active"
    lines[20] = ", ".join(cells)
    one = "\n".join(lines) + "\n"
    assert d.diagnose(summary("compute", text=one))["verdict"] == "power_bound"
    strict = d.diagnose(summary("compute", text=one), {"slowdown_samples_max": 0})
    assert strict["invalid_reasons"] == ["GPU 0: HW slowdown active in 1 of 40 samples"]


def test_thermal_slowdown_from_the_bitmask_alone():
    # 0x44 = sw_power_cap | hw_thermal_slowdown, in a recording that samples only the bitmask
    lines = read(SMI / "h200-x1-loads" / "compute.csv").splitlines()
    edited = [ln.replace("0x0000000000000004", "0x0000000000000044") for ln in lines]
    rows = t.parse_samples("\n".join(edited), fields=LOADS_FIELDS, utc_offset_s=0)
    out = d.diagnose(t.summarise(rows))
    assert out["verdict"] == "invalid_gpu_state"
    assert out["invalid_reasons"] == ["the GPU: HW thermal slowdown active in 33 of 36 samples"]


def test_new_ecc_errors_make_the_level_invalid():
    lines = read(DEV / "nvml-membw.csv").splitlines()
    for i in range(30, len(lines)):
        cells = [c.strip() for c in lines[i].split(",")]
        cells[COL["ecc.errors.corrected.volatile.total"]] = "3"
        lines[i] = ", ".join(cells)
    text = "\n".join(lines) + "\n"
    out = d.diagnose(summary("membw", text=text))
    assert out["verdict"] == "invalid_gpu_state"
    assert out["invalid_reasons"] == ["GPU 0: 3 new corrected volatile ECC error(s) during the level (0 -> 3)"]
    assert d.diagnose(summary("membw", text=text), {"ecc_corrected_max": 5})["verdict"] == "memory_bound"


def test_an_xid_makes_the_level_invalid():
    xid = t.xid_events(read(PUB / "xid79-journalctl-ogkm-1010.txt"))
    out = d.diagnose(summary("cudagraph"), xid=xid)
    assert out["verdict"] == "invalid_gpu_state" and out["bottleneck"] == "launch_bound"
    assert out["invalid_reasons"] == [
        "Xid 79 on GPU PCI:0000:01:00 (pid 6755 vivaldi-bin): GPU has fallen off the bus."
    ]
    xid = t.xid_events(read(PUB / "fallen-off-bus-no-xid-nvsentinel-155.txt"))
    out = d.diagnose(None, xid=xid)
    assert out["verdict"] == "invalid_gpu_state"
    assert out["invalid_reasons"] == ["Xid 79 on GPU PCI:0000:b3:00: GPU has fallen off the bus (no Xid line)"]
    assert d.diagnose(summary("cudagraph"), xid=[])["verdict"] == "launch_bound"


# --------------------------------------------------------------------------------------------------
# Unknown


def test_no_samples_is_unknown_with_the_reason():
    for s in (None, t.summarise([]), summary("compute", text="")):
        out = d.diagnose(s)
        assert out["verdict"] == "unknown" and out["invalid"] is False
        assert out["label"].endswith("no telemetry samples in the level's window")


def test_too_few_samples_is_unknown():
    rows = t.parse_samples(read(DEV / "nvml-compute.csv"), utc_offset_s=0)
    out = d.diagnose(t.summarise(rows, rows[20]["t"], rows[21]["t"]))
    assert out["verdict"] == "unknown"
    assert out["evidence"][0] == "only 2 sample(s) for GPU 0 in the window (need 4)"
    assert out["bottleneck"] == "unknown"


def test_utilization_not_reported_is_unknown():
    out = d.diagnose(summary("compute", text=edit("compute", "utilization.gpu", "[N/A]")))
    assert out["verdict"] == "unknown" and "utilization.gpu was not reported" in out["label"]


def test_busy_without_power_is_unknown():
    out = d.diagnose(summary("cudagraph", text=edit("cudagraph", "power.draw", "[Not Supported]")))
    assert out["verdict"] == "unknown"
    assert "launch bound cannot be told from compute bound" in out["label"]
    assert "power not reported" in out["evidence"][1]


# --------------------------------------------------------------------------------------------------
# Thresholds


def test_default_thresholds_are_plain_numbers():
    assert d.DEFAULT_THRESHOLDS["busy_util_pct"] == 90.0 and d.DEFAULT_THRESHOLDS["launch_power_frac_max"] == 0.60
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in d.DEFAULT_THRESHOLDS.values())
    assert d.check_thresholds(None) == d.DEFAULT_THRESHOLDS
    assert d.check_thresholds({"busy_util_pct": 80})["busy_util_pct"] == 80


def test_a_threshold_moves_the_verdict():
    assert d.diagnose(summary("eager"), {"busy_util_pct": 20})["verdict"] == "launch_bound"
    assert d.diagnose(summary("eager"), {"idle_util_pct": 30})["verdict"] == "idle"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"busy_util": 90}, r"unknown diagnosis threshold\(s\) busy_util; known: busy_util_pct, "),
        ({"busy_util_pct": "90"}, "diagnosis threshold busy_util_pct must be a number >= 0, got '90'"),
        ({"busy_util_pct": -1}, "must be a number >= 0, got -1"),
        ({"min_samples": True}, "must be a number >= 0, got True"),
        (["busy_util_pct"], "must be a mapping of name to number"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_key(bad, message):
    with pytest.raises(ValueError, match=message):
        d.diagnose(summary("eager"), bad)


def test_every_verdict_has_a_label():
    assert set(d.LABELS) == set(d.VERDICTS)
    assert d.LABELS["idle"] == (
        "GPUs idle: the bottleneck is before the GPU (CPU-side launches, scheduler, tokenizer, client)"
    )
