#!/usr/bin/env python3
"""How much a real GPU's decode-step time drifts over minutes: the variation one benchmark cohort cannot see.

A closed loop of fixed lengths runs in cohorts (bench_stats' module docstring): every request of a cohort shares the
same forward steps, so the spread inside a cohort says nothing about how the next cohort would go. What the next one
would see differently on real hardware is the GPU itself: clocks, power capping, temperature, memory timing. This
script measures that on the lent GPU with a decode-like step (no sglang: the device image has none): one CUDA graph
that reads a 64-request batch through 64 expert weight matrices (bf16, memory-bound, as an MoE decode at batch 64 is)
and runs one dense bf16 matmul (compute-bound, as attention and the dense layers are), replayed back to back for
``--seconds``, each replay timed with CUDA events; ``nvidia-smi`` samples SM clock, power and temperature each second.

Printed (and written to ``--out``): the step time's mean and coefficient of variation; for windows of 10, 30 and 60 s
(a real cohort at the reference deployment lasts ~51 s at c1 and ~291 s at c64) the windows' mean step times, their
spread (CV) and lag-1 autocorrelation, and the ratio of that spread to the within-window standard error of the mean
(steps / sqrt(n)): a ratio well above 1 is drift that an interval built from inside one window does not see.

    run(kind=nvidia-h100-x1, command="PYTHONUNBUFFERED=1 python3 bench/device/step_drift.py --out $OUT")

Written to ``--out``: run.log (what this printed), summary.json, steps.csv (step index, end time s, step ms),
smi.csv (nvidia-smi's samples).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time


def stats(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, sd


def lag1(values):
    n = len(values)
    if n < 3:
        return None
    m = sum(values) / n
    den = sum((v - m) ** 2 for v in values)
    return sum((values[i] - m) * (values[i + 1] - m) for i in range(n - 1)) / den if den > 0 else 0.0


def windows(ends, steps, width):
    """(mean step ms, steps, their sd) of consecutive windows of ``width`` seconds, the last partial one dropped."""
    groups = {}
    for t, v in zip(ends, steps, strict=True):
        groups.setdefault(int(t // width), []).append(v)
    full = sorted(groups)[:-1]
    return [(sum(groups[k]) / len(groups[k]), len(groups[k]), stats(groups[k])[1]) for k in full]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--warmup", type=float, default=20.0)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "run.log"), "w")

    def say(msg):
        print(msg)
        log.write(msg + "\n")
        log.flush()

    import torch

    dev = torch.device("cuda")
    torch.manual_seed(0)
    batch, hidden, inter, experts = 64, 7168, 2048, 64
    x = torch.randn(batch, hidden, device=dev, dtype=torch.bfloat16)
    w = torch.randn(experts, hidden, inter, device=dev, dtype=torch.bfloat16) * 0.01
    a_mat = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b_mat = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    out = torch.empty(experts, batch, inter, device=dev, dtype=torch.bfloat16)
    dense = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)

    def step():
        torch.bmm(x.unsqueeze(0).expand(experts, -1, -1), w, out=out)
        torch.mm(a_mat, b_mat, out=dense)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(8):
            step()
    torch.cuda.synchronize()

    smi_path = os.path.join(a.out, "smi.csv")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,"
                            "temperature.gpu", "--format=csv,nounits", "-lms", "1000",
                            "-f", smi_path])
    name = torch.cuda.get_device_name(0)
    say(f"device: {name}; torch {torch.__version__}; CUDA {torch.version.cuda}")

    def run_for(seconds, record):
        ends, steps = [], []
        t0 = time.monotonic()
        pending = []
        while time.monotonic() - t0 < seconds:
            for _ in range(50):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                graph.replay()
                e1.record()
                pending.append((e0, e1))
            pending[-1][1].synchronize()
            now = time.monotonic() - t0
            if record:
                for e0, e1 in pending:
                    steps.append(e0.elapsed_time(e1))
                    ends.append(now)
            pending = []
        return ends, steps

    run_for(a.warmup, False)
    ends, steps = run_for(a.seconds, True)
    smi.terminate()
    smi.wait(timeout=10)

    with open(os.path.join(a.out, "steps.csv"), "w") as fh:
        fh.write("step,end_s,step_ms\n")
        for i, (t, v) in enumerate(zip(ends, steps, strict=True)):
            fh.write(f"{i},{t:.3f},{v:.5f}\n")
    mean, sd = stats(steps)
    summary = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda, "seconds": a.seconds,
               "steps": len(steps), "step_ms_mean": mean, "step_ms_cv": sd / mean, "windows": {}}
    say(f"{len(steps)} steps over {a.seconds:.0f} s: step {mean:.3f} ms, CV {100 * sd / mean:.3f} %")
    for width in (10, 30, 60):
        ws = windows(ends, steps, width)
        means = [m for m, _n, _s in ws]
        if len(means) < 2:
            continue
        wm, wsd = stats(means)
        sem = [s_ / math.sqrt(n) for _m, n, s_ in ws]
        inside = sum(sem) / len(sem)
        r1 = lag1(means)
        summary["windows"][str(width)] = {"count": len(ws), "means_ms": means, "cv": wsd / wm, "lag1": r1,
                                          "within_sem_ms": inside,
                                          "between_over_within": wsd / inside if inside else None}
        say(f"windows of {width:>2} s: {len(ws):>3}, mean step {wm:.4f} ms, between-window CV {100 * wsd / wm:.3f} %, "
            f"lag-1 {r1 if r1 is None else round(r1, 3)}, within-window s.e. {100 * inside / wm:.4f} %, "
            f"between / within {wsd / inside if inside else float('nan'):.1f}")
    with open(os.path.join(a.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    with open(smi_path) as fh:
        rows = [r.strip() for r in fh if r.strip()]
    say(f"nvidia-smi: {len(rows) - 1} samples; first {rows[1] if len(rows) > 1 else ''}; last {rows[-1]}")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
