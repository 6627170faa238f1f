"""SIMULATED SGLang server (no GPU): the `sglang serve` command line, startup log, HTTP API and
failure modes of the emulated sglang version, driven by a token-rate model.  Stdlib only.

Every log line comes from templates.py (each with its real source); behaviour is cited in
simulator/README.md and /work/shared/docs/sglang-facts.md.  The process is always labelled a
simulation: a first log line and an ``X-Moesweep-Simulated: 1`` response header.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import faults, gpustate, moe_resolution, sgl_cli
from . import templates as T
from .engine import Engine, Req, count_prompt_tokens

DEFAULT_VERSION = "0.5.9"
SUPPORTED = ("0.5.9", "0.5.23")
SIM_HEADER = ("X-Moesweep-Simulated", "1")


# ---------------------------------------------------------------------------- logging
class Log:
    """sglang's logging.basicConfig format (stderr): ``[%(asctime)s{prefix}] %(message)s``."""

    lock = threading.Lock()

    @staticmethod
    def ts() -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S")

    @classmethod
    def write(cls, text: str, stream=None):
        stream = stream or sys.stderr
        with cls.lock:
            stream.write(text)
            stream.flush()

    @classmethod
    def line(cls, msg: str, prefix: str = ""):
        cls.write(f"[{cls.ts()}{prefix}] {msg}\n")

    @classmethod
    def uvicorn(cls, msg: str, level: str = "INFO"):
        levelprefix = (level + ":").ljust(9)  # uvicorn ColourizedFormatter: levelname + ":" padded
        cls.write(T.render(T.UVICORN_DEFAULT_FMT, asctime=cls.ts(), levelprefix=levelprefix, message=msg) + "\n")

    @classmethod
    def access(cls, client: str, request_line: str, status: int):
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        cls.write(T.render(T.UVICORN_ACCESS_FMT, asctime=cls.ts(), levelprefix="INFO:    ", client_addr=client,
                           request_line=request_line, status_code=f"{status} {phrase}") + "\n", sys.stdout)


# ---------------------------------------------------------------------------- model facts
# (weights in GB for the whole checkpoint, class name, KV bytes per token per rank at tp=1, MLA?)
MODELS = {
    "glm-5-nvfp4": (453.0, "GlmMoeDsaForCausalLM", 70_000, True, 202752, "glm_moe_dsa"),
    "glm-5": (1510.0, "GlmMoeDsaForCausalLM", 70_000, True, 202752, "glm_moe_dsa"),
}
DEFAULT_MODEL = (16.0, "LlamaForCausalLM", 131_072, False, 32768, "llama")


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


def server_args_repr(args: dict) -> str:
    return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


# ---------------------------------------------------------------------------- the server
class Server:
    def __init__(self, version: str, args: dict, spec: dict):
        self.version = version
        self.args = args
        self.spec = spec
        self.fault = faults.current()
        self.prof = gpustate.profile()
        self.gpu = gpustate.gpu_info(self.prof)
        self.sm = self.gpu["sm"]
        self.tp = int(args.get("tp_size") or 1)
        self.pid = os.getpid()
        self.site = os.environ.get("MOESWEEP_SIM_SITE_PACKAGES", "/opt/sglang/venv/lib/python3.11/site-packages")
        self.backend = moe_resolution.resolve_backend(version, args, self.sm,
                                                      model_facts(args.get("model_path") or "")[1])
        self.quant = args.get("quantization")
        self.served_name = args.get("served_model_name") or args.get("model_path")
        self.status = "Starting"  # ServerStatus.Starting / Up / UnHealthy
        self.gracefully_exit = False
        self.engine: Engine | None = None
        self.httpd = None
        self.state = gpustate.StateWriter(self.prof, self.tp, self.pid)
        self.start_time = time.time()
        self.crashed = False
        self.first_real_request = threading.Event()
        self.max_total_tokens = 0
        self.max_running = 0
        self.context_len = 0
        self.mem = {}
        self.http_enabled = False

    # ------------------------------------------------------------ helpers
    def prefix(self, rank: int) -> str:
        return f" TP{rank}" if self.tp > 1 else ""

    def ranks(self, msg_fn, only0=False):
        for r in range(1 if only0 else self.tp):
            Log.line(msg_fn(r), self.prefix(r))

    def sleep(self, phase: str, default: float):
        time.sleep(max(0.0, phase_seconds(phase, default)))

    def t(self, tpl, **kw):
        return T.render(tpl, **kw)

    # ------------------------------------------------------------ failures
    def scheduler_crash(self, frames_key: str, exc_line: str, rank0_only=False, during_serving=False,
                        chained: tuple | None = None):
        """A scheduler process raised: every failing rank logs its traceback, then sends SIGQUIT to the
        parent, whose handler logs and kill_process_tree()s itself with SIGKILL (facts §4.4)."""
        frames = T.TRACEBACKS.get((self.version, frames_key)) or T.TRACEBACKS[("0.5.9", frames_key)]
        tb = ""
        if chained:
            inner_frames, inner_exc = chained
            tb = T.format_traceback(inner_frames, inner_exc, self.site)
            tb += "\nDuring handling of the above exception, another exception occurred:\n\n"
        tb += T.format_traceback(frames, exc_line, self.site)
        for r in range(1 if rank0_only else self.tp):
            Log.line(self.t(T.SCHEDULER_EXCEPTION, tb=tb), self.prefix(r))
        self.crashed = True
        time.sleep(0.05)
        if during_serving:
            # tokenizer manager's running-phase handler (registered with loop.add_signal_handler,
            # which calls it without arguments: signum=None, frame=None)
            Log.line(self.t(T.SIGQUIT_RUNNING, signum=None, frame=None))
        else:
            Log.line(self.t(T.SIGQUIT_LAUNCH))
        self.die_sigkill()

    def die_sigkill(self):
        self.state.remove()
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    # ------------------------------------------------------------ startup
    def run(self):
        a = self.args
        Log.line(self.t(T.SERVER_ARGS_9 if self.version == "0.5.9" else T.SERVER_ARGS_23,
                        args=server_args_repr(a)))
        signal.signal(signal.SIGQUIT, lambda s, f: (Log.line(self.t(T.SIGQUIT_LAUNCH)), self.die_sigkill()))
        if self.version == "0.5.9" and self.backend == "flashinfer_trtllm" and a.get("moe_runner_backend"):
            Log.line(self.t(T.TRTLLM_SHARED_EXPERTS_9))

        weights_gb, cls, kv_bytes_tok, mla, ctx, model_type = model_facts(a.get("model_path") or "")
        self.context_len = int(a.get("context_length") or ctx)
        total_gb = self.gpu["memory_total_mib"] / 1024
        avail0 = total_gb - 0.9
        self.state.phase(used_gb=0.5, util=0)

        # process start: torch/NCCL init
        self.sleep("init", 2.0)
        if self.version == "0.5.9":
            self.ranks(lambda r: self.t(T.INIT_DIST_BEGIN_9))
            self.sleep("dist", 1.0)
            self.ranks(lambda r: self.t(T.INIT_DIST_END_9, t=phase_seconds("dist", 1.0), m=0.6))
        avail = avail0 - 0.6
        self.state.phase(used_gb=total_gb - avail, util=0)

        # SM120 + allreduce fusion (>= 0.5.14): ValueError at scheduler init (facts §2.5)
        if (self.version == "0.5.23" and a.get("enable_flashinfer_allreduce_fusion")
                and not (self.sm == 90 or 100 <= self.sm < 110)):
            self.scheduler_crash("oom_kv", "ValueError: " + self.t(T.ALLREDUCE_FUSION_23), chained=None)

        # weights
        self.ranks(lambda r: self.t(T.LOAD_BEGIN, avail=avail))
        if moe_resolution.nvfp4_platform_refused(self.version, a, self.sm):
            # ModelOptNvFp4FusedMoEMethod.__init__ raises while the model is built, before weights load
            msg = self.t(T.NVFP4_PLATFORM_9 if self.version == "0.5.9" else T.NVFP4_PLATFORM_23)
            self.scheduler_crash("nvfp4_platform", "ValueError: " + msg)
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

        # KV cache
        mfs = a.get("mem_fraction_static") or (0.85 if self.sm >= 100 else 0.88)
        kv_gb = total_gb * mfs - (total_gb - avail)
        if self.fault == "oom_kv":
            kv_gb = -1.0
        tokens = int(kv_gb * (1 << 30) / (kv_bytes_tok / self.tp)) if kv_gb > 0 else 0
        if a.get("max_total_tokens"):
            tokens = min(tokens, int(a["max_total_tokens"])) if tokens > 0 else tokens
        if tokens <= 0:
            if self.version == "0.5.9":
                msg = self.t(T.NOT_ENOUGH_MEMORY_9, mfs=a.get("mem_fraction_static"))
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
        if self.version == "0.5.9":
            self.ranks(lambda r: self.t(T.KV_ALLOC_KV_9, n=tokens, kv=kv_gb))
        else:
            self.ranks(lambda r: self.t(T.KV_ALLOC_KV_23, cache_name="KV Cache", state="is allocated",
                                        dtype="torch.bfloat16", n=tokens, kv=kv_gb))
        avail -= kv_gb
        self.state.phase(used_gb=total_gb - avail, util=0)
        self.ranks(lambda r: self.t(T.MEM_POOL_END_9 if self.version == "0.5.9" else T.MEM_POOL_END_23, avail=avail))
        mrr = a.get("max_running_requests")
        self.max_running = int(mrr) if mrr else min(tokens // 2, 4096 if self.sm >= 100 else 3072)

        # trtllm-gen MoE kernels exist for SM100/SM103 only (flashinfer 0.6.3 / 0.7.2), whatever the quantization
        trtllm_broken = moe_resolution.trtllm_has_no_kernels(self.version, self.backend, a, self.sm)
        fi_exc = "RuntimeError: " + self.t(T.FI_NO_ARCH, majors=[10])

        # kernel warmup: flashinfer autotune (facts §2.3; S9 model_runner.py:1818-1874)
        autotune = (not a.get("disable_flashinfer_autotune")
                    and self.backend in ("flashinfer_trtllm", "flashinfer_mxfp4") and self.sm >= 90)
        if autotune:
            self.ranks(lambda r: self.t(T.AUTOTUNE_BEGIN_9))
            self.sleep("autotune", 2.0)
            if trtllm_broken:
                self.scheduler_crash("trtllm_sm120", fi_exc)
            self.ranks(lambda r: self.t(T.AUTOTUNE_END_9))

        # CUDA graph capture
        if not a.get("disable_cuda_graph"):
            max_bs = int(a.get("cuda_graph_max_bs") or 256)
            bs_list = [b for b in [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 513, 16))
                       if b <= max_bs]
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
            self.capture_progress(bs_list, capture_s, avail)
            if trtllm_broken:
                inner = T.TRACEBACKS[("0.5.9", "oom_graph_inner")][:9] + T.TRACEBACKS[("0.5.9", "trtllm_sm120")][-6:]
                self.scheduler_crash("oom_graph_outer", "Exception: " + self.t(
                    T.CAPTURE_FAILED, e=fi_exc.split(": ", 1)[1], hint=T.render(T.CAPTURE_FAILED_HINT)),
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
                    "graph": 0.35 if not a.get("disable_cuda_graph") else 0}
        chunked = a.get("chunked_prefill_size") or (8192 if self.sm >= 90 else 4096)
        max_prefill = a.get("max_prefill_tokens") or 16384
        self.ranks(lambda r: self.t(T.MAX_TOTAL_9 if self.version == "0.5.9" else T.MAX_TOTAL_23, n=tokens, c=chunked,
                                    p=max_prefill, r=self.max_running, L=self.context_len, label="available_gpu_mem",
                                    avail=avail), only0=True)

        # engine
        self.engine = Engine(self.backend, self.prof.get("gpu_model", "rtx-pro-6000"), self.max_running, tokens,
                             int(a.get("decode_log_interval") or 40), self.engine_log,
                             garbage=self.fault == "garbage")
        self.engine.crash_hook = self.engine_crash_hook
        self.engine.start()
        self.state.start_serving(self.engine, total_gb - avail)
        self.serve_http(trtllm_broken)

    def capture_progress(self, bs_list, seconds, avail):
        """TP0's tqdm bar over reversed(capture_bs) (S9 cuda_graph_runner.py:484-503), written to stderr
        the way tqdm does (carriage returns, final newline)."""
        Log.line(f"Capture cuda graph bs {bs_list}", self.prefix(0))
        n = len(bs_list)
        start = time.monotonic()
        for i, bs in enumerate(reversed(bs_list)):
            el = time.monotonic() - start
            pct = int(100 * i / n)
            Log.write(f"\rCapturing batches (bs={bs} avail_mem={avail - 0.35 * i / n:.2f} GB): {pct:3d}%|"
                      f"{'#' * (pct // 10):<10}| {i}/{n} [{int(el) // 60:02d}:{int(el) % 60:02d}<?, ?it/s]")
            time.sleep(seconds / n)
        el = time.monotonic() - start
        Log.write(f"\rCapturing batches (bs=1 avail_mem={avail - 0.35:.2f} GB): 100%|{'#' * 10}| {n}/{n} "
                  f"[{int(el) // 60:02d}:{int(el) % 60:02d}<00:00, {n / max(el, 1e-6):.2f}it/s]\n")

    # ------------------------------------------------------------ engine callbacks
    def engine_log(self, kind, **f):
        if kind == "prefill":
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
            if self.version == "0.5.9":
                D = T.DECODE_9.parts
                msg = (D[0].format(it="", running=f["running"], usage_msg=D[1].format(tokens=f["tokens"],
                                                                                     usage=f["usage"]))
                       + D[2].format(graph="cuda graph", cg=not self.args.get("disable_cuda_graph"), thr=f["thr"],
                                     queue=f["queue"]))
            else:
                msg = (T.DECODE_23.parts[0].format(it="", running=f["running"],
                                                   usage_msg=f"#token: {f['tokens']}, token usage: {f['usage']:.2f}, ")
                       + f"cuda graph: {not self.args.get('disable_cuda_graph')}, "
                         f"gen throughput (token/s): {f['thr']:.2f}, #queue-req: {f['queue']}")
            Log.line(msg, self.prefix(0))

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
            frames_exc = "RuntimeError: " + self.t(T.FI_NO_ARCH, majors=[10])
        else:
            frames_exc = "RuntimeError: " + self.t(T.TORCH_ILLEGAL_ADDRESS).rstrip("\n")
        self.scheduler_crash("serve", frames_exc, during_serving=True)

    # ------------------------------------------------------------ HTTP
    def serve_http(self, trtllm_broken: bool):
        a = self.args
        host = a.get("host") or "127.0.0.1"
        port = int(a.get("port") or 30000)
        # with --disable-flashinfer-autotune and --disable-cuda-graph the first MoE forward is the
        # warmup request (facts §2.3)
        self.trtllm_first_forward = trtllm_broken
        Log.uvicorn(T.render(T.UV_STARTED, pid=self.pid))
        Log.uvicorn(T.render(T.UV_WAIT_STARTUP))
        Log.uvicorn(T.render(T.UV_STARTUP_COMPLETE))
        warm = threading.Thread(target=self.warmup, args=(host, port), daemon=True)
        warm.start()
        try:
            if self.fault == "port_in_use":
                raise OSError(98, "Address already in use")
            Handler.server_obj = self
            self.httpd = _HTTPServer((host, port), Handler)
        except OSError as e:
            Log.uvicorn(T.render(T.BIND_ERROR, errno=e.errno, addr=(host, port), strerror=(e.strerror or "").lower()),
                        "ERROR")
            Log.uvicorn(T.render(T.UV_WAIT_SHUTDOWN))
            Log.uvicorn(T.render(T.UV_SHUTDOWN_COMPLETE))
            self.state.remove()
            # lifespan shutdown joins the (non-daemon) warmup thread, which polls /model_info 120 x 1 s
            # and then kill_process_tree()s the process (S9 http_server.py:1663-1689)
            warm.join()
            return
        self.httpd.daemon_threads = True
        self.http_enabled = True
        scheme_host = "0.0.0.0" if host is None else host
        Log.uvicorn(T.render(T.UV_RUNNING, addr=T.render(T.UV_ADDR, scheme="http", host=scheme_host, port=port)))
        signal.signal(signal.SIGTERM, self.on_sigterm_before_handler)
        self.httpd.serve_forever(poll_interval=0.2)

    def on_sigterm_before_handler(self, signum, frame):
        # before the first request reaches the tokenizer manager, uvicorn's own handler is active
        if self.status != "Up" or not self.handle_loop_created:
            Log.uvicorn(T.render(T.UV_SHUTTING_DOWN))
            Log.uvicorn(T.render(T.UV_WAIT_SHUTDOWN))
            Log.uvicorn(T.render(T.UV_SHUTDOWN_COMPLETE))
            Log.uvicorn(T.render(T.UV_FINISHED, pid=self.pid))
            self.state.remove()
            os._exit(0)
        self.on_sigterm()

    handle_loop_created = False

    def on_sigterm(self):
        # TokenizerManager SignalHandler.sigterm_handler via loop.add_signal_handler (no args)
        Log.line(self.t(T.SIGTERM, signum=None, frame=None))
        self.gracefully_exit = True
        threading.Thread(target=self.sigterm_watchdog, daemon=True).start()

    def sigterm_watchdog(self):
        # sigterm_watchdog polls every 5 s (scaled here), drains, then exits
        time.sleep(min(5.0, 5.0 * time_scale()))
        while True:
            n = self.engine.num_unfinished() if self.engine else 0
            rids = [r.rid for r in (self.engine.running + self.engine.waiting)] if self.engine else []
            Log.line(self.t(T.GRACEFUL, n=n, rids=rids))
            if n == 0:
                break
            time.sleep(min(5.0, 5.0 * time_scale()))
        self.state.remove()
        if self.version == "0.5.9":
            # S9 tokenizer_manager.py:2148 kill_process_tree(os.getpid(), include_parent=True):
            # the process SIGKILLs itself (utils/common.py:1149-1153)
            self.die_sigkill()
        # S23: ShutdownReq to the schedulers, then the server stop hook ends uvicorn -> exit 0
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


# ---------------------------------------------------------------------------- request handling
class _HTTPServer(ThreadingHTTPServer):
    # uvicorn's default backlog is 2048; http.server's 5 drops SYNs under a burst of new
    # connections (each costing a 1 s retransmit), which would distort client-side latencies
    request_queue_size = 2048
    daemon_threads = True


def _sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_obj: Server = None  # type: ignore[assignment]
    def version_string(self):  # uvicorn's default "server: uvicorn" header
        return "uvicorn"

    def log_message(self, fmt, *args):  # replaced by uvicorn-style access lines
        pass

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            return
        Log.access(f"{self.client_address[0]}:{self.client_address[1]}",
                   f"{self.command} {self.path} HTTP/{self.request_version.split('/')[-1]}", status)

    # ------------------------------------------------------------ plumbing
    def _send(self, status: int, body: bytes = b"", ctype: str = "application/json", extra=None):
        self.send_response(status)
        self.send_header(*SIM_HEADER)
        if body or status != 200 or ctype:
            self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj):
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        return json.loads(raw)

    def _start_stream(self):
        self.send_response(200)
        self.send_header(*SIM_HEADER)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _auth_ok(self, path: str) -> bool:
        s = self.server_obj
        key = s.args.get("api_key")
        if not key:
            return True
        exempt = ("/health", "/metrics") + (("/ready",) if s.version == "0.5.23" else ())
        if path.startswith(exempt):  # sglang/srt/utils/auth.py decide_request_auth
            return True
        parts = (self.headers.get("Authorization") or "").split(" ", 1)
        if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1] == key:
            return True
        self._json(401, {"error": "Unauthorized"})
        return False

    # ------------------------------------------------------------ routing
    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def _route(self, method):
        s = self.server_obj
        path = self.path.split("?", 1)[0]
        if not self._auth_ok(path):
            return
        try:
            if path in ("/health", "/health_generate") and method == "GET":
                return self.health(path)
            if path == "/ready" and s.version == "0.5.23" and method == "GET":
                return self._send(200 if s.status == "Up" and not s.gracefully_exit else 503, b"", "")
            if path == "/ping" and method == "GET":
                return self._send(200, b"", "")
            if path in ("/model_info", "/get_model_info") and method == "GET":
                if path == "/get_model_info" and s.version == "0.5.9":
                    Log.line(T.render(T.GET_MODEL_INFO_DEPRECATED))
                return self._json(200, self.model_info())
            if path in ("/server_info", "/get_server_info") and method == "GET":
                if path == "/get_server_info" and s.version == "0.5.9":
                    Log.line(T.render(T.GET_SERVER_INFO_DEPRECATED))
                return self._json(200, self.server_info())
            if path == "/v1/models" and method == "GET":
                return self._json(200, {"object": "list", "data": [
                    {"id": s.served_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                     "root": s.served_name, "parent": None, "max_model_len": s.context_len}]})
            if path == "/metrics" and method == "GET" and s.args.get("enable_metrics"):
                return self._send(200, self.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")
            if path == "/flush_cache" and method in ("GET", "POST"):
                if s.engine and s.engine.flush_cache():
                    return self._send(200, b"Cache flushed.\nPlease check backend logs for more details. "
                                           b"(When there are running or waiting requests, the operation will not "
                                           b"be performed.)\n", "text/plain; charset=utf-8")
                return self._send(400, b"Cache not flushed. Please check backend logs for more details. "
                                       b"(When there are running or waiting requests, the operation will not "
                                       b"be performed.)\n", "text/plain; charset=utf-8")
            if path == "/generate" and method in ("POST", "PUT"):
                return self.generate()
            if path == "/v1/completions" and method == "POST":
                return self.openai(chat=False)
            if path == "/v1/chat/completions" and method == "POST":
                return self.openai(chat=True)
            return self._json(404, {"detail": "Not Found"})
        except (BrokenPipeError, ConnectionResetError):
            return

    # ------------------------------------------------------------ endpoints
    def health(self, path):
        s = self.server_obj
        if s.gracefully_exit:
            Log.line(T.render(T.HEALTH_DURING_SHUTDOWN))
            return self._send(503, b"", "")
        if s.status == "Starting":
            return self._send(503, b"", "")
        if s.crashed:
            return  # no answer: the process is going down
        req = Req(1, 1, True, "HEALTH_CHECK", rid=f"HEALTH_CHECK_{time.time()}", count_in_metrics=False)
        s.engine.submit(req)
        try:
            req.events.get(timeout=20)
        except Exception:  # noqa: BLE001
            s.status = "UnHealthy"
            return self._send(503, b"", "")
        return self._send(200, b"", "")

    def model_info(self):
        s = self.server_obj
        _, cls, _, _, _, model_type = model_facts(s.args.get("model_path") or "")
        info = {"model_path": s.args.get("model_path"), "tokenizer_path": s.args.get("tokenizer_path")
                or s.args.get("model_path"), "is_generation": True,
                "preferred_sampling_params": s.args.get("preferred_sampling_params"),
                "weight_version": s.args.get("weight_version", "default"),
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": model_type, "architectures": [cls]}
        if s.version == "0.5.23":
            info.update({"served_model_name": s.served_name, "load_format": s.args.get("load_format"),
                         "reasoning_parser": s.args.get("reasoning_parser"),
                         "tool_call_parser": s.args.get("tool_call_parser"), "disaggregation_mode": "null"})
        return info

    def server_info(self):
        s = self.server_obj
        state = dict(s.args)
        state.update({"last_gen_throughput": s.engine.last_gen_throughput if s.engine else 0.0,
                      "memory_usage": s.mem, "effective_max_running_requests_per_dp": s.max_running})
        out = dict(s.args)
        out.update({"max_total_num_tokens": s.max_total_tokens, "max_req_input_len": s.context_len - 1,
                    "internal_states": [state], "version": s.version})
        if s.version == "0.5.23":
            out.update({"startup_time": s.start_time, "frontend": "http", "launch_command": " ".join(sys.argv)})
        return out

    def metrics(self) -> str:
        s = self.server_obj
        e = s.engine
        name = s.served_name
        lbl = f'model_name="{name}"'
        used, usage = e.token_usage() if e else (0, 0.0)
        lines = []

        def m(metric, kind, value, help_):
            lines.append(f"# HELP sglang:{metric} {help_}")
            lines.append(f"# TYPE sglang:{metric} {kind}")
            lines.append(f"sglang:{metric}{{{lbl}}} {float(value)}")

        m("prompt_tokens_total", "counter", e.stats["prompt_tokens"], "Number of prefill tokens processed.")
        m("generation_tokens_total", "counter", e.stats["generation_tokens"], "Number of generation tokens processed.")
        m("num_requests_total", "counter", e.stats["requests"], "Number of requests processed.")
        m("cached_tokens_total", "counter", 0, "Number of cached prompt tokens.")
        m("num_running_reqs", "gauge", len(e.running), "The number of running requests.")
        m("num_queue_reqs", "gauge", len(e.waiting), "The number of requests in the waiting queue.")
        m("num_used_tokens", "gauge", used, "The number of used tokens.")
        m("token_usage", "gauge", usage, "The token usage.")
        m("gen_throughput", "gauge", e.last_gen_throughput, "The generation throughput (token/s).")
        m("cache_hit_rate", "gauge", 0.0, "The prefix cache hit rate.")
        m("max_total_num_tokens", "gauge", s.max_total_tokens, "Maximum total number of tokens in the KV cache pool.")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ generation
    def _make_req(self, prompt_tokens, sp, seed, rid=None):
        s = self.server_obj
        max_new = sp.get("max_new_tokens")
        max_new = 128 if max_new is None else int(max_new)
        req = Req(prompt_tokens, max_new, bool(sp.get("ignore_eos")), seed, rid=rid)
        if not s.handle_loop_created:
            s.handle_loop_created = True  # tokenizer manager's auto_create_handle_loop
            if threading.current_thread() is not threading.main_thread():
                pass
        if s.status == "Up":
            s.first_real_request.set()
        s.engine.submit(req)
        return req

    def _meta(self, req: Req, finished: bool):
        s = self.server_obj
        meta = {"id": req.rid, "finish_reason": req.finish_reason if finished else None,
                "prompt_tokens": req.prompt_tokens, "weight_version": "default",
                "completion_tokens": len(req.out_ids), "cached_tokens": 0}
        meta["total_retractions" if s.version == "0.5.9" else "num_retractions"] = 0
        if finished:
            meta["e2e_latency"] = req.finished_time - req.created
        if s.version == "0.5.23":
            meta["reasoning_tokens"] = 0
        return meta

    def generate(self):
        s = self.server_obj
        if s.gracefully_exit:
            return self._json(503, {"error": {"message": "Server is shutting down"}})
        try:
            body = self._body()
        except ValueError as e:
            return self._json(400, {"error": {"message": str(e)}})
        sp = body.get("sampling_params") or {}
        if "text" in body and body["text"] is not None:
            if isinstance(body["text"], list):
                return self._json(400, {"error": {"message": "batch input is not supported by the simulator"}})
            prompt = count_prompt_tokens(str(body["text"]))
            seed = str(body["text"])
        elif "input_ids" in body and body["input_ids"] is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):
                return self._json(400, {"error": {"message": "batch input is not supported by the simulator"}})
            prompt = len(ids)
            seed = json.dumps(ids)
        else:
            return self._json(400, {"error": {"message": "Either text, input_ids or input_embeds should be provided."}})
        req = self._make_req(prompt, sp, seed, rid=body.get("rid"))
        if not body.get("stream"):
            while True:
                kind, _ = req.events.get()
                if kind == "finish":
                    break
            return self._json(200, {"text": req.text, "output_ids": list(req.out_ids),
                                    "meta_info": self._meta(req, True)})
        self._start_stream()
        try:
            while True:
                kind, _k = req.events.get()
                fin = kind == "finish"
                self._chunk(_sse({"text": req.text, "output_ids": list(req.out_ids),
                                  "meta_info": self._meta(req, fin)}))
                if fin:
                    break
            self._chunk(_sse(b"[DONE]"))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            req.aborted = True

    def openai(self, chat: bool):
        s = self.server_obj
        ctype = (self.headers.get("content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return self._json(400, {"object": "error", "message":
                                    "1 validation error:\n  {'type': 'value_error', 'loc': ('header', "
                                    "'content-type'), 'msg': \"Unsupported Media Type: Only 'application/json' is "
                                    "allowed\"}", "type": "BadRequest", "param": None, "code": 400})
        try:
            body = self._body()
        except ValueError as e:
            return self._json(400, {"object": "error", "message": str(e), "type": "BadRequestError",
                                    "param": None, "code": 400})
        if chat:
            msgs = body.get("messages") or []
            text = " ".join(m.get("content") if isinstance(m.get("content"), str) else
                            " ".join(p.get("text", "") for p in (m.get("content") or []) if isinstance(p, dict))
                            for m in msgs)
            prompt = count_prompt_tokens(text)
            seed = text
        else:
            p = body.get("prompt", "")
            if isinstance(p, list) and p and isinstance(p[0], int):
                prompt, seed = len(p), json.dumps(p)
            else:
                if isinstance(p, list):
                    p = p[0] if p else ""
                prompt, seed = count_prompt_tokens(str(p)), str(p)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if max_tokens is None:
            max_tokens = 16 if not chat else 128
        sp = {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos", False)}
        req = self._make_req(prompt, sp, seed)
        rid = req.rid
        created = int(time.time())
        model = body.get("model") or s.served_name
        obj = "chat.completion" if chat else "text_completion"

        def usage():
            return {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + len(req.out_ids),
                    "completion_tokens": len(req.out_ids), "prompt_tokens_details": None, "reasoning_tokens": 0}

        def reason():
            fr = req.finish_reason or {}
            return fr.get("type"), fr.get("matched")

        if not body.get("stream"):
            while req.events.get()[0] != "finish":
                pass
            r, matched = reason()
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": req.text, "reasoning_content": None,
                                                  "tool_calls": None}, "logprobs": None, "finish_reason": r,
                          "matched_stop": matched}
            else:
                choice = {"index": 0, "text": req.text, "logprobs": None, "finish_reason": r, "matched_stop": matched}
            return self._json(200, {"id": rid, "object": obj, "created": created, "model": model,
                                    "choices": [choice], "usage": usage(), "metadata": {"weight_version": "default"}})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_stream()
        sent = 0
        try:
            if chat:
                self._chunk(_sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                               "logprobs": None, "finish_reason": None, "matched_stop": None}],
                                  "usage": None}))
            while True:
                kind, _k = req.events.get()
                fin = kind == "finish"
                words = req.text.split(" ") if req.out_ids else []
                delta = (" " if sent else "") + " ".join(words[sent:]) if len(words) > sent else ""
                sent = len(words)
                r, matched = reason() if fin else (None, None)
                if chat:
                    ch = {"index": 0, "delta": {"role": None, "content": delta}, "logprobs": None,
                          "finish_reason": r, "matched_stop": matched}
                    o = "chat.completion.chunk"
                else:
                    ch = {"index": 0, "text": delta, "logprobs": None, "finish_reason": r, "matched_stop": matched}
                    o = "text_completion"
                self._chunk(_sse({"id": rid, "object": o, "created": created, "model": model, "choices": [ch],
                                  "usage": None}))
                if fin:
                    break
            if include_usage:
                self._chunk(_sse({"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                                  "created": created, "model": model, "choices": [], "usage": usage()}))
            self._chunk(_sse(b"[DONE]"))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            req.aborted = True


# ---------------------------------------------------------------------------- entry point
def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    version = resolve_version()
    Log.write(f"[moesweep-sim] SIMULATED SGLang server (no GPU) emulating sglang {version}\n")
    args, spec = sgl_cli.parse(version, argv)
    msg = sgl_cli.startup_asserts(version, args)
    if msg is not None:
        Log.write("Traceback (most recent call last):\n"
                  '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
                  '  File "<frozen runpy>", line 88, in _run_code\n'
                  f"AssertionError: {msg}\n")
        return 1
    srv = Server(version, args, spec)
    srv.run()
    return 1


if __name__ == "__main__":
    sys.exit(main())
