# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""sglang's own benchmark client, ``python -m sglang.bench_serving``: the command of one concurrency level,
the plan of the levels, and the parser of what it writes.

Written from python/sglang/bench_serving.py of sglang v0.5.9 (the client the sglang_env role installs):

* options: ``--backend`` (``sglang`` = native ``/generate``, ``sglang-oai`` = ``/v1/completions``,
  ``sglang-oai-chat`` = ``/v1/chat/completions``, ``vllm`` ...), ``--base-url``, ``--model``, ``--tokenizer``,
  ``--dataset-name random-ids`` (token ids drawn from the tokenizer's vocabulary: no dataset download),
  ``--random-input-len`` / ``--random-output-len`` / ``--random-range-ratio`` (lengths uniform in
  ``[max(int(L * ratio), 1), L]``, so 1.0 gives fixed lengths), ``--num-prompts``, ``--max-concurrency``,
  ``--request-rate inf``, ``--warmup-requests``, ``--seed``, ``--output-file`` (appends one JSON line),
  ``--output-details`` (adds per-request ``errors`` and more), ``--disable-tqdm``;
* the JSON line (``benchmark``): ``duration``, ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``request_throughput``, ``input_throughput``, ``output_throughput``,
  ``total_throughput``, ``{mean,median,std,p99}_{ttft,tpot,itl,e2e_latency}_ms`` (``p90_e2e``, ``p95_itl``),
  ``concurrency``, ``max_output_tokens_per_s``, ``max_concurrent_requests``, and with ``--output-details``
  ``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``generated_texts``, ``errors``;
* when no request succeeds it prints ``Error running benchmark for request rate: ...`` and then fails
  with an undefined ``result`` (UnboundLocalError) before writing any line;
* auth: ``OPENAI_API_KEY`` in the environment is sent as ``Authorization: Bearer`` (``get_auth_headers``).

Stdlib only; runs on the target (Python 3.9+).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import secrets

BACKENDS = ("sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat", "lmdeploy",
            "lmdeploy-chat", "trt", "gserver", "truss")
DATASETS = ("random-ids", "random", "sharegpt")
FIGURES = (
    "duration", "completed", "total_input_tokens", "total_output_tokens", "total_output_tokens_retokenized",
    "request_throughput", "input_throughput", "output_throughput", "total_throughput",
    "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p90_ttft_ms", "p95_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p90_tpot_ms", "p95_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p90_itl_ms", "p95_itl_ms", "p99_itl_ms",
    "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms", "p90_e2e_latency_ms",
    "p95_e2e_latency_ms", "p99_e2e_latency_ms", "concurrency", "max_output_tokens_per_s",
    "max_concurrent_requests", "accept_length",
)
ARGS_ECHOED = ("backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len",
               "random_output_len", "random_range_ratio")
MAX_ERRORS_KEPT = 20


class BenchInputError(ValueError):
    """Bad benchmark settings: the message names the setting and the fix."""


def prompt_counts(num_prompts):
    """The roles' ``num_prompts`` list as ``plan_levels`` takes it: [] -> None (computed per level), [N] -> N for
    every level, [a, b, ...] -> one per level."""
    if not num_prompts:
        return None
    if isinstance(num_prompts, (list, tuple)) and len(num_prompts) == 1:
        return num_prompts[0]
    return num_prompts


def plan_levels(concurrency, num_prompts=None, prompts_per_concurrency=5, min_prompts=16):
    """[(concurrency, num_prompts)] per level. ``num_prompts``: one int for every level, a list (one per
    level) or None (``max(prompts_per_concurrency * c, min_prompts)``)."""
    if not isinstance(concurrency, (list, tuple)) or not concurrency:
        raise BenchInputError("concurrency must be a non-empty list of positive integers, e.g. [1, 8, 32, 64]")
    levels = []
    for c in concurrency:
        if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
            raise BenchInputError("concurrency levels must be positive integers, got %r" % (c,))
    if len(set(concurrency)) != len(concurrency):
        raise BenchInputError("concurrency lists a level twice: %r" % (list(concurrency),))
    if isinstance(num_prompts, (list, tuple)):
        if len(num_prompts) != len(concurrency):
            raise BenchInputError("num_prompts has %d entries for %d concurrency levels; give one per level or "
                                  "one number" % (len(num_prompts), len(concurrency)))
        counts = list(num_prompts)
    elif num_prompts is None:
        if prompts_per_concurrency <= 0 or min_prompts <= 0:
            raise BenchInputError("prompts_per_concurrency and min_prompts must be > 0")
        counts = [max(int(prompts_per_concurrency * c), int(min_prompts)) for c in concurrency]
    else:
        counts = [num_prompts] * len(concurrency)
    for c, n in zip(concurrency, counts):  # noqa: B905 - targets run Python 3.9, zip(strict=) is 3.10
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise BenchInputError("num_prompts must be positive integers, got %r" % (n,))
        if n < c:
            raise BenchInputError(
                "num_prompts %d is smaller than the concurrency %d: the level would never reach its concurrency; "
                "give at least %d prompts" % (n, c, c))
        levels.append((c, n))
    return levels


def check_lengths(input_len, output_len, range_ratio):
    for name, value in (("input_len", input_len), ("output_len", output_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise BenchInputError("%s must be a positive number of tokens, got %r" % (name, value))
    if not 0.0 <= float(range_ratio) <= 1.0:
        raise BenchInputError("range_ratio must be between 0 and 1 (1.0 = fixed lengths), got %r" % (range_ratio,))


def level_argv(python, base_url, model, tokenizer, concurrency, num_prompts, output_file, backend="sglang",
               dataset_name="random-ids", dataset_path=None, input_len=1024, output_len=1024, range_ratio=1.0,
               warmup_requests=1, seed=42, extra_args=None):
    """The exact bench_serving command of one level."""
    argv = [python, "-m", "sglang.bench_serving",
            "--backend", backend,
            "--base-url", base_url,
            "--dataset-name", dataset_name,
            "--random-input-len", str(input_len),
            "--random-output-len", str(output_len),
            "--random-range-ratio", str(range_ratio),
            "--num-prompts", str(num_prompts),
            "--max-concurrency", str(concurrency),
            "--request-rate", "inf",
            "--warmup-requests", str(warmup_requests),
            "--seed", str(seed),
            "--output-file", output_file,
            "--output-details",
            "--disable-tqdm"]
    if model:
        argv += ["--model", model]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if dataset_path:
        argv += ["--dataset-path", dataset_path]
    argv += list(extra_args or [])
    return argv


def last_json_line(text):
    """The last complete JSON object line of an output file (bench_serving appends), or None."""
    for line in reversed((text or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def json_lines(text):
    """Every JSON object line of an output file, in order: one per bench_serving run (a level sized to a precision
    target appends one per round)."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def round_ok(record):
    """A round (one result line with ``--output-details``) where every request succeeded."""
    errors = record.get("errors") or []
    return bool(record.get("completed")) and record.get("completed") == len(record.get("ttfts") or errors) \
        and not any(errors)


def summarise_errors(errors, limit=MAX_ERRORS_KEPT):
    """Per-request error texts (empty for successes) -> [{error, count}], most frequent first."""
    counts = {}
    for e in errors or []:
        if e:
            text = str(e).strip().splitlines()[-1][:300] if str(e).strip() else str(e)
            counts[text] = counts.get(text, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"error": k, "count": v} for k, v in ordered[:limit]]


_STDOUT_ERROR_RE = re.compile(
    r"^(Error running benchmark.*|All requests failed.*|.*Error: .*|.*Exception: .*"
    r"|Traceback \(most recent call last\):)$")


def stdout_errors(stdout, stderr=""):
    """The lines of the client's output that say why it failed (for a level with no result line)."""
    out = []
    for line in ((stdout or "") + "\n" + (stderr or "")).splitlines():
        line = line.rstrip()
        if _STDOUT_ERROR_RE.match(line) and line not in out:
            out.append(line[:300])
    return out[-10:]


PER_REQUEST_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


def trim_record(record, known=()):
    """The result line without its per-request arrays (``--output-details``), with the error texts summarised and
    secrets redacted (``redact_lines``): what a results directory keeps of a level."""
    out = {k: v for k, v in record.items() if k not in PER_REQUEST_KEYS}
    out["errors_summary"] = summarise_errors(record.get("errors"))
    return secrets.redact(out, known)


def redact_lines(text, known=()):
    """bench_serving's output file (one JSON line per run) with every secret redacted: its ``server_info`` is the
    server's /get_server_info, which is ``dataclasses.asdict(server_args)``, ``api_key`` and ``admin_api_key``
    included (sglang v0.5.9 python/sglang/srt/entrypoints/http_server.py server_info(); bench_serving.py writes it
    into the result line). ``known``: the secret strings themselves (the API key). Lines that are not JSON are
    redacted as text."""
    out = []
    for line in (text or "").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            out.append(secrets.redact_text(line, known))
            continue
        out.append(json.dumps(secrets.redact(value, known)))
    return "\n".join(out) + ("\n" if out else "")


def parse_result(record, num_prompts):
    """One bench_serving JSON line -> the level's figures: {figures, args, completed, failed, errors, ok}.

    A level where any request failed is not ok: its figures are kept for the record but never reported as a
    result (the caller marks it)."""
    figures = {k: record.get(k) for k in FIGURES if k in record}
    args = {k: record.get(k) for k in ARGS_ECHOED if k in record}
    completed = record.get("completed")
    errors = summarise_errors(record.get("errors"))
    failed = None
    if isinstance(completed, int):
        failed = max(0, int(num_prompts) - completed)
    if failed is None and record.get("errors") is not None:
        failed = sum(1 for e in record["errors"] if e)
    ok = bool(completed) and not failed and not errors
    return {"figures": figures, "args": args, "completed": completed, "failed": failed, "errors": errors, "ok": ok}


# When bench_serving's requests start: it prints this line once its warmup is done, then sleeps a fixed second
# (sglang v0.5.9, python/sglang/bench_serving.py, benchmark(): the "Warmup completed with ... Starting main benchmark
# run..." print, then time.sleep(1.0) before benchmark_start_time;
# https://github.com/sgl-project/sglang/blob/v0.5.9/python/sglang/bench_serving.py). Its `duration` runs from
# there to the last response; what it does after (metrics, printing, the output file) is not the level's GPU time.
MAIN_RUN_MARKER = "Starting main benchmark run"
SLEEP_BEFORE_MAIN_RUN_S = 1.0


def level_window(t_main, t_end, duration, t_start=None):
    """(start, end) wall times of a level's requests, for its telemetry: from the driver's time stamp of the
    main-run line plus bench_serving's fixed sleep, ``duration`` long (never past the level's end). Without that
    stamp, the ``duration`` that ended when the level ended (the level's post-processing then counts in), else
    the level's own start and end."""
    if t_main is not None and duration:
        start = t_main + SLEEP_BEFORE_MAIN_RUN_S
        return start, min(start + duration, t_end) if t_end else start + duration
    if t_end and duration:
        return t_end - duration, t_end
    return t_start, t_end


# The driver runs every level in ONE interpreter of the client venv: for each level it sets sys.argv to the
# level's bench_serving arguments and runs the module as ``python -m`` does (runpy.run_module with
# run_name="__main__": the real argparse parser, then run_benchmark). The client's imports (numpy,
# transformers, aiohttp: seconds on a loaded host) are paid once per point instead of once per level.
# It prints one JSON event line per level start, main run (level_window) and end on stdout (the level's own output
# goes to its log).
# With --wait it is started ahead: it imports, then reads its plan only after a line on stdin, so the imports
# overlap the module's server checks and the sampler's first sample.
# A level planned with "sized" (sized to a precision target, module_utils bench_stats) ends each round with a "round"
# event and reads one JSON line on stdin: {"more": N} runs another round of N requests into the same output file
# (bench_serving appends a line per run), anything else ends the level.
DRIVER_SOURCE = r'''
import contextlib, json, runpy, sys, time, traceback

MARKER = %r

def emit(**event):
    sys.__stdout__.write(json.dumps(event) + "\n")
    sys.__stdout__.flush()

class Stamped:
    """The level's log, time-stamping the line bench_serving prints just before its main run ("main")."""
    def __init__(self, fh, concurrency):
        self.fh, self.concurrency, self.seen = fh, concurrency, False
    def write(self, text):
        if not self.seen and MARKER in text:
            self.seen = True
            emit(event="main", concurrency=self.concurrency, t=time.time())
        return self.fh.write(text)
    def __getattr__(self, name):
        return getattr(self.fh, name)

def next_round(args, num_prompts, rnd):
    """A level's next round: ``num_prompts`` requests, no warmup (the server is warm), another seed (other
    prompts), appended to the same output file."""
    out = list(args)
    for flag, value in (("--num-prompts", num_prompts), ("--warmup-requests", 0)):
        out[out.index(flag) + 1] = str(value)
    seed = out.index("--seed") + 1
    out[seed] = str(int(out[seed]) + rnd - 1)
    return out

def main(plan_path, wait):
    t0 = time.time()
    import sglang.bench_serving  # noqa: F401  the imports, once
    emit(event="imported", t=time.time(), seconds=time.time() - t0)
    if wait and not sys.stdin.readline():
        return  # started ahead (--wait), and the module went away before it gave the go
    with open(plan_path) as fh:
        plan = json.load(fh)
    for level in plan["levels"]:
        with open(level["log"], "w") as log:
            emit(event="start", concurrency=level["concurrency"], t=time.time())
            rc, error = 0, None
            with contextlib.redirect_stdout(Stamped(log, level["concurrency"])), contextlib.redirect_stderr(log):
                sys.argv = ["bench_serving"] + level["args"]
                try:
                    runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
                except SystemExit as exc:
                    rc = exc.code if isinstance(exc.code, int) else 1
                except BaseException as exc:  # the level failed: record it and go on with the next
                    rc, error = 1, "".join(traceback.format_exception_only(type(exc), exc)).strip()
                    traceback.print_exc()
            rnd = 1
            while level.get("sized") and rc == 0 and error is None:
                # one more round of this level? the module answers from what the rounds so far gave
                emit(event="round", concurrency=level["concurrency"], round=rnd, t=time.time())
                line = sys.stdin.readline()
                more = json.loads(line).get("more", 0) if line.strip() else 0
                if not more:
                    break
                rnd += 1
                with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                    sys.argv = ["bench_serving"] + next_round(level["args"], more, rnd)
                    try:
                        runpy.run_module("sglang.bench_serving", run_name="__main__", alter_sys=True)
                    except SystemExit as exc:
                        rc = exc.code if isinstance(exc.code, int) else 1
                    except BaseException as exc:
                        rc, error = 1, "".join(traceback.format_exception_only(type(exc), exc)).strip()
                        traceback.print_exc()
            emit(event="end", concurrency=level["concurrency"], t=time.time(), rc=rc, error=error, rounds=rnd)
    emit(event="done", t=time.time())

if __name__ == "__main__":
    main(sys.argv[1], "--wait" in sys.argv[2:])
''' % MAIN_RUN_MARKER


def parse_events(text):
    """The driver's event lines -> list of dicts (other lines ignored)."""
    events = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def bench_serving_path(purelib):
    """Where the client venv's bench_serving module must be (no import needed to check)."""
    return purelib.rstrip("/") + "/sglang/bench_serving.py"


def overhead_per_level(wall_s, durations):
    """The module's wall time minus bench_serving's own durations, per level."""
    runs = [d for d in durations if isinstance(d, (int, float))]
    if not durations:
        return None
    return round((wall_s - sum(runs)) / float(len(durations)), 3)


def host_inputs(run_command, params, access, isfile, isdir, listdir, read_text):
    """What a benchmark needs on its host before its first request, read there: a local dataset file (never
    downloaded), the client venv with sglang's bench_serving, and a local tokenizer. ``params`` holds
    ``client_python``, ``tokenizer``, ``model_path``, ``hf_home``, ``dataset_name`` and ``dataset_path`` (the
    sglang_bench module's options). Returns (the problem with its fix or None, the tokenizer path, where it was
    found). The file system and the command runner are injected (tests)."""
    p = params
    if p.get("dataset_name") != "random-ids" and not (p.get("dataset_path") and isfile(p["dataset_path"])):
        return ("dataset %s needs a local dataset_path (never downloaded); %r is not a file"
                % (p.get("dataset_name"), p.get("dataset_path"))), None, None
    if not access(p["client_python"]):
        return ("the benchmark client %s does not exist: provision the host with site.yml "
                "(sglang_env_client_enabled) or set client_python" % p["client_python"]), None, None
    rc, out, _err = run_command([p["client_python"], "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    if rc != 0 or not isfile(bench_serving_path(out.strip())):
        return ("the client venv of %s has no sglang (no %s): install the client stack (sglang_env_client_stack) "
                "with site.yml" % (p["client_python"], bench_serving_path(out.strip()))), None, None
    tok, how = resolve_tokenizer(p.get("tokenizer"), p.get("model_path"), p.get("hf_home"), isdir, listdir, read_text)
    if tok is None:
        return "%s; the client never downloads one (the hub is offline for it)" % how, None, None
    return None, tok, how


def resolve_tokenizer(tokenizer, model_path, hf_home, isdir, listdir, read_text):
    """The local tokenizer directory: ``tokenizer`` when given, else ``model_path`` when it is a local
    directory, else the Hugging Face cache snapshot of the repo id ``model_path`` under ``hf_home``
    (``hub/models--ORG--NAME/snapshots/<revision of refs/main>``, the layout huggingface_hub writes).
    Returns (path or None, explanation). The file system is injected (tests)."""
    if tokenizer:
        if isdir(tokenizer):
            return tokenizer, "given"
        return None, "tokenizer directory %s does not exist" % tokenizer
    if model_path and isdir(model_path):
        return model_path, "the model directory"
    if not model_path or "/" not in model_path:
        return None, "no tokenizer given and the model path %r is neither a directory nor a hub repo id" % (model_path,)
    repo = (hf_home or "").rstrip("/") + "/hub/models--" + model_path.replace("/", "--")
    snapshots = repo + "/snapshots"
    if not isdir(snapshots):
        return None, ("no tokenizer given and %s is not in the Hugging Face cache (%s): download it on the host "
                      "or set the tokenizer path" % (model_path, snapshots))
    revision = None
    try:
        revision = read_text(repo + "/refs/main").strip()
    except (OSError, IOError):
        revision = None
    if revision and isdir(snapshots + "/" + revision):
        return snapshots + "/" + revision, "the Hugging Face cache (refs/main)"
    found = sorted(listdir(snapshots))
    if not found:
        return None, "the Hugging Face cache has no snapshot of %s (%s)" % (model_path, snapshots)
    return snapshots + "/" + found[-1], "the Hugging Face cache"
