# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""GPU telemetry during a benchmark level: samplers, the sample parser, summaries, energy, Xid events.

What the caller (the benchmark module) does, per level:

1. start ONE sampler as a child process writing a CSV, before the level starts:
   ``nvml_sampler_argv(python, out_csv, 250)`` where ``nvml_probe_argv(python)`` exits 0 and
   ``parse_probe`` reads its line (``pynvml`` importable and ``nvmlInit`` succeeds), else
   ``smi_sampler_argv(nvidia_smi, 250)`` with stdout sent to the CSV (or ``out_csv=``);
2. note ``t_start`` / ``t_end`` (``time.time()``) around the level, stop the sampler with SIGTERM;
3. ``rows = parse_samples(csv_text)``; ``summarise(rows, t_start, t_end)``;
   ``energy_j(rows, t_start, t_end)`` and ``joules_per_token(energy, output_tokens)``;
4. ``xid_events(journalctl_k_text, since=t_start)`` when the kernel log is readable;
5. hand summary and Xid events to ``diagnosis.diagnose``.

Both samplers write the same CSV: no header, no units, one row per GPU per sample, the columns of
``QUERY_FIELDS`` in that order, ``[N/A]`` / ``[Not Supported]`` where a value is unavailable (as
``nvidia-smi --format=csv,noheader,nounits`` prints it), so one parser reads both. ``parse_samples``
also reads recordings made with a header and units (``--format=csv``) and other field orders.

Field names are those of ``nvidia-smi --help-query-gpu`` (driver 580.159.04, recorded in
``tests/fixtures/nvidia-smi/h200-x1-device/help-query-gpu.txt``); NVML calls and constants are those of
nvidia-ml-py's ``pynvml.py`` (13.615.71 on PyPI). Written from those and from recorded real output only.

Stdlib only; runs on the target (Python 3.9+) as well as on the controller. No I/O except in
``NVML_SAMPLER_SOURCE``, which is text for a child process, never executed here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import math
import re
import time as _time

from ansible_collections.moesweep.sweep.plugins.module_utils.nvidia_smi import to_number

# --------------------------------------------------------------------------------------------------
# What is sampled

# ``nvidia-smi --query-gpu`` fields, in CSV column order. Every name is listed by
# ``nvidia-smi --help-query-gpu`` of driver 580.159.04. ``clocks.sm`` is the short name of
# ``clocks.current.sm`` (a header prints the long one). The ``clocks_event_reasons.*`` names exist from
# driver R535 on; older drivers know them only as ``clocks_throttle_reasons.*`` (R535+ accept both and
# print the new name in a header): use ``query_fields(driver_version)``. ``power.draw`` is a 1 s average
# on Ampere (except GA100) and newer, an instant reading on older GPUs (help text of the same driver).
QUERY_FIELDS = (
    "index",
    "timestamp",
    "utilization.gpu",
    "utilization.memory",
    "power.draw",
    "enforced.power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "clocks_event_reasons.active",
    "clocks_event_reasons.sw_power_cap",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
)

# The first driver branch whose nvidia-smi knows the ``clocks_event_reasons.*`` names.
EVENT_REASON_NAMES_SINCE_DRIVER = 535

DEFAULT_INTERVAL_MS = 250

# Row keys for each field (parse_samples output). Header names nvidia-smi prints for aliases map to the
# same key (``clocks.current.sm`` for ``clocks.sm``, ``gpu.power.current_limit`` for
# ``enforced.power.limit``, the legacy ``clocks_throttle_reasons.*``).
_FIELD_KEYS = {
    "index": "index",
    "timestamp": "timestamp",
    "utilization.gpu": "util",
    "utilization.memory": "mem_util",
    "power.draw": "power_w",
    "enforced.power.limit": "power_limit_w",
    "power.limit": "power_requested_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "temperature.gpu": "temp_c",
    "clocks_event_reasons.active": "reasons",
    "clocks_event_reasons.gpu_idle": "reason_gpu_idle",
    "clocks_event_reasons.applications_clocks_setting": "reason_applications_clocks_setting",
    "clocks_event_reasons.sw_power_cap": "reason_sw_power_cap",
    "clocks_event_reasons.hw_slowdown": "reason_hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown": "reason_hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown": "reason_hw_power_brake_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown": "reason_sw_thermal_slowdown",
    "clocks_event_reasons.sync_boost": "reason_sync_boost",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "ecc.errors.corrected.volatile.total": "ecc_corrected",
}
_ALIASES = {
    "clocks.current.sm": "clocks.sm",
    "gpu.power.current_limit": "enforced.power.limit",
    "gpu.power.requested_limit": "power.limit",
}

# Clock event reason bits of ``clocks_event_reasons.active`` (nvml.h ``nvmlClocksEventReason*``, the same
# values as the older ``nvmlClocksThrottleReason*``; nvidia-ml-py 13.615.71 pynvml.py lines 2190-2199).
REASON_BITS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clock_setting", 0x100),
)
REASON_NAMES = tuple(name for name, _bit in REASON_BITS)

# Metrics summarised per GPU: (summary name, row key).
_STAT_KEYS = (
    ("util", "util"),
    ("mem_util", "mem_util"),
    ("power_w", "power_w"),
    ("power_frac", "power_frac"),
    ("sm_clock_mhz", "sm_clock_mhz"),
    ("sm_clock_frac", "sm_clock_frac"),
    ("mem_used_mib", "mem_used_mib"),
    ("temp_c", "temp_c"),
)


def canonical_field(name):
    """``'clocks.current.sm [MHz]'`` -> ``'clocks.sm'``; legacy throttle names -> event names."""
    name = re.sub(r"\s*\[[^\]]*\]\s*$", "", (name or "").strip())
    if name.startswith("clocks_throttle_reasons."):
        name = "clocks_event_reasons." + name[len("clocks_throttle_reasons.") :]
    return _ALIASES.get(name, name)


def _driver_major(driver_version):
    match = re.match(r"^\s*(\d+)", str(driver_version or ""))
    return int(match.group(1)) if match else None


def query_fields(driver_version=None):
    """QUERY_FIELDS as the given driver's nvidia-smi spells them (legacy reason names before R535).

    ``driver_version`` is gpu_facts' ``driver_version`` (``'580.159.04'``); None or unparseable means
    a current driver."""
    major = _driver_major(driver_version)
    if major is None or major >= EVENT_REASON_NAMES_SINCE_DRIVER:
        return QUERY_FIELDS
    return tuple(
        "clocks_throttle_reasons." + f[len("clocks_event_reasons.") :] if f.startswith("clocks_event_reasons.") else f
        for f in QUERY_FIELDS
    )


def _check_interval(interval_ms):
    if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 1:
        raise ValueError(
            "sampling interval must be a whole number of milliseconds >= 1 (got %r); 250 gives 4 Hz" % (interval_ms,)
        )


def smi_sampler_argv(nvidia_smi_path, interval_ms=DEFAULT_INTERVAL_MS, fields=None, out_csv=None):
    """argv of the nvidia-smi sampler: ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits -lms N``.

    It loops until killed (SIGTERM; nvidia-smi 580 then exits 0), one row per GPU per ``interval_ms``
    (``-lms, --loop-ms=``). Without ``out_csv`` it writes to stdout (the caller redirects it to the CSV);
    with it, nvidia-smi's own ``-f, --filename=`` (both in ``nvidia-smi -h`` of driver 580.159.04,
    ``tests/fixtures/telemetry/h200-x1-20261201/nvidia-smi-h.txt``).
    ``fields`` defaults to QUERY_FIELDS; pass ``query_fields(driver_version)`` for drivers before R535."""
    if not nvidia_smi_path:
        raise ValueError("nvidia_smi_path is empty: pass the nvidia-smi path gpu_facts found")
    _check_interval(interval_ms)
    argv = [
        nvidia_smi_path,
        "--query-gpu=" + ",".join(fields or QUERY_FIELDS),
        "--format=csv,noheader,nounits",
        "-lms",
        str(interval_ms),
    ]
    if out_csv:
        argv.append("--filename=" + out_csv)
    return argv


# --------------------------------------------------------------------------------------------------
# The NVML sampler (text run by the benchmark client venv's interpreter, which has nvidia-ml-py)

_NVML_SAMPLER_TEMPLATE = r'''
"""moesweep NVML sampler: the columns of nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits.

usage: python -c SOURCE --out FILE [--interval-ms N] | --probe
Samples every GPU every N ms (default 250) until SIGTERM / SIGINT, one line per GPU per sample, each line
flushed. Exit 0 when stopped, 2 bad usage, 3 pynvml not importable, 4 nvmlInit failed, 5 FILE not writable.
--probe prints one JSON line (driver, GPU count, APIs found) and exits 0, or exits 3 / 4.
Stdlib + pynvml (nvidia-ml-py) only.
"""
import json
import signal
import sys
import time

FIELDS = @FIELDS@
NA = "[N/A]"
NOT_SUPPORTED = "[Not Supported]"
REASON_BITS = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal_slowdown": 0x20,
               "hw_thermal_slowdown": 0x40, "gpu_idle": 0x1, "applications_clocks_setting": 0x2,
               "sync_boost": 0x10, "hw_power_brake_slowdown": 0x80}


def fail(code, text):
    sys.stderr.write("moesweep-nvml-sampler: %s\n" % text)
    return code


def stamp(t):
    # nvidia-smi's "timestamp": local time "YYYY/MM/DD HH:MM:SS.mmm"
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t)) + ".%03d" % int((t % 1.0) * 1000)


class Device:
    def __init__(self, nv, index):
        self.nv = nv
        self.index = index
        self.handle = nv.nvmlDeviceGetHandleByIndex(index)
        self.reasons_fn = None
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nv, name, None)
            if fn is None:
                continue
            try:
                fn(self.handle)
            except nv.NVMLError:
                continue
            self.reasons_fn = fn
            break
        self.memory_v2 = getattr(nv, "nvmlMemory_v2", None)
        if self.memory_v2 is not None:
            try:
                nv.nvmlDeviceGetMemoryInfo(self.handle, version=self.memory_v2)
            except (nv.NVMLError, TypeError):
                self.memory_v2 = None

    def memory(self):
        if self.memory_v2 is not None:
            return self.nv.nvmlDeviceGetMemoryInfo(self.handle, version=self.memory_v2)
        return self.nv.nvmlDeviceGetMemoryInfo(self.handle)

    def reasons(self):
        if self.reasons_fn is None:
            raise self.nv.NVMLError(self.nv.NVML_ERROR_NOT_SUPPORTED)
        return self.reasons_fn(self.handle)


def getters(nv):
    h = lambda d: d.handle  # noqa: E731
    return {
        "index": lambda d, c: str(d.index),
        "timestamp": lambda d, c: stamp(c["t"]),
        "utilization.gpu": lambda d, c: str(cached(c, "util", lambda: nv.nvmlDeviceGetUtilizationRates(h(d))).gpu),
        "utilization.memory": lambda d, c: str(
            cached(c, "util", lambda: nv.nvmlDeviceGetUtilizationRates(h(d))).memory),
        "power.draw": lambda d, c: "%.2f" % (nv.nvmlDeviceGetPowerUsage(h(d)) / 1000.0),
        "enforced.power.limit": lambda d, c: "%.2f" % (nv.nvmlDeviceGetEnforcedPowerLimit(h(d)) / 1000.0),
        "clocks.sm": lambda d, c: str(nv.nvmlDeviceGetClockInfo(h(d), nv.NVML_CLOCK_SM)),
        "clocks.max.sm": lambda d, c: str(nv.nvmlDeviceGetMaxClockInfo(h(d), nv.NVML_CLOCK_SM)),
        "memory.used": lambda d, c: str(cached(c, "mem", d.memory).used // (1024 * 1024)),
        "memory.total": lambda d, c: str(cached(c, "mem", d.memory).total // (1024 * 1024)),
        "temperature.gpu": lambda d, c: str(nv.nvmlDeviceGetTemperature(h(d), nv.NVML_TEMPERATURE_GPU)),
        "clocks_event_reasons.active": lambda d, c: "0x%016x" % cached(c, "reasons", d.reasons),
        "ecc.errors.uncorrected.volatile.total": lambda d, c: str(nv.nvmlDeviceGetTotalEccErrors(
            h(d), nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)),
        "ecc.errors.corrected.volatile.total": lambda d, c: str(nv.nvmlDeviceGetTotalEccErrors(
            h(d), nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC)),
    }


def reason_getter(bit):
    return lambda d, c: "Active" if cached(c, "reasons", d.reasons) & bit else "Not Active"


def cached(cache, key, fn):
    if key not in cache:
        cache[key] = fn()
    return cache[key]


def row(nv, table, device):
    cache = {"t": time.time()}
    cells = []
    for field in FIELDS:
        try:
            cells.append(table[field](device, cache))
        except Exception as err:  # one unreadable value must not end the level's sampling
            unsupported = isinstance(err, nv.NVMLError) and getattr(err, "value", None) == nv.NVML_ERROR_NOT_SUPPORTED
            cells.append(NOT_SUPPORTED if unsupported else NA)
    return ", ".join(cells)


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def main(argv):
    out = None
    interval_ms = 250
    probe = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--probe":
            probe = True
        elif arg in ("--out", "--interval-ms") and args:
            value = args.pop(0)
            if arg == "--out":
                out = value
            else:
                try:
                    interval_ms = int(value)
                except ValueError:
                    return fail(2, "--interval-ms needs a whole number of milliseconds, got %r" % value)
        else:
            return fail(2, "unknown or incomplete argument %r (usage: --out FILE [--interval-ms N] | --probe)" % arg)
    if interval_ms < 1:
        return fail(2, "--interval-ms must be >= 1, got %d" % interval_ms)
    if not probe and not out:
        return fail(2, "--out FILE is required")
    try:
        import pynvml as nv
    except Exception as err:  # ImportError, or a broken install
        return fail(3, "cannot import pynvml (install nvidia-ml-py in this interpreter): %s" % err)
    try:
        nv.nvmlInit()
    except Exception as err:
        return fail(4, "nvmlInit failed: %s" % err)
    try:
        devices = [Device(nv, i) for i in range(nv.nvmlDeviceGetCount())]
        table = getters(nv)
        for name, bit in REASON_BITS.items():
            table["clocks_event_reasons." + name] = reason_getter(bit)
        missing = [f for f in FIELDS if f not in table]
        if missing:
            return fail(2, "no NVML reading for field(s) %s" % ", ".join(missing))
        if probe:
            info = {"ok": True, "driver": text(nv.nvmlSystemGetDriverVersion()), "gpus": len(devices),
                    "reasons_api": devices[0].reasons_fn.__name__ if devices and devices[0].reasons_fn else None,
                    "memory_info": "v2" if devices and devices[0].memory_v2 is not None else "v1",
                    "pynvml": getattr(nv, "__version__", None)}
            sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
            return 0
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        signal.signal(signal.SIGINT, lambda *_: stop.append(1))
        try:
            fh = open(out, "w", buffering=1)
        except OSError as err:
            return fail(5, "cannot write %s: %s" % (out, err))
        interval = interval_ms / 1000.0
        due = time.monotonic()
        with fh:
            while not stop:
                fh.write("".join(row(nv, table, d) + "\n" for d in devices))
                fh.flush()
                due += interval
                now = time.monotonic()
                if due < now:  # fell behind (a slow NVML call): keep the cadence from here
                    due = now
                while not stop and time.monotonic() < due:
                    time.sleep(min(0.05, max(0.0, due - time.monotonic())))
        return 0
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


sys.exit(main(sys.argv[1:]))
'''

NVML_SAMPLER_SOURCE = _NVML_SAMPLER_TEMPLATE.replace("@FIELDS@", repr(QUERY_FIELDS))


def nvml_sampler_argv(python, out_csv, interval_ms=DEFAULT_INTERVAL_MS):
    """argv of the NVML sampler run by ``python`` (an interpreter with nvidia-ml-py): writes ``out_csv``."""
    if not python:
        raise ValueError("python is empty: pass the benchmark client venv's interpreter")
    if not out_csv:
        raise ValueError("out_csv is empty: pass the path of the samples CSV to write")
    _check_interval(interval_ms)
    return [python, "-c", NVML_SAMPLER_SOURCE, "--out", out_csv, "--interval-ms", str(interval_ms)]


def nvml_probe_argv(python):
    """argv that answers whether ``python`` can sample through NVML (exit 0 + one JSON line)."""
    if not python:
        raise ValueError("python is empty: pass the benchmark client venv's interpreter")
    return [python, "-c", NVML_SAMPLER_SOURCE, "--probe"]


def parse_probe(stdout):
    """The probe's JSON line as a dict, or None when it printed none (then use nvidia-smi)."""
    for line in (stdout or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                info = json.loads(line)
            except ValueError:
                return None
            return info if isinstance(info, dict) and info.get("ok") else None
    return None


# --------------------------------------------------------------------------------------------------
# Parsing samples

_TS_RE = re.compile(r"^(\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2})(\.\d+)?$")


def parse_timestamp(value, utc_offset_s=None):
    """nvidia-smi's ``'2026/12/01 07:55:11.801'`` (local time, no zone) -> seconds since the epoch.

    nvidia-smi prints the host's local time, so by default it is read in this process's local zone
    (the sampler runs on the same host). ``utc_offset_s`` reads it at that offset from UTC instead
    (0 for a recording made in UTC). None when it is not such a timestamp."""
    match = _TS_RE.match((value or "").strip())
    if not match:
        return None
    try:
        parts = _time.strptime(match.group(1), "%Y/%m/%d %H:%M:%S")
    except ValueError:
        return None
    frac = float(match.group(2)) if match.group(2) else 0.0
    if utc_offset_s is None:
        return _time.mktime(parts[:8] + (-1,)) + frac
    return calendar.timegm(parts) - utc_offset_s + frac


_HEADER_CELL_RE = re.compile(r"^[a-z][a-z0-9_.]*(?:\s*\[[^\]]+\])?$")


def _looks_like_header(cells):
    """nvidia-smi's header: every cell a lower-case field name (``memory.used [MiB]``), one with a dot."""
    return all(_HEADER_CELL_RE.match(c) for c in cells) and any("." in c for c in cells)


def _number(cell):
    value = to_number(cell)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _convert(field, cell):
    if field == "timestamp":
        return cell.strip()
    if field == "index":
        value = to_number(cell)
        return value if isinstance(value, int) else None
    if field == "clocks_event_reasons.active":
        text = cell.strip()
        try:
            return int(text, 16) if text.lower().startswith("0x") else None
        except ValueError:
            return None
    if field.startswith("clocks_event_reasons."):
        text = cell.strip().lower()
        if text == "active":
            return True
        if text == "not active":
            return False
        return None
    return _number(cell)


def parse_samples(text, fields=None, utc_offset_s=None):
    """Sampler CSV text -> rows, one per GPU per sample.

    Reads headerless ``--format=csv,noheader,nounits`` output in ``fields`` order (QUERY_FIELDS by
    default), and output that starts with nvidia-smi's header (``--format=csv``; units in the header and
    the cells are stripped). Each row: ``t`` (seconds since the epoch, from ``timestamp``; None without
    one), ``timestamp`` (text), ``index`` (int, None when the recording has no index column), numbers as
    float or None for ``[N/A]`` / ``[Not Supported]`` (keys: util, mem_util, power_w, power_limit_w,
    sm_clock_mhz, sm_clock_max_mhz, mem_used_mib, mem_total_mib, temp_c, ecc_uncorrected,
    ecc_corrected), ``reasons`` (the event reason bitmask as int, or None) and ``reason_<name>``
    (True / False / None) for each per-reason column present. Lines with the wrong number of cells (the
    line a killed sampler left half-written) are skipped."""
    names = [canonical_field(f) for f in (fields or QUERY_FIELDS)]
    header_seen = False
    rows = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if not header_seen and not rows and _looks_like_header(cells):
            names = [canonical_field(c) for c in cells]
            header_seen = True
            continue
        if len(cells) != len(names):
            continue
        row = {}
        for field, cell in zip(names, cells):  # noqa: B905 (targets run Python 3.9)
            key = _FIELD_KEYS.get(field)
            if key is None or key in row:
                continue
            row[key] = _convert(field, cell)
        row.setdefault("index", None)
        row["t"] = parse_timestamp(row.get("timestamp"), utc_offset_s) if row.get("timestamp") else None
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------
# Summaries


def percentile(values, q):
    """Linear-interpolated percentile (q in 0..100) of a non-empty list, as numpy's default does."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * (q / 100.0)
    lo = int(math.floor(pos))
    hi = int(math.ceil(pos))
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def stats(values):
    """{mean, p5, max} of the values that are not None, or None when there are none."""
    data = [v for v in values if v is not None]
    if not data:
        return None
    return {"mean": sum(data) / len(data), "p5": percentile(data, 5), "max": max(data)}


def _limit(row):
    limit = row.get("power_limit_w")
    if limit is None:
        limit = row.get("power_requested_limit_w")
    return limit


def _derived(row):
    power, limit = row.get("power_w"), _limit(row)
    clock, clock_max = row.get("sm_clock_mhz"), row.get("sm_clock_max_mhz")
    out = dict(row)
    out["power_frac"] = power / limit if power is not None and limit else None
    out["sm_clock_frac"] = clock / clock_max if clock is not None and clock_max else None
    return out


def reason_active(row, name):
    """Whether clock event reason ``name`` was active in the sample: the per-reason column when
    sampled, else the bit of the ``active`` bitmask; None when the sample carries neither."""
    value = row.get("reason_" + name)
    if value is not None:
        return value
    mask = row.get("reasons")
    if mask is None:
        return None
    return bool(mask & dict(REASON_BITS)[name])


def _reason_shares(rows):
    shares = {}
    sampled = 0
    for name in REASON_NAMES:
        flags = [reason_active(r, name) for r in rows]
        flags = [f for f in flags if f is not None]
        shares[name] = (sum(1 for f in flags if f) / len(flags)) if flags else None
        sampled = max(sampled, len(flags))
    return shares, sampled


def _reason_counts(rows):
    return {name: sum(1 for r in rows if reason_active(r, name)) for name in REASON_NAMES}


def _counter(rows, key):
    data = [r[key] for r in rows if r.get(key) is not None]
    if not data:
        return None
    first, last = data[0], data[-1]
    # Volatile counters restart at 0 when the driver reloads: then all of ``last`` is new.
    delta = last - first if last >= first else last
    return {"first": first, "last": last, "delta": delta}


def _timing(rows):
    times = [r["t"] for r in rows if r.get("t") is not None]
    if len(times) < 2:
        return {"span_s": 0.0, "rate_hz": None, "max_gap_s": None}
    span = times[-1] - times[0]
    gaps = [b - a for a, b in zip(times, times[1:])]  # noqa: B905
    return {"span_s": span, "rate_hz": (len(times) - 1) / span if span > 0 else None, "max_gap_s": max(gaps)}


def _block(rows):
    rows = [_derived(r) for r in rows]
    block = {"samples": len(rows)}
    for name, key in _STAT_KEYS:
        block[name] = stats(r.get(key) for r in rows)
    limits = [_limit(r) for r in rows if _limit(r)]
    block["power_limit_w"] = sum(limits) / len(limits) if limits else None
    maxima = [r["sm_clock_max_mhz"] for r in rows if r.get("sm_clock_max_mhz")]
    block["sm_clock_max_mhz"] = max(maxima) if maxima else None
    totals = [r["mem_total_mib"] for r in rows if r.get("mem_total_mib")]
    block["mem_total_mib"] = max(totals) if totals else None
    block["reasons"], block["reasons_samples"] = _reason_shares(rows)
    block["reason_counts"] = _reason_counts(rows)
    return block


def _in_window(row, t_start, t_end):
    t = row.get("t")
    if t is None:
        return False
    return (t_start is None or t >= t_start) and (t_end is None or t <= t_end)


def _gpu_key(index):
    return (1, 0) if index is None else (0, index)


def steady_window(t_start, t_end, interval_s):
    """The part of a level's window whose samples describe the level alone: utilization.gpu is "Percent of time over
    the past sample period during which one or more kernels was executing on the GPU. The sample period may be
    between 1 second and 1/6 second depending on the product." (nvidia-smi --help-query-gpu), so the first samples
    after the requests start still average in the idle time before them. Two sampling intervals (at least 0.5 s)
    are left out at the start of a window longer than four times that; a shorter window is kept whole."""
    lead = max(0.5, 2.0 * interval_s)
    if t_start is None or t_end is None or t_end - t_start <= 4 * lead:
        return t_start, t_end
    return t_start + lead, t_end


def summarise(rows, t_start=None, t_end=None):
    """Per-GPU and pooled statistics of the samples inside ``[t_start, t_end]`` (epoch seconds).

    Returns ``{"window", "samples", "gpu_count", "rate_hz", "gpus": [...], "all": {...}}``. Each GPU
    block: index, samples, span_s, rate_hz (samples per second achieved), max_gap_s, util, mem_util,
    power_w, power_frac (of the enforced limit, else of power.limit), sm_clock_mhz, sm_clock_frac (of
    clocks.max.sm), mem_used_mib, temp_c as ``{mean, p5, max}`` (None when never reported),
    power_limit_w, sm_clock_max_mhz, mem_total_mib, ``reasons`` (share of samples with each clock event
    reason active, None when not sampled), reasons_samples, reason_counts and ``ecc`` (``uncorrected`` /
    ``corrected``: first, last, delta). ``all`` pools every GPU's samples into the same statistics and
    adds ``spread``: min / max across the GPU means (with the GPU index) and ``ecc`` deltas summed.
    ``rate_hz`` at the top is the lowest GPU's rate."""
    window = [r for r in rows or () if _in_window(r, t_start, t_end)]
    by_gpu = {}
    for row in window:
        by_gpu.setdefault(row.get("index"), []).append(row)
    gpus = []
    for index in sorted(by_gpu, key=_gpu_key):
        gpu_rows = sorted(by_gpu[index], key=lambda r: r["t"])
        block = {"index": index}
        block.update(_block(gpu_rows))
        block.update(_timing(gpu_rows))
        block["ecc"] = {
            "uncorrected": _counter(gpu_rows, "ecc_uncorrected"),
            "corrected": _counter(gpu_rows, "ecc_corrected"),
        }
        gpus.append(block)
    pooled = _block(window)
    pooled["spread"] = {}
    for name, _key in _STAT_KEYS:
        means = [(g[name]["mean"], g["index"]) for g in gpus if g[name] is not None]
        if means:
            low, high = min(means, key=lambda m: m[0]), max(means, key=lambda m: m[0])
            pooled["spread"][name] = {"min": low[0], "min_gpu": low[1], "max": high[0], "max_gpu": high[1]}
    pooled["ecc"] = {}
    for kind in ("uncorrected", "corrected"):
        deltas = [g["ecc"][kind]["delta"] for g in gpus if g["ecc"][kind] is not None]
        pooled["ecc"][kind] = {"delta": sum(deltas)} if deltas else None
    rates = [g["rate_hz"] for g in gpus if g["rate_hz"] is not None]
    times = [r["t"] for r in window]
    start = t_start if t_start is not None else (min(times) if times else None)
    end = t_end if t_end is not None else (max(times) if times else None)
    return {
        "window": {
            "t_start": start,
            "t_end": end,
            "duration_s": (end - start) if start is not None and end is not None else None,
        },
        "samples": len(window),
        "gpu_count": len(gpus),
        "rate_hz": min(rates) if rates else None,
        "gpus": gpus,
        "all": pooled,
    }


# --------------------------------------------------------------------------------------------------
# Energy (as InferenceX integrates it: per device, trapezoidal, linear interpolation at the window
# edges, summed over the devices; a window edge not bracketed by samples or a gap longer than
# max_gap_s makes the figure invalid)

DEFAULT_MAX_GAP_S = 3.0


def _power_at(samples, t):
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):  # noqa: B905
        if t0 <= t <= t1:
            return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)
    return None


def energy(rows, t_start=None, t_end=None, max_gap_s=DEFAULT_MAX_GAP_S):
    """Board energy over ``[t_start, t_end]``: ``{energy_j, per_gpu_j, duration_s, avg_power_w,
    avg_total_power_w, valid, reasons}``. ``energy_j`` is None unless valid. Without a window edge,
    the span that every GPU's samples cover is used."""
    by_gpu = {}
    for row in rows or ():
        if row.get("t") is not None and row.get("power_w") is not None:
            by_gpu.setdefault(row.get("index"), []).append((row["t"], row["power_w"]))
    reasons = []
    if not by_gpu:
        return {
            "energy_j": None,
            "per_gpu_j": {},
            "duration_s": None,
            "avg_power_w": None,
            "avg_total_power_w": None,
            "valid": False,
            "reasons": ["no power samples"],
        }
    for samples in by_gpu.values():
        samples.sort()
    start = t_start if t_start is not None else max(s[0][0] for s in by_gpu.values())
    end = t_end if t_end is not None else min(s[-1][0] for s in by_gpu.values())
    if not end > start:
        return {
            "energy_j": None,
            "per_gpu_j": {},
            "duration_s": None,
            "avg_power_w": None,
            "avg_total_power_w": None,
            "valid": False,
            "reasons": ["empty window (t_end %.3f is not after t_start %.3f)" % (end, start)],
        }
    per_gpu = {}
    for index in sorted(by_gpu, key=_gpu_key):
        samples = by_gpu[index]
        name = "GPU %s" % ("?" if index is None else index)
        if samples[0][0] > start:
            reasons.append("%s: first power sample %.2f s after the window start" % (name, samples[0][0] - start))
            continue
        if samples[-1][0] < end:
            reasons.append("%s: last power sample %.2f s before the window end" % (name, end - samples[-1][0]))
            continue
        points = [(start, _power_at(samples, start))]
        points += [s for s in samples if start < s[0] < end]
        points.append((end, _power_at(samples, end)))
        gap = max(b[0] - a[0] for a, b in zip(points, points[1:]))  # noqa: B905
        if gap > max_gap_s:
            reasons.append("%s: %.2f s without a power sample (max %.1f s)" % (name, gap, max_gap_s))
            continue
        per_gpu[index] = sum(
            (b[0] - a[0]) * (a[1] + b[1]) / 2.0
            for a, b in zip(points, points[1:])  # noqa: B905
        )
    valid = not reasons
    total = sum(per_gpu.values()) if valid else None
    duration = end - start
    return {
        "energy_j": total,
        "per_gpu_j": per_gpu,
        "duration_s": duration,
        "avg_power_w": total / duration / len(per_gpu) if valid else None,
        "avg_total_power_w": total / duration if valid else None,
        "valid": valid,
        "reasons": reasons,
    }


def energy_j(rows, t_start, t_end, max_gap_s=DEFAULT_MAX_GAP_S):
    """Joules drawn by all sampled GPUs over ``[t_start, t_end]``, or None when the samples do not
    cover the window (see ``energy`` for why)."""
    return energy(rows, t_start, t_end, max_gap_s)["energy_j"]


def joules_per_token(energy_joules, output_tokens):
    """GPU energy per output token (InferenceX's ``joules_per_output_token``: total GPU energy over the
    benchmark window / total output tokens), or None without energy or tokens."""
    if energy_joules is None or not output_tokens or output_tokens <= 0:
        return None
    return float(energy_joules) / float(output_tokens)


# --------------------------------------------------------------------------------------------------
# Xid events in the kernel log

# "NVRM: Xid (PCI:0000:01:00): 79, pid=6755, name=vivaldi-bin, GPU has fallen off the bus."
# "NVRM: Xid (PCI:0000:0a:00): 62, pid='<unknown>', name=<unknown>, 2023b230 ..."
# older drivers: "NVRM: Xid (0000:01:00): 3, C 00000005 ..." and no pid / name fields.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)\):?\s*"
    r"(?P<xid>\d+)(?:,\s*|\s*$)(?P<rest>.*)$"
)
_PID_RE = re.compile(r"^pid=(?:'(?P<q>[^']*)'|(?P<n>[^,\s]+)),?\s*")
_NAME_RE = re.compile(r"^name=(?P<name>[^,]*),?\s*")
# Drivers also say it without an Xid line, on one or three lines:
# "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus." / older: "NVRM: GPU at 0000:01:00.0 has fallen off the bus."
# "NVRM: The NVIDIA GPU 0000:b3:00.0" / "NVRM: (PCI ID: 10de:26b5) installed in this system has" /
# "NVRM: fallen off the bus and is not responding to commands."
_PCI = r"(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
_FALLEN_ONE_RE = re.compile(r"NVRM: GPU (?:at )?" + _PCI + r"\.\d:? (?:GPU )?has fallen off the bus")
_FALLEN_HEAD_RE = re.compile(r"NVRM: The NVIDIA GPU " + _PCI + r"\.\d\s*$")

_UNIX_TS_RE = re.compile(r"^(?P<t>\d{9,11}\.\d+)\s")
_ISO_TS_RE = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})(?P<frac>\.\d+)?(?P<tz>Z|[+-]\d{2}:?\d{2})?\s"
)
_MONO_TS_RE = re.compile(r"^\[\s*(?P<t>\d+\.\d+)\]")
_CTIME_TS_RE = re.compile(r"^\[(?P<t>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]")


def boot_time(proc_stat_text):
    """The ``btime`` of /proc/stat (boot time, epoch seconds), to place dmesg's ``[seconds]`` stamps."""
    match = re.search(r"^btime\s+(\d+)\s*$", proc_stat_text or "", re.M)
    return float(match.group(1)) if match else None


def _line_time(line, boot, utc_offset_s):
    match = _UNIX_TS_RE.match(line)
    if match:
        return float(match.group("t"))
    match = _ISO_TS_RE.match(line)
    if match:
        t = calendar.timegm(_time.strptime(match.group("date") + " " + match.group("time"), "%Y-%m-%d %H:%M:%S"))
        t += float(match.group("frac") or 0.0)
        tz = match.group("tz")
        if tz and tz != "Z":
            sign = -1 if tz[0] == "-" else 1
            digits = tz[1:].replace(":", "")
            return t - sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        if tz == "Z":
            return t
        return t - utc_offset_s if utc_offset_s is not None else _time.mktime(_time.gmtime(t)[:8] + (-1,))
    match = _MONO_TS_RE.match(line)
    if match:
        return boot + float(match.group("t")) if boot is not None else None
    match = _CTIME_TS_RE.match(line)
    if match:
        parts = _time.strptime(match.group("t"), "%a %b %d %H:%M:%S %Y")
        if utc_offset_s is None:
            return _time.mktime(parts[:8] + (-1,))
        return calendar.timegm(parts) - utc_offset_s
    return None


def _short_pci(pci):
    return pci.lower().split(".")[0]


def xid_events(kernel_log_text, since=None, boot=None, utc_offset_s=None):
    """Xid events in kernel log text (``journalctl -k`` in any of its short formats, or ``dmesg``).

    Each event: ``{t, xid, pci, pid, process, message, line}``. ``t`` is epoch seconds where the line
    carries a usable time: ``journalctl -o short-unix`` / ``short-iso`` / ``short-iso-precise``,
    ``dmesg -T`` / ``--ctime`` (local time, or ``utc_offset_s``), plain ``dmesg`` ``[seconds since
    boot]`` given ``boot`` (``boot_time(/proc/stat)``); plain ``journalctl`` stamps carry no year, so
    ``t`` is None there. With ``since``, only events at or after it are returned (events without a time
    are left out then: give the caller's journal query ``--since`` instead). A GPU that fell off the
    bus without an Xid line (newer drivers' one- or three-line form) is returned as Xid 79 with
    ``inferred: True`` unless an Xid 79 line for the same GPU is there too."""
    events = []
    lines = (kernel_log_text or "").splitlines()
    fallen = []
    for i, line in enumerate(lines):
        t = _line_time(line, boot, utc_offset_s)
        match = _XID_RE.search(line)
        if match:
            rest = match.group("rest").strip()
            pid = process = None
            pid_match = _PID_RE.match(rest)
            if pid_match:
                raw = pid_match.group("q") if pid_match.group("q") is not None else pid_match.group("n")
                pid = int(raw) if raw.isdigit() else None
                rest = rest[pid_match.end() :]
            name_match = _NAME_RE.match(rest)
            if name_match:
                name = name_match.group("name").strip()
                process = None if name in ("", "<unknown>") else name
                rest = rest[name_match.end() :]
            events.append(
                {
                    "t": t,
                    "xid": int(match.group("xid")),
                    "pci": match.group("pci").lower(),
                    "pid": pid,
                    "process": process,
                    "message": rest.strip(),
                    "line": line.strip(),
                }
            )
            continue
        match = _FALLEN_ONE_RE.search(line)
        if match:
            fallen.append((t, match.group("pci").lower(), line.strip()))
            continue
        match = _FALLEN_HEAD_RE.search(line)
        if match and any("fallen off the bus" in nxt for nxt in lines[i + 1 : i + 4]):
            fallen.append((t, match.group("pci").lower(), line.strip()))
    seen_79 = {_short_pci(e["pci"]) for e in events if e["xid"] == 79}
    for t, pci, line in fallen:
        if pci in seen_79:
            continue
        seen_79.add(pci)
        events.append(
            {
                "t": t,
                "xid": 79,
                "pci": pci,
                "pid": None,
                "process": None,
                "message": "GPU has fallen off the bus (no Xid line)",
                "line": line,
                "inferred": True,
            }
        )
    if since is not None:
        events = [e for e in events if e["t"] is not None and e["t"] >= since]
    return events
