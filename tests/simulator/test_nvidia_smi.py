"""The simulated nvidia-smi / nvcc / sim-init against real recorded output.

Runs the simulator as a subprocess (as the hosts do) and compares with the shared h200-x2 recording field by
field, and with the public RTX PRO 6000 outputs in tests/fixtures/nvidia-smi/rtx-pro-6000/. Static fields must be
equal; dynamic ones well-formed and in range. Imports nothing from plugins/ or src/.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.paths import REPO

SIM_BIN = REPO / "simulator" / "bin"
SMI = SIM_BIN / "nvidia-smi"
H200_FIX = REPO / "tests" / "fixtures" / "nvidia-smi" / "h200-x2"
RTX_FIX = REPO / "tests" / "fixtures" / "nvidia-smi" / "rtx-pro-6000"
UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")



@pytest.fixture
def env(tmp_path):
    def make(model="h200-x2", **extra):
        prof = {"simulated": True, "gpu_model": model, "host_index": 1}
        if model == "h200-x2":
            prof.update(gpu_count=2, driver_version="580.159.04")
        else:
            prof.update(gpu_count=8, driver_version="570.172.08")
        prof.update(extra)
        p = tmp_path / f"profile-{model}.json"
        p.write_text(json.dumps(prof))
        e = dict(os.environ)
        e.pop("MOESWEEP_SIM_NO_DRIVER", None)
        e["MOESWEEP_SIM_PROFILE"] = str(p)
        e["MOESWEEP_SIM_STATE"] = str(tmp_path / "gpu-state.json")
        return e

    return make


def smi(e, *args, rc=0):
    r = subprocess.run([sys.executable, str(SMI), *args], env=e, capture_output=True, text=True, timeout=30)
    assert r.returncode == rc, (r.returncode, r.stdout, r.stderr)
    return r.stdout


def rows(text):
    return list(csv.reader(io.StringIO(text), skipinitialspace=True))


def write_state(e, gpus, pid=None):
    state = {"pid": pid or os.getpid(), "process_name": "sglang::scheduler_TP0", "updated": time.time(),
             "gpus": gpus}
    Path(e["MOESWEEP_SIM_STATE"]).write_text(json.dumps(state))


def unit_value(cell, unit):
    assert cell.endswith(" " + unit), cell
    return float(cell[: -len(unit) - 1])


# ------------------------------------------------------------------ h200-x2 vs the recording
def test_query_gpu_matches_recording_field_by_field(env):
    real = (H200_FIX / "query-gpu.csv").read_text().splitlines()
    header = real[0]
    fields = [h.split(" [")[0] for h in header.split(", ")]
    fields = ["clocks.sm" if f == "clocks.current.sm" else f for f in fields]  # queried as clocks.sm
    out = smi(env(), f"--query-gpu={','.join(fields)}", "--format=csv")
    got, want = rows(out), rows("\n".join(real[:3]))
    assert got[0] == want[0]  # identical header, units included
    dynamic = {"uuid", "power.draw [W]", "utilization.gpu [%]", "memory.used [MiB]", "clocks.current.sm [MHz]"}
    for g_row, w_row in zip(got[1:], want[1:], strict=True):
        for h, g, w in zip(got[0], g_row, w_row, strict=True):
            if h == "uuid":
                assert UUID_RE.match(g)
            elif h in dynamic:
                assert g.split()[-1] == w.split()[-1]  # same unit
            else:
                assert g == w, h
        assert 0 < unit_value(g_row[got[0].index("power.draw [W]")], "W") <= 700


def test_noheader_nounits_and_empty_compute_apps(env):
    real = (H200_FIX / "query-gpu.csv").read_text().splitlines()
    assert smi(env(), "--query-gpu=index,name,compute_cap,memory.total", "--format=csv,noheader,nounits"
               ).splitlines() == real[3:5]
    assert smi(env(), "--query-compute-apps=pid,process_name,used_memory", "--format=csv"
               ).splitlines() == real[5:6]


def test_clocks_event_reasons_idle_equal(env):
    q = ("index,clocks_event_reasons.active,clocks_throttle_reasons.active,clocks_event_reasons.sw_power_cap,"
         "clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown")
    assert smi(env(), f"--query-gpu={q}", "--format=csv") == (H200_FIX / "clocks-event-reasons-idle.csv").read_text()


def test_topo_p2p_nvlink_byte_equal(env):
    e = env()
    assert smi(e, "topo", "-m") == (H200_FIX / "topo-m.txt").read_text()
    assert "\x1b[4mGPU0" in smi(e, "topo", "-m")
    assert smi(e, "topo", "-p2p", "r") == (H200_FIX / "topo-p2p-r.txt").read_text()
    nv = smi(e, "nvlink", "-s")
    for line in re.findall(r"UUID: (GPU-[^)]*)", nv):
        assert UUID_RE.match(line)
    assert re.sub(r"UUID: GPU-[^)]*", "UUID: GPU-REDACTED", nv) == (H200_FIX / "nvlink-s.txt").read_text()


def _table_gpu_cells(text):
    """[(row1 cells, row2 cells, row3 cells)] per GPU: the three '|'-separated columns of each line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|====")) + 1
    out = []
    i = start
    while lines[i].startswith("|"):
        out.append(tuple([c.strip() for c in lines[i + k].strip("|").split("|")] for k in range(3)))
        i += 4
    return out, lines


def test_table_columns_match_recording(env):
    got, glines = _table_gpu_cells(smi(env()))
    want, wlines = _table_gpu_cells((H200_FIX / "nvidia-smi.txt").read_text())
    assert glines[1:8] == wlines[1:8]  # banner, version line, column headers: identical
    assert glines[-7:] == wlines[-7:]  # processes box with no processes
    assert len(glines[0]) == len(wlines[0]) and glines[0].endswith("       ")
    assert len(got) == len(want) == 2
    for g, w in zip(got, want, strict=True):
        assert g[0] == w[0] and g[2] == w[2]  # name, persistence, bus id, disp, ECC, MIG
        gf, wf = g[1][0].split(), w[1][0].split()
        assert gf[0] == wf[0] and gf[2] == wf[2] and gf[-1] == wf[-1]  # fan, perf, cap
        assert 20 <= int(gf[1].rstrip("C")) <= 90 and 0 < int(gf[3].rstrip("W")) <= 700
        assert g[1][1].split("/")[1] == w[1][1].split("/")[1]
        assert g[1][2] == w[1][2]
    assert [len(x) for x in glines] == [len(x) for x in wlines]  # same widths, line by line


def test_xml_same_structure_and_static_values(env):
    got = ET.fromstring(smi(env(), "-q", "-x").split("\n", 2)[2])
    want = ET.parse(H200_FIX / "nvidia-smi-q-x.xml").getroot()

    def leaves(e, path=""):
        out = []
        for i, c in enumerate(e):
            p = f"{path}/{c.tag}[{i}]"
            out.append((p, (c.text or "").strip(), dict(c.attrib)))
            out += leaves(c, p)
        return out

    g, w = leaves(got), leaves(want)
    assert [x[0] for x in g] == [x[0] for x in w]  # identical element tree
    dynamic = ("timestamp", "serial", "uuid", "pdi", "tx_util", "rx_util", "gpu_temp", "memory_temp", "tlimit",
               "power_draw", "free")
    for (p, gv, ga), (_, wv, wa) in zip(g, w, strict=True):
        assert ga == wa, p
        if any(d in p.rsplit("/", 1)[-1] for d in dynamic):
            assert bool(gv) == bool(wv), p
            continue
        assert gv == wv, p
    assert UUID_RE.match(got.find("gpu/uuid").text)
    assert smi(env(), "-q", "-x").startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM')


def test_dmon_columns(env):
    out = smi(env(), "dmon", "-s", "pucm", "-c", "2").splitlines()
    real = (H200_FIX / "dmon-pucm-under-bf16-matmul-on-gpu0.txt").read_text().splitlines()
    assert out[:2] == real[:2]
    assert len(out) == 2 + 2 * 2
    for line in out[2:]:
        vals = [int(x) for x in line.split()]
        assert len(vals) == 15 and len(line) == len(real[2])
        assert vals[10] == 3201 and 345 <= vals[11] <= 1980


# ------------------------------------------------------------------ live state
def test_loaded_state_drives_every_view(env):
    e = env()
    write_state(e, [{"index": 0, "memory_used_mib": 81234, "utilization_gpu": 100, "power_draw_w": 690.5,
                     "sm_clock_mhz": 1485, "pids": [os.getpid()]}])
    r = rows(smi(e, "--query-gpu=index,memory.used,utilization.gpu,power.draw,clocks.sm,clocks_event_reasons.active,"
                    "clocks_event_reasons.sw_power_cap,pstate", "--format=csv,noheader"))
    assert r[0] == ["0", "81234 MiB", "100 %", "690.50 W", "1485 MHz", "0x0000000000000004", "Active", "P0"]
    assert r[1][1:3] == ["0 MiB", "0 %"] and r[1][5] == "0x0000000000000001"
    apps = rows(smi(e, "--query-compute-apps=pid,process_name,used_memory", "--format=csv"))
    assert apps == [["pid", "process_name", "used_gpu_memory [MiB]"],
                    [str(os.getpid()), "sglang::scheduler_TP0", "81234 MiB"]]
    table = smi(e)
    proc = [line for line in table.splitlines() if "sglang::scheduler_TP0" in line]
    assert len(proc) == 1 and len(proc[0]) == 91 and proc[0].endswith("81234MiB |")
    assert proc[0].split()[1:6] == ["0", "N/A", "N/A", str(os.getpid()), "C"]
    assert "81234MiB / 143771MiB" in table and "No running processes found" not in table
    x = ET.fromstring(smi(e, "-q", "-x").split("\n", 2)[2])
    g0 = x.findall("gpu")[0]
    assert g0.find("fb_memory_usage/used").text == "81234 MiB"
    assert g0.find("processes/process_info/pid").text == str(os.getpid())
    assert g0.find("clocks_event_reasons/clocks_event_reason_sw_power_cap").text == "Active"


def test_dead_writer_means_idle(env):
    e = env()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_state(e, [{"index": 0, "memory_used_mib": 5000, "utilization_gpu": 90, "power_draw_w": 500,
                     "sm_clock_mhz": 1900, "pids": [dead.pid]}], pid=dead.pid)
    r = rows(smi(e, "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"))
    assert r == [["0", "0"], ["0", "0"]]
    assert "No running processes found" in smi(e)


def test_lms_loop_stops_cleanly_on_sigterm(env):
    p = subprocess.Popen([sys.executable, str(SMI), "--query-gpu=timestamp,index,utilization.gpu",
                          "--format=csv", "-lms", "100"], env=env(), stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=10)
    assert p.returncode == 0
    lines = out.splitlines()
    assert lines[0] == "timestamp, index, utilization.gpu [%]" and lines.count(lines[0]) == 1
    assert len(lines) >= 5
    for row in rows("\n".join(lines[1:])):
        assert re.match(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}$", row[0])


# ------------------------------------------------------------------ errors
def test_unknown_field_real_error(env):
    assert smi(env(), "--query-gpu=index,bogus", "--format=csv", rc=2) == \
        'Field "bogus" is not a valid field to query.\n\n'


def test_no_driver_both_ways(env):
    msg = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
           "Make sure that the latest NVIDIA driver is installed and running.\n")
    e = env()
    e["MOESWEEP_SIM_NO_DRIVER"] = "1"
    assert smi(e, rc=9) == msg
    assert smi(env(driver_loaded=False), "--query-gpu=name", "--format=csv", rc=9) == msg


def test_ids_list_and_version(env):
    e = env()
    assert smi(e, "-i", "1", "--query-gpu=index,pci.bus_id", "--format=csv,noheader") == "1, 00000000:00:07.0\n"
    assert smi(e, "-i", "5", "-L", rc=6) == "No devices were found\n"
    lst = smi(e, "-L").splitlines()
    assert [re.sub(r"\(UUID: GPU-[^)]*\)", "(UUID: X)", x) for x in lst] == \
        ["GPU 0: NVIDIA H200 (UUID: X)", "GPU 1: NVIDIA H200 (UUID: X)"]
    assert "DRIVER version      : 580.159.04" in smi(e, "--version")


# ------------------------------------------------------------------ RTX PRO 6000 vs public output
def test_rtx_pro_6000_table_matches_public_570_output(env):
    got, glines = _table_gpu_cells(smi(env("rtx-pro-6000")))
    want, wlines = _table_gpu_cells((RTX_FIX / "nvidia-smi-570.172.08.txt").read_text())
    assert glines[1:8] == wlines[1:8]
    assert glines[-8:] == wlines[-8:]  # the 570 line of spaces, then the empty processes box
    assert len(got) == 8
    for g in got:
        w = want[0]
        assert g[0][0].split()[1:] == w[0][0].split()[1:]  # name truncated as real, persistence On
        assert g[0][2] == w[0][2] and g[2] == w[2]
        assert g[1][0].split() == w[1][0].split() or g[1][0].split()[0:3] == w[1][0].split()[0:3]
        assert g[1][1].split("/")[1] == w[1][1].split("/")[1] and g[1][2] == w[1][2]
    assert [len(x) for x in glines[:12]] == [len(x) for x in wlines[:12]]


def test_rtx_pro_6000_query_matches_public_csv(env):
    real = rows((RTX_FIX / "query-gpu-index-name-cc-mem-driver.csv").read_text())
    got = rows(smi(env("rtx-pro-6000", driver_version="580.65.06"),
                   "--query-gpu=index,name,compute_cap,memory.total,driver_version", "--format=csv"))
    assert got[0] == real[0] and got[1 : len(real)] == real[1:]
    assert len(got) == 9
    r = rows(smi(env("rtx-pro-6000"), "--query-gpu=power.limit,power.max_limit,enforced.power.limit,clocks.max.sm,"
                 "pcie.link.gen.max,pcie.link.width.max,pci.device_id", "--format=csv,noheader"))
    assert r[0] == ["600.00 W", "600.00 W", "600.00 W", "3090 MHz", "5", "16", "0x2BB510DE"]


def test_rtx_pro_6000_topology_phb_everywhere(env):
    out = smi(env("rtx-pro-6000", cpu_affinity="0-63"), "topo", "-m").splitlines()
    assert out[0] == "\t\x1b[4m" + "\t".join(f"GPU{i}" for i in range(8)) + \
        "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
    for i in range(8):
        cells = out[1 + i].split("\t")
        assert cells[0] == f"GPU{i}" and cells[1 + i] == " X "
        assert [c for j, c in enumerate(cells[1:9]) if j != i] == ["PHB"] * 7
        assert cells[9:] == ["0-63", "0", "", "N/A"]
    assert smi(env("rtx-pro-6000"), "nvlink", "-s").count("Link") == 0


# ------------------------------------------------------------------ nvcc
NVCC = {
    "12.8": ("Built on Fri_Feb_21_20:23:50_PST_2025", "V12.8.93", "cuda_12.8.r12.8/compiler.35583870_0"),
    "12.9": ("Built on Tue_May_27_02:21:03_PDT_2025", "V12.9.86", "cuda_12.9.r12.9/compiler.36037853_0"),
    "13.0": ("Built on Wed_Aug_20_01:58:59_PM_PDT_2025", "V13.0.88", "cuda_13.0.r13.0/compiler.36424714_0"),
    "13.1": ("Built on Tue_Dec_16_07:23:41_PM_PST_2025", "V13.1.115", "cuda_13.1.r13.1/compiler.37061995_0"),
}


@pytest.mark.parametrize("rel", sorted(NVCC))
def test_nvcc_version_banner_from_toolkit_dir(tmp_path, rel):
    nvcc = tmp_path / f"cuda-{rel}" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.symlink_to(SIM_BIN / "nvcc-sim")
    (tmp_path / "cuda").symlink_to(f"cuda-{rel}")
    built, ver, build = NVCC[rel]
    want = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            f"{built}\nCuda compilation tools, release {rel}, {ver}\nBuild {build}\n")
    for path in (nvcc, tmp_path / "cuda" / "bin" / "nvcc"):
        for flag in ("--version", "-V"):
            r = subprocess.run([str(path), flag], capture_output=True, text=True, timeout=30)
            assert (r.returncode, r.stdout) == (0, want)
    r = subprocess.run([str(nvcc), "-o", "x", "x.cu"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "compiling is not simulated" in r.stderr and r.stdout == ""


# ------------------------------------------------------------------ sim-init
def test_sim_init_idempotent(tmp_path):
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps({"gpu_model": "rtx-pro-6000", "gpu_count": 2, "cuda_toolkits": ["13.1", "12.8"]}))
    root = tmp_path / "root"
    e = dict(os.environ, MOESWEEP_SIM_ROOT=str(root), MOESWEEP_SIM_PROFILE=str(prof))
    first = subprocess.run([sys.executable, str(SIM_BIN / "sim-init")], env=e, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert os.readlink(root / "usr/local/bin/nvidia-smi") == "/opt/moesweep-sim/bin/nvidia-smi"
    for rel in ("12.8", "13.1"):
        assert os.readlink(root / f"usr/local/cuda-{rel}/bin/nvcc") == "/opt/moesweep-sim/bin/nvcc-sim"
        assert json.loads((root / f"usr/local/cuda-{rel}/version.json").read_text())["cuda"]["version"] \
            .startswith(rel + ".")
    assert os.readlink(root / "usr/local/cuda") == "cuda-13.1"
    assert (root / "run/moesweep-sim").is_dir()
    assert (root / "dev/nvidia1").exists() and (root / "dev/nvidiactl").exists()
    again = subprocess.run([sys.executable, str(SIM_BIN / "sim-init")], env=e, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == "sim-init: nothing to change"


# ------------------------------------------------------------------ telemetry the benchmark stage samples
TELEMETRY = REPO / "tests" / "fixtures" / "nvidia-smi" / "h200-x1-telemetry"
TELEMETRY_FIELDS = ("timestamp,index,utilization.gpu,power.draw,enforced.power.limit,clocks.sm,clocks.max.sm,"
                    "memory.used,memory.total,temperature.gpu,clocks_event_reasons.active,"
                    "clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,"
                    "clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.sw_thermal_slowdown,"
                    "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total")


def _shape(cell: str) -> str:
    """A recorded cell as a pattern: every digit run stands for any digits, 'Not Active'/'Active' for either."""
    if cell in ("Active", "Not Active"):
        return "(Not )?Active"
    if cell.startswith("0x"):
        return "0x[0-9A-F]{16}"
    return re.sub(r"\d+", r"\\d+", re.escape(cell))


def _assert_same_shapes(got_rows, recorded_rows):
    shapes = [_shape(c) for c in recorded_rows[0]]
    assert all([_shape(c) for c in r] == shapes for r in recorded_rows)  # the recording agrees with itself
    for r in got_rows:
        assert len(r) == len(shapes)
        for cell, pat in zip(r, shapes, strict=True):
            assert re.fullmatch(pat, cell), (cell, pat)


def _loaded_state(e, gpus=8, busy_for=5.0, model="rtx-pro-6000"):
    """What the simulated server writes while requests run (gpustate.StateWriter)."""
    from moesweep_sim import gpus as gpumod

    m = gpumod.MODELS[model]
    busy_since = time.time() - busy_for
    write_state(e, [{"index": i, "memory_used_mib": 85000, "utilization_gpu": 100,
                     "power_draw_w": m["load_power_w"], "sm_clock_mhz": m["load_sm_clocks_mhz"][0],
                     "busy_since": busy_since, "pids": [os.getpid()]} for i in range(gpus)])
    return busy_since


@pytest.mark.parametrize("fmt,recorded", [("csv", "matmul-lms250.csv"), ("csv,noheader,nounits",
                                                                         "matmul-lms250-nounits.csv")])
def test_telemetry_query_formats_match_recording(env, fmt, recorded):
    real = rows((TELEMETRY / recorded).read_text())
    e = env()
    _loaded_state(e, gpus=2, model="h200")
    got = rows(smi(e, f"--query-gpu={TELEMETRY_FIELDS}", f"--format={fmt}"))
    if fmt == "csv":
        assert got[0] == real[0]  # the header, units and clocks.sm -> clocks.current.sm naming included
        got, real = got[1:], real[1:]
    _assert_same_shapes(got, real)


def test_telemetry_idle_matches_recording(env):
    real = rows((TELEMETRY / "idle.csv").read_text())
    got = rows(smi(env(), f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv"))
    assert got[0] == real[0]
    _assert_same_shapes(got[1:], real[1:2])
    for g in got[1:]:
        assert g[2:3] == ["0 %"] and g[9:] == real[1][9:10] + real[1][10:] or g[10] == "0x0000000000000001"


def _plateau(path: Path):
    """The recorded samples at full load, after the power ramp."""
    out = [r for r in rows(path.read_text())[1:] if r[2].startswith(("99", "100")) and float(r[3].split()[0]) > 680]
    assert len(out) >= 10
    return out


def test_h200_under_load_is_power_bound_like_the_recording(env):
    """tests/fixtures/nvidia-smi/h200-x2/query-lms250-under-bf16-matmul-on-gpu0.csv and h200-x1-telemetry/:
    ~690 of 700 W, SW power cap active, SM clock ~1.5 of 1.98 GHz, util 100 %."""
    assert len(_plateau(TELEMETRY / "matmul-lms250.csv")) >= 10
    capped = [r for f in (TELEMETRY / "matmul-lms250.csv", H200_FIX / "query-lms250-under-bf16-matmul-on-gpu0.csv")
              for r in rows(f.read_text())[1:] if "0x0000000000000004" in r]
    real_clocks = {int(c.split()[0]) for r in capped for c in r if c.endswith(" MHz") and c != "1980 MHz"}
    e = env()
    _loaded_state(e, gpus=2, model="h200")
    samples = []
    for _ in range(8):
        samples += rows(smi(e, f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv,noheader,nounits"))
        time.sleep(0.26)
    powers = [float(r[3]) for r in samples]
    assert all(685.0 <= p < 700.0 for p in powers) and len(set(powers)) > 1  # real draw jitters sample to sample
    assert {r[2] for r in samples} == {"100"} and {r[4] for r in samples} == {"700.00"}
    assert {r[10] for r in samples} == {"0x0000000000000004"} and {r[11] for r in samples} == {"Active"}
    clocks = {int(r[5]) for r in samples}
    assert clocks <= real_clocks and max(clocks) < 1980 and {r[6] for r in samples} == {"1980"}
    assert all(50 <= int(r[9]) <= 62 for r in samples)
    assert {r[15] for r in samples} == {"0"}


def test_rtx_pro_6000_under_load_is_launch_bound(env):
    """~100 % util at ~55 % of the 600 W limit, SM clock at its maximum, no event reason active."""
    e = env("rtx-pro-6000")
    _loaded_state(e)
    got = rows(smi(e, f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv,noheader,nounits"))
    assert len(got) == 8
    for r in got:
        assert r[2] == "100" and 0.53 <= float(r[3]) / float(r[4]) <= 0.57 and r[4] == "600.00"
        assert r[5] == r[6] == "3090" and r[7] == "85000" and r[8] == "97887"
        assert r[10] == "0x0000000000000000" and r[11:15] == ["Not Active"] * 4 and r[15:] == ["0", "0"]


def test_power_ramps_up_when_load_starts(env):
    """The draw climbs from idle to the load draw over the recorded ramp (first busy samples 168 W, then 361, 488,
    653 W at 250 ms): the first query lies on the ramp between where it was when nvidia-smi started and where it was
    when it answered (a loaded machine may start the process late), well below the load draw."""
    from moesweep_sim import gpus as gpumod

    m = gpumod.MODELS["h200"]
    idle, load = m["idle_power_w"][0], m["load_power_w"]  # GPU 0's idle draw (the first row)
    slack = m["load_power_jitter_w"] + 0.01  # the jitter once the ramp is done, and the 2-decimal rounding

    def on_ramp(t):
        return idle + (load - idle) * min(1.0, max(0.0, (t - busy_since) / m["load_ramp_s"]))

    e = env()
    busy_since = _loaded_state(e, gpus=2, busy_for=0.1, model="h200")
    before = time.time()
    first = float(rows(smi(e, "--query-gpu=power.draw", "--format=csv,noheader,nounits"))[0][0])
    after = time.time()
    assert on_ramp(before) - slack <= first <= on_ramp(after) + slack, (first, on_ramp(before), on_ramp(after))
    if after - busy_since < 0.5:
        assert first < 400, first  # early on the ramp, far from the 691 W load draw
    time.sleep(1.3)
    assert float(rows(smi(e, "--query-gpu=power.draw", "--format=csv,noheader,nounits"))[0][0]) > 680


def test_lms_interval_is_nvidia_smis(env):
    """-lms 250 sleeps 250 ms after each query: recorded intervals 251-262 ms (h200-x1-telemetry)."""
    e = env()
    _loaded_state(e, gpus=2, model="h200")
    p = subprocess.Popen([sys.executable, str(SMI), f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv,noheader",
                          "-lms", "250"], env=e, stdout=subprocess.PIPE, text=True)
    time.sleep(2.2)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=10)
    stamps = sorted({r[0] for r in rows(out)})
    ts = [time.mktime(time.strptime(t[:19], "%Y/%m/%d %H:%M:%S")) + int(t[20:]) / 1000 for t in stamps]
    # one query's rows (one per GPU) are stamped one by one: rows of the same query may straddle a millisecond
    queries = [t for i, t in enumerate(ts) if i == 0 or t - ts[i - 1] > 0.005]
    gaps = [(b - a) * 1000 for a, b in zip(queries, queries[1:], strict=False)]
    # never faster than the 250 ms sleep (timestamps are truncated to ms); close to it on average (a loaded
    # 2-core test machine can stall one sample)
    assert len(gaps) >= 6 and min(gaps) >= 248, gaps
    assert sorted(gaps)[len(gaps) // 2] < 265, gaps


def test_fault_hw_slowdown(env, tmp_path):
    e = env("rtx-pro-6000")
    _loaded_state(e)
    e["MOESWEEP_SIM_FAULT"] = "hw_slowdown:3"
    got = rows(smi(e, f"--query-gpu={TELEMETRY_FIELDS}", "--format=csv,noheader"))
    for i, r in enumerate(got):
        if i == 3:
            assert r[10] == "0x0000000000000068" and r[12:15] == ["Active", "Active", "Active"]
            assert int(r[5].split()[0]) <= 3090 // 2 and int(r[9]) >= 90
        else:
            assert r[10] == "0x0000000000000000" and r[12:15] == ["Not Active"] * 3
    x = ET.fromstring(smi(e, "-q", "-x").split("\n", 2)[2]).findall("gpu")[3]
    assert x.find("clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown").text == "Active"
    e["MOESWEEP_SIM_FAULT"] = "hw_slowdown:all"
    assert {r[0] for r in rows(smi(e, "--query-gpu=clocks_event_reasons.hw_slowdown", "--format=csv,noheader"))} \
        == {"Active"}


def test_fault_ecc_error_counts_up_and_stays(env, tmp_path):
    e = env()
    e["MOESWEEP_SIM_FAULT_FILE"] = str(tmp_path / "fault")
    e["MOESWEEP_SIM_ECC_ERROR_PERIOD_S"] = "0.5"
    q = ["--query-gpu=ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total", "--format=csv"]
    assert rows(smi(e, *q))[1:] == [["0", "0"], ["0", "0"]]
    (tmp_path / "fault").write_text("ecc_error:1\n")
    assert rows(smi(e, *q))[1:] == [["0", "0"], ["1", "0"]]
    time.sleep(1.1)
    n = int(rows(smi(e, *q))[2][0])
    assert n >= 3
    (tmp_path / "fault").write_text("")
    time.sleep(0.6)
    frozen = int(rows(smi(e, *q))[2][0])
    assert frozen in (n, n + 1)  # frozen when the fault was cleared, like a volatile counter
    time.sleep(0.6)
    assert int(rows(smi(e, *q))[2][0]) == frozen
    table = smi(e)
    ecc_col = [line.split("|")[3].strip() for line in table.splitlines() if "NVIDIA H200" in line]
    assert ecc_col[0] == "0" and int(ecc_col[1]) >= n
    x = ET.fromstring(smi(e, "-q", "-x").split("\n", 2)[2]).findall("gpu")[1]
    assert int(x.find("ecc_errors/volatile/dram_uncorrectable").text) >= n
