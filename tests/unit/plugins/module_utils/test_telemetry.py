"""The telemetry samplers, parser, summaries, energy and Xid reader against real recorded output.

Recordings: ``tests/fixtures/telemetry/h200-x1-20261201/`` (both samplers of this module on a real H200, six
loads, see its README), ``tests/fixtures/nvidia-smi/h200-x1-loads/``, ``h200-x2/``, ``h200-x1-device/`` and the
public captures in ``tests/fixtures/telemetry/public/`` (SOURCES.md cites each).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import telemetry as t
from helpers.paths import FIXTURES

DEV = FIXTURES / "telemetry" / "h200-x1-20261201"
PUB = FIXTURES / "telemetry" / "public"
SMI = FIXTURES / "nvidia-smi"
LOADS = ("noctx", "idle", "eager", "cudagraph", "membw", "compute")
WINDOWS = json.loads((DEV / "windows.json").read_text())
# The h200-x1-loads recording's own field order (its README gives the command line).
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


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def rows_of(sampler: str, load: str) -> list[dict]:
    # The device VM ran in UTC (summary.json: tz UTC); the test process may not.
    return t.parse_samples(read(DEV / f"{sampler}-{load}.csv"), utc_offset_s=0)


def window(load: str) -> tuple[float, float]:
    return WINDOWS[load]["t_start"], WINDOWS[load]["t_end"]


# --------------------------------------------------------------------------------------------------
# Field names


def help_fields() -> set[str]:
    names = set()
    for line in read(SMI / "h200-x1-device" / "help-query-gpu.txt").splitlines():
        if line.startswith('"'):
            names.update(re.findall(r'"([^"]+)"', line))
    return names


def test_every_query_field_is_listed_by_nvidia_smi_help():
    listed = help_fields()
    assert [f for f in t.QUERY_FIELDS if f not in listed] == []
    # the names drivers before R535 need are listed as aliases by the 580 driver too
    assert [f for f in t.query_fields("470.82.01") if f not in listed] == []


def test_query_fields_follow_the_driver_branch():
    assert t.query_fields("580.159.04") == t.QUERY_FIELDS
    assert t.query_fields("535.113.01") == t.QUERY_FIELDS
    assert t.query_fields(None) == t.QUERY_FIELDS
    legacy = t.query_fields("530.41.03")
    assert "clocks_throttle_reasons.active" in legacy and "clocks_event_reasons.active" not in legacy
    assert [t.canonical_field(f) for f in legacy] == list(t.QUERY_FIELDS)


def test_real_header_names_the_query_fields_in_order():
    # nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv on the H200: clocks.sm comes back as clocks.current.sm
    header = read(DEV / "query-fields-header.csv").splitlines()[0]
    cells = [c.strip() for c in header.split(",")]
    assert "clocks.current.sm [MHz]" in cells
    assert [t.canonical_field(c) for c in cells] == list(t.QUERY_FIELDS)


def test_real_header_row_parses_with_units():
    rows = t.parse_samples(read(DEV / "query-fields-header.csv"), utc_offset_s=0)
    assert len(rows) == 1
    r = rows[0]
    assert r["index"] == 0 and r["timestamp"] == "2026/12/01 08:50:37.445"
    assert r["t"] == calendar.timegm((2026, 12, 1, 8, 50, 37, 0, 0, 0)) + 0.445
    assert (r["util"], r["mem_util"], r["power_w"], r["power_limit_w"]) == (0.0, 0.0, 106.39, 700.0)
    assert (r["sm_clock_mhz"], r["sm_clock_max_mhz"], r["mem_used_mib"], r["mem_total_mib"]) == (
        375.0,
        1980.0,
        0.0,
        143771.0,
    )
    assert r["temp_c"] == 34.0 and r["reasons"] == 0x1
    assert r["reason_sw_power_cap"] is False and r["reason_hw_slowdown"] is False
    assert (r["ecc_uncorrected"], r["ecc_corrected"]) == (0.0, 0.0)


# --------------------------------------------------------------------------------------------------
# Sampler command lines


def test_smi_sampler_argv():
    argv = t.smi_sampler_argv("/usr/local/nvidia/bin/nvidia-smi", 250)
    assert argv == [
        "/usr/local/nvidia/bin/nvidia-smi",
        "--query-gpu=" + ",".join(t.QUERY_FIELDS),
        "--format=csv,noheader,nounits",
        "-lms",
        "250",
    ]
    with_file = t.smi_sampler_argv("nvidia-smi", 100, out_csv="/run/x.csv")
    assert with_file[-1] == "--filename=/run/x.csv" and with_file[-2] == "100"


def test_smi_flags_exist_in_the_real_help():
    text = read(DEV / "nvidia-smi-h.txt")
    assert "-lms, --loop-ms=" in text
    assert "-f,   --filename=" in text
    assert "--format=" in text and "noheader" in text and "nounits" in text


@pytest.mark.parametrize("bad", [0, -5, 2.5, "250", True, None])
def test_bad_interval_is_refused_with_the_fix(bad):
    with pytest.raises(ValueError, match=r"whole number of milliseconds >= 1.*250 gives 4 Hz"):
        t.smi_sampler_argv("nvidia-smi", bad)
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        t.nvml_sampler_argv("python3", "/x.csv", bad)


def test_missing_paths_are_refused():
    with pytest.raises(ValueError, match="nvidia-smi path"):
        t.smi_sampler_argv("", 250)
    with pytest.raises(ValueError, match="interpreter"):
        t.nvml_sampler_argv("", "/x.csv")
    with pytest.raises(ValueError, match="samples CSV"):
        t.nvml_sampler_argv("python3", "")
    with pytest.raises(ValueError, match="interpreter"):
        t.nvml_probe_argv("")


def test_nvml_sampler_argv_carries_the_source_and_the_fields():
    argv = t.nvml_sampler_argv("/venv/bin/python", "/run/s.csv", 250)
    assert argv[:2] == ["/venv/bin/python", "-c"] and argv[3:] == ["--out", "/run/s.csv", "--interval-ms", "250"]
    assert argv[2] == t.NVML_SAMPLER_SOURCE
    assert repr(t.QUERY_FIELDS) in t.NVML_SAMPLER_SOURCE
    compile(t.NVML_SAMPLER_SOURCE, "<nvml sampler>", "exec")
    assert t.nvml_probe_argv("/venv/bin/python")[-1] == "--probe"


# --------------------------------------------------------------------------------------------------
# The NVML sampler as a process. pynvml is replaced by a stand-in module written here (this machine has no
# GPU); the stand-in answers with the types and constants of nvidia-ml-py 13.615.71's pynvml.py. What the
# real library answered on the H200 is in the h200-x1-20261201 recordings, tested further below.

FAKE_PYNVML = """
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_UNKNOWN = 999
nvmlMemory_v2 = 0x02000028


class NVMLError(Exception):
    def __init__(self, value):
        Exception.__init__(self, value)
        self.value = value


class _Util:
    gpu = 97
    memory = 12


class _Mem:
    def __init__(self, v2):
        self.used = (1642 if v2 else 2257) * 2**20
        self.total = 143771 * 2**20


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return b"580.159.04"


def nvmlDeviceGetCount():
    return 2


def nvmlDeviceGetHandleByIndex(i):
    return i


def nvmlDeviceGetUtilizationRates(h):
    return _Util()


def nvmlDeviceGetPowerUsage(h):
    return 123456 + h


def nvmlDeviceGetEnforcedPowerLimit(h):
    return 700000


def nvmlDeviceGetClockInfo(h, kind):
    return 1980


def nvmlDeviceGetMaxClockInfo(h, kind):
    return 1980


def nvmlDeviceGetMemoryInfo(h, version=None):
    return _Mem(version is not None)


def nvmlDeviceGetTemperature(h, sensor):
    if h == 1:
        raise NVMLError(NVML_ERROR_UNKNOWN)
    return 41


def nvmlDeviceGetCurrentClocksEventReasons(h):
    return 0x4 | 0x8


def nvmlDeviceGetTotalEccErrors(h, kind, counter):
    if kind == NVML_MEMORY_ERROR_TYPE_CORRECTED:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return 0
"""


def fake_env(tmp_path: Path, body: str = FAKE_PYNVML) -> dict:
    (tmp_path / "pynvml.py").write_text(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path)
    env["TZ"] = "UTC"
    return env


def test_nvml_sampler_writes_the_smi_format_and_stops_on_sigterm(tmp_path):
    out = tmp_path / "samples.csv"
    proc = subprocess.Popen(t.nvml_sampler_argv(sys.executable, str(out), 50), env=fake_env(tmp_path))
    deadline = time.time() + 10
    while time.time() < deadline and len(out.read_text().splitlines() if out.exists() else []) < 8:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    text = out.read_text()
    lines = text.splitlines()
    assert len(lines) >= 8 and text.endswith("\n")
    cells = [c.strip() for c in lines[0].split(",")]
    assert len(cells) == len(t.QUERY_FIELDS)
    assert re.match(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}$", cells[1])
    assert cells[11] == "0x000000000000000c"  # 16 hex digits, as nvidia-smi prints the bitmask
    assert cells[-1] == "[Not Supported]"
    rows = t.parse_samples(text)
    assert {r["index"] for r in rows} == {0, 1}
    r0 = next(r for r in rows if r["index"] == 0)
    assert (r0["util"], r0["mem_util"], r0["power_w"], r0["power_limit_w"]) == (97.0, 12.0, 123.46, 700.0)
    assert (r0["mem_used_mib"], r0["mem_total_mib"]) == (1642.0, 143771.0)  # memory info v2, as nvidia-smi
    assert r0["reason_sw_power_cap"] is True and r0["reason_hw_slowdown"] is True
    assert r0["reason_hw_thermal_slowdown"] is False and r0["ecc_corrected"] is None
    assert r0["ecc_uncorrected"] == 0.0 and abs(r0["t"] - time.time()) < 30
    # one failing reading leaves [N/A] in its cell and sampling goes on
    r1 = next(r for r in rows if r["index"] == 1)
    assert r1["temp_c"] is None and r1["power_w"] == 123.46 and r1["util"] == 97.0
    s = t.summarise(rows)
    assert s["gpu_count"] == 2 and 10 < s["rate_hz"] < 25


def test_nvml_probe_reports_what_it_found(tmp_path):
    proc = subprocess.run(t.nvml_probe_argv(sys.executable), env=fake_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    info = t.parse_probe(proc.stdout)
    assert info == {
        "ok": True,
        "driver": "580.159.04",
        "gpus": 2,
        "reasons_api": "nvmlDeviceGetCurrentClocksEventReasons",
        "memory_info": "v2",
        "pynvml": None,
    }


def test_nvml_probe_on_the_real_h200():
    probe = read(DEV / "nvml-probe.txt")
    info = t.parse_probe(probe.split("stdout: ", 1)[1])
    assert info["ok"] and info["gpus"] == 1 and info["driver"] == "580.159.04"
    assert info["reasons_api"] == "nvmlDeviceGetCurrentClocksEventReasons" and info["memory_info"] == "v2"


def test_memory_v2_is_what_nvidia_smi_reports():
    # the NVML sampler reads memory info v2: its ``used`` is nvidia-smi's memory.used; v1 adds the reserved part
    text = read(DEV / "memory-v1-v2.txt")
    smi_used, smi_reserved, _total = (int(x) for x in re.search(r"\(MiB\): ([\d, ]+)", text).group(1).split(","))
    v1_used = int(re.search(r"NVML v1 used (\d+)", text).group(1))
    v2_used, v2_reserved = (int(x) for x in re.search(r"NVML v2 used (\d+) reserved (\d+)", text).groups())
    assert abs(v2_used - smi_used) <= 1 and abs(v2_reserved - smi_reserved) <= 1
    assert abs(v1_used - (v2_used + v2_reserved)) <= 1


@pytest.mark.parametrize(
    ("body", "rc", "message"),
    [
        ("raise ImportError('libnvidia-ml.so.1: cannot open shared object file')\n", 3, "cannot import pynvml"),
        (FAKE_PYNVML + "\ndef nvmlInit():\n    raise NVMLError(9)\n", 4, "nvmlInit failed"),
    ],
)
def test_nvml_sampler_fails_clearly_without_nvml(tmp_path, body, rc, message):
    env = fake_env(tmp_path, body)
    probe = subprocess.run(t.nvml_probe_argv(sys.executable), env=env, capture_output=True, text=True)
    assert probe.returncode == rc and message in probe.stderr
    assert t.parse_probe(probe.stdout) is None
    run = subprocess.run(
        t.nvml_sampler_argv(sys.executable, str(tmp_path / "x.csv")), env=env, capture_output=True, text=True
    )
    assert run.returncode == rc and message in run.stderr


def test_nvml_sampler_usage_errors(tmp_path):
    env = fake_env(tmp_path)
    for args, text in (([], "--out FILE is required"), (["--bogus"], "unknown or incomplete argument")):
        proc = subprocess.run(
            [sys.executable, "-c", t.NVML_SAMPLER_SOURCE, *args], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 2 and text in proc.stderr
    proc = subprocess.run(
        t.nvml_sampler_argv(sys.executable, str(tmp_path / "no" / "such" / "dir.csv")),
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 5 and "cannot write" in proc.stderr


# --------------------------------------------------------------------------------------------------
# Parsing the real recordings


@pytest.mark.parametrize("sampler", ["nvml", "smi"])
@pytest.mark.parametrize("load", LOADS)
def test_device_recordings_parse_whole(sampler, load):
    text = read(DEV / f"{sampler}-{load}.csv")
    rows = rows_of(sampler, load)
    assert len(rows) == len(text.splitlines())
    assert all(r["index"] == 0 and r["t"] is not None for r in rows)
    assert all(r["mem_total_mib"] == 143771.0 and r["power_limit_w"] == 700.0 for r in rows)
    assert all(r["sm_clock_max_mhz"] == 1980.0 and r["reasons"] is not None for r in rows)
    assert all(r["ecc_uncorrected"] == 0.0 and r["ecc_corrected"] == 0.0 for r in rows)
    times = [r["t"] for r in rows]
    assert times == sorted(times)
    t0, t1 = window(load)
    assert times[0] < t0 and times[-1] > t1  # the samplers ran around the whole window


def test_a_half_written_last_line_is_skipped():
    # the line a killed writer can leave behind: the real file cut inside its last line
    text = read(DEV / "smi-compute.csv")
    cut = text[: text.rstrip("\n").rfind(",") - 3]
    assert len(t.parse_samples(cut)) == len(text.splitlines()) - 1


def test_h200_x1_loads_recording_with_its_field_order():
    rows = t.parse_samples(read(SMI / "h200-x1-loads" / "compute.csv"), fields=LOADS_FIELDS, utc_offset_s=0)
    assert len(rows) == 36 and all(r["index"] is None for r in rows)
    r = rows[3]
    assert (r["util"], r["power_w"], r["power_limit_w"], r["sm_clock_mhz"], r["reasons"]) == (
        100.0,
        273.45,
        700.0,
        1515.0,
        0x4,
    )
    assert "reason_sw_power_cap" not in r and t.reason_active(r, "sw_power_cap") is True
    assert t.reason_active(r, "gpu_idle") is False


def test_h200_x2_recording_with_header_units_and_two_gpus():
    rows = t.parse_samples(read(SMI / "h200-x2" / "query-lms250-under-bf16-matmul-on-gpu0.csv"), utc_offset_s=0)
    assert len(rows) == 50 and {r["index"] for r in rows} == {0, 1}
    g0 = rows[2]
    assert (g0["index"], g0["util"], g0["power_w"], g0["power_requested_limit_w"]) == (0, 59.0, 168.67, 700.0)
    assert (g0["sm_clock_mhz"], g0["mem_used_mib"], g0["temp_c"]) == (1500.0, 1139.0, 50.0)
    assert g0["reasons"] == 0x4 and g0["reason_sw_power_cap"] is True and g0["reason_hw_slowdown"] is False
    assert "power_limit_w" not in g0  # that recording asked for power.limit, not enforced.power.limit


def test_not_available_values_become_none():
    rows = t.parse_samples(
        read(PUB / "query-gpu-not-supported-megaminer-235.csv"),
        fields=(
            "gpu_name",
            "utilization.gpu",
            "utilization.memory",
            "temperature.gpu",
            "power.draw",
            "power.limit",
            "fan.speed",
            "pstate",
            "clocks.current.graphics",
            "clocks.current.memory",
            "power.max_limit",
            "power.default_limit",
        ),
    )
    assert len(rows) == 1
    r = rows[0]
    assert r["util"] is None and r["mem_util"] is None and r["power_w"] is None
    assert r["power_requested_limit_w"] is None and r["temp_c"] == 52.0 and r["t"] is None
    rows = t.parse_samples(
        read(PUB / "query-gpu-na-i3pystatus-776.csv"),
        fields=(
            "memory.total",
            "memory.free",
            "memory.used",
            "temperature.gpu",
            "fan.speed",
            "utilization.gpu",
            "utilization.memory",
        ),
    )
    assert rows[0]["mem_total_mib"] == 2004.0 and rows[0]["util"] == 0.0 and rows[0]["temp_c"] == 44.0
    s = t.summarise([dict(rows[0], t=1.0, index=0)])
    assert s["gpus"][0]["power_w"] is None and s["gpus"][0]["util"] == {"mean": 0.0, "p5": 0.0, "max": 0.0}


def test_timestamps_read_as_local_time_by_default(monkeypatch):
    if not hasattr(time, "tzset"):
        pytest.skip("no time.tzset on this platform")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert t.parse_timestamp("2026/12/01 08:50:37.445") == t.parse_timestamp("2026/12/01 08:50:37.445", 0)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert t.parse_timestamp("2026/12/01 09:50:37.445", 3600) == t.parse_timestamp("2026/12/01 08:50:37.445", 0)
    assert t.parse_timestamp("[N/A]") is None and t.parse_timestamp("") is None


# --------------------------------------------------------------------------------------------------
# Summaries of the real loads (figures as bench/device/results/telemetry-h200-x1-20261201/run.log prints them)

EXPECTED = {
    # load: (util mean, power W mean, SM clock MHz mean, dominant reason or None)
    "noctx": (0, 78, 345, "gpu_idle"),
    "idle": (0, 119, 1980, None),
    "eager": (24, 120, 1980, None),
    "cudagraph": (100, 123, 1980, None),
    "membw": (100, 619, 1980, None),
    "compute": (100, 692, 1457, "sw_power_cap"),
}


@pytest.mark.parametrize("sampler", ["nvml", "smi"])
@pytest.mark.parametrize("load", LOADS)
def test_summary_of_each_real_load(sampler, load):
    s = t.summarise(rows_of(sampler, load), *window(load))
    util, power, clock, reason = EXPECTED[load]
    assert s["gpu_count"] == 1 and s["samples"] in (39, 40) and 3.8 < s["rate_hz"] <= 4.05
    g = s["gpus"][0]
    assert g["max_gap_s"] < 0.5 and s["window"]["duration_s"] == pytest.approx(10.0)
    assert g["util"]["mean"] == pytest.approx(util, abs=1.5)
    assert g["power_w"]["mean"] == pytest.approx(power, abs=2)
    assert g["sm_clock_mhz"]["mean"] == pytest.approx(clock, abs=5)
    assert g["power_frac"]["mean"] == pytest.approx(power / 700.0, abs=0.005)
    assert g["sm_clock_frac"]["mean"] == pytest.approx(clock / 1980.0, abs=0.005)
    assert g["power_limit_w"] == 700.0 and g["sm_clock_max_mhz"] == 1980.0 and g["mem_total_mib"] == 143771.0
    active = {k: v for k, v in g["reasons"].items() if v}
    assert active == ({reason: 1.0} if reason else {})
    assert g["reasons_samples"] == g["samples"]
    assert g["ecc"] == {
        "uncorrected": {"first": 0.0, "last": 0.0, "delta": 0.0},
        "corrected": {"first": 0.0, "last": 0.0, "delta": 0.0},
    }
    for key in ("util", "power_w", "sm_clock_mhz"):
        assert s["all"][key] == g[key]
        assert g[key]["p5"] <= g[key]["mean"] <= g[key]["max"]


@pytest.mark.parametrize("load", LOADS)
def test_nvml_and_nvidia_smi_agree_on_the_same_load(load):
    nv, sm = (t.summarise(rows_of(k, load), *window(load))["all"] for k in ("nvml", "smi"))
    assert nv["util"]["mean"] == pytest.approx(sm["util"]["mean"], abs=1.5)
    assert nv["mem_util"]["mean"] == pytest.approx(sm["mem_util"]["mean"], abs=1.5)
    assert nv["power_w"]["mean"] == pytest.approx(sm["power_w"]["mean"], abs=1.0)
    assert nv["sm_clock_mhz"]["mean"] == pytest.approx(sm["sm_clock_mhz"]["mean"], rel=0.01)
    assert nv["temp_c"]["mean"] == pytest.approx(sm["temp_c"]["mean"], abs=1.0)
    assert nv["mem_used_mib"]["mean"] == pytest.approx(sm["mem_used_mib"]["mean"], abs=2)
    assert nv["reasons"] == sm["reasons"]


def test_summary_of_two_gpus_pools_and_spreads():
    rows = t.parse_samples(read(SMI / "h200-x2" / "query-lms250-under-bf16-matmul-on-gpu0.csv"), utc_offset_s=0)
    s = t.summarise(rows)
    assert s["gpu_count"] == 2 and s["samples"] == 50 and [g["samples"] for g in s["gpus"]] == [25, 25]
    spread = s["all"]["spread"]["util"]
    assert (spread["max_gpu"], spread["min_gpu"], spread["min"]) == (0, 1, 0.0) and spread["max"] > 85
    assert s["gpus"][1]["reasons"]["gpu_idle"] == 1.0 and s["gpus"][0]["reasons"]["sw_power_cap"] > 0.9
    assert s["all"]["util"]["mean"] == pytest.approx((spread["max"] + spread["min"]) / 2)
    assert s["all"]["power_limit_w"] == 700.0  # power.limit stands in when enforced.power.limit was not sampled


def test_summary_window_and_empty_input():
    rows = rows_of("smi", "compute")
    empty = t.summarise(rows, 0, 1)
    assert empty["samples"] == 0 and empty["gpus"] == [] and empty["rate_hz"] is None
    assert empty["all"]["util"] is None and empty["all"]["spread"] == {}
    assert t.summarise([])["gpus"] == [] and t.summarise(None)["samples"] == 0
    whole = t.summarise(rows)
    assert whole["samples"] == len(rows) and whole["window"]["t_start"] == rows[0]["t"]


def test_ecc_counter_delta_and_reset():
    rows = [{"t": float(i), "index": 0, "ecc_uncorrected": v} for i, v in enumerate([2, 2, 5, 5])]
    assert t.summarise(rows)["gpus"][0]["ecc"]["uncorrected"] == {"first": 2, "last": 5, "delta": 3}
    rows = [{"t": float(i), "index": 0, "ecc_uncorrected": v} for i, v in enumerate([7, 0, 1])]
    assert t.summarise(rows)["gpus"][0]["ecc"]["uncorrected"]["delta"] == 1  # driver reload: counter restarted


def test_percentile_is_linear_like_numpy():
    assert t.percentile([1, 2, 3, 4, 5], 5) == pytest.approx(1.2)
    assert t.percentile([10], 5) == 10 and t.percentile([], 5) is None
    assert t.stats([None, None]) is None


# --------------------------------------------------------------------------------------------------
# Energy


@pytest.mark.parametrize("load", LOADS)
def test_energy_of_each_real_load(load):
    t0, t1 = window(load)
    for sampler in ("nvml", "smi"):
        rows = rows_of(sampler, load)
        e = t.energy(rows, t0, t1)
        assert e["valid"] and e["reasons"] == []
        assert e["duration_s"] == pytest.approx(10.0)
        assert e["energy_j"] == pytest.approx(EXPECTED[load][1] * 10.0, rel=0.02)
        assert e["per_gpu_j"] == {0: e["energy_j"]}
        assert e["avg_power_w"] == pytest.approx(e["energy_j"] / 10.0)
        assert t.energy_j(rows, t0, t1) == e["energy_j"]


def test_energy_against_a_hand_integral_of_the_real_samples():
    rows = rows_of("smi", "compute")
    inside = [r for r in rows if rows[5]["t"] <= r["t"] <= rows[20]["t"]]
    hand = sum((b["t"] - a["t"]) * (a["power_w"] + b["power_w"]) / 2 for a, b in zip(inside, inside[1:], strict=False))
    assert t.energy_j(rows, rows[5]["t"], rows[20]["t"]) == pytest.approx(hand)
    # a boundary between samples is interpolated linearly
    mid = (rows[5]["t"] + rows[6]["t"]) / 2
    p_mid = (rows[5]["power_w"] + rows[6]["power_w"]) / 2
    part = (rows[6]["t"] - mid) * (p_mid + rows[6]["power_w"]) / 2
    assert t.energy_j(rows, mid, rows[6]["t"]) == pytest.approx(part)


def test_energy_sums_gpus():
    rows = t.parse_samples(read(SMI / "h200-x2" / "query-lms250-under-bf16-matmul-on-gpu0.csv"), utc_offset_s=0)
    e = t.energy(rows)
    assert e["valid"] and set(e["per_gpu_j"]) == {0, 1}
    assert e["energy_j"] == pytest.approx(sum(e["per_gpu_j"].values()))
    assert e["per_gpu_j"][1] == pytest.approx(78.09 * e["duration_s"], rel=0.01)  # the idle GPU: flat 78 W


def test_energy_is_refused_when_samples_do_not_cover_the_window():
    rows = rows_of("smi", "compute")
    t0, t1 = window("compute")
    e = t.energy(rows, rows[0]["t"] - 1.0, t1)
    assert not e["valid"] and e["energy_j"] is None and "after the window start" in e["reasons"][0]
    assert t.energy_j(rows, t0, rows[-1]["t"] + 1.0) is None
    gappy = rows[:10] + rows[30:]  # 5 s of samples lost in the window
    e = t.energy(gappy, t0, t1)
    assert not e["valid"] and "without a power sample" in e["reasons"][0]
    assert t.energy(gappy, t0, t1, max_gap_s=6.0)["valid"]
    assert t.energy([], t0, t1)["reasons"] == ["no power samples"]
    assert "empty window" in t.energy(rows, t1, t0)["reasons"][0]


def test_joules_per_token():
    assert t.joules_per_token(6911.0, 1000) == pytest.approx(6.911)
    assert t.joules_per_token(None, 1000) is None
    assert t.joules_per_token(6911.0, 0) is None and t.joules_per_token(6911.0, None) is None


# --------------------------------------------------------------------------------------------------
# Xid events


def test_xid79_with_pid_and_process_in_journalctl():
    events = t.xid_events(read(PUB / "xid79-journalctl-ogkm-1010.txt"))
    assert len(events) == 1  # the driver's second "fallen off the bus" line is the same event
    e = events[0]
    assert (e["xid"], e["pci"], e["pid"], e["process"]) == (79, "0000:01:00", 6755, "vivaldi-bin")
    assert e["message"] == "GPU has fallen off the bus." and e["t"] is None  # journalctl short: no year
    assert "inferred" not in e


def test_xid79_without_pid():
    (e,) = t.xid_events(read(PUB / "xid79-journalctl-ogkm-1151.txt"))
    assert (e["xid"], e["pci"], e["pid"], e["process"], e["message"]) == (
        79,
        "0000:2b:00",
        None,
        None,
        "GPU has fallen off the bus.",
    )


def test_xids_in_dmesg_ctime_with_unknown_pid():
    events = t.xid_events(read(PUB / "xid-dmesg-ctime-gpud-46.txt"), utc_offset_s=0)
    assert [e["xid"] for e in events] == [13, 13, 13, 109]
    assert events[0]["pid"] is None and events[0]["process"] is None
    assert events[0]["message"].startswith("Graphics SM Warp Exception")
    assert events[0]["t"] == calendar.timegm((2024, 8, 30, 11, 43, 9, 0, 0, 0))
    assert (events[3]["pid"], events[3]["process"]) == (1797828, "pt_main_thread")
    assert events[3]["message"].startswith("Ch 00000008, errorString CTX SWITCH TIMEOUT")
    since = calendar.timegm((2024, 8, 30, 11, 43, 10, 0, 0, 0))
    assert [e["xid"] for e in t.xid_events(read(PUB / "xid-dmesg-ctime-gpud-46.txt"), since=since, utc_offset_s=0)] == [
        109
    ]


def test_xids_in_plain_dmesg_need_the_boot_time():
    text = read(PUB / "xid-dmesg-chia-gigahorse-301.txt")
    events = t.xid_events(text)
    assert [e["xid"] for e in events] == [31, 62, 45, 45, 45] and all(e["t"] is None for e in events)
    assert (events[0]["pid"], events[0]["process"]) == (13332, "cuda_plot_k32_v")
    assert t.xid_events(text, since=0) == []  # no usable time: left out once the caller asks for new events
    boot = t.boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
    assert boot == 1700000000.0
    timed = t.xid_events(text, boot=boot)
    assert timed[0]["t"] == pytest.approx(1700000000 + 14328.198504)
    assert [e["xid"] for e in t.xid_events(text, since=boot + 14370.0, boot=boot)] == [62, 45, 45, 45]


def test_old_driver_formats():
    events = t.xid_events(read(PUB / "xid-old-format-bumblebee-677.txt"))
    assert [(e["xid"], e["message"]) for e in events] == [
        (32, "Channel ID 00000000 intr 00004000"),
        (32, "Channel ID 00000000 intr 00004000"),
        (31, "Ch 00000003, engmask 00000101, intr 10000000"),
    ]
    events = t.xid_events(read(PUB / "xid-no-pci-prefix-pastebin-xJaypMZt.txt"))
    assert [(e["xid"], e["pci"], e.get("inferred")) for e in events] == [
        (3, "0000:01:00", None),
        (79, "0000:01:00", True),
    ]


def test_fallen_off_the_bus_without_an_xid_line():
    (e,) = t.xid_events(read(PUB / "fallen-off-bus-no-xid-nvsentinel-155.txt"))
    assert (e["xid"], e["pci"], e["inferred"]) == (79, "0000:b3:00", True)


def test_xid45_names_the_process_on_each_gpu():
    events = t.xid_events(read(PUB / "xid45-journalctl-ogkm-1150.txt"))
    assert [(e["pci"], e["pid"], e["process"]) for e in events] == [
        ("0000:dc:00", 1818990, "python3"),
        ("0000:ed:00", 1818992, "python3"),
        ("0000:ba:00", 1818989, "python3"),
        ("0000:97:00", 1818987, "python3"),
    ]
    assert events[0]["message"] == "Ch 00000001 caused by previous Xid 149"


def test_journal_prefixes_with_a_time():
    # the real Xid line of xid79-journalctl-ogkm-1010.txt behind the prefixes journalctl -o short-unix and
    # -o short-iso write (journalctl(1); short-iso's offset has no colon, systemd issue 26639)
    line = "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=6755, name=vivaldi-bin, GPU has fallen off the bus."
    (e,) = t.xid_events("1777040535.123456 robin-linux-x3d " + line)
    assert e["t"] == pytest.approx(1777040535.123456)
    (e,) = t.xid_events("2026-04-24T16:22:15+0200 robin-linux-x3d " + line)
    assert e["t"] == calendar.timegm((2026, 4, 24, 14, 22, 15, 0, 0, 0))
    (e,) = t.xid_events("2026-04-24T16:22:15.500000+02:00 robin-linux-x3d " + line)
    assert e["t"] == calendar.timegm((2026, 4, 24, 14, 22, 15, 0, 0, 0)) + 0.5


def test_the_real_h200_kernel_log_has_no_xid():
    text = read(DEV / "kernel-log-nvrm.txt")
    assert "NVRM: loading NVIDIA UNIX Open Kernel Module" in text
    assert t.xid_events(text, boot=0.0) == [] and t.xid_events("") == [] and t.xid_events(None) == []


def test_steady_window_leaves_out_the_samples_that_still_average_in_the_idle_time_before_the_level():
    assert t.steady_window(100.0, 110.0, 0.25) == (100.5, 110.0)  # two 250 ms intervals, at least 0.5 s
    assert t.steady_window(100.0, 110.0, 1.0) == (102.0, 110.0)
    assert t.steady_window(100.0, 101.5, 0.25) == (100.0, 101.5)  # too short to trim: kept whole
    assert t.steady_window(None, 110.0, 0.25) == (None, 110.0)
