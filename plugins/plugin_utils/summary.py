# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The comparison table of a sweep, read from ``results/<sweep_id>/points.jsonl`` (docs/results.md).

Pure and stdlib only: the results callback (which rewrites ``summary.md`` / ``summary.csv`` at the end of
every run), the ``moesweep report`` command and the Python API all import it.

* ``load_points(path_or_dir)`` reads the records (a last line without its newline is a torn append and is
  skipped, as docs/results.md says a reader must); ``latest(records)`` keeps the last record of each
  (host, point, kind) of a sweep, which is what a resumed run means.
* ``summary_rows(records, reference_concurrency)`` gives one row per point: status and its decisive
  reason, startup time, bench_serving's output and total token throughput at every concurrency level
  (a number only for a level whose every request succeeded on a valid GPU state; any other level says
  ``failed`` or ``invalid``, never a number), TTFT, GPU utilization and power at the reference level, the
  diagnosis verdict, the GSM8K accuracy with its comparison to the reference backend
  (``accuracy.reference_comparisons``), and whether the point ran on a SIMULATED host.
* ``best_point(records, reference_concurrency)`` is the passed point (never a ``bad_accuracy`` one) with the
  highest output throughput at the reference level: the steady-state figure with its 95 % interval where the level
  has one (module_utils bench_stats), else bench_serving's whole-run figure. Points whose figure cannot be told apart
  from the highest one (``bench_stats.compare``: the interval of the difference holds 0, or the difference is within
  the precision target) tie with it; among the tied points the one with the lower p99 TTFT is the best, and the
  others are marked ``tie`` (``ties``).
* ``render_markdown`` / ``render_csv`` / ``render_text`` draw the rows. Rows from simulated hosts say
  SIMULATED in every rendering, and a table never holds simulated and measured rows without a column
  saying which is which (Markdown and text put them in separate tables as well).

The per-GPU and per-user rates are those of vLLM's ``vllm bench sweep plot_pareto``
(vllm/benchmarks/sweep/plot_pareto.py, ``_prepare_records``): tokens/s/user = output throughput /
concurrency, tokens/s/GPU = output throughput / GPU count, the GPU count being the server's world size.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import json
import os

from ansible_collections.moesweep.sweep.plugins.module_utils import bench_stats
from ansible_collections.moesweep.sweep.plugins.plugin_utils import accuracy as accuracy_test
from ansible_collections.moesweep.sweep.plugins.plugin_utils.status import PASSED

SCHEMA = "moesweep.point/2"
POINTS_FILE = "points.jsonl"
STATUSES = ("passed", "refused", "crashed", "hang", "timeout", "bad_output", "bad_accuracy", "bench_failed",
            "invalid_gpu_state", "failed", "interrupted", "unreachable")
# Startup phases of readiness.timeline (plugins/module_utils/sglang_log.py PHASES), as the report names them.
STARTUP_PHASES = (
    ("init", "init"),
    ("load_weights", "load weights"),
    ("kv_cache", "KV cache"),
    ("cuda_graph", "CUDA graph capture"),
    ("http_up", "HTTP server up"),
    ("warmup", "warmup"),
)
SIMULATED_NOTE = ("SIMULATED: rows marked SIMULATED ran on simulated GPU hosts; their token rates are simulation "
                  "parameters, not measurements, and say nothing about real hardware.")
LEVEL_STATES = ("ok", "failed", "invalid", "not_run")
MAX_REASONS_PER_LEVEL = 6


class ResultsError(ValueError):
    """A results file or directory that cannot be read as a sweep: the message names the file and the fix."""


# --------------------------------------------------------------------------------------------------
# Reading


def points_path(path_or_dir):
    """``points.jsonl`` of a sweep directory, or the file itself."""
    path = os.fspath(path_or_dir)
    if os.path.isdir(path):
        return os.path.join(path, POINTS_FILE)
    return path


def parse_points(text, source="points.jsonl"):
    """Records from the text of a points.jsonl. A last line without a newline is read when it is a whole JSON
    object, and skipped when torn (a crash mid-append); blank lines are skipped; any other line that is not a JSON
    object raises ResultsError."""
    records = []
    lines = text.split("\n")
    last = lines.pop()  # after the last newline: "" for a complete file
    if last.strip():
        try:
            json.loads(last)
            lines.append(last)
        except ValueError:
            pass  # torn mid-append
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ResultsError(
                "%s line %d is not JSON (%s): the file was edited or damaged; restore it, or delete that line and "
                "run the sweep again to record the point anew" % (source, number, exc)) from exc
        if not isinstance(record, dict):
            raise ResultsError("%s line %d is a JSON %s, not a point record (an object)"
                               % (source, number, type(record).__name__))
        schema = record.get("schema")
        if schema != SCHEMA:
            raise ResultsError(
                "%s line %d has schema %r; this moesweep reads %s records only (written by the "
                "moesweep.sweep.results callback of this version)" % (source, number, schema, SCHEMA))
        records.append(record)
    return records


def load_points(path_or_dir):
    """The records of ``results/<sweep_id>/points.jsonl`` (a directory or the file), in file order."""
    given = os.fspath(path_or_dir)
    path = points_path(given)
    if not os.path.exists(path):
        if os.path.isdir(given):
            raise ResultsError(
                "%s holds no %s: it is not a sweep's results directory (give results/<sweep_id>, the directory "
                "the results callback wrote)" % (given, POINTS_FILE))
        raise ResultsError("%s does not exist: give a sweep's results directory (results/<sweep_id>) or its %s"
                           % (given, POINTS_FILE))
    if os.path.isdir(path):
        raise ResultsError("%s is a directory, not a points file" % path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ResultsError("cannot read %s: %s" % (path, exc.strerror or exc)) from exc
    if b"\x00" in data[:65536]:
        raise ResultsError("%s is not a text file (binary data): give the points.jsonl the results callback wrote"
                           % path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError("%s is not UTF-8 text (%s): give the points.jsonl the results callback wrote"
                           % (path, exc)) from exc
    return parse_points(text, path)


def _key(record):
    return (record.get("sweep_id"), record.get("host"), record.get("point"), record.get("kind") or "point")


def latest(records):
    """The last record of each (host, point, kind) of a sweep, in the order the keys first appeared."""
    order, last = [], {}
    for record in records:
        key = _key(record)
        if key not in last:
            order.append(key)
        last[key] = record
    return [last[k] for k in order]


def point_records(records):
    return [r for r in latest(records) if (r.get("kind") or "point") == "point"]


def restore_records(records):
    return [r for r in latest(records) if r.get("kind") == "restore"]


def is_simulated(record):
    return record.get("simulated") is True


def data_label(record_or_row):
    return "SIMULATED" if record_or_row.get("simulated") is True else "measured"


# --------------------------------------------------------------------------------------------------
# Figures of one record


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _levels_raw(record):
    levels = ((record.get("benchmark") or {}).get("levels")) or []
    return [lv for lv in levels if isinstance(lv, dict) and isinstance(lv.get("concurrency"), int)]


def _first_error(level):
    errors = level.get("errors") or []
    for e in errors:
        if isinstance(e, dict) and e.get("error"):
            count = e.get("count")
            return "%s%s" % (e["error"], " (x%d)" % count if isinstance(count, int) and count > 1 else "")
        if isinstance(e, str) and e:
            return e
    return None


def level_state(level):
    """(state, reason) of one benchmark level: ``ok``, ``failed`` (requests failed or it timed out) or
    ``invalid`` (the GPU state was invalid during it: its figures are not results)."""
    diagnosis = level.get("diagnosis") or {}
    if diagnosis.get("invalid") or diagnosis.get("verdict") == "invalid_gpu_state":
        reasons = diagnosis.get("invalid_reasons") or []
        return "invalid", reasons[0] if reasons else "GPU state invalid during the level"
    if level.get("ok") is True:
        return "ok", None
    failed = level.get("failed")
    figures = level.get("figures") or {}
    completed = level.get("completed", figures.get("completed"))
    parts = []
    if isinstance(failed, int) and failed > 0:
        total = (completed or 0) + failed if isinstance(completed, int) else None
        parts.append("%d of %d requests failed" % (failed, total) if total else "%d requests failed" % failed)
    error = _first_error(level)
    if error:
        parts.append(error)
    return "failed", ": ".join(parts) if parts else "the level did not complete"


def levels(record):
    """The record's levels, sorted: [{concurrency, state, reason, figures, telemetry, diagnosis, ...}]."""
    out = []
    for lv in sorted(_levels_raw(record), key=lambda x: x["concurrency"]):
        state, reason = level_state(lv)
        out.append({
            "concurrency": lv["concurrency"],
            "state": state,
            "reason": reason,
            "figures": lv.get("figures") or {},
            "telemetry": lv.get("telemetry"),
            "diagnosis": lv.get("diagnosis"),
            "energy": lv.get("energy"),
            "joules_per_token": lv.get("joules_per_token"),
            "errors": lv.get("errors") or [],
            "command": lv.get("command"),
            "num_prompts": lv.get("num_prompts"),
            "stats": lv.get("stats") if isinstance(lv.get("stats"), dict) else None,
        })
    return out


def level_at(record, concurrency):
    for lv in levels(record):
        if lv["concurrency"] == concurrency:
            return lv
    return None


def ok_figure(record, concurrency, key):
    """bench_serving's figure ``key`` at ``concurrency`` when that level is ok, else None."""
    lv = level_at(record, concurrency)
    if lv is None or lv["state"] != "ok":
        return None
    return _num(lv["figures"].get(key))


def throughput_at(record, concurrency):
    """The output throughput that ranks a point at ``concurrency`` when that level is ok: {value, low, high,
    half_width, half_width_rel, requests, source, precision} - the steady-state figure with its interval where the
    level has one, else bench_serving's whole-run figure (``source`` says which; no interval). None otherwise."""
    lv = level_at(record, concurrency)
    if lv is None or lv["state"] != "ok":
        return None
    stats = lv.get("stats") or {}
    steady = stats.get("steady_output_throughput") or {}
    precision = _num(stats.get("precision_target")) or bench_stats.DEFAULT_PRECISION
    if _num(steady.get("value")) is not None:
        return {"value": _num(steady["value"]), "low": _num(steady.get("low")), "high": _num(steady.get("high")),
                "half_width": _num(steady.get("half_width")), "half_width_rel": _num(steady.get("half_width_rel")),
                "requests": steady.get("requests"), "steady_requests": steady.get("steady_requests"),
                "source": "steady state", "precision": precision,
                # the level ended (its budget spent) with its interval wider than the target
                "precise": stats.get("precise") if stats.get("precision_target") else None}
    value = _num(lv["figures"].get("output_throughput"))
    if value is None:
        return None
    return {"value": value, "low": None, "high": None, "half_width": None, "half_width_rel": None,
            "requests": lv.get("num_prompts"), "steady_requests": None, "source": "whole run", "precision": precision}


def latency_at(record, concurrency, name="ttft", pct=99):
    """{value, low, high, n} of a latency percentile (``name`` ttft / itl / tpot) of an ok level, in ms, from its
    stats; None when the level has none."""
    lv = level_at(record, concurrency)
    if lv is None or lv["state"] != "ok" or not lv.get("stats"):
        return None
    entry = ((lv["stats"].get("latency") or {}).get(name)) or {}
    iv = entry.get("p%d" % pct)
    if not isinstance(iv, dict):
        return None
    return dict(iv, n=entry.get("n"))


def sla_concurrency(record, ttft_p99_ms=None, itl_p99_ms=None):
    """The SLA search over a point's levels, as vLLM's ``vllm bench sweep serve_sla`` and AIPerf's goodput ask
    it: the highest concurrency whose p99 TTFT and p99 ITL meet the SLOs (ms; None: no such SLO), among the levels
    that ran (no extra level is run). Returns {concurrency, confident, output_tok_s, levels}: ``concurrency`` the
    highest level meeting both by its p99 values (None when none does); ``confident`` the highest whose 95 % upper
    bounds meet them too (a p99 the sample cannot bound from above is not confident); ``levels`` per level:
    {concurrency, meets, confident, ttft_p99, itl_p99}. A level above one that failed its SLO does not count,
    since latency grows with concurrency and a later pass is noise."""
    out = {"concurrency": None, "confident": None, "output_tok_s": None, "levels": []}
    broken = broken_conf = False
    for lv in levels(record):
        if lv["state"] != "ok":
            continue
        c = lv["concurrency"]
        checks, conf = [], []
        for slo, name, key in ((ttft_p99_ms, "ttft", "p99_ttft_ms"), (itl_p99_ms, "itl", "p99_itl_ms")):
            if slo is None:
                continue
            iv = latency_at(record, c, name) or {"value": _num(lv["figures"].get(key)), "high": None}
            checks.append(iv.get("value") is not None and iv["value"] <= slo)
            conf.append(iv.get("high") is not None and iv["high"] <= slo)
        meets, confident = all(checks), all(conf)
        broken = broken or not meets
        broken_conf = broken_conf or not confident
        out["levels"].append({"concurrency": c, "meets": meets, "confident": confident,
                              "ttft_p99": latency_at(record, c, "ttft"), "itl_p99": latency_at(record, c, "itl")})
        if not broken:
            thr = throughput_at(record, c)
            out["concurrency"], out["output_tok_s"] = c, thr["value"] if thr else None
        if not broken_conf:
            out["confident"] = c
    return out


def _flag(flags, *names):
    for name in names:
        if name in flags:
            return flags[name]
        if "--" + name in flags:
            return flags["--" + name]
    return None


def _int_flag(flags, default, *names):
    value = _flag(flags, *names)
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def gpu_count(record):
    """GPUs the server runs on: tp x pp, times dp unless DP attention splits the TP group (sglang
    python/sglang/srt/managers/data_parallel_controller.py, v0.5.9, ``launch_dp_schedulers``: each data-parallel
    replica starts ``tp_size * pp_size`` GPUs further; ``launch_dp_attention_schedulers`` keeps one TP group).
    Falls back to the GPUs the telemetry sampled, then to the host's GPU count."""
    flags = (record.get("launch") or {}).get("flags")
    if isinstance(flags, dict) and flags:
        tp = _int_flag(flags, 1, "tp-size", "tensor-parallel-size", "tp")
        pp = _int_flag(flags, 1, "pp-size", "pipeline-parallel-size")
        dp = _int_flag(flags, 1, "dp-size", "data-parallel-size", "dp")
        if _flag(flags, "enable-dp-attention") is True:
            dp = 1
        return max(1, tp) * max(1, pp) * max(1, dp)
    for lv in levels(record):
        count = (lv.get("telemetry") or {}).get("gpu_count")
        if isinstance(count, int) and count > 0:
            return count
    count = (record.get("facts") or {}).get("gpu_count")
    return count if isinstance(count, int) and count > 0 else None


def startup_seconds(record):
    return _num((record.get("readiness") or {}).get("elapsed"))


def startup_phases(record):
    """[(label, seconds)] of the startup from readiness.timeline, in phase order, plus ``other`` for the rest
    of the readiness wait (the journal's first record came after the restart, or phases not logged)."""
    readiness = record.get("readiness") or {}
    timeline = readiness.get("timeline") or {}
    out = []
    for key, label in STARTUP_PHASES:
        entry = timeline.get(key)
        if isinstance(entry, dict) and (_num(entry.get("duration")) or 0) > 0:
            out.append((label, float(entry["duration"])))
    elapsed = _num(readiness.get("elapsed"))
    if elapsed is not None:
        rest = elapsed - sum(s for _l, s in out)
        if rest > 0.05:
            out.append(("other", rest))
    return out


def telemetry_at(record, concurrency):
    """{util_pct, power_pct (of the limit), power_w, power_limit_w} pooled over the GPUs at an ok level."""
    lv = level_at(record, concurrency)
    if lv is None or lv["state"] != "ok":
        return {}
    figures = (lv.get("diagnosis") or {}).get("figures") or {}
    pooled = (lv.get("telemetry") or {}).get("all") or {}

    def mean(key):
        stat = pooled.get(key)
        return _num(stat.get("mean")) if isinstance(stat, dict) else None

    util = _num(figures.get("util_pct"))
    util = util if util is not None else mean("util")
    frac = _num(figures.get("power_frac"))
    frac = frac if frac is not None else mean("power_frac")
    power = _num(figures.get("power_w"))
    power = power if power is not None else mean("power_w")
    limit = _num(figures.get("power_limit_w"))
    limit = limit if limit is not None else _num(pooled.get("power_limit_w"))
    return {"util_pct": util, "power_pct": None if frac is None else 100.0 * frac, "power_w": power,
            "power_limit_w": limit}


def allreduce_pct(record, concurrency):
    """The estimated share (%) of a decode step the TP group's all-reduces take at an ok level (module_utils
    interconnect.estimate, from the host's measurement under the point's NCCL environment), or None."""
    lv = level_at(record, concurrency) if concurrency is not None else None
    if lv is None or lv["state"] != "ok":
        return None
    share = _num(((lv.get("diagnosis") or {}).get("interconnect") or {}).get("share"))
    return None if share is None else 100.0 * share


def diagnosis_verdict(record, concurrency=None):
    if any(lv["state"] == "invalid" for lv in levels(record)):
        return "invalid_gpu_state"
    if concurrency is not None:
        lv = level_at(record, concurrency)
        if lv is not None and lv["state"] == "ok" and (lv.get("diagnosis") or {}).get("verdict"):
            return lv["diagnosis"]["verdict"]
    return (record.get("diagnosis") or {}).get("verdict")


# --------------------------------------------------------------------------------------------------
# Why a point did not pass


def _first_line(text, limit=None):
    text = "" if text is None else str(text)
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if limit is None or len(line) <= limit else line[:limit - 1] + "\u2026"
    return ""


def decisive(record):
    """The decisive short reason of a point's status (one line), or "" for a passed point."""
    status = record.get("status")
    preflight = record.get("preflight") or {}
    readiness = record.get("readiness") or {}
    smoke = record.get("smoke") or {}
    if status == PASSED:
        return "FORCED past the preflight" if preflight.get("forced") else ""
    if status == "refused":
        for reason in preflight.get("reasons") or []:
            if isinstance(reason, dict) and reason.get("status") in ("unsupported", "unknown"):
                return "%s: %s" % (reason.get("rule"), _first_line(reason.get("reason")))
        return _first_line(record.get("failed_msg")) or "refused by the preflight"
    # a server that was ready, then died or stalled during the smoke check or the benchmark: its readiness line is
    # the ready line, never the reason; the judge of its run after the fact (the stage's crash) is
    late = {}
    if readiness.get("state") == "ready":
        for stage in (smoke, record.get("accuracy") or {}, record.get("benchmark") or {}):
            if stage.get("state") == "server_died":
                late = stage.get("crash") or {}
                break
    if status == "crashed" and late:
        line = _first_line(late.get("decisive_line")) if late.get("state") == "crashed" else ""
        return "after ready: " + (line or _first_line(record.get("failed_msg")) or "the server died")
    if status == "hang" and readiness.get("state") == "ready":
        return "after ready: the unit runs but stopped answering" + (
            ": " + _first_line(record.get("failed_msg")) if record.get("failed_msg") else "")
    if status == "crashed":
        line = _first_line(readiness.get("decisive_line"))
        where = readiness.get("phase")
        after = " after ready" if readiness.get("after_ready") else ""
        prefix = "in %s%s: " % (where, after) if where else ""
        return prefix + (line or _first_line(record.get("failed_msg")) or "the server died")
    if status in ("hang", "timeout"):
        elapsed = _num(readiness.get("elapsed"))
        phase = readiness.get("phase") or "?"
        what = "no log progress" if status == "hang" else "not ready"
        line = _first_line(readiness.get("decisive_line"))
        text = "%s in phase %s%s" % (what, phase, " after %.0f s" % elapsed if elapsed is not None else "")
        return text + (": " + line if line else "")
    if status == "bad_output":
        reasons = smoke.get("reasons") or []
        return _first_line(reasons[0]) if reasons else "the smoke check found garbage output"
    if status == "bad_accuracy":
        return accuracy_text(record.get("accuracy") or {}) or "GSM8K accuracy below the threshold"
    if status in ("bench_failed", "invalid_gpu_state"):
        wanted = "invalid" if status == "invalid_gpu_state" else "failed"
        for lv in levels(record):
            if lv["state"] == wanted:
                return "c%d: %s" % (lv["concurrency"], _first_line(lv["reason"]))
        for lv in levels(record):
            if lv["state"] != "ok":
                return "c%d: %s" % (lv["concurrency"], _first_line(lv["reason"]))
    msg = _first_line(record.get("failed_msg"))
    task = record.get("failed_task")
    if msg or task:
        return "%s%s" % ("%s: " % task if task and msg else task or "", msg)
    return record.get("cause") or status or "unknown"


def _citations(reason):
    """The sources of a preflight finding: ``citations``, and ``citation`` (one or several, space separated)."""
    urls = []
    for text in [reason.get("citation")] + list(reason.get("citations") or []):
        for url in str(text or "").split():
            if url not in urls:
                urls.append(url)
    return urls


def failure_details(record):
    """What a report says of a point that did not pass: {title, status, cause, summary, lines, excerpt,
    citations, alternatives}. ``lines`` are the decisive lines (log line, errors, smoke reasons, the preflight's
    reasons) verbatim; ``excerpt`` the traceback excerpt or the garbage texts; ``citations`` the sources."""
    status = record.get("status")
    preflight = record.get("preflight") or {}
    readiness = record.get("readiness") or {}
    smoke = record.get("smoke") or {}
    lines, citations, excerpt = [], [], None
    for reason in preflight.get("reasons") or []:
        if not isinstance(reason, dict) or reason.get("status") not in ("unsupported", "unknown"):
            continue
        lines.append("preflight [%s] %s: %s" % (reason.get("status"), reason.get("rule"), reason.get("reason")))
        if reason.get("error"):
            lines.append("the launch would fail with: %s" % reason["error"])
        for url in _citations(reason):
            if url not in citations:
                citations.append(url)
    if preflight.get("forced"):
        lines.append("FORCED past the preflight (force: true)")
    if readiness.get("state") in ("crashed", "hang", "timeout") or status in ("crashed", "hang", "timeout"):
        where = readiness.get("phase")
        lines.append("readiness: %s%s%s" % (
            readiness.get("state") or status,
            " (%s)" % readiness["cause"] if readiness.get("cause") else "",
            " in phase %s%s" % (where, " after ready" if readiness.get("after_ready") else "") if where else ""))
        if readiness.get("decisive_line"):
            lines.append("decisive line: %s" % readiness["decisive_line"])
        excerpt = readiness.get("traceback") or None
    if smoke.get("state") not in (None, "ok"):
        for text in smoke.get("reasons") or []:
            lines.append("smoke: %s" % text)
        texts = []
        for answer in smoke.get("answers") or []:
            if isinstance(answer, dict) and answer.get("problems"):
                text = str(answer.get("text"))
                texts.append("%s %r -> %r%s" % (answer.get("endpoint"), answer.get("prompt"), text[:100],
                                                " (%d characters)" % len(text) if len(text) > 100 else ""))
        if texts and excerpt is None:
            excerpt = "\n".join(texts)
    acc = record.get("accuracy") or {}
    if acc.get("state") not in (None, "ok"):
        lines.append("accuracy: %s" % (accuracy_text(acc) or acc.get("msg") or acc.get("state")))
        source = (acc.get("settings") or {}).get("threshold_source")
        if source and acc.get("state") == "bad_accuracy":
            lines.append("threshold from: %s" % source)
        if excerpt is None and acc.get("wrong_examples"):
            excerpt = "\n".join(wrong_answer_lines(acc.get("wrong_examples")))
    for lv in levels(record):
        if lv["state"] == "failed":
            lines.append("benchmark c%d: %s" % (lv["concurrency"], lv["reason"]))
            for err in lv["errors"][1:4]:
                if isinstance(err, dict) and err.get("error"):
                    lines.append("  also: %s%s" % (err["error"], " (x%d)" % err["count"]
                                                   if isinstance(err.get("count"), int) and err["count"] > 1 else ""))
        elif lv["state"] == "invalid":
            reasons = (lv.get("diagnosis") or {}).get("invalid_reasons") or [lv["reason"]]
            for text in reasons[:MAX_REASONS_PER_LEVEL]:
                lines.append("GPU state c%d: %s" % (lv["concurrency"], text))
            if len(reasons) > MAX_REASONS_PER_LEVEL:
                lines.append("GPU state c%d: ... and %d more" % (lv["concurrency"],
                                                                 len(reasons) - MAX_REASONS_PER_LEVEL))
    # the failed task's message says again what the lines above say, except for failures they do not cover
    if record.get("failed_msg") and (status in ("failed", "interrupted", "unreachable") or not lines):
        task = record.get("failed_task")
        lines.append("%s%s" % ("task %r: " % task if task else "", _first_line(record["failed_msg"], 500)))
    alternatives = []
    for alt in preflight.get("alternatives") or []:
        if isinstance(alt, dict) and alt.get("backend"):
            alternatives.append(alt["backend"] + (" (-> %s)" % alt["resolves_to"] if alt.get("resolves_to") else ""))
    return {
        "title": "%s / %s" % (record.get("host"), record.get("point")),
        "host": record.get("host"),
        "point": record.get("point"),
        "backend": record.get("backend"),
        "status": status,
        "cause": record.get("cause"),
        "summary": decisive(record),
        "lines": lines,
        "excerpt": excerpt,
        "citations": citations,
        "alternatives": alternatives,
        "simulated": is_simulated(record),
    }


def caveats(record):
    """The preflight's caveats of a point: warnings, caveat findings with their citations, and advice notes."""
    preflight = record.get("preflight") or {}
    out = []
    for reason in preflight.get("reasons") or []:
        if isinstance(reason, dict) and reason.get("status") == "caveat":
            text = "%s: %s" % (reason.get("rule"), reason.get("reason"))
            urls = _citations(reason)
            if urls:
                text += " (%s)" % ", ".join(urls)
            if text not in out:
                out.append(text)
    # the action returns them as preflight_warnings; caveat findings appear there as "rule: reason" too
    for text in list(preflight.get("preflight_warnings") or []) + list(preflight.get("warnings") or []):
        if text and not any(o.startswith(str(text)) for o in out):
            out.append(str(text))
    for note in ((preflight.get("advice") or {}).get("notes")) or []:
        if note and note not in out:
            out.append(str(note))
    return out


# --------------------------------------------------------------------------------------------------
# The table


def accuracy_text(acc):
    """A point's accuracy verdict in words: ``0.640 (128/200 GSM8K) < threshold 0.800``."""
    if not isinstance(acc.get("accuracy"), (int, float)):
        return ""
    text = "GSM8K accuracy %.3f (%s/%s)" % (acc["accuracy"], acc.get("correct"), acc.get("num_questions"))
    threshold = acc.get("threshold")
    if isinstance(threshold, (int, float)):
        text += " %s threshold %.3f" % ("<" if acc.get("state") == "bad_accuracy" else ">=", threshold)
    return text


def wrong_answer_lines(examples):
    """One line per wrong GSM8K answer: the question, the expected number and what the answer ended with."""
    out = []
    for ex in examples or []:
        if not isinstance(ex, dict):
            continue
        answer = " ".join(str(ex.get("answer") or "").split())
        out.append("Q%s: %s | expected %s, answered %s: ...%s" % (
            ex.get("index"), _first_line(ex.get("question"), 160), ex.get("label"),
            "no number" if ex.get("value") is None else ex.get("value"), answer[-120:]))
    return out


def accuracy_cell(row):
    """The table's accuracy cell: share (correct/asked), a verdict below the threshold, a flagged drop."""
    if row.get("accuracy") is None:
        return "-" if not row.get("accuracy_state") else row["accuracy_state"]
    text = "%.3f (%s/%s)" % (row["accuracy"], row.get("accuracy_correct"), row.get("accuracy_questions"))
    if row.get("accuracy_state") == "bad_accuracy":
        text += " < %.2f" % row["accuracy_threshold"]
    cmp_ = row.get("accuracy_vs_reference") or {}
    if cmp_.get("flagged"):
        text += " DROP vs %s %.3f (p=%.2g, confidence %.1f%%)" % (
            cmp_.get("reference"), cmp_.get("reference_accuracy"), cmp_.get("p_value"),
            100.0 * cmp_.get("confidence"))
    return text


def concurrency_levels(records):
    found = set()
    for record in point_records(records):
        found.update(lv["concurrency"] for lv in levels(record))
    return sorted(found)


def default_reference_concurrency(records):
    """The reference level when none is given: the one the benchmark settings name (``reference_concurrency``),
    else the highest level every benchmarked point ran, else the highest level any point ran."""
    points = point_records(records)
    named = set()
    for record in points:
        value = ((record.get("benchmark") or {}).get("settings") or {}).get("reference_concurrency")
        if isinstance(value, int) and not isinstance(value, bool):
            named.add(value)
    if len(named) == 1:
        return named.pop()
    sets = [set(lv["concurrency"] for lv in levels(r)) for r in points]
    sets = [s for s in sets if s]
    if not sets:
        return None
    common = set.intersection(*sets)
    return max(common) if common else max(set.union(*sets))


def _resolve_reference(records, reference_concurrency):
    if reference_concurrency is None:
        return default_reference_concurrency(records)
    if isinstance(reference_concurrency, str) and reference_concurrency.strip().isdigit():
        reference_concurrency = int(reference_concurrency)  # -e reference_concurrency=32 arrives as a string
    if isinstance(reference_concurrency, bool) or not isinstance(reference_concurrency, int) \
            or reference_concurrency <= 0:
        raise ValueError("reference_concurrency must be a positive integer, got %r" % (reference_concurrency,))
    return reference_concurrency


TIE_RULE = ("points whose output tok/s at the reference level cannot be told apart (the 95 % interval of the "
            "difference holds 0, or the difference is within the precision target) tie; among tied points the one "
            "with the lower p99 TTFT is the best")


def _best_key(record, reference):
    thr = throughput_at(record, reference)
    p99 = ok_figure(record, reference, "p99_ttft_ms")
    return ((thr or {}).get("value"), -(p99 if p99 is not None else float("inf")))


def _ties(a, b):
    """Whether two reference figures (``throughput_at``) cannot be told apart. A whole-run figure (a record written
    before levels carried stats) ties only with an equal figure, as before; a steady figure with too few batches for
    an interval counts as uncertain by the precision target (``bench_stats.compare``)."""
    if a["source"] != "steady state" or b["source"] != "steady state":
        return a["value"] == b["value"]
    return bench_stats.compare(a, b, max(a["precision"], b["precision"])) == "tie"


def ranking(records, reference_concurrency, host=None):
    """(best, tied): the best passed point at ``reference_concurrency`` and the other points that tie with the
    highest figure (``TIE_RULE``); (None, []) when no passed point has an ok figure there. ``host`` limits it to
    one host (what a restore compares). A simulated and a measured figure are not comparable: give records of
    one kind (the report asks once per kind). A point recorded ``same_as`` another is not ranked: its figures are
    that point's, ranked once."""
    reference = _resolve_reference(records, reference_concurrency)
    ranked = []
    for record in point_records(records):
        if record.get("status") != PASSED or (host is not None and record.get("host") != host):
            continue
        if record.get("same_as"):
            continue  # the figures of the point it runs the kernels of: that one is ranked, once

        key = _best_key(record, reference)
        if key[0] is not None:
            ranked.append((key, record))
    if not ranked:
        return None, []
    top_key, top = max(ranked, key=lambda kr: kr[0])
    top_thr = throughput_at(top, reference)
    tied = [(key, r) for key, r in ranked if r is top or _ties(throughput_at(r, reference), top_thr)]
    best = max(tied, key=lambda kr: (kr[0][1], kr[0][0]))[1]  # the lower p99 TTFT, then the higher figure
    return best, [r for _k, r in tied if r is not best]


def best_point(records, reference_concurrency, host=None):
    """The passed point (its latest record) with the highest output throughput at ``reference_concurrency``,
    a tie (``TIE_RULE``) going to the lower p99 TTFT; None when no passed point has an ok figure there."""
    return ranking(records, reference_concurrency, host)[0]


def evidence_lines(records, reference_concurrency=None, limit=220):
    """What a reader needs under the table to trust it: each host's host checks (gpu_facts: how many passed, then
    every warning and failure with its evidence and fix) once per sweep, and, for the best point of each kind, the
    all-reduce estimate at the reference level (its evidence and the first thing that would change it) when the
    interconnect was measured. [] when the records hold neither."""
    out, seen = [], set()
    points = point_records(records)
    for r in points:
        key = (r.get("sweep_id"), r.get("host"))
        checks = (r.get("facts") or {}).get("host_checks") or []
        if key in seen or not checks:
            continue
        seen.add(key)
        counts = {v: sum(1 for c in checks if c.get("verdict") == v) for v in ("ok", "warn", "fail")}
        out.append("%s host checks: %d ok, %d warn, %d fail (moesweep facts -i INVENTORY shows each)" % (
            r.get("host"), counts["ok"], counts["warn"], counts["fail"]))
        for c in checks:
            if c.get("verdict") in ("warn", "fail"):
                out.append("  %-4s %s: %s" % (c["verdict"], c.get("name"), _clip(
                    "%s; fix: %s" % (c.get("evidence"), c.get("fix")) if c.get("fix") else c.get("evidence"), limit)))
    reference = _resolve_reference(records, reference_concurrency)
    if reference is None:
        return out
    for simulated in (True, False):
        group = [r for r in points if is_simulated(r) is simulated]
        best = best_point(group, reference) if group else None
        lv = level_at(best, reference) if best is not None else None
        estimate = ((lv or {}).get("diagnosis") or {}).get("interconnect") or {}
        if not estimate.get("evidence"):
            continue
        out.append("%s / %s all-reduce at c%s (%s): %s" % (
            best.get("host"), best.get("point"), reference, estimate.get("verdict") or "not dominant",
            _clip(estimate["evidence"][0], limit)))
        # the transport NCCL itself reported (interconnect.transport, module_utils/nccl_log.py), beside the latency
        for line in [e for e in estimate["evidence"] if e.startswith("NCCL ")][:2]:
            out.append("  " + _clip(line, limit))
        changes = estimate.get("changes") or []
        for change in changes[:2 if changes and changes[0].startswith("NCCL connected") else 1]:
            out.append("  what would change it: " + _clip(change, limit))
    return out


def summary_rows(records, reference_concurrency=None):
    """One row per point (latest record of each), in the order the points were first recorded.

    Each row: sweep_id, host, point, backend, status, cause, reason (the decisive short reason), simulated,
    data (SIMULATED / measured), startup_s, gpus, levels ([{concurrency, state, reason, output_tok_s,
    total_tok_s}] over every level any point ran; numbers only where state is ``ok``), reference_concurrency,
    ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, tok_s_per_user, tok_s_per_gpu, gpu_util_pct,
    gpu_power_pct (of the power limit), gpu_power_w, diagnosis, forced, best (the best passed point of its
    kind, simulated or measured)."""
    reference = _resolve_reference(records, reference_concurrency)
    all_levels = concurrency_levels(records)
    points = point_records(records)
    best_ids, tie_ids = set(), set()
    for simulated in (True, False):
        group = [r for r in points if is_simulated(r) is simulated]
        best, tied = ranking(group, reference) if group and reference is not None else (None, [])
        if best is not None:
            best_ids.add(id(best))
            tie_ids.update(id(r) for r in tied)
    versus = accuracy_test.reference_comparisons(points)
    rows = []
    for record in points:
        acc = record.get("accuracy") or {}
        by_c = {lv["concurrency"]: lv for lv in levels(record)}
        cells = []
        for c in all_levels:
            lv = by_c.get(c)
            if lv is None:
                cells.append({"concurrency": c, "state": "not_run", "reason": None, "output_tok_s": None,
                              "total_tok_s": None})
                continue
            ok = lv["state"] == "ok"
            thr = throughput_at(record, c) if ok else None
            steady = thr if thr and thr["source"] == "steady state" else {}
            cells.append({"concurrency": c, "state": lv["state"], "reason": lv["reason"],
                          "output_tok_s": _num(lv["figures"].get("output_throughput")) if ok else None,
                          "total_tok_s": _num(lv["figures"].get("total_throughput")) if ok else None,
                          "steady_tok_s": steady.get("value"), "steady_low": steady.get("low"),
                          "steady_high": steady.get("high"), "steady_half_width_rel": steady.get("half_width_rel"),
                          "requests": lv.get("num_prompts") if ok else None})
        gpus = gpu_count(record)
        out_ref = ok_figure(record, reference, "output_throughput") if reference else None
        tel = telemetry_at(record, reference) if reference else {}
        rows.append({
            "sweep_id": record.get("sweep_id"),
            "host": record.get("host"),
            "point": record.get("point"),
            "backend": record.get("backend"),
            "status": record.get("status"),
            "cause": record.get("cause"),
            "reason": decisive(record),
            "simulated": is_simulated(record),
            "data": data_label(record),
            "startup_s": startup_seconds(record),
            "gpus": gpus,
            "levels": cells,
            "reference_concurrency": reference,
            "ttft_p50_ms": ok_figure(record, reference, "median_ttft_ms") if reference else None,
            "ttft_p99_ms": ok_figure(record, reference, "p99_ttft_ms") if reference else None,
            "itl_p50_ms": ok_figure(record, reference, "median_itl_ms") if reference else None,
            "itl_p99_ms": ok_figure(record, reference, "p99_itl_ms") if reference else None,
            "tok_s_per_user": out_ref / reference if out_ref is not None else None,
            "tok_s_per_gpu": out_ref / gpus if out_ref is not None and gpus else None,
            "gpu_util_pct": tel.get("util_pct"),
            "gpu_power_pct": tel.get("power_pct"),
            "gpu_power_w": tel.get("power_w"),
            "diagnosis": diagnosis_verdict(record, reference),
            "allreduce_pct": allreduce_pct(record, reference),
            "forced": bool((record.get("preflight") or {}).get("forced")),
            "best": id(record) in best_ids,
            "accuracy_state": acc.get("state"),
            "accuracy": _num(acc.get("accuracy")),
            "accuracy_correct": acc.get("correct"),
            "accuracy_questions": acc.get("num_questions"),
            "accuracy_threshold": _num(acc.get("threshold")),
            "accuracy_vs_reference": versus.get(id(record)),
            "accuracy_wrong_examples": acc.get("wrong_examples") or [],
            "tie": id(record) in tie_ids,
            "same_as": (record.get("same_as") or {}).get("point"),
            "ref_throughput": throughput_at(record, reference) if reference else None,
            "ttft_p99": latency_at(record, reference, "ttft") if reference else None,
            "itl_p99": latency_at(record, reference, "itl") if reference else None,
        })
    # one row group per measurement: a point recorded same_as another comes right after that one
    out = []
    for row in [r for r in rows if not r["same_as"]]:
        out.append(row)
        out.extend(r for r in rows if r["same_as"] == row["point"] and r["host"] == row["host"]
                   and r["sweep_id"] == row["sweep_id"])
    placed = {id(r) for r in out}
    return out + [r for r in rows if id(r) not in placed]  # one whose measured point is not among the rows


# --------------------------------------------------------------------------------------------------
# Rendering


def fmt_number(value, unit=""):
    if value is None:
        return "-"
    v = float(value)
    if abs(v) >= 100:
        text = "%.0f" % v
    elif abs(v) >= 10:
        text = "%.1f" % v
    else:
        text = "%.2f" % v
    return text + unit


def _status_text(row):
    text = row["status"] or "?"
    if row.get("cause") and row["status"] not in ("passed", "refused"):
        text += " (%s)" % row["cause"]
    if row.get("forced"):
        text += ", forced"
    if row.get("same_as"):
        text += ", same kernels as %s (not started)" % row["same_as"]
    return text


def level_cell(cell):
    if cell["state"] == "ok":
        return "%s / %s" % (fmt_number(cell["output_tok_s"]), fmt_number(cell["total_tok_s"]))
    if cell["state"] == "not_run":
        return "-"
    return cell["state"]  # failed / invalid: never a number


def _levels_of(rows):
    """The levels some row ran (a level only other rows ran gets no column)."""
    out = []
    for row in rows:
        for cell in row["levels"]:
            if cell["state"] != "not_run" and cell["concurrency"] not in out:
                out.append(cell["concurrency"])
    return sorted(out)


def _reference_of(rows):
    refs = set(r.get("reference_concurrency") for r in rows if r.get("reference_concurrency"))
    return refs.pop() if len(refs) == 1 else None


def table_columns(rows, reason_limit=120):
    ref = _reference_of(rows)
    at = " @c%d" % ref if ref else ""
    cols = [
        ("data", lambda r: r["data"]),
        ("host", lambda r: r["host"] or "?"),
        ("point", lambda r: (r["point"] or "?") + (" *best*" if r.get("best") else " *tie*" if r.get("tie") else "")),
        ("backend", lambda r: r["backend"] or "?"),
        ("status", _status_text),
        ("reason", lambda r: _clip(r["reason"], reason_limit) or "-"),
        ("startup s", lambda r: fmt_number(r["startup_s"])),
    ]
    if len({r.get("sweep_id") for r in rows}) > 1:
        cols.insert(1, ("sweep", lambda r: r.get("sweep_id") or "?"))
    if all(r.get("backend") == r.get("point") for r in rows):
        # every point is named after the --moe-runner-backend it runs: one column says both
        cols = [c for c in cols if c[0] != "backend"]
        cols = [("point = backend", f) if n == "point" else (n, f) for n, f in cols]
    for c in _levels_of(rows):
        cols.append(("c%d out/total" % c,
                     lambda r, c=c: next((level_cell(x) for x in r["levels"] if x["concurrency"] == c), "-")))
    if any((r.get("ref_throughput") or {}).get("source") == "steady state" for r in rows):
        cols.append(("steady out tok/s%s (95 %% CI, requests)" % at, lambda r: interval_text(r.get("ref_throughput"))))
    cols += [
        ("TTFT p50/p99 ms%s" % at, lambda r: "-" if r["ttft_p50_ms"] is None and r["ttft_p99_ms"] is None
         else "%s / %s" % (fmt_number(r["ttft_p50_ms"]), fmt_number(r["ttft_p99_ms"]))),
        ("GPU util %%%s" % at, lambda r: fmt_number(r["gpu_util_pct"])),
        ("power %% of limit%s" % at, lambda r: fmt_number(r["gpu_power_pct"])),
        ("all-reduce %% of ITL%s" % at, lambda r: fmt_number(r.get("allreduce_pct"))),
        ("diagnosis", lambda r: r["diagnosis"] or "-"),
    ]
    if any(r.get("accuracy_state") for r in rows):
        cols.append(("GSM8K accuracy", accuracy_cell))
    return cols


def interval_text(thr):
    """'225 [221, 229] +-1.8 %, 128 req' for a figure with an interval, the value and its source otherwise."""
    if not thr or thr.get("value") is None:
        return "-"
    if thr.get("half_width") is None:
        return "%s (%s)" % (fmt_number(thr["value"]), thr.get("source") or "no interval")
    text = "%s [%s, %s] +-%.1f %%" % (
        fmt_number(thr["value"]), fmt_number(thr["low"]), fmt_number(thr["high"]),
        100.0 * (thr.get("half_width_rel") or 0.0))
    if thr.get("requests"):
        text += ", %s req" % thr["requests"]
    if thr.get("precise") is False:
        text += ", imprecise (target +-%.1f %%)" % (100.0 * (thr.get("precision") or 0.0))
    return text


def _clip(text, limit):
    text = "" if text is None else str(text)
    if limit and len(text) > limit:
        return text[:limit - 1] + "\u2026"
    return text


def kind_groups(rows):
    """[(heading, rows)]: measured rows and SIMULATED rows apart, each kind once."""
    measured = [r for r in rows if not r.get("simulated")]
    simulated = [r for r in rows if r.get("simulated")]
    groups = []
    if measured:
        groups.append(("Measured on real GPU hosts", measured))
    if simulated:
        groups.append(("SIMULATED hosts (token rates are simulation parameters, not measurements)", simulated))
    return groups


def _md_escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_notes(rows):
    ref = _reference_of(rows)
    notes = []
    if ref:
        notes.append("Reference concurrency: c%d (TTFT, GPU utilization, power and diagnosis are of that level; "
                     "the best point has the highest output tok/s there; %s)." % (ref, TIE_RULE))
        if any(r.get("ref_throughput") and r["ref_throughput"].get("half_width") is not None for r in rows):
            notes.append("steady out tok/s: the output throughput while every slot was busy, with its 95 % interval "
                         "(batch means and the GPU's drift) and the requests the level ran; *tie*: not "
                         "distinguishable from the best.")
    notes.append("A level's cell (c<N> out/total) is bench_serving's output / total token throughput in tok/s when "
                 "every request of the level succeeded on a valid GPU state; `failed` and `invalid` levels have no "
                 "figures.")
    if any(r.get("accuracy_state") for r in rows):
        notes.append("GSM8K accuracy: sglang's few-shot evaluator (sglang.test.few_shot_gsm8k, greedy) on the shipped "
                     "subset; below its threshold a point is bad_accuracy and never the best. A DROP is a lower "
                     "accuracy than the reference backend's by more than the subset's sampling noise: %s, flagged "
                     "at p < %.2f." % (accuracy_test.TEST_NAME, accuracy_test.ALPHA))
    if any(r.get("simulated") for r in rows):
        notes.append(SIMULATED_NOTE)
    return notes


def best_lines(rows):
    out = []
    for row in rows:
        if row.get("best"):
            cell = next((x for x in row["levels"] if x["concurrency"] == row["reference_concurrency"]), None)
            ties = [r["point"] for r in rows if r.get("tie") and r.get("simulated") == row.get("simulated")]
            thr = row.get("ref_throughput") or {}
            out.append("Best%s: %s / %s (--moe-runner-backend %s), %s output tok/s at c%d%s%s%s" % (
                " SIMULATED" if row.get("simulated") else " measured",
                row["host"], row["point"], row["backend"],
                fmt_number(cell["output_tok_s"]) if cell else "-", row["reference_concurrency"],
                "; steady state %s" % interval_text(thr) if thr.get("source") == "steady state" else "",
                ", p99 TTFT %s ms" % fmt_number(row["ttft_p99_ms"]) if row.get("ttft_p99_ms") is not None else "",
                "; ties with %s (not distinguishable; the lower p99 TTFT decides)" % ", ".join(ties) if ties else ""))
    return out


def render_markdown(rows, title=None, reason_limit=120):
    """A Markdown comparison: one table per kind (measured, SIMULATED), each row saying its kind."""
    lines = []
    if title:
        lines += ["# %s%s" % (title, " (SIMULATED)" if rows and all(r.get("simulated") for r in rows) else ""), ""]
    if not rows:
        return "\n".join(lines + ["No point recorded.", ""])
    for note in table_notes(rows):
        lines += ["> %s" % note if note == SIMULATED_NOTE else note, ""]
    for text in best_lines(rows):
        lines += ["**%s**" % text, ""]
    for heading, group in kind_groups(rows):
        cols = table_columns(group, reason_limit)
        lines += ["## %s" % heading, ""]
        lines.append("| " + " | ".join(_md_escape(name) for name, _f in cols) + " |")
        lines.append("|" + "|".join("---" for _c in cols) + "|")
        for row in group:
            lines.append("| " + " | ".join(_md_escape(f(row)) for _n, f in cols) + " |")
        lines.append("")
    return "\n".join(lines)


CSV_FIELDS = ("sweep_id", "data", "simulated", "host", "point", "backend", "status", "cause", "reason", "startup_s",
              "gpus", "reference_concurrency", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
              "tok_s_per_user", "tok_s_per_gpu", "gpu_util_pct", "gpu_power_pct", "gpu_power_w", "diagnosis",
              "forced", "best", "allreduce_pct", "accuracy_state", "accuracy", "accuracy_correct",
              "accuracy_questions", "accuracy_threshold", "accuracy_reference", "accuracy_reference_accuracy",
              "accuracy_drop_p_value", "accuracy_drop_flagged", "tie", "ref_tok_s", "ref_tok_s_low", "ref_tok_s_high",
              "ref_half_width_rel", "ref_requests", "ref_source", "ttft_p99_low_ms", "ttft_p99_high_ms", "ttft_n",
              "itl_p99_low_ms", "itl_p99_high_ms", "itl_n", "same_as")


def render_csv(rows):
    """CSV, one line per point; per level ``c<N>_state``, ``c<N>_output_tok_s``, ``c<N>_total_tok_s`` (empty
    unless the state is ok). ``data`` says SIMULATED or measured on every line."""
    levels_ = _levels_of(rows)
    header = list(CSV_FIELDS)
    for c in levels_:
        header += ["c%d_state" % c, "c%d_output_tok_s" % c, "c%d_total_tok_s" % c, "c%d_steady_tok_s" % c,
                   "c%d_steady_low" % c, "c%d_steady_high" % c, "c%d_requests" % c]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        line = []
        flat = dict(row, **_interval_fields(row))
        versus = row.get("accuracy_vs_reference") or {}
        for key in CSV_FIELDS:
            value = flat.get(key)
            if key.startswith("accuracy_") and key not in row:
                value = {"accuracy_reference": versus.get("reference"),
                         "accuracy_reference_accuracy": versus.get("reference_accuracy"),
                         "accuracy_drop_p_value": versus.get("p_value"),
                         "accuracy_drop_flagged": versus.get("flagged")}.get(key)
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, float):
                value = "%.6g" % value
            line.append("" if value is None else value)
        by_c = {x["concurrency"]: x for x in row["levels"]}
        for c in levels_:
            cell = by_c.get(c) or {"state": "not_run", "output_tok_s": None, "total_tok_s": None}
            line.append(cell["state"])
            for key in ("output_tok_s", "total_tok_s", "steady_tok_s", "steady_low", "steady_high", "requests"):
                v = cell.get(key) if cell["state"] == "ok" else None
                line.append("" if v is None else "%.6g" % v)
        writer.writerow(line)
    return buf.getvalue()


def _interval_fields(row):
    thr = row.get("ref_throughput") or {}
    ttft = row.get("ttft_p99") or {}
    itl = row.get("itl_p99") or {}
    return {"ref_tok_s": thr.get("value"), "ref_tok_s_low": thr.get("low"), "ref_tok_s_high": thr.get("high"),
            "ref_half_width_rel": thr.get("half_width_rel"), "ref_requests": thr.get("requests"),
            "ref_source": thr.get("source"), "ttft_p99_low_ms": ttft.get("low"), "ttft_p99_high_ms": ttft.get("high"),
            "ttft_n": ttft.get("n"), "itl_p99_low_ms": itl.get("low"), "itl_p99_high_ms": itl.get("high"),
            "itl_n": itl.get("n")}


def _text_table(header, body):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]  # noqa: B905
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip()]  # noqa: B905
    out.append("  ".join("-" * w for w in widths))
    for line in body:
        out.append("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())  # noqa: B905
    return out


def render_text(rows, reason_limit=48):
    """A fixed-width table for a terminal: one block per kind (measured, SIMULATED)."""
    if not rows:
        return "No point recorded.\n"
    lines = []
    for note in table_notes(rows):
        lines.append(note)
    for text in best_lines(rows):
        lines.append(text)
    for heading, group in kind_groups(rows):
        cols = table_columns(group, reason_limit)
        lines += ["", "== %s ==" % heading]
        lines += _text_table([n for n, _f in cols], [[f(r) for _n, f in cols] for r in group])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# A launch matrix (plugin_utils/matrix.py): the records of its cells carry ``axes``


def matrix_effects(records, reference_concurrency=None):
    """What each axis of a launch matrix does, from its cells' records (latest of each); None without any.

    {reference_concurrency, axes: [{axis, values: [{value, cells, passed, best_tok_s, best_cell, failures:
    {status: [{cell, line}]}}]}], table: {rows_axis, cols_axis, rows, cols, cells: {row: {col: tok_s}}} (the
    first two axes; the best figure of each pair), best: {cell, tok_s, command_line, axes}}."""
    cells = [r for r in point_records(records) if r.get("axes")]
    if not cells:
        return None
    reference = _resolve_reference(cells, reference_concurrency)
    order = []
    for record in cells:
        for axis in record["axes"]:
            if axis not in order:
                order.append(axis)

    def figure(record):
        if record.get("status") != PASSED or reference is None:
            return None
        return _num(ok_figure(record, reference, "output_throughput"))

    def text(value):
        return json.dumps(value) if not isinstance(value, str) else value

    axes = []
    for axis in order:
        values = []
        for value in dict.fromkeys(text(r["axes"].get(axis)) for r in cells):
            group = [r for r in cells if text(r["axes"].get(axis)) == value]
            scored = [(figure(r), r) for r in group if figure(r) is not None]
            top = max(scored, key=lambda fr: fr[0]) if scored else (None, None)
            failures = {}
            for r in group:
                if r.get("status") != PASSED:
                    failures.setdefault(r.get("status") or "failed", []).append(
                        {"cell": r.get("point"), "line": decisive(r)})
            values.append({"value": value, "cells": len(group),
                           "passed": sum(1 for r in group if r.get("status") == PASSED),
                           "best_tok_s": top[0], "best_cell": (top[1] or {}).get("point"), "failures": failures})
        axes.append({"axis": axis, "values": values})
    table = None
    if len(order) >= 2:
        rows_axis, cols_axis = order[0], order[1]
        rows = [v["value"] for v in axes[0]["values"]]
        cols = [v["value"] for v in axes[1]["values"]]
        grid = {row: {col: None for col in cols} for row in rows}
        for r in cells:
            f = figure(r)
            row, col = text(r["axes"].get(rows_axis)), text(r["axes"].get(cols_axis))
            if f is not None and (grid[row][col] is None or f > grid[row][col]):
                grid[row][col] = f
        table = {"rows_axis": rows_axis, "cols_axis": cols_axis, "rows": rows, "cols": cols, "cells": grid}
    best = best_point(cells, reference) if reference is not None else None
    return {"reference_concurrency": reference, "axes": axes, "table": table,
            "best": {"cell": best.get("point"), "tok_s": figure(best), "axes": best.get("axes"),
                     "command_line": (best.get("launch") or {}).get("command_line")} if best else None}


def render_matrix_text(effects, reason_limit=100):
    """The matrix's effects as text: per axis the best figure of each value and its failures grouped by status
    with the decisive line, the two-axis table, the best cell and its launch line."""
    if not effects:
        return ""
    ref = effects["reference_concurrency"]
    out = ["Launch matrix: the effect of each axis (best output tok/s at c%s per value)" % ref]
    for axis in effects["axes"]:
        out.append("  %s" % axis["axis"])
        for v in axis["values"]:
            out.append("    %-28s %8s  %d/%d passed%s" % (
                v["value"], fmt_number(v["best_tok_s"]), v["passed"], v["cells"],
                "  best: %s" % v["best_cell"] if v["best_cell"] else ""))
            for status, items in sorted(v["failures"].items()):
                line = next((i["line"] for i in items if i["line"]), "")
                out.append("      %s in %d cell(s): %s" % (status, len(items), _clip(line or "-", reason_limit)))
    table = effects["table"]
    if table:
        header = ["%s \\ %s" % (table["rows_axis"], table["cols_axis"])] + table["cols"]
        body = [[row] + [fmt_number(table["cells"][row][col]) for col in table["cols"]] for row in table["rows"]]
        out.append("")
        out.extend(_text_table(header, body))
    best = effects["best"]
    out.append("")
    if best:
        out.append("Best cell: %s (%s output tok/s at c%s)" % (best["cell"], fmt_number(best["tok_s"]), ref))
        if best.get("command_line"):
            out.append("  " + best["command_line"])
    else:
        out.append("Best cell: none passed with a figure at c%s" % ref)
    return "\n".join(out)
