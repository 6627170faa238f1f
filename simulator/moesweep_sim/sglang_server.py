"""SIMULATED SGLang server (no GPU): the `sglang serve` command line, startup log, HTTP API and
failure modes of the emulated sglang version, driven by a token-rate model.  Stdlib only.

Every log line comes from templates.py (each with its real source); behaviour is cited in
simulator/README.md.  The process is always labelled a simulation: a first log line and an
``X-Moesweep-Simulated: 1`` response header.

Sources (the sglang wheels of the emulated versions), e.g.
https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/srt/entrypoints/engine.py (launch, SIGQUIT),
.../srt/model_executor/model_runner.py (start-up phases), .../srt/managers/scheduler.py,
.../srt/managers/tokenizer_manager.py (SIGTERM drain) and the same paths under v0.5.23.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from . import config_file, drift, failure_model, faults, gpustate, moe_resolution, multinode, sgl_cli
from . import templates as T
from .engine import Engine
from .http_api import Handler, HTTPServer, health_check_timeout
from .log import Log
from .metrics import Metrics
from .server_args import ResolvedArgs
from .watchdog import ForwardWatchdog

DEFAULT_VERSION = "0.5.9"
SUPPORTED = ("0.5.9", "0.5.23")


# ---------------------------------------------------------------------------- model facts
# (weights in GB for the whole checkpoint, class name, KV bytes per token per rank at tp=1, MLA?,
#  context length, model_type, HF config class)
MODELS = {
    "glm-5-nvfp4": (453.0, "GlmMoeDsaForCausalLM", 70_000, True, 202752, "glm_moe_dsa", "GlmMoeDsaConfig"),
    "glm-5": (1510.0, "GlmMoeDsaForCausalLM", 70_000, True, 202752, "glm_moe_dsa", "GlmMoeDsaConfig"),
}
DEFAULT_MODEL = (16.0, "LlamaForCausalLM", 131_072, False, 32768, "llama", "LlamaConfig")


def model_facts(model_path: str):
    key = os.path.basename(model_path.rstrip("/")).lower()
    for k, v in MODELS.items():
        if k in key:
            return v
    return DEFAULT_MODEL


def time_scale() -> float:
    try:
        return float(os.environ.get("MOESWEEP_SIM_TIME_SCALE", "1.0"))
    except ValueError:
        return 1.0


def watchdog_wake_delay(started_at: float | None, now: float, period: float) -> float:
    """Seconds until a loop that sleeps ``period`` at a time since ``started_at`` next wakes up.

    TokenizerManager.sigterm_watchdog (created by auto_create_handle_loop, 0.5.9 and 0.5.23 alike) runs
    ``while not self.gracefully_exit: await asyncio.sleep(5)``: the flag a SIGTERM sets is read at the next
    wake-up, anywhere from at once to 5 s later. Unknown start: a whole period.
    """
    if started_at is None or period <= 0 or now < started_at:
        return period
    return period - ((now - started_at) % period)


def phase_seconds(name: str, default: float) -> float:
    v = os.environ.get(f"MOESWEEP_SIM_PHASE_{name.upper()}_S")
    return float(v) if v else default * time_scale()


def resolve_version() -> str:
    v = os.environ.get("MOESWEEP_SIM_SGLANG_VERSION") or gpustate.profile().get("sglang_version") or DEFAULT_VERSION
    if v not in SUPPORTED:
        Log.write(f"[moesweep-sim] sglang {v} is not emulated (supported: {', '.join(SUPPORTED)}); "
                  f"falling back to {DEFAULT_VERSION}\n")
        v = DEFAULT_VERSION
    return v


def tqdm_meter(desc: str, n: int, total: int, elapsed: float) -> str:
    """tqdm 4.70.1 ``format_meter`` with tqdm's defaults as sglang calls it (``tqdm.tqdm(list)``): no tty, so
    ``ncols`` is None and the bar 10 characters of ``Bar.UTF`` (stderr is UTF-8); the rate is shown as n/elapsed."""
    frac = n / total if total else 0.0
    rate = n / elapsed if elapsed and n else None
    inv = 1 / rate if rate else None
    rate_fmt = (f"{inv:5.2f}s/it" if inv and inv > 1 else f"{rate:5.2f}it/s") if rate else "?it/s"
    remaining = tqdm_interval((total - n) / rate) if rate else "?"
    charset = " " + "".join(map(chr, range(0x258F, 0x2587, -1)))
    nsyms = len(charset) - 1
    bar_length, frac_len = divmod(int(frac * 10 * nsyms), nsyms)
    bar = charset[-1] * bar_length
    if bar_length < 10:
        bar = bar + charset[frac_len] + charset[0] * (10 - bar_length - 1)
    l_bar = (desc + ": " if desc else "") + f"{frac * 100:3.0f}%|"
    return l_bar + bar + T.render(T.TQDM_R_BAR, n_fmt=n, total_fmt=total, elapsed_str=tqdm_interval(elapsed),
                                  remaining_str=remaining, rate_fmt=rate_fmt, postfix="")


def tqdm_interval(t: float) -> str:
    mins, s = divmod(abs(int(t)), 60)
    h, m = divmod(mins, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class TqdmStatus:
    """tqdm.status_printer: '\\r' + line, padded with spaces to the previous line's length."""

    def __init__(self):
        self.last = 0

    def __call__(self, line: str):
        Log.write("\r" + line + " " * max(self.last - len(line), 0))
        self.last = len(line)


# ---------------------------------------------------------------------------- the server
class Server:
    def __init__(self, version: str, args: dict, spec: dict, launch_argv: list | None = None):
        self.version = version
        self.args = args
        self.spec = spec
        # the words argparse parsed: a --config file's options in front of the command line's (config_file.merge)
        self.launch_argv = list(sys.argv[1:] if launch_argv is None else launch_argv)
        self.fault = faults.current()
        self.prof = gpustate.profile()
        self.gpu = gpustate.gpu_info(self.prof)
        self.sm = self.gpu["sm"]
        self.tp = int(args.get("tp_size") or 1)
        self.ep = int(args.get("ep_size") or 1)
        self.pid = os.getpid()
        self.site = os.environ.get("MOESWEEP_SIM_SITE_PACKAGES", "/opt/sglang/venv/lib/python3.11/site-packages")
        self.backend = moe_resolution.resolve_backend(version, args, self.sm,
                                                      model_facts(args.get("model_path") or "")[1])
        # where this launch dies for backend / quantization / GPU reasons (failure_model.py), None: it serves
        self.failure = failure_model.launch_failure(version, args, self.sm,
                                                    model_facts(args.get("model_path") or "")[1], env=os.environ,
                                                    gpu_mem_mib=self.gpu["memory_total_mib"],
                                                    mla=model_facts(args.get("model_path") or "")[3])
        self.quant = args.get("quantization")
        self.served_name = args.get("served_model_name") or args.get("model_path")
        self.status = "Starting"  # ServerStatus.Starting / Up / UnHealthy
        self.gracefully_exit = False
        self.engine: Engine | None = None
        self.httpd = None
        self.start_time = time.time()
        self.crashed = False
        self.initializing = False  # Scheduler.is_initializing: from Scheduler.__init__'s start to its end
        self.first_real_request = threading.Event()
        self.handle_loop_created = False
        # when auto_create_handle_loop ran: the sigterm_watchdog task it creates sleeps in 5 s periods from then on
        self.handle_loop_created_at: float | None = None
        self.max_total_tokens = 0
        self.max_running = 0
        self.context_len = 0
        self.mem = {}
        self.http_enabled = False
        self.metrics: Metrics | None = None
        self.sa: ResolvedArgs | None = None
        self.rendezvous = None  # multinode.Rendezvous when --nnodes > 1
        # TokenizerManager.last_receive_tstamp: 0 on 0.5.9, the start time on 0.5.23 (init_running_status)
        self.last_receive_tstamp = 0.0 if version == "0.5.9" else time.time()
        self.health_check_timeout = health_check_timeout()
        self.nnodes = int(args.get("nnodes") or 1)
        self.node_rank = int(args.get("node_rank") or 0)
        # this node's share of the TP ranks (one process stands for all of them)
        self.local_ranks = range(self.node_rank * self.tp // self.nnodes, (self.node_rank + 1) * self.tp // self.nnodes)
        self.state = gpustate.StateWriter(self.prof, len(self.local_ranks), self.pid)

    # ------------------------------------------------------------ helpers
    def prefix(self, rank: int) -> str:
        """run_scheduler_process's log prefix: ' TPn' (tp > 1), ' EPm' (ep > 1)."""
        p = f" TP{rank}" if self.tp > 1 else ""
        if self.ep > 1:
            p += f" EP{rank // max(1, self.tp // self.ep)}"
        return p

    def ranks(self, msg_fn, only0=False):
        for r in self.local_ranks:
            if only0 and r != 0:
                continue
            Log.line(msg_fn(r), self.prefix(r))

    def sleep(self, phase: str, default: float):
        time.sleep(max(0.0, phase_seconds(phase, default)))

    def t(self, tpl, **kw):
        return T.render(tpl, **kw)

    # ------------------------------------------------------------ failures
    def raise_frames(self, failure) -> list:
        """The frame the failure is raised in (failure_model.py), or none for a C++ text."""
        return [failure.frame] if failure.frame else []

    def visible_gpus(self) -> int:
        """How many GPUs a process sees: the host's, or the leading entries of CUDA_VISIBLE_DEVICES that name one
        (the CUDA runtime stops at the first entry it cannot use)."""
        count = int(self.gpu["count"])
        value = os.environ.get("CUDA_VISIBLE_DEVICES")
        if value is None:
            return count
        seen = 0
        for item in value.split(","):
            item = item.strip()
            if item.isdigit() and int(item) < count or item.startswith(("GPU-", "MIG-")):
                seen += 1
            else:
                break
        return seen

    def unseen_gpus(self) -> list:
        """(dp rank or None, tp rank, GPU index) of this node's scheduler processes whose GPU the process cannot see.
        The index: base_gpu_id + the DP group's offset (tp x pp x gpu_id_step per group, when dp > 1 without DP
        attention: data_parallel_controller.py launch_dp_schedulers) + the rank's place in its node's TP group
        times gpu_id_step (engine.py _launch_scheduler_processes; the same in 0.5.23)."""
        a = self.args
        step = int(a.get("gpu_id_step") or 1)
        base = int(a.get("base_gpu_id") or 0)
        pp = int(a.get("pp_size") or 1)
        dp = int(a.get("dp_size") or 1)
        groups = dp if dp > 1 and not a.get("enable_dp_attention") else 1
        per_node = max(1, self.tp // max(1, self.nnodes // pp))  # tp_size_per_node
        seen = self.visible_gpus()
        out = []
        for group in range(groups):
            for r in self.local_ranks:
                gpu = base + group * self.tp * pp * step + (r % per_node) * step
                if gpu >= seen:
                    out.append((group if groups > 1 else None, r, gpu))
        return out

    def device_ordinal_crash(self, unseen: list):
        """Every scheduler process whose GPU is not visible logs the context line sglang logs around its
        set_device and the traceback of torch's RuntimeError; then the launch-phase SIGQUIT path."""
        exc = "RuntimeError: " + self.t(T.TORCH_INVALID_DEVICE).rstrip("\n")
        frames = T.TRACEBACKS[(self.version, "set_device")]
        tb = T.format_traceback(frames, exc, self.site)
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        for dp_rank, r, gpu in unseen:
            prefix = (f" DP{dp_rank}" if dp_rank is not None else "") + self.prefix(r)
            if self.version == "0.5.9":
                ctx = self.t(T.DEVICE_CONTEXT_9, device="self.device='cuda'", gpu_id=f"self.gpu_id={gpu}",
                             cvd=f"os.environ.get('CUDA_VISIBLE_DEVICES')={cvd!r}", tp_rank=f"self.tp_rank={r}",
                             tp_size=f"self.tp_size={self.tp}")
            else:
                ctx = self.t(T.DEVICE_CONTEXT_23).replace("%s", "{}", 4).format("cuda", gpu, cvd, r)
            Log.line(ctx, prefix)
            Log.line(self.t(T.SCHEDULER_EXCEPTION, tb=tb), prefix)
        self.crashed = True
        time.sleep(0.05)
        self.sigquit_to_parent(False)

    def scheduler_crash_at(self, where: str, failure):
        """A launch failure of failure_model.py raised in the scheduler, at `where` (model_init: while the model
        is built; autotune: flashinfer autotune's dummy forward).  The frames from run_scheduler_process down to
        that step are the real ones; the ones between that step and the raising line are left out (see the
        README's known gaps); 0.5.9's trtllm-gen JIT failure has its whole real stack."""
        exc = failure.exc.replace("{site}", self.site)
        if self.version == "0.5.9" and where == "autotune" and failure.frame \
                and failure.frame[0] == "flashinfer/compilation_context.py":
            self.scheduler_crash("trtllm_sm120", exc)
            return
        prefix = T.STARTUP_PREFIX[(self.version, where)]
        self.scheduler_crash("", exc, frames=prefix + self.raise_frames(failure))

    def scheduler_crash(self, frames_key: str, exc_line: str, rank0_only=False, during_serving=False,
                        chained: tuple | None = None, frames: list | None = None):
        """A scheduler process raised: every failing rank logs its traceback, then sends SIGQUIT to the
        parent, whose handler logs and kill_process_tree()s itself with SIGKILL (scheduler.py
        run_scheduler_process, engine.py launch-phase SIGQUIT handler, tokenizer_manager.py running-phase)."""
        if frames is None:
            frames = T.TRACEBACKS.get((self.version, frames_key)) or T.TRACEBACKS[("0.5.9", frames_key)]
        tb = ""
        if chained:
            inner_frames, inner_exc = chained
            tb = T.format_traceback(inner_frames, inner_exc, self.site)
            tb += "\nDuring handling of the above exception, another exception occurred:\n\n"
        tb += T.format_traceback(frames, exc_line, self.site)
        for r in self.local_ranks:
            if rank0_only and r != 0:
                continue
            Log.line(self.t(T.SCHEDULER_EXCEPTION, tb=tb), self.prefix(r))
        self.crashed = True
        time.sleep(0.05)
        self.sigquit_to_parent(during_serving)

    def sigquit_to_parent(self, during_serving: bool):
        """A scheduler's SIGQUIT reaches the main process: before the first request, engine.py's launch-phase handler;
        from then on the tokenizer manager's running-phase one (auto_create_handle_loop registers it with
        loop.add_signal_handler, which calls it without arguments: signum=None, frame=None). Both kill the process
        tree, this process included (SIGKILL)."""
        if during_serving:
            Log.line(self.t(T.SIGQUIT_RUNNING, signum=None, frame=None))
        else:
            Log.line(self.t(T.SIGQUIT_LAUNCH))
        self.die_sigkill()

    # ------------------------------------------------------------ the forward watchdog (watchdog.py)
    def start_watchdog(self, soft: bool):
        """Scheduler.init_soft_watchdog (--soft-watchdog-timeout, first thing in Scheduler.__init__) or
        init_watch_dog_memory_saver_input_blocker (--watchdog-timeout, once the model runner is up)."""
        timeout = self.sa.get("soft_watchdog_timeout" if soft else "watchdog_timeout")
        if timeout is None:
            return
        ForwardWatchdog(timeout, time_scale(),
                        get_counter=lambda: self.engine.forward_ct if self.engine is not None else 0,
                        is_active=lambda: self.initializing or (self.engine is not None
                                                                and self.engine.cur_batch is not None),
                        fire=self.watchdog_fired, soft=soft).start()

    def watchdog_fired(self, wd: ForwardWatchdog):
        """What WatchdogRaw does when it fires, for every rank of this node (each rank's scheduler runs its own; one
        process stands for them all): debug info, py-spy dump and the timeout line; the hard one then SIGQUITs the
        main process 5 s later. A node >= 1 runs no tokenizer manager: its launch-phase handler stays."""
        for r in self.local_ranks:
            info = self.watchdog_debug_info()
            if info:
                Log.line(self.t(T.WATCHDOG_DEBUG_INFO, name="Scheduler", info=info), self.prefix(r))
            for line in self.pyspy_dump():
                Log.line(line, self.prefix(r))
            Log.line(self.t(T.WATCHDOG_TIMEOUT, name="Scheduler", timeout=wd.timeout, soft=wd.soft), self.prefix(r))
            Log.write("\n")
            Log.write("\n", sys.stdout)
        if wd.soft:
            return
        time.sleep(5.0 * time_scale())
        self.crashed = True
        self.sigquit_to_parent(self.handle_loop_created)

    def watchdog_debug_info(self) -> str:
        """create_scheduler_watchdog's dump_info: nothing while the scheduler initializes or request logging is off
        (0.5.9 SGLANG_DISABLE_REQUEST_LOGGING, read by utils/common.py get_bool_env_var: "true" or "1").
        0.5.9: the batch in flight and the KV pool (the simulated server has no prefix cache: nothing evictable; the
        running requests' tokens are locked). 0.5.23's dump repeats each request's SamplingParams as a msgspec
        Struct after normalize(), which the simulator does not model: it prints none (simulator/README.md)."""
        batch = self.engine.cur_batch if self.engine is not None else None
        if self.initializing or batch is None or self.version != "0.5.9" \
                or os.environ.get("SGLANG_DISABLE_REQUEST_LOGGING", "false").lower() in ("true", "1"):
            return ""
        used, _ = self.engine.token_usage()
        params = "sglang.srt.sampling.sampling_params.SamplingParams"
        reqs = ", ".join(self.t(T.REQ_REPR, rid=r.rid, input_ids=r.input_ids(), output_ids=list(r.out_ids),
                                grammar=None, sampling_params=self.t(T.OBJECT_REPR, cls=params, addr=hex(id(r))))
                         for r in batch)
        tokens = self.t(T.WATCHDOG_TOKENS_9, total=self.max_total_tokens, available=self.max_total_tokens - used,
                        evictable=0, protected=used)
        return self.t(T.WATCHDOG_BATCH_9, n=len(batch), reqs=f"[{reqs}]", tokens=tokens)

    def pyspy_dump(self) -> list[str]:
        """pyspy_dump_schedulers: the real command through /bin/sh, as the real code runs it (on a host without py-spy
        on the unit's PATH the shell says so), its answer logged as sglang logs it."""
        if self.version == "0.5.9":
            try:
                out = subprocess.run(f"py-spy dump --native --pid {self.pid}", shell=True, capture_output=True,
                                     text=True, check=True)
                return [self.t(T.PYSPY_DUMP_9, pid=self.pid, out=out.stdout)]
            except subprocess.CalledProcessError as e:
                return [self.t(T.PYSPY_FAILED_9, pid=self.pid, err=e.stderr)]
        lines = []
        for attempt, native in enumerate(("--native", "")):
            cmd = f"py-spy dump {native} --pid {self.pid}".strip()
            try:
                out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
                return lines + [self.t(T.PYSPY_DUMP_23, pid=self.pid, cmd=cmd, out=out.stdout)]
            except subprocess.CalledProcessError as e:
                lines.append(self.t(T.PYSPY_FAILED_23, cmd=cmd, err=e.stderr))
                if attempt == 1:
                    lines.append(self.t(T.PYSPY_ALL_FAILED_23, pid=self.pid))
        return lines

    def die_sigkill(self):
        self.state.remove()
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    # ------------------------------------------------------------ server args
    def resolve_args(self, cls: str, mla: bool):
        # "auto" in the resolved args: 0.5.9's __post_init__ replaces it only on its SM100 DeepSeek branch
        # (-> flashinfer_trtllm); 0.5.23's pipeline there and for NVFP4 on SM110/SM12x (-> flashinfer_cutlass);
        # elsewhere it stays "auto" and the quantization method picks the kernel (moe_resolution.py)
        cli = dict(self.args)
        if (cli.get("moe_runner_backend") or "auto") == "auto":
            if self.backend == "flashinfer_trtllm" and self.sm // 10 == 10:
                cli["moe_runner_backend"] = self.backend
            # 0.5.23's NVFP4 auto -> flashinfer_cutlass on SM110/SM12x: ResolvedArgs (it logs why)
        self.sa = ResolvedArgs(self.version, cli, gpu_mem_mib=self.gpu["memory_total_mib"], sm=self.sm,
                               model_arch=cls, mla=mla)
        self.served_name = self.sa["served_model_name"]
        if self.version == "0.5.9":
            for msg, _bare in self.sa.notices:
                Log.bare(msg)  # __post_init__ runs before configure_logger: logging's last-resort handler
        else:
            for msg, _bare in self.sa.notices:
                Log.line(msg)  # resolve_once runs after configure_logger
        if self.args.get("enable_metrics"):
            self.metrics = Metrics(self.version, self.served_name)

    # ------------------------------------------------------------ startup
    def run(self):
        a = self.args
        weights_gb, cls, kv_bytes_tok, mla, ctx, model_type, hf_config = model_facts(a.get("model_path") or "")
        self.resolve_args(cls, mla)
        if self.version == "0.5.9":
            Log.line(self.t(T.SERVER_ARGS_9, args=self.sa.log_repr()))
        else:
            Log.line(self.t(T.SERVER_ARGS_23, args=self.sa.log_repr()))
        signal.signal(signal.SIGQUIT, lambda s, f: (Log.line(self.t(T.SIGQUIT_LAUNCH)), self.die_sigkill()))

        self.context_len = int(a.get("context_length") or ctx)
        total_gb = self.gpu["memory_total_mib"] / 1024
        avail0 = total_gb - 0.9
        self.state.phase(used_gb=0.5, util=0)

        # process start, then torch.distributed / NCCL init: on several nodes, the dist-init rendezvous
        self.sleep("init", 2.0)
        self.initializing = True
        self.start_watchdog(soft=True)
        self.ranks(lambda r: self.t(T.INIT_DIST_BEGIN_9 if self.version == "0.5.9" else T.INIT_PARALLEL_BEGIN_23))
        unseen = self.unseen_gpus()
        if unseen:
            self.device_ordinal_crash(unseen)
        if self.nnodes > 1:
            multinode.rendezvous(self)
        self.sleep("dist", 1.0)
        if self.version == "0.5.9":
            self.ranks(lambda r: self.t(T.INIT_DIST_END_9, t=phase_seconds("dist", 1.0), m=0.6))
        else:
            self.ranks(lambda r: self.t(T.INIT_PARALLEL_END_23, t=phase_seconds("dist", 1.0)))
            self.ranks(lambda r: self.t(T.MEM_BASELINE_23, m=0.6))
        avail = avail0 - 0.6
        self.state.phase(used_gb=total_gb - avail, util=0)

        # weights
        self.ranks(lambda r: self.t(T.LOAD_BEGIN, avail=avail))
        if self.failure is not None and self.failure.stage == "model_init":
            # the loader's capability gate, the MoE quantization method's __init__ / create_moe_runner and
            # MoeRunner.__init__ all run while the model is built, before any weight loads
            self.scheduler_crash_at("model_init", self.failure)
        load_s = phase_seconds("load", 6.0)
        steps = 10
        per_rank = weights_gb / self.tp
        for i in range(steps):
            time.sleep(load_s / steps)
            self.state.phase(used_gb=total_gb - avail + per_rank * (i + 1) / steps, util=0)
        avail -= per_rank
        dtype = "torch.bfloat16"
        if self.version == "0.5.9":
            self.ranks(lambda r: self.t(T.LOAD_END_9, t=load_s, cls=cls, dtype=dtype, avail=avail, usage=per_rank))
        else:
            quant = f"quant={self.quant}, " if self.quant else ""
            self.ranks(lambda r: self.t(T.LOAD_END_23, t=load_s, cls=cls, quant=quant, avail=avail, usage=per_rank))

        # KV cache: profile_max_num_token, rest = avail - total * (1 - mem_fraction_static)
        mfs = self.sa["mem_fraction_static"]
        kv_gb = total_gb * mfs - (total_gb - avail)
        if self.fault == "oom_kv":
            kv_gb = -1.0
        tokens = int(kv_gb * (1 << 30) / (kv_bytes_tok / self.tp)) if kv_gb > 0 else 0
        if a.get("max_total_tokens"):
            tokens = min(tokens, int(a["max_total_tokens"])) if tokens > 0 else tokens
        page = int(self.sa.get("page_size") or 1)
        tokens = tokens // page * page
        if tokens <= 0:
            if self.version == "0.5.9":
                msg = self.t(T.NOT_ENOUGH_MEMORY_9, mfs=self.sa["mem_fraction_static"])
            else:
                msg = T.NOT_ENOUGH_MEMORY_23.parts[0]
                if a.get("mem_fraction_static") is not None:
                    msg += T.NOT_ENOUGH_MEMORY_23.parts[1].format(mfs=a.get("mem_fraction_static"))
            self.scheduler_crash("oom_kv", "RuntimeError: " + msg)
        if moe_resolution.kv_pool_exceeds_free_memory(a.get("mem_fraction_static"), a.get("max_total_tokens")):
            # no range check on --mem-fraction-static: the pool is sized beyond the free memory
            oom = self.t(T.TORCH_OOM, req=kv_gb, gpu=0, total=total_gb, free=avail * 1024, used=total_gb - avail,
                         alloc=total_gb - avail, reserved=0.0)
            self.scheduler_crash("kv_pool_oom", "torch.OutOfMemoryError: " + oom)
        self.max_total_tokens = tokens
        self.sleep("kv", 1.0)
        kv_dtype = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}.get(
            self.sa.get("kv_cache_dtype"), "torch.bfloat16")
        if mla:  # MLATokenToKVPool: one KV size
            if self.version == "0.5.9":
                self.ranks(lambda r: self.t(T.KV_ALLOC_KV_9, n=tokens, kv=kv_gb))
            else:
                self.ranks(lambda r: self.t(T.KV_ALLOC_KV_23, cache_name="KV Cache", state="is allocated",
                                            dtype=kv_dtype, n=tokens, kv=kv_gb))
        else:  # MHATokenToKVPool: get_kv_size_bytes() returns (K, V)
            if self.version == "0.5.9":
                self.ranks(lambda r: self.t(T.KV_ALLOC_KV_SPLIT_9, n=tokens, k=kv_gb / 2, v=kv_gb / 2))
            else:
                self.ranks(lambda r: self.t(T.KV_ALLOC_KV_SPLIT_23, cache_name="KV Cache", state="is allocated",
                                            dtype=kv_dtype, n=tokens, k=kv_gb / 2, v=kv_gb / 2))
        avail -= kv_gb
        self.state.phase(used_gb=total_gb - avail, util=0)
        self.ranks(lambda r: self.t(T.MEM_POOL_END_9 if self.version == "0.5.9" else T.MEM_POOL_END_23, avail=avail))
        if self.failure is not None and self.failure.stage == "attention_init":
            # the attention backend's factory refuses the GPU or the model (failure_model._attention_gate)
            self.scheduler_crash_at("attention_init", self.failure)
        self.max_running = self.max_num_reqs(tokens, a.get("max_running_requests"))

        # the first MoE forward dies (failure_model.py): in flashinfer autotune where it runs, else in CUDA graph
        # capture, else at the first request
        fwd = self.failure if self.failure is not None and self.failure.stage == "first_forward" else None
        trtllm_broken = fwd is not None
        fi_exc = fwd.exc.replace("{site}", self.site) if fwd is not None else ""
        self.kernel_warmup(trtllm_broken, fi_exc, hf_config)

        # CUDA graph capture
        bs_list = self.capture_batch_sizes()
        if bs_list:
            if self.version == "0.5.9":
                self.ranks(lambda r: self.t(T.CAPTURE_BEGIN_9, graph="cuda graph", avail=avail))
            else:
                self.ranks(lambda r: self.t(T.CAPTURE_BEGIN_23, name="target decode", graph="CUDA graph",
                                            backend="full", k=1, avail=avail))
            if self.fault == "hang_capture":
                self.state.phase(used_gb=total_gb - avail + 0.3, util=100)
                while True:
                    time.sleep(3600)
            capture_s = phase_seconds("capture", 3.0)
            if self.fault == "slow_jit":
                capture_s = phase_seconds("slow_jit", 60.0)
            if self.version == "0.5.9":
                self.ranks(lambda r: self.t(T.CAPTURE_BS_9, bs=bs_list), only0=True)
            self.capture_progress(bs_list, capture_s, avail)
            if trtllm_broken:
                inner = T.TRACEBACKS[("0.5.9", "oom_graph_inner")][:9] + self.raise_frames(fwd)
                self.scheduler_crash("oom_graph_outer", "Exception: " + self.t(
                    T.CAPTURE_FAILED, e=fi_exc.split(": ", 1)[-1], hint=T.render(T.CAPTURE_FAILED_HINT)),
                    chained=(inner, fi_exc))
            if self.fault == "oom_graph":
                oom = self.t(T.TORCH_OOM, req=2.0, gpu=0, total=total_gb, free=812.06, used=total_gb - 0.79,
                             alloc=total_gb - 3.1, reserved=201.4)
                self.scheduler_crash("oom_graph_outer", "Exception: " + self.t(
                    T.CAPTURE_FAILED, e=oom, hint=T.render(T.CAPTURE_FAILED_HINT)),
                    chained=(T.TRACEBACKS[("0.5.9", "oom_graph_inner")], "torch.OutOfMemoryError: " + oom))
            graph_gb = 0.35
            avail -= graph_gb
            if self.version == "0.5.9":
                self.ranks(lambda r: self.t(T.CAPTURE_END_9, graph="cuda graph", t=capture_s, usage=graph_gb,
                                            avail=avail))
            else:
                self.ranks(lambda r: self.t(T.CAPTURE_END_23, name="target decode", graph="CUDA graph", bs=bs_list,
                                            t=capture_s, usage=graph_gb, avail=avail))
            self.state.phase(used_gb=total_gb - avail, util=0)
        self.mem = {"weight": round(per_rank, 2), "kvcache": round(kv_gb, 2), "token_capacity": tokens,
                    "graph": 0.35 if bs_list else 0}
        chunked = self.sa["chunked_prefill_size"]
        max_prefill = a.get("max_prefill_tokens") or 16384
        self.ranks(lambda r: self.t(T.MAX_TOTAL_9 if self.version == "0.5.9" else T.MAX_TOTAL_23, n=tokens, c=chunked,
                                    p=max_prefill, r=self.max_running, L=self.context_len, label="available_gpu_mem",
                                    avail=avail), only0=True)

        # engine
        self.engine = Engine(self.backend, self.prof.get("gpu_model", "rtx-pro-6000"), self.max_running, tokens,
                             int(a.get("decode_log_interval") or 40), self.engine_log,
                             garbage=self.fault == "garbage", max_prefill_tokens=max_prefill,
                             chunked_prefill_size=chunked, input_cap_with_chunking=self.version == "0.5.9")
        self.engine.crash_hook = self.engine_crash_hook
        self.engine.on_output = self.on_output
        stall = faults.LiveFault("stall")
        rv = self.rendezvous
        self.engine.stalled = (lambda: stall() or rv.broken.is_set()) if rv is not None else stall
        self.engine.cuda_graph_max_bs = max(bs_list) if bs_list else 0
        self.engine.slowdown = self.state.slowdown_factor
        gpu_drift = drift.from_env()
        self.engine.drift = gpu_drift.factor if gpu_drift is not None else None
        self.last_prefill_stats_tic = time.perf_counter()
        self.last_prefill_tokens = 0
        Log.write(f"[moesweep-sim] the MoE layers run the {self.backend} runner\n")
        self.engine.start()
        self.start_watchdog(soft=False)
        self.initializing = False
        self.state.start_serving(self.engine, total_gb - avail)
        if self.node_rank >= 1:
            multinode.serve_follower(self)
            return
        self.serve_http(trtllm_broken)

    def max_num_reqs(self, tokens: int, requested) -> int:
        """0.5.9 init_memory_pool: min(max(int(tokens / context_len * 512), 2048), 4096) unless
        --max-running-requests; 0.5.23 resolve_max_num_reqs also caps it at tokens // 2."""
        est = max(min(int(tokens / self.context_len * 512), 4096), 2048)
        if self.version == "0.5.9":
            return int(requested) if requested else est
        return min(int(requested), tokens // 2) if requested else min(est, tokens // 2)

    def capture_batch_sizes(self) -> list[int]:
        """get_batch_sizes_to_capture (0.5.9 cuda_graph_runner.py, 0.5.23 runner/base_cuda_graph_runner.py):
        the resolved decode bs list, plus the request-pool size when the list goes beyond it, clamped to it."""
        bs = self.sa.decode_capture_bs()
        if not bs:
            return []
        size = self.max_running
        if max(bs) > size:
            bs = bs + [size]
        return sorted({b for b in bs if b <= size})

    def kernel_warmup(self, trtllm_broken: bool, fi_exc: str, hf_config: str):
        a = self.args
        if self.version == "0.5.9":
            # model_runner.py kernel_warmup -> _flashinfer_autotune (_should_run_flashinfer_autotune)
            autotune = (not a.get("disable_flashinfer_autotune")
                        and self.backend in ("flashinfer_trtllm", "flashinfer_mxfp4") and self.sm >= 90)
            if autotune:
                self.ranks(lambda r: self.t(T.AUTOTUNE_BEGIN_9))
                self.sleep("autotune", 2.0)
                if trtllm_broken:
                    self.scheduler_crash_at("autotune", self.failure)
                self.ranks(lambda r: self.t(T.AUTOTUNE_END_9))
            return
        # 0.5.23: EagerRunner(...).warmup() -> BaseRunner._warmup: allreduce-fusion workspaces first
        # (flashinfer_comm_fusion.py _resolve_backend raises off SM90/SM10X for any resolved fusion backend; the
        # deprecated --enable-flashinfer-allreduce-fusion resolves to "auto"), then flashinfer autotune
        if self.sa.get("flashinfer_allreduce_fusion_backend") is not None \
                and not (self.sm == 90 or 100 <= self.sm < 110) and self.tp > 1:
            self.scheduler_crash("allreduce_fusion", "ValueError: " + self.t(T.ALLREDUCE_FUSION_23))
        autotune = (not a.get("disable_flashinfer_autotune") and self.sm >= 90
                    and self.backend in ("flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_mxfp4",
                                         "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_megamoe"))
        if autotune:
            self.ranks(lambda r: self.t(T.AUTOTUNE_BEGIN_23, cache=self.autotune_cache_path(r, hf_config)))
            self.sleep("autotune", 2.0)
            if trtllm_broken:
                self.scheduler_crash_at("autotune", self.failure)
            self.ranks(lambda r: self.t(T.AUTOTUNE_END_23))

    def autotune_cache_path(self, rank: int, hf_config: str) -> str:
        """flashinfer_autotune_cache_path (0.5.23 runner/flashinfer_autotune.py)."""
        sa = self.sa
        parts = [str(sa["model_path"]), "torch.bfloat16", str(sa["quantization"]), str(self.backend),
                 str(sa["tp_size"]), str(sa["pp_size"]), "1", str(sa.get("ep_size") or 1), hf_config,
                 "candidate_selection=v2_default", "skip_ops="]
        key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
        base = os.path.expanduser(os.environ.get("SGLANG_CACHE_DIR") or "~/.cache/sglang")
        return f"{base}/flashinfer/autotune/0.7.2/sm{self.sm}/{key}/rank_tp{rank}_pp0_dp0.json"

    def capture_progress(self, bs_list, seconds, avail):
        """TP0's tqdm bar over reversed(capture_bs): the initial bar, set_description() per batch size
        (which refreshes), the final bar at close(), then a newline."""
        if 0 not in self.local_ranks:
            time.sleep(seconds)
            return
        desc_tpl = T.CAPTURE_TQDM_DESC_9 if self.version == "0.5.9" else T.CAPTURE_TQDM_DESC_23
        n = len(bs_list)
        status = TqdmStatus()
        start = time.monotonic()
        status(tqdm_meter("", 0, n, 0.0))
        desc = ""
        for i, bs in enumerate(reversed(bs_list)):
            desc = self.t(desc_tpl, bs=bs, avail=avail - 0.35 * i / n)
            status(tqdm_meter(desc, i, n, time.monotonic() - start))
            time.sleep(seconds / n)
        status(tqdm_meter(desc, n, n, time.monotonic() - start))
        Log.write("\n")

    # ------------------------------------------------------------ engine callbacks
    def on_output(self, reqs):
        """A batch result reached the tokenizer manager: last_receive_tstamp, per-request state, metrics."""
        now = time.time()
        self.last_receive_tstamp = now
        perf = time.perf_counter()
        for r in reqs:
            st = getattr(r, "tm", None)
            if st is None:
                continue
            finished = r.finish_reason is not None
            if not st.first_token_perf:
                st.first_token_perf = perf
                st.first_token_time = now
            if finished:
                st.finished_time, st.finished_perf = now, perf
                st.finish_type = r.finish_reason.get("type")
            if self.metrics is not None and r.count_in_metrics:
                self.metrics.on_output(st, len(r.out_ids), finished, now)

    def scheduler_stats(self) -> dict:
        e = self.engine
        used, usage = e.token_usage()
        d = {"num_running_reqs": len(e.running), "num_used_tokens": used, "token_usage": usage,
             "decode_sum_seq_lens": used, "gen_throughput": e.last_gen_throughput, "num_queue_reqs": len(e.waiting),
             "max_total_num_tokens": self.max_total_tokens, "is_cuda_graph": 1.0 if e.last_batch_cuda_graph else 0.0,
             "full_token_usage": usage, "kv_used_tokens": used,
             "kv_available_tokens": self.max_total_tokens - used}
        return d

    def engine_log(self, kind, **f):
        if 0 not in self.local_ranks:
            return  # only TP0 (attn_tp_rank 0) reports stats and logs batches
        if self.metrics is not None:
            self.metrics.log_stats(self.scheduler_stats())
        if kind == "prefill":
            f["thr"] = self.prefill_input_throughput(f["new_tok"])
            if self.version == "0.5.9":
                P = T.PREFILL_9.parts
                msg = (P[0].format(it="", new_seq=f["new_seq"], new_tok=f["new_tok"], cached=f["cached"],
                                   usage_msg=P[1].format(usage=f["usage"]), running=f["running"], queue=f["queue"])
                       + P[2].format(thr=f["thr"]) + P[3].format(graph="cuda graph", cg=False))
            else:
                msg = (T.PREFILL_23.parts[0].format(it="", new_seq=f["new_seq"], new_tok=f["new_tok"],
                                                    cached=f["cached"])
                       + f"token usage: {f['usage']:.2f}, #running-req: {f['running']}, #queue-req: {f['queue']}, "
                         f"#pending-token: 0, cuda graph: False, input throughput (token/s): {f['thr']:.2f}")
            Log.line(msg, self.prefix(0))
        elif kind == "decode":
            cg = bool(self.engine and self.engine.last_batch_cuda_graph)
            if self.version == "0.5.9":
                D = T.DECODE_9.parts
                msg = (D[0].format(it="", running=f["running"], usage_msg=D[1].format(tokens=f["tokens"],
                                                                                     usage=f["usage"]))
                       + D[2].format(graph="cuda graph", cg=cg, thr=f["thr"], queue=f["queue"]))
            else:
                msg = (T.DECODE_23.parts[0].format(it="", running=f["running"],
                                                   usage_msg=f"#token: {f['tokens']}, token usage: {f['usage']:.2f}, ")
                       + f"cuda graph: {cg}, gen throughput (token/s): {f['thr']:.2f}, #queue-req: {f['queue']}")
            Log.line(msg, self.prefix(0))

    def prefill_input_throughput(self, new_tokens: int) -> float:
        """The prefill line's `input throughput`, as the real scheduler computes it when it logs a prefill batch's
        result: 0.5.9 divides the PREVIOUS prefill batch's tokens by the time since the previous prefill line (so
        the first line says 0.00; managers/scheduler_metrics_mixin.py:166-169), 0.5.23 this batch's tokens by that
        time (managers/scheduler_components/metrics_reporter.py:733-740); the clock starts when the scheduler's
        metrics are set up (here: when the engine starts)."""
        now = time.perf_counter()
        gap = now - self.last_prefill_stats_tic
        self.last_prefill_stats_tic = now
        if self.version == "0.5.9":
            thr = self.last_prefill_tokens / gap if gap > 0 else 0.0
            self.last_prefill_tokens = new_tokens
            return thr
        return new_tokens / gap if gap > 0 else 0.0

    def engine_crash_hook(self, new_reqs) -> bool:
        crash = False
        if self.fault == "crash_after_ready" and self.status == "Up" and self.first_real_request.is_set():
            crash = True
        if self.trtllm_first_forward and new_reqs:
            crash = True
        if not crash:
            return False
        threading.Thread(target=self._crash_serving, daemon=True).start()
        return True

    trtllm_first_forward = False

    def _crash_serving(self):
        if self.trtllm_first_forward:
            frames_exc = self.failure.exc.replace("{site}", self.site)
        else:
            frames_exc = "RuntimeError: " + self.t(T.TORCH_ILLEGAL_ADDRESS).rstrip("\n")
        self.scheduler_crash("serve", frames_exc, during_serving=True)

    # ------------------------------------------------------------ HTTP
    def model_info(self):
        _, cls, _, _, _, model_type, _ = model_facts(self.args.get("model_path") or "")
        sa = self.sa
        info = {"model_path": sa["model_path"], "tokenizer_path": sa["tokenizer_path"], "is_generation": True,
                "preferred_sampling_params": sa.get("preferred_sampling_params"),
                "weight_version": sa.get("weight_version", "default"),
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": model_type, "architectures": [cls]}
        if self.version == "0.5.23":
            info.update({"served_model_name": self.served_name, "load_format": sa.get("load_format"),
                         "reasoning_parser": sa.get("reasoning_parser"),
                         "tool_call_parser": sa.get("tool_call_parser"), "disaggregation_mode": "null"})
        return info

    def server_info(self):
        """{**dataclasses.asdict(server_args), **scheduler_info, "internal_states": [...], "version": ...}."""
        state = self.sa.as_dict()
        state.update({"last_gen_throughput": self.engine.last_gen_throughput if self.engine else 0.0,
                      "memory_usage": self.mem, "effective_max_running_requests_per_dp": self.max_running})
        out = {k: v for k, v in self.sa.as_dict().items() if _jsonable(v)}
        out.update({"max_total_num_tokens": self.max_total_tokens, "max_req_input_len": self.context_len - 1,
                    "internal_states": [{k: v for k, v in state.items() if _jsonable(v)}], "version": self.version})
        if self.version == "0.5.23":
            # server_args._launch_command: the argv prepare_server_args parsed, --config's options merged in
            # (S23 server_args.py:717-719, sampling/watermarking/core.py redact_watermark_command_line)
            out.update({"startup_time": self.start_time, "frontend": "http",
                        "launch_command": " ".join(self.launch_argv)})
        return out

    def serve_http(self, trtllm_broken: bool):
        a = self.args
        host = a.get("host") or "127.0.0.1"
        port = int(a.get("port") or 30000)
        # with --disable-flashinfer-autotune and --disable-cuda-graph the first MoE forward is the
        # warmup request
        self.trtllm_first_forward = trtllm_broken
        Log.uvicorn(T.render(T.UV_STARTED, pid=self.pid))
        Log.uvicorn(T.render(T.UV_WAIT_STARTUP))
        Log.uvicorn(T.render(T.UV_STARTUP_COMPLETE))
        warm = threading.Thread(target=self.warmup, args=(host, port), daemon=True)
        warm.start()
        try:
            if self.fault == "port_in_use":
                raise OSError(98, "Address already in use")
            handler = type("SimHandler", (Handler,), {"server_obj": self})
            self.httpd = HTTPServer((host, port), handler)
        except OSError as e:
            Log.uvicorn(T.render(T.BIND_ERROR, errno=e.errno, addr=(host, port), strerror=(e.strerror or "").lower()),
                        "ERROR")
            Log.uvicorn(T.render(T.UV_WAIT_SHUTDOWN))
            Log.uvicorn(T.render(T.UV_SHUTDOWN_COMPLETE))
            self.state.remove()
            # lifespan shutdown joins the (non-daemon) warmup thread, which polls /model_info 120 x 1 s
            # and then kill_process_tree()s the process (http_server.py _execute_server_warmup)
            warm.join()
            return
        self.http_enabled = True
        Log.uvicorn(T.render(T.UV_RUNNING, addr=T.render(T.UV_ADDR, scheme="http", host=host, port=port)))
        signal.signal(signal.SIGTERM, self.on_sigterm_before_handler)
        self.httpd.serve_forever(poll_interval=0.2)

    def create_handle_loop(self):
        # TokenizerManager.generate_request starts with auto_create_handle_loop(): the first request (the server's own
        # warmup, a health check's generation or a client's) installs the SIGTERM handler and starts sigterm_watchdog
        if not self.handle_loop_created:
            self.handle_loop_created = True
            self.handle_loop_created_at = time.time()

    def on_sigterm_before_handler(self, signum, frame):
        # before the first request reaches the tokenizer manager, uvicorn's own handler is active
        if not self.handle_loop_created:
            Log.uvicorn(T.render(T.UV_SHUTTING_DOWN))
            Log.uvicorn(T.render(T.UV_WAIT_SHUTDOWN))
            Log.uvicorn(T.render(T.UV_SHUTDOWN_COMPLETE))
            Log.uvicorn(T.render(T.UV_FINISHED, pid=self.pid))
            self.state.remove()
            os._exit(0)
        self.on_sigterm()

    def on_sigterm(self):
        # TokenizerManager SignalHandler.sigterm_handler via loop.add_signal_handler (no args)
        Log.line(self.t(T.SIGTERM, signum=None, frame=None))
        self.gracefully_exit = True
        threading.Thread(target=self.sigterm_watchdog, daemon=True).start()

    def sigterm_watchdog(self):
        # sigterm_watchdog polls every 5 s (scaled here), drains, then exits. Its task was created with the handle
        # loop and has slept in 5 s periods since, so a SIGTERM is seen at the end of the period it arrives in.
        period = min(5.0, 5.0 * time_scale())
        time.sleep(watchdog_wake_delay(self.handle_loop_created_at, time.time(), period))
        while True:
            n = self.engine.num_unfinished() if self.engine else 0
            rids = [r.rid for r in (self.engine.running + self.engine.waiting)] if self.engine else []
            if self.status == "UnHealthy":
                # "if health check failed, we should exit immediately"
                Log.line(self.t(T.SIGTERM_UNHEALTHY))
                break
            Log.line(self.t(T.GRACEFUL, n=n, rids=rids))
            if n == 0:
                break
            time.sleep(min(5.0, 5.0 * time_scale()))
        self.state.remove()
        if self.version == "0.5.9":
            # tokenizer_manager.py sigterm_watchdog: kill_process_tree(os.getpid(), include_parent=True):
            # the process SIGKILLs itself (utils/common.py kill_process_tree)
            self.die_sigkill()
        # 0.5.23: ShutdownReq to the schedulers (on every node), then the server stop hook ends uvicorn -> exit 0
        if self.rendezvous is not None:
            self.rendezvous.shutdown_followers()
        Log.uvicorn(T.render(T.UV_SHUTTING_DOWN))
        Log.uvicorn(T.render(T.UV_WAIT_SHUTDOWN))
        Log.uvicorn(T.render(T.UV_SHUTDOWN_COMPLETE))
        Log.uvicorn(T.render(T.UV_FINISHED, pid=self.pid))
        os._exit(0)

    def warmup(self, host, port):
        """_execute_server_warmup: poll /model_info (1 s sleep first), then POST /generate."""
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '', None) else host}:{port}"
        headers = {"Content-Type": "application/json"}
        if self.args.get("api_key"):
            headers["Authorization"] = f"Bearer {self.args['api_key']}"
        ok = False
        last = ""
        for _ in range(120):
            time.sleep(min(1.0, max(0.05, time_scale())))
            try:
                with urllib.request.urlopen(urllib.request.Request(url + "/model_info", headers=headers),
                                            timeout=5) as r:
                    if r.status == 200:
                        ok = True
                        break
            except Exception as e:  # noqa: BLE001
                last = repr(e)
        if not ok:
            Log.line(self.t(T.WARMUP_FAILED, tb=f"Traceback (most recent call last):\n  ...\n{last}\n"))
            self.die_sigkill()
        if self.args.get("skip_server_warmup"):
            self.status = "Up"
        else:
            body = json.dumps({"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                               "text": "The capital city of France is"}).encode()
            try:
                with urllib.request.urlopen(urllib.request.Request(url + "/generate", data=body, headers=headers),
                                            timeout=600) as r:
                    r.read()
                self.status = "Up"
            except Exception as e:  # noqa: BLE001
                if self.crashed:
                    return
                Log.line(self.t(T.WARMUP_FAILED, tb=f"Traceback (most recent call last):\n  ...\n{e!r}\n"))
                self.die_sigkill()
        Log.line(self.t(T.READY))


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------- entry point
def log_notices_before(version: str, args: dict, failure) -> None:
    """The resolution messages logged before a server-args failure.  0.5.9's __post_init__ runs
    _handle_model_specific_adjustments (the DSA warnings) before _handle_moe_kernel_config, whose asserts come before
    its shared-experts warning; 0.5.23's pipeline runs handle_mega_moe first of all, handle_moe_kernel_config (the
    NVFP4-auto info, then the asserts, then the shared-experts fusion pass) after handle_model_specific_adjustments,
    and check_server_args (the LoRA checks) after the whole pipeline (arg_groups/pipeline.py).  Mega MoE failures log
    nothing before them here: check_mega_moe_compat runs first of all; validate_mega_moe_token_budget_for_model runs
    late (pipeline.py:320-324), after notices ResolvedArgs does not model for --moe-a2a-backend megamoe, so they are
    left out rather than guessed."""
    if "mega_moe_hook" in failure.source:
        return
    weights_gb, cls, _kv, mla, *_ = model_facts(args.get("model_path") or "")
    gpu = gpustate.gpu_info(gpustate.profile())
    sa = ResolvedArgs(version, dict(args), gpu_mem_mib=gpu["memory_total_mib"], sm=gpu["sm"], model_arch=cls, mla=mla)
    after = () if "lora_hook" in failure.source else tuple(
        T.render(t) for t in (T.TRTLLM_SHARED_EXPERTS_9, T.TRTLLM_SHARED_EXPERTS_23, T.CUTEDSL_SHARED_EXPERTS_23))
    for msg, _bare in sa.notices:
        if msg in after:
            continue
        if version == "0.5.9":
            Log.bare(msg)
        else:
            Log.line(msg)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    version = resolve_version()
    Log.write(f"[moesweep-sim] SIMULATED SGLang server (no GPU) emulating sglang {version}\n")
    try:
        argv = sgl_cli.merge_config(version, argv)
    except config_file.ConfigError as exc:
        # prepare_server_args raises before anything is logged: the traceback, exit status 1
        Log.write(config_file.traceback_text(exc, os.environ.get("MOESWEEP_SIM_SITE_PACKAGES",
                                                                 "/opt/sglang/venv/lib/python3.11/site-packages")))
        return 1
    args, spec = sgl_cli.parse(version, argv)
    gpu = gpustate.gpu_info(gpustate.profile())
    failure = failure_model.launch_failure(version, args, gpu["sm"], model_facts(args.get("model_path") or "")[1],
                                           env=os.environ, gpu_mem_mib=gpu["memory_total_mib"],
                                           path_exists=os.path.exists, mla=model_facts(args.get("model_path") or "")[3])
    if failure is not None and failure.stage == "server_args":
        # ServerArgs resolution raises in the launching process: what it logged before the failing step, the
        # traceback, exit status 1, no scheduler
        log_notices_before(version, args, failure)
        frame = ""
        if failure.frame:
            path, line, func, code = failure.frame[:4]
            site = os.environ.get("MOESWEEP_SIM_SITE_PACKAGES", "/opt/sglang/venv/lib/python3.11/site-packages")
            frame = f'  File "{site}/{path}", line {line}, in {func}\n    {code}\n'
        Log.write("Traceback (most recent call last):\n"
                  '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
                  '  File "<frozen runpy>", line 88, in _run_code\n'
                  f"{frame}{failure.exc}\n")
        return 1
    srv = Server(version, args, spec, launch_argv=argv)
    srv.run()
    return 1


if __name__ == "__main__":
    sys.exit(main())
