# Copyright: moesweep developers
# Apache License 2.0
"""Pure parsers for the text that ``nvidia-smi``, ``nvcc`` and a few ``/proc`` and ``/sys`` files print.

No I/O here: every function takes the text a command printed and returns plain data, so the
facts module, the preflight and the controller CLI share one reading of the output, and unit
tests feed it recorded real output (``tests/fixtures/nvidia-smi/``).

Written from real recorded output only (H200 x2, public RTX PRO 6000 captures, driver failures),
never from the simulator's code.
"""

import re

# The ``--query-gpu`` fields gpu_facts asks for, in order. Every one of them is printed by
# ``nvidia-smi --help-query-gpu`` on R550+ drivers; the recorded H200 output carries all of them.
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "memory.used",
    "driver_version",
    "power.limit",
    "power.max_limit",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "mig.mode.current",
)

QUERY_APPS_FIELDS = ("gpu_bus_id", "pid", "process_name", "used_memory")

# Lines nvidia-smi prints instead of data when the driver cannot be used. The first one is the
# classic "kernel module not loaded" text; NVML version mismatch follows a driver upgrade without
# a reboot; "No devices were found" is a loaded driver with no GPU bound to it.
DRIVER_FAILURE_PATTERNS = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
    "NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver",
    "Failed to initialize NVML",
    "No devices were found",
    "Unable to determine the device handle",
)

# nvidia-smi topo -m legend: the PCIe levels from closest to farthest.
PCIE_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
INTERCONNECT_VALUES = (
    "nvlink",
    "pcie-pix",
    "pcie-pxb",
    "pcie-phb",
    "pcie-node",
    "pcie-sys",
    "mixed",
    "single",
    "unknown",
)

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_NA_VALUES = ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]", "Not Found")
_UNIT_RE = re.compile(r"^(?P<num>-?\d+(?:\.\d+)?)\s*(?P<unit>MiB|GiB|KiB|W|%|MHz|C)?$")
_HEADER_UNIT_RE = re.compile(r"^(?P<name>.+?)\s*\[(?P<unit>[^\]]+)\]$")


def strip_ansi(text):
    """Remove ANSI escape sequences (``topo -m`` underlines its header row with ``ESC[4m``)."""
    return _ANSI_RE.sub("", text or "")


def is_na(value):
    return value is None or str(value).strip() in _NA_VALUES


def to_number(value):
    """``'143771 MiB'`` -> 143771, ``'700.00 W'`` -> 700.0, ``'5'`` -> 5, ``'[N/A]'`` -> None.

    Anything else that is not a number is returned stripped, unchanged."""
    if is_na(value):
        return None
    text = str(value).strip()
    match = _UNIT_RE.match(text)
    if not match:
        return text
    num = match.group("num")
    if "." in num:
        return float(num)
    return int(num)


def detect_driver_failure(stdout, stderr=""):
    """Return the nvidia-smi failure text (first matching line, stripped) or None."""
    for stream in (stdout or "", stderr or ""):
        for line in stream.splitlines():
            for pattern in DRIVER_FAILURE_PATTERNS:
                if pattern in line:
                    return line.strip()
    return None


def _split_csv_line(line):
    return [cell.strip() for cell in line.split(",")]


def parse_csv(text, fields=None):
    """Parse ``--format=csv`` output (with or without ``noheader`` / ``nounits``).

    With a header, the header names the columns (``memory.total [MiB]`` -> ``memory.total``).
    Without one, ``fields`` must name them. Values keep their text; use ``to_number``.
    Returns a list of dicts. Stops at the first blank line or a second header.
    """
    rows = []
    lines = [ln for ln in strip_ansi(text).splitlines()]
    names = list(fields) if fields else None
    for line in lines:
        if not line.strip():
            if rows or names:
                if rows:
                    break
                continue
            continue
        cells = _split_csv_line(line)
        if names is None:
            names = []
            for cell in cells:
                m = _HEADER_UNIT_RE.match(cell)
                names.append(m.group("name") if m else cell)
            continue
        if fields is None and rows and _looks_like_header(cells):
            break
        if len(cells) < len(names):
            cells = cells + [""] * (len(names) - len(cells))
        elif len(cells) > len(names):
            # A process name may contain commas: fold the extra cells back into that column.
            at = names.index("process_name") if "process_name" in names else len(names) - 1
            extra = len(cells) - len(names)
            cells = cells[:at] + [", ".join(cells[at : at + extra + 1])] + cells[at + extra + 1 :]
        rows.append(dict(zip(names, cells)))  # noqa: B905 (targets run Python 3.9)
    return rows


def _looks_like_header(cells):
    return all(not re.match(r"^-?\d", cell) for cell in cells) and any("." in c or "_" in c for c in cells)


def _bool_mode(value):
    if is_na(value):
        return None
    low = str(value).strip().lower()
    if low in ("enabled", "on"):
        return True
    if low in ("disabled", "off"):
        return False
    return None


def compute_cap_to_sm(compute_cap):
    """``'12.0'`` -> ``'sm120'``, ``'9.0'`` -> ``'sm90'``, ``'10.3'`` -> ``'sm103'``; None if unknown."""
    if is_na(compute_cap):
        return None
    match = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(compute_cap))
    if not match:
        return None
    return f"sm{int(match.group(1))}{int(match.group(2))}"


def sm_number(sm):
    """``'sm120'`` -> 120, ``120`` -> 120, ``'12.0'`` -> 120, ``'sm_90a'`` -> 90; None if unknown."""
    if sm is None:
        return None
    if isinstance(sm, int):
        return sm
    text = str(sm).strip().lower()
    if re.match(r"^\d+\.\d+$", text):
        text = compute_cap_to_sm(text)
    match = re.match(r"^(?:sm_?)?(\d+)[af]?$", text)
    return int(match.group(1)) if match else None


def normalise_gpu(row):
    """Turn one ``--query-gpu`` row (dict of header -> text) into typed gpu_facts fields."""
    cap = row.get("compute_cap")
    gpu = {
        "index": to_number(row.get("index")),
        "name": None if is_na(row.get("name")) else row.get("name"),
        "pci_bus_id": None if is_na(row.get("pci.bus_id")) else row.get("pci.bus_id"),
        "compute_cap": None if is_na(cap) else str(cap).strip(),
        "sm": compute_cap_to_sm(cap),
        "memory_total_mib": to_number(row.get("memory.total")),
        "memory_used_mib": to_number(row.get("memory.used")),
        "driver_version": None if is_na(row.get("driver_version")) else row.get("driver_version"),
        "power_limit_w": to_number(row.get("power.limit")),
        "power_max_limit_w": to_number(row.get("power.max_limit")),
        "pcie_gen_current": to_number(row.get("pcie.link.gen.current")),
        "pcie_gen_max": to_number(row.get("pcie.link.gen.max")),
        "pcie_width_current": to_number(row.get("pcie.link.width.current")),
        "pcie_width_max": to_number(row.get("pcie.link.width.max")),
        "persistence_mode": _bool_mode(row.get("persistence_mode")),
        "mig_mode": _bool_mode(row.get("mig.mode.current")),
    }
    return gpu


def parse_query_gpu(text, fields=None):
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`` into typed dicts.

    Pass ``fields`` when the output has no header (``noheader``)."""
    return [normalise_gpu(row) for row in parse_csv(text, fields)]


def parse_compute_apps(text, fields=None):
    """Parse ``--query-compute-apps=...`` CSV. A header with no rows (nothing running) gives []."""
    apps = []
    for row in parse_csv(text, fields):
        memory = row.get("used_gpu_memory", row.get("used_memory"))
        apps.append(
            {
                "gpu_bus_id": row.get("gpu_bus_id"),
                "pid": to_number(row.get("pid")),
                "process_name": row.get("process_name"),
                "used_memory_mib": to_number(memory),
            }
        )
    return apps


def parse_smi_header(text):
    """Read driver and CUDA versions from plain ``nvidia-smi`` or ``nvidia-smi -q`` output.

    The table header reads ``| NVIDIA-SMI 580.159.04  Driver Version: 580.159.04  CUDA Version: 13.0 |``;
    ``-q`` prints ``Driver Version : 580.105.06`` and ``CUDA Version : 13.0`` (or ``Not Found`` on a
    vGPU host, or ``N/A``), which become None."""
    result = {"smi_version": None, "driver_version": None, "cuda_version": None}
    text = strip_ansi(text)
    m = re.search(r"NVIDIA-SMI\s+([0-9][0-9.]*)", text)
    if m:
        result["smi_version"] = m.group(1)
    m = re.search(r"Driver Version\s*:\s*([^\s|]+)", text)
    if m and not is_na(m.group(1)):
        result["driver_version"] = m.group(1)
    m = re.search(r"CUDA Version\s*:\s*([^|\n]+)", text)
    if m:
        value = m.group(1).strip()
        result["cuda_version"] = None if is_na(value) else value
    return result


def parse_nvcc_version(text):
    """``nvcc --version`` -> ``{'release': '12.8', 'version': '12.8.93'}`` (None values if absent)."""
    text = text or ""
    result = {"release": None, "version": None}
    m = re.search(r"release\s+(\d+\.\d+)\s*,\s*V(\d+(?:\.\d+)*)", text)
    if m:
        result["release"] = m.group(1)
        result["version"] = m.group(2)
        return result
    m = re.search(r"release\s+(\d+\.\d+)", text)
    if m:
        result["release"] = m.group(1)
    return result


def classify_link(code):
    """One ``topo -m`` cell -> ``'nvlink'``, ``'pcie-phb'`` ... ; ``'self'`` for X; None if unknown."""
    code = (code or "").strip().upper()
    if code == "X":
        return "self"
    if re.match(r"^NV\d+$", code):
        return "nvlink"
    if code in PCIE_LEVELS:
        return "pcie-" + code.lower()
    return None


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{'devices': [...], 'links': {'GPU0': {'GPU1': 'NV18'}}, 'cpu_affinity': {'GPU0': '0-31'},
    'numa_affinity': {'GPU0': '0'}}``. Works with tab-separated output (as nvidia-smi prints it)
    and with copies where the tabs became spaces."""
    lines = strip_ansi(text).splitlines()
    header = None
    devices = []
    result = {"devices": devices, "links": {}, "cpu_affinity": {}, "numa_affinity": {}}
    for line in lines:
        if header is None:
            tokens = re.findall(r"(?:GPU\d+|NIC\d+|mlx5_\d+)(?=\s|$)", line)
            if tokens and (line[:1].isspace() or "Affinity" in line):
                header = tokens
                devices.extend(tokens)
            continue
        if not line.strip() or line.strip().startswith("Legend"):
            if result["links"]:
                break
            continue
        cells = line.split()
        name = cells[0]
        if not re.match(r"^GPU\d+$", name):
            continue
        codes = cells[1 : 1 + len(header)]
        rest = cells[1 + len(header) :]
        result["links"][name] = dict(zip(header, codes))  # noqa: B905 (targets run Python 3.9)
        if rest:
            result["cpu_affinity"][name] = rest[0]
        if len(rest) > 1:
            result["numa_affinity"][name] = None if is_na(rest[1]) else rest[1]
    return result


def summarise_interconnect(topo):
    """Summarise GPU-to-GPU links of a parsed ``topo -m``.

    ``nvlink`` when every GPU pair is NV#; ``pcie-<level>`` when no pair is NVLink, naming the
    farthest PCIe level seen (NCCL's P2P choice is bounded by the worst pair); ``mixed`` when
    some pairs are NVLink and some PCIe; ``single`` for one GPU; ``unknown`` if nothing parsed.
    Returns ``(summary, counts)`` where counts maps link class -> number of unordered GPU pairs."""
    gpus = [d for d in topo.get("links", {}) if d.startswith("GPU")]
    if not gpus:
        return "unknown", {}
    if len(gpus) == 1:
        return "single", {}
    counts = {}
    seen = set()
    for a in gpus:
        for b, code in topo["links"][a].items():
            if not b.startswith("GPU") or a == b:
                continue
            pair = tuple(sorted((a, b)))
            if pair in seen:
                continue
            seen.add(pair)
            cls = classify_link(code) or "unknown"
            counts[cls] = counts.get(cls, 0) + 1
    if not counts:
        return "unknown", counts
    classes = set(counts)
    if classes == {"nvlink"}:
        return "nvlink", counts
    if "nvlink" in classes:
        return "mixed", counts
    worst = None
    for level in PCIE_LEVELS:
        if "pcie-" + level.lower() in classes:
            worst = "pcie-" + level.lower()
    return (worst or "unknown"), counts


def parse_cpu_list(text):
    """``'0-3,8,10-11'`` -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist / nodelist format)."""
    out = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def cpuinfo_has_hypervisor(cpuinfo_text):
    """True when a ``flags`` line of ``/proc/cpuinfo`` carries the ``hypervisor`` bit."""
    for line in (cpuinfo_text or "").splitlines():
        if line.startswith("flags") and " hypervisor" in (" " + line.split(":", 1)[-1]).replace("\t", " "):
            return True
    return False


_DMI_HINTS = (
    ("firecracker", "firecracker"),
    ("kvm", "kvm"),
    ("qemu", "qemu"),
    ("vmware", "vmware"),
    ("virtualbox", "oracle"),
    ("microsoft corporation", "microsoft"),
    ("xen", "xen"),
    ("amazon ec2", "amazon"),
    ("google compute engine", "google"),
)


def classify_virtualization(detect_virt=None, container_hint=None, dmi_text=None, cpuinfo_text=None):
    """Decide the virtualization fact from whatever evidence the host gave.

    ``detect_virt``: stdout of ``systemd-detect-virt`` (``none``, ``kvm``, ``systemd-nspawn`` ...) or
    None when the tool is absent. ``container_hint``: contents of ``/run/systemd/container`` or the
    ``container=`` value of PID 1's environment. ``dmi_text``: ``/sys/class/dmi/id/sys_vendor`` plus
    ``product_name``. ``cpuinfo_text``: ``/proc/cpuinfo``.

    Returns ``{'type': 'none'|'kvm'|...|'vm'|'container'..., 'kind': 'none'|'vm'|'container'|'unknown',
    'source': <which evidence decided>, 'hypervisor': bool|None}``. ``hypervisor`` is the CPU's own
    word (the ``hypervisor`` flag) whatever decided ``kind``: a container inside a VM shows both layers
    (seen on a Firecracker GPU VM whose image carries ``/run/systemd/container`` = docker)."""
    result = _classify_virtualization(detect_virt, container_hint, dmi_text, cpuinfo_text)
    result["hypervisor"] = cpuinfo_has_hypervisor(cpuinfo_text) if cpuinfo_text is not None else None
    return result


def _classify_virtualization(detect_virt, container_hint, dmi_text, cpuinfo_text):
    if detect_virt is not None and detect_virt.strip():
        value = detect_virt.strip().splitlines()[0].strip()
        containers = (
            "systemd-nspawn",
            "docker",
            "podman",
            "lxc",
            "lxc-libvirt",
            "openvz",
            "rkt",
            "wsl",
            "proot",
            "pouch",
        )
        kind = "none" if value == "none" else ("container" if value in containers else "vm")
        return {"type": value, "kind": kind, "source": "systemd-detect-virt"}
    if container_hint and container_hint.strip():
        return {"type": container_hint.strip(), "kind": "container", "source": "container-hint"}
    dmi = (dmi_text or "").lower()
    for needle, name in _DMI_HINTS:
        if needle in dmi:
            return {"type": name, "kind": "vm", "source": "dmi"}
    if cpuinfo_text is not None:
        if cpuinfo_has_hypervisor(cpuinfo_text):
            return {"type": "vm", "kind": "vm", "source": "cpuinfo"}
        return {"type": "none", "kind": "none", "source": "cpuinfo"}
    return {"type": "unknown", "kind": "unknown", "source": None}


def summarise_models(gpus):
    """Distinct GPU model names in index order and whether there is more than one (never guessed)."""
    models = []
    for gpu in gpus:
        name = gpu.get("name")
        if name and name not in models:
            models.append(name)
    return models, len(models) > 1


def summarise_sm(gpus):
    """The one SM string shared by all GPUs, or None when they differ or are unknown."""
    sms = set(gpu.get("sm") for gpu in gpus)
    if len(sms) == 1:
        return sms.pop()
    return None
