# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Host checks: what decides multi-GPU serving on a host beyond the GPUs' model and count.

Each check is a dict ``{name, verdict, evidence, fix, source}``: ``verdict`` is ``ok``, ``warn`` (a caveat the
preflight reports) or ``fail`` (the preflight refuses the point before anything restarts); ``evidence`` is the
line read on the host that decided it; ``fix`` says what to change; ``source`` is the public document the
threshold comes from.

No I/O here. The readers take the text a command printed (``nvidia-smi -q``, ``nvidia-smi topo -p2p r``,
``/proc/<pid>/limits``, ``lspci -vvv``, the kernel log) and return plain data; ``evaluate`` turns the
gathered inputs into the checks. Written from real recorded output (``tests/fixtures/host_checks/SOURCES.md``).
"""

import re

from ansible_collections.moesweep.sweep.plugins.module_utils import nccl_log
from ansible_collections.moesweep.sweep.plugins.module_utils.nvidia_smi import parse_cpu_list

VERDICTS = ("ok", "warn", "fail")

NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
NCCL_MEMORY = ("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/"
               "runtime_and_mpi_issues.html#shared-memory")
CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"
XID_DOC = "https://docs.nvidia.com/deploy/xid-errors/"
SMI_DOC = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
SYSTEMD_EXEC = "https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#LimitCPU="

# NCCL's own example for containers (troubleshooting, "Shared memory"): --shm-size=1g --ulimit memlock=-1.
SHM_MIN_BYTES = 1 << 30
# sglang raises its soft open-files limit to 65535 at start (sglang 0.5.9 python/sglang/srt/utils/common.py
# set_ulimit(target_soft_limit=65535), called by srt/entrypoints/engine.py) and only logs "Fail to set
# RLIMIT_NOFILE" when the hard limit is lower.
NOFILE_MIN = 65535
# Room the flashinfer / triton / torch JIT caches and the logs take beside the model under the server's HOME
# (flashinfer's prebuilt jit-cache wheels for one CUDA release are a few GB): this project's margin.
JIT_CACHE_BYTES = 10 * (1 << 30)
# Minimum Linux driver of each CUDA major release (CUDA release notes, table 3; the compatibility guide: an
# application built with any CUDA 12.x runs on R525+, any 13.x on R580+ through minor version compatibility).
DRIVER_FOR_CUDA_MAJOR = {12: (525, 60, 13), 13: (580, 65, 6)}

UNLIMITED = None  # a limit of "unlimited" / "infinity"


def check(name, verdict, evidence, fix="", source=""):
    return {"name": name, "verdict": verdict, "evidence": evidence, "fix": fix, "source": source}


def _version(text):
    m = re.match(r"^\s*(\d+(?:\.\d+)*)", str(text or ""))
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _bytes(n):
    """1.5 GiB, 64 MiB, 64 KiB: what a person reads in a verdict."""
    if n is None:
        return "unlimited"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return ("%d %s" % (value, unit)) if value == int(value) else ("%.1f %s" % (value, unit))
    return "%d B" % n


# ---- readers --------------------------------------------------------------------------------------------------

_Q_LINE_RE = re.compile(r"^(?P<indent>[ \t]*)(?P<key>\S.*?)\s*(?::\s?(?P<value>.*))?$")
_Q_GPU_RE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_NUM_RE = re.compile(r"^(-?\d+(?:\.\d+)?)")


def _number(value):
    m = _NUM_RE.match((value or "").strip())
    if not m:
        return None
    text = m.group(1)
    return float(text) if "." in text else int(text)


def parse_q_sections(text):
    """``nvidia-smi -q`` -> [{"bus_id": ..., "values": {"Section/Sub/Key": "value"}}] in GPU order. The keys are the
    section path as printed (``GPU Link Info/Link Width/Current``), whatever the driver calls its sections."""
    gpus = []
    stack = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _Q_GPU_RE.match(line.strip()) if not line[:1].isspace() else None
        if m:
            gpus.append({"bus_id": m.group(1), "values": {}})
            stack = []
            continue
        if not gpus or not line[:1].isspace():
            continue
        lm = _Q_LINE_RE.match(line)
        indent = len(lm.group("indent").expandtabs(4))
        key = lm.group("key").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([name for _i, name in stack] + [key])
        if lm.group("value") is None:
            stack.append((indent, key))
        else:
            gpus[-1]["values"][path] = lm.group("value").strip()
    return gpus


def _first(values, *paths):
    """The value at the first of ``paths`` printed, a path matching the end of the printed one (``GPU Link Info``
    sits under ``PCI`` on R535+, at the top on older drivers)."""
    lowered = {k.lower(): v for k, v in values.items()}
    for path in paths:
        path = path.lower()
        for key, value in lowered.items():
            if key == path or key.endswith("/" + path):
                return value
    return None


def parse_q_gpus(text):
    """The values of ``nvidia-smi -q`` the checks read, per GPU: persistence, PCIe link, power limits,
    utilization, performance state and the error counters. Section names differ across drivers (R535 ``Power
    Readings`` / ``Power Limit`` / ``Enforced Power Limit``; R570+ ``GPU Power Readings`` / ``Current Power Limit``
    / ``Requested Power Limit``); a value the driver does not print is None."""
    out = []
    for gpu in parse_q_sections(text):
        v = gpu["values"]
        persistence = _first(v, "Persistence Mode")
        remapped_pending = _first(v, "Remapped Rows/Pending")
        limits = _power_limits(v)
        out.append({
            "bus_id": gpu["bus_id"],
            "name": _first(v, "Product Name"),
            "persistence_mode": None if persistence is None else persistence.strip().lower() == "enabled",
            "pstate": _first(v, "Performance State"),
            "utilization_gpu": _number(_first(v, "Utilization/GPU", "Utilization/Gpu")),
            "pcie_gen_max": _number(_first(v, "GPU Link Info/PCIe Generation/Max")),
            "pcie_gen_current": _number(_first(v, "GPU Link Info/PCIe Generation/Current")),
            "pcie_width_max": _number(_first(v, "GPU Link Info/Link Width/Max")),
            "pcie_width_current": _number(_first(v, "GPU Link Info/Link Width/Current")),
            "power_limit_w": _number(_first(v, "GPU Power Readings/Current Power Limit",
                                            "Power Readings/Power Limit") or limits.get("current")),
            "power_enforced_w": _number(_first(v, "Power Readings/Enforced Power Limit",
                                               "GPU Power Readings/Current Power Limit")
                                        or limits.get("enforced") or limits.get("current")),
            "power_requested_w": _number(_first(v, "GPU Power Readings/Requested Power Limit",
                                                "Power Readings/Power Limit") or limits.get("requested")),
            "power_default_w": _number(_first(v, "GPU Power Readings/Default Power Limit",
                                              "Power Readings/Default Power Limit") or limits.get("default")),
            "power_max_w": _number(_first(v, "GPU Power Readings/Max Power Limit", "Power Readings/Max Power Limit")
                                   or limits.get("max")),
            "virtualization_mode": _first(v, "GPU Virtualization Mode/Virtualization Mode"),
            "ecc_volatile_uncorrected": _sum_numbers(
                _first(v, "ECC Errors/Volatile/DRAM Uncorrectable"),
                _first(v, "ECC Errors/Volatile/SRAM Uncorrectable Parity"),
                _first(v, "ECC Errors/Volatile/SRAM Uncorrectable SEC-DED"),
                _first(v, "ECC Errors/Volatile/SRAM Uncorrectable"),
                _first(v, "ECC Errors/Volatile/Double Bit/Total")),
            "retired_pages_pending": _yes(_first(v, "Retired Pages/Pending Page Blacklist",
                                                 "Retired Pages/Pending")),
            "remapped_rows_pending": _yes(remapped_pending),
            "remapping_failure": _yes(_first(v, "Remapped Rows/Remapping Failure Occurred")),
        })
    return out


_LIMIT_WORDS = ("enforced", "current", "requested", "default", "min", "max")


def _power_limits(values):
    """The GPU's power limits wherever a driver nests them under its power readings: ``GPU Power Readings/Current
    Power Limit`` (R535+), ``Power Readings/Enforced Power Limit`` (older), or a block of their own under the
    readings (``.../Power Limit/Current``, ``.../Power Limits/Default``): {word: value} for enforced, current,
    requested, default, min, max. The memory's and the module's readings (``GPU Memory Power Readings``, ``Module
    Power Readings``) are not the GPU's limits."""
    out = {}
    for key, value in values.items():
        parts = [x.strip().lower() for x in key.split("/")]
        readings = [i for i, x in enumerate(parts) if x.endswith("power readings")]
        if not readings or any(x.startswith(("gpu memory", "memory", "module")) for x in (parts[readings[-1]],)):
            continue
        below = parts[readings[-1] + 1:]
        if not below or not any("power limit" in x for x in below):
            continue
        words = " ".join(below).split()
        for word in _LIMIT_WORDS:
            if word in words and word not in out:
                out[word] = value
                break
        else:
            if below[-1] in ("power limit", "power limits") and "current" not in out:
                out["current"] = value
    return out


def _sum_numbers(*values):
    nums = [_number(x) for x in values if x is not None]
    nums = [x for x in nums if x is not None]
    return sum(nums) if nums else None


def _yes(value):
    if value is None:
        return None
    value = value.strip().lower()
    if value in ("yes", "no"):
        return value == "yes"
    return None


_P2P_CODES = ("X", "OK", "CNS", "GNS", "TNS", "NS", "DR", "U")
_P2P_ROW_RE = re.compile(r"^\s*(GPU\d+)\s+(.*)$")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


_P2P_KIND_RE = re.compile(r"topo\s+-p2p[\s=]+(rw|r|w|n|a|p)\b|\(topo -p2p (rw|r|w|n|a|p)\)")
# What each capability of ``nvidia-smi topo -p2p`` is (nvidia-smi --help: r = read, w = write, n = NVLink,
# a = atomics, p = prop; rw is read and write together).
P2P_KINDS = {"r": "read", "w": "write", "rw": "read/write", "n": "NVLink", "a": "atomics", "p": "prop"}


def parse_topo_p2p_matrices(text):
    """Every ``nvidia-smi topo -p2p r|w|rw|n|a|p`` matrix of a paste, in order: [{"kind", "matrix"}]. ``kind`` is
    the capability the command line (or a ``(topo -p2p rw)`` title) before the matrix names, None when the paste
    does not say. Codes: X, OK, CNS, GNS, TNS, NS, DR, U; cells tab- or space-aligned, trailing tabs, ANSI escapes
    (nvidia-smi underlines its header on a terminal) and a Markdown block's indentation are read."""
    out = []
    kind = None
    columns = []
    current = None
    for raw in (text or "").splitlines():
        line = _ANSI_RE.sub("", raw)
        m = _P2P_KIND_RE.search(line)
        if m:
            kind = m.group(1) or m.group(2)
            columns, current = [], None
            continue
        cells = line.split()
        if not cells:
            continue
        if all(re.match(r"^GPU\d+$", c) for c in cells):
            columns, current = cells, None
            continue
        m = _P2P_ROW_RE.match(line)
        if not m or not columns:
            continue
        codes = m.group(2).split()
        if not codes or not all(c in _P2P_CODES for c in codes):
            continue
        if current is None:
            current = {"kind": kind, "matrix": {}}
            out.append(current)
            kind = None
        current["matrix"][m.group(1)] = dict(zip(columns, codes))  # noqa: B905
    return out


def parse_topo_p2p(text):
    """``nvidia-smi topo -p2p r`` (or ``w``, ``rw``...) -> {"GPU0": {"GPU1": "OK", ...}, ...}: the read matrix of a
    paste that holds several (read, read/write, else the first); legend lines and prompts are skipped."""
    found = parse_topo_p2p_matrices(text)
    for wanted in ("r", "rw", None):
        for m in found:
            if m["kind"] == wanted:
                return m["matrix"]
    return found[0]["matrix"] if found else {}


_LIMIT_NAMES = {"Max locked memory": "memlock", "Max open files": "nofile"}


def parse_proc_limits(text):
    """``/proc/<pid>/limits`` -> {"memlock": (soft, hard), "nofile": (soft, hard)}: numbers, None when unlimited."""
    out = {}
    for line in (text or "").splitlines():
        for label, name in _LIMIT_NAMES.items():
            if line.startswith(label):
                parts = line[len(label):].split()
                if len(parts) >= 2:
                    out[name] = tuple(None if p == "unlimited" else int(p) for p in parts[:2])
    return out


def has_cap_sys_resource(status_text):
    """Whether ``/proc/<pid>/status``'s CapEff holds CAP_SYS_RESOURCE (bit 24): without it a service manager
    cannot raise a unit's limits above its own hard limits."""
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", status_text or "", re.M)
    if not m:
        return None
    return bool(int(m.group(1), 16) & (1 << 24))


def parse_systemd_limit(value):
    """``LimitMEMLOCK=infinity`` / ``8388608`` (``systemctl show`` values) -> None (unlimited) or int."""
    value = (value or "").strip()
    if value in ("infinity", ""):
        return None
    try:
        return int(value)
    except ValueError:
        return None


_LSPCI_DEV_RE = re.compile(r"^([0-9a-fA-F]{4}:)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+(.*)$")
_ACS_RE = re.compile(r"ACSCtl:\s*(.*)$")


def parse_lspci_acs(text):
    """``lspci -vvv`` (or its ``grep ACSCtl`` lines) -> [{"device", "name", "redirect", "line"}]: one entry per
    ACS control register; ``redirect`` is true when requests or completions are redirected upstream
    (``ReqRedir+`` / ``CmpltRedir+``) or source validation is on (``SrcValid+``), which sends peer-to-peer
    traffic through the root complex."""
    found = []
    device = name = None
    for raw in (text or "").splitlines():
        m = _LSPCI_DEV_RE.match(raw)
        if m:
            device, name = (m.group(1) or "0000:") + m.group(2), m.group(3)
            continue
        a = _ACS_RE.search(raw)
        if a:
            flags = a.group(1).split()
            on = [f[:-1] for f in flags if f.endswith("+")]
            found.append({"device": device, "name": name,
                          "redirect": any(f in on for f in ("SrcValid", "ReqRedir", "CmpltRedir")),
                          "line": a.group(0).strip()})
    return found


_LNK_RE = re.compile(r"^\s*(LnkCap|LnkSta):\s*(?:Port #\d+,\s*)?Speed ([\d.]+)GT/s( \((?:downgraded|ok)\))?, "
                     r"Width x(\d+)( \((?:downgraded|ok)\))?")
_ACSCAP_RE = re.compile(r"ACSCap:\s*(.*)$")
# PCIe signalling rate per generation (GT/s), as lspci prints it
PCIE_GEN_OF_SPEED = {"2.5": 1, "5": 2, "8": 3, "16": 4, "32": 5, "64": 6}


def parse_lspci(text):
    """``lspci -vvv`` (whole, or lines of it) -> [{"device", "name", "nvidia", "acs_cap", "acs_ctl", "redirect",
    "lnkcap": {"speed", "gen", "width"}, "lnksta": {"speed", "gen", "width", "speed_downgraded",
    "width_downgraded"}}], one entry per function that shows any of those lines (``device`` None where the paste
    has no function header above them). lspci marks a link below its capability ``(downgraded)`` (pciutils 3.8+)."""
    out = []
    cur = None
    for raw in (text or "").splitlines():
        m = _LSPCI_DEV_RE.match(raw)
        if m:
            cur = {"device": (m.group(1) or "0000:") + m.group(2), "name": m.group(3),
                   "nvidia": "NVIDIA" in m.group(3), "acs_cap": None, "acs_ctl": None, "redirect": None,
                   "lnkcap": None, "lnksta": None, "_shown": False}
            out.append(cur)
            continue
        lm = _LNK_RE.match(raw)
        a = _ACS_RE.search(raw)
        c = _ACSCAP_RE.search(raw)
        if not (lm or a or c):
            continue
        if cur is None or (lm and cur.get(lm.group(1).lower())) or (a and cur["acs_ctl"]) or (c and cur["acs_cap"]):
            cur = {"device": None, "name": None, "nvidia": None, "acs_cap": None, "acs_ctl": None,
                   "redirect": None, "lnkcap": None, "lnksta": None, "_shown": False}
            out.append(cur)
        cur["_shown"] = True
        if lm:
            speed = lm.group(2).rstrip("0").rstrip(".") if "." in lm.group(2) else lm.group(2)
            link = {"speed": speed, "gen": PCIE_GEN_OF_SPEED.get(speed), "width": int(lm.group(4))}
            if lm.group(1) == "LnkSta":
                link["speed_downgraded"] = bool(lm.group(3) and "downgraded" in lm.group(3))
                link["width_downgraded"] = bool(lm.group(5) and "downgraded" in lm.group(5))
            cur[lm.group(1).lower()] = link
        if c:
            cur["acs_cap"] = c.group(1).strip()
        if a:
            cur["acs_ctl"] = a.group(1).strip()
            on = [f[:-1] for f in a.group(1).split() if f.endswith("+")]
            cur["redirect"] = any(f in on for f in ("SrcValid", "ReqRedir", "CmpltRedir"))
    shown = [d for d in out if d.pop("_shown") or d["device"]]
    return shown


def lspci_links(devices):
    """The PCIe links lspci shows, in the shape ``check_pcie_links`` reads (``-q``'s GPU Link Info): the NVIDIA
    functions', else (a paste of link lines without their function header) every link shown."""
    links = ([d for d in devices if d["lnksta"] and d["nvidia"]]
             or [d for d in devices if d["lnksta"] and d["nvidia"] is None])
    out = []
    for d in links:
        cap, sta = d["lnkcap"] or {}, d["lnksta"]
        # without the LnkCap line, lspci's "(downgraded)" still says the link runs below what it can
        out.append({"bus_id": d["device"] or "(lspci, no header)", "pcie_width_current": sta["width"],
                    "pcie_width_max": cap.get("width") or (None if sta.get("width_downgraded") else sta["width"]),
                    "width_downgraded": sta.get("width_downgraded"), "pcie_gen_current": sta["gen"],
                    "pcie_gen_max": cap.get("gen") or (None if sta.get("speed_downgraded") else sta["gen"]),
                    "utilization_gpu": None, "source": "lspci"})
    return out


_GRUB_RE = re.compile(r"""^\s*GRUB_CMDLINE_LINUX(?:_DEFAULT)?\s*=\s*["']?(.*?)["']?\s*$""")


def parse_cmdline(text):
    """The kernel command line of a paste: ``/proc/cmdline`` (a line with ``BOOT_IMAGE=`` or ``root=``) or the
    ``GRUB_CMDLINE_LINUX[_DEFAULT]="..."`` lines of /etc/default/grub (commented ones skipped; both lines make the
    command line). {"source": "proc" | "grub", "line", "args"} or None."""
    grub = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line.startswith("#"):
            continue
        m = _GRUB_RE.match(line)
        if m:
            grub.append(m.group(1))
            continue
        if re.search(r"(?:^|\s)(?:BOOT_IMAGE=|root=(?:UUID=|/dev/|LABEL=|PARTUUID=|ZFS=))", line):
            return {"source": "proc", "line": line, "args": line.split()}
    if grub:
        joined = " ".join(g for g in grub if g)
        return {"source": "grub", "line": joined, "args": joined.split()}
    return None


_IOMMU_ARGS_RE = re.compile(r"(?:^|\s)((?:intel_iommu|amd_iommu|iommu)=\S+)")


def iommu_mode(cmdline, groups_present):
    """The kernel's IOMMU mode from ``/proc/cmdline`` and whether ``/sys/kernel/iommu_groups`` has groups:
    ``off``, ``passthrough`` (``iommu=pt``: DMA not translated for host devices), ``translated`` (groups present
    without ``iommu=pt``), ``none`` (no groups)."""
    args = [a.strip("\"'") for a in _IOMMU_ARGS_RE.findall(cmdline or "")]
    if any(a in ("iommu=pt", "iommu=off", "intel_iommu=off", "amd_iommu=off") for a in args):
        return ("passthrough" if "iommu=pt" in args else "off"), args
    if groups_present is None:
        # a pasted command line alone: an IOMMU switched on without iommu=pt translates; without any argument the
        # kernel's build default decides, which the command line does not show
        on = any(a in ("intel_iommu=on", "amd_iommu=on", "iommu=on", "iommu=force", "iommu=nopt") for a in args)
        return ("translated" if on else "unknown"), args
    return ("translated" if groups_present else "none"), args


_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?(.*)$")


def parse_xid(text):
    """Kernel log text -> [{"xid", "pci", "line"}] for every ``NVRM: Xid (PCI:...): N, ...`` line."""
    out = []
    for line in (text or "").splitlines():
        m = _XID_RE.search(line)
        if m:
            out.append({"xid": int(m.group(2)), "pci": m.group(1), "line": line.strip()})
    return out


def parse_meminfo(text):
    """``/proc/meminfo`` -> {"MemTotal": bytes, "MemAvailable": bytes, ...}."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * 1024
    return out


# ---- checks ---------------------------------------------------------------------------------------------------

def check_p2p(matrix, gpu_count):
    if gpu_count is not None and gpu_count < 2:
        return check("p2p", "ok", "one GPU: no peer-to-peer traffic", source=NCCL_TROUBLESHOOTING)
    if not matrix:
        return check("p2p", "warn", "nvidia-smi topo -p2p r printed no matrix",
                     "run `nvidia-smi topo -p2p r` on the host and read it (an old driver lacks -p2p)",
                     NCCL_TROUBLESHOOTING)
    bad = {}
    pairs = 0
    names = sorted(matrix, key=lambda g: int(g[3:]))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pairs += 1
            code = matrix[a].get(b)
            if code != "OK":
                bad.setdefault(code or "?", []).append("%s-%s" % (a, b))
    if not bad:
        return check("p2p", "ok", "P2P read OK between all %d GPU pairs" % pairs, source=NCCL_TROUBLESHOOTING)
    parts = ["%s between %d of %d pairs (%s)" % (code, len(p), pairs,
                                                 ", ".join(p[:4]) + (", ..." if len(p) > 4 else ""))
             for code, p in sorted(bad.items())]
    return check(
        "p2p", "warn", "nvidia-smi topo -p2p r: " + "; ".join(parts),
        "GPUs without P2P exchange data through host memory (NCCL's SHM transport) and sglang's custom all-reduce "
        "cannot run: keep NCCL_P2P_LEVEL / --disable-custom-all-reduce as the host allows, or give the VM P2P "
        "(pass the GPUs through behind one PCIe switch with ACS off on the hypervisor, or a hypervisor that "
        "advertises the P2P clique)",
        NCCL_TROUBLESHOOTING)


def check_acs_iommu(acs, lspci_found, mode, args, gpu_count, virtualized):
    if gpu_count is not None and gpu_count < 2:
        return check("acs_iommu", "ok", "one GPU: ACS and the IOMMU do not route peer traffic",
                     source=NCCL_TROUBLESHOOTING)
    where = " (a VM: the hypervisor's bridges decide too, check them on the host)" if virtualized else ""
    redirecting = [a for a in (acs or []) if a["redirect"]]
    if redirecting:
        first = redirecting[0]
        return check(
            "acs_iommu", "warn",
            "ACS redirects peer traffic on %d of %d PCIe functions, e.g. %s: %s%s"
            % (len(redirecting), len(acs), first["device"] or "a function whose lspci header is not shown",
               first["line"], where),
            "disable ACS on the bridges between the GPUs (BIOS, or `setpci -s BDF ECAP_ACS+6.w=0000` per bridge, or "
            "the kernel's pci=noacs where available) and boot with iommu=pt",
            NCCL_TROUBLESHOOTING)
    if mode == "translated":
        return check(
            "acs_iommu", "warn",
            "IOMMU translating DMA (IOMMU groups present, no iommu=pt on the kernel command line%s)%s"
            % (": " + " ".join(args) if args else "", where),
            "boot with iommu=pt (kernel command line) so peer-to-peer DMA is not redirected through the IOMMU",
            NCCL_TROUBLESHOOTING)
    if not lspci_found:
        return check("acs_iommu", "warn", "ACS not read: lspci (pciutils) is not installed; IOMMU %s" % mode,
                     "install pciutils so the check can read the bridges' ACSCtl", NCCL_TROUBLESHOOTING)
    return check("acs_iommu", "ok", "no PCIe function redirects peer traffic (%d ACS registers read); IOMMU %s%s"
                 % (len(acs or []), mode, where), source=NCCL_TROUBLESHOOTING)


def check_pcie_links(gpus):
    if not gpus:
        return check("pcie_link", "warn", "nvidia-smi -q printed no PCIe link", "read `nvidia-smi -q` on the host",
                     SMI_DOC)
    narrow, slow, idle_slow = [], [], []
    for i, g in enumerate(gpus):
        wc, wm = g.get("pcie_width_current"), g.get("pcie_width_max")
        gc, gm = g.get("pcie_gen_current"), g.get("pcie_gen_max")
        label = "GPU%d %s" % (i, g.get("bus_id"))
        if wc and wm and wc < wm:
            narrow.append("%s x%d of x%d" % (label, wc, wm))
        elif wc and not wm and g.get("width_downgraded"):
            narrow.append("%s x%d, below its capability (lspci: downgraded)" % (label, wc))
        if gc and gm and gc < gm:
            # nvidia-smi: link generation "may be reduced when the GPU is not in use"
            busy = (g.get("utilization_gpu") or 0) > 0
            (slow if busy else idle_slow).append("%s gen %d of %d%s" % (
                label, gc, gm, "" if busy else (" (idle)" if g.get("utilization_gpu") is not None
                                                else " (load not known)")))
    if narrow or slow:
        return check(
            "pcie_link", "warn", "downtrained PCIe link: " + "; ".join(narrow + slow),
            "reseat the card or its riser, check the slot's wiring (an x16 card in an x8 slot) and the BIOS link "
            "speed setting; in a VM compare with `lspci -vv` LnkSta on the hypervisor",
            SMI_DOC)
    tail = ("; " + "; ".join(idle_slow) + ": judged under load only") if idle_slow else ""
    first = gpus[0]
    return check("pcie_link", "ok", "every link at its maximum width (x%s, gen %s)%s"
                 % (first.get("pcie_width_max"), first.get("pcie_gen_max"), tail), source=SMI_DOC)


def _cpus(text):
    try:
        return set(parse_cpu_list(text))
    except ValueError:
        return None


def check_numa(topology, unit_cpus_text):
    """Each GPU's CPU affinity (``topo -m``) against the CPUs the unit may run on (``Cpus_allowed_list`` of the
    running unit, else of the service manager, whose affinity a unit without CPUAffinity= inherits)."""
    affinity = (topology or {}).get("cpu_affinity") or {}
    numa = (topology or {}).get("numa_affinity") or {}
    nodes = sorted(set(v for v in numa.values() if v not in (None, "", "N/A")))
    unit = _cpus(unit_cpus_text) if unit_cpus_text else None
    if not affinity or unit is None:
        return check("numa", "ok", "GPU CPU affinity not shown (%s)" % (
            "no topo -m" if not affinity else "unit CPUs unknown"), source=NCCL_TROUBLESHOOTING)
    away = []
    for gpu, cpus in sorted(affinity.items()):
        near = _cpus(cpus) if cpus not in (None, "", "N/A") else None
        if near and not (near & unit):
            away.append("%s (CPUs %s, NUMA %s)" % (gpu, cpus, numa.get(gpu, "?")))
    if away:
        return check("numa", "warn", "the unit's CPUs %s reach none of the CPUs near %s" % (unit_cpus_text,
                                                                                            ", ".join(away)),
                     "let the unit run on the CPUs of every GPU's NUMA node (drop or widen CPUAffinity= / the "
                     "service manager's CPUAffinity)", SYSTEMD_EXEC)
    return check("numa", "ok", "the unit's CPUs %s include CPUs near every GPU (NUMA node%s %s)"
                 % (unit_cpus_text, "s" if len(nodes) > 1 else "", ",".join(nodes) or "?"),
                 source=NCCL_TROUBLESHOOTING)


def check_shm(shm_bytes, gpu_count):
    if shm_bytes is None:
        return check("shm", "warn", "/dev/shm is not mounted", "mount a tmpfs on /dev/shm (NCCL needs it)",
                     NCCL_MEMORY)
    if gpu_count is not None and gpu_count < 2:
        return check("shm", "ok", "/dev/shm %s (one GPU: NCCL is not used across GPUs)" % _bytes(shm_bytes),
                     source=NCCL_MEMORY)
    if shm_bytes < SHM_MIN_BYTES:
        return check(
            "shm", "warn", "/dev/shm is %s, below NCCL's 1 GiB example (--shm-size=1g)" % _bytes(shm_bytes),
            "enlarge /dev/shm (`mount -o remount,size=16G /dev/shm`, or the container's --shm-size); NCCL fails to "
            "initialize with 'failed to extend /dev/shm/nccl-...' when it is too small", NCCL_MEMORY)
    return check("shm", "ok", "/dev/shm %s" % _bytes(shm_bytes), source=NCCL_MEMORY)


def unit_limits(requested, running, manager_limits, manager_can_raise):
    """The limits the unit gets, {"memlock": (soft, hard), "nofile": (soft, hard)} (None: unlimited) and how they
    were known. A running unit's own ``/proc/<pid>/limits`` decide. Otherwise the unit's request (``systemctl
    show``: LimitMEMLOCK=, LimitNOFILE=, one value for both) holds unless the service manager lacks
    CAP_SYS_RESOURCE, in which case systemd sets the closest it can: its own hard limit (systemd
    ``src/basic/rlimit-util.c`` ``setrlimit_closest``)."""
    if running:
        return dict(running), "the running unit's /proc/PID/limits"
    out = {}
    for name in ("memlock", "nofile"):
        want = (requested or {}).get(name, UNLIMITED)
        hard = (manager_limits or {}).get(name, (UNLIMITED, UNLIMITED))[1]
        if manager_can_raise is False and hard is not UNLIMITED and (want is UNLIMITED or want > hard):
            want = hard
        out[name] = (want, want)
    how = "the unit's request" + (", capped by PID 1's hard limit (no CAP_SYS_RESOURCE)"
                                  if manager_can_raise is False else "")
    return out, how


def check_limits(limits, how, gpu_count):
    """memlock: the soft limit NCCL pins host memory under; open files: the hard limit sglang raises its soft one
    to (at most)."""
    memlock = limits.get("memlock", (UNLIMITED, UNLIMITED))[0]
    nofile = limits.get("nofile", (UNLIMITED, UNLIMITED))[1]
    low = []
    if memlock is not UNLIMITED and (gpu_count or 0) > 1:
        low.append("memlock %s (NCCL's example: --ulimit memlock=-1, unlimited)" % _bytes(memlock))
    if nofile is not UNLIMITED and nofile < NOFILE_MIN:
        low.append("a hard open-files limit of %d (sglang raises its soft limit to %d)" % (nofile, NOFILE_MIN))
    evidence = "the unit gets memlock %s, open files up to %s (%s)" % (
        _bytes(memlock), "unlimited" if nofile is UNLIMITED else nofile, how)
    if low:
        return check("limits", "warn", "the unit gets " + ", ".join(low) + " (%s)" % how,
                     "raise the limits the sglang unit gets: LimitMEMLOCK=infinity and LimitNOFILE=1048576 (the role "
                     "sets both; a container or LXC caps them at its own hard limits: raise them there, e.g. "
                     "lxc.prlimit.memlock / --ulimit memlock=-1)", NCCL_MEMORY)
    return check("limits", "ok", evidence, source=NCCL_MEMORY)


def check_power(gpus):
    if not gpus:
        return check("power_cap", "warn", "nvidia-smi -q printed no GPU", "read `nvidia-smi -q` on the host", SMI_DOC)
    capped, unknown = [], 0
    for i, g in enumerate(gpus or []):
        limit, default, top = g.get("power_limit_w"), g.get("power_default_w"), g.get("power_max_w")
        ref = default or top
        if limit is None or ref is None:
            unknown += 1
            continue
        if limit < ref:
            capped.append("GPU%d %s: %.0f W of %.0f W default%s" % (
                i, g.get("bus_id"), limit, ref, (", %.0f W max" % top) if top and top != ref else ""))
    if capped:
        return check("power_cap", "warn", "power limit below the card's default: " + "; ".join(capped),
                     "restore the default limit (`nvidia-smi -pl DEFAULT -i N` as root) or record the cap as intended: "
                     "a capped card runs slower under load", SMI_DOC)
    if unknown and unknown == len(gpus or []):
        return check("power_cap", "ok", "nvidia-smi -q shows no power limits (not supported on this board)",
                     source=SMI_DOC)
    first = gpus[0]
    return check("power_cap", "ok", "every GPU at its default power limit (%.0f W)"
                 % (first.get("power_limit_w") or 0), source=SMI_DOC)


def check_persistence(gpus):
    if not gpus:
        return check("persistence", "warn", "nvidia-smi -q printed no GPU", "read `nvidia-smi -q` on the host",
                     SMI_DOC)
    off = ["GPU%d %s" % (i, g.get("bus_id")) for i, g in enumerate(gpus or []) if g.get("persistence_mode") is False]
    if off:
        return check("persistence", "warn", "persistence mode off on " + ", ".join(off),
                     "enable nvidia-persistenced (systemctl enable --now nvidia-persistenced) so the driver stays "
                     "initialised between server restarts", SMI_DOC)
    return check("persistence", "ok", "persistence mode on for every GPU", source=SMI_DOC)


# Xids that say the GPU or its memory cannot be trusted until a reset (NVIDIA's Xid catalog).
FATAL_XIDS = {48: "double bit ECC error", 63: "ECC page retirement or row remapping recording event",
              64: "ECC page retirement or row remapper recording failure", 74: "NVLink error",
              79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate", 94: "contained ECC error",
              95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error"}


def check_errors(gpus, xids, kernel_log_read):
    bad = []
    for i, g in enumerate(gpus or []):
        if g.get("ecc_volatile_uncorrected"):
            bad.append("GPU%d %s: %d uncorrected ECC errors since the driver loaded"
                       % (i, g.get("bus_id"), g["ecc_volatile_uncorrected"]))
        if g.get("remapped_rows_pending") or g.get("retired_pages_pending"):
            bad.append("GPU%d %s: a memory row remap / page retirement waits for a GPU reset" % (i, g.get("bus_id")))
        if g.get("remapping_failure"):
            bad.append("GPU%d %s: row remapping failed" % (i, g.get("bus_id")))
    fatal = [x for x in (xids or []) if x["xid"] in FATAL_XIDS]
    if fatal:
        bad.append("%d Xid line(s) since boot, last: %s" % (len(fatal), fatal[-1]["line"]))
    if bad:
        return check("gpu_errors", "fail", "; ".join(bad),
                     "reset the GPU (`nvidia-smi -r -i N` with nothing running, or reboot) and, if it returns, have "
                     "the card serviced; a point measured on it is not trustworthy", XID_DOC)
    other = [x for x in (xids or []) if x["xid"] not in FATAL_XIDS]
    tail = "; %d other Xid line(s), last: %s" % (len(other), other[-1]["line"]) if other else ""
    read = "" if kernel_log_read else " (kernel log not readable: Xids not checked)"
    return check("gpu_errors", "warn" if other else "ok",
                 "no uncorrected ECC error, no pending remap, no fatal Xid since boot%s%s" % (read, tail),
                 "read the Xid's meaning in NVIDIA's catalog" if other else "", XID_DOC)


def check_driver(driver_version, driver_cuda, stack_cuda):
    if not stack_cuda:
        return check("driver_cuda", "ok", "driver %s (CUDA %s); no serving stack recorded to compare"
                     % (driver_version, driver_cuda or "?"), source=CUDA_COMPAT)
    need = _version(stack_cuda)
    have = _version(driver_cuda)
    drv = _version(driver_version)
    floor = DRIVER_FOR_CUDA_MAJOR.get(need[0]) if need else None
    evidence = "driver %s supports CUDA %s; the stack's torch is built for CUDA %s" % (
        driver_version, driver_cuda or "?", stack_cuda)
    if drv and floor and drv < floor:
        return check("driver_cuda", "fail", evidence + " (CUDA %d.x needs driver >= %s)" % (
            need[0], ".".join(map(str, floor))),
            "install a driver of branch R%d or newer (the cuda_toolkit role's cuda_toolkit_driver_min_cuda=%s), or use "
            "a stack built for CUDA %s" % (floor[0], stack_cuda, driver_cuda or "the driver's CUDA"),
            CUDA_COMPAT)
    if have and need and have[0] == need[0] and have < need:
        return check("driver_cuda", "warn", evidence + " (minor version compatibility: no PTX JIT of newer code)",
                     "update the driver to one that supports CUDA %s" % stack_cuda, CUDA_COMPAT)
    return check("driver_cuda", "ok", evidence, source=CUDA_COMPAT)


def check_disk(paths, model_bytes):
    """``paths``: [{"path", "free_bytes", "what"}] (the model's directory, the JIT caches)."""
    if not paths:
        return check("disk", "ok", "no path to check", source="")
    need = JIT_CACHE_BYTES + (model_bytes or 0)
    worst = min(paths, key=lambda p: p.get("free_bytes") if p.get("free_bytes") is not None else 1 << 62)
    free = worst.get("free_bytes")
    what = "the model (%s) and the JIT caches (%s)" % (_bytes(model_bytes), _bytes(JIT_CACHE_BYTES)) if model_bytes \
        else "the JIT caches (%s; the model's size is not known yet)" % _bytes(JIT_CACHE_BYTES)
    if free is None:
        return check("disk", "warn", "free space of %s not readable" % worst["path"], "check the path exists", "")
    evidence = "%s free on %s (%s), %s needed for %s" % (_bytes(free), worst["path"], worst.get("what") or "",
                                                         _bytes(need), what)
    if free < need:
        # a model that cannot fit fails the host; without its size only the caches' room is known to be short
        return check("disk", "fail" if model_bytes else "warn", evidence,
                     "free space on %s (or point sglang_server_home at a larger disk) before the server downloads "
                     "or compiles anything" % worst["path"], "")
    return check("disk", "ok", evidence, source="")


def check_ram(mem_total, model_bytes):
    if not mem_total:
        return check("ram", "warn", "/proc/meminfo not readable", "", "")
    if not model_bytes:
        return check("ram", "ok", "%s of RAM; the model's size is not known yet" % _bytes(mem_total), source="")
    evidence = "%s of RAM for a %s model" % (_bytes(mem_total), _bytes(model_bytes))
    if mem_total < model_bytes:
        return check("ram", "warn", evidence + ": the page cache cannot hold the weights, every restart reads them "
                     "from disk again", "add RAM or accept cold reloads (start time grows with disk speed)", "")
    return check("ram", "ok", evidence + ": warm restarts load from the page cache", source="")


def evaluate(inputs):
    """The checks from what gpu_facts gathered (``inputs``, see ``gpu_facts.gather_host_inputs``), in a fixed
    order."""
    gpus = parse_q_gpus(inputs.get("nvidia_smi_q"))
    count = inputs.get("gpu_count") or len(gpus) or None
    mode, args = iommu_mode(inputs.get("cmdline"), inputs.get("iommu_groups"))
    acs = parse_lspci_acs(inputs.get("lspci")) if inputs.get("lspci") is not None else []
    running = parse_proc_limits(inputs["unit_proc_limits"]) if inputs.get("unit_proc_limits") else None
    limits, how = unit_limits(
        {k: parse_systemd_limit(v) for k, v in (inputs.get("unit_requested") or {}).items()},
        running, parse_proc_limits(inputs.get("manager_limits")), has_cap_sys_resource(inputs.get("manager_status")))
    meminfo = parse_meminfo(inputs.get("meminfo"))
    kernel_log = inputs.get("kernel_log")
    return [
        check_driver(inputs.get("driver_version"), inputs.get("driver_cuda_version"), inputs.get("stack_cuda")),
        check_p2p(parse_topo_p2p(inputs.get("topo_p2p")), count),
        check_acs_iommu(acs, inputs.get("lspci") is not None, mode, args, count, inputs.get("virtualized")),
        check_pcie_links(gpus),
        check_numa(inputs.get("topology"), inputs.get("unit_cpus")),
        check_shm(inputs.get("shm_bytes"), count),
        check_limits(limits, how, count),
        check_power(gpus),
        check_persistence(gpus),
        check_errors(gpus, parse_xid(kernel_log), kernel_log is not None),
        check_disk(inputs.get("disk") or [], inputs.get("model_bytes")),
        check_ram(meminfo.get("MemTotal"), inputs.get("model_bytes")),
    ]


def _nccl_name(summary):
    return "NCCL " + summary["nccl_version"] if summary.get("nccl_version") else "NCCL"


def check_nccl_transport(summary):
    """NCCL's own account of the transport between the GPU pairs it connected (module_utils/nccl_log.py): pairs of
    one host connected through host memory (SHM) or the network are a warning with NCCL's line as evidence and the
    setting NCCL reported as the fix."""
    pairs = (summary or {}).get("pairs") or []
    slow = [p for p in pairs if p.get("family") in ("SHM", "NET")]
    source = nccl_log.NCCL_SRC + "src/transport/shm.cc"
    if slow:
        first = slow[0]
        kinds = sorted(set(p["transport"] for p in slow))
        return check("nccl_transport", "warn", "%s connected %d of %d GPU pairs via %s, e.g. %s; NCCL's line: %s"
                     % (_nccl_name(summary), len(slow), len(pairs), "/".join(kinds),
                        nccl_log.pair_text(first), first["line"]),
                     "; ".join(nccl_log.what_would_change(summary)) or "give the GPUs P2P (see the p2p check)",
                     source)
    first = pairs[0]
    return check("nccl_transport", "ok", "%s connected every one of %d GPU pairs via %s; NCCL's line: %s"
                 % (_nccl_name(summary), len(pairs), "/".join(sorted(set(p["transport"] for p in pairs))),
                    first["line"]), source=nccl_log.NCCL_SRC + "src/transport/p2p.cc")


# ---- pasted outputs -------------------------------------------------------------------------------------------

PASTE_KINDS = ("topo-p2p", "lspci", "cmdline", "limits", "kernel-log", "nccl", "meminfo")


def read_pasted(text):
    """What one pasted text holds of the host checks' inputs beyond nvidia-smi's own outputs (which
    ``nvidia_smi.read_saved_output`` reads): ``{"kinds": [...], "topo_p2p": [matrices], "lspci": [devices],
    "cmdline": {...} or None, "limits": {...}, "xids": [...], "kernel_log": bool, "nccl": summary or None,
    "meminfo": {...}, "q_gpus": [...]}``. ``kinds`` is empty when none was found."""
    text = text or ""
    out = {"kinds": [], "topo_p2p": parse_topo_p2p_matrices(text), "lspci": parse_lspci(text),
           "cmdline": parse_cmdline(text), "limits": parse_proc_limits(text), "xids": parse_xid(text),
           "kernel_log": False, "nccl": None, "meminfo": parse_meminfo(text), "q_gpus": parse_q_gpus(text)}
    if out["topo_p2p"]:
        out["kinds"].append("topo-p2p")
    if out["lspci"]:
        out["kinds"].append("lspci")
    if out["cmdline"]:
        out["kinds"].append("cmdline")
    if out["limits"]:
        out["kinds"].append("limits")
    if out["xids"] or re.search(r"^\s*(?:\[\s*\d+\.\d+\]|\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:)", text, re.M):
        out["kernel_log"] = True
        out["kinds"].append("kernel-log")
    if "NCCL INFO" in text or "NCCL WARN" in text:
        summary = nccl_log.read(text)
        if summary["found"] or summary["refusals"] or summary["nccl_version"]:
            out["nccl"] = summary
            out["kinds"].append("nccl")
    if out["meminfo"].get("MemTotal"):
        out["kinds"].append("meminfo")
    return out


# What decides each check, named in the verdict of a check a paste could not decide.
NEEDS = {
    "driver_cuda": "the serving stack's CUDA (the host's provenance record, or a host run of moesweep facts -i)",
    "p2p": "`nvidia-smi topo -p2p r`",
    "acs_iommu": "`lspci -vvv` (the bridges' ACSCtl) and `cat /proc/cmdline`",
    "pcie_link": "`nvidia-smi -q` (GPU Link Info) or `lspci -vvv` (LnkCap / LnkSta)",
    "numa": "the sglang unit's allowed CPUs (a host run)",
    "shm": "`df -h /dev/shm`, read on the host",
    "limits": "`cat /proc/PID/limits` of the server",
    "power_cap": "`nvidia-smi -q` (power readings)",
    "persistence": "`nvidia-smi -q` (Persistence Mode)",
    "gpu_errors": "`nvidia-smi -q` (ECC, retired pages, remapped rows) and the kernel log (`dmesg | grep -i xid`)",
    "disk": "the free space of the model's disk (a host run)",
    "ram": "`cat /proc/meminfo`",
    "nccl_transport": "NCCL's INFO lines (NCCL_DEBUG=INFO) of a run over the GPUs",
}


def evaluate_pasted(readings, facts=None):
    """The host checks on pasted outputs: ``readings`` from ``read_pasted`` (one per file), ``facts`` the merged
    nvidia-smi facts (``nvidia_smi.merge_saved_outputs``: GPU count, virtualization). Returns ``(checks,
    undecided)``: the checks the pastes decide, with the verdicts, evidence and fixes a host run gives (the same
    check functions), and [{"name", "needs"}] for each check no paste decides."""
    facts = facts or {}
    gpus = [g for r in readings for g in r.get("q_gpus") or []]
    matrices = [m for r in readings for m in r.get("topo_p2p") or []]
    lspci = [d for r in readings for d in r.get("lspci") or []]
    cmdline = next((r["cmdline"] for r in readings if r.get("cmdline")), None)
    limits = next((r["limits"] for r in readings if r.get("limits")), None)
    xids = [x for r in readings for x in r.get("xids") or []]
    kernel_log = any(r.get("kernel_log") for r in readings)
    nccl = next((r["nccl"] for r in readings if (r.get("nccl") or {}).get("found")), None)
    meminfo = next((r["meminfo"] for r in readings if r.get("meminfo", {}).get("MemTotal")), None)
    # the most GPUs any paste shows (nvidia-smi's own outputs, -q's blocks, a P2P matrix's rows)
    count = max([facts.get("gpu_count") or 0, len(gpus)] + [len(m["matrix"]) for m in matrices]) or None
    virtualized = facts.get("virtualization") in ("passthrough", "vgpu") or any(
        (g.get("virtualization_mode") or "").lower() in ("pass-through", "vgpu") for g in gpus)
    checks = []
    if matrices:
        chosen = next((m for k in ("r", "rw", None) for m in matrices if m["kind"] == k), matrices[0])
        c = check_p2p(chosen["matrix"], count)
        if chosen["kind"] not in (None, "r"):
            c["evidence"] = c["evidence"].replace("topo -p2p r", "topo -p2p %s" % chosen["kind"], 1)
        checks.append(c)
    partial = []
    acs = [d for d in lspci if d["acs_ctl"]]
    if acs or cmdline:
        mode, args = iommu_mode(cmdline["line"] if cmdline else "", None)
        regs = [{"device": d["device"], "name": d["name"], "redirect": d["redirect"], "line": "ACSCtl: " + d["acs_ctl"]}
                for d in acs]
        c = check_acs_iommu(regs, True, mode, args, count, virtualized)
        if not acs:
            # what the command line says, not the host run's "lspci is not installed"
            c = check_acs_iommu(regs, True, mode, args, count, virtualized)
            c["evidence"] = c["evidence"].replace("no PCIe function redirects peer traffic (0 ACS registers read)",
                                                  "ACS not read (no ACSCtl line pasted)")
            partial.append({"name": "acs_iommu", "needs": "`lspci -vvv` (the bridges' ACSCtl): the ACS half"})
        if not cmdline:
            c["evidence"] = c["evidence"].replace("IOMMU unknown", "IOMMU mode not read (no kernel command line "
                                                  "pasted)")
            partial.append({"name": "acs_iommu", "needs": "`cat /proc/cmdline`: the IOMMU half"})
        if cmdline:
            source = "/proc/cmdline" if cmdline["source"] == "proc" else "grub"
            c["evidence"] += " [%s: %s]" % (source, " ".join(args) or "no IOMMU argument")
        checks.append(c)
    links = [g for g in gpus if g.get("pcie_width_current") or g.get("pcie_gen_current")] or lspci_links(lspci)
    if links:
        checks.append(check_pcie_links(links))
    if limits:
        checks.append(check_limits(dict(limits), "the pasted /proc/PID/limits", count))
    power = [g for g in gpus if g.get("power_limit_w") is not None or g.get("power_default_w") is not None]
    if power:
        checks.append(check_power(power))
    persist = [g for g in gpus if g.get("persistence_mode") is not None]
    if persist:
        checks.append(check_persistence(persist))
    if gpus or kernel_log:
        c = check_errors(gpus, xids, kernel_log)
        if not gpus:
            c["evidence"] += " (no nvidia-smi -q pasted: ECC, retired pages and remapped rows not read)"
        c["evidence"] = c["evidence"].replace("(kernel log not readable: Xids not checked)",
                                              "(no kernel log pasted: Xids not checked)")
        checks.append(c)
    if meminfo:
        checks.append(check_ram(meminfo.get("MemTotal"), None))
    if nccl:
        checks.append(check_nccl_transport(nccl))
    decided = set(c["name"] for c in checks)
    undecided = [{"name": name, "needs": needs} for name, needs in NEEDS.items() if name not in decided]
    return checks, partial + undecided


def summarise(checks):
    """{"fail": [...], "warn": [...]}: one line per check that is not ok, "name: evidence. Fix: fix"."""
    out = {"fail": [], "warn": []}
    for c in checks or []:
        if c.get("verdict") in out:
            line = "host check %s: %s" % (c["name"], c["evidence"])
            if c.get("fix"):
                line += ". Fix: " + c["fix"]
            out[c["verdict"]].append(line)
    return out
