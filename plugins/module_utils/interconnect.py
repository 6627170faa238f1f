# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The interconnect of a TP group, as pure functions: all-reduce tables, the NCCL environment they were measured
under, and the share of a decode step the all-reduces cost.

The measurement speaks NVIDIA nccl-tests' ``all_reduce_perf`` output (https://github.com/NVIDIA/nccl-tests,
src/common.cu and src/all_reduce.cu), so a table from the real tool and one from the role's measuring program
(``roles/sglang_server/files/allreduce_perf.py``, torch.distributed over NCCL) parse the same way:

* ``time`` is the average time of one operation in microseconds, ``algbw = size / time`` (GB/s, 1e9 bytes);
* ``busbw = algbw * 2 (n - 1) / n`` for an all-reduce over ``n`` ranks (nccl-tests doc/PERFORMANCE.md,
  "AllReduce"): the bandwidth each link carries, comparable across rank counts and with the hardware's peak.

The share estimate (``estimate``): a TP group all-reduces the hidden states after attention and after the MLP / MoE
block of every decoder layer (Megatron-LM's tensor parallelism, Shoeybi et al. 2019, section 3, "two all-reduce
operations in the forward pass" per transformer layer; sglang's ``RowParallelLinear`` reduces its output with
``tensor_model_parallel_all_reduce``, python/sglang/srt/layers/linear.py, v0.5.9). In a decode step every running
request contributes one token, so one all-reduce moves ``hidden_size x batch x bytes per element`` bytes - kilobytes,
where the measured time is latency, not bandwidth. ``allreduces x time(message)`` over the measured inter-token
latency is the share; it is a floor (measured on idle GPUs, without the contention of a running server).

Stdlib only; runs on the target (Python 3.9+) as well as on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import diagnosis, nccl_log

# The variables NCCL reads (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): every NCCL_* name,
# and the CUDA ones that change which GPUs and transports a process sees.
ENV_PREFIXES = ("NCCL_",)
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")

# What the measurement adds to the unit's NCCL environment so NCCL states the transport it chose between every GPU pair
# (module_utils/nccl_log.py): INFO level, and the subsystems of the channel lines and refusals (INIT), the settings it
# read (ENV) and the path types between GPUs (GRAPH) (NCCL src/debug.cc:63-118 at v2.27.3-1, NCCL_DEBUG_SUBSYS). They
# change what NCCL prints, not what it chooses: the measurement is recorded under the unit's environment without them.
DEBUG_ENVIRONMENT = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH"}
DEBUG_NAMES = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_LEVELS",
               "NCCL_DEBUG_TIMESTAMP_FORMAT")

# Message sizes the measuring program sweeps: 4 KiB (below one decode token row of a small model) to 256 MiB.
DEFAULT_MIN_BYTES = 4096
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

# The share of the decode step above which the all-reduces are named the level's bottleneck. A sixth of the step:
# larger than any one kernel family of a MoE decode step except the expert GEMMs, and a share that switching on
# P2P / a custom all-reduce (which take the small-message latency from tens of microseconds to single digits,
# https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md, "Custom Allreduce vs NCCL")
# would visibly give back.
DEFAULT_SHARE_MIN = 0.15

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s+(.*)$")
_NCCL_VERSION_RE = re.compile(r"NCCL version (\S+)")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(%s)" % _NUM)
_P2P_RE = re.compile(r"^#\s*P2P\s+GPU(\d+)\s*->\s*GPU(\d+)\s*:\s*(yes|no)\b", re.I)
_NGPUS_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")


# Bytes per element of nccl-tests' type names (src/common.cu test_typenames) and torch's
TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "float16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1,
              "int32": 4, "uint32": 4, "int": 4, "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8,
              "float64": 8}


class InterconnectError(ValueError):
    """Output that is not an all-reduce table, or inputs the estimate cannot use: the message says which."""


def bus_factor(ranks):
    """nccl-tests' all-reduce bus bandwidth factor 2 (n - 1) / n (0 for one rank: nothing crosses a link)."""
    ranks = int(ranks)
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


def algbw_gbs(size_bytes, time_us):
    """Algorithm bandwidth in GB/s (1e9 bytes per second), as nccl-tests prints it."""
    return (size_bytes / 1e9) / (time_us / 1e6) if time_us > 0 else 0.0


def busbw_gbs(size_bytes, time_us, ranks):
    return algbw_gbs(size_bytes, time_us) * bus_factor(ranks)


def _number(token):
    try:
        return float(token)
    except (TypeError, ValueError):
        return None


def _header_has_root(line):
    return re.search(r"\bredop\s+root\b", line) is not None


def parse_all_reduce_perf(text):
    """An ``all_reduce_perf`` output (nccl-tests 2.x, with or without the ``root`` column, ``#wrong`` or the older
    ``error`` column, without ``redop`` in the oldest, NCCL INFO lines between) as ``{rows, ranks, devices,
    nccl_version, avg_busbw_gbs, p2p, out_of_bounds}``. ``rows``: ``[{size, count, type, redop, bytes, time_us,
    algbw_gbs, busbw_gbs, in_place: {...}}]`` in the order printed (``bytes``: what each rank reduces). ``ranks``:
    the ``# Rank`` lines counted, else nGpus. InterconnectError when no row is there."""
    rows, devices, p2p = [], [], []
    root = None
    nccl_version = avg = None
    ngpus = None
    out_of_bounds = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if line.startswith("[") and "]" in line[:6]:
            line = line[line.index("]") + 1:]  # mpirun --tag-output "[0]" prefixes
        m = _NCCL_VERSION_RE.search(line)
        if m and nccl_version is None:
            nccl_version = m.group(1)
        m = _NGPUS_RE.search(line)
        if m and ngpus is None:
            ngpus = int(m.group(1)) * int(m.group(2))
        if line.lstrip().startswith("#"):
            stripped = line.strip()
            if "redop" in stripped and "size" in stripped:
                root = _header_has_root(stripped)
                continue
            m = _RANK_RE.match(stripped)
            if m:
                devices.append({"rank": int(m.group(1)), "host": m.group(3), "device": int(m.group(4)),
                                "bus_id": m.group(5).strip(), "name": m.group(6).strip()})
                continue
            m = _AVG_RE.match(stripped)
            if m:
                avg = float(m.group(1))
                continue
            m = _P2P_RE.match(stripped)
            if m:
                p2p.append({"from": int(m.group(1)), "to": int(m.group(2)), "access": m.group(3).lower() == "yes"})
                continue
            if "Out of bounds values" in stripped:
                out_of_bounds = stripped.split(":", 1)[-1].strip()
            continue
        tokens = line.split()
        if len(tokens) < 6 or not tokens[0].isdigit() or not tokens[1].isdigit():
            continue
        # size, count, type, then redop (absent from the oldest format), root (nccl-tests 2.x), then the figures
        rest = tokens[3:]
        redop = None
        if _number(rest[0]) is None:
            redop, rest = rest[0], rest[1:]
        # without a header: nine figures (or an all-reduce's root, -1, before fewer) mean a root column
        has_root = root if root is not None else (len(rest) >= 9 or (len(rest) < 8 and rest[0] == "-1"))
        if has_root:
            rest = rest[1:]
        if len(rest) < 3:
            continue
        vals = [_number(t) for t in rest[:3]]
        if None in vals:
            continue
        count = int(tokens[1])
        # the bytes each rank reduces: count x the type's size (the oldest format printed the size summed over the
        # GPUs of one process: 32768 B for 4096 floats with -g 2, https://github.com/NVIDIA/nccl-tests/issues/44)
        elem = TYPE_BYTES.get(tokens[2])
        row = {"size": int(tokens[0]), "count": count, "type": tokens[2], "redop": redop,
               "bytes": count * elem if elem else int(tokens[0]), "time_us": vals[0], "algbw_gbs": vals[1],
               "busbw_gbs": vals[2], "in_place": None}
        if len(rest) >= 7:
            ip = [_number(t) for t in rest[4:7]]
            if None not in ip:
                row["in_place"] = {"time_us": ip[0], "algbw_gbs": ip[1], "busbw_gbs": ip[2]}
        rows.append(row)
    if not rows:
        raise InterconnectError("no all_reduce_perf result row in the output (expected nccl-tests' table: size, "
                                "count, type, redop, [root,] time, algbw, busbw, ...)")
    ranks = len(devices) or ngpus
    return {"rows": rows, "ranks": ranks, "devices": devices, "nccl_version": nccl_version,
            "avg_busbw_gbs": avg, "p2p": p2p, "out_of_bounds": out_of_bounds}


def check_busbw(table, tolerance=0.02):
    """Rows whose printed algbw is not size / time, or busbw not that x 2(n-1)/n (nccl-tests computes both from the
    unrounded time and prints two decimals): [(size, printed busbw, expected)]. A check that a table speaks the
    definitions the estimate relies on."""
    ranks = table.get("ranks") or 0
    bad = []
    for row in table["rows"]:
        algbw = algbw_gbs(row["bytes"], row["time_us"])
        busbw = busbw_gbs(row["bytes"], row["time_us"], ranks)
        if (abs(row["algbw_gbs"] - algbw) > max(0.011, tolerance * algbw)
                or abs(row["busbw_gbs"] - busbw) > max(0.011, tolerance * busbw)):
            bad.append((row["size"], row["busbw_gbs"], round(busbw, 2)))
    return bad


def latency_us(rows, size_bytes, ranks=None):
    """The all-reduce time (us, out-of-place) at ``size_bytes`` from a table's rows: linear between the two measured
    sizes around it; below the smallest, the smallest's time (a latency floor); above the largest, the largest's time
    plus the extra bytes at its bus bandwidth."""
    pts = sorted((r.get("bytes", r["size"]), r["time_us"]) for r in rows if r["size"] > 0 and r["time_us"] > 0)
    if not pts:
        raise InterconnectError("no measured all-reduce size to read a time from")
    if size_bytes <= pts[0][0]:
        return pts[0][1]
    for i in range(len(pts) - 1):
        (s0, t0), (s1, t1) = pts[i], pts[i + 1]
        if s0 <= size_bytes <= s1:
            return t0 + (t1 - t0) * (size_bytes - s0) / float(s1 - s0)
    s_last, t_last = pts[-1]
    bw = algbw_gbs(s_last, t_last)
    return t_last + ((size_bytes - s_last) / 1e9) / bw * 1e6 if bw > 0 else t_last


def nccl_environment(environment):
    """The part of a unit's environment NCCL reads (NCCL_*, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), as a sorted
    dict of strings."""
    env = {}
    for key, value in (environment or {}).items():
        key = str(key)
        if key.startswith(ENV_PREFIXES) or key in ENV_NAMES:
            env[key] = "" if value is None else str(value)
    return dict(sorted(env.items()))


def sglang_process_environment(nccl_env, flags):
    """The NCCL variables sglang sets in its own processes before NCCL starts, so the measurement runs under what the
    server's communicators see: sglang 0.5.9 python/sglang/srt/entrypoints/engine.py:806-817 (_set_envs_and_config)
    sets NCCL_CUMEM_ENABLE to 0 unless the environment has it (1 with --enable-symm-mem), and NCCL_NVLS_ENABLE to
    0 unless the environment has it (1 with --enable-nccl-nvls or --enable-symm-mem). NCCL_CUMEM_ENABLE=0 is why the
    server's P2P line reads ``via P2P/IPC`` where torch's default reads ``via P2P/CUMEM`` (NCCL
    src/transport/p2p.cc:393-398 at v2.27.3-1)."""
    env = nccl_environment(nccl_env)
    flags = flags or {}
    symm = bool(flags.get("enable-symm-mem"))
    nvls = bool(flags.get("enable-nccl-nvls"))
    out = {}
    if "NCCL_CUMEM_ENABLE" not in env or symm:
        out["NCCL_CUMEM_ENABLE"] = str(int(symm))
    if "NCCL_NVLS_ENABLE" not in env or nvls or symm:
        out["NCCL_NVLS_ENABLE"] = str(int(nvls or symm))
    return out


def measurement_environment(nccl_env, flags=None, debug=True):
    """The environment the measuring program runs under: the unit's NCCL environment, what sglang sets for its own
    processes (``sglang_process_environment``) and, with ``debug``, NCCL's INFO lines (``DEBUG_ENVIRONMENT``, which
    replaces the unit's own NCCL_DEBUG* settings for the measurement)."""
    env = nccl_environment(nccl_env)
    env.update(sglang_process_environment(env, flags))
    if debug:
        for name in DEBUG_NAMES:
            env.pop(name, None)
        env.update(DEBUG_ENVIRONMENT)
    return dict(sorted(env.items()))


def split_output(text):
    """(the measuring program's own output, NCCL's lines) of a run with NCCL_DEBUG=INFO: NCCL prints to stdout
    (src/debug.cc:32 at v2.27.3-1, ncclDebugFile = stdout), between the table's lines."""
    own, nccl = [], []
    for line in (text or "").splitlines():
        (nccl if ("NCCL INFO" in line or "NCCL WARN" in line) else own).append(line)
    return "\n".join(own) + ("\n" if own else ""), nccl


def environment_key(nccl_env, ranks):
    """What a measurement is recorded under: the NCCL environment and the TP group size (12 hex digits)."""
    blob = json.dumps({"env": nccl_environment(nccl_env), "ranks": int(ranks)}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def environment_text(nccl_env):
    env = nccl_environment(nccl_env)
    return " ".join("%s=%s" % kv for kv in env.items()) or "(NCCL defaults)"


# ------------------------------------------------------------------------------------------------ the model


def model_dims(config):
    """``{layers, hidden_size, model_type}`` from a Hugging Face ``config.json`` (a multimodal model's
    ``text_config`` when the top level has no ``num_hidden_layers``). InterconnectError naming the missing key."""
    if not isinstance(config, dict):
        raise InterconnectError("the model's config.json is not a JSON object")
    cfg = config
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    missing = [k for k in ("num_hidden_layers", "hidden_size") if not isinstance(cfg.get(k), int)]
    if missing:
        raise InterconnectError("the model's config.json has no integer %s" % " or ".join(missing))
    return {"layers": cfg["num_hidden_layers"], "hidden_size": cfg["hidden_size"],
            "model_type": config.get("model_type") or cfg.get("model_type")}


def allreduces_per_step(layers, per_layer=2):
    """All-reduces of one decode step: ``per_layer`` per decoder layer (attention output and MLP / MoE output) and
    one after the vocabulary-parallel embedding (sglang VocabParallelEmbedding reduces its output over the TP group,
    python/sglang/srt/layers/vocab_parallel_embedding.py, v0.5.9)."""
    return int(layers) * int(per_layer) + 1


def decode_message_bytes(hidden_size, batch, bytes_per_element=2):
    """Bytes of one decode all-reduce: one hidden-state row (bf16: 2 bytes per element) per running request."""
    return int(hidden_size) * max(1, int(batch)) * int(bytes_per_element)


def _bytes_text(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.0f %s" % (n / float(div), unit) if n % div == 0 else "%.1f %s" % (n / float(div), unit)
    return "%d B" % n


def what_would_change(measurement, flags, latency):
    """What would take the all-reduce time down, for this measurement and launch (``flags``), each with its source.
    Where NCCL stated its transports (``measurement['transport']``, module_utils/nccl_log.py), the setting it reported
    is named; otherwise what the P2P probe found."""
    p2p = measurement.get("p2p") or []
    denied = [p for p in p2p if not p["access"]]
    out = []
    transport = measurement.get("transport") or {}
    slow = [p for p in transport.get("pairs") or [] if p.get("family") in ("SHM", "NET")]
    if slow:
        out.append("NCCL connected %d of the %d GPU pairs it names without P2P (%s): their share of every all-reduce "
                   "goes through host memory or the network (%.1f us here at the decode size); with P2P on a PCIe "
                   "switch 8 GPUs all-reduce small messages in ~24 us (https://github.com/voipmonitor/rtx6kpro/blob/"
                   "master/hardware/pcie-bandwidth.md, 'Custom Allreduce vs NCCL', NCCL column)"
                   % (len(slow), transport.get("pairs_total") or len(transport.get("pairs") or []),
                      ", ".join(sorted(set(p["transport"] for p in slow))), latency))
        out.extend(nccl_log.what_would_change(transport))
    elif denied and not transport.get("found"):
        out.append("P2P: %d of %d GPU pairs have no peer access, so NCCL moves every all-reduce through host memory "
                   "(%.1f us here at the decode size); with P2P on a PCIe switch 8 GPUs all-reduce small messages in "
                   "~24 us (https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md, 'Custom "
                   "Allreduce vs NCCL', NCCL column): the VM's IOMMU / ACS settings and NCCL_P2P_LEVEL decide it"
                   % (len(denied), len(p2p), latency))
    custom = ("sglang's custom all-reduce (one kernel for small messages) runs only on 2 GPUs, or on 4, 6 or 8 fully "
              "NVLink-connected ones with P2P (sglang 0.5.9 python/sglang/srt/distributed/device_communicators/"
              "custom_all_reduce.py:108-163)")
    if (flags or {}).get("disable-custom-all-reduce"):
        custom += "; this launch turns it off (--disable-custom-all-reduce)"
    out.append(custom)
    out.append("a smaller TP size all-reduces over fewer GPUs (fewer ring steps, 2(n-1)/n of the bytes per link) "
               "and not at all at TP 1, if the model fits the GPUs' memory")
    return out


def estimate(measurement, model, concurrency, itl_ms, tp_size, max_batch=None, per_layer=2, bytes_per_element=2,
             share_min=DEFAULT_SHARE_MIN, flags=None):
    """The all-reduce cost of a decode step at one benchmark level.

    ``measurement``: a parsed table (``parse_all_reduce_perf``) with ``ranks``; ``model``: ``model_dims``;
    ``concurrency``: the level's; ``itl_ms``: its measured inter-token latency; ``max_batch``: the server's
    --max-running-requests (the decode batch never exceeds it). Returns ``{verdict, share, allreduce_ms, count,
    message_bytes, latency_us, batch, itl_ms, evidence, changes}`` - ``verdict`` ``interconnect_bound`` when the share
    is at least ``share_min``, else None; or ``{verdict: None, skipped: why}`` when it cannot be estimated."""
    if not measurement or not measurement.get("rows"):
        return {"verdict": None, "skipped": "no all-reduce measurement for this host and NCCL environment"}
    ranks = int(measurement.get("ranks") or 0)
    if tp_size and ranks and int(tp_size) != ranks:
        return {"verdict": None, "skipped": "the measurement ran on %d GPU(s), the point uses TP %d" % (ranks, tp_size)}
    if not model:
        return {"verdict": None, "skipped": "the model's config (layers, hidden size) is unknown"}
    if not itl_ms or itl_ms <= 0:
        return {"verdict": None, "skipped": "the level has no inter-token latency"}
    if ranks <= 1:
        return {"verdict": None, "share": 0.0, "allreduce_ms": 0.0,
                "skipped": "TP 1: a decode step all-reduces nothing"}
    batch = int(concurrency)
    if max_batch:
        batch = min(batch, int(max_batch))
    size = decode_message_bytes(model["hidden_size"], batch, bytes_per_element)
    lat = latency_us(measurement["rows"], size)
    count = allreduces_per_step(model["layers"], per_layer)
    total_ms = count * lat / 1000.0
    share = total_ms / float(itl_ms)
    evidence = [
        "%d all-reduces x %.1f us = %.1f ms of a %.1f ms decode step (%.0f %%): %d layers x %d + 1 (embedding), "
        "%s each (hidden %d x batch %d x %d bytes), time read from the measured all_reduce_perf table over %d GPUs"
        % (count, lat, total_ms, itl_ms, 100.0 * share, model["layers"], per_layer, _bytes_text(size),
           model["hidden_size"], batch, bytes_per_element, ranks),
    ]
    peak = max(r["busbw_gbs"] for r in measurement["rows"])
    evidence.append("at that size the all-reduce is latency: %.1f GB/s bus bandwidth against %.1f GB/s at the "
                    "largest sizes measured" % (busbw_gbs(size, lat, ranks), peak))
    p2p = measurement.get("p2p") or []
    if p2p:
        denied = [p for p in p2p if not p["access"]]
        evidence.append("P2P: %d of %d GPU pairs without peer access" % (len(denied), len(p2p)) if denied
                        else "P2P: every GPU pair has peer access")
    evidence.extend(nccl_log.evidence(measurement.get("transport")))
    verdict = "interconnect_bound" if share >= share_min else None
    changes = what_would_change(measurement, flags, lat)
    return {"verdict": verdict, "share": share, "allreduce_ms": total_ms, "count": count, "message_bytes": size,
            "latency_us": lat, "batch": batch, "itl_ms": itl_ms, "ranks": ranks, "evidence": evidence,
            "changes": changes, "share_min": share_min}


def annotate_levels(benchmark, measurement, model, tp_size, max_batch=None, share_min=DEFAULT_SHARE_MIN,
                    itl_key="median_itl_ms", flags=None):
    """Add each ok level's ``estimate`` to its diagnosis (``diagnosis.interconnect``); a level whose share reaches
    ``share_min`` gets the verdict ``interconnect_bound`` (the telemetry's verdict kept as ``telemetry_verdict``, its
    evidence after the all-reduce lines). A level whose GPU state was invalid keeps that verdict. Returns the
    benchmark (changed in place)."""
    for level in (benchmark or {}).get("levels") or []:
        if not level.get("ok"):
            continue
        figures = level.get("figures") or {}
        itl = figures.get(itl_key) or figures.get("mean_itl_ms")
        est = estimate(measurement, model, level.get("concurrency") or 1, itl, tp_size, max_batch=max_batch,
                       share_min=share_min, flags=flags)
        diag = level.get("diagnosis")
        if not isinstance(diag, dict):
            diag = level["diagnosis"] = {"verdict": "unknown", "evidence": []}
        diag["interconnect"] = est
        if est.get("verdict") == "interconnect_bound" and diag.get("verdict") != "invalid_gpu_state":
            diag["telemetry_verdict"] = diag.get("verdict")
            diag["verdict"] = "interconnect_bound"
            diag["label"] = diagnosis.LABELS["interconnect_bound"]
            diag["evidence"] = list(est["evidence"]) + ["telemetry: %s" % diag["telemetry_verdict"]] + list(
                diag.get("evidence") or [])
    return benchmark
