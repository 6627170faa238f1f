"""Continuous-batching scheduler of the simulated server (one loop thread, like sglang's
Scheduler.event_loop_normal): prefill batches for newly arrived requests, otherwise one decode
step for every running request.  Step durations come from tokenmodel; a virtual clock keeps the
long-run rate exact even when sleeps overshoot on a loaded machine."""

from __future__ import annotations

import hashlib
import queue
import threading
import time
import uuid

from . import tokenmodel

# Output vocabulary: the words of the test tokenizer (w000..w399), so generated text round-trips
# through a WordLevel whitespace tokenizer one word = one token.
VOCAB = [f"w{i:03d}" for i in range(400)]
TOKEN_ID_BASE = 1000  # simulated token ids: TOKEN_ID_BASE + index into VOCAB


def count_prompt_tokens(text: str) -> int:
    """Prompt tokens = whitespace-separated words (documented approximation; the bench client's
    tokenizer is a WordLevel/WhitespaceSplit tokenizer, so its counts match)."""
    return len(text.split())


def prefill_admission(chunked_left: int | None, waiting: list[int], room: int, max_prefill_tokens: int,
                      chunk: int | None, input_cap_with_chunking: bool) -> tuple[int | None, list[int], bool]:
    """Which prompt tokens the next prefill batch takes, as sglang's PrefillAdder admits them (0.5.9
    managers/schedule_policy.py ``add_chunked_req``, ``add_one_req``, ``budget_state``; the scheduler's
    ``_get_new_batch_prefill_raw`` calls them in that order, managers/scheduler.py:1960-2110).

    ``chunked_left``: the prompt tokens the request being chunked still has (None: none is); ``waiting``: the
    prompt tokens of the waiting requests, first come first served; ``room``: how many more requests may run
    (``max_running_requests`` less the running ones); ``chunk``: ``--chunked-prefill-size`` (None: disabled);
    ``input_cap_with_chunking``: whether a request that would reach ``--max-prefill-tokens`` waits for the next
    batch even with chunking on (0.5.9 yes; 0.5.23's ``_select_prefill_admission`` only without chunking).

    Returns (the chunked request's tokens this batch or None, the tokens of each waiting request admitted in
    order - the last one truncated when the chunk is full -, whether that last one is now the chunked request).
    Not modelled: the KV pool's budget (``rem_total_tokens``, NO_TOKEN), page rounding, prefix-cache hits (the
    simulated prompts share no prefix)."""
    rem_input, rem_chunk = max_prefill_tokens, chunk
    taken_chunked = None
    if chunked_left is not None:
        taken_chunked = min(chunked_left, rem_chunk) if rem_chunk is not None else chunked_left
        rem_input -= taken_chunked
        if rem_chunk is not None:
            rem_chunk -= taken_chunked
        if taken_chunked < chunked_left:
            return taken_chunked, [], False  # add_chunked_req: still chunked, and the chunk is full
    admitted: list[int] = []
    for tokens in waiting:
        if len(admitted) + (taken_chunked is not None) >= room:
            break  # batch_is_full: len(can_run_list) >= get_num_allocatable_reqs(running_bs)
        listed = admitted or taken_chunked is not None
        if listed and tokens >= rem_input and (rem_chunk is None or input_cap_with_chunking):
            break  # AddReqResult.OTHER: the first request may exceed the input cap, the others wait
        if rem_chunk is None or tokens <= rem_chunk:
            admitted.append(tokens)
            rem_input -= tokens
            if rem_chunk is not None:
                rem_chunk -= tokens
        else:
            if rem_chunk <= 0:
                break
            admitted.append(rem_chunk)  # truncated: this request is chunked, and the batch is full
            return taken_chunked, admitted, True
        if rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
            break  # budget_state: OTHER
    return taken_chunked, admitted, False


class Req:
    def __init__(self, prompt_tokens: int, max_new: int, ignore_eos: bool, seed: str, rid: str | None = None,
                 count_in_metrics: bool = True, stream: bool = False, script: list[str] | None = None):
        self.rid = rid or uuid.uuid4().hex
        self.stream = stream
        self.prompt_tokens = max(1, prompt_tokens)
        self.max_new = max(0, int(max_new))
        self.ignore_eos = ignore_eos
        h = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
        self.seed = h
        # without ignore_eos the simulated model "emits EOS" after a deterministic length
        self.eos_at = None if ignore_eos else 8 + h % 57
        # a scripted answer (gsm8k.script): one text piece per token, then the stop string that ends it
        self.script = script
        self.prefilled = 0  # prompt tokens prefilled so far (a chunked prefill takes several batches)
        self.out_ids: list[int] = []
        self.created = time.time()
        self.first_token_time = None
        self.finished_time = None
        self.finish_reason = None
        self.events: queue.Queue = queue.Queue()
        self.count_in_metrics = count_in_metrics
        self.aborted = False
        # scheduler-side time stats (perf_counter / time.time), as sglang's ReqTimeStats records them
        self.wait_queue_entry = time.perf_counter()
        self.forward_entry = 0.0
        self.prefill_start = 0.0
        self.prefill_end = 0.0
        self.prefill_finished_ts = 0.0
        self.is_health_check = self.rid.startswith("HEALTH_CHECK")
        self.garbage_out = False

    def next_token(self, garbage: bool) -> int:
        k = len(self.out_ids)
        if self.script is not None and not garbage:
            # ids of the test tokenizer's range; a scripted piece is not one of its words (only the text is read)
            return TOKEN_ID_BASE + int(hashlib.sha256(self.script[k].encode()).hexdigest()[:6], 16) % len(VOCAB)
        idx = self.seed % len(VOCAB) if garbage else (self.seed + 7 * k + k * k) % len(VOCAB)
        return TOKEN_ID_BASE + idx

    def input_ids(self) -> list[int]:
        """The prompt's token ids, simulated: words of the test tokenizer's range (only their count is modelled)."""
        return [TOKEN_ID_BASE + (self.seed + i) % len(VOCAB) for i in range(self.prompt_tokens)]

    @property
    def text(self) -> str:
        if self.script is not None and not self.garbage_out:
            return "".join(self.script[:len(self.out_ids)])
        return " ".join(VOCAB[i - TOKEN_ID_BASE] for i in self.out_ids)


class Engine:
    def __init__(self, backend: str, gpu_model: str, max_running: int, max_total_tokens: int,
                 decode_log_interval: int, log, garbage: bool = False, max_prefill_tokens: int = 16384,
                 chunked_prefill_size: int | None = None, input_cap_with_chunking: bool = True):
        self.base, self.alpha, self.prefill_rate = tokenmodel.params(backend, gpu_model)
        self.max_running = max(1, max_running)
        # the prefill batch's budgets (prefill_admission); a chunk size <= 0 disables chunking, as
        # Scheduler.__init__ reads --chunked-prefill-size -1
        self.max_prefill_tokens = max(1, int(max_prefill_tokens))
        self.chunk = int(chunked_prefill_size) if chunked_prefill_size and chunked_prefill_size > 0 else None
        self.input_cap_with_chunking = input_cap_with_chunking
        self.chunked: Req | None = None  # the request whose prompt is being prefilled chunk by chunk
        self.max_total_tokens = max(1, max_total_tokens)
        self.decode_log_interval = max(1, decode_log_interval)
        self.log = log  # callable(kind, **fields)
        self.garbage = garbage
        self.cond = threading.Condition()
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.stop = False
        self.crash_hook = None  # callable() -> bool; True = crash instead of running the batch
        # callable(reqs, finished_flags) after every batch result reaches the tokenizer manager
        self.on_output = None
        # callable() -> bool: True while the batch in flight is stuck (a hung collective, fault `stall`)
        self.stalled = None
        self.return_health_check_ct = 0
        self.last_batch_cuda_graph = False
        self.cuda_graph_max_bs = 0  # largest captured decode batch; 0 = CUDA graph disabled
        self._pending: list = []  # (req, event) of the batch in flight, delivered by _batch_done
        self.slowdown = None  # callable() -> decode step time factor (fault hw_slowdown)
        self.drift = None  # callable(t) -> every step's time factor at clock t (drift.Drift.factor)
        self.last_gen_throughput = 0.0
        self.stats = {"prompt_tokens": 0, "generation_tokens": 0, "requests": 0, "cached_tokens": 0}
        self.busy_until = 0.0
        # Scheduler.forward_ct (run_batch adds one before each forward) and cur_batch (the batch in flight, None
        # while idle; event_loop_normal): what the forward watchdog reads (watchdog.py)
        self.forward_ct = 0
        self.cur_batch: list[Req] | None = None
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    def start(self):
        self._thread.start()

    def submit(self, req: Req):
        with self.cond:
            # Scheduler.process_input_requests: a health-check request is ignored while requests run;
            # the next batch result then carries a HealthCheckOutput instead (maybe_send_health_check_signal)
            if req.is_health_check and self.running:
                self.return_health_check_ct += 1
                return
            req.wait_queue_entry = time.perf_counter()
            self.waiting.append(req)
            self.cond.notify()

    def num_unfinished(self) -> int:
        with self.cond:
            return len(self.waiting) + len(self.running)

    def token_usage(self) -> tuple[int, float]:
        used = sum(r.prompt_tokens + len(r.out_ids) for r in self.running)
        return used, used / self.max_total_tokens

    def flush_cache(self) -> bool:
        with self.cond:
            return not self.waiting and not self.running

    # ------------------------------------------------------------------ loop
    def _loop(self):
        clock = None  # virtual time of the end of the last batch
        decode_ct = 0
        last_log_t = time.monotonic()
        last_log_tokens = 0
        gen_tokens = 0
        while True:
            with self.cond:
                while not self.stop and not self.waiting and not self.running and self.chunked is None:
                    clock = None
                    self.cur_batch = None
                    self.cond.wait()
                if self.stop:
                    return
                n_running = len(self.running)
                chunked = self.chunked
                part, admitted, now_chunked = prefill_admission(
                    chunked.prompt_tokens - chunked.prefilled if chunked is not None else None,
                    [r.prompt_tokens for r in self.waiting], self.max_running - n_running, self.max_prefill_tokens,
                    self.chunk, self.input_cap_with_chunking)
                new = [self.waiting.pop(0) for _ in admitted]
                batch = ([(chunked, part)] if part is not None else []) + list(zip(new, admitted, strict=True))
                self.chunked = new[-1] if now_chunked else (chunked if part is not None
                                                            and part < chunked.prompt_tokens - chunked.prefilled
                                                            else None)
            now = time.monotonic()
            if clock is None or now - clock > 5.0:
                # idle (or hopelessly behind): restart the virtual clock.  Shorter stalls of this
                # thread on a loaded machine are caught up, so the long-run token rate stays exact.
                clock = now
            if self.crash_hook is not None and self.crash_hook(new):
                return
            if batch:
                reqs = [r for r, _t in batch]
                self.cur_batch = reqs
                self.forward_ct += 1
                tokens = sum(t for _r, t in batch)
                dt = tokens / self.prefill_rate
                if self.drift is not None:
                    dt *= self.drift(clock)
                start = time.perf_counter()
                for r in new:
                    r.forward_entry = r.prefill_start = start
                clock += dt
                self._sleep_until(clock)
                clock = self._stall(clock)
                end = time.perf_counter()
                for r, t in batch:
                    r.prefilled += t
                # a request with prompt tokens left is not in the running batch yet and emits nothing
                done = [r for r in reqs if r.prefilled >= r.prompt_tokens]
                for r in done:
                    r.prefill_end = end
                    r.prefill_finished_ts = time.time()
                self.last_batch_cuda_graph = False
                with self.cond:
                    queue_len = len(self.waiting)
                    used, usage = self.token_usage()
                self.log("prefill", new_seq=len(batch), new_tok=tokens, cached=0, usage=usage,
                         running=n_running, queue=queue_len)
                for r in done:
                    if r.count_in_metrics:
                        self.stats["prompt_tokens"] += r.prompt_tokens
                    r.first_token_time = time.time()
                    with self.cond:
                        self.running.append(r)
                    self._emit(r)
                    gen_tokens += 1
                self._batch_done(done)  # a chunk that leaves prompt tokens sends no output (is_chunked)
                continue
            with self.cond:
                batch = list(self.running)
            n = len(batch)
            self.cur_batch = batch or None
            self.forward_ct += bool(batch)
            dt = tokenmodel.step_time(n, self.base, self.alpha)
            if self.slowdown is not None:
                dt *= self.slowdown()
            if self.drift is not None:
                dt *= self.drift(clock)
            clock += dt
            self._sleep_until(clock)
            clock = self._stall(clock)
            self.last_batch_cuda_graph = 0 < n <= self.cuda_graph_max_bs
            for r in batch:
                self._emit(r)
            self._batch_done(batch)
            gen_tokens += n
            decode_ct += 1
            if decode_ct % self.decode_log_interval == 0:
                t = time.monotonic()
                self.last_gen_throughput = (gen_tokens - last_log_tokens) / max(1e-9, t - last_log_t)
                last_log_t, last_log_tokens = t, gen_tokens
                with self.cond:
                    used, usage = self.token_usage()
                    qn = len(self.waiting)
                    rn = len(self.running)
                self.log("decode", running=rn, tokens=used, usage=usage, thr=self.last_gen_throughput, queue=qn)

    def _stall(self, clock: float) -> float:
        """Hold the batch in flight while the stall fault is on (nothing reaches the tokenizer manager);
        the virtual clock restarts afterwards, as after any long pause."""
        if self.stalled is None or not self.stalled():
            return clock
        while self.stalled():
            time.sleep(0.05)
        return time.monotonic()

    def _batch_done(self, reqs):
        """The batch result reaches the tokenizer manager: its bookkeeping first, then the waiting requests."""
        if self.return_health_check_ct:
            self.return_health_check_ct -= 1
        if self.on_output is not None:
            self.on_output(reqs)
        pending, self._pending = self._pending, []
        for r, ev in pending:
            r.events.put(ev)

    @staticmethod
    def _sleep_until(t: float):
        while True:
            d = t - time.monotonic()
            if d <= 0:
                return
            time.sleep(d)

    def _emit(self, r: Req):
        """Give request r its next token (or finish it without one when max_new is 0)."""
        if r.aborted:
            self._finish(r, {"type": "abort", "message": "client disconnected", "status_code": 400,
                             "err_type": None})
            return
        if r.max_new > 0:
            r.garbage_out = self.garbage
            r.out_ids.append(r.next_token(self.garbage))
            if r.count_in_metrics:
                self.stats["generation_tokens"] += 1
        k = len(r.out_ids)
        if r.script is not None and not self.garbage:
            # the length limit first, then the stop string the evaluator asked for, its text trimmed
            # (srt/managers/schedule_batch.py Req.check_finished: FINISH_LENGTH, then FINISH_MATCHED_STR)
            if k >= r.max_new:
                self._finish(r, {"type": "length", "length": r.max_new})
            elif k >= len(r.script):
                self._finish(r, {"type": "stop", "matched": "Question"})
            else:
                self._pending.append((r, ("token", k)))
        elif r.eos_at is not None and k >= r.eos_at and k < r.max_new:
            self._finish(r, {"type": "stop", "matched": 151329})
        elif k >= r.max_new:
            self._finish(r, {"type": "length", "length": r.max_new})
        else:
            self._pending.append((r, ("token", k)))

    def _finish(self, r: Req, reason: dict):
        r.finish_reason = reason
        r.finished_time = time.time()
        with self.cond:
            if r in self.running:
                self.running.remove(r)
        if r.count_in_metrics:
            self.stats["requests"] += 1
        self._pending.append((r, ("finish", len(r.out_ids))))

    def shutdown(self):
        with self.cond:
            self.stop = True
            self.cond.notify_all()
