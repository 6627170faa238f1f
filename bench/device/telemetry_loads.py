#!/usr/bin/env python3
"""Prove the telemetry samplers and the diagnosis on a real GPU: four PyTorch loads, both samplers each.

This is how ``tests/fixtures/telemetry/h200-x1-<date>/`` and ``bench/device/results/telemetry-h200-x1-<date>/``
were produced, by one call of this workplace's ``device`` tool (kind nvidia-h200: one H200, PyTorch and
nvidia-ml-py in the image's python3, no sglang, no network):

    run(kind=nvidia-h200, command="PYTHONUNBUFFERED=1 python3 bench/device/telemetry_loads.py --out $OUT")

Per load (noctx = nothing, no process holding a CUDA context; idle = this process holds a CUDA context and
1 GiB but launches nothing, as a server between requests; eager = tiny kernels launched one by one from
Python; cudagraph = the same tiny kernels replayed from a CUDA graph; membw = 2 GiB device-to-device copies;
compute = a large bf16 matmul loop) it starts the collection's two samplers as
child processes exactly as the benchmark module does (``telemetry.nvml_sampler_argv`` and
``telemetry.smi_sampler_argv``, the nvidia-smi one also with ``--filename=``), runs the load for ``--warmup``
seconds and then ``--seconds`` seconds (the window), stops the samplers with SIGTERM, and prints for each
sampler ``telemetry.summarise`` over the window, ``telemetry.energy`` and ``diagnosis.diagnose``.

``--replay tests/fixtures/telemetry/h200-x1-20261201`` re-reads such a recording with this checkout's code and
prints the same report (no GPU, no torch needed).

Written to ``--out`` (the device tool brings back at most 8 files):
  run.log           what this script printed
  summary.json      per load and sampler: window, work done, summary, energy, diagnosis; environment
  samples.tar.gz    the raw CSVs (nvml-<load>.csv, smi-<load>.csv, smi-f-<load>.csv), the nvidia-smi header of
                    QUERY_FIELDS (query-fields-header.csv), ``nvidia-smi -h``, the NVML probe line, the NVML
                    memory readings beside nvidia-smi's, and the NVRM lines of the kernel log
"""

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.moesweep.sweep.plugins.module_utils import diagnosis, telemetry  # noqa: E402

LOADS = ("noctx", "idle", "eager", "cudagraph", "membw", "compute")
LOG = []


def say(text=""):
    print(text, flush=True)
    LOG.append(text)


def sh(argv, timeout=30):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, "", str(err)


# --------------------------------------------------------------------------------------------------
# Loads (PyTorch). Each runs until ``deadline`` (time.time()) and returns (work units, unit name).


def load_noctx(torch, deadline):
    # no process holds a CUDA context (this one has not initialised CUDA yet): the GPU drops to idle clocks
    while time.time() < deadline:
        time.sleep(0.05)
    return 0, "kernel"


def load_idle(torch, deadline):
    keep = torch.ones(256, 1024, 1024, device="cuda")  # 1 GiB held, nothing launched: a server between requests
    torch.cuda.synchronize()
    while time.time() < deadline:
        time.sleep(0.05)
    del keep
    return 0, "kernel"


TINY_STEPS = 250  # per graph replay / eager burst: 2 kernels each (64x64 matmul, tanh)


def _tiny(torch):
    x = torch.randn(64, 64, device="cuda")
    w = torch.randn(64, 64, device="cuda") * 0.1
    return x, w


def load_eager(torch, deadline):
    x, w = _tiny(torch)
    kernels = 0
    while time.time() < deadline:
        for _ in range(TINY_STEPS):
            x = torch.tanh(x @ w)
        kernels += 2 * TINY_STEPS
        torch.cuda.synchronize()
    return kernels, "kernel"


def load_cudagraph(torch, deadline):
    x, w = _tiny(torch)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream before capture, as PyTorch's docs do
        for _ in range(3):
            y = x
            for _ in range(TINY_STEPS):
                y = torch.tanh(y @ w)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x
        for _ in range(TINY_STEPS):
            y = torch.tanh(y @ w)
    kernels = 0
    while time.time() < deadline:
        for _ in range(20):
            graph.replay()
        kernels += 20 * 2 * TINY_STEPS
        torch.cuda.synchronize()
    return kernels, "kernel"


def load_compute(torch, deadline):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    count = 0
    while time.time() < deadline:
        for _ in range(10):
            c = a @ b
        count += 10
        torch.cuda.synchronize()
    del c
    return count, "8192^3 bf16 matmul"


def load_membw(torch, deadline):
    n = 2**30  # 2 GiB of bf16 each way: far beyond the 60 MB L2, so every copy streams HBM
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    count = 0
    while time.time() < deadline:
        for _ in range(20):
            dst.copy_(src)
        count += 20
        torch.cuda.synchronize()
    return count, "2 GiB device-to-device copy"


LOAD_FNS = {
    "noctx": load_noctx,
    "idle": load_idle,
    "eager": load_eager,
    "cudagraph": load_cudagraph,
    "membw": load_membw,
    "compute": load_compute,
}


# --------------------------------------------------------------------------------------------------


def start_samplers(tmp, name, nvidia_smi, interval_ms, use_nvml):
    procs = {}
    if use_nvml:
        path = os.path.join(tmp, f"nvml-{name}.csv")
        procs["nvml"] = (subprocess.Popen(telemetry.nvml_sampler_argv(sys.executable, path, interval_ms)), path, None)
    path = os.path.join(tmp, f"smi-{name}.csv")
    out = open(path, "w")
    procs["smi"] = (subprocess.Popen(telemetry.smi_sampler_argv(nvidia_smi, interval_ms), stdout=out), path, out)
    path = os.path.join(tmp, f"smi-f-{name}.csv")
    procs["smi-f"] = (
        subprocess.Popen(telemetry.smi_sampler_argv(nvidia_smi, interval_ms, out_csv=path), stdout=subprocess.DEVNULL),
        path,
        None,
    )
    return procs


def stop_samplers(procs):
    stopped = {}
    t_term = time.time()
    for proc, _path, _out in procs.values():
        proc.send_signal(signal.SIGTERM)
    for key, (proc, _path, out) in procs.items():
        try:
            rc = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        stopped[key] = {"rc": rc, "exit_s": time.time() - t_term}
        if out:
            out.close()
    return t_term, stopped


def fmt_stat(stat, unit="", scale=1.0):
    if not stat:
        return "n/a"
    return "{:.0f}{} (p5 {:.0f}, max {:.0f})".format(
        stat["mean"] * scale, unit, stat["p5"] * scale, stat["max"] * scale
    )


def report(load, key, rows, lines, t0, t1, t_term, stop, work, unit):
    summary = telemetry.summarise(rows, t0, t1)
    en = telemetry.energy(rows, t0, t1)
    diag = diagnosis.diagnose(summary)
    a = summary["all"]
    last_t = max((r["t"] for r in rows if r["t"] is not None), default=None)
    age = f"{t_term - last_t:.2f}" if last_t else "n/a"
    stopped = f"exit rc {stop['rc']} {stop['exit_s']:.2f} s after SIGTERM; last sample {age} s before SIGTERM"
    if isinstance(stop["rc"], str):
        stopped = "replayed from the recording"
    say(
        f"  [{key}] {lines} lines, {len(rows)} rows parsed; {summary['samples']} rows in the {t1 - t0:.1f} s window; "
        f"{summary['rate_hz'] or 0:.2f} Hz; {stopped}"
    )
    limit = f"{a['power_limit_w']:.0f}" if a["power_limit_w"] else "n/a"
    clock_max = f"{a['sm_clock_max_mhz']:.0f}" if a["sm_clock_max_mhz"] else "n/a"
    say(
        f"      util {fmt_stat(a['util'])} %, mem util {fmt_stat(a['mem_util'])} %, "
        f"power {fmt_stat(a['power_w'])} W = {fmt_stat(a['power_frac'], scale=100)} % of {limit} W, "
        f"SM clock {fmt_stat(a['sm_clock_mhz'])} / {clock_max} MHz, temp {fmt_stat(a['temp_c'])} C"
    )
    shares = {k: round(v, 3) for k, v in (a["reasons"] or {}).items() if v}
    ecc = summary["gpus"][0]["ecc"] if summary["gpus"] else {}
    say(f"      reasons active (share of samples) {shares or 'none'}; ECC {ecc}")
    jpu = telemetry.joules_per_token(en["energy_j"], work)
    joules = f"{en['energy_j']:.0f}" if en["energy_j"] is not None else "n/a (" + "; ".join(en["reasons"]) + ")"
    avg = f"{en['avg_power_w']:.1f}" if en["avg_power_w"] else "n/a"
    per = f"; {jpu:.3g} J per {unit} ({work} in the window)" if jpu else ""
    say(f"      energy {joules} J over {t1 - t0:.1f} s (avg {avg} W){per}")
    say(f"      VERDICT {diag['verdict']}: {diag['label']}")
    for line in diag["evidence"]:
        say(f"        - {line}")
    return {
        "summary": summary,
        "energy": en,
        "diagnosis": diag,
        "lines": lines,
        "rows": len(rows),
        "stop": stop,
        "last_sample_before_sigterm_s": (t_term - last_t) if last_t else None,
    }


def run_load(load, torch, tmp, args, probe):
    procs = start_samplers(tmp, load, args.nvidia_smi, args.interval_ms, use_nvml=probe is not None)
    time.sleep(0.5)
    t_begin = time.time()
    deadline = t_begin + args.warmup + args.seconds
    work, unit = LOAD_FNS[load](torch, deadline)
    t_done = time.time()
    t0, t1 = t_begin + args.warmup, t_begin + args.warmup + args.seconds
    time.sleep(0.7)
    t_term, stopped = stop_samplers(procs)
    # work inside the window only: the load ran at a steady rate from t_begin to t_done
    work_in_window = int(round(work * args.seconds / max(t_done - t_begin, 1e-9)))
    say("")
    ran = t_done - t_begin
    say(f"== {load}: {work} x {unit} in {ran:.1f} s ({work / ran:.0f} per s); window {t0:.3f}..{t1:.3f}")
    if load == "compute":
        say(f"   {work * 2 * 8192**3 / ran / 1e12:.0f} TFLOP/s")
    if load == "membw":
        say(f"   {work * 2 * 2 * 2**30 / ran / 1e12:.2f} TB/s read + written")
    result = {
        "work": work,
        "work_in_window": work_in_window,
        "unit": unit,
        "t_begin": t_begin,
        "t_done": t_done,
        "window": [t0, t1],
        "samplers": {},
    }
    for key, (_proc, path, _out) in procs.items():
        with open(path) as fh:
            text = fh.read()
        rows = telemetry.parse_samples(text)
        lines = len([ln for ln in text.splitlines() if ln.strip()])
        result["samplers"][key] = report(load, key, rows, lines, t0, t1, t_term, stopped[key], work_in_window, unit)
    return result


def init_torch(args, env, extra):
    import torch  # imported late: the noctx load and the NVML probe must run with no CUDA context

    say(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0)}")
    env["torch"] = torch.__version__
    # nvidia-smi memory.used next to NVML's v1 and v2 readings, with 1 GiB held (which one the NVML sampler
    # should use to match nvidia-smi).
    held = torch.ones(256, 1024, 1024, device="cuda")
    torch.cuda.synchronize()
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        v1 = pynvml.nvmlDeviceGetMemoryInfo(h)
        v2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
        rc, smi_mem, _ = sh(
            [args.nvidia_smi, "--query-gpu=memory.used,memory.reserved,memory.total", "--format=csv,noheader,nounits"]
        )
        mib = 2**20
        mem = (
            f"nvidia-smi memory.used,memory.reserved,memory.total (MiB): {smi_mem.strip()}\n"
            f"NVML v1 used {v1.used // mib} total {v1.total // mib} (MiB)\n"
            f"NVML v2 used {v2.used // mib} reserved {v2.reserved // mib} total {v2.total // mib} (MiB)\n"
        )
        pynvml.nvmlShutdown()
    except Exception as exc:  # recorded, not fatal: the samplers are what is under test
        mem = f"NVML memory comparison failed: {exc!r}\n"
    del held
    extra["memory-v1-v2.txt"] = mem
    say(mem.strip())

    return torch


def print_table(results):
    say("")
    say("== per load (NVML sampler; nvidia-smi in brackets)")
    say(f"{'load':<10} {'util %':<16} {'power W (% of limit)':<22} {'SM clock MHz':<18} verdict")
    for load, res in results.items():
        cells = []
        for key in ("nvml", "smi"):
            if key not in res["samplers"]:
                cells.append(None)
                continue
            s = res["samplers"][key]
            a = s["summary"]["all"]
            cells.append(
                (
                    a["util"]["mean"] if a["util"] else float("nan"),
                    a["power_w"]["mean"] if a["power_w"] else float("nan"),
                    100 * a["power_frac"]["mean"] if a["power_frac"] else float("nan"),
                    a["sm_clock_mhz"]["mean"] if a["sm_clock_mhz"] else float("nan"),
                    a["sm_clock_max_mhz"] or float("nan"),
                    s["diagnosis"]["verdict"],
                )
            )
        main_cell = cells[0] or cells[1]
        other = cells[1] if cells[0] else None
        util = f"{main_cell[0]:.0f} [{other[0]:.0f}]" if other else f"{main_cell[0]:.0f}"
        power = f"{main_cell[1]:.0f} ({main_cell[2]:.0f} %) [{other[1]:.0f}]" if other else f"{main_cell[1]:.0f}"
        clock = f"{main_cell[3]:.0f}/{main_cell[4]:.0f} [{other[3]:.0f}]" if other else f"{main_cell[3]:.0f}"
        verdict = f"{main_cell[5]} [{other[5]}]" if other else main_cell[5]
        say(f"{load:<10} {util:<16} {power:<22} {clock:<18} {verdict}")
    verdicts = {
        load: {k: s["diagnosis"]["verdict"] for k, s in res["samplers"].items()} for load, res in results.items()
    }
    distinct = len({v.get("nvml", v.get("smi")) for v in verdicts.values()})
    say(f"distinct verdicts over {len(verdicts)} loads: {distinct} {verdicts}")
    return verdicts


def replay(directory):
    """Summaries and verdicts of a recorded run (a fixture folder), with this checkout's code, no GPU needed."""
    with open(os.path.join(directory, "windows.json")) as fh:
        windows = json.load(fh)
    results = {}
    for load in [x for x in LOADS if x in windows]:
        w = windows[load]
        t0, t1 = w["t_start"], w["t_end"]
        say("")
        say(f"== {load}: {w['work']} x {w['unit']}; window {t0:.3f}..{t1:.3f}")
        results[load] = {"samplers": {}}
        for key in ("nvml", "smi"):
            path = os.path.join(directory, f"{key}-{load}.csv")
            if not os.path.exists(path):
                continue
            with open(path) as fh:
                text = fh.read()
            # the recording's clock was UTC (see its README); read its timestamps so, whatever the zone here
            rows = telemetry.parse_samples(text, utc_offset_s=0)
            lines = len([ln for ln in text.splitlines() if ln.strip()])
            stop = {"rc": "n/a (replay)", "exit_s": 0.0}
            t_term = max(r["t"] for r in rows)
            results[load]["samplers"][key] = report(
                load, key, rows, lines, t0, t1, t_term, stop, w["work_in_window"], w["unit"]
            )
    print_table(results)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/telemetry-out")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--interval-ms", type=int, default=250)
    parser.add_argument("--loads", default=",".join(LOADS))
    parser.add_argument("--nvidia-smi", default=shutil.which("nvidia-smi") or "/usr/local/nvidia/bin/nvidia-smi")
    parser.add_argument("--replay", metavar="DIR", help="re-read a recorded run (a tests/fixtures/telemetry/ folder)")
    args = parser.parse_args()
    if args.replay:
        return replay(args.replay)
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join("/tmp", f"telemetry-loads-{os.getpid()}")
    os.makedirs(tmp)
    extra = {}
    env = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tz": time.tzname,
        "python": sys.version,
        "nvidia_smi": args.nvidia_smi,
        "interval_ms": args.interval_ms,
        "seconds": args.seconds,
        "warmup": args.warmup,
    }
    say(
        "telemetry_loads: {}, python {}, nvidia-smi {}".format(env["date_utc"], sys.version.split()[0], args.nvidia_smi)
    )

    rc, out, err = sh(
        [
            args.nvidia_smi,
            "--query-gpu=index,name,driver_version,pci.bus_id,power.limit,"
            "enforced.power.limit,clocks.max.sm,memory.total,ecc.mode.current",
            "--format=csv",
        ]
    )
    say(f"GPU: {out.strip() or err.strip()}")
    env["gpu_query"] = out
    rc, out, err = sh([args.nvidia_smi, "--query-gpu=" + ",".join(telemetry.QUERY_FIELDS), "--format=csv"])
    extra["query-fields-header.csv"] = out + err
    say(f"QUERY_FIELDS with header and units (rc {rc}):\n{(out + err).strip()}")
    rc, out, err = sh([args.nvidia_smi, "-h"])
    extra["nvidia-smi-h.txt"] = out + err
    say("nvidia-smi -h mentions --filename: {}; -lms: {}".format("--filename" in out, "-lms" in out))

    rc, out, err = sh(telemetry.nvml_probe_argv(sys.executable))
    probe = telemetry.parse_probe(out)
    extra["nvml-probe.txt"] = f"rc {rc}\nstdout: {out}\nstderr: {err}\n"
    say(f"NVML probe rc {rc}: {out.strip()} {err.strip()}")
    env["nvml_probe"] = probe

    results = {}
    loads = [x for x in args.loads.split(",") if x]
    unknown = [x for x in loads if x not in LOAD_FNS]
    if unknown:
        parser.error(f"unknown load(s) {', '.join(unknown)}; choose from {', '.join(LOADS)}")
    torch = None
    for load in loads:
        if load != "noctx" and torch is None:
            torch = init_torch(args, env, extra)
        results[load] = run_load(load, torch, tmp, args, probe)
    print_table(results)

    # The kernel log, as the caller reads it (journalctl -k first, dmesg else), through xid_events.
    t_first = min((r["t_begin"] for r in results.values()), default=time.time())
    klog = ""
    for argv in (["journalctl", "-k", "-o", "short-unix", "--no-pager"], ["dmesg"]):
        rc, out, err = sh(argv)
        why = (", " + err.strip()[:120]) if rc else ""
        say(f"{' '.join(argv)}: rc {rc}, {len(out.splitlines())} lines{why}")
        if rc == 0 and len(out.splitlines()) > len(klog.splitlines()):
            klog = out
    rc, stat, _ = sh(["cat", "/proc/stat"])
    boot = telemetry.boot_time(stat)
    nvrm = "\n".join(ln for ln in klog.splitlines() if "NVRM" in ln or "nvidia" in ln.lower())
    extra["kernel-log-nvrm.txt"] = nvrm + "\n"
    events_all = telemetry.xid_events(klog, boot=boot)
    events_new = telemetry.xid_events(klog, since=t_first, boot=boot)
    say(
        f"kernel log: {len(nvrm.splitlines())} NVRM/nvidia lines; Xid events: {len(events_all)} in the whole log, "
        f"{len(events_new)} since the first load"
    )
    env["xid_all"] = events_all
    env["xid_new"] = events_new

    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump({"env": env, "results": results}, fh, indent=1, sort_keys=True, default=str)
    with tarfile.open(os.path.join(args.out, "samples.tar.gz"), "w:gz") as tar:
        for name in sorted(os.listdir(tmp)):
            tar.add(os.path.join(tmp, name), arcname=name)
        for name, text in sorted(extra.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(args.out, "run.log"), "w") as fh:
        fh.write("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
