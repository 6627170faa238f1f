# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Pure parsers for the text that ``nvidia-smi``, ``nvcc`` and a few ``/proc`` and ``/sys`` files print.

No I/O here: every function takes the text a command printed and returns plain data, so the
facts module, the preflight and the controller CLI share one reading of the output, and unit
tests feed it recorded real output (``tests/fixtures/nvidia-smi/``).

Written from real recorded output only (H200 x2, public RTX PRO 6000 captures, driver failures),
never from the simulator's code.
"""

import json
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


# A reply that quotes the output: Markdown / e-mail quote markers at the start of each line ("> ", ">> ").
# nvidia-smi never starts a line with ">", so they are taken off; what follows keeps its indentation.
_QUOTE_PREFIX_RE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+", re.M)


# A table line inside quotes, as a list of lines prints it ('|   0  NVIDIA H100 ... |',) or a shell echo.
_QUOTED_LINE_RE = re.compile(r"""^[ \t]*(?P<q>['"])(?P<line>[|+].*?)(?P=q),?[ \t]*$""", re.M)
# Docker's json-file log driver: one {"log":"<line>\n","stream":"stdout","time":"..."} object per line.
_DOCKER_JSON_RE = re.compile(r'^[ \t]*\{"log":"(?P<line>(?:[^"\\]|\\.)*?)(?:\\n)?","stream":.*$', re.M)


def _json_unescape(text):
    try:
        return json.loads('"%s"' % text)
    except ValueError:
        return text


def unquote(text):
    """Take quoting off the lines: quote markers (``> | NVIDIA-SMI 535 ...``), a table line inside quotes, a
    Docker JSON log record around the line."""
    text = _QUOTE_PREFIX_RE.sub("", text or "")
    text = _DOCKER_JSON_RE.sub(lambda m: _json_unescape(m.group("line")), text)
    return _QUOTED_LINE_RE.sub(lambda m: m.group("line"), text)


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
    """Return the nvidia-smi failure text (the first matching line from where nvidia-smi's message begins, so a
    wrapper's prefix such as a CI task's ``[task ...] [nvidia-smi(stdout)]`` is left out) or None."""
    for stream in (stdout or "", stderr or ""):
        for line in stream.splitlines():
            for pattern in DRIVER_FAILURE_PATTERNS:
                if pattern in line:
                    return line[line.index(pattern):].strip()
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


_VERSION_VALUE_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)+)(?:\s|$|\[)")
_Q_VERSION_RE = re.compile(r"^[ \t]*(Driver Version|KMD Version|CUDA Version|CUDA UMD Version)[ \t]*:[ \t]*(.*)$", re.M)


def version_value(value):
    """``'610.47 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]'`` -> ``'610.47'``.

    R610 drivers print the deprecated ``Driver Version`` / ``CUDA Version`` rows of ``-q`` with that
    note appended; ``N/A``, ``Not Found`` and anything that does not start with a version give None."""
    if is_na(value):
        return None
    match = _VERSION_VALUE_RE.match(str(value))
    return match.group(1) if match else None


def parse_smi_header(text):
    """Read driver and CUDA versions from plain ``nvidia-smi`` or ``nvidia-smi -q`` output.

    The table header reads ``| NVIDIA-SMI 580.159.04  Driver Version: 580.159.04  CUDA Version: 13.0 |``;
    from R610 it reads ``| NVIDIA-SMI 610.43.02  KMD Version: 610.43.02  CUDA UMD Version: 13.3 |``.
    ``-q`` prints ``Driver Version : 580.105.06`` and ``CUDA Version : 13.0`` (or ``Not Found`` on a
    vGPU host, or ``N/A``, which become None); R610's ``-q`` adds ``KMD Version`` and ``CUDA UMD Version``
    rows and marks the old two deprecated, and the new rows are preferred. Only nvidia-smi's own labels
    count: a wrapper's ``CUDA Driver Version: ...`` line (sglang's check_env) is not read."""
    result = {"smi_version": None, "driver_version": None, "cuda_version": None}
    text = strip_ansi(text)
    for line in text.splitlines():
        if "NVIDIA-SMI" not in line:
            continue
        m = re.search(r"NVIDIA-SMI\s+([0-9][0-9.]*)", line)
        if not m:
            continue
        result["smi_version"] = result["smi_version"] or m.group(1)
        m = re.search(r"(?:Driver|KMD) Version:\s*([^\s|]+)", line)
        if m and result["driver_version"] is None:
            result["driver_version"] = version_value(m.group(1))
        m = re.search(r"CUDA (?:UMD )?Version:\s*([^|]*?)\s*(?:\||$)", line)
        if m and result["cuda_version"] is None:
            result["cuda_version"] = version_value(m.group(1))
        break
    if result["driver_version"] is None or result["cuda_version"] is None:
        rows = {}
        for label, value in _Q_VERSION_RE.findall(text):
            rows.setdefault(label, version_value(value))
        if result["driver_version"] is None:
            result["driver_version"] = rows.get("KMD Version") or rows.get("Driver Version")
        if result["cuda_version"] is None:
            result["cuda_version"] = rows.get("CUDA UMD Version") or rows.get("CUDA Version")
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
    """One ``topo -m`` cell -> ``'nvlink'``, ``'pcie-phb'`` ... ; ``'self'`` for X; None if unknown.

    ``SOC`` is the name drivers before R384 printed for what is now ``SYS``."""
    code = (code or "").strip().upper()
    if code == "X":
        return "self"
    if re.match(r"^NV\d+$", code):
        return "nvlink"
    if code == "SOC":
        return "pcie-sys"
    if code in PCIE_LEVELS:
        return "pcie-" + code.lower()
    return None


# One link cell of ``topo -m`` / ``topo -mp`` (its legend: X, SYS, NODE, PHB, PXB, PIX, NV#; SOC before R384).
_LINK_CODE = r"(?:X|NV\d+|SYS|NODE|PHB|PXB|PIX|SOC)"
_LINK_CODES_RE = re.compile(r"^(?:%s)+$" % _LINK_CODE)
# Before R470 a NIC's column and row carry its RDMA device name instead of NICn (``mlx4_0``, ``mlx5_10``,
# ``hfi1_0``, ``qib0``, ``bnxt_re0``; https://github.com/kubernetes/kubernetes/issues/53497 shows ``mlx4_0``).
_NIC_NAME = r"NIC\d+|(?:mlx\d+|hfi\d+|qib|bnxt_re|irdma|efa|rocep\w*?|ib)_?\d+"
_DEVICE_NAME_RE = re.compile(r"(GPU\d+|%s)" % _NIC_NAME)
_ROW_NAME_RE = re.compile(r"^(GPU\d+|%s)$" % _NIC_NAME)


def _split_link_cells(token):
    """``'NODENODE'`` -> ``['NODE', 'NODE']``: cells whose separating tab was lost in a paste."""
    if _LINK_CODES_RE.match(token):
        return re.findall(_LINK_CODE, token)
    return None


def _topo_row(line):
    """``(name, codes, rest)`` of one matrix row, or None. Cells are split on tabs when the line has
    them (nvidia-smi's own separator: an empty NUMA cell stays a cell), else on runs of spaces."""
    stripped = line.strip()
    if not stripped:
        return None
    cells = [c.strip() for c in stripped.split("\t")] if "\t" in stripped else stripped.split()
    if not cells or not _ROW_NAME_RE.match(cells[0]):
        return None
    codes, rest = [], []
    for cell in cells[1:]:
        split = _split_link_cells(cell) if not rest else None
        if split:
            codes.extend(split)
        else:
            rest.append(cell)
    if not codes:
        return None  # a header line ("GPU0  GPU1 ...") or prose
    return cells[0], codes, rest


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``: ``{'devices': [...], 'links': {'GPU0': {'GPU1': 'NV18'}},
    'cpu_affinity': {'GPU0': '0-31'}, 'numa_affinity': {'GPU0': '0'}}`` (gpu_facts' ``topology`` fact).

    See ``parse_topo_matrix_details`` for what it tolerates."""
    details = parse_topo_matrix_details(text)
    return {key: details[key] for key in ("devices", "links", "cpu_affinity", "numa_affinity")}


def parse_topo_matrix_details(text):
    """Parse ``nvidia-smi topo -m`` (or ``topo -mp``), saying how it was read.

    Returns ``parse_topo_matrix``'s keys plus ``gpu_numa_id`` (per GPU), ``header`` (False when the
    columns had to be inferred) and ``warnings`` (rows left out).

    Tolerates what pastes do to it: tabs turned into spaces, the header row starting at column 0 or
    missing altogether (the columns are then GPU0..GPUn-1 followed by NIC0.., as nvidia-smi orders
    them), neighbouring cells glued together when a tab was lost (``NIC8NIC9``, ``NODENODE``), and a
    shell prompt, a wrapper's own lines (vLLM's collect_env, sglang's check_env) or the legend around
    the matrix. Each GPU row is checked: its own column must read ``X``; a row that does not is
    reported in ``warnings`` and left out rather than read with shifted columns."""
    lines = strip_ansi(text).splitlines()
    header = None
    devices = []
    rows = []
    result = {
        "devices": devices,
        "links": {},
        "cpu_affinity": {},
        "numa_affinity": {},
        "gpu_numa_id": {},
        "header": False,
        "warnings": [],
    }
    for line in lines:
        if line.strip().startswith("Legend"):
            if rows:
                break
            continue
        row = _topo_row(line)
        if row:
            rows.append(row)
            continue
        if header is None and not rows:
            tokens = _DEVICE_NAME_RE.findall(line)
            first = line.strip().split()[:1]
            if tokens and first and (_DEVICE_NAME_RE.match(first[0]) or "Affinity" in line):
                if tokens[0] == "GPU0" or not tokens[0].startswith("GPU") or "Affinity" in line:
                    header = tokens
        elif rows and not line.strip():
            # a blank line after the matrix ends it (the legend follows)
            break
    if not rows:
        return result
    gpu_rows = [r for r in rows if r[0].startswith("GPU")]
    if header:
        result["header"] = True
        columns = list(header)
    else:
        n_gpu = max([int(r[0][3:]) + 1 for r in gpu_rows] or [0])
        width = max(len(r[1]) for r in rows)
        # A NIC row places its X after all the GPU columns: NICk's X at p means p - k GPU columns.
        nic_rows = [r for r in rows if r[0].startswith("NIC") and "X" in r[1]]
        # An NV# cell links two GPUs (a NIC's cells are PIX / PXB / PHB / NODE / SYS): the columns up to the last one
        # are GPUs, whether or not the paste kept their rows (https://github.com/vllm-project/vllm/issues/16336 shows
        # GPU0-GPU5 of 8 B200 without the header: GPU6 and GPU7 are columns 7 and 8, not NICs).
        nvlink_columns = [i for r in gpu_rows for i, code in enumerate(r[1]) if code.startswith("NV")]
        if nvlink_columns:
            n_gpu = max(n_gpu, max(nvlink_columns) + 1)
        if nic_rows:
            n_gpu = nic_rows[0][1].index("X") - int(nic_rows[0][0][3:])
        elif width > n_gpu:
            result["warnings"].append(
                "no header row and no NIC row: the %d columns after GPU%d are taken for NICs "
                "(GPUs whose rows the paste left out would be among them)" % (width - n_gpu, n_gpu - 1)
            )
        columns = ["GPU%d" % i for i in range(n_gpu)] + ["NIC%d" % i for i in range(width - n_gpu)]
    devices.extend(columns)
    for name, codes, rest in rows:
        if len(codes) != len(columns):
            result["warnings"].append(
                "%s has %d link cells for %d columns: row left out" % (name, len(codes), len(columns))
            )
            continue
        if name in columns and codes[columns.index(name)] != "X":
            result["warnings"].append("%s: its own column does not read X (shifted cells): row left out" % name)
            continue
        result["links"][name] = dict(zip(columns, codes))  # noqa: B905 (targets run Python 3.9)
        if not name.startswith("GPU"):
            continue
        if rest:
            result["cpu_affinity"][name] = None if is_na(rest[0]) else rest[0]
        numa = rest[1:]
        if numa:
            result["numa_affinity"][name] = None if is_na(numa[0]) else numa[0]
        tail = [c for c in numa[1:] if c != ""]
        if tail:
            result["gpu_numa_id"][name] = None if is_na(tail[-1]) else tail[-1]
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


# ---- saved output of any kind: what an operator pastes ---------------------------------------------

_BUS_ID_RE = re.compile(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b")
_TABLE_GPU_RE = re.compile(r"^\s*(\d+)\s+(\S.*?)\s+(On|Off|WDDM|TCC|N/A)\s*$")
_TABLE_POWER_RE = re.compile(r"(?:\d+(?:\.\d+)?W|N/A)\s*/\s*(\d+(?:\.\d+)?)W")
_TABLE_MEMORY_RE = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
_MIG_DEVICE_ROW_RE = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*(\d+)MiB\s*/\s*(\d+)MiB")


def _table_cells(line):
    # a Markdown code block indents the table (4 spaces); nvidia-smi itself starts every row at column 0
    line = line.strip()
    if not line.startswith("|") or line.count("|") < 4:
        return None
    return [cell.strip() for cell in line.strip("|").split("|")]


def _mig_flag(value):
    """The table's ``MIG M.`` cell and ``-q``'s ``MIG Mode / Current``: Enabled/Disabled, else None."""
    low = (value or "").strip().lower()
    if low == "enabled":
        return True
    if low == "disabled":
        return False
    return None


def parse_smi_table(text):
    """Parse the GPU rows of plain ``nvidia-smi`` (the default table), also from an excerpt.

    Each GPU is two or three table lines: ``|   0  NVIDIA B200   On  |   00000000:63:00.0 Off |    0 |``,
    ``| N/A   26C    P0    139W / 1000W |   0MiB / 183359MiB |   0%   Default |`` and (R450+) a line whose
    last cell is the MIG mode. Names nvidia-smi cut to fit the column end in ``...`` and are reported
    as truncated. The ``MIG devices:`` box (one row per MIG device) is counted.

    Returns ``{'gpus': [{index, name, name_truncated, pci_bus_id, persistence_mode, power_limit_w,
    memory_total_mib, memory_used_mib, mig_mode}], 'mig_devices': [{gpu, gpu_instance, compute_instance,
    device, memory_total_mib}]}``."""
    lines = strip_ansi(text).splitlines()
    gpus = []
    mig_devices = []
    in_mig_box = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if "MIG devices:" in line:
            in_mig_box = True
        elif "Processes:" in line:
            in_mig_box = False
        if in_mig_box:
            m = _MIG_DEVICE_ROW_RE.match(line.strip())
            if m:
                mig_devices.append(
                    {
                        "gpu": int(m.group(1)),
                        "gpu_instance": int(m.group(2)),
                        "compute_instance": int(m.group(3)),
                        "device": int(m.group(4)),
                        "memory_total_mib": int(m.group(6)),
                    }
                )
            i += 1
            continue
        cells = _table_cells(line)
        first = _TABLE_GPU_RE.match(cells[0]) if cells else None
        bus = _BUS_ID_RE.search(cells[1]) if first and len(cells) >= 3 else None
        if not bus:
            i += 1
            continue
        name = first.group(2).strip()
        persistence = first.group(3)
        gpu = {
            "index": int(first.group(1)),
            "name": name,
            "name_truncated": name.endswith("..."),
            "pci_bus_id": bus.group(1).upper(),
            "persistence_mode": {"On": True, "Off": False}.get(persistence),
            "power_limit_w": None,
            "memory_total_mib": None,
            "memory_used_mib": None,
            "mig_mode": None,
        }
        second = _table_cells(lines[i + 1]) if i + 1 < len(lines) else None
        if second and len(second) >= 3:
            m = _TABLE_POWER_RE.search(second[0])
            if m:
                gpu["power_limit_w"] = to_number(m.group(1))
            m = _TABLE_MEMORY_RE.search(second[1])
            if m:
                gpu["memory_used_mib"], gpu["memory_total_mib"] = int(m.group(1)), int(m.group(2))
            third = _table_cells(lines[i + 2]) if i + 2 < len(lines) else None
            if third and len(third) >= 3 and not third[0] and not third[1]:
                gpu["mig_mode"] = _mig_flag(third[-1])
                i += 1
            i += 1
        gpus.append(gpu)
        i += 1
    return {"gpus": gpus, "mig_devices": mig_devices}


_LIST_GPU_RE = re.compile(r"^\s*GPU (\d+): (.+?) \(UUID: GPU-[^)]*\)\s*$")
_LIST_MIG_RE = re.compile(r"^\s+MIG \S+\s+Device\s+\d+: \(UUID: MIG-[^)]*\)\s*$")


def parse_smi_list(text):
    """``nvidia-smi -L``: ``GPU 0: NVIDIA H200 (UUID: GPU-...)`` lines (MIG devices indented beneath).

    The ``(UUID: ...)`` part is required, so a wrapper's ``GPU 0: <name>`` list (torch's, in vLLM's
    collect_env) is not taken for it. Returns ``{'gpus': [{index, name[, mig_mode]}], 'mig_devices': n}``: a GPU
    with MIG devices beneath is in MIG mode (they exist only then); -L does not show the mode of the others."""
    gpus = []
    mig = 0
    for line in strip_ansi(text).splitlines():
        m = _LIST_GPU_RE.match(line)
        if m:
            gpus.append({"index": int(m.group(1)), "name": m.group(2).strip()})
        elif _LIST_MIG_RE.match(line):
            mig += 1
            if gpus:
                gpus[-1]["mig_mode"] = True
    return {"gpus": gpus, "mig_devices": mig}


_Q_GPU_RE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_Q_KEY_RE = re.compile(r"^(\s*)(\S.*?)\s+:(?:\s(.*))?$")

# GPU virtualization modes as nvidia-smi names them (-q "Virtualization Mode", -q -x
# <virtualization_mode>; NVML's nvmlGpuVirtualizationMode_t): None, Pass-Through, VGPU, Host VGPU, Host VSGA.
_VIRT_MODES = {
    "none": "none",
    "pass-through": "passthrough",
    "vgpu": "vgpu",
    "host vgpu": "vgpu-host",
    "host vsga": "vsga-host",
}


def _virt_mode(value):
    if is_na(value):
        return None
    return _VIRT_MODES.get(str(value).strip().lower())


def parse_smi_q(text):
    """Parse ``nvidia-smi -q`` (also ``-q -d ...`` and excerpts) into per-GPU facts.

    Returns ``{'attached_gpus', 'vgpu_host' (the host's "vGPU Driver Capability" section), 'gpus':
    [{pci_bus_id, name, architecture, mig_mode, virtualization_mode, host_vgpu_mode, memory_total_mib,
    power_limit_w}]}``; the versions come from ``parse_smi_header``. Lines a wrapper slips in (a
    ``[HAMI-core Msg(...)]: ...`` line between the rows) are skipped."""
    result = {"attached_gpus": None, "vgpu_host": False, "gpus": []}
    current = None
    stack = []
    # ``nvidia-smi -q | grep -E "Product Name|..."`` keeps a GPU's rows but not its "GPU 00000000:..." line
    # (https://github.com/NVIDIA/mig-parted/issues/120): then each "Product Name" at the first indent it is seen at
    # opens a GPU of unknown bus id. Only where no GPU line was seen at all.
    headed = any(_Q_GPU_RE.match(raw.rstrip()) for raw in strip_ansi(text).splitlines())
    product_indent = None
    for raw in strip_ansi(text).splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _Q_GPU_RE.match(line)
        if m:
            current = {"pci_bus_id": m.group(1).upper(), "_rows": {}}
            result["gpus"].append(current)
            stack = []
            continue
        m = _Q_KEY_RE.match(line)
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m and not headed and indent > 0 and m.group(2).strip() == "Product Name" and not any(i for i, _n in stack):
            if product_indent is None:
                product_indent = indent
            if indent == product_indent:
                current = {"pci_bus_id": None, "_rows": {}}
                result["gpus"].append(current)
        if m:
            key = m.group(2).strip()
            value = (m.group(3) or "").strip()
            if indent == 0:
                if key == "Attached GPUs":
                    result["attached_gpus"] = to_number(value) if isinstance(to_number(value), int) else None
                continue
            if current is not None:
                path = "/".join([name for i, name in stack if i > 0] + [key]).lower()
                current["_rows"].setdefault(path, value)
            continue
        if indent == 0 and line.strip().startswith("vGPU Driver Capability"):
            result["vgpu_host"] = True
        stack.append((indent, line.strip()))
    for gpu in result["gpus"]:
        rows = gpu.pop("_rows")
        gpu["name"] = None if is_na(rows.get("product name")) else rows.get("product name")
        gpu["architecture"] = None if is_na(rows.get("product architecture")) else rows.get("product architecture")
        gpu["mig_mode"] = _mig_flag(rows.get("mig mode/current"))
        gpu["virtualization_mode"] = _virt_mode(rows.get("gpu virtualization mode/virtualization mode"))
        gpu["host_vgpu_mode"] = (
            None
            if is_na(rows.get("gpu virtualization mode/host vgpu mode"))
            else (rows.get("gpu virtualization mode/host vgpu mode"))
        )
        total = to_number(rows.get("fb memory usage/total"))
        gpu["memory_total_mib"] = total if isinstance(total, int) else None
        readings = {key: rows.get("gpu power readings/" + key) or rows.get("power readings/" + key)
                    for key in _POWER_LIMIT_KEYS}
        # a driver that nests the limits in a block of their own under the readings (".../Power Limits/Current")
        for block in ("gpu power readings/power limits/", "gpu power readings/power limit/",
                      "power readings/power limits/"):
            for word in ("enforced", "current"):
                if readings.get(word + " power limit") is None and rows.get(block + word) is not None:
                    readings[word + " power limit"] = rows[block + word]
        limit = to_number(_power_limit_in_force(readings))
        gpu["power_limit_w"] = limit if isinstance(limit, (int, float)) else None
    return result


_XML_ESCAPED_RE = re.compile(r"(?:&lt;|<)nvidia_smi_log(?:&gt;|[\s>])")


_POWER_LIMIT_KEYS = ("enforced power limit", "current power limit", "power limit")


def _power_limit_in_force(readings):
    """The power limit in force from ``-q`` / ``-q -x`` power readings (``readings``: ``_POWER_LIMIT_KEYS``, lower
    case, spaces for the XML's underscores, -> the value read): the enforced limit (older drivers' "Enforced Power
    Limit", the least of every limit set), else the current one (R535+'s "Current Power Limit"), else the plain
    "Power Limit" of older drivers. Never "Max Power Limit": that is how far the limit may be raised (a card capped
    at 500 W of 700 W reads 700 there)."""
    for key in _POWER_LIMIT_KEYS:
        value = readings.get(key)
        if value is not None and not is_na(value):
            return value
    return None


def _xml_text(chunk, tag):
    m = re.search(r"<%s>\s*([^<]*?)\s*</%s>" % (tag, tag), chunk)
    return None if not m or is_na(m.group(1)) else m.group(1)


def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x``, also when the paste is cut short or was HTML-escaped on the way
    (``<gpu&gt;``, ``&nbsp;``): tags are read one by one, so a well-formed document is not required.

    Returns None when the text holds no ``<nvidia_smi_log``; else ``{'driver_version', 'cuda_version',
    'attached_gpus', 'complete' (the closing tag was seen), 'gpus': [{pci_bus_id, name, architecture,
    mig_mode, mig_devices, virtualization_mode, host_vgpu_mode, memory_total_mib, power_limit_w}]}``."""
    text = strip_ansi(text)
    if not _XML_ESCAPED_RE.search(text):
        return None
    if "&gt;" in text or "&lt;" in text:
        text = text.replace("&nbsp;", " ").replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
    text = text[text.index("<nvidia_smi_log") :]
    head = text.split("<gpu ", 1)[0]
    attached = to_number(_xml_text(head, "attached_gpus"))
    result = {
        "driver_version": version_value(_xml_text(head, "driver_version")),
        "cuda_version": version_value(_xml_text(head, "cuda_version")),
        "attached_gpus": attached if isinstance(attached, int) else None,
        "complete": "</nvidia_smi_log>" in text,
        "gpus": [],
    }
    for chunk in re.split(r"<gpu id=", text)[1:]:
        bus = _BUS_ID_RE.search(chunk.split(">", 1)[0])
        # The GPU's own rows, without its MIG devices' (which have their own <fb_memory_usage>).
        mig_part = chunk.split("<mig_devices>", 1)
        own = mig_part[0] + (mig_part[1].split("</mig_devices>", 1)[-1] if len(mig_part) > 1 else "")
        fb = re.search(r"<fb_memory_usage>\s*<total>\s*(\d+) MiB", own)
        readings = {key: _xml_text(own, key.replace(" ", "_")) for key in _POWER_LIMIT_KEYS}
        power = to_number(_power_limit_in_force(readings))
        result["gpus"].append(
            {
                "pci_bus_id": bus.group(1).upper() if bus else None,
                "name": _xml_text(chunk, "product_name"),
                "architecture": _xml_text(chunk, "product_architecture"),
                "mig_mode": _mig_flag(_xml_text(chunk, "current_mig")),
                "mig_devices": chunk.count("<mig_device>"),
                "virtualization_mode": _virt_mode(_xml_text(chunk, "virtualization_mode")),
                "host_vgpu_mode": _xml_text(chunk, "host_vgpu_mode"),
                "memory_total_mib": int(fb.group(1)) if fb else None,
                "power_limit_w": power if isinstance(power, (int, float)) else None,
            }
        )
    return result


# ``--query-gpu`` field names (``nvidia-smi --help-query-gpu``). A header is the requested field list with the
# unit in brackets (``memory.total [MiB]``); names are read from it whatever the list is. Some names are camelCase
# (R535+ ``vgpu_driver_capability.heterogenous_multivGPU``, R550+ ``fabric.cliqueId`` / ``fabric.clusterUuid``):
# a query of every field (200+) carries them, so a name is any dotted identifier.
_CSV_FIELD_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$")
# The fields without a dot, from --help-query-gpu (R450-R610); a header must be mostly these or dotted names.
_CSV_PLAIN_FIELDS = (
    "timestamp", "driver_version", "count", "name", "gpu_name", "serial", "gpu_serial", "uuid", "gpu_uuid",
    "gpu_bus_id", "index", "vbios_version", "display_mode", "display_active", "persistence_mode",
    "addressing_mode", "compute_mode", "compute_cap", "pstate", "hostname", "gpu_recovery_action",
)  # fmt: skip
# Fields that name one GPU: rows are matched on them (a loop prints every GPU once per sample).
_CSV_ID_FIELDS = ("pci.bus_id", "uuid", "serial", "index")
_CSV_GPU_FIELDS = ("index", "name", "pci.bus_id", "compute_cap", "uuid")
_QUERY_CMD_RE = re.compile(r"--query-gpu[= ]([A-Za-z0-9_.,]+)")
_FORMAT_CMD_RE = re.compile(r"--format[= ]([A-Za-z,]+)")
_COMPUTE_CAP_RE = re.compile(r"^\d{1,2}\.\d$")
_DRIVER_RE = re.compile(r"^\d{3}\.\d+(?:\.\d+)?$")
_GPU_NAME_RE = re.compile(r"^(?:NVIDIA|Tesla|Quadro|GeForce|TITAN|GRID|Graphics Device)\b")
# The ``timestamp`` field's value: "YYYY/MM/DD HH:MM:SS.msec" (--help-query-gpu).
_SMI_TIMESTAMP_RE = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?$")
_CSV_ALIASES = {"gpu_name": "name", "gpu_bus_id": "pci.bus_id", "gpu_uuid": "uuid", "gpu_serial": "serial"}


def _csv_header(cells):
    """The field names of a ``--query-gpu`` header line, or None when the line is not one."""
    names = []
    known = 0
    for cell in cells:
        m = _HEADER_UNIT_RE.match(cell)
        name = (m.group("name") if m else cell).strip()
        if not _CSV_FIELD_RE.match(name):
            return None
        if "." in name or name in _CSV_PLAIN_FIELDS:
            known += 1
        names.append(_CSV_ALIASES.get(name, name))
    if not known or known * 2 < len(names):
        return None
    return names


def _csv_row_by_shape(cells):
    """A ``noheader`` row whose fields are not named: take what can only be one thing."""
    row = {}
    caps = []
    for pos, cell in enumerate(cells):
        if pos == 0 and re.match(r"^\d+$", cell):
            row["index"] = cell
        elif _GPU_NAME_RE.match(cell):
            row.setdefault("name", cell)
        elif _BUS_ID_RE.fullmatch(cell):
            row.setdefault("pci.bus_id", cell)
        elif _COMPUTE_CAP_RE.match(cell):
            caps.append(cell)
        elif _DRIVER_RE.match(cell):
            row.setdefault("driver_version", cell)
    # Other fields print "N.N" too (inforom.oem "2.1", inforom.ecc "7.0"): only a lone one that NVIDIA lists
    # as a compute capability is taken for it.
    if len(caps) == 1 and caps[0] in KNOWN_COMPUTE_CAPS:
        row["compute_cap"] = caps[0]
    return row if "name" in row else None


def _csv_block_gpus(names, rows, warnings):
    """The GPUs of one CSV block (a header or a command line's field list, then its rows).

    With a field that names the GPU (bus id, uuid, serial, index) each GPU is kept once, however many samples a
    loop (``-l`` / ``-lms``) printed. Without one, a block with ``timestamp`` is a loop's samples: they cannot be
    told apart, so no GPU is taken from it; any other block is a one-shot query, one row per GPU in order."""
    ids = [f for f in _CSV_ID_FIELDS if f in names]
    gpus = []
    if ids:
        seen = {}
        for pos, row in enumerate(rows):
            # consumer GPUs print "[N/A]" for serial (and uuid under some vGPU drivers): not a name
            key = tuple("" if is_na(row.get(f)) else row[f].strip().upper() for f in ids)
            if not any(key):
                key = ("#", pos)
            if key in seen:
                continue
            gpu = normalise_gpu(row)
            if gpu["index"] is None or not isinstance(gpu["index"], int):
                gpu["index"] = len(seen)
            seen[key] = gpu
            gpus.append(gpu)
        return gpus
    if "timestamp" in names and len(rows) > 1:
        warnings.append(
            "a --query-gpu loop of %d samples names no GPU (no index, pci.bus_id or uuid column): "
            "the GPUs are left to the other outputs" % len(rows)
        )
        return []
    for pos, row in enumerate(rows):
        gpu = normalise_gpu(row)
        gpu["index"] = pos
        gpus.append(gpu)
    return gpus


def parse_query_gpu_blocks(text):
    """Every ``--query-gpu`` block in the text, with or without its header, and what it says.

    A header names the columns (any field list, in any order); a ``noheader`` block is read with the field list of
    the command line pasted above it (``$ nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader``)
    or, without one, by the shape of each cell (a GPU name, a compute capability NVIDIA lists, a bus id, a driver
    version). A ``noheader`` loop without a name (``YYYY/MM/DD HH:MM:SS.mmm, 45 %, 1234 MiB``) is telemetry: a
    block, no GPU. ``--query-compute-apps`` blocks and other CSV are left alone.

    Returns ``{'blocks': n, 'gpus': [typed rows (normalise_gpu)], 'count': the largest ``count`` field (GPUs
    in the system) or None, 'warnings': [...]}``."""
    out = {"blocks": 0, "gpus": [], "count": None, "warnings": []}
    state = {"names": None, "rows": []}

    def flush():
        names, rows = state["names"], state["rows"]
        if names is not None and (rows or state.get("header")):
            out["blocks"] += 1
            for row in rows:
                count = to_number(row.get("count"))
                if isinstance(count, int):
                    out["count"] = max(out["count"] or 0, count)
            out["gpus"].extend(_csv_block_gpus(names, rows, out["warnings"]))
        state.update(names=None, rows=[], header=False)

    pending = None
    queried = None  # the field list of the command line pasted above, with or without noheader
    shape_rows = []
    telemetry = 0
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            flush()
            continue
        cmd = _QUERY_CMD_RE.search(line)
        if cmd and "nvidia-smi" in line:
            flush()
            fmt = _FORMAT_CMD_RE.search(line)
            pending = cmd.group(1).split(",") if fmt and "noheader" in fmt.group(1) else None
            queried = cmd.group(1).split(",")
            continue
        cells = _split_csv_line(line)
        # one column: the header of the one-field query pasted above it (--query-gpu=compute_cap --format=csv prints
        # "compute_cap" then "8.9"; without that command line a lone "name" in prose is no header), its rows, or a
        # noheader row of a one-field command line
        one_column = len(cells) == 1 and ((pending and len(pending) == 1)
                                          or (state["names"] is not None and len(state["names"]) == 1)
                                          or (queried is not None and len(queried) == 1
                                              and _csv_header(cells) == _csv_header(queried)))
        if len(cells) < 2 and not one_column:
            flush()
            continue
        header = _csv_header(cells)
        if header:
            flush()
            state.update(names=header, rows=[], header=True)
            pending = None
            continue
        if state["names"] is not None and len(cells) == len(state["names"]):
            state["rows"].append(dict(zip(state["names"], cells)))  # noqa: B905
            continue
        flush()
        if pending and len(cells) == len(pending):
            names = [_CSV_ALIASES.get(f, f) for f in pending]
            if any(k in names for k in _CSV_GPU_FIELDS + ("timestamp",)):
                state.update(names=names, rows=[dict(zip(names, cells))])  # noqa: B905
            continue
        row = _csv_row_by_shape(cells)
        if row:
            shape_rows.append(row)
        elif _SMI_TIMESTAMP_RE.match(cells[0]):
            telemetry += 1
    flush()
    if shape_rows:
        out["blocks"] += 1
        out["gpus"].extend(_csv_block_gpus(["index"] if all("index" in r for r in shape_rows) else [], shape_rows,
                                           out["warnings"]))  # fmt: skip
    if telemetry:
        out["blocks"] += 1
        out["warnings"].append(
            "%d --query-gpu samples without a header or a GPU name (telemetry): they name no GPU" % telemetry
        )
    return out


def parse_query_gpu_any(text):
    """The GPUs of every ``--query-gpu`` block in the text (``parse_query_gpu_blocks``), typed, in order."""
    return parse_query_gpu_blocks(text)["gpus"]


# ``nvidia-smi dmon``: "# gpu   pwr  gtemp ..." and "# Idx     W      C ..." then one row per GPU per sample;
# ``-o DT`` puts "Date" / "Time" columns first. A Markdown paste may escape the hash ("\\# gpu").
_DMON_HEADER_RE = re.compile(r"^\\?#\s*(?:(?:Date|Time)\s+)*gpu\s+\w")


def parse_dmon(text):
    """The GPUs ``nvidia-smi dmon`` sampled: ``{'gpus': [index, ...], 'samples': rows}``, or None when the text holds
    no dmon header."""
    columns = None
    indices = set()
    rows = 0
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if _DMON_HEADER_RE.match(line):
            columns = line.lstrip("\\#").split()
            continue
        if columns is None or line.lstrip("\\").startswith("#"):
            continue
        cells = line.split()
        at = columns.index("gpu")
        if len(cells) != len(columns) or not cells[at].isdigit():
            if cells:
                columns = None  # the table ended
            continue
        indices.add(int(cells[at]))
        rows += 1
    if not rows:
        return None
    return {"gpus": sorted(indices), "samples": rows}


# Compute capability by GPU name: NVIDIA's tables https://developer.nvidia.com/cuda-gpus (current
# GPUs) and https://developer.nvidia.com/cuda-legacy-gpus (7.0 and older), the names as those pages
# spell them without the leading "NVIDIA " (nvidia-smi prints "NVIDIA H100 80GB HBM3", "Tesla V100-...").
# A name matches an entry that is a whole-word prefix of it. Only products those pages list are here:
# a derivative they do not list (A800, H800, H20) gets no compute capability rather than a guess.
COMPUTE_CAP_BY_NAME = (
    ("GB10", "12.1"),
    ("RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("RTX PRO 6000 Blackwell Workstation Edition", "12.0"),
    ("RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0"),
    ("RTX PRO 5000 Blackwell", "12.0"),
    ("RTX PRO 4500 Blackwell", "12.0"),
    ("RTX PRO 4000 Blackwell", "12.0"),
    ("RTX PRO 2000 Blackwell", "12.0"),
    ("GeForce RTX 5090", "12.0"),
    ("GeForce RTX 5080", "12.0"),
    ("GeForce RTX 5070 Ti", "12.0"),
    ("GeForce RTX 5070", "12.0"),
    ("GeForce RTX 5060 Ti", "12.0"),
    ("GeForce RTX 5060", "12.0"),
    ("GeForce RTX 5050", "12.0"),
    ("GB300", "10.3"),
    ("B300", "10.3"),
    ("GB200", "10.0"),
    ("B200", "10.0"),
    ("GH200", "9.0"),
    ("H200", "9.0"),
    ("H100", "9.0"),
    ("L4", "8.9"),
    ("L40", "8.9"),
    ("L40S", "8.9"),
    ("RTX 6000 Ada", "8.9"),
    ("RTX 5000 Ada", "8.9"),
    ("RTX 4500 Ada", "8.9"),
    ("RTX 4000 Ada", "8.9"),
    ("RTX 4000 SFF Ada", "8.9"),
    ("RTX 2000 Ada", "8.9"),
    ("GeForce RTX 4090", "8.9"),
    ("GeForce RTX 4080", "8.9"),
    ("GeForce RTX 4070 Ti", "8.9"),
    ("GeForce RTX 4070", "8.9"),
    ("GeForce RTX 4060 Ti", "8.9"),
    ("GeForce RTX 4060", "8.9"),
    ("GeForce RTX 4050", "8.9"),
    ("A40", "8.6"),
    ("A10", "8.6"),
    ("A16", "8.6"),
    ("A2", "8.6"),
    ("RTX A6000", "8.6"),
    ("RTX A5000", "8.6"),
    ("RTX A4000", "8.6"),
    ("RTX A3000", "8.6"),
    ("RTX A2000", "8.6"),
    ("GeForce RTX 3090 Ti", "8.6"),
    ("GeForce RTX 3090", "8.6"),
    ("GeForce RTX 3080 Ti", "8.6"),
    ("GeForce RTX 3080", "8.6"),
    ("GeForce RTX 3070 Ti", "8.6"),
    ("GeForce RTX 3070", "8.6"),
    ("GeForce RTX 3060 Ti", "8.6"),
    ("GeForce RTX 3060", "8.6"),
    ("GeForce RTX 3050", "8.6"),
    ("A100", "8.0"),
    ("A30", "8.0"),
    ("T4", "7.5"),
    ("Quadro RTX 8000", "7.5"),
    ("Quadro RTX 6000", "7.5"),
    ("Quadro RTX 5000", "7.5"),
    ("Quadro RTX 4000", "7.5"),
    ("V100", "7.0"),
    ("Quadro GV100", "7.0"),
    ("TITAN V", "7.0"),
)

# Compute capabilities those two pages list (Jetson parts included); anything else is not a GPU.
KNOWN_COMPUTE_CAPS = (
    "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9",
    "9.0", "10.0", "10.3", "11.0", "12.0", "12.1",
)  # fmt: skip


def _name_key(name):
    text = re.sub(r"\s+", " ", str(name or "")).strip()
    for prefix in ("NVIDIA ", "Tesla ", "GRID "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text.lower()


def compute_cap_from_name(name):
    """Compute capability of a GPU by its name (``COMPUTE_CAP_BY_NAME``), or None.

    ``'NVIDIA H100 80GB HBM3'`` -> ``'9.0'``. A name nvidia-smi truncated (``'NVIDIA RTX PRO 6000
    Blac...'``) gives a value only when every entry it could be the start of agrees."""
    if not name:
        return None
    key = _name_key(name)
    truncated = key.endswith("...")
    if truncated:
        key = key[:-3].rstrip()
    if not key:
        return None
    best = None
    candidates = set()
    for entry, cap in COMPUTE_CAP_BY_NAME:
        low = entry.lower()
        if key == low or (key.startswith(low) and not key[len(low)].isalnum()):
            if best is None or len(low) > len(best[0]):
                best = (low, cap)
        elif truncated and low.startswith(key):
            candidates.add(cap)
    if best and not truncated:
        return best[1]
    if truncated:
        if best:
            candidates.add(best[1])
        return candidates.pop() if len(candidates) == 1 else None
    return _vgpu_board_cap(key)


# A vGPU guest sees its vGPU type as the name: "<board>-<framebuffer GB><series>" ("GRID T4-16Q", "NVIDIA A100-40C",
# "NVIDIA L40S-48Q", "NVIDIA RTXA6000-48Q", "GRID V100DX-32Q", "NVIDIA H100XM-80C"; NVIDIA Virtual GPU Software
# User Guide, "Virtual GPU Types", https://docs.nvidia.com/vgpu/latest/grid-vgpu-user-guide/index.html). The
# board name is written without spaces and may carry a form-factor suffix (D, DX, XM, XL, L).
_VGPU_TYPE_RE = re.compile(r"^(?P<board>[a-z0-9 ]+?)-\d+[a-z]\d*$")


def is_vgpu_type_name(name):
    """True for a vGPU type name (``GRID P40-24Q``, ``NVIDIA A100-40C``), the name a vGPU guest sees."""
    if not name:
        return False
    key = _name_key(name)
    return bool(_VGPU_TYPE_RE.match(key)) and (str(name).startswith("GRID ") or _vgpu_board_cap(key) is not None)


def _vgpu_board_cap(key):
    m = _VGPU_TYPE_RE.match(key)
    if not m:
        return None
    board = m.group("board").replace(" ", "")
    for candidate in (board, re.sub(r"(?:dx|d|xm|xl|l)$", "", board)):
        for entry, cap in COMPUTE_CAP_BY_NAME:
            if entry.lower().replace(" ", "") == candidate:
                return cap
    return None


def _coarse_interconnect(summary):
    if summary == "nvlink" or summary == "mixed" or summary == "single":
        return summary
    if summary and summary.startswith("pcie-"):
        return "pcie"
    return None


def read_saved_output(text):
    """Everything one saved or pasted nvidia-smi output establishes, whatever its kind.

    Recognises (several may be in one text, e.g. a terminal log): the plain table, ``-q``, ``-q -x``,
    ``--query-gpu`` CSV with or without header, ``-L``, ``dmon``, ``topo -m`` / ``topo -mp``, and the driver
    failure texts. Shell prompts, command lines and a wrapper's own lines around them are ignored; quote markers
    (``> ``) and a Markdown code block's indentation are taken off. A ``--query-gpu`` loop that names no GPU (no
    index / bus id / uuid column, or no header and no name) is recognised as ``query-gpu`` and gives no GPU.

    Returns ``{'formats': [...], 'driver_failure', 'smi_version', 'driver_version', 'cuda_version',
    'attached_gpus', 'vgpu_host', 'gpus': [...], 'mig_devices', 'topology' (parse_topo_matrix_details
    or None), 'warnings'}``. ``formats`` is empty when nothing was recognised. Each GPU is
    ``{index, pci_bus_id, name, name_truncated, compute_cap, memory_total_mib, power_limit_w, mig_mode,
    virtualization_mode}`` (None where that output does not say)."""
    text = unquote(strip_ansi(text or ""))
    out = {
        "formats": [],
        "driver_failure": detect_driver_failure(text),
        "smi_version": None,
        "driver_version": None,
        "cuda_version": None,
        "attached_gpus": None,
        "vgpu_host": False,
        "gpus": [],
        "mig_devices": 0,
        "topology": None,
        "warnings": [],
    }
    if out["driver_failure"]:
        out["formats"].append("driver-failure")
    header = parse_smi_header(text)
    for key in ("smi_version", "driver_version", "cuda_version"):
        out[key] = header[key]

    def add(gpu, source):
        gpu = dict(gpu)
        gpu["source"] = source
        out["gpus"].append(gpu)

    xml = parse_smi_xml(text)
    if xml:
        out["formats"].append("query-xml")
        out["driver_version"] = out["driver_version"] or xml["driver_version"]
        out["cuda_version"] = out["cuda_version"] or xml["cuda_version"]
        out["attached_gpus"] = xml["attached_gpus"]
        if not xml["complete"]:
            out["warnings"].append("the -q -x document is cut short: read as far as it goes")
        for gpu in xml["gpus"]:
            out["mig_devices"] += gpu.pop("mig_devices")
            add(gpu, "query-xml")
    else:
        query = parse_smi_q(text)
        if query["gpus"] or query["attached_gpus"] is not None or _Q_VERSION_RE.search(text):
            out["formats"].append("query")
            out["attached_gpus"] = query["attached_gpus"]
            out["vgpu_host"] = query["vgpu_host"]
            for gpu in query["gpus"]:
                add(gpu, "query")
    table = parse_smi_table(text)
    if table["gpus"] or table["mig_devices"] or header["smi_version"]:
        out["formats"].append("table")
        for gpu in table["gpus"]:
            add(gpu, "table")
        out["mig_devices"] += len(table["mig_devices"])
    listing = parse_smi_list(text)
    if listing["gpus"]:
        out["formats"].append("list")
        for gpu in listing["gpus"]:
            add(gpu, "list")
        out["mig_devices"] = max(out["mig_devices"], listing["mig_devices"])
    csv = parse_query_gpu_blocks(text)
    if csv["blocks"]:
        out["formats"].append("query-gpu")
        out["warnings"].extend(csv["warnings"])
        if csv["count"] is not None:
            out["attached_gpus"] = max(out["attached_gpus"] or 0, csv["count"])
        for gpu in csv["gpus"]:
            add(
                {k: gpu[k] for k in ("index", "name", "pci_bus_id", "compute_cap", "memory_total_mib",
                                     "power_limit_w", "mig_mode", "driver_version")},
                "query-gpu",
            )  # fmt: skip
            out["driver_version"] = out["driver_version"] or gpu["driver_version"]
    dmon = parse_dmon(text)
    if dmon:
        out["formats"].append("dmon")
        for index in dmon["gpus"]:
            add({"index": index}, "dmon")
    topo = parse_topo_matrix_details(text)
    if topo["links"]:
        out["formats"].append("topo")
        out["topology"] = topo
        out["warnings"].extend("topo -m: " + w for w in topo["warnings"])
        if not topo["header"]:
            out["warnings"].append("topo -m has no header row: columns taken as GPU0..GPUn-1, then NIC0..")
    out["gpus"] = merge_gpus([out["gpus"]], out["warnings"])
    return out


_GPU_FIELDS = (
    "index",
    "pci_bus_id",
    "name",
    "name_truncated",
    "compute_cap",
    "memory_total_mib",
    "power_limit_w",
    "mig_mode",
    "virtualization_mode",
)


def merge_gpus(lists, warnings):
    """One GPU list from several readings: the same GPU is matched by PCI bus id, else by index;
    ``-q`` / ``-q -x`` blocks carry no index and take their position. A name the table truncated
    gives way to the full one. Conflicting values are reported in ``warnings``; the first stays."""
    merged = []
    for gpus in lists:
        positional = [g for g in gpus if g.get("index") is None]
        for pos, gpu in enumerate(positional):
            gpu["index"] = pos
        for gpu in gpus:
            bus = (gpu.get("pci_bus_id") or "").upper() or None
            match = None
            for have in merged:
                if bus and have.get("pci_bus_id"):
                    if have["pci_bus_id"] == bus:
                        match = have
                        break
                    continue
                if have.get("index") == gpu.get("index"):
                    match = have
                    break
            if match is None:
                match = {key: None for key in _GPU_FIELDS}
                merged.append(match)
            for key in _GPU_FIELDS:
                value = gpu.get(key)
                if key == "pci_bus_id":
                    value = bus
                if value is None:
                    continue
                if match[key] is None:
                    match[key] = value
                elif key == "name" and match.get("name_truncated") and not gpu.get("name_truncated"):
                    if value.startswith(match["name"][:-3].rstrip()):
                        match["name"], match["name_truncated"] = value, False
                elif key == "name_truncated":
                    continue
                elif match[key] != value and key != "index":
                    if key == "name" and gpu.get("name_truncated"):
                        continue
                    warnings.append(
                        "GPU %s: %s reads %r in one output and %r in another" % (match["index"], key, match[key], value)
                    )
    for gpu in merged:
        if gpu["name_truncated"] is None and gpu["name"]:
            gpu["name_truncated"] = gpu["name"].endswith("...")
    merged.sort(key=lambda g: (g["index"] is None, g["index"] if g["index"] is not None else 0))
    return merged


def merge_saved_outputs(readings):
    """Facts from one or more ``read_saved_output`` results (e.g. the table and ``topo -m``).

    Returns ``{'gpus': [{index, name, name_truncated, compute_cap, compute_cap_source, pci_bus_id,
    memory_total_mib, power_limit_w, mig}], 'gpu_count', 'gpu_models', 'mixed_models', 'compute_cap',
    'sm', 'driver_version', 'cuda_version', 'interconnect' (nvlink/pcie/mixed/single/None),
    'interconnect_detail' (gpu_facts' vocabulary), 'interconnect_pairs', 'mig', 'mig_devices',
    'virtualization', 'driver_failure', 'formats', 'warnings'}``.

    ``gpu_count`` is the most any output shows (the table's rows, ``-q``'s "Attached GPUs", the
    ``topo -m`` rows); GPUs known only by count are listed with null name. It is None, never 0, when
    the driver failed: a failed driver says nothing about the GPUs."""
    warnings = []
    formats = []
    failure = None
    versions = {"driver_version": None, "cuda_version": None}
    attached = None
    mig_devices = 0
    topo = None
    vgpu_host = False
    for reading in readings:
        warnings.extend(reading["warnings"])
        formats.extend(f for f in reading["formats"] if f not in formats)
        failure = failure or reading["driver_failure"]
        for key in versions:
            value = reading[key]
            if value and versions[key] and value != versions[key]:
                warnings.append("%s reads %s in one output and %s in another" % (key, versions[key], value))
            versions[key] = versions[key] or value
        if reading["attached_gpus"] is not None:
            attached = max(attached or 0, reading["attached_gpus"])
        mig_devices += reading["mig_devices"]
        vgpu_host = vgpu_host or reading["vgpu_host"]
        if reading["topology"] and (topo is None or len(reading["topology"]["links"]) > len(topo["links"])):
            topo = reading["topology"]
    gpus = merge_gpus([r["gpus"] for r in readings], warnings)
    topo_gpus = sorted(int(d[3:]) for d in (topo or {}).get("links", {}) if d.startswith("GPU"))
    topo_columns = [d for d in (topo or {}).get("devices", []) if d.startswith("GPU")]
    count = max([len(gpus), attached or 0, len(topo_columns), (topo_gpus[-1] + 1) if topo_gpus else 0])
    known = set(g["index"] for g in gpus)
    for index in range(count):
        if index not in known:
            gpus.append({key: None for key in _GPU_FIELDS})
            gpus[-1]["index"] = index
    gpus.sort(key=lambda g: g["index"])
    for gpu in gpus:
        if gpu["compute_cap"]:
            gpu["compute_cap_source"] = "nvidia-smi"
        else:
            gpu["compute_cap"] = compute_cap_from_name(gpu["name"])
            gpu["compute_cap_source"] = "gpu-name" if gpu["compute_cap"] else None
        gpu["sm"] = compute_cap_to_sm(gpu["compute_cap"])
        if gpu["virtualization_mode"] is None and is_vgpu_type_name(gpu["name"]):
            # only a vGPU guest sees a vGPU type as its GPU's name
            gpu["virtualization_mode"] = "vgpu"
    if topo and topo["links"]:
        detail, pairs = summarise_interconnect(topo)
    elif count == 1:
        detail, pairs = "single", {}
    else:
        detail, pairs = None, {}
    if detail == "unknown":
        detail = None
    mig_modes = [g["mig_mode"] for g in gpus if g["mig_mode"] is not None]
    if mig_devices or any(mig_modes):
        mig = True
    elif mig_modes and len(mig_modes) == len(gpus):
        mig = False
    else:
        mig = None
    virt = sorted(set(g["virtualization_mode"] for g in gpus if g["virtualization_mode"]))
    if vgpu_host and "vgpu-host" not in virt:
        virt.append("vgpu-host")
    models, mixed = summarise_models(gpus)
    caps = set(g["compute_cap"] for g in gpus if g["compute_cap"])
    unknown = [g["index"] for g in gpus if not g["compute_cap"]]
    if caps and unknown:
        warnings.append(
            "compute capability known for %d of %d GPUs (not for GPU %s)"
            % (len(gpus) - len(unknown), len(gpus), ", ".join(str(i) for i in unknown))
        )
    sms = set(g["sm"] for g in gpus if g["sm"])
    facts = {
        "gpus": [
            {
                key: gpu[key]
                for key in (
                    "index",
                    "name",
                    "name_truncated",
                    "compute_cap",
                    "compute_cap_source",
                    "sm",
                    "pci_bus_id",
                    "memory_total_mib",
                    "power_limit_w",
                )
            }
            for gpu in gpus
        ],  # fmt: skip
        "gpu_count": count if count else None,
        "gpu_models": models,
        "mixed_models": mixed,
        "compute_cap": caps.pop() if len(caps) == 1 else None,
        "sm": sms.pop() if len(sms) == 1 else None,
        "driver_version": versions["driver_version"],
        "cuda_version": versions["cuda_version"],
        "interconnect": _coarse_interconnect(detail),
        "interconnect_detail": detail,
        "interconnect_pairs": pairs,
        "mig": mig,
        "mig_devices": mig_devices,
        "virtualization": virt[0] if len(virt) == 1 else (None if not virt else "mixed"),
        "driver_failure": failure,
        "formats": formats,
        "warnings": warnings,
    }
    for gpu, merged in zip(facts["gpus"], gpus):  # noqa: B905
        gpu["mig"] = merged["mig_mode"]
    if failure and not gpus:
        facts["gpu_count"] = None
    return facts


def virtualization_kind(mode):
    """gpu_facts' ``virtualization.kind`` from the GPU virtualization mode nvidia-smi reports:
    a passed-through GPU or a vGPU is seen from inside a VM; a vGPU host is the bare-metal side."""
    if mode in ("passthrough", "vgpu"):
        return "vm"
    if mode in ("vgpu-host", "vsga-host", "none"):
        return "none"
    return None


# ---- CUDA toolkits and the driver's ceiling (the cuda_toolkit role, through the cuda_facts module) -----

_TOOLKIT_DIR_RE = re.compile(r"^cuda-(\d+\.\d+)$")


def version_tuple(text):
    """``'580.65.06'`` -> (580, 65, 6); ``'13.0'`` -> (13, 0); None when it is not a version."""
    value = version_value(text)
    return tuple(int(part) for part in value.split(".")) if value else None


def toolkit_versions(names):
    """Toolkit releases from the entries of a prefix (``cuda-12.8``, ``cuda-13.1``; not ``cuda``, the
    alternatives symlink, nor ``cuda-12``), oldest first."""
    found = set()
    for name in names:
        m = _TOOLKIT_DIR_RE.match(name)
        if m:
            found.add(m.group(1))
    return sorted(found, key=version_tuple)


def driver_supports(driver_version, driver_cuda_version, min_cuda, min_driver_version=None):
    """Whether a driver can run CUDA ``min_cuda``. Returns ``(ok, basis)``.

    The CUDA version the driver prints (its ceiling) decides when it is shown (``basis`` ``cuda``). A
    driver that shows none (a vGPU host prints ``Not Found``) is compared with the minimum driver of
    that CUDA release (``driver-version``). No driver at all is ``(False, 'no-driver')``; a driver
    that shows neither a usable CUDA version nor a comparable version is ``(False, 'unknown')``."""
    if not driver_version:
        return False, "no-driver"
    need = version_tuple(min_cuda)
    have = version_tuple(driver_cuda_version)
    if have and need:
        return have >= need, "cuda"
    floor = version_tuple(min_driver_version)
    mine = version_tuple(driver_version)
    if floor and mine:
        return mine >= floor, "driver-version"
    return False, "unknown"
