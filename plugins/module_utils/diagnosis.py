# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""What limited the GPUs during a benchmark level, from the telemetry summary (``telemetry.summarise``).

``diagnose(summary, thresholds, xid)`` returns ``{verdict, label, evidence, invalid, invalid_reasons,
bottleneck, figures}``. Every verdict names the figures it rests on.

What nvidia-smi's figures mean (``nvidia-smi --help-query-gpu``, driver 580.159.04): ``utilization.gpu``
is the share of the sample period in which *any* kernel ran, not how much of the GPU worked; power is a
1 s board average; the clock event reasons say why the SM clock is below its maximum. So:

* tiny kernels replayed back to back (CUDA graphs, as SGLang decodes) keep utilization above 90 % at a
  fifth of the power limit and near-maximum clocks: launch / latency bound (recorded on a real H200:
  ``tests/fixtures/nvidia-smi/h200-x1-loads/`` and ``tests/fixtures/telemetry/``);
* a large matmul holds the board at its power limit with the software power cap active and the clock
  well below its maximum: power bound, which is normal under full load;
* busy below the cap with device memory read or written most of the time (``utilization.memory``; 100 %
  for HBM-streaming copies on the H200, 25 % for the bf16 matmul): memory bound;
* busy at high power below the cap, memory not busy most of the time: compute bound;
* kernels running only part of the time (utilization between idle and busy; 24 % on the H200 for tiny
  kernels launched one by one from Python, clocks at maximum): the GPU waits for the host (eager launches,
  scheduler, tokenizer, client) - ``host_bound``;
* utilization near 0: ``idle`` (clocks do not tell it apart: a process holding a CUDA context keeps the
  H200 at its maximum SM clock and 119 W with nothing running; with no such process it drops to 345 MHz
  and 78 W);
* HW slowdown / thermal slowdown / power brake, a new Xid, new ECC errors: ``invalid_gpu_state``, the
  point's figures are not results.

Stdlib only; runs on the target (Python 3.9+) as well as on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

VERDICTS = (
    "invalid_gpu_state",
    "unknown",
    "imbalanced",
    "idle",
    "host_bound",
    "launch_bound",
    "interconnect_bound",
    "power_bound",
    "memory_bound",
    "compute_bound",
)

LABELS = {
    "invalid_gpu_state": "GPU state invalid during the level: the point's figures are not results",
    "unknown": "not enough telemetry to tell what limited the GPUs",
    "imbalanced": "GPUs unevenly loaded: some work while others wait (a rank or expert imbalance, or GPUs the "
    "server does not use)",
    "idle": "GPUs idle: the bottleneck is before the GPU (CPU-side launches, scheduler, tokenizer, client)",
    "host_bound": "GPUs starved by the host: kernels run only part of the time and the GPUs wait between them for "
    "the CPU to launch work (eager launches from Python, scheduler, tokenizer, client)",
    "launch_bound": "launch / latency bound: many small kernels or interconnect waits, not compute bound",
    "interconnect_bound": "interconnect bound: the TP group's all-reduces alone, at the latency measured on this host "
    "and NCCL environment, take a large share of each decode step (module_utils/interconnect.py)",
    "power_bound": "power bound: the GPUs run at their power limit and the software power cap lowers their clocks "
    "(normal under full load)",
    "memory_bound": "memory bound: device memory is read or written most of the time while power stays below the "
    "cap (bandwidth, not arithmetic, limits the kernels)",
    "compute_bound": "compute bound: kernels keep the GPUs busy at high power below the power cap, memory not busy "
    "most of the time",
}

# Every threshold the rules use; the role exposes each one as a variable. Figures are pooled over all
# GPUs' samples in the level's window unless said otherwise.
DEFAULT_THRESHOLDS = {
    # fewer samples per GPU than this: unknown (4 Hz sampling gives 40 in a 10 s level)
    "min_samples": 4,
    # mean utilization.gpu (%) at or above which the GPUs count as busy
    "busy_util_pct": 90.0,
    # mean utilization.gpu (%) below which the GPUs are idle (clocks do not tell: a process holding a CUDA
    # context keeps an H200 at its maximum SM clock with nothing running)
    "idle_util_pct": 10.0,
    # mean SM clock / clocks.max.sm below which a GPU is at idle clocks (H200 idle: 345/1980 = 0.17)
    "clock_awake_frac": 0.5,
    # mean utilization.memory (%) at or above which busy GPUs below the power cap are memory bound
    "memory_busy_pct": 60.0,
    # mean SM clock / clocks.max.sm at or above which clocks are "near max" (launch bound)
    "clock_near_max_frac": 0.85,
    # mean power / enforced limit at or below which busy GPUs are launch bound, above it compute bound
    "launch_power_frac_max": 0.60,
    # mean power / enforced limit at or above which the GPUs are at their limit ...
    "power_cap_frac": 0.85,
    # ... with the software power cap active in at least this share of samples
    "power_cap_share_min": 0.20,
    # at the limit without the clock event reasons sampled: mean power / limit at or above this
    "power_cap_frac_unsampled": 0.95,
    # spread of per-GPU mean utilization (percentage points) above which the GPUs are unevenly loaded
    "imbalance_util_pct": 40.0,
    # samples of one GPU with HW slowdown, HW / SW thermal slowdown or HW power brake that make the level
    # invalid (nvidia-smi: HW slowdown "may be also reported during PState or clock change", so one
    # sample alone is not enough by default)
    "slowdown_samples_max": 1,
    # new uncorrected / corrected volatile ECC errors during the level above which it is invalid
    "ecc_uncorrected_max": 0,
    "ecc_corrected_max": 0,
}

_SLOWDOWN_REASONS = (
    ("hw_slowdown", "HW slowdown"),
    ("hw_thermal_slowdown", "HW thermal slowdown"),
    ("sw_thermal_slowdown", "SW thermal slowdown"),
    ("hw_power_brake_slowdown", "HW power brake slowdown"),
)


def check_thresholds(thresholds):
    """DEFAULT_THRESHOLDS updated with ``thresholds``; ValueError naming any unknown or non-numeric key."""
    merged = dict(DEFAULT_THRESHOLDS)
    if thresholds is None:
        return merged
    if not isinstance(thresholds, dict):
        raise ValueError("diagnosis thresholds must be a mapping of name to number, got %r" % (thresholds,))
    unknown = sorted(k for k in thresholds if k not in DEFAULT_THRESHOLDS)
    if unknown:
        raise ValueError(
            "unknown diagnosis threshold(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(DEFAULT_THRESHOLDS)))
        )
    for key, value in thresholds.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError("diagnosis threshold %s must be a number >= 0, got %r" % (key, value))
        merged[key] = value
    return merged


def _gpu(index):
    return "the GPU" if index is None else "GPU %s" % index


def _pct(frac):
    return "%.0f %%" % (100.0 * frac)


def _mean(block, key):
    stat = block.get(key)
    return stat["mean"] if stat else None


def _headline(block, gpu_count):
    """'util 99 % (p5 97 %), power 331 W = 55 % of 600 W, SM clock 2970/3090 MHz' for a block."""
    parts = []
    util = block.get("util")
    if util:
        parts.append("util %.0f %% (p5 %.0f %%)" % (util["mean"], util["p5"]))
    else:
        parts.append("util not reported")
    power, limit, frac = block.get("power_w"), block.get("power_limit_w"), block.get("power_frac")
    if power and limit and frac:
        parts.append("power %.0f W = %s of %.0f W" % (power["mean"], _pct(frac["mean"]), limit))
    elif power:
        parts.append("power %.0f W (limit not reported)" % power["mean"])
    else:
        parts.append("power not reported")
    clock, clock_max = block.get("sm_clock_mhz"), block.get("sm_clock_max_mhz")
    if clock and clock_max:
        parts.append("SM clock %.0f/%.0f MHz" % (clock["mean"], clock_max))
    elif clock:
        parts.append("SM clock %.0f MHz" % clock["mean"])
    text = ", ".join(parts)
    if gpu_count > 1:
        text = "mean of %d GPUs: %s" % (gpu_count, text)
    return text


def _reasons_text(block):
    shares = block.get("reasons") or {}
    sampled = {k: v for k, v in shares.items() if v is not None}
    if not sampled:
        return "clock event reasons not sampled"
    active = sorted(((v, k) for k, v in sampled.items() if v > 0), reverse=True)
    if not active:
        return "no clock event reason active"
    return "clock event reasons: " + ", ".join("%s in %s of samples" % (k, _pct(v)) for v, k in active)


def _sampling_text(summary):
    gpus = summary.get("gpus") or []
    counts = [g["samples"] for g in gpus]
    rate = summary.get("rate_hz")
    duration = (summary.get("window") or {}).get("duration_s")
    text = "%d samples per GPU" % min(counts) if counts else "no samples"
    if rate:
        text += " at %.1f Hz" % rate
    if duration:
        text += " over %.1f s" % duration
    return text


def _invalid_reasons(summary, th, xid):
    reasons = []
    for event in xid or ():
        who = ""
        pid, process = event.get("pid"), event.get("process")
        if pid is not None or process:
            who = " (%s)" % " ".join(p for p in ("pid %s" % pid if pid is not None else "", process or "") if p)
        reasons.append(
            "Xid %s on GPU PCI:%s%s: %s" % (event.get("xid"), event.get("pci"), who, event.get("message") or "")
        )
    for gpu in summary.get("gpus") or () if summary else ():
        counts = gpu.get("reason_counts") or {}
        for key, name in _SLOWDOWN_REASONS:
            n = counts.get(key) or 0
            if n > th["slowdown_samples_max"]:
                reasons.append("%s: %s active in %d of %d samples" % (_gpu(gpu["index"]), name, n, gpu["samples"]))
        ecc = gpu.get("ecc") or {}
        for kind, limit in (("uncorrected", th["ecc_uncorrected_max"]), ("corrected", th["ecc_corrected_max"])):
            counter = ecc.get(kind)
            if counter and counter["delta"] > limit:
                reasons.append(
                    "%s: %d new %s volatile ECC error(s) during the level (%d -> %d)"
                    % (_gpu(gpu["index"]), counter["delta"], kind, counter["first"], counter["last"])
                )
    return reasons


def _figures(block):
    return {
        "util_pct": _mean(block, "util"),
        "util_p5_pct": block["util"]["p5"] if block.get("util") else None,
        "mem_util_pct": _mean(block, "mem_util"),
        "power_w": _mean(block, "power_w"),
        "power_limit_w": block.get("power_limit_w"),
        "power_frac": _mean(block, "power_frac"),
        "sm_clock_mhz": _mean(block, "sm_clock_mhz"),
        "sm_clock_max_mhz": block.get("sm_clock_max_mhz"),
        "sm_clock_frac": _mean(block, "sm_clock_frac"),
        "sw_power_cap_share": (block.get("reasons") or {}).get("sw_power_cap"),
        "gpu_idle_share": (block.get("reasons") or {}).get("gpu_idle"),
    }


def _bottleneck(summary, th):
    """(verdict, extra evidence, unknown reason) from the figures alone."""
    block = summary["all"]
    fig = _figures(block)
    util, power_frac, clock_frac = fig["util_pct"], fig["power_frac"], fig["sm_clock_frac"]
    extra = []
    if util is None:
        return "unknown", extra, "utilization.gpu was not reported ([N/A] in every sample)"
    spread = (block.get("spread") or {}).get("util")
    if summary.get("gpu_count", 0) > 1 and spread and spread["max"] - spread["min"] > th["imbalance_util_pct"]:
        extra.append(
            "GPU %s util %.0f %% while GPU %s util %.0f %% (spread %.0f points > %.0f)"
            % (
                spread["max_gpu"],
                spread["max"],
                spread["min_gpu"],
                spread["min"],
                spread["max"] - spread["min"],
                th["imbalance_util_pct"],
            )
        )
        return "imbalanced", extra, None
    idle_share = fig["gpu_idle_share"]
    if util < th["idle_util_pct"]:
        clocks_down = clock_frac < th["clock_awake_frac"] if clock_frac is not None else None
        if clocks_down is None and idle_share is not None:
            clocks_down = idle_share >= 0.5
        if clocks_down:
            extra.append(
                "util %.0f %% < %.0f %%, SM clock down at idle (%s of max): nothing runs on the GPUs"
                % (util, th["idle_util_pct"], _pct(clock_frac) if clock_frac is not None else "n/a")
            )
        elif clocks_down is False:
            extra.append(
                "util %.0f %% < %.0f %% with SM clock at %s of max: a process holds the GPUs awake (CUDA context) "
                "but launches (almost) nothing" % (util, th["idle_util_pct"], _pct(clock_frac))
            )
        else:
            extra.append("util %.0f %% < %.0f %%" % (util, th["idle_util_pct"]))
        return "idle", extra, None
    if util < th["busy_util_pct"]:
        extra.append(
            "util %.0f %% between %.0f %% and %.0f %%%s: kernels run only part of the time, the GPU waits between them"
            % (
                util,
                th["idle_util_pct"],
                th["busy_util_pct"],
                " with SM clock at %s of max" % _pct(clock_frac) if clock_frac is not None else "",
            )
        )
        return "host_bound", extra, None
    # Busy: tell launch bound from power / compute bound by the power drawn.
    if power_frac is None:
        return (
            "unknown",
            extra,
            (
                "util %.0f %% but power or its limit was not reported: launch bound cannot be told from compute bound"
                % util
            ),
        )
    cap_share = fig["sw_power_cap_share"]
    if power_frac >= th["power_cap_frac"] and cap_share is not None and cap_share >= th["power_cap_share_min"]:
        extra.append("SW power cap active in %s of samples" % _pct(cap_share))
        return "power_bound", extra, None
    if cap_share is None and power_frac >= th["power_cap_frac_unsampled"]:
        extra.append("power at %s of the limit (clock event reasons not sampled)" % _pct(power_frac))
        return "power_bound", extra, None
    mem_util = fig["mem_util_pct"]
    if mem_util is not None and mem_util >= th["memory_busy_pct"]:
        extra.append(
            "memory busy %.0f %% of the time (>= %.0f %%) at %s of the power limit"
            % (mem_util, th["memory_busy_pct"], _pct(power_frac))
        )
        return "memory_bound", extra, None
    if power_frac <= th["launch_power_frac_max"]:
        if clock_frac is not None and clock_frac < th["clock_near_max_frac"]:
            extra.append(
                "SM clock only %s of max although power is low: clocks held down (see the clock event reasons)"
                % _pct(clock_frac)
            )
        else:
            extra.append(
                "util >= %.0f %% at power <= %s of the limit: kernels keep the GPU occupied but not working hard"
                % (th["busy_util_pct"], _pct(th["launch_power_frac_max"]))
            )
        return "launch_bound", extra, None
    extra.append(
        "power %s of the limit (> %s) without the SW power cap%s"
        % (
            _pct(power_frac),
            _pct(th["launch_power_frac_max"]),
            ", memory busy %.0f %% of the time" % mem_util if mem_util is not None else "",
        )
    )
    return "compute_bound", extra, None


def diagnose(summary, thresholds=None, xid=None):
    """What limited the GPUs during one level.

    ``summary``: ``telemetry.summarise(rows, t_start, t_end)``; ``thresholds``: overrides of
    DEFAULT_THRESHOLDS (ValueError on an unknown key); ``xid``: ``telemetry.xid_events(..., since=t_start)``.
    Returns ``{verdict, label, evidence, invalid, invalid_reasons, bottleneck, figures}``: ``verdict`` is
    one of VERDICTS; ``bottleneck`` is what the figures alone say (equal to the verdict unless the level
    is invalid or unknown); ``figures`` the pooled numbers the rules read."""
    th = check_thresholds(thresholds)
    invalid_reasons = _invalid_reasons(summary, th, xid)
    gpus = (summary or {}).get("gpus") or []
    evidence = []
    unknown_reason = None
    figures = {}
    bottleneck = "unknown"
    if not summary or not gpus:
        unknown_reason = "no telemetry samples in the level's window"
    else:
        few = [g for g in gpus if g["samples"] < th["min_samples"]]
        figures = _figures(summary["all"])
        evidence.append(_headline(summary["all"], len(gpus)))
        if few:
            unknown_reason = "only %d sample(s) for GPU %s in the window (need %d)" % (
                few[0]["samples"],
                few[0]["index"],
                th["min_samples"],
            )
        else:
            bottleneck, extra, unknown_reason = _bottleneck(summary, th)
            evidence.extend(extra)
            if bottleneck == "imbalanced":
                evidence.extend("GPU %s: %s" % (g["index"], _headline(g, 1)) for g in gpus)
        evidence.append(_reasons_text(summary["all"]))
        evidence.append(_sampling_text(summary))
    if invalid_reasons:
        verdict = "invalid_gpu_state"
        evidence = invalid_reasons + evidence
    elif unknown_reason:
        verdict = "unknown"
        evidence.insert(0, unknown_reason)
    else:
        verdict = bottleneck
    label = LABELS[verdict]
    if verdict == "unknown":
        label = "%s: %s" % (label, unknown_reason)
    return {
        "verdict": verdict,
        "label": label,
        "evidence": evidence,
        "invalid": bool(invalid_reasons),
        "invalid_reasons": invalid_reasons,
        "bottleneck": bottleneck,
        "figures": figures,
    }
