"""The report of one or more sweeps: Markdown plus a self-contained HTML page, with PNG plots.

``build_report(sources, out_dir, reference_concurrency=None)`` reads each sweep's ``points.jsonl`` through
``plugin_utils.summary`` (the one owner of the table), draws the plots with matplotlib's Agg backend and
writes ``report.md`` (plots as files under ``plots/``) and ``report.html`` (the same plots embedded as
``data:`` URIs, no external resource, so the page opens anywhere, offline).

The plots:

* output throughput by point and concurrency (bench_serving's ``output_throughput``; a failed or invalid
  level is drawn as a labelled gap, never as a bar), with the steady-state figure and its 95 % interval as an
  error bar on each bar that has one (``summary.throughput_at``);
* latency against throughput: TTFT and ITL p50 / p99 against output tok/s, one line per point through its
  levels; and tokens/s/user against tokens/s/GPU with its Pareto frontier, as vLLM's
  ``vllm bench sweep plot_pareto`` draws it (vllm/benchmarks/sweep/plot_pareto.py: tokens/s/user =
  output_throughput / concurrency, tokens/s/GPU = output_throughput / GPU count, frontier = the runs no
  other run beats on both);
* the startup phase breakdown per point (readiness.timeline: load weights, KV cache, CUDA graph capture,
  warmup, ...);
* GPU utilization and power (share of the enforced limit) per point at the reference level.

Points from simulated hosts are never drawn with measured ones: each kind gets its own plots, and every
plot, table and heading of simulated points says SIMULATED (their token rates are simulation parameters).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

import moesweep._collection  # noqa: F401  (puts the in-repo collection on sys.path)

# isort: split
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect, nccl_log
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records as sweep_records
from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

PLOTS_DIR = "plots"
DIR_MODE, FILE_MODE = 0o700, 0o600  # like the results they are made of (docs/results.md)
PHASE_COLORS = {
    "init": "#bdbdbd",
    "load weights": "#4c72b0",
    "KV cache": "#dd8452",
    "CUDA graph capture": "#55a868",
    "HTTP server up": "#8172b3",
    "warmup": "#c44e52",
    "other": "#e0e0e0",
}
SIM_SUBTITLE = ("SIMULATED host: every figure here (token rates, latencies, GPU telemetry, timings) comes from the "
                "simulator, not from a GPU")


class ReportError(ValueError):
    """Input the report cannot be made from, or an output it cannot write: the message names the fix."""


class PlotterMissing(RuntimeError):
    """matplotlib is not installed in this environment."""


def check_plotter():
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise PlotterMissing(f"matplotlib is not installed in this Python ({exc}): run `make venv`, or "
                             "pip install -r requirements-controller.txt") from exc


# --------------------------------------------------------------------------------------------------
# Input


def load_sweeps(sources):
    """[(source path, records)] of each sweep directory or points.jsonl; ReportError naming the bad one."""
    sweeps = []
    for source in sources:
        try:
            records = summary.load_points(source)
        except summary.ResultsError as exc:
            raise ReportError(str(exc)) from exc
        if not summary.point_records(records):
            raise ReportError(f"{summary.points_path(source)} holds no point record yet: run the sweep first (or wait "
                              "for its first point)")
        sweeps.append((Path(source), summary.latest(records)))
    return sweeps


def load_interconnect(sources):
    """The all-reduce measurements recorded beside each sweep (interconnect.jsonl), newest per host and NCCL
    environment."""
    latest = {}
    for source in sources:
        base = Path(source).parent if Path(source).is_file() else Path(source)
        for m in sweep_records.read_interconnect(str(base / sweep_records.INTERCONNECT_FILE)):
            latest[(m.get("sweep_id"), m.get("host"), m.get("key"))] = m
    return list(latest.values())


def check_reference(records, reference_concurrency):
    levels = summary.concurrency_levels(records)
    if reference_concurrency is None:
        return summary.default_reference_concurrency(records)
    if reference_concurrency <= 0:
        raise ReportError(f"--reference-concurrency {reference_concurrency}: give a positive concurrency level")
    if levels and reference_concurrency not in levels:
        ran = ", ".join(f"c{c}" for c in levels)
        raise ReportError(f"--reference-concurrency {reference_concurrency}: no point ran that level; "
                          f"the sweeps ran {ran}")
    return reference_concurrency


def check_out_dir(out_dir):
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file, not a directory: give a directory for the report")
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ReportError(f"--out {out}: {probe} is a file, so the directory cannot be created")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ReportError(f"--out {out}: {probe} is not writable; give a directory you can write")
    return out


def _mkdir(path):
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)


def _write(path, data):
    from moesweep.util import atomic_write_text

    if isinstance(data, bytes):
        tmp = path.with_name("." + path.name + ".tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        os.chmod(path, FILE_MODE)
    else:
        atomic_write_text(path, data, FILE_MODE)


# --------------------------------------------------------------------------------------------------
# Labels


def point_labels(records):
    """A short unique label per point record: ``point``, ``host/point`` or ``sweep:host/point``."""
    points = summary.point_records(records)
    sweeps = {r.get("sweep_id") for r in points}
    hosts = {r.get("host") for r in points}
    out = {}
    for r in points:
        label = str(r.get("point"))
        if len(hosts) > 1 or len(sweeps) > 1:
            label = "{}/{}".format(r.get("host"), label)
        if len(sweeps) > 1:
            label = "{}:{}".format(r.get("sweep_id"), label)
        out[id(r)] = label
    return out


def kinds(records):
    """[(kind, records)] with kind ``measured`` then ``simulated``, each present once."""
    points = summary.point_records(records)
    out = []
    measured = [r for r in points if not summary.is_simulated(r)]
    simulated = [r for r in points if summary.is_simulated(r)]
    if measured:
        out.append(("measured", measured))
    if simulated:
        out.append(("simulated", simulated))
    return out


def _title(kind, text):
    return ("SIMULATED \u2014 " + text) if kind == "simulated" else text + " (measured)"


# --------------------------------------------------------------------------------------------------
# Plots


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, kind, rect=(0, 0, 1, 1)):
    """PNG bytes of the figure; a simulated one says so under the plot."""
    left, bottom, right, top = rect
    if kind == "simulated":
        fig.text(0.5, 0.005, SIM_SUBTITLE, ha="center", va="bottom", fontsize=8, color="#b00020")
        bottom = max(bottom, 0.035)
    fig.tight_layout(rect=(left, bottom, right, top))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _pyplot().close(fig)
    return buf.getvalue()


def _legend_below(fig, ax, kind, ncol):
    """A legend under the axes, in its own band of the figure; returns the rect the axes keep."""
    handles, names = ax.get_legend_handles_labels()
    band = 0.32 / fig.get_size_inches()[1]  # inches of one legend row, as a share of the height
    base = 0.035 if kind == "simulated" else 0.0
    fig.legend(handles, names, fontsize=7, ncol=ncol, loc="lower center", bbox_to_anchor=(0.5, base), frameon=False)
    return (0, base + band, 1, 1)


def _colors(n):
    plt = _pyplot()
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def plot_throughput(kind, records, labels):
    """Grouped bars: output tok/s per concurrency level, one bar per point; failed levels are gaps."""
    points = [r for r in records if summary.levels(r)]
    if not points:
        return None
    plt = _pyplot()
    levels = sorted({lv["concurrency"] for r in points for lv in summary.levels(r)})
    fig, ax = plt.subplots(figsize=(9.5, 4.8))
    width = 0.8 / len(points)
    colors = _colors(len(points))
    top = 0.0
    steady_labelled = False
    for i, (r, color) in enumerate(zip(points, colors, strict=True)):
        by_c = {lv["concurrency"]: lv for lv in summary.levels(r)}
        for j, c in enumerate(levels):
            x = j - 0.4 + width * (i + 0.5)
            lv = by_c.get(c)
            value = summary.ok_figure(r, c, "output_throughput") if lv else None
            if value is not None:
                ax.bar(x, value, width * 0.92, color=color, label=labels[id(r)] if j == 0 else None)
                top = max(top, value)
                thr = summary.throughput_at(r, c)
                if thr and thr["source"] == "steady state":
                    low = thr["low"] if thr["low"] is not None else thr["value"]
                    high = thr["high"] if thr["high"] is not None else thr["value"]
                    ax.errorbar(x, thr["value"], yerr=[[thr["value"] - low], [high - thr["value"]]], fmt="D",
                                markersize=3, color="black", ecolor="black", elinewidth=1, capsize=3,
                                label=None if steady_labelled else "steady state, 95 % interval")
                    steady_labelled = True
                    top = max(top, high)
            elif lv is not None:
                ax.bar(x, 0, width * 0.92, color=color, label=labels[id(r)] if j == 0 else None)
                ax.annotate(lv["state"], (x, 0), xytext=(0, 3), textcoords="offset points", rotation=90,
                            ha="center", va="bottom", fontsize=7, color="#b00020")
            elif j == 0:
                ax.bar(x, 0, width * 0.92, color=color, label=labels[id(r)])
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels([f"c{c}" for c in levels])
    ax.set_xlabel("concurrency (bench_serving --max-concurrency)")
    ax.set_ylabel("output tok/s")
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.grid(True, axis="y", linestyle="--", linewidth=0.5, alpha=0.6)
    ax.legend(fontsize=8, ncol=2 if len(points) > 4 else 1, loc="upper left")
    ax.set_title(_title(kind, "Output throughput by backend and concurrency"))
    return _finish(fig, kind)


def _ok_series(record, keys):
    out = []
    for lv in summary.levels(record):
        if lv["state"] != "ok":
            continue
        values = [summary._num(lv["figures"].get(k)) for k in keys]
        if all(v is not None for v in values):
            out.append((lv["concurrency"], values))
    return out


def plot_latency(kind, records, labels):
    """TTFT and ITL (p50 solid, p99 dashed) against output tok/s, one line per point through its levels."""
    points = [r for r in records if _ok_series(r, ["output_throughput"])]
    if not points:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    colors = _colors(len(points))
    drawn = False
    for ax, what in zip(axes, ("ttft", "itl"), strict=True):
        for r, color in zip(points, colors, strict=True):
            for key, style, marker, tag in ((f"median_{what}_ms", "-", "o", "p50"),
                                            (f"p99_{what}_ms", "--", "x", "p99")):
                series = _ok_series(r, ["output_throughput", key])
                if not series:
                    continue
                drawn = True
                xs = [v[0] for _c, v in series]
                ys = [v[1] for _c, v in series]
                ax.plot(xs, ys, linestyle=style, marker=marker, color=color, label=f"{labels[id(r)]} {tag}")
                if tag == "p50":
                    for (c, _v), x, y in zip(series, xs, ys, strict=True):
                        ax.annotate(f"c{c}", (x, y), xytext=(3, 3), textcoords="offset points", fontsize=7)
        ax.set_xlabel("output tok/s")
        ax.set_ylabel(f"{what.upper()} (ms)")
        ax.set_title(f"{what.upper()} p50 / p99")
        ax.grid(True, linestyle="--", linewidth=0.5, alpha=0.6)
    if not drawn:
        plt.close(fig)
        return None
    handles, names = [], []
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            if name not in names:
                handles.append(handle)
                names.append(name)
    ncol = min(4, len(names))
    rows = (len(names) + ncol - 1) // ncol
    fig.set_size_inches(11, 4.6 + 0.22 * rows)
    bottom = (0.04 if kind == "simulated" else 0.0) + 0.05 * rows
    fig.legend(handles, names, fontsize=7, loc="lower center", ncol=ncol,
               bbox_to_anchor=(0.5, 0.035 if kind == "simulated" else 0.0))
    fig.suptitle(_title(kind, "Latency against throughput"))
    return _finish(fig, kind, rect=(0, bottom, 1, 1))


def pareto_points(records):
    """[(label record, concurrency, tok/s/user, tok/s/GPU)] of every ok level with a GPU count."""
    out = []
    for r in records:
        gpus = summary.gpu_count(r)
        if not gpus:
            continue
        for c, (tput,) in _ok_series(r, ["output_throughput"]):
            out.append((r, c, tput / c, tput / gpus))
    return out


def pareto_frontier(pairs, epsilon=1e-9):
    """The (x, y) pairs no other pair beats on both: vLLM plot_pareto's ``_pareto_frontier`` (sort by x then y
    descending, keep each whose y reaches the best y so far), returned by ascending x."""
    ordered = sorted(pairs, key=lambda p: (p[0], p[1]), reverse=True)
    best, out = float("-inf"), []
    for x, y in ordered:
        if y >= best - epsilon:
            out.append((x, y))
            best = max(best, y)
    return sorted(out)


def plot_pareto(kind, records, labels):
    rows = pareto_points(records)
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5))
    points = []
    for r, *_rest in rows:
        if r not in points:
            points.append(r)
    colors = dict(zip([id(r) for r in points], _colors(len(points)), strict=True))
    for r in points:
        mine = [(c, x, y) for rr, c, x, y in rows if rr is r]
        ax.plot([m[1] for m in mine], [m[2] for m in mine], marker="o", linestyle=":", color=colors[id(r)],
                label=labels[id(r)], alpha=0.85)
        for c, x, y in mine:
            ax.annotate(f"c{c}", (x, y), xytext=(3, 3), textcoords="offset points", fontsize=7)
    front = pareto_frontier([(x, y) for _r, _c, x, y in rows])
    ax.plot([p[0] for p in front], [p[1] for p in front], color="black", linewidth=1.5, label="Pareto frontier")
    ax.set_xlabel("tokens/s/user (output tok/s / concurrency)")
    ax.set_ylabel("tokens/s/GPU (output tok/s / GPUs of the server)")
    ax.grid(True, linestyle="--", linewidth=0.5, alpha=0.6)
    ax.legend(fontsize=8)
    ax.set_title(_title(kind, "Throughput per GPU against per-user speed"))
    return _finish(fig, kind)


def plot_startup(kind, records, labels):
    """Stacked horizontal bars: the startup phases of each point that was started."""
    points = [r for r in records if summary.startup_phases(r)]
    if not points:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 1.6 + 0.5 * len(points)))
    seen = set()
    for i, r in enumerate(points):
        left = 0.0
        for label, seconds in summary.startup_phases(r):
            ax.barh(i, seconds, left=left, color=PHASE_COLORS.get(label, "#999999"),
                    label=label if label not in seen else None, edgecolor="white", linewidth=0.5)
            seen.add(label)
            left += seconds
        readiness = r.get("readiness") or {}
        state = readiness.get("state")
        if state and state != "ready":
            text = "{}{} in {}".format(state, " ({})".format(readiness["cause"]) if readiness.get("cause") else "",
                                   readiness.get("phase") or "?")
            ax.annotate(text, (left, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                        color="#b00020")
    ax.set_yticks(range(len(points)))
    ax.set_yticklabels([labels[id(r)] for r in points], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the restart to ready (readiness elapsed)")
    xmax = max(sum(s for _l, s in summary.startup_phases(r)) for r in points)
    ax.set_xlim(0, xmax * 1.35 if xmax > 0 else 1)
    ax.grid(True, axis="x", linestyle="--", linewidth=0.5, alpha=0.6)
    ax.set_title(_title(kind, "Startup phases"))
    return _finish(fig, kind, rect=_legend_below(fig, ax, kind, ncol=7))


def plot_gpu(kind, records, labels, reference):
    points = [(r, summary.telemetry_at(r, reference)) for r in records]
    points = [(r, t) for r, t in points if t.get("util_pct") is not None or t.get("power_pct") is not None]
    if not points:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 1.7 + 0.55 * len(points)))
    h = 0.38
    for i, (r, t) in enumerate(points):
        util, power = t.get("util_pct"), t.get("power_pct")
        ax.barh(i - h / 2, util or 0, h, color="#4c72b0", label="GPU util %" if i == 0 else None)
        ax.barh(i + h / 2, power or 0, h, color="#dd8452", label="power % of limit" if i == 0 else None)
        for y, v in ((i - h / 2, util), (i + h / 2, power)):
            ax.annotate("n/a" if v is None else f"{v:.0f}", (v or 0, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)
        verdict = summary.diagnosis_verdict(r, reference)
        if verdict:
            ax.annotate(verdict, (104, i), va="center", fontsize=7, color="#444444")
    ax.set_yticks(range(len(points)))
    ax.set_yticklabels([labels[id(r)] for r, _t in points], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 135)
    ax.set_xlabel("% (mean over the level's samples, pooled over the GPUs); diagnosis verdict on the right")
    ax.grid(True, axis="x", linestyle="--", linewidth=0.5, alpha=0.6)
    ax.set_title(_title(kind, f"GPU utilization and power at c{reference}"))
    return _finish(fig, kind, rect=_legend_below(fig, ax, kind, ncol=2))


def decode_sizes(measurement, point_records):
    """{concurrency: bytes} of one decode all-reduce at each level the sweep ran (module_utils interconnect)."""
    model = measurement.get("model") or {}
    if not model.get("hidden_size"):
        return {}
    return {c: interconnect.decode_message_bytes(model["hidden_size"], c)
            for c in summary.concurrency_levels(point_records)}


def plot_interconnect(kind, measurements, point_records):
    """All-reduce time and bus bandwidth against message size, one line per host and NCCL environment, the decode
    step's message sizes marked."""
    if not measurements:
        return None
    plt = _pyplot()
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(11.5, 4.6))
    colors = _colors(len(measurements))
    marked = {}
    for m, color in zip(measurements, colors, strict=False):
        rows = sorted((r.get("bytes") or r["size"], r["time_us"], r["busbw_gbs"]) for r in m.get("rows") or []
                      if r.get("size"))
        if not rows:
            continue
        label = "{} ({} GPUs) {}".format(m.get("host"), m.get("ranks"), m.get("environment_text") or "")
        ax_t.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", markersize=3, color=color, label=label)
        ax_b.plot([r[0] for r in rows], [r[2] for r in rows], marker="o", markersize=3, color=color)
        marked.update(decode_sizes(m, point_records))
    for c, size in sorted(marked.items()):
        for ax in (ax_t, ax_b):
            ax.axvline(size, color="#999999", linestyle=":", linewidth=0.8)
        ax_t.annotate(f"decode c{c}", (size, 1), xycoords=("data", "axes fraction"), rotation=90, fontsize=6,
                      va="top", ha="right", color="#666666")
    for ax, ylabel in ((ax_t, "time per all-reduce (us)"), (ax_b, "bus bandwidth (GB/s) = algbw x 2(n-1)/n")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", linestyle="--", linewidth=0.4, alpha=0.6)
    ax_t.set_yscale("log")
    fig.suptitle(_title(kind, "All-reduce over the TP group"))
    return _finish(fig, kind, rect=_legend_below(fig, ax_t, kind, ncol=1))


def plot_accuracy(kind, records, labels, reference):
    """One marker per point: GSM8K accuracy against output tok/s at the reference level (points without an ok
    reference level at x = 0, marked so); the threshold as a dashed line; bad_accuracy points in red."""
    points = [r for r in records if isinstance((r.get("accuracy") or {}).get("accuracy"), (int, float))]
    if not points:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5))
    colors = dict(zip([id(r) for r in points], _colors(len(points)), strict=True))
    thresholds = set()
    for r in points:
        acc = r["accuracy"]
        x = summary.ok_figure(r, reference, "output_throughput") if reference else None
        bad = r.get("status") == "bad_accuracy"
        ax.scatter([x or 0.0], [acc["accuracy"]], s=70, marker="X" if bad else "o",
                   color="#b00020" if bad else colors[id(r)], label=labels[id(r)], zorder=3)
        note = "bad_accuracy" if bad else ""
        if x is None:
            note = (note + ", " if note else "") + f"no ok c{reference} level"
        if note:
            ax.annotate(note, (x or 0.0, acc["accuracy"]), xytext=(5, -10), textcoords="offset points", fontsize=7,
                        color="#b00020")
        if isinstance(acc.get("threshold"), (int, float)):
            thresholds.add(acc["threshold"])
    for value in sorted(thresholds):
        ax.axhline(value, color="#b00020", linestyle="--", linewidth=1, label=f"threshold {value:.2f}")
    ax.set_xlabel(f"output tok/s at c{reference}" if reference else "output tok/s")
    ax.set_ylabel("GSM8K accuracy (few-shot, greedy)")
    ax.set_ylim(min([0.5] + [r["accuracy"]["accuracy"] - 0.05 for r in points]), 1.02)
    ax.grid(True, linestyle="--", linewidth=0.5, alpha=0.6)
    ax.legend(fontsize=8)
    ax.set_title(_title(kind, "Accuracy against output throughput"))
    return _finish(fig, kind)


PLOTS = (
    ("throughput", "Output throughput by backend and concurrency",
     "bench_serving's output tok/s per concurrency level (the whole run: ramp-up and drain included); the black "
     "diamond and error bar: the steady-state output tok/s (every slot busy) and its 95 % interval; a failed or "
     "invalid level has no bar, only its state.",
     "no point has a benchmark level"),
    ("latency", "Latency against throughput",
     "TTFT and ITL (p50 solid, p99 dashed) against output tok/s, one line per point through its ok levels.",
     "no ok level has TTFT / ITL figures"),
    ("pareto", "Throughput per GPU against per-user speed",
     "tokens/s/user (output tok/s / concurrency) against tokens/s/GPU (output tok/s / GPUs of the server), every "
     "ok level; the black line is the Pareto frontier, as vLLM's plot_pareto draws it.",
     "no ok level with a known GPU count"),
    ("startup", "Startup phases",
     "seconds of each startup phase from the server's log (readiness timeline); 'other' is the rest of the wait "
     "(before the first log line, and from the ready line to the first healthy answer).",
     "no point has a readiness timeline"),
    ("gpu", "GPU utilization and power",
     "nvidia-smi utilization.gpu and power draw as a share of the enforced limit, mean over the reference level's "
     "samples pooled over the GPUs, with the diagnosis verdict.",
     "no ok reference level has GPU telemetry"),
    ("interconnect", "All-reduce latency and bus bandwidth",
     "all_reduce_perf over the TP group's GPUs with the server stopped, per host and NCCL environment (nccl-tests' "
     "time and busbw); dotted lines: one decode all-reduce (hidden size x concurrency x 2 bytes) at each level. The "
     "table's all-reduce column is that time x the all-reduces of a decode step over the level's ITL.",
     "no all-reduce measurement was recorded (interconnect.jsonl)"),
    ("accuracy", "Accuracy against output throughput",
     "sglang's few-shot GSM8K accuracy of each point against its output tok/s at the reference level; a red X is "
     "a bad_accuracy point (below the dashed threshold): fast, but not a result.",
     "no point has a GSM8K accuracy"),
)


def make_plots(records, reference, measurements=()):
    """([(file name, title, kind, png bytes, caption)], [(kind, title, why not drawn)]) for every kind of point;
    ``measurements``: the all-reduce measurements (load_interconnect), drawn with the points of their kind."""
    out, skipped = [], []
    for kind, group in kinds(records):
        mine = [m for m in measurements if bool(m.get("simulated")) == (kind == "simulated")]
        labels = point_labels(group)
        draw = {
            "throughput": lambda g, lb=labels, k=kind: plot_throughput(k, g, lb),
            "latency": lambda g, lb=labels, k=kind: plot_latency(k, g, lb),
            "pareto": lambda g, lb=labels, k=kind: plot_pareto(k, g, lb),
            "startup": lambda g, lb=labels, k=kind: plot_startup(k, g, lb),
            "gpu": lambda g, lb=labels, k=kind: plot_gpu(k, g, lb, reference) if reference else None,
            "interconnect": lambda g, k=kind, ms=mine: plot_interconnect(k, ms, g),
            "accuracy": lambda g, lb=labels, k=kind: plot_accuracy(k, g, lb, reference),
        }
        for name, title, caption, why in PLOTS:
            if name == "gpu" and reference:
                title = f"{title} at c{reference}"
            png = draw[name](group)
            if png:
                out.append((f"{kind}-{name}.png", _title(kind, title), kind, png, caption))
            else:
                skipped.append((kind, _title(kind, title), why))
    return out, skipped


# --------------------------------------------------------------------------------------------------
# Text of the report


def _facts_line(record):
    facts = record.get("facts") or {}
    prov = record.get("provenance") or {}
    versions = prov.get("versions") or {}
    parts = []
    if facts.get("gpu_count"):
        parts.append("{} x {}".format(facts["gpu_count"], ", ".join(facts.get("gpu_models") or ["?"])))
    if facts.get("sm"):
        parts.append(str(facts["sm"]))
    if facts.get("interconnect"):
        parts.append("interconnect {}".format(facts["interconnect"]))
    if facts.get("driver_version"):
        parts.append("driver {} (CUDA {})".format(facts["driver_version"], facts.get("driver_cuda_version") or "?"))
    toolkit = (facts.get("cuda_toolkit") or {}).get("version")
    if toolkit:
        parts.append(f"nvcc {toolkit}")
    virt = (facts.get("virtualization") or {}).get("kind")
    if virt and virt != "none":
        parts.append(f"virtualization {virt}")
    stack = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v)
    if stack:
        parts.append(stack)
    return "; ".join(parts) or "no GPU facts recorded"


def hosts_table(records):
    """[(sweep, host, data, facts line)] of each host, once per sweep."""
    seen, out = set(), []
    for r in summary.point_records(records):
        key = (r.get("sweep_id"), r.get("host"))
        if key in seen:
            continue
        seen.add(key)
        out.append((r.get("sweep_id"), r.get("host"), summary.data_label(r), _facts_line(r)))
    return out


def host_checks_table(records):
    """[(sweep, host, check, verdict, evidence, fix)]: each host's host checks (gpu_facts), once per sweep; the ok
    ones too, so a reader sees what was checked."""
    seen, out = set(), []
    for r in summary.point_records(records):
        key = (r.get("sweep_id"), r.get("host"))
        checks = (r.get("facts") or {}).get("host_checks") or []
        if key in seen or not checks:
            continue
        seen.add(key)
        for c in checks:
            out.append((r.get("sweep_id"), r.get("host"), c.get("name"), c.get("verdict"), c.get("evidence"),
                        c.get("fix") or "-"))
    return out


def transport_table(records):
    """[(sweep, host, NCCL environment, NCCL version, transport, pairs, what it means, all-reduce at the decode size,
    NCCL's line)]: the transport NCCL chose between the GPU pairs of each host's all-reduce measurement, in its own
    words (record ``interconnect.transport``, module_utils/nccl_log.py), one row per transport and one per refusal of
    P2P, once per sweep, host and NCCL environment."""
    seen, out = set(), []
    for r in summary.point_records(records):
        inter = r.get("interconnect") or {}
        transport = inter.get("transport") or {}
        key = (r.get("sweep_id"), r.get("host"), inter.get("key"))
        if key in seen or not transport.get("found"):
            continue
        seen.add(key)
        estimate = (r.get("diagnosis") or {}).get("interconnect") or {}
        latency = estimate.get("latency_us")
        at = f"{latency:.1f} us at {_size(estimate.get('message_bytes'))}" if latency else "-"
        by = {}
        for p in transport.get("pairs") or []:
            by.setdefault(p["transport"], []).append(p)
        for name, pairs in sorted(by.items(), key=lambda kv: -len(kv[1])):
            named = ", ".join(f"GPU{_dev(p, 'src')} -> GPU{_dev(p, 'dst')}" for p in pairs[:4])
            if len(pairs) > 4:
                named += f", ... ({len(pairs)} pairs)"
            meaning = (nccl_log.TRANSPORTS.get(name) or nccl_log.TRANSPORTS.get(name.split("/")[0]) or ("", ""))[0]
            out.append((r.get("sweep_id"), r.get("host"), inter.get("environment_text") or "-",
                        transport.get("nccl_version") or "-", name, named, meaning or "-", at, pairs[0]["line"]))
        for ref in transport.get("refusals") or []:
            out.append((r.get("sweep_id"), r.get("host"), inter.get("environment_text") or "-",
                        transport.get("nccl_version") or "-", "P2P refused",
                        " and ".join(f"GPU{g}" for g in ref.get("gpus") or []) or "-", ref.get("reason"), at,
                        ref.get("line")))
    return out


def _dev(pair, side):
    dev = pair.get(side + "_dev")
    return dev if dev is not None else pair.get(side)


def _size(n):
    if not n:
        return "?"
    return f"{n / 1024.0:.0f} KiB" if n >= 1024 else f"{n} B"


TRANSPORT_HEADER = ("sweep", "host", "NCCL environment", "NCCL", "transport", "GPU pairs", "what it means",
                    "all-reduce at the decode size", "NCCL's line")


SETTING_KEYS = ("client", "client_version", "backend", "dataset_name", "input_len", "output_len", "range_ratio",
                "concurrency", "num_prompts", "precision", "level_budget_s", "repetitions", "reference_concurrency",
                "source")


def settings_line(records):
    """One line per sweep: its benchmark settings (client, lengths, levels, prompts)."""
    found, seen = [], set()
    for r in summary.point_records(records):
        settings = (r.get("benchmark") or {}).get("settings") or {}
        text = ", ".join(f"{k} {settings[k]}" for k in SETTING_KEYS if settings.get(k) not in (None, "", []))
        key = (r.get("sweep_id"), text)
        if text and key not in seen:
            seen.add(key)
            found.append("{}: {}".format(r.get("sweep_id"), text))
    return found


def heading(records):
    points = summary.point_records(records)
    ids = []
    for r in points:
        if r.get("sweep_id") not in ids:
            ids.append(r.get("sweep_id"))
    text = "moesweep report: {}".format(", ".join(str(i) for i in ids))
    if points and all(summary.is_simulated(r) for r in points):
        text += " (SIMULATED)"
    elif any(summary.is_simulated(r) for r in points):
        text += " (measured and SIMULATED points, kept apart)"
    return text


DEFINITIONS = (
    "Figures are those of sglang's own `bench_serving` (output / total token throughput, TTFT, ITL) at each "
    "concurrency level.",
    "tokens/s/user = output tok/s / concurrency and tokens/s/GPU = output tok/s / GPUs of the server "
    "(tp x pp x dp), as vLLM's `vllm bench sweep plot_pareto` computes them "
    "(https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/sweep/plot_pareto.py). InferenceX reports "
    "its \"interactivity\" as 1000 / TPOT instead "
    "(https://github.com/SemiAnalysisAI/InferenceX/blob/main/utils/process_result.py), which is higher "
    "while requests wait for prefill.",
    "GPU utilization is nvidia-smi's `utilization.gpu` (the share of time any kernel ran, not how much of the "
    "GPU worked); power is the board's draw as a share of its enforced power limit.",
    "GSM8K accuracy is sglang's own `sglang.test.few_shot_gsm8k` (5-shot, greedy, the first N questions of the "
    "GSM8K test split, https://github.com/openai/grade-school-math, MIT) run from the benchmark client against the "
    "point's server; a point below its threshold is bad_accuracy and never the best or the restore's choice.",
    "Steady-state output tok/s: the rate while every `--max-concurrency` slot was busy (the drain left out), "
    "concurrency x output tokens / request time over those requests, with its 95 % interval by batch means over "
    "consecutive requests widened by the GPU's step-time drift (CV 0.3 % correlated over 60 s, measured on an "
    "H100), which the requests of one cohort cannot show; a level sized to a precision target ran a pilot and "
    "then rounds until the interval's half-width reached the target or its time budget ran out. TTFT / ITL / TPOT "
    "percentiles carry their sample counts and order-statistic intervals in the records.",
    "Ties: " + summary.TIE_RULE + ".",
)


def grouped_caveats(records):
    """[(title, simulated, caveats)]: a caveat every point of a host has is said once for the host, the rest per
    point."""
    points = summary.point_records(records)
    by_host = {}
    for r in points:
        by_host.setdefault((r.get("sweep_id"), r.get("host")), []).append(r)
    out = []
    for (_sweep, host), group in by_host.items():
        lists = [summary.caveats(r) for r in group]
        common = [c for c in lists[0] if all(c in other for other in lists[1:])] if len(group) > 1 else []
        simulated = summary.is_simulated(group[0])
        if common:
            out.append((f"{host}, every point", simulated, common))
        for r, items in zip(group, lists, strict=True):
            rest = [c for c in items if c not in common]
            if rest:
                out.append((f"{host} / {r.get('point')}", simulated, rest))
    return out


DRY_RUN_HEADER = ["host", "point", "sglang", "where", "GPUs", "verdict", "attention", "MoE runner", "KV cache", "page",
                  "sglang's message or why it did not run"]
_RESOLVED_SHOWN = ("attention_backend", "moe_runner_backend", "kv_cache_dtype", "page_size")


def dry_run_rows(records):
    """One row per point whose record says what sglang's own argument handling answered (preflight.dry_run): where
    it ran, whose GPU answers, the verdict, what it resolved, and its message (with the line) or why it did not."""
    rows = []
    for r in summary.point_records(records):
        dry = (r.get("preflight") or {}).get("dry_run")
        if not dry:
            continue
        resolved = dry.get("resolved") or {}
        err = dry.get("error") or {}
        if err:
            where = " ({}:{})".format(err.get("file"), err.get("line")) if err.get("file") else ""
            said = "{}{}".format((err.get("message") or "").splitlines()[0][:200] if err.get("message") else "", where)
        else:
            said = dry.get("reason") or "; ".join(dry.get("notices") or [])[:200] or "-"
        rows.append([r.get("host"), r.get("point"), dry.get("sglang_version") or "-", dry.get("where") or "-",
                     dry.get("gpus") or "-", dry.get("verdict")]
                    + ["-" if resolved.get(k) is None else resolved[k] for k in _RESOLVED_SHOWN] + [said])
    return rows


def _md_table(header, rows):
    esc = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _h in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return out


def render_markdown(records, rows, plots, reference, skipped=()):
    lines = ["# " + heading(records), ""]
    if any(r.get("simulated") for r in rows):
        lines += ["> " + summary.SIMULATED_NOTE, ""]
    lines += ["## Hosts", ""]
    lines += _md_table(["sweep", "host", "data", "facts and stack"], hosts_table(records))
    lines.append("")
    checks = host_checks_table(records)
    if checks:
        lines += ["## Host checks", ""]
        lines += _md_table(["sweep", "host", "check", "verdict", "evidence", "fix"], checks)
        lines.append("")
    transports = transport_table(records)
    if transports:
        lines += ["## Interconnect, as NCCL reported it", ""]
        lines += _md_table(TRANSPORT_HEADER, transports)
        lines.append("")
    for text in settings_line(records):
        lines += ["Benchmark: " + text, ""]
    lines += ["## Comparison", ""]
    lines.append(summary.render_markdown(rows).replace("\n## ", "\n### "))
    effects = summary.matrix_effects(records, reference)
    if effects:
        # a launch matrix: each axis's effect, its failures by value, the two-axis table, the best cell's launch
        lines += ["## Launch matrix", "", "```", summary.render_matrix_text(effects), "```", ""]
    if plots or skipped:
        lines += ["## Plots", ""]
        for name, title, _kind, _png, caption in plots:
            lines += ["### " + title, "", f"![{title}]({PLOTS_DIR}/{name})", "", caption, ""]
        for _kind, title, why in skipped:
            lines += [f"Not drawn: {title} ({why}).", ""]
    failures = [summary.failure_details(r) for r in summary.point_records(records) if r.get("status") != "passed"]
    if failures:
        lines += ["## Failures", ""]
        for f in failures:
            lines += ["### {}{}: {}".format(f["title"], " (SIMULATED)" if f["simulated"] else "", f["status"]), ""]
            lines += ["**{}**".format(f["summary"]), ""]
            lines += [f"- {line}" for line in f["lines"]]
            if f["citations"]:
                lines += [f"- source: {url}" for url in f["citations"]]
            if f["alternatives"]:
                lines.append("- compatible alternatives: {}".format(", ".join(f["alternatives"])))
            lines.append("")
            if f["excerpt"]:
                lines += ["```", f["excerpt"], "```", ""]
    dry = dry_run_rows(records)
    if dry:
        lines += ["## What sglang's own argument handling answered", "",
                  "Each point's launch line, run through its sglang version's own argument handling before anything "
                  "restarted (on the controller, the pinned wheel with the GPU queries answered from the facts; on "
                  "the host, its own sglang, torch and GPUs).", ""]
        lines += _md_table(DRY_RUN_HEADER, dry) + [""]
    cav = grouped_caveats(records)
    if cav:
        lines += ["## Caveats from the preflight", ""]
        for title, simulated, items in cav:
            lines.append("- **{}**{}:".format(title, " (SIMULATED)" if simulated else ""))
            lines += [f"  - {text}" for text in items]
        lines.append("")
    restores = summary.restore_records(records)
    if restores:
        lines += ["## Configuration left on the hosts", ""]
        lines += _md_table(["sweep", "host", "data", "policy", "point", "status", "why", "readiness"],
                           [(r.get("sweep_id"), r.get("host"), summary.data_label(r), r.get("policy"),
                             r.get("point") or "-", r.get("status"), r.get("reason") or "-",
                             _restore_readiness(r)) for r in restores])
        lines.append("")
    lines += ["## Definitions", ""] + ["- " + d for d in DEFINITIONS] + [""]
    return "\n".join(lines)


def _restore_readiness(record):
    readiness = record.get("readiness") or {}
    if not readiness:
        return "-"
    text = str(readiness.get("state"))
    if readiness.get("elapsed") is not None:
        text += " in {:.1f} s".format(readiness["elapsed"])
    if readiness.get("state") not in (None, "ready") and readiness.get("decisive_line"):
        text += ": " + readiness["decisive_line"]
    return text


CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif;margin:24px;color:#1a1a1a;
max-width:1500px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 14px}
th,td{border:1px solid #d0d0d0;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
tr.passed td.status{color:#1b7f3b;font-weight:600}tr.fail td.status{color:#b00020;font-weight:600}
tr.simulated td.data,span.sim{color:#b00020;font-weight:700}
td.cell-failed,td.cell-invalid{color:#b00020;font-style:italic}
.banner{background:#fff1f1;border:1px solid #e5a0a0;padding:8px 12px;margin:8px 0 14px;color:#7a0015}
.best{background:#eef7ee;border:1px solid #9fd09f;padding:6px 10px;margin:6px 0}
.note{color:#555;font-size:12.5px;margin:4px 0}
figure{margin:10px 0 22px}figure img{max-width:100%;border:1px solid #e3e3e3}
figcaption{font-size:12.5px;color:#444}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow-x:auto;font-size:12px;max-height:320px}
.failure{border-left:4px solid #b00020;padding:2px 12px;margin:12px 0}
ul{margin:4px 0 10px}
td.name{white-space:nowrap}
.badge{background:#1b7f3b;color:#fff;border-radius:3px;padding:0 5px;font-size:11px;font-weight:600}
"""

# Sets data attributes on <body> once the page has loaded: how many images there are, how many decoded
# (naturalWidth > 0) and how many are broken. A headless browser reads them with --dump-dom.
IMAGE_CHECK = """
(function () {
  function check() {
    var imgs = document.images, loaded = 0, broken = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) { loaded++; } else { broken++; }
    }
    document.body.setAttribute("data-images", String(imgs.length));
    document.body.setAttribute("data-images-loaded", String(loaded));
    document.body.setAttribute("data-images-broken", String(broken));
    document.body.setAttribute("data-images-ok", broken === 0 && loaded === imgs.length ? "true" : "false");
  }
  window.addEventListener("load", check);
})();
"""


def _h(text):
    return html.escape("" if text is None else str(text))


def _html_table(rows):
    cols = summary.table_columns(rows, reason_limit=160)
    out = ["<table class=\"points\"><thead><tr>"]
    out += [f"<th>{_h(name)}</th>" for name, _f in cols]
    out.append("</tr></thead><tbody>")
    level_cols = {name for name, _f in cols if name.startswith("c") and name.endswith("out/total")}
    for row in rows:
        klass = ["point", "passed" if row["status"] == "passed" else "fail"]
        if row.get("simulated"):
            klass.append("simulated")
        simulated = "true" if row.get("simulated") else "false"
        out.append(f"<tr class=\"{' '.join(klass)}\" data-sweep=\"{_h(row['sweep_id'])}\" "
                   f"data-host=\"{_h(row['host'])}\" "
                   f"data-point=\"{_h(row['point'])}\" data-status=\"{_h(row['status'])}\" "
                   f"data-simulated=\"{simulated}\">")
        for name, f in cols:
            value = f(row)
            css = {"data": "data", "status": "status"}.get(name, "")
            if name in level_cols or name.startswith(("startup", "TTFT", "GPU util", "power")):
                css = "num"
                if value in ("failed", "invalid"):
                    css = "cell-" + value
            title = ""
            if name == "reason" and row.get("reason"):
                title = " title=\"{}\"".format(_h(row["reason"]))
            text = _h(value)
            if name.startswith("point") and row.get("best") and value.endswith(" *best*"):
                text = "{} <span class=\"badge\">best</span>".format(_h(value[:-len(" *best*")]))
            if name in ("host", "sweep") or name.startswith("point") or name == "backend":
                css = "name"
            out.append(f"<td class=\"{css}\"{title}>{text}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def render_html(records, rows, plots, reference, skipped=()):
    title = heading(records)
    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             f"<title>{_h(title)}</title><style>{CSS}</style><script>{IMAGE_CHECK}</script></head><body>",
             f"<h1>{_h(title)}</h1>"]
    if any(r.get("simulated") for r in rows):
        parts.append(f"<div class=\"banner\">{_h(summary.SIMULATED_NOTE)}</div>")
    parts.append("<h2>Hosts</h2><table><thead><tr><th>sweep</th><th>host</th><th>data</th><th>facts and stack</th>"
                 "</tr></thead><tbody>")
    for sweep, host, data, facts in hosts_table(records):
        cls = " class=\"sim\"" if data == "SIMULATED" else ""
        parts.append(f"<tr><td>{_h(sweep)}</td><td>{_h(host)}</td><td><span{cls}>{_h(data)}</span></td><td>{_h(facts)}</td></tr>")
    parts.append("</tbody></table>")
    checks = host_checks_table(records)
    if checks:
        parts.append("<h2>Host checks</h2><table><thead><tr><th>sweep</th><th>host</th><th>check</th><th>verdict</th>"
                     "<th>evidence</th><th>fix</th></tr></thead><tbody>")
        for row in checks:
            parts.append("<tr>" + "".join(f"<td>{_h(cell)}</td>" for cell in row) + "</tr>")
        parts.append("</tbody></table>")
    transports = transport_table(records)
    if transports:
        parts.append("<h2>Interconnect, as NCCL reported it</h2><table><thead><tr>"
                     + "".join(f"<th>{_h(h)}</th>" for h in TRANSPORT_HEADER) + "</tr></thead><tbody>")
        for row in transports:
            parts.append("<tr>" + "".join(f"<td>{_h(cell)}</td>" for cell in row) + "</tr>")
        parts.append("</tbody></table>")
    for text in settings_line(records):
        parts.append(f"<p class=\"note\">Benchmark: {_h(text)}</p>")
    parts.append("<h2>Comparison</h2>")
    for note in summary.table_notes(rows):
        if note != summary.SIMULATED_NOTE:
            parts.append("<p class=\"note\">{}</p>".format(_h(note.replace("`", ""))))
    for text in summary.best_lines(rows):
        parts.append(f"<div class=\"best\">{_h(text)}</div>")
    for group_title, group in summary.kind_groups(rows):
        parts.append(f"<h3>{_h(group_title)}</h3>")
        parts.append(_html_table(group))
    if plots or skipped:
        parts.append("<h2>Plots</h2>")
        for name, plot_title, _kind, png, caption in plots:
            uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            parts.append(f"<figure><img src=\"{uri}\" alt=\"{_h(plot_title)}\" data-name=\"{_h(name)}\">"
                         f"<figcaption>{_h(caption)}</figcaption></figure>")
        for _kind, plot_title, why in skipped:
            parts.append(f"<p class=\"note\">Not drawn: {_h(plot_title)} ({_h(why)}).</p>")
    failures = [summary.failure_details(r) for r in summary.point_records(records) if r.get("status") != "passed"]
    if failures:
        parts.append("<h2>Failures</h2>")
        for f in failures:
            sim = " <span class=\"sim\">SIMULATED</span>" if f["simulated"] else ""
            parts.append(f"<div class=\"failure\"><h3>{_h(f['title'])}{sim}: {_h(f['status'])}</h3>"
                         f"<p><b>{_h(f['summary'])}</b></p><ul>")
            parts += [f"<li>{_h(line)}</li>" for line in f["lines"]]
            parts += [f"<li>source: <a href=\"{_h(u)}\">{_h(u)}</a></li>" if u.startswith("http")
                      else f"<li>source: {_h(u)}</li>" for u in f["citations"]]
            if f["alternatives"]:
                parts.append("<li>compatible alternatives: {}</li>".format(_h(", ".join(f["alternatives"]))))
            parts.append("</ul>")
            if f["excerpt"]:
                parts.append("<pre>{}</pre>".format(_h(f["excerpt"])))
            parts.append("</div>")
    dry = dry_run_rows(records)
    if dry:
        parts.append("<h2>What sglang's own argument handling answered</h2><table><thead><tr>"
                     + "".join(f"<th>{_h(h)}</th>" for h in DRY_RUN_HEADER) + "</tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in dry]
        parts.append("</tbody></table>")
    cav = grouped_caveats(records)
    if cav:
        parts.append("<h2>Caveats from the preflight</h2><ul>")
        for title, simulated, items in cav:
            sim = " <span class=\"sim\">SIMULATED</span>" if simulated else ""
            parts.append("<li><b>{}</b>{}<ul>{}</ul></li>".format(
                _h(title), sim, "".join(f"<li>{_h(t)}</li>" for t in items)))
        parts.append("</ul>")
    restores = summary.restore_records(records)
    if restores:
        parts.append("<h2>Configuration left on the hosts</h2><table><thead><tr><th>sweep</th><th>host</th>"
                     "<th>data</th><th>policy</th><th>point</th><th>status</th><th>why</th><th>readiness</th>"
                     "</tr></thead><tbody>")
        for r in restores:
            parts.append("<tr class=\"restore\">" + "".join(f"<td>{_h(v)}</td>" for v in (
                r.get("sweep_id"), r.get("host"), summary.data_label(r), r.get("policy"), r.get("point") or "-",
                r.get("status"), r.get("reason") or "-", _restore_readiness(r))) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("<h2>Definitions</h2><ul>{}</ul>".format("".join("<li>{}</li>".format(_h(d.replace("`", "")))
                                                              for d in DEFINITIONS)))
    parts.append("</body></html>\n")
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------
# The whole report


def default_out_dir(sources):
    first = Path(sources[0])
    base = first.parent if first.is_file() else first
    if len(sources) == 1:
        return base / "report"
    names = [(Path(s).parent if Path(s).is_file() else Path(s)).name for s in sources]
    return base.parent / ("report-" + "+".join(names))[:120]


def build_report(sources, out_dir=None, reference_concurrency=None):
    """Write report.md, report.html and plots/*.png for the sweeps ``sources`` (directories or points.jsonl
    files). Returns {markdown, html, plots, rows, reference_concurrency, out_dir}. ReportError for bad input,
    before anything is written."""
    if not sources:
        raise ReportError("give at least one sweep: moesweep report results/<sweep_id>")
    check_plotter()
    sweeps = load_sweeps(sources)
    records = [r for _src, recs in sweeps for r in recs]
    reference = check_reference(records, reference_concurrency)
    out = check_out_dir(out_dir if out_dir is not None else default_out_dir(sources))
    rows = summary.summary_rows(records, reference)
    plots, skipped = make_plots(records, reference, load_interconnect(sources))
    _mkdir(out)
    _mkdir(out / PLOTS_DIR)
    paths = []
    for name, _plot_title, _kind, png, _caption in plots:
        path = out / PLOTS_DIR / name
        _write(path, png)
        paths.append(path)
    md_path, html_path = out / "report.md", out / "report.html"
    _write(md_path, render_markdown(records, rows, plots, reference, skipped))
    _write(html_path, render_html(records, rows, plots, reference, skipped))
    return {"markdown": md_path, "html": html_path, "plots": paths, "rows": rows,
            "reference_concurrency": reference, "out_dir": out}
