"""Simulated `nvidia-smi` for moesweep's simulated GPU hosts (stdlib only, Python 3.11).

Formats are reproduced from real output only: the recordings tests/fixtures/nvidia-smi/h200-x2 and
tests/fixtures/nvidia-smi/h200-x1-telemetry (driver 580) and the public RTX PRO 6000 outputs cited in
tests/fixtures/nvidia-smi/rtx-pro-6000/SOURCES.md (driver 570).
Written independently of the project's nvidia-smi parser (plugins/module_utils); it shares no code with it.

Dynamic values come from /run/moesweep-sim/gpu-state.json (env MOESWEEP_SIM_STATE overrides the path) when
its writer pid is alive; otherwise every GPU is idle.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time

from . import faults
from . import gpus as gpumod
from ._xml_template import XML_BASE, XML_GPU_TEMPLATE

STATE_PATH = "/run/moesweep-sim/gpu-state.json"

# Real messages and exit codes.
NO_DRIVER_MSG = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
NO_DRIVER_RC = 9
BAD_ARGS_MSG = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
BAD_ARGS_RC = 2
NO_DEVICES_MSG = "No devices were found\n"
NO_DEVICES_RC = 6
BAD_FIELD_RC = 2  # 'Field "x" is not a valid field to query.' + blank line, on stdout


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def read_state() -> dict:
    """{gpu index: live entry} from gpu-state.json, or {} when absent, unreadable or its writer is gone."""
    path = os.environ.get("MOESWEEP_SIM_STATE") or STATE_PATH
    try:
        with open(path, encoding="utf-8") as f:
            st = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(st, dict) or not _pid_alive(st.get("pid")):
        return {}
    name = str(st.get("process_name") or "python3")
    out = {}
    for g in st.get("gpus") or []:
        if not isinstance(g, dict) or "index" not in g:
            continue
        g = dict(g)
        g["pids"] = [p for p in g.get("pids") or [] if _pid_alive(p)]
        g["process_name"] = name
        out[int(g["index"])] = g
    return out


class View:
    """The values nvidia-smi shows for one GPU at one instant (live or idle)."""

    def __init__(self, gpu: gpumod.Gpu, live: dict | None, now: float | None = None, ecc: tuple = (0, 0)):
        m = gpu.m
        self.gpu = gpu
        self.live = live
        now = time.time() if now is None else now
        lim = power_limit(gpu, gpu.profile)
        idle_p = gpu.idle("idle_power_w")
        if live:
            self.mem_used = max(0, min(int(live.get("memory_used_mib", 0)), m["memory_total_mib"]))
            self.util = max(0, min(int(live.get("utilization_gpu", 0)), 100))
            self.power = float(live.get("power_draw_w", idle_p))
            self.sm_clock = int(live.get("sm_clock_mhz", m["max_sm_clock_mhz"]))
            self.pids = list(live.get("pids") or [])
            self.process_name = live.get("process_name", "python3")
            busy_since = live.get("busy_since")
            if busy_since and self.util:
                self._under_load(float(busy_since), now, idle_p)
        else:
            self.mem_used, self.util, self.power = 0, 0, idle_p
            self.sm_clock = m["idle_sm_clock_mhz"]
            self.pids, self.process_name = [], ""
        # a capped board draws at most its cap (and then shows the SW power cap, below)
        self.power = min(self.power, lim)
        # A GPU holding a context runs at P0; an idle board falls back to its idle state.
        self.pstate = "P0" if (live and (self.pids or self.mem_used)) else m["idle_pstate"]
        if live and self.pstate == "P0" and self.sm_clock < m["idle_sm_clock_mhz"]:
            self.sm_clock = m["idle_sm_clock_mhz"]
        # under the bf16 matmul of the fixture memory util sits near a quarter of SM util
        self.mem_util = self.util // 4
        heat = max(0.0, (self.power - idle_p) / max(1.0, lim - idle_p))
        self.temp = gpu.idle("idle_temp_c") + round(20 * heat)
        self.mem_temp = gpu.idle("idle_mem_temp_c") + round(10 * heat)
        self.idle = not live or (self.util == 0 and not self.pids)
        # power-bound boards (H200) show the SW power cap from their first busy sample (fixture)
        self.sw_power_cap = bool(live) and (self.power >= 0.95 * lim or (
            bool(self.util) and bool(live.get("busy_since")) and m.get("load_power_bound", False)))
        self.hw_slowdown = self.hw_thermal = self.sw_thermal = False
        if gpu.index in faults.gpus_affected("hw_slowdown", int(gpu.profile.get("gpu_count", 1))):
            self._slowdown()
        self.ecc_uncorrected, self.ecc_corrected = ecc
        # clocks_event_reasons.active bitmask (nvml.h nvmlClocksEventReason*): 0x1 GPU idle, 0x4 SW power cap,
        # 0x8 HW slowdown, 0x20 SW thermal slowdown, 0x40 HW thermal slowdown
        mask = 0
        for bit, on in ((0x1, self.idle), (0x4, self.sw_power_cap), (0x8, self.hw_slowdown),
                        (0x20, self.sw_thermal), (0x40, self.hw_thermal)):
            if on:
                mask |= bit
        self.reasons = mask
        self.bar1_used = self.mem_used + 1 if self.mem_used else 1

    def _under_load(self, busy_since: float, now: float, idle_p: float):
        """Ramp from idle to the load draw over ``load_ramp_s``, then jitter around it; a power-bound board
        moves its SM clock among the recorded capped values (gpus.py load profiles)."""
        m = self.gpu.m
        ramp = float(m.get("load_ramp_s", 0.0) or 0.0)
        frac = 1.0 if ramp <= 0 else max(0.0, min(1.0, (now - busy_since) / ramp))
        slot = int(now * 4)  # one draw per 250 ms sample
        h = int(hashlib.sha256(f"{self.gpu.index}/{slot}".encode()).hexdigest()[:8], 16)
        jitter = float(m.get("load_power_jitter_w", 0.0)) * ((h % 2001) / 1000.0 - 1.0)
        self.power = max(idle_p, idle_p + (self.power - idle_p) * frac + (jitter if frac >= 1.0 else 0.0))
        clocks = m.get("load_sm_clocks_mhz")
        if clocks:
            self.sm_clock = int(clocks[h % len(clocks)])

    def _slowdown(self):
        """Fault ``hw_slowdown``: HW thermal slowdown engaged ("reducing the core clocks by a factor of 2 or
        more", nvidia-smi --help-query-gpu), the board above its slowdown temperature, so above its max
        operating temperature too (SW thermal slowdown); the power cap no longer limits."""
        m = self.gpu.m
        self.hw_slowdown = self.hw_thermal = self.sw_thermal = True
        self.sw_power_cap = False
        half = m["max_sm_clock_mhz"] // 2
        self.sm_clock = min(self.sm_clock, half - half % 15)
        self.power = min(self.power, self.gpu.idle("idle_power_w") + 0.5 * (self.power - self.gpu.idle("idle_power_w")))
        self.temp = max(self.temp, int(m.get("slowdown_temp_c", 89)) + 1)

    @property
    def mem_free(self) -> int:
        m = self.gpu.m
        # the driver rounds each figure from bytes: free can exceed total - reserved - used by 1 MiB
        return max(0, m["memory_total_mib"] - m["memory_reserved_mib"] - self.mem_used + m.get("free_round_mib", 0))

    def procs(self):
        """[(pid, name, used MiB)] for this GPU."""
        if not self.pids:
            return []
        each = self.mem_used // len(self.pids)
        return [(p, self.process_name, each) for p in self.pids]


# Host-check knobs of the profile (profile.json), each putting one check in its failing state the way a real
# host shows it: `p2p_read` (the code `topo -p2p r` prints between every pair, e.g. "NS" as in many VMs),
# `pcie_width_current` / `pcie_gen_current` (a downtrained link: nvidia-smi keeps printing the maximum beside
# it), `power_limit_w` (a user cap set with `nvidia-smi -pl`: current / requested limit below the card's default
# and maximum, as tests/fixtures/host_checks/q-power-capped-500-of-700-stackhpc-975.txt shows),
# `persistence_mode` ("Disabled").
def link_state(gpu, profile: dict) -> tuple[int, int, int, int]:
    """(gen current, gen max, width current, width max) of a GPU's PCIe link."""
    m = gpu.m
    return (int(profile.get("pcie_gen_current", m["pcie_gen"])), m["pcie_gen"],
            int(profile.get("pcie_width_current", m["pcie_width"])), m["pcie_width"])


def power_limit(gpu, profile: dict) -> float:
    """The enforced power limit: the profile's user cap, else the card's default."""
    return float(profile.get("power_limit_w", gpu.m["power_limit_w"]))


def _active(flag: bool) -> str:
    return "Active" if flag else "Not Active"


# --query-gpu fields: name -> (header, unit or None, getter(view, profile) -> str)
def _w(x):
    return f"{x:.2f}"


def _fields():
    F = {}

    def add(names, header, unit, fn):
        for n in names:
            F[n] = (header, unit, fn)

    add(["timestamp"], "timestamp", None, lambda v, p: _ts())
    add(["driver_version"], "driver_version", None, lambda v, p: p["driver_version"])
    add(["count"], "count", None, lambda v, p: str(int(p.get("gpu_count", 1))))
    add(["name", "gpu_name"], "name", None, lambda v, p: v.gpu.m["name"])
    add(["serial", "gpu_serial"], "serial", None, lambda v, p: v.gpu.serial)
    add(["uuid", "gpu_uuid"], "uuid", None, lambda v, p: v.gpu.uuid)
    add(["pci.bus_id", "gpu_bus_id"], "pci.bus_id", None, lambda v, p: v.gpu.bus_id)
    add(["pci.domain"], "pci.domain", None, lambda v, p: "0x" + v.gpu.bus_id[:8][-4:])
    add(["pci.bus"], "pci.bus", None, lambda v, p: "0x" + v.gpu.bus_id.split(":")[1])
    add(["pci.device"], "pci.device", None, lambda v, p: "0x" + v.gpu.bus_id.split(":")[2][:2])
    add(["pci.device_id"], "pci.device_id", None, lambda v, p: "0x" + v.gpu.m["pci_device_id"])
    add(["pci.sub_device_id"], "pci.sub_device_id", None, lambda v, p: "0x" + v.gpu.m["pci_sub_system_id"])
    add(["pcie.link.gen.current"], "pcie.link.gen.current", None, lambda v, p: str(link_state(v.gpu, p)[0]))
    add(["pcie.link.gen.max"], "pcie.link.gen.max", None, lambda v, p: str(v.gpu.m["pcie_gen"]))
    # the GPU's own link generation beside the link's; the host's maximum is "N/A" in a VM (H200 recording's -q:
    # "Device Current : 5", "Device Max : 5", "Host Max : N/A")
    add(["pcie.link.gen.gpucurrent"], "pcie.link.gen.gpucurrent", None, lambda v, p: str(link_state(v.gpu, p)[0]))
    add(["pcie.link.gen.gpumax"], "pcie.link.gen.gpumax", None, lambda v, p: str(v.gpu.m["pcie_gen"]))
    add(["pcie.link.gen.hostmax"], "pcie.link.gen.hostmax", None, lambda v, p: "[N/A]")
    add(["pcie.link.width.current"], "pcie.link.width.current", None, lambda v, p: str(link_state(v.gpu, p)[2]))
    add(["pcie.link.width.max"], "pcie.link.width.max", None, lambda v, p: str(v.gpu.m["pcie_width"]))
    add(["index"], "index", None, lambda v, p: str(v.gpu.index))
    add(["display_mode"], "display_mode", None, lambda v, p: "Enabled")
    add(["display_active"], "display_active", None, lambda v, p: "Disabled")
    add(["persistence_mode"], "persistence_mode", None, lambda v, p: p.get("persistence_mode", "Enabled"))
    add(["compute_cap"], "compute_cap", None, lambda v, p: v.gpu.m["compute_cap"])
    add(["compute_mode"], "compute_mode", None, lambda v, p: "Default")
    add(["pstate"], "pstate", None, lambda v, p: v.pstate)
    add(["vbios_version"], "vbios_version", None, lambda v, p: v.gpu.m["vbios_version"])
    add(["fan.speed"], "fan.speed", "%", lambda v, p: None if v.gpu.m["fan"] == "N/A" else v.gpu.m["fan"])
    add(["memory.total"], "memory.total", "MiB", lambda v, p: str(v.gpu.m["memory_total_mib"]))
    add(["memory.reserved"], "memory.reserved", "MiB", lambda v, p: str(v.gpu.m["memory_reserved_mib"]))
    add(["memory.used"], "memory.used", "MiB", lambda v, p: str(v.mem_used))
    add(["memory.free"], "memory.free", "MiB", lambda v, p: str(v.mem_free))
    add(["utilization.gpu"], "utilization.gpu", "%", lambda v, p: str(v.util))
    add(["utilization.memory"], "utilization.memory", "%", lambda v, p: str(v.mem_util))
    add(["temperature.gpu"], "temperature.gpu", None, lambda v, p: str(v.temp))
    add(["temperature.memory"], "temperature.memory", None, lambda v, p: str(v.mem_temp))
    add(["power.draw"], "power.draw", "W", lambda v, p: _w(v.power))
    add(["power.draw.instant"], "power.draw.instant", "W", lambda v, p: _w(v.power))
    add(["power.draw.average"], "power.draw.average", "W", lambda v, p: _w(v.power))
    add(["power.limit"], "power.limit", "W", lambda v, p: _w(power_limit(v.gpu, p)))
    add(["enforced.power.limit"], "enforced.power.limit", "W", lambda v, p: _w(power_limit(v.gpu, p)))
    add(["power.default_limit"], "power.default_limit", "W", lambda v, p: _w(v.gpu.m["power_limit_w"]))
    add(["power.min_limit"], "power.min_limit", "W", lambda v, p: _w(v.gpu.m["power_min_limit_w"]))
    add(["power.max_limit"], "power.max_limit", "W", lambda v, p: _w(v.gpu.m["power_max_limit_w"]))
    sm = lambda v, p: str(v.sm_clock)  # noqa: E731
    add(["clocks.current.sm", "clocks.sm"], "clocks.current.sm", "MHz", sm)
    add(["clocks.current.graphics", "clocks.gr"], "clocks.current.graphics", "MHz", sm)
    add(["clocks.current.memory", "clocks.mem"], "clocks.current.memory", "MHz",
        lambda v, p: str(v.gpu.m["mem_clock_mhz"]))
    add(["clocks.max.sm"], "clocks.max.sm", "MHz", lambda v, p: str(v.gpu.m["max_sm_clock_mhz"]))
    add(["clocks.max.graphics", "clocks.max.gr"], "clocks.max.graphics", "MHz",
        lambda v, p: str(v.gpu.m["max_sm_clock_mhz"]))
    add(["clocks.max.memory", "clocks.max.mem"], "clocks.max.memory", "MHz",
        lambda v, p: str(v.gpu.m["mem_clock_mhz"]))
    add(["mig.mode.current"], "mig.mode.current", None, lambda v, p: "Disabled")
    add(["mig.mode.pending"], "mig.mode.pending", None, lambda v, p: "Disabled")
    for kind, attr in (("uncorrected", "ecc_uncorrected"), ("corrected", "ecc_corrected")):
        for scope in ("volatile", "aggregate"):
            for part in ("total", "dram"):
                add([f"ecc.errors.{kind}.{scope}.{part}"], f"ecc.errors.{kind}.{scope}.{part}", None,
                    lambda v, p, a=attr: str(getattr(v, a)))
            for part in ("sram",):
                add([f"ecc.errors.{kind}.{scope}.{part}"], f"ecc.errors.{kind}.{scope}.{part}", None,
                    lambda v, p: "0")
    add(["ecc.mode.current"], "ecc.mode.current", None, lambda v, p: "Enabled")
    add(["ecc.mode.pending"], "ecc.mode.pending", None, lambda v, p: "Enabled")
    # clocks_event_reasons.* and the older clocks_throttle_reasons.* names print the new header (fixture)
    reasons = {
        "active": lambda v, p: f"0x{v.reasons:016X}",
        "supported": lambda v, p: "0x00000000000001FF",
        "gpu_idle": lambda v, p: _active(v.idle),
        "applications_clocks_setting": lambda v, p: _active(False),
        "sw_power_cap": lambda v, p: _active(v.sw_power_cap),
        "hw_slowdown": lambda v, p: _active(v.hw_slowdown),
        "hw_thermal_slowdown": lambda v, p: _active(v.hw_thermal),
        "hw_power_brake_slowdown": lambda v, p: _active(False),
        "sw_thermal_slowdown": lambda v, p: _active(v.sw_thermal),
        "sync_boost": lambda v, p: _active(False),
    }
    for k, fn in reasons.items():
        add([f"clocks_event_reasons.{k}", f"clocks_throttle_reasons.{k}"], f"clocks_event_reasons.{k}", None, fn)
    return F


FIELDS = _fields()

APP_FIELDS = {
    "pid": ("pid", None),
    "process_name": ("process_name", None),
    "name": ("process_name", None),
    "used_memory": ("used_gpu_memory", "MiB"),
    "used_gpu_memory": ("used_gpu_memory", "MiB"),
    "gpu_uuid": ("gpu_uuid", None),
    "gpu_bus_id": ("gpu_bus_id", None),
    "gpu_serial": ("gpu_serial", None),
    "gpu_name": ("gpu_name", None),
}


def _ts() -> str:
    t = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


class Ctx:
    def __init__(self, profile, gpus, ids):
        self.profile = profile
        self.all = gpus
        self.gpus = gpus if ids is None else ids

    def views(self):
        state = read_state()
        now = time.time()
        ecc = ecc_counts(len(self.all), now)
        return [View(g, state.get(g.index), now, (ecc.get(g.index, 0), 0)) for g in self.gpus]


# Fault ``ecc_error[:GPU]``: the volatile uncorrected ECC counter of that GPU counts one error when the fault
# is set and one more every ECC_ERROR_PERIOD_S while it stays set; clearing the fault freezes the count, which
# (like the real volatile counter) lasts until the "driver reload" -- a reboot of the simulated host, since
# the record lives in /run.  The kernel's Xid line (NVRM: Xid 48/94/95 ...) is not simulated: a container
# has no kernel log of its own.
ECC_ERROR_PERIOD_S = 10.0  # MOESWEEP_SIM_ECC_ERROR_PERIOD_S overrides it (tests)


def ecc_counts(gpu_count: int, now: float) -> dict:
    path = os.environ.get("MOESWEEP_SIM_ECC_STATE") or os.path.join(
        os.path.dirname(os.environ.get("MOESWEEP_SIM_STATE") or STATE_PATH), "ecc-errors.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    affected = faults.gpus_affected("ecc_error", gpu_count)
    changed = False
    out = {}
    for i in range(gpu_count):
        rec = doc.get(str(i)) or {"base": 0, "since": None}
        if i in affected and rec["since"] is None:
            rec["since"], changed = now, True
        period = float(os.environ.get("MOESWEEP_SIM_ECC_ERROR_PERIOD_S") or ECC_ERROR_PERIOD_S)
        running = 1 + int((now - rec["since"]) / period) if rec["since"] is not None else 0
        if i not in affected and rec["since"] is not None:
            # frozen at the moment the fault file changed (when that is known), else now
            period = float(os.environ.get("MOESWEEP_SIM_ECC_ERROR_PERIOD_S") or ECC_ERROR_PERIOD_S)
            cleared = min(now, max(rec["since"], faults.switch_mtime() or now))
            rec, changed = {"base": rec["base"] + 1 + int((cleared - rec["since"]) / period), "since": None}, True
            running = 0
        out[i] = rec["base"] + running
        doc[str(i)] = rec
    if changed:
        try:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, path)
        except OSError:
            pass
    return out


def _select(gpus, spec: str):
    out = []
    for tok in spec.split(","):
        tok = tok.strip()
        hit = None
        for g in gpus:
            if tok == str(g.index) or tok.upper() == g.uuid.upper() or tok.upper() in (
                g.bus_id.upper(), g.bus_id[4:].upper()
            ):
                hit = g
        if hit is None:
            return None
        out.append(hit)
    return out


# ---------------------------------------------------------------- CSV queries
def _csv_opts(fmt: str | None):
    if fmt is None:
        return None
    parts = [p.strip() for p in fmt.split(",")]
    if parts[0] != "csv" or any(p not in ("csv", "noheader", "nounits") for p in parts):
        return None
    return "noheader" not in parts, "nounits" not in parts


def query_gpu(ctx: Ctx, fields: list[str], header: bool, units: bool, first: bool = True) -> tuple[str, int]:
    for f in fields:
        if f not in FIELDS:
            return f'Field "{f}" is not a valid field to query.\n\n', BAD_FIELD_RC
    lines = []
    if header and first:
        lines.append(", ".join(FIELDS[f][0] + (f" [{FIELDS[f][1]}]" if FIELDS[f][1] else "") for f in fields))
    for v in ctx.views():
        row = []
        for f in fields:
            _h, unit, fn = FIELDS[f]
            val = fn(v, ctx.profile)
            if val is None:
                row.append("[N/A]")
            elif unit and units:
                row.append(f"{val} {unit}")
            else:
                row.append(val)
        lines.append(", ".join(row))
    return "".join(line + "\n" for line in lines), 0


def query_apps(ctx: Ctx, fields: list[str], header: bool, units: bool, first: bool = True) -> tuple[str, int]:
    for f in fields:
        if f not in APP_FIELDS:
            return f'Field "{f}" is not a valid field to query.\n\n', BAD_FIELD_RC
    lines = []
    if header and first:
        lines.append(", ".join(APP_FIELDS[f][0] + (f" [{APP_FIELDS[f][1]}]" if APP_FIELDS[f][1] else "")
                               for f in fields))
    for v in ctx.views():
        for pid, pname, mem in v.procs():
            vals = {"pid": str(pid), "process_name": pname, "name": pname,
                    "used_memory": f"{mem} MiB" if units else str(mem),
                    "used_gpu_memory": f"{mem} MiB" if units else str(mem),
                    "gpu_uuid": v.gpu.uuid, "gpu_bus_id": v.gpu.bus_id, "gpu_serial": v.gpu.serial,
                    "gpu_name": v.gpu.m["name"]}
            lines.append(", ".join(vals[f] for f in fields))
    return "".join(line + "\n" for line in lines), 0


# ---------------------------------------------------------------- the default table
def table(ctx: Ctx) -> str:
    p = ctx.profile
    drv, cuda = p["driver_version"], p["cuda_version"]
    new = int(drv.split(".")[0]) >= 580
    full = "+" + "-" * 89 + "+"
    cols = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    out = [time.asctime() + "       ", full,
           f"| NVIDIA-SMI {drv:<23}Driver Version: {drv:<15}CUDA Version: {cuda:<9}|",
           cols if new else "|" + cols[1:],
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    views = ctx.views()
    for v in views:
        m = v.gpu.m
        name = m["name"] if len(m["name"]) <= 27 else m["name"][:24] + "..."
        pm = "On" if p.get("persistence_mode", "Enabled") == "Enabled" else "Off"
        ecc = m["ecc_table"] if m["ecc_table"] == "N/A" else str(v.ecc_uncorrected)
        out.append(f"|{v.gpu.index:>4}  {name:<27}    {pm:<4}|   {v.gpu.bus_id:<16} Off |{ecc:>21} |")
        pw = f"{round(v.power)}W"
        cap = f"{round(power_limit(v.gpu, p))}W"
        out.append(f"|{m['fan']:>4}{str(v.temp) + 'C':>6}{v.pstate:>6}{pw:>16} / {cap:>5} |"
                   f"{str(v.mem_used) + 'MiB':>11} / {str(m['memory_total_mib']) + 'MiB':>9} |"
                   f"{str(v.util) + '%':>8}{'Default':>13} |")
        out.append("|" + " " * 41 + "|" + " " * 24 + "|" + f"{'Disabled':>21} |")
        out.append(cols)
    out.append("" if new else " " * 89)
    out += [full,
            "| Processes:" + " " * 78 + "|",
            "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|" + "=" * 89 + "|"]
    procs = [(v.gpu.index, pr) for v in views for pr in v.procs()]
    if not procs:
        out.append("|  No running processes found" + " " * 61 + "|")
    for idx, (pid, pname, mem) in procs:
        nm = pname if len(pname) <= 37 else "..." + pname[-34:]
        out.append(f"|{idx:>5}   N/A  N/A{pid:>16}{'C':>7}   {nm:<37}{str(mem) + 'MiB':>9} |")
    out.append(full)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- -L, --version
def list_gpus(ctx: Ctx) -> str:
    return "".join(f"GPU {g.index}: {g.m['name']} (UUID: {g.uuid})\n" for g in ctx.gpus)


def version(ctx: Ctx) -> str:
    drv = ctx.profile["driver_version"]
    nvml = ".".join(drv.split(".")[:2])
    return (f"NVIDIA-SMI version  : {drv}\nNVML version        : {nvml}\n"
            f"DRIVER version      : {drv}\nCUDA Version        : {ctx.profile['cuda_version']}\n")


# ---------------------------------------------------------------- topo
_TOPO_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

_P2P_LEGEND = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  U    = Unknown
"""


def topo_m(ctx: Ctx) -> str:
    gs = ctx.all
    p = ctx.profile
    head = "\t\x1b[4m" + "\t".join(f"GPU{g.index}" for g in gs) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"
    rows = [head]
    for a in gs:
        cells = [" X " if a is b else a.m["link"] for b in gs]
        rows.append(f"GPU{a.index}\t" + "\t".join(cells) + f"\t{p['cpu_affinity']}\t{p['numa_affinity']}\t\tN/A")
    return "\n".join(rows) + "\n" + _TOPO_LEGEND


def topo_p2p(ctx: Ctx) -> str:
    gs = ctx.all
    rows = [" \t\x1b[4m" + "".join(f"GPU{g.index}\t" for g in gs) + "\x1b[0m"]
    for a in gs:
        code = ctx.profile.get("p2p_read", a.m["p2p_read"])
        rows.append(f" GPU{a.index}\t" + "".join(("X" if a is b else code) + "\t" for b in gs))
    return "\n".join(rows) + "\n" + _P2P_LEGEND


def nvlink_s(ctx: Ctx) -> str:
    out = []
    for g in ctx.gpus:
        out.append(f"GPU {g.index}: {g.m['name']} (UUID: {g.uuid})")
        for i in range(g.m["nvlinks"]):
            out.append(f"\t Link {i}: {g.m['nvlink_gbps']} GB/s")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- dmon
_DMON_COLS = ["pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk", "fb", "bar1", "ccpm"]
_DMON_UNITS = ["W", "C", "C", "%", "%", "%", "%", "%", "%", "MHz", "MHz", "MB", "MB", "MB"]


def dmon_header() -> str:
    return ("# gpu" + "".join(f"{c:>7}" for c in _DMON_COLS) + " \n"
            + "# Idx" + "".join(f"{u:>7}" for u in _DMON_UNITS) + " \n")


def dmon_rows(ctx: Ctx) -> str:
    out = []
    for v in ctx.views():
        vals = [round(v.power), v.temp, v.mem_temp, v.util, v.mem_util, 0, 0, 0, 0,
                v.gpu.m["mem_clock_mhz"], v.sm_clock, v.mem_used, v.bar1_used, 0]
        out.append(f"{v.gpu.index:>5}" + "".join(f"{x:>7}" for x in vals) + " \n")
    return "".join(out)


# ---------------------------------------------------------------- -q -x and -q
def _xml_values(v: View, profile: dict) -> dict:
    g, m = v.gpu, v.gpu.m
    d = dict(XML_BASE)
    bus = g.bus_id
    d.update({
        "product_name": m["name"], "product_brand": m["brand"], "product_architecture": m["architecture"],
        "persistence_mode": profile.get("persistence_mode", "Enabled"),
        "serial": g.serial, "uuid": g.uuid, "pdi": "0x" + g.uuid[4:12] + g.uuid[-8:],
        "minor_number": str(g.index), "vbios_version": m["vbios_version"], "board_id": g.board_id,
        "board_part_number": m["board_part_number"], "gpu_part_number": m["gpu_part_number"],
        "platformInfo__module_id": str(g.module_id),
        "inforom_version__img_version": m["inforom_img_version"],
        "gsp_firmware_version": profile["driver_version"],
        "gpu_virtualization_mode__virtualization_mode": m["virtualization_mode"],
        "pci__pci_bus": bus.split(":")[1], "pci__pci_device": bus.split(":")[2][:2],
        "pci__pci_domain": bus[4:8], "pci__pci_device_id": m["pci_device_id"], "pci__pci_bus_id": bus,
        "pci__pci_sub_system_id": m["pci_sub_system_id"],
        "pci__pci_gpu_link_info__pcie_gen__max_link_gen": str(m["pcie_gen"]),
        "pci__pci_gpu_link_info__pcie_gen__current_link_gen": str(link_state(g, profile)[0]),
        "pci__pci_gpu_link_info__pcie_gen__device_current_link_gen": str(link_state(g, profile)[0]),
        "pci__pci_gpu_link_info__pcie_gen__max_device_link_gen": str(m["pcie_gen"]),
        "pci__pci_gpu_link_info__link_widths__max_link_width": f"{m['pcie_width']}x",
        "pci__pci_gpu_link_info__link_widths__current_link_width": f"{link_state(g, profile)[2]}x",
        "fan_speed": m["fan"] if m["fan"] == "N/A" else f"{m['fan']} %",
        "performance_state": v.pstate,
        "clocks_event_reasons__clocks_event_reason_gpu_idle": _active(v.idle),
        "clocks_event_reasons__clocks_event_reason_sw_power_cap": _active(v.sw_power_cap),
        "clocks_event_reasons__clocks_event_reason_hw_slowdown": _active(v.hw_slowdown),
        "clocks_event_reasons__clocks_event_reason_hw_thermal_slowdown": _active(v.hw_thermal),
        "clocks_event_reasons__clocks_event_reason_sw_thermal_slowdown": _active(v.sw_thermal),
        "ecc_errors__volatile__dram_uncorrectable": str(v.ecc_uncorrected),
        "ecc_errors__aggregate__dram_uncorrectable": str(v.ecc_uncorrected),
        "fb_memory_usage__total": f"{m['memory_total_mib']} MiB",
        "fb_memory_usage__reserved": f"{m['memory_reserved_mib']} MiB",
        "fb_memory_usage__used": f"{v.mem_used} MiB",
        "fb_memory_usage__free": f"{v.mem_free} MiB",
        "bar1_memory_usage__total": f"{m['bar1_total_mib']} MiB",
        "bar1_memory_usage__used": f"{v.bar1_used} MiB",
        "bar1_memory_usage__free": f"{m['bar1_total_mib'] - v.bar1_used} MiB",
        "utilization__gpu_util": f"{v.util} %", "utilization__memory_util": f"{v.mem_util} %",
        "temperature__gpu_temp": f"{v.temp} C", "temperature__memory_temp": f"{v.mem_temp} C",
        "gpu_power_readings__power_state": v.pstate,
        "gpu_power_readings__average_power_draw": f"{v.power:.2f} W",
        "gpu_power_readings__instant_power_draw": f"{v.power:.2f} W",
        "module_power_readings__power_state": v.pstate,
        "clocks__graphics_clock": f"{v.sm_clock} MHz", "clocks__sm_clock": f"{v.sm_clock} MHz",
        "clocks__mem_clock": f"{m['mem_clock_mhz']} MHz",
        "clocks__video_clock": f"{m['idle_video_clock_mhz']} MHz",
        "applications_clocks__graphics_clock": f"{m['max_sm_clock_mhz']} MHz",
        "applications_clocks__mem_clock": f"{m['mem_clock_mhz']} MHz",
        "default_applications_clocks__graphics_clock": f"{m['max_sm_clock_mhz']} MHz",
        "default_applications_clocks__mem_clock": f"{m['mem_clock_mhz']} MHz",
        "max_clocks__graphics_clock": f"{m['max_sm_clock_mhz']} MHz",
        "max_clocks__sm_clock": f"{m['max_sm_clock_mhz']} MHz",
        "max_clocks__mem_clock": f"{m['mem_clock_mhz']} MHz",
        "max_clocks__video_clock": f"{m['max_video_clock_mhz']} MHz",
        "max_customer_boost_clocks__graphics_clock": f"{m['max_sm_clock_mhz']} MHz",
    })
    for k in ("current_power_limit", "requested_power_limit"):
        d[f"gpu_power_readings__{k}"] = f"{power_limit(g, profile):.2f} W"
    d["gpu_power_readings__default_power_limit"] = f"{m['power_limit_w']:.2f} W"
    d["gpu_power_readings__min_power_limit"] = f"{m['power_min_limit_w']:.2f} W"
    d["gpu_power_readings__max_power_limit"] = f"{m['power_max_limit_w']:.2f} W"
    if not m["nvlinks"]:
        d["fabric__state"], d["fabric__status"] = "N/A", "N/A"
    return d


def xml(ctx: Ctx) -> str:
    p = ctx.profile
    parts = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
             "<nvidia_smi_log>", f"\t<timestamp>{time.asctime()}</timestamp>",
             f"\t<driver_version>{p['driver_version']}</driver_version>",
             f"\t<cuda_version>{p['cuda_version']}</cuda_version>",
             f"\t<attached_gpus>{len(ctx.all)}</attached_gpus>"]
    for v in ctx.views():
        m = v.gpu.m
        sup = []
        for mc in m["supported_mem_clocks_mhz"]:
            sup.append("\t\t\t<supported_mem_clock>")
            sup.append(f"\t\t\t\t<value>{mc} MHz</value>")
            sup += [f"\t\t\t\t<supported_graphics_clock>{c} MHz</supported_graphics_clock>"
                    for c in m["supported_graphics_clocks_mhz"]]
            sup.append("\t\t\t</supported_mem_clock>")
        procs = []
        for pid, pname, mem in v.procs():
            procs += ["\t\t\t<process_info>", "\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>",
                      "\t\t\t\t<compute_instance_id>N/A</compute_instance_id>", f"\t\t\t\t<pid>{pid}</pid>",
                      "\t\t\t\t<type>C</type>", f"\t\t\t\t<process_name>{_esc(pname)}</process_name>",
                      f"\t\t\t\t<used_memory>{mem} MiB</used_memory>", "\t\t\t</process_info>"]
        block = XML_GPU_TEMPLATE.format(bus_id=v.gpu.bus_id, supported_clocks="\n".join(sup),
                                        processes="\n".join(procs), **_xml_values(v, p))
        block = "\n".join(line for line in block.split("\n") if line != "")
        parts.append(block)
        parts.append("")
    parts.append("</nvidia_smi_log>")
    return "\n".join(parts) + "\n"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# Plain -q: the section labels of real `nvidia-smi -q` (public outputs of drivers 460..580), for the
# summary sections a facts module reads. Sections nvidia-smi prints beyond these are not simulated.
def query_plain(ctx: Ctx) -> str:
    p = ctx.profile
    L = ["", "==============NVSMI LOG==============", "",
         f"{'Timestamp':<42}: {time.asctime()}", f"{'Driver Version':<42}: {p['driver_version']}",
         f"{'CUDA Version':<42}: {p['cuda_version']}", "", f"{'Attached GPUs':<42}: {len(ctx.all)}"]

    def kv(indent, k, val):
        L.append(" " * indent + f"{k:<{42 - indent}}: {val}")

    for v in ctx.views():
        d = _xml_values(v, p)
        m = v.gpu.m
        L.append(f"GPU {v.gpu.bus_id}")
        kv(4, "Product Name", m["name"])
        kv(4, "Product Brand", m["brand"])
        kv(4, "Product Architecture", m["architecture"])
        kv(4, "Persistence Mode", d["persistence_mode"])
        L.append("    MIG Mode")
        kv(8, "Current", "Disabled")
        kv(8, "Pending", "Disabled")
        kv(4, "Serial Number", v.gpu.serial)
        kv(4, "GPU UUID", v.gpu.uuid)
        kv(4, "Minor Number", str(v.gpu.index))
        kv(4, "VBIOS Version", m["vbios_version"])
        kv(4, "Board ID", v.gpu.board_id)
        L.append("    PCI")
        kv(8, "Bus Id", v.gpu.bus_id)
        # GPU Link Info as the H200 recording prints it (tests/fixtures/nvidia-smi/h200-x1-device/nvidia-smi-q.txt)
        gen, gen_max, width, width_max = link_state(v.gpu, p)
        L.append("        GPU Link Info")
        L.append("            PCIe Generation")
        kv(16, "Max", str(gen_max))
        kv(16, "Current", str(gen))
        kv(16, "Device Current", str(gen))
        kv(16, "Device Max", str(gen_max))
        kv(16, "Host Max", "N/A")
        L.append("            Link Width")
        kv(16, "Max", f"{width_max}x")
        kv(16, "Current", f"{width}x")
        L.append("    Fan Speed".ljust(42) + f": {d['fan_speed']}")
        kv(4, "Performance State", v.pstate)
        L.append("    FB Memory Usage")
        kv(8, "Total", d["fb_memory_usage__total"])
        kv(8, "Reserved", d["fb_memory_usage__reserved"])
        kv(8, "Used", d["fb_memory_usage__used"])
        kv(8, "Free", d["fb_memory_usage__free"])
        L.append("    Utilization")
        kv(8, "Gpu", d["utilization__gpu_util"])
        kv(8, "Memory", d["utilization__memory_util"])
        # ECC Errors and the R570+ "GPU Power Readings" rows as the H200 recording prints them (same file)
        L.append("    ECC Mode")
        kv(8, "Current", "Enabled")
        kv(8, "Pending", "Enabled")
        L.append("    ECC Errors")
        L.append("        Volatile")
        kv(12, "SRAM Correctable", "0")
        kv(12, "SRAM Uncorrectable Parity", "0")
        kv(12, "SRAM Uncorrectable SEC-DED", "0")
        kv(12, "DRAM Correctable", "0")
        kv(12, "DRAM Uncorrectable", d["ecc_errors__volatile__dram_uncorrectable"])
        L.append("        Aggregate")
        kv(12, "SRAM Correctable", "0")
        kv(12, "SRAM Uncorrectable Parity", "0")
        kv(12, "SRAM Uncorrectable SEC-DED", "0")
        kv(12, "DRAM Correctable", "0")
        kv(12, "DRAM Uncorrectable", d["ecc_errors__aggregate__dram_uncorrectable"])
        L.append("    Temperature")
        kv(8, "GPU Current Temp", d["temperature__gpu_temp"])
        L.append("    GPU Power Readings")
        kv(8, "Average Power Draw", d["gpu_power_readings__average_power_draw"])
        kv(8, "Instantaneous Power Draw", d["gpu_power_readings__instant_power_draw"])
        kv(8, "Current Power Limit", d["gpu_power_readings__current_power_limit"])
        kv(8, "Requested Power Limit", d["gpu_power_readings__requested_power_limit"])
        kv(8, "Default Power Limit", d["gpu_power_readings__default_power_limit"])
        kv(8, "Min Power Limit", d["gpu_power_readings__min_power_limit"])
        kv(8, "Max Power Limit", d["gpu_power_readings__max_power_limit"])
        L.append("    Clocks")
        kv(8, "Graphics", d["clocks__graphics_clock"])
        kv(8, "SM", d["clocks__sm_clock"])
        kv(8, "Memory", d["clocks__mem_clock"])
        L.append("    Max Clocks")
        kv(8, "Graphics", d["max_clocks__graphics_clock"])
        kv(8, "SM", d["max_clocks__sm_clock"])
        kv(8, "Memory", d["max_clocks__mem_clock"])
        procs = v.procs()
        if not procs:
            kv(4, "Processes", "None")
        else:
            L.append("    Processes")
            for pid, pname, mem in procs:
                kv(8, "GPU instance ID", "N/A")
                kv(8, "Compute instance ID", "N/A")
                kv(8, "Process ID", str(pid))
                kv(12, "Type", "C")
                kv(12, "Name", pname)
                kv(12, "Used GPU Memory", f"{mem} MiB")
        L.append("")
    return "\n".join(L) + "\n"


# ---------------------------------------------------------------- CLI
class _Stop(Exception):
    pass


def _on_signal(signum, frame):
    raise _Stop()


def _write(s: str):
    sys.stdout.write(s)
    sys.stdout.flush()


def _loop(render, interval: float | None, count: int | None = None):
    """Print render(first) once, or every interval seconds until a signal (or count samples)."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    n = 0
    try:
        while True:
            text, rc = render(n == 0)
            _write(text)
            n += 1
            if rc or interval is None or (count is not None and n >= count):
                return rc
            time.sleep(interval)
    except (_Stop, BrokenPipeError):
        return 0


def _subcommand(profile, gpus, argv) -> int:
    cmd, rest = argv[0], argv[1:]
    ctx = Ctx(profile, gpus, None)
    if cmd == "topo" and rest == ["-m"]:
        _write(topo_m(ctx))
        return 0
    if cmd == "topo" and rest == ["-p2p", "r"]:
        _write(topo_p2p(ctx))
        return 0
    if cmd == "nvlink" and rest[:1] == ["-s"]:
        if rest[1:2] == ["-i"] and len(rest) > 2:
            sel = _select(gpus, rest[2])
            if sel is None:
                _write(NO_DEVICES_MSG)
                return NO_DEVICES_RC
            ctx = Ctx(profile, gpus, sel)
        _write(nvlink_s(ctx))
        return 0
    if cmd == "dmon":
        opts = {}
        i = 0
        while i < len(rest):
            if rest[i] in ("-s", "-c", "-d", "-i", "-o") and i + 1 < len(rest):
                opts[rest[i]] = rest[i + 1]
                i += 2
                continue
            _write(BAD_ARGS_MSG)
            return BAD_ARGS_RC
        if "-i" in opts:
            sel = _select(gpus, opts["-i"])
            if sel is None:
                _write(NO_DEVICES_MSG)
                return NO_DEVICES_RC
            ctx = Ctx(profile, gpus, sel)
        try:
            count = int(opts["-c"]) if "-c" in opts else None
            delay = float(opts.get("-d", 1))
        except ValueError:
            _write(BAD_ARGS_MSG)
            return BAD_ARGS_RC

        def render(first):
            return (dmon_header() if first else "") + dmon_rows(ctx), 0

        return _loop(render, delay, count)
    _write(BAD_ARGS_MSG)
    return BAD_ARGS_RC


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("MOESWEEP_SIM_NO_DRIVER") == "1":
        _write(NO_DRIVER_MSG)
        return NO_DRIVER_RC
    profile = gpumod.load_profile()
    if profile.get("driver_loaded") is False:
        _write(NO_DRIVER_MSG)
        return NO_DRIVER_RC
    gpus = gpumod.gpus_for(profile)

    if argv and argv[0] in ("topo", "nvlink", "dmon"):
        return _subcommand(profile, gpus, argv)

    opts: dict = {}
    pos: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        key, eq, val = a.partition("=")
        takes = {"-i": "id", "--id": "id", "-l": "loop", "--loop": "loop", "-lms": "loop_ms",
                 "--loop-ms": "loop_ms", "--format": "format",
                 "-f": "filename", "--filename": "filename",
                 "--query-gpu": "query_gpu", "--query-compute-apps": "query_apps"}
        if key in takes:
            if not eq:
                if key in ("-l", "--loop") and (i + 1 >= len(argv) or not argv[i + 1].isdigit()):
                    val = "5"  # real default interval
                else:
                    i += 1
                    if i >= len(argv):
                        _write(BAD_ARGS_MSG)
                        return BAD_ARGS_RC
                    val = argv[i]
            opts[takes[key]] = val
        elif a in ("-q", "--query"):
            opts["q"] = True
        elif a in ("-x", "--xml-format"):
            opts["x"] = True
        elif a in ("-L", "--list-gpus"):
            opts["L"] = True
        elif a == "--version":
            opts["version"] = True
        elif a.startswith("-"):
            _write(BAD_ARGS_MSG)
            return BAD_ARGS_RC
        else:
            pos.append(a)
        i += 1

    sel = None
    if "id" in opts:
        sel = _select(gpus, opts["id"])
        if sel is None:
            _write(NO_DEVICES_MSG)
            return NO_DEVICES_RC
    ctx = Ctx(profile, gpus, sel)
    try:
        interval = (int(opts["loop_ms"]) / 1000.0 if "loop_ms" in opts
                    else float(opts["loop"]) if "loop" in opts else None)
    except ValueError:
        _write(BAD_ARGS_MSG)
        return BAD_ARGS_RC

    if opts.get("version"):
        _write(version(ctx))
        return 0
    if pos:
        _write(BAD_ARGS_MSG)
        return BAD_ARGS_RC
    if opts.get("L"):
        _write(list_gpus(ctx))
        return 0
    if "query_gpu" in opts or "query_apps" in opts:
        fmt = _csv_opts(opts.get("format"))
        if fmt is None:
            _write(BAD_ARGS_MSG)
            return BAD_ARGS_RC
        header, units = fmt
        if "query_gpu" in opts:
            fields = [f.strip() for f in opts["query_gpu"].split(",") if f.strip()]
            return _loop(lambda first: query_gpu(ctx, fields, header, units, first), interval)
        fields = [f.strip() for f in opts["query_apps"].split(",") if f.strip()]
        return _loop(lambda first: query_apps(ctx, fields, header, units, first), interval)
    if opts.get("q"):
        _write(xml(ctx) if opts.get("x") else query_plain(ctx))
        return 0
    return _loop(lambda first: (table(ctx), 0), interval)


if __name__ == "__main__":
    sys.exit(main())
