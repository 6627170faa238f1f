#!/usr/bin/env python3
"""On the device: stage the slim sglang 0.5.15 stack, prove it, and run the planned cells through moesweep's modules.

One call of the device tool (the repository travels; ``.stack`` is carried)::

    run(carry=[".stack"], timeout_s=590,
        command="PYTHONUNBUFFERED=1 python3 bench/device/real_sglang/device_run.py --out $OUT --deadline 540 "
                "--cells qwen3-moe-tiny-bf16:triton,...")

1. stack: a venv at the server role's path (/opt/moesweep/venvs/sglang) with the device's site-packages visible
   (its torch 2.11.0+cu130, triton 3.6, numpy...), ``.stack/site.tar.xz`` unpacked into the venv's own
   site-packages (ahead of the device's); skipped when the same archive is already there (a warm machine);
2. proof: ``python -m sglang.launch_server --help`` and an import of every MoE runner module, timed;
3. NCCL: a one-GPU communicator's own INFO lines (``NCCL_DEBUG=INFO``), one all_reduce (a fixture, recorded only);
4. cells (``cells.json``, planned by plan_cells.py with moesweep's preflight): each launch line is run as the unit
   would run it (its argv and environment; no systemd here, so as a process group of its own), its whole output
   stamped line by line, followed live by ``readiness.Waiter`` (the sglang_log classifier, the health prober; the
   process's exit stands in for systemd's unit state); a ready server gets the ``sglang_smoke`` module, then the
   ``sglang_bench`` module (sglang 0.5.15's own bench_serving as the client, the NVML telemetry sampler, the
   diagnosis), each called through AnsibleModule exactly as Ansible calls it; then the server is stopped and the
   GPU seen released before the next cell.

Everything lands under $OUT/real-sglang.tar.gz (one file: the tool brings back at most 8) and a summary.txt.
A cell not started before ``--deadline`` seconds is recorded as not run.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
STACK = os.path.join(REPO, ".stack", "site.tar.xz")
VENV = os.environ.get("REAL_SGLANG_VENV", "/opt/moesweep/venvs/sglang")
PY = VENV + "/bin/python"
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)


def run(cmd, timeout=120, env=None, **kw):
    started = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
        return proc.returncode, proc.stdout, proc.stderr, time.time() - started
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", (exc.stderr or "") + "\n[timed out]", time.time() - started
    except OSError as exc:
        return 127, "", str(exc), time.time() - started


# ---------------------------------------------------------------------------------------------------- 1. the stack

def site_packages():
    return glob.glob(VENV + "/lib/python3*/site-packages")[0]


def stage_stack(res):
    digest = hashlib.sha256(open(STACK, "rb").read()).hexdigest()
    stamp = VENV + "/.moesweep-stack"
    if os.path.exists(stamp) and open(stamp).read().strip() == digest:
        res["stack"] = {"sha256": digest, "staged": "already there", "seconds": 0.0}
        return
    started = time.time()
    rc, out, err, _ = run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", VENV])
    if rc != 0:
        raise SystemExit(f"venv failed: {err}")
    # The device's python3 is itself a venv (/opt/torch/.venv): --system-site-packages would show the base
    # interpreter's packages, not its torch. A .pth file appends the device's own site-packages after the venv's.
    import sysconfig
    paths = sysconfig.get_paths()
    with open(os.path.join(site_packages(), "zz-device-site.pth"), "w") as fh:
        fh.write("\n".join(dict.fromkeys([paths["purelib"], paths["platlib"]])) + "\n")
    rc, out, err, _ = run(["tar", "-C", site_packages(), "-xJf", STACK], timeout=300)
    if rc != 0:
        raise SystemExit(f"unpack failed: {err}")
    with open(stamp, "w") as fh:
        fh.write(digest + "\n")
    res["stack"] = {"sha256": digest, "staged": "unpacked", "seconds": round(time.time() - started, 2)}


def unit_environment(plan_env):
    """The unit's environment: systemd's would be only the plan's, but this machine's own variables (the driver's
    library path, NCCL_NVLS_ENABLE=0 and the other NVLink-multicast switches) must stay set, so they are kept and
    the plan's are laid over them. PYTHON* variables of the caller are dropped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in ("OUT",)}
    env.update(plan_env)
    os.makedirs(env.get("HOME", "/var/lib/sglang"), exist_ok=True)
    return env


def prove(res, out_dir):
    env = unit_environment({"PYTHONUNBUFFERED": "1"})
    rc, out, err, secs = run([PY, "-m", "sglang.launch_server", "--help"], timeout=180, env=env)
    with open(os.path.join(out_dir, "launch_server-help.txt"), "w") as fh:
        fh.write(out + err)
    res["help"] = {"rc": rc, "seconds": round(secs, 2), "lines": len(out.splitlines()), "tail": (out + err)[-600:]}
    log(f"--help rc={rc} in {secs:.1f} s")
    code = r"""
import importlib, json, sys, time, traceback
mods = sys.argv[1:]
out = {}
t = time.time()
import torch
out["torch"] = [torch.__version__, torch.cuda.get_device_name(0), list(torch.cuda.get_device_capability(0))]
for m in mods:
    s = time.time()
    try:
        mod = importlib.import_module(m)
        out[m] = {"ok": True, "s": round(time.time() - s, 3), "file": getattr(mod, "__file__", None)}
    except BaseException as e:
        out[m] = {"ok": False, "s": round(time.time() - s, 3), "error": "%s: %s" % (type(e).__name__, e),
                  "trace": traceback.format_exc()[-2500:]}
import importlib.metadata as md
out["versions"] = {n: md.version(n) for n in ("sglang", "sglang-kernel", "flashinfer-python", "transformers",
                                               "tokenizers", "torch", "triton", "sgl-deep-gemm", "apache-tvm-ffi")}
print(json.dumps(out))
"""
    mods = ["sglang.srt.layers.moe.moe_runner." + m for m in
            ("triton", "triton_kernels", "deep_gemm", "flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl",
             "marlin", "aiter")] + ["sglang.srt.layers.moe.cutlass_moe", "sglang.srt.models.qwen3_moe",
                                    "sglang.srt.models.deepseek_v2", "sgl_kernel", "flashinfer", "deep_gemm",
                                    "sglang.srt.entrypoints.http_server", "sglang.bench_serving"]
    rc, out, err, secs = run([PY, "-c", code] + mods, timeout=240, env=env)
    try:
        res["imports"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res["imports"] = {"rc": rc, "stderr": err[-3000:]}
    res["imports_seconds"] = round(secs, 2)
    with open(os.path.join(out_dir, "imports.json"), "w") as fh:
        json.dump(res["imports"], fh, indent=1)
        fh.write("\n" + err[-6000:])
    bad = [m for m, v in res["imports"].items() if isinstance(v, dict) and v.get("ok") is False]
    log(f"imports in {secs:.1f} s, failed: {bad}")


# ---------------------------------------------------------------------------------------------------- 3. NCCL

NCCL_CODE = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", world_size=1, rank=0)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("all_reduce ok, sum", float(x.sum()), "nccl", torch.cuda.nccl.version())
dist.destroy_process_group()
"""


def nccl_fixture(res, out_dir):
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,P2P,SHM,NET,GRAPH")
    rc, out, err, secs = run([sys.executable, "-c", NCCL_CODE], timeout=120, env=env)
    with open(os.path.join(out_dir, "nccl-world1.log"), "w") as fh:
        fh.write(out + err)
    res["nccl"] = {"rc": rc, "seconds": round(secs, 2)}
    log(f"nccl rc={rc} in {secs:.1f} s")


# ---------------------------------------------------------------------------------------------------- 4. the cells

class ProcessJournal:
    """The server's merged stdout/stderr as the Waiter's journal: (message, wall seconds) per line, each stamped when
    read, and written to the cell's log as '<epoch seconds> <line>'."""

    def __init__(self, proc, path):
        self.proc = proc
        self.entries = []
        self.pos = 0
        self.cond = threading.Condition()
        self.fh = open(path, "w")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.time()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.fh.write(f"{now:.3f} {line}\n")
            self.fh.flush()
            with self.cond:
                self.entries.append((line, now))
                self.cond.notify_all()
        self.fh.close()

    def wait_readable(self, timeout):
        with self.cond:
            if self.pos < len(self.entries):
                return True
            self.cond.wait(max(0.0, timeout))
            return self.pos < len(self.entries)

    def read_entries(self):
        with self.cond:
            out = self.entries[self.pos:]
            self.pos = len(self.entries)
        return out


def unit_state(proc):
    """systemctl show's properties, from the process: running is active; an exit is failed with its code
    (ExecMainCode 1 = exited, 2 = killed by a signal, as systemd reports CLD_EXITED / CLD_KILLED)."""
    rc = proc.poll()
    if rc is None:
        return {"ActiveState": "active", "SubState": "running", "MainPID": str(proc.pid)}
    if rc < 0:
        return {"ActiveState": "failed", "SubState": "failed", "ExecMainCode": "2", "ExecMainStatus": str(-rc)}
    return {"ActiveState": "failed" if rc else "inactive", "SubState": "failed" if rc else "dead",
            "ExecMainCode": "1", "ExecMainStatus": str(rc)}


def call_module(module, args):
    """Run an Ansible module's main() in-process with its arguments, as interconnect_facts.py does."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    result = {}

    def done(self, **kw):
        result.update(kw)
        raise SystemExit(0)

    def failed(self, msg, **kw):
        result.update(kw, failed=True, msg=msg)
        raise SystemExit(1)

    basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json = done, failed
    with patch_module_args(args):
        try:
            module.main()
        except SystemExit:
            pass
    return result


def gpu_busy():
    rc, out, _, _ = run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], timeout=20)
    return [line for line in out.splitlines() if line.strip()]


def stop(proc, journal):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the scheduler / detokenizer children
    except (ProcessLookupError, PermissionError):
        pass
    journal.thread.join(timeout=10)
    started = time.time()
    while gpu_busy() and time.time() - started < 30:
        time.sleep(0.5)
    return {"released_s": round(time.time() - started, 2), "still_busy": gpu_busy()}


def first_stamp(entries, needles):
    for line, wall in entries:
        if any(n in line for n in needles):
            return wall, line
    return None, None


def run_cell(cell, cell_dir, deadline, bench_args):
    from ansible_collections.moesweep.sweep.plugins.module_utils import readiness
    from ansible_collections.moesweep.sweep.plugins.modules import sglang_bench, sglang_smoke

    os.makedirs(cell_dir, exist_ok=True)
    out = {"model": cell["model"], "backend": cell["backend"], "command_line": cell["command_line"]}
    env = unit_environment(cell["environment"])
    remaining = deadline - time.time()
    ready_timeout = max(20.0, min(cell.get("ready_timeout", 150.0), remaining - 25))
    wall_start = time.time()
    proc = subprocess.Popen(cell["argv"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    journal = ProcessJournal(proc, os.path.join(cell_dir, "server.log"))
    url = readiness.health_url(cell["host"], cell["port"], "/health")
    prober = readiness.HealthProber(url)
    prober.start()
    waiter = readiness.Waiter(journal, prober, lambda: unit_state(proc), timeout=ready_timeout, stall_timeout=120.0)
    state, elapsed = waiter.run()
    verdict_wall = time.time()
    prober.stop()
    result = waiter.result(state, elapsed)
    out["readiness"] = result
    out["start_wall"] = wall_start
    out["verdict_wall"] = verdict_wall
    entries = list(journal.entries)
    fired_wall, _ = first_stamp(entries, ["The server is fired up"])
    tb_wall, _ = first_stamp(entries, ["Traceback (most recent call last)"])
    out["fired_up_wall"] = fired_wall
    out["traceback_wall"] = tb_wall
    if state == "ready" and fired_wall:
        out["latency_after_fired_up_s"] = round(verdict_wall - fired_wall, 3)
    if state == "crashed" and tb_wall:
        out["latency_after_traceback_s"] = round(verdict_wall - tb_wall, 3)
    log("{} / {}: {} (cause {}) in {:.1f} s; {}".format(
        cell["model"], cell["backend"], state, result.get("cause"), elapsed, (result.get("decisive_line") or "")[:160]))
    if state == "ready":
        smoke = call_module(sglang_smoke, {"host": cell["host"], "port": cell["port"], "max_new_tokens": 32,
                                           "fail_on_error": False, "request_timeout": 60.0})
        out["smoke"] = smoke
        log("  smoke: {} {}".format(smoke.get("verdict") or smoke.get("state"), (smoke.get("msg") or "")[:200]))
        if not cell.get("bench", True):
            out["bench"] = {"skipped": "not asked (readiness and smoke only)"}
        elif deadline - time.time() > 45:
            bench_dir = os.path.join(cell_dir, "bench")
            args = dict(bench_args, client_python=PY, host=cell["host"], port=cell["port"],
                        tokenizer=os.path.join(REPO, cell["argv"][cell["argv"].index("--model-path") + 1]),
                        output_dir=bench_dir, level_timeout=max(30.0, deadline - time.time() - 20))
            started = time.time()
            bench = call_module(sglang_bench, args)
            out["bench"] = bench
            out["bench_wall_s"] = round(time.time() - started, 2)
            for lv in bench.get("levels") or []:
                log("  c{}: ok={} out tok/s {}  J/tok {}  {}".format(
                    lv.get("concurrency"), lv.get("ok"), lv.get("output_throughput"),
                    (lv.get("telemetry") or {}).get("joules_per_output_token"),
                    ((lv.get("diagnosis") or {}).get("headline") or "")[:100]))
            if bench.get("failed"):
                log("  bench failed: {}".format((bench.get("msg") or "")[:300]))
        else:
            out["bench"] = {"skipped": "deadline"}
    out["stop"] = stop(proc, journal)
    out["exit_code"] = proc.returncode
    with open(os.path.join(cell_dir, "cell.json"), "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True, default=str)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/real-sglang-out"))
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds from start after which no cell starts")
    ap.add_argument("--cells", default="", help="model:backend[:b][:tSECONDS],... with Q, D, G for the three models "
                    "(default: every cell of cells.json, each benchmarked when ready)")
    ap.add_argument("--stage-only", action="store_true",
                    help=f"stage the stack into the venv and stop (then run anything with {VENV}/bin/python)")
    ap.add_argument("--no-prove", action="store_true")
    ap.add_argument("--no-nccl", action="store_true")
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--num-prompts", default="8,32,64,128")
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=256)
    args = ap.parse_args()
    args.alias = {"Q": "qwen3-moe-tiny-bf16", "D": "dsv3-mla-tiny-fp8", "G": "glm5-dsa-tiny-fp8"}
    deadline = T0 + args.deadline
    work = os.path.join("/var/tmp", "real-sglang")
    os.makedirs(work, exist_ok=True)
    res = {"started": T0, "argv": sys.argv}
    rc, out, _, _ = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm",
                         "--format=csv"])
    res["gpu"] = out.strip()
    res["nvcc"] = run(["bash", "-c", "command -v nvcc; nvcc --version | tail -2; ls -d /usr/local/cuda*"])[1]
    res["python"] = sys.executable + " " + sys.version.split()[0]
    log("gpu: {}".format(out.strip().replace("\n", " | ")))
    stage_stack(res)
    log("stack: {}".format(res["stack"]))
    # ansible-core (module_utils.basic, for the modules' AnsibleModule) and the collection come from the venv / repo
    sys.path.insert(0, site_packages())
    sys.path.insert(0, os.path.join(REPO, "collections"))
    if args.stage_only:
        log(f"staged: {VENV}/bin/python has sglang 0.5.15 beside the device's torch")
        return
    if not args.no_prove:
        prove(res, work)
    if not args.no_nccl:
        nccl_fixture(res, work)
    cells = json.load(open(os.path.join(HERE, "cells.json")))["cells"]
    if args.cells:
        by_key = {(c["model"], c["backend"]): c for c in cells}
        chosen = []
        for word in (w for w in args.cells.split(",") if w):
            # model:backend[:b][:tSECONDS] - b: benchmark it when ready; t: its readiness timeout
            model, backend, *opts = word.split(":")
            cell = dict(by_key[(args.alias.get(model, model), backend)], bench=False)
            for opt in opts:
                if opt == "b":
                    cell["bench"] = True
                elif opt.startswith("t"):
                    cell["ready_timeout"] = float(opt[1:])
            chosen.append(cell)
        cells = chosen
    bench_args = {"concurrency": [int(x) for x in args.concurrency.split(",")],
                  "num_prompts": [int(x) for x in args.num_prompts.split(",")],
                  "input_len": args.input_len, "output_len": args.output_len, "precision": 0.0,
                  "dataset_name": "random-ids", "backend": "sglang", "telemetry": True, "warmup_requests": 1}
    res["bench_args"] = bench_args
    res["cells"] = []
    for cell in cells:
        name = "{}__{}".format(cell["model"], cell["backend"])
        if deadline - time.time() < 30:
            res["cells"].append({"model": cell["model"], "backend": cell["backend"], "not_run": "deadline"})
            continue
        try:
            res["cells"].append(run_cell(cell, os.path.join(work, "cells", name), deadline, bench_args))
        except Exception as exc:  # noqa: BLE001 - recorded, the next cell runs
            import traceback
            res["cells"].append({"model": cell["model"], "backend": cell["backend"],
                                 "driver_error": traceback.format_exc()})
            log(f"driver error in {name}: {exc}")
    res["finished"] = time.time()
    with open(os.path.join(work, "run.json"), "w") as fh:
        json.dump(res, fh, indent=1, sort_keys=True, default=str)
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "real-sglang.tar.gz"), "w:gz") as tf:
        tf.add(work, arcname="real-sglang")
    lines = ["{} {}: {}".format(c.get("model"), c.get("backend"),
                            c.get("not_run") or (c.get("readiness") or {}).get("state") or "driver error")
             for c in res["cells"]]
    with open(os.path.join(args.out, "summary.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    log("done:\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
