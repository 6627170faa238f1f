"""SIMULATED stand-in for the all-reduce measuring program (the server role's files/allreduce_perf.py, whose output is
NVIDIA nccl-tests' all_reduce_perf table). Stdlib only; shares no code with plugins/.

Three interconnect profiles; each curve is a published all_reduce_perf measurement: the times at the sizes the source
printed (linear between them), then, past the largest such size, the source's peak bus bandwidth
(time grows by (bytes - last) x 2(n-1)/n / busbw). Every number below names its source.

* ``nvlink`` (8x H200 / HGX, NVSwitch): small sizes from an 8-GPU intra-node NCCL all_reduce_perf on H20 (Hopper on the
  same 4th-generation NVLink / NVSwitch baseboard as the H200), https://github.com/deepseek-ai/DeepEP/issues/303
  (4 B 12.49 us ... 4 KiB 16.69 us); peak busbw 475 GB/s of 8x H200 NVLink4,
  https://github.com/NVIDIA/nccl-tests/issues/272 ("The output shows peak bandwidth of 475 GB/s").
* ``pix`` (8x RTX PRO 6000 Blackwell on PCIe switches, P2P on): NCCL times of the 8-GPU switch box ("luke", 3x
  switches) in https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md, "Custom Allreduce vs
  NCCL" (256 B 24.6 us, 1 KB 24.1, 8 KB 24.2, 32 KB 24.5, 64 KB 24.1, 256 KB 28.0); peak busbw 41.1 GB/s, same page,
  "8-GPU Results" (luke, 3x switches, sweep 8M-2G).
* ``vm_phb`` (8x PCIe GPUs passed through to a VM, every GPU behind the VM's host bridge, no P2P: NCCL goes through
  host memory): the whole table of 8 PCIe GPUs without P2P whose every pair crosses the CPUs (8x RTX 4090, stock
  driver, two EPYC 7542, topology SYS), https://blog.chlc.cc/p/rtx4090-gpudirect-p2p-unlocked ("Test the original
  performance", 8 B 38.83 us ... 128 MiB 16253 us, 14.45 GB/s busbw), also recorded in
  tests/fixtures/interconnect/rtx4090-x8-sys-no-p2p.txt. Those are PCIe Gen4 GPUs: a Gen5 board moves large messages
  faster, but the small-message latency that decides a decode step is the host-memory path's. The same ~40 us at 8 B
  on another 8x 4090 box: https://github.com/NVIDIA/nccl/issues/1530 (42.14 us); P2P disabled costs "~14 us"
  cross-GPU latency against 0.4 us with P2P on RTX PRO 6000 boxes,
  https://github.com/voipmonitor/rtx6kpro/blob/master/hardware/pcie-bandwidth.md ("P2P Enabled vs Disabled").

The curves are 8-rank measurements; other rank counts reuse the latency points and scale only the bandwidth term by
2(n-1)/n (an assumption, marked). Profile: ``interconnect`` in /etc/moesweep-sim/profile.json, else
MOESWEEP_SIM_INTERCONNECT, else by GPU model (h200 -> nvlink; rtx-pro-6000 -> vm_phb, the reference VM).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from . import gpus, nccl

PROFILES = {
    "nvlink": {
        "points": [(4, 12.49), (8, 12.49), (16, 12.52), (64, 14.50), (128, 15.50), (256, 15.70), (512, 16.26),
                   (1024, 16.38), (2048, 16.49), (4096, 16.69)],
        "peak_busbw_gbs": 475.0,
        "p2p": True,
    },
    "pix": {
        "points": [(256, 24.6), (1024, 24.1), (8192, 24.2), (32768, 24.5), (65536, 24.1), (262144, 28.0)],
        "peak_busbw_gbs": 41.1,
        "p2p": True,
    },
    "vm_phb": {
        "points": [(8, 38.83), (16, 38.73), (32, 41.85), (64, 42.55), (128, 42.42), (256, 42.44), (512, 42.58),
                   (1024, 44.04), (2048, 42.91), (4096, 43.18), (8192, 44.02), (16384, 43.10), (32768, 44.18),
                   (65536, 45.66), (131072, 67.27), (262144, 124.8), (524288, 196.9), (1048576, 222.8),
                   (2097152, 373.4), (4194304, 580.8), (8388608, 1041.8), (16777216, 1972.8), (33554432, 3905.6),
                   (67108864, 7907.1), (134217728, 16253.0)],
        "peak_busbw_gbs": 14.45,
        "p2p": False,
    },
}
BY_GPU_MODEL = {"h200": "nvlink", "h200-x2": "nvlink", "rtx-pro-6000": "vm_phb"}


def profile_name(profile: dict) -> str:
    """The interconnect curve of the host: the profile's or the environment's, else its GPU model's; a PCIe host's
    curve follows what `nvidia-smi topo -p2p r` prints on it (nvidia_smi.topo_p2p: the knob `p2p_read`, else the
    model's code), so the P2P the host checks read and the all-reduce's times never disagree."""
    model = profile.get("gpu_model", "")
    chosen = profile.get("interconnect") or os.environ.get("MOESWEEP_SIM_INTERCONNECT")
    name = chosen or BY_GPU_MODEL.get(model, "nvlink")
    if name in ("vm_phb", "pix") and not chosen:
        p2p = profile.get("p2p_read", (gpus.MODELS.get(model) or {}).get("p2p_read", "OK"))
        name = "pix" if p2p == "OK" else "vm_phb"
    if name not in PROFILES:
        raise SystemExit(f"allreduce-perf-sim: unknown interconnect profile {name!r} (known: {', '.join(PROFILES)})")
    return name


def time_us(curve: dict, size: int, ranks: int) -> float:
    pts = curve["points"]
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0
    if size <= pts[0][0]:
        return pts[0][1]
    for (s0, t0), (s1, t1) in zip(pts, pts[1:], strict=False):
        if s0 <= size <= s1:
            return t0 + (t1 - t0) * (size - s0) / (s1 - s0)
    s_last, t_last = pts[-1]
    return t_last + (size - s_last) * factor / (curve["peak_busbw_gbs"] * 1e9) * 1e6


def time_text(us: float) -> str:
    """nccl-tests' time column (src/common.cu): 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10000.0:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100.0 else f"{us:7.2f}"


def nccl_version(profile: dict) -> str:
    """The NCCL the simulated torch carries: the profile's ``nccl_version``, else MOESWEEP_SIM_NCCL_VERSION, else
    2.27.3 (the NCCL of torch 2.8/2.9's cu128 wheels, nvidia-nccl-cu12 2.27.3 on PyPI)."""
    version = str(profile.get("nccl_version") or os.environ.get("MOESWEEP_SIM_NCCL_VERSION") or "2.27.3")
    if version not in nccl.VERSIONS:
        raise SystemExit(f"allreduce-perf-sim: NCCL {version} is not simulated (known: {', '.join(nccl.VERSIONS)})")
    return version


def render(name: str, ranks: int, gpu_name: str, lo: int, hi: int, dtype: str = "bfloat16",
           nccl_lines: list | None = None, version: str = "2.27.3") -> str:
    """The measurement's output; ``nccl_lines`` (NCCL's INFO lines with NCCL_DEBUG=INFO, nccl.render) come where NCCL
    connects: at the first collective, after the program's header."""
    curve = PROFILES[name]
    elem = 4 if dtype == "float32" else 2
    factor = 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0
    host = socket.gethostname()
    lines = [f"# SIMULATED all-reduce measurement (moesweep simulator, interconnect profile {name})",
             f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
             "validation: 0 graph: 0", "#", "# Using devices"]
    for r in range(ranks):
        lines.append(f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {host:>10s} device {r:2d} [0x{r + 1:02x}] "
                     f"{gpu_name}")
    lines.append(f"NCCL version {version}+cuda12.8")
    for a in range(ranks):
        for b in range(ranks):
            if a != b:
                lines.append(f"# P2P GPU{a} -> GPU{b}: {'yes' if curve['p2p'] else 'no'}")
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
              "algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
              "(GB/s)  (GB/s)"]
    lines += list(nccl_lines or [])
    busbws = []
    size = lo
    while size <= hi:
        t = time_us(curve, size, ranks)
        algbw = (size / 1e9) / (t / 1e6)
        busbws.append(algbw * factor)
        row = f"{time_text(t)}  {algbw:6.2f}  {algbw * factor:6.2f}    N/A"
        lines.append(f"{size:12d}  {size // elem:12d}  {dtype:>8s}  {'sum':>6s}  {-1:6d}  {row}  {row}")
        size *= 2
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %.4f " % (sum(busbws) / len(busbws)), "#"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="allreduce-perf-sim")
    p.add_argument("--ngpus", type=int, required=True)
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=256 * 1024 * 1024)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--time-budget", type=float, default=20.0)
    a = p.parse_args(argv)
    prof = gpus.load_profile()
    have = int(prof.get("gpu_count", 1))
    if a.ngpus < 1 or a.ngpus > have:
        sys.stderr.write(f"allreduce_perf: --ngpus {a.ngpus}, but {have} GPU(s) are visible\n")
        return 2
    try:
        scale = float(os.environ.get("MOESWEEP_SIM_TIME_SCALE", "1.0"))
    except ValueError:
        scale = 1.0
    time.sleep(min(a.time_budget, 2.0 * scale))  # torch import, NCCL init and the sweep take seconds on a real host
    name = profile_name(prof)
    version = nccl_version(prof)
    buses = [g.bus_id for g in gpus.gpus_for(prof)][:a.ngpus]
    lines = nccl.render(name, a.ngpus, buses, PROFILES[name]["p2p"], dict(os.environ), version=version,
                        cuda="12.8")
    sys.stdout.write(render(name, a.ngpus, gpus.MODELS[prof["gpu_model"]]["name"], a.min_bytes, a.max_bytes, a.dtype,
                            nccl_lines=lines, version=version))
    return 0
