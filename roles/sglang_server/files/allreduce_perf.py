# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""All-reduce latency and bus bandwidth over the GPUs of a TP group, with the torch and NCCL the server loads.

Run with the server venv's python (the module interconnect_facts copies this file to the host and runs it under the
unit's NCCL environment). One process per GPU (torch.multiprocessing spawn), a torch.distributed NCCL group, and per
message size from --min-bytes to --max-bytes (factor 2): warm-up operations, then timed ones. The output is NVIDIA
nccl-tests' all_reduce_perf table (https://github.com/NVIDIA/nccl-tests, src/common.cu), so the same parser reads
either:

* time: microseconds per all-reduce, averaged over the timed operations, the slowest rank's (an all-reduce ends when
  every rank has its result); torch.distributed.all_reduce reduces in place, so the out-of-place and in-place column
  groups hold the same measurement;
* algbw = size / time (GB/s); busbw = algbw x 2 (n - 1) / n (nccl-tests doc/PERFORMANCE.md, AllReduce).

It also prints ``# P2P GPUi -> GPUj: yes|no`` for every ordered pair (torch.cuda.can_device_access_peer) and stops
adding sizes once --time-budget seconds have passed, so that the caller's bound holds on slow links.
Needs torch with CUDA; changes nothing on the host.
"""

import argparse
import os
import socket
import sys
import time


def _free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _sizes(lo, hi):
    size = lo
    while size <= hi:
        yield size
        size *= 2


def _time_text(us):
    """nccl-tests' time column (src/common.cu): 2 decimals below 100 us, 1 below 10 ms, none above."""
    if us >= 10000.0:
        return "%7.0f" % us
    return "%7.1f" % us if us >= 100.0 else "%7.2f" % us


def _nccl_version(torch):
    """NCCL's version as 2.27.3: torch.cuda.nccl.version() is a tuple in torch 2.x, an int (22703) in older ones."""
    try:
        v = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return "unknown"
    if isinstance(v, int):
        return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else "%d.%d.%d" % (
            v // 1000, v // 100 % 10, v % 100)
    return ".".join(str(x) for x in v)


def _worker(rank, world, port, args, started):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    dtype = getattr(torch, args.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    out = sys.stdout
    if rank == 0:
        nccl = _nccl_version(torch)
        out.write("# moesweep allreduce_perf (torch %s, torch.distributed over NCCL), nccl-tests' all_reduce_perf "
                  "columns\n" % torch.__version__)
        sweep = (args.min_bytes, args.max_bytes, args.warmup, args.iters)
        out.write("# nThread 1 nGpus 1 minBytes %d maxBytes %d step: 2(factor) warmup iters: %d iters: %d agg iters: 1 "
                  "validation: 0 graph: 0\n#\n# Using devices\n" % sweep)
        host = socket.gethostname()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        for r in range(world):
            props = torch.cuda.get_device_properties(r)
            bus = getattr(props, "pci_bus_id", None)
            out.write("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n"
                      % (r, os.getpid(), host, r, "0x%02x" % bus if isinstance(bus, int) else "-", props.name))
        out.write("NCCL version %s+cuda%s\n" % (nccl, torch.version.cuda))
        if visible is not None:
            out.write("# CUDA_VISIBLE_DEVICES=%s\n" % visible)
        for a in range(world):
            for b in range(world):
                if a != b:
                    access = "yes" if torch.cuda.can_device_access_peer(a, b) else "no"
                    out.write("# P2P GPU%d -> GPU%d: %s\n" % (a, b, access))
        out.write("# torch.distributed.all_reduce reduces in place: both column groups hold that one measurement\n")
        out.write("#\n#" + " " * 62 + "out-of-place" + " " * 23 + "in-place\n")
        out.write("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                  "algbw   busbw #wrong\n")
        out.write("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
                  "(GB/s)  (GB/s)\n")
        out.flush()
    factor = 2.0 * (world - 1) / world
    busbws = []
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    for size in _sizes(args.min_bytes, args.max_bytes):
        # every rank decides together whether the budget allows this size (rank 0's clock)
        flag.fill_(1 if rank != 0 or time.time() - started < args.time_budget else 0)
        dist.broadcast(flag, 0)
        if int(flag.item()) == 0:
            break
        count = size // elem
        buf = torch.zeros(count, dtype=dtype, device="cuda")  # sums of zeros stay finite however often
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier(device_ids=[rank])
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        us = torch.tensor([(time.perf_counter() - t0) * 1e6 / args.iters], dtype=torch.float64, device="cuda")
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        t_us = float(us.item())
        algbw = (size / 1e9) / (t_us / 1e6)
        if rank == 0:
            busbws.append(algbw * factor)
            fig = "%s  %6.2f  %6.2f    N/A" % (_time_text(t_us), algbw, algbw * factor)
            out.write("%12d  %12d  %8s  %6s  %6d  %s  %s\n" % (size, count, args.dtype, "sum", -1, fig, fig))
            out.flush()
        del buf
    if rank == 0:
        out.write("# Out of bounds values : 0 OK\n")
        out.write("# Avg bus bandwidth    : %.4f \n#\n" % (sum(busbws) / len(busbws) if busbws else 0.0))
        out.flush()
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(prog="allreduce_perf", description=__doc__.splitlines()[0])
    p.add_argument("--ngpus", type=int, required=True, help="ranks, one per visible GPU from GPU 0")
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=256 * 1024 * 1024)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--time-budget", type=float, default=20.0, help="seconds after which no further size starts")
    args = p.parse_args(argv)
    started = time.time()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as exc:
        sys.stderr.write("allreduce_perf: torch is not importable with %s: %s\n" % (sys.executable, exc))
        return 2
    if not torch.cuda.is_available():
        sys.stderr.write("allreduce_perf: torch.cuda.is_available() is False (no GPU or driver visible)\n")
        return 2
    have = torch.cuda.device_count()
    if args.ngpus < 1 or args.ngpus > have:
        sys.stderr.write("allreduce_perf: --ngpus %d, but %d GPU(s) are visible\n" % (args.ngpus, have))
        return 2
    mp.spawn(_worker, args=(args.ngpus, _free_port(), args, started), nprocs=args.ngpus, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
