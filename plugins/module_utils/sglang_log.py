# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see galaxy.yml)
"""Pure, incremental classifier of SGLang server logs (journal lines or a saved log file).

Feed lines, read the state. Nothing here does I/O or reads a clock: times come from the line's own
``[YYYY-MM-DD HH:MM:SS(.mmm)]`` header or from the monotonic ``t`` the caller passes with the line.

Written from SGLang's sources (0.5.9 / 0.5.23: scheduler.py ``Scheduler hit an exception``,
engine.py ``Received sigquit from a child process``, http_server.py ``The server is fired up and ready
to roll!`` / ``Initialization failed. warmup error``, model_runner.py / cuda_graph_setup.py phase lines)
and from real logs quoted in public sglang issues (tests/fixtures/sglang-logs/SOURCES.md).

Verdicts:
  ready     ``The server is fired up and ready to roll!`` was seen (or, in an excerpt that starts late,
            serving traffic: ``ready_inferred``)
  crashed   a crash marker was seen; ``cause`` is one of CAUSES
  starting  no verdict yet (a hang, in a static file, ends here too)

Stdlib only; runs on the target (Python 3.9+) as well as on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import re
import time as _time

PHASES = ("init", "load_weights", "kv_cache", "cuda_graph", "http_up", "warmup", "ready", "serving")
CAUSES = (
    "unsupported_arch",
    "oom",
    "nccl",
    "jit_compile",
    "flag_error",
    "port_in_use",
    "warmup_failed",
    "killed",
    "other",
)
_PHASE_INDEX = {p: i for i, p in enumerate(PHASES)}

# --------------------------------------------------------------------------------------------------
# Line framing

# The record header SGLang's logger writes: ``[%(asctime)s<prefix>] message``; prefix is any of
# `` DPn PPn ATTN_CPn MOE_DPn TPn EPn`` (scheduler.py configure_scheduler_process). Milliseconds with
# SGLANG_LOG_MS=1. Searched, not matched, so that container / CI / Ray prefixes and glued output
# (``...numpy.random._bounded_integers[2025-04-17 11:44:15 TP3] Scheduler hit ...``) still parse.
_HEADER_RE = re.compile(
    r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<frac>[.,]\d+)?"
    r"(?P<ranks>(?:\s+(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\]\s?"
)
# A rank-only header, as some excerpts show it (``[TP0] Scheduler hit an exception``).
_RANK_ONLY_RE = re.compile(r"^\[(?:(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+\s*)+\]\s?")
# Prefixes added by whatever collected the output, stripped before anything else.
_OUTER_PREFIXES = (
    # journalctl -o short: "Nov 29 21:15:00 host sglang[123]: "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:]+(?:\[\d+\])?: "),
    # docker / CI ISO timestamps: "[2025-11-06T02:08:27.278Z] ", "2025-07-25T07:53:08.2+08:00 stdout F "
    re.compile(
        r"^\[?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s"
        r"(?:std(?:out|err) [FP] )?"
    ),
    # docker compose: "sglang-1  | "
    re.compile(r"^[\w.-]+\s+\| ?"),
    # Ray: "(SGLangEngine pid=23902) "
    re.compile(r"^\(\w+ pid=\d+\) ?"),
    # torchrun: "[rank0]: "
    re.compile(r"^\[rank\d+\]: ?"),
)
_RAY_REPEAT_RE = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")

# --------------------------------------------------------------------------------------------------
# Phase lines (message text after the header). Order within a phase does not matter.

_PHASE_PATTERNS = (
    ("init", re.compile(r"server_args=ServerArgs\(|Init torch distributed begin|init_distributed_environment")),
    ("load_weights", re.compile(r"Load weight begin|Loading (?:safetensors|pt) checkpoint shards")),
    # The KV pool is allocated right after the weights, so a failure after "Load weight end" is a KV failure.
    ("kv_cache", re.compile(r"Load weight end|KV Cache is allocated|Memory pool end|KV Cache is VA upper bound")),
    (
        "cuda_graph",
        re.compile(
            r"Capture (?:target |draft )?(?:decode |verify |prefill |piecewise )?cuda graph begin"
            r"|Capturing batches|Capture cuda graph bs|Registering \d+ cuda graph addresses",
            re.I,
        ),
    ),
    ("http_up", re.compile(r"Started server process|Waiting for application startup|Application startup complete")),
    ("warmup", re.compile(r"Uvicorn running on|\"(?:GET|POST) /(?:get_)?model_info|Start of (?:pd )?warmup")),
    ("ready", re.compile(r"The server is fired up and ready to roll")),
)
_LOAD_END_RE = re.compile(r"Load weight end")
_GRAPH_END_RE = re.compile(r"Capture (?:target |draft )?(?:decode |verify |prefill |piecewise )?cuda graph end", re.I)
_SUMMARY_RE = re.compile(r"max_total_num_tokens=")

# Serving traffic: a batch with other requests running / queued, a decode batch, or an OpenAI-API access
# line. Warmup is one request with nothing else running, so these only appear once the server serves.
_BATCH_RE = re.compile(r"(?P<kind>Prefill|Decode) batch[.,].*?#running-req: (?P<run>\d+)(?:.*?#queue-req: (?P<q>\d+))?")
_API_ACCESS_RE = re.compile(r"\"(?:POST|GET) /v1/(?:chat/completions|completions|embeddings|messages|responses)")
_ACCESS_RE = re.compile(r"INFO:\s+[\d.:a-fA-F\[\]]+ - \"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+\" (?P<code>\d{3})")
_GENERATE_200_RE = re.compile(r"\"POST /generate HTTP/[\d.]+\" 200")

# Progress without a record header: tqdm bars, shard loading, JIT compilers.
_PROGRESS_RE = re.compile(
    r"\d+%\|.*\|\s*\d+/\d+|Completed \| \d+/\d+|flashinfer\.jit|Loading JIT ops|Compiling|nvcc|ninja|"
    r"\[\d+/\d+\]|it/s\]|s/it\]",
    re.I,
)

# --------------------------------------------------------------------------------------------------
# Crash markers (decisive as soon as seen) and candidates (decisive at end of input / process exit).

_CRASH_MARKERS = (
    re.compile(r"(?:Scheduler|DataParallelController|DetokenizerManager|TokenizerManager|\w+) hit an exception"),
    re.compile(r"Received sigquit from a child proces"),  # sic: older releases print "proces"
    re.compile(r"SIGQUIT received\. signum="),
    re.compile(r"Initialization failed\. warmup error"),
    re.compile(r"scheduler died during initialization"),
    re.compile(r"Rank \d+ scheduler is dead"),
    re.compile(r"[Ww]atchdog timeout"),
    re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code"),
    re.compile(r"Capture (?:cuda|CUDA) graph failed"),
    re.compile(r"error while attempting to bind on address|[Aa]ddress already in use"),
    re.compile(r"Fatal Python error: "),
    re.compile(r"Main process exited, code=(?:killed|dumped|exited), status=(?!0/)"),
)
# argparse: "usage: ..." then "<prog>: error: <message>" and exit 2 (launch_server.py, sglang serve, ...)
_ARGPARSE_RE = re.compile(
    r"^(?:[\w.\-/]+(?: serve)?|__main__\.py): error: "
    r"(?:unrecognized arguments|ambiguous option|argument |the following arguments are required|invalid choice)"
)
# A traceback logged with a header (older releases: "[... TP0] Traceback (most recent call last):")
_HEADER_TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\)")
# A top-level exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", "Exception: ..."
_EXC_LINE_RE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)")
_KILLED_RE = re.compile(r"^(?:Killed|已杀死|Aborted(?: \(core dumped\))?|Segmentation fault(?: \(core dumped\))?)\s*$")

# --------------------------------------------------------------------------------------------------
# Causes: first match in this order wins across the crash evidence.

_CAUSE_PATTERNS = (
    (
        "flag_error",
        re.compile(r": error: (?:unrecognized arguments|ambiguous option|argument |the following arg|invalid choice)"),
    ),
    ("port_in_use", re.compile(r"[Aa]ddress already in use|EADDRINUSE|error while attempting to bind|[Ee]rrno 98")),
    (
        "unsupported_arch",
        re.compile(
            r"No supported CUDA architectures found|no kernel image is available|Unsupported CUDA architecture|"
            r"not supported on (?:this|the current) (?:GPU|device|platform)|Current platform does not support|"
            r"[Pp]lease use Blackwell|supported only on NVIDIA|only supports sm|SM1\d\d[- ]only|"
            r"requires (?:SM|sm_?)\s?\d+|unsupported (?:GPU )?arch|is not supported on SM|"
            r"CUDA error: (?:no kernel image|invalid device function)|cudaErrorNoKernelImageForDevice"
        ),
    ),
    (
        "oom",
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
            r"Not enough memory\. Please try to increase --mem-fraction-static|"
            r"leave no GPU memory for the KV cache|out of memory|Failed to allocate memory|"
            r"max_total_num_tokens.*(?:<= 0|too small)"
        ),
    ),
    (
        "jit_compile",
        re.compile(
            r"Ninja build failed|\['ninja', '-v'|run_ninja|nvcc fatal|nvcc error|error: identifier \"|"
            r"fatal error: \S+\.(?:h|hpp|cuh): No such file|CUDA_HOME environment variable is not set|"
            r"CompilationError|triton\.compiler|build_and_load|JIT compil\w* fail|Failed to compile"
        ),
    ),
    (
        "nccl",
        re.compile(
            r"NCCL error|ncclCommInitRank|NCCL WARN|ProcessGroupNCCL|DistBackendError|nccl\w*Error|"
            r"gloo|collective operation timeout|Connection closed by peer|init_process_group|"
            r"custom_all_reduce|TCPStore|dist-init-addr"
        ),
    ),
)
_WARMUP_CAUSE_RE = re.compile(r"Initialization failed\. warmup error")
_KILLED_CAUSE_RE = re.compile(
    r"^(?:Killed|已杀死)\s*$|code=killed|exit code: -9|exit code -9|status=9/KILL|SIGKILL|OOM killer"
)

# Traceback frames that tell the phase when the log has no phase lines (an excerpt).
_FRAME_PHASES = (
    ("warmup", re.compile(r"_execute_server_warmup|_wait_and_warmup")),
    (
        "serving",
        re.compile(
            r"event_loop_(?:normal|overlap|pp)|run_event_loop|dispatch_event_loop|process_batch_result|"
            r"get_next_batch_to_run"
        ),
    ),
    (
        "cuda_graph",
        re.compile(r"cuda_graph_runner|init_cuda_graphs|init_device_graphs|capture_one_batch_size|cuda_graph_setup"),
    ),
    ("kv_cache", re.compile(r"init_memory_pool|memory_pool\.py|profile_max_num_token|kv_cache_configurator")),
    ("load_weights", re.compile(r"load_model|model_loader|load_weights|weight_utils")),
    ("init", re.compile(r"initialize_model_parallel|init_torch_distributed|init_distributed_environment|pynccl")),
)
_PHASE_FROM_MARKER = (
    ("cuda_graph", re.compile(r"Capture (?:cuda|CUDA) graph failed")),
    ("warmup", re.compile(r"Initialization failed\. warmup error")),
    ("kv_cache", re.compile(r"leave no GPU memory for the KV cache|Not enough memory\. Please try to increase")),
)

# Lines that look alarming and are not (printed by healthy launches). Never evidence of a cause.
_HARMLESS_RE = re.compile(
    r"Ignore import error when loading|is deprecated|DeprecationWarning|FutureWarning|UserWarning|"
    r"\"GET /health(?:_generate)? HTTP/[\d.]+\" 503|warnings\.warn|torch\._dynamo|NCCL INFO"
)
# Health-check access lines are produced by our own poller: they are not progress of the server.
_HEALTH_ACCESS_RE = re.compile(r"\"GET /(?:health|health_generate|ready) HTTP/")

_TB_KEEP_HEAD = 2
_TB_KEEP_TAIL = 14


def _strip_outer(line):
    for _ in range(3):
        changed = False
        for rx in _OUTER_PREFIXES:
            m = rx.match(line)
            if m and m.end() > 0:
                line = line[m.end():]
                changed = True
        if not changed:
            break
    return _RAY_REPEAT_RE.sub("", line)


def _parse_ts(ts, frac):
    try:
        value = float(calendar.timegm(_time.strptime(ts, "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return None
    if frac:
        try:
            value += float("0." + frac[1:])
        except ValueError:
            pass
    return value


def split_records(line):
    """Split one chunk of output into records: newlines, tqdm carriage returns, and records glued after
    other output (``...[2025-04-17 11:44:15 TP3] Scheduler hit ...``). Returns a list of strings."""
    out = []
    for physical in line.replace("\r\n", "\n").split("\n"):
        for seg in physical.split("\r"):
            seg = _strip_outer(seg.rstrip())
            # A header that does not start the segment: split there, keeping both parts.
            m = _HEADER_RE.search(seg)
            if m and m.start() > 0:
                head = seg[: m.start()].rstrip()
                if head:
                    out.append(head)
                seg = seg[m.start():]
            out.append(seg)
    return out


class Record:
    """One parsed record: message text, wall time (or None), rank prefix, whether it had a header."""

    __slots__ = ("raw", "msg", "wall", "ranks", "headed", "indented")

    def __init__(self, raw):
        self.raw = raw
        m = _HEADER_RE.match(raw)
        if m:
            self.msg = raw[m.end():]
            self.wall = _parse_ts(m.group("ts"), m.group("frac"))
            self.ranks = m.group("ranks").strip()
            self.headed = True
        else:
            r = _RANK_ONLY_RE.match(raw)
            self.msg = raw[r.end():] if r else raw
            self.wall = None
            self.ranks = raw[1: r.end() - 1].strip() if r else ""
            self.headed = bool(r)
        self.indented = (not self.headed) and raw[:1] in (" ", "\t")


class SglangLogClassifier:
    """Incremental classifier. ``feed(text, t=None)`` any number of times, then read ``state`` /
    ``result()``. ``finish()`` marks end of input (a static file, or the process has exited): a bare
    traceback or a lone exception line at the end then counts as the crash."""

    def __init__(self):
        self.phase = "init"
        self._phase_times = {}  # phase -> (time, source) first seen
        self._events = {}  # load_weights_end, cuda_graph_end -> time
        self.ready_seen = False
        self.ready_inferred = False
        self.crashed = False
        self.crash_phase = None
        self.after_ready = False
        self.first_marker = None
        self._cause_hits = []  # (priority, line)
        self._blocks = []  # traceback blocks: lists of lines
        self._in_block = False
        self._pending = None  # candidate crash line (bare traceback / exception line / Killed)
        self._pending_phase = None
        self._finished = False
        self._generate_200 = 0
        self._recent = []  # last suspicious lines before a crash (NCCL WARN etc.)
        self.first_time = None
        self.last_time = None
        self.last_progress = None
        self.lines_seen = 0
        self._block_closed = False
        self._markers = []

    # ------------------------------------------------------------------ feeding
    def feed(self, text, t=None):
        """Feed a chunk (one line or many). ``t``: monotonic time the chunk was read; when omitted the
        records' own header timestamps are used for the timeline and stall checks."""
        for raw in split_records(text):
            self._feed_record(Record(raw), t)
        return self

    def feed_lines(self, lines, t=None):
        for line in lines:
            self.feed(line, t)
        return self

    def _now(self, rec, t):
        if t is not None:
            return float(t)
        if rec.wall is not None:
            return rec.wall
        return self.last_time

    def _feed_record(self, rec, t):
        msg = rec.msg
        if not msg.strip():
            return
        self.lines_seen += 1
        now = self._now(rec, t)
        if now is not None:
            if self.first_time is None:
                self.first_time = now
            self.last_time = now
            if not _HEALTH_ACCESS_RE.search(msg):
                self.last_progress = now
        if "init" not in self._phase_times:
            self._phase_times["init"] = now

        # Traceback block bookkeeping: indented or exception lines continue a block; a headed record ends it.
        if self._in_block:
            if rec.headed and not _HEADER_TRACEBACK_RE.match(msg):
                self._in_block = False
                self._block_closed = True
            else:
                self._blocks[-1].append(msg)
                if any(rx.search(msg) for rx in _CRASH_MARKERS):
                    self._crash(msg.strip(), now)
                if not rec.indented and _EXC_LINE_RE.match(msg.strip()):
                    self._note_cause(msg.strip())
                elif rec.indented:
                    self._note_frame(msg)
                    self._note_cause(msg.strip(), frame=True)
                return

        harmless = bool(_HARMLESS_RE.search(msg))
        self._track_phase(msg, now)

        if harmless:
            return

        marker = _ARGPARSE_RE.match(msg.strip()) or any(rx.search(msg) for rx in _CRASH_MARKERS)
        if not marker and rec.headed and _HEADER_TRACEBACK_RE.match(msg):
            marker = True
        if marker:
            self._crash(msg.strip(), now)
            if "Traceback (most recent call last)" in msg:
                self._blocks.append([msg.strip()])
                self._in_block = True
            return

        if not rec.headed:
            stripped = msg.strip()
            if stripped.startswith("Traceback (most recent call last)") or stripped.startswith(
                "During handling of the above exception"
            ):
                if not self._in_block:
                    self._blocks.append([stripped])
                    self._in_block = True
                if self._pending is None:
                    self._pending = stripped
                    self._pending_phase = self.phase
                return
            if rec.indented and stripped.startswith("File \""):
                # A traceback whose head was cut off (an excerpt) or scrolled out.
                self._blocks.append([stripped])
                self._in_block = True
                self._note_frame(stripped)
                self._note_cause(stripped, frame=True)
                if self._pending is None:
                    self._pending = stripped
                    self._pending_phase = self.phase
                return
            if _EXC_LINE_RE.match(stripped):
                self._note_cause(stripped)
                self._pending = stripped
                self._pending_phase = self._marker_phase(stripped) or self.phase
                return
            if _KILLED_RE.match(stripped):
                self._note_cause(stripped)
                if self._pending is None:
                    self._pending = stripped
                    self._pending_phase = self.phase
                return
        if re.search(r"NCCL WARN|ERROR|[Ee]rror:|CUDA error", msg):
            self._recent.append(msg.strip())
            del self._recent[:-20]

    # ------------------------------------------------------------------ phases
    def _enter(self, phase, now):
        if self._phase_times.get(phase) is None:
            self._phase_times[phase] = now
        if _PHASE_INDEX[phase] > _PHASE_INDEX[self.phase]:
            # Fill skipped phases' absence honestly: only phases actually seen get a time.
            self.phase = phase

    def _track_phase(self, msg, now):
        if self.crashed:
            return
        for phase, rx in _PHASE_PATTERNS:
            if rx.search(msg):
                if phase == "ready":
                    self.ready_seen = True
                self._enter(phase, now)
        if _LOAD_END_RE.search(msg) and "load_weights_end" not in self._events:
            self._events["load_weights_end"] = now
        if _GRAPH_END_RE.search(msg):
            self._events["cuda_graph_end"] = now
        if _SUMMARY_RE.search(msg):
            self._events.setdefault("scheduler_ready", now)
        # Serving traffic
        serving = False
        m = _BATCH_RE.search(msg)
        if m:
            if m.group("kind") == "Decode" or int(m.group("run")) > 0 or int(m.group("q") or 0) > 0:
                serving = True
        if _API_ACCESS_RE.search(msg):
            serving = True
        if _GENERATE_200_RE.search(msg):
            self._generate_200 += 1
            if self._generate_200 > 1:
                serving = True
        if serving:
            if self.ready_seen or self.phase == "ready":
                self._enter("serving", now)
            elif _PHASE_INDEX[self.phase] <= _PHASE_INDEX["warmup"]:
                # Requests served while warmup was still to finish are still warmup unless we never saw
                # the startup at all (an excerpt that begins mid-run): then it is serving.
                if self.phase == "init" and len(self._phase_times) <= 1:
                    self.ready_inferred = True
                    self._enter("serving", now)

    def _marker_phase(self, text):
        for phase, rx in _PHASE_FROM_MARKER:
            if rx.search(text):
                return phase
        return None

    def _note_frame(self, text):
        for phase, rx in _FRAME_PHASES:
            if rx.search(text):
                if self._frame_phase is None or _PHASE_INDEX[phase] > _PHASE_INDEX[self._frame_phase]:
                    self._frame_phase = phase
                return

    _frame_phase = None

    # ------------------------------------------------------------------ crash evidence
    def _crash(self, line, now):
        self._markers.append(line)
        if not self.crashed:
            self.crashed = True
            self.first_marker = line
            self.crash_time = now
            self.after_ready = self.ready_seen or self.phase == "serving"
            self.crash_phase = self._marker_phase(line)
        self._note_cause(line)

    def _note_cause(self, line, frame=False):
        if frame:
            # Frames only speak for compiler / collective failures (a path through run_ninja, pynccl ...).
            for prio, (cause, rx) in enumerate(_CAUSE_PATTERNS):
                if cause in ("jit_compile", "nccl") and rx.search(line):
                    self._cause_hits.append((prio + 0.5, cause, line))
                    return
            return
        if _HARMLESS_RE.search(line):
            return
        for prio, (cause, rx) in enumerate(_CAUSE_PATTERNS):
            if rx.search(line):
                self._cause_hits.append((prio, cause, line))
                return
        if _WARMUP_CAUSE_RE.search(line):
            self._cause_hits.append((len(_CAUSE_PATTERNS), "warmup_failed", line))
        elif _KILLED_CAUSE_RE.search(line):
            # An exception line that names the SIGKILL (e.g. "scheduler died ... exit code: -9") is "killed"
            # and beats the bare systemd exit line.
            prio = len(_CAUSE_PATTERNS) + (0.25 if _EXC_LINE_RE.match(line) else 1)
            self._cause_hits.append((prio, "killed", line))
        elif _EXC_LINE_RE.match(line):
            # An exception no cause pattern knows (e.g. "RuntimeError: CUDA error: an illegal memory
            # access") still says more than the SIGKILL that follows it: cause "other", this line decisive.
            self._cause_hits.append((len(_CAUSE_PATTERNS) + 0.5, "other", line))

    def finish(self):
        """End of input: promote a trailing bare traceback / exception line / ``Killed`` to a crash."""
        self._finished = True
        if not self.crashed and self._pending is not None and not self.ready_seen:
            self.crashed = True
            self.first_marker = self._pending
            self.after_ready = self.phase == "serving"
            self.crash_phase = self._marker_phase(self._pending)
            if self.crash_phase is None and self._pending_phase != "init":
                self.crash_phase = self._pending_phase
            self._markers.append(self._pending)
            self._note_cause(self._pending)
        elif not self.crashed and self._pending is not None and self.ready_seen:
            # A traceback after the ready line with the process gone is a crash after ready.
            self.crashed = True
            self.first_marker = self._pending
            self.after_ready = True
            self.crash_phase = self.phase
            self._markers.append(self._pending)
            self._note_cause(self._pending)
        return self

    # ------------------------------------------------------------------ reading
    @property
    def state(self):
        if self.crashed:
            return "crashed"
        if self.ready_seen or self.ready_inferred:
            return "ready"
        return "starting"

    @property
    def crash_settled(self):
        """True once the crash's traceback has been followed by another record (or input ended), i.e. the
        cause is as good as it will get from the log."""
        return self.crashed and (self._finished or not self._in_block or self._block_closed)

    def _best_cause(self):
        if not self._cause_hits and self._recent:
            for line in self._recent:
                self._note_cause(line)
        if not self._cause_hits:
            return "other", None
        prio, cause, line = min(self._cause_hits, key=lambda h: h[0])
        # A warmup failure whose only evidence is the HTTP assertion stays warmup_failed; a specific cause
        # seen anywhere (scheduler traceback: OOM, arch, NCCL ...) wins over it.
        return cause, line

    def _died_phase(self):
        """The phase the server died in: the marker's own phase (``Capture cuda graph failed`` ->
        cuda_graph, ``warmup error`` -> warmup), else the phase reached, else -- for an excerpt with no
        phase lines at all -- what the traceback's frames say."""
        if self.crash_phase is not None:
            return self.crash_phase
        phase = self.phase
        inferred = self._frame_phase
        if inferred is not None and _PHASE_INDEX[inferred] > _PHASE_INDEX[phase]:
            only_init = all(p == "init" for p, at in self._phase_times.items() if at is not None)
            if inferred != "serving" or only_init:
                phase = inferred
        return phase

    def _decisive_marker(self):
        # The child's own line says more than the parent's "Received sigquit" or systemd's exit line.
        for line in self._markers:
            if not re.search(r"sigquit|SIGQUIT|Main process exited", line):
                return line
        return self.first_marker

    def traceback_excerpt(self):
        if not self._blocks:
            return None
        block = self._blocks[0]
        if len(block) > _TB_KEEP_HEAD + _TB_KEEP_TAIL:
            block = block[:_TB_KEEP_HEAD] + ["..."] + block[-_TB_KEEP_TAIL:]
        return "\n".join(block)

    def timeline(self):
        """phase -> {"at": offset seconds from the first record, "duration": seconds until the next phase
        seen (None for the last)}, plus events (load_weights_end, cuda_graph_end) as offsets."""
        base = self.first_time
        seen = [(p, self._phase_times[p]) for p in PHASES if self._phase_times.get(p) is not None]
        out = {}
        for i, (phase, at) in enumerate(seen):
            nxt = seen[i + 1][1] if i + 1 < len(seen) else None
            entry = {"at": round(at - base, 3) if base is not None else None, "duration": None}
            if nxt is not None:
                entry["duration"] = round(nxt - at, 3)
            out[phase] = entry
        if "load_weights" in out and self._events.get("load_weights_end") is not None:
            began = self._phase_times["load_weights"]
            out["load_weights"]["duration"] = round(self._events["load_weights_end"] - began, 3)
        if "cuda_graph" in out and self._events.get("cuda_graph_end") is not None:
            out["cuda_graph"]["duration"] = round(self._events["cuda_graph_end"] - self._phase_times["cuda_graph"], 3)
        for name, at in self._events.items():
            if at is not None and base is not None:
                out.setdefault("events", {})[name] = round(at - base, 3)
        return out

    def stalled(self, now, stall_timeout):
        """Pure predicate: no progress record for ``stall_timeout`` seconds while starting. ``now`` is on the
        clock the caller fed ``t`` with (or header wall time when feeding without ``t``). tqdm, shard and
        JIT compiler lines count as progress: a slow compile that still prints is not a hang."""
        if self.state != "starting":
            return False
        ref = self.last_progress if self.last_progress is not None else self.first_time
        if ref is None:
            return False
        return (now - ref) >= stall_timeout

    def result(self):
        state = self.state
        out = {
            "state": state,
            "cause": None,
            "phase": self.phase,
            "after_ready": False,
            "decisive_line": None,
            "traceback": None,
            "ready_inferred": self.ready_inferred and not self.ready_seen,
            "timeline": self.timeline(),
        }
        if state == "crashed":
            cause, line = self._best_cause()
            phase = self._died_phase()
            out["cause"] = cause
            out["phase"] = phase
            out["after_ready"] = bool(phase != "warmup" and (self.after_ready or phase == "serving"))
            out["decisive_line"] = line or self._decisive_marker()
            out["traceback"] = self.traceback_excerpt()
        elif state == "ready":
            out["after_ready"] = False
            out["decisive_line"] = (
                "The server is fired up and ready to roll!" if self.ready_seen else None
            )
        return out


def classify_text(text):
    """Classify a whole saved log (a static file: ends with ``finish()``)."""
    return SglangLogClassifier().feed(text).finish().result()


def classify_lines(lines):
    c = SglangLogClassifier()
    for line in lines:
        c.feed(line)
    return c.finish().result()
