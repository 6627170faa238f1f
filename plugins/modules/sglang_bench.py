#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Benchmark an SGLang server with sglang's own bench_serving, sampling GPU telemetry
description:
  - Runs on the target against the local server. For each concurrency level runs the real C(sglang.bench_serving)
    of the client venv the sglang_env role installs (C(--dataset-name random-ids), fixed lengths with
    C(--random-range-ratio 1.0), C(--request-rate inf), C(--max-concurrency) = the level), with a local tokenizer
    and the Hugging Face hub offline, so the client reaches nothing but this server.
  - All levels run in one interpreter of the client venv - each level is C(python -m sglang.bench_serving ARGS)
    run through C(runpy) exactly as C(python -m) runs it - so the client's imports are paid once, not per level.
    That interpreter starts before the module checks the server and starts the sampler, so its imports overlap
    them (and, with O(gated), whatever runs before the gate opens); it sends no request before the module gives
    the go. The equivalent command line of every level is returned.
  - Samples GPU telemetry at O(telemetry_interval_ms) during the levels, through NVML (C(nvidia-ml-py) in the
    client venv) where it answers, else C(nvidia-smi --query-gpu ... -lms); writes one CSV per level and
    summarises it per GPU (mean, p5, max of utilization, power against the enforced limit, SM clock against its
    maximum, memory, temperature, clock event reasons, ECC counters), the energy and joules per output token.
  - Diagnoses what limited the GPUs in each level (launch / latency bound, power bound, memory bound, host bound,
    idle, imbalanced) with the thresholds in O(diagnosis_thresholds); hardware or thermal slowdown, new ECC
    errors or an Xid in the kernel log during a level make it RV(state=invalid_gpu_state).
  - A level where any request failed is reported with its error texts and marked not ok; its figures are never a
    result. A level that passed (its output files present) is not run again (C(creates)-style resume); a failed
    one runs again.
  - Meant to run as an Ansible async job (C(async), C(poll=0)) watched by M(moesweep.sweep.sglang_bench_wait),
    it writes C(progress.json) in O(output_dir) at every level's start and end. One benchmark runs per
    O(output_dir) (C(bench.lock)); one that a controller interrupted mid-run left sending requests is stopped
    first (RV(stopped_run)).
  - Bad input (an empty or non-positive concurrency list, a zero length, fewer prompts than the concurrency, a
    tokenizer that does not exist, a client venv without sglang, nothing listening on the port, a server that is
    not ready) fails before any request, naming the fix (RV(state=error)).
  - The task fails unless RV(state=ok); the result is returned either way.
version_added: "0.1.0"
author: moesweep contributors (!UNKNOWN)
extends_documentation_fragment:
  - moesweep.sweep.attributes
  - moesweep.sweep.attributes.IDEMPOTENT
options:
  client_python:
    description: Interpreter of the benchmark client venv (sglang 0.5.9's bench_serving, no torch needed).
    type: path
    default: /opt/moesweep/venvs/client/bin/python
  host:
    description: Address of the server.
    type: str
    default: 127.0.0.1
  port:
    description: Server port.
    type: int
    default: 30000
  api_key:
    description: The server's C(--api-key); passed to the client as C(OPENAI_API_KEY) (never on a command line).
    type: str
  backend:
    description:
      - bench_serving's C(--backend) - V(sglang) is the native C(/generate), V(sglang-oai) C(/v1/completions),
        V(sglang-oai-chat) C(/v1/chat/completions).
    type: str
    default: sglang
    choices: [sglang, sglang-native, sglang-oai, sglang-oai-chat, vllm, vllm-chat]
  model:
    description: The served model name sent in requests. Empty asks C(/v1/models).
    type: str
  tokenizer:
    description: Local tokenizer directory. Empty resolves O(model_path) (a directory, or a hub id in the Hugging Face cache under O(hf_home)).
    type: path
  model_path:
    description: The server's C(--model-path), to find its tokenizer when O(tokenizer) is empty.
    type: str
  hf_home:
    description: Hugging Face home whose C(hub/) cache holds the model (the server user's C(~/.cache/huggingface)).
    type: path
  dataset_name:
    description: bench_serving's C(--dataset-name); V(random-ids) needs no dataset file.
    type: str
    default: random-ids
    choices: [random-ids, random, sharegpt]
  dataset_path:
    description: Local dataset file for V(random) and V(sharegpt) (never downloaded).
    type: path
  input_len:
    description: Input tokens per request. Must be greater than 0.
    type: int
    default: 1024
  output_len:
    description: Output tokens per request (requests ignore EOS, as bench_serving's default). Must be greater than 0.
    type: int
    default: 1024
  range_ratio:
    description: bench_serving's C(--random-range-ratio); 1.0 gives fixed lengths.
    type: float
    default: 1.0
  concurrency:
    description: Concurrency levels, in order.
    type: list
    elements: int
    default: [1, 8, 32, 64]
  num_prompts:
    description:
      - Prompts per level - one number for all, one per level (fixed counts, one round each), or empty - then each
        level is sized to O(precision), or with O(precision=0) runs max(O(prompts_per_concurrency) x level,
        O(min_prompts)).
    type: list
    elements: int
    default: []
  prompts_per_concurrency:
    description: Prompts per unit of concurrency when O(num_prompts) is empty.
    type: int
    default: 5
  min_prompts:
    description: Fewest prompts of a level when O(num_prompts) is empty.
    type: int
    default: 16
  warmup_requests:
    description: bench_serving's C(--warmup-requests) for the first level (the server stays warm for the others, which get 0).
    type: int
    default: 1
  seed:
    description: bench_serving's C(--seed).
    type: int
    default: 42
  level_timeout:
    description: Seconds one level may run before it is stopped and recorded as timed out. Must be greater than 0.
    type: float
    default: 3600
  output_dir:
    description: Directory on the target for the levels' output files (bench_serving JSONL, logs, telemetry CSVs, level summaries).
    type: path
    required: true
  rerun:
    description: Run levels again even when their output files are present.
    type: bool
    default: false
  gated:
    description:
      - Prepare everything that needs no server (the client's imports, the sampler's probe and first sample), then
        wait for a C(go) file in O(output_dir) before the first request. M(moesweep.sweep.sglang_smoke) writes it the
        moment its check passes (O(moesweep.sweep.sglang_smoke#module:gate_output_dir)), and
        M(moesweep.sweep.sglang_bench_wait) with O(moesweep.sweep.sglang_bench_wait#module:go=true) once it sees this
        job's progress. A C(stop) file
        instead, or O(gate_timeout) seconds without either, ends the job without a request.
      - The server is checked once the gate opens - something listens on the port (the unit's state goes into the
        message when not), the served model from C(/v1/models) - and not through C(/health), since the go comes after
        a smoke check that passed, which proved generation on every endpoint it checked. So a gated job may start before the server does; a sweep
        starts it before the restart, and the client's imports overlap the server's start.
      - The sglang_bench role starts the job gated before its smoke check (or takes the one its caller started), so
        that no request is sent before the smoke check passed.
    type: bool
    default: false
  job_key:
    description:
      - A name for this one start of the job, chosen by the caller and unique to it (the sglang_bench role gives
        each start a fresh one). It goes into the progress document, and the readers given the same key
        (M(moesweep.sweep.sglang_bench_wait) O(moesweep.sweep.sglang_bench_wait#module:job_key),
        M(moesweep.sweep.sglang_smoke) O(moesweep.sweep.sglang_smoke#module:gate_job_key)) take no other job's
        progress for this one's and open no other job's gate - not even a later job's in the same O(output_dir),
        which a reader left on the host by a controller that went away would otherwise open early.
    type: str
  gate_timeout:
    description:
      - Seconds a gated job waits for its C(go) file. Must be greater than 0. A job started before the server covers
        the server's start too.
    type: float
    default: 600
  controller_timeout:
    description:
      - Seconds without a M(moesweep.sweep.sglang_bench_wait) call (each one touches C(controller.alive) in
        O(output_dir)), once the gate opened, after which the job stops its client and ends - the controller that
        followed it is gone (a double Ctrl-C, a cancel through the API, a killed controller), so nobody would read it.
        The levels that ended are kept for the next run. V(0) never stops it.
    type: float
    default: 0
  telemetry:
    description: Sample GPU telemetry during the levels.
    type: bool
    default: true
  telemetry_interval_ms:
    description: Sampling interval (250 ms = 4 Hz).
    type: int
    default: 250
  nvidia_smi_path:
    description: nvidia-smi for the fallback sampler; found in E(PATH) when empty.
    type: path
  diagnosis_thresholds:
    description: Overrides of the diagnosis thresholds (module_utils diagnosis C(DEFAULT_THRESHOLDS)).
    type: dict
    default: {}
  unit:
    description: The systemd unit running the server (its state goes into errors; its journal is read when the server dies).
    type: str
    default: sglang.service
  precision:
    description:
      - The target relative half-width of each level's 95 % interval of its steady-state output throughput (0.02 =
        +-2 %), for levels whose O(num_prompts) is empty. A level runs a pilot round of max(level, O(pilot_prompts))
        requests, then rounds sized from what the rounds so far gave (module_utils bench_stats C(requests_needed)),
        until its interval reaches this or O(level_budget_s) has no room for another round. 0 runs the fixed counts
        (O(prompts_per_concurrency), O(min_prompts)) in one round.
      - The interval is batch means over the requests that ran while every slot was busy, widened by the GPU's
        step-time drift over the level's steady span (CV 0.3 %, correlated over 60 s, measured on an H100), which
        one cohort's requests cannot show (module_utils bench_stats).
    type: float
    default: 0.02
  level_budget_s:
    description: Seconds a sized level may spend on its rounds; a round that would not fit is not started (the level
      records the precision it reached). Must be greater than 0.
    type: float
    default: 900
  pilot_prompts:
    description: Fewest requests of a sized level's pilot round; the pilot runs whole cohorts (a multiple of the
      level, at least one request per slot).
    type: int
    default: 5
  repetitions:
    description: Fewest rounds of a sized level; more rounds pool into one interval (each round another seed).
    type: int
    default: 1
  peers:
    description:
      - The other nodes of a multi-node server, when this benchmark is rank 0's. Each serves sglang's dummy health
        server on the server's port (C(GET /health), a bare 200 without authentication); the module asks each every
        5 s while the levels run, and a node that fails 3 times in a row (refused, no answer) is lost - rank 0 would
        only wait in its next collective until sglang's C(--watchdog-timeout) - so the level that runs is stopped,
        the levels left are not run, and the result is RV(state=server_died) with the node in RV(crash).
    type: list
    elements: dict
    default: []
    suboptions:
      rank:
        description: The node's rank (C(--node-rank)).
        type: int
        required: true
      host:
        description: The node's inventory name, for messages.
        type: str
      address:
        description: The address the node serves on, reachable from this host.
        type: str
        required: true
      port:
        description: The server's port (C(--port)), on which the node's dummy health server listens.
        type: int
        required: true
attributes:
  check_mode:
    support: none
    details: It sends thousands of requests to a running server; nothing to predict without running it.
  diff_mode:
    support: none
  idempotent:
    support: partial
    details: A level that passed and whose output files are present is not run again unless O(rerun=true).
  platform:
    support: full
    platforms: posix
notes:
  - The client is C(sglang.bench_serving) of sglang 0.5.9 (pure Python, no torch); its JSON output and figures are those published sglang benchmarks report.
seealso:
  - module: moesweep.sweep.sglang_smoke
  - module: moesweep.sweep.sglang_bench_wait
"""

EXAMPLES = r"""
- name: Benchmark the running server at four concurrency levels with telemetry
  moesweep.sweep.sglang_bench:
    port: 8000
    model_path: lukealonso/GLM-5-NVFP4
    hf_home: /var/lib/sglang/.cache/huggingface
    concurrency: [1, 8, 32, 64]
    output_dir: /var/lib/moesweep/bench/flashinfer_cutlass
  register: bench

# As an async job whose levels the controller sees as they run: see moesweep.sweep.sglang_bench_wait's examples.
"""

RETURN = r"""
state:
  description:
    - V(ok) (every level ok), V(failed) (some level had failed requests or timed out), V(invalid_gpu_state)
      (a level ran on GPUs in a state that voids its figures), V(server_died) (the unit's run ended during the
      benchmark, or another node of a multi-node server was lost, O(peers); see RV(crash)), V(stopped) (asked to stop - a C(stop) file in O(output_dir), which
      M(moesweep.sweep.sglang_bench_wait) writes - it stopped after the level that ran; the levels that ended are
      kept for a resumed run), V(error) (bad input or no ready server, before any request).
  returned: always
  type: str
  choices: [ok, failed, invalid_gpu_state, server_died, stopped, error]
  sample: ok
levels:
  description:
    - One entry per level, in O(concurrency) order - C(concurrency), C(num_prompts), C(ok), C(reused), C(figures)
      (bench_serving's), C(completed), C(failed), C(errors), C(command), C(files), C(telemetry) (the summary of
      the level's steady part - its C(window) and C(samples) leave out the first two sampling intervals, which
      still average in the idle time before the requests), C(energy) (integrated over the whole window),
      C(joules_per_token), C(xid), C(samples) (the rows of the whole window), C(diagnosis) (from C(telemetry)),
      C(invalid), C(wall_s), C(rounds) (each bench_serving run of the level - C(num_prompts), C(completed),
      C(duration), C(output_throughput), C(ok); C(num_prompts) of the level is their sum, C(figures) the longest
      round's), C(stats) (module_utils bench_stats C(level_stats) - C(steady_output_throughput) with C(value),
      C(low), C(high), C(half_width), C(half_width_rel), C(half_width_batches) (the batch means' part),
      C(drift) (the GPU drift's part - C(cv), C(tau_s), C(span_s), C(se_rel)), C(batches), C(requests),
      C(steady_requests), C(rounds), C(method); C(latency) TTFT / ITL / TPOT C(n) and C(p50) / C(p90) / C(p99) each with C(value), C(low), C(high)
      in ms; C(precision_target), C(precision_reached), C(precise), C(sized), C(ended_by)).
  returned: always
  type: list
  elements: dict
tokenizer:
  description: The tokenizer directory used, and where it was found.
  returned: always
  type: dict
  contains:
    path:
      description: The tokenizer directory.
      type: str
      sample: /var/lib/sglang/.cache/huggingface/hub/models--lukealonso--GLM-5-NVFP4/snapshots/0123abcd
    found_in:
      description: Where it was found - V(given) (O(tokenizer)), the model directory, or the Hugging Face cache.
      type: str
      sample: the Hugging Face cache (refs/main)
sampler:
  description: The telemetry sampler used.
  returned: always
  type: dict
  contains:
    kind: {description: "V(nvml), V(nvidia-smi), or null when neither is available or O(telemetry=false).", type: str}
    argv: {description: Its command line., type: list, elements: str}
    probe: {description: What the NVML probe (or nvidia-smi's driver version) reported., type: dict}
model:
  description: The model name sent in requests.
  returned: always
  type: str
overhead_s_per_level:
  description: This module's wall time, less the time it waited at its gate (RV(gated_s)), minus bench_serving's own durations, per level run.
  returned: always
  type: float
  sample: 0.8
crash:
  description:
    - For RV(state=server_died), the classifier's verdict on the unit's current run; empty otherwise.
    - For a lost node (O(peers)) - C(state=crashed), C(cause=node_lost), C(node_rank), C(node_host), the node's last
      C(answers) and a C(decisive_line) that says what was seen.
  returned: always
  type: dict
elapsed:
  description: Seconds the module ran.
  returned: always
  type: float
gated_s:
  description: Seconds a gated job (O(gated=true)) waited for its C(go) file, ready to send its first request.
  returned: always
  type: float
moesweep_stop:
  description: True for RV(state=stopped) (a sweep records the point as interrupted).
  returned: when stopped
  type: bool
stopped_run:
  description: The pid of an earlier benchmark in O(output_dir) that was still running and was stopped, or null.
  returned: success
  type: int
progress_file:
  description: The progress document on the target (module_utils bench_progress).
  returned: success
  type: str
  sample: /var/lib/moesweep/bench/flashinfer_cutlass/progress.json
msg:
  description: One-line summary.
  returned: always
  type: str
"""

import json
import os
import select
import signal
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.moesweep.sweep.plugins.module_utils import (
    bench_progress,
    diagnosis,
    peer_watch,
    readiness,
    systemd,
    telemetry,
)
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_serving as bs
from ansible_collections.moesweep.sweep.plugins.module_utils import bench_stats as bst
from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               # any stray hub call stays on loopback and fails at once
               "HF_ENDPOINT": "http://127.0.0.1:9", "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}


def _read(path):
    with open(path) as fh:
        return fh.read()


def _write_text(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def private_dir(path):
    """Create ``path`` 0700 (its missing parents too) and make what an earlier run left there private: a benchmark's
    files name the model, the prompts and answers, and bench_serving's raw output held the server's settings. This
    module's umask (0077) makes every file it and its client write 0600."""
    missing = []
    probe = os.path.abspath(path)
    while not os.path.isdir(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
    os.chmod(path, 0o700)
    for root, dirs, names in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in names:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                os.chmod(full, 0o600)


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class Sampler:
    """The telemetry child process (NVML or nvidia-smi) writing one CSV for the whole benchmark."""

    def __init__(self, argv, out_csv, kind, to_file):
        self.kind = kind
        self.argv = argv
        self.out_csv = out_csv
        self._fh = None
        if to_file:
            self._fh = open(out_csv, "w")
            self.proc = subprocess.Popen(argv, stdout=self._fh, stderr=subprocess.DEVNULL,
                                         env=dict(os.environ, LC_ALL="C"))
        else:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=dict(os.environ, LC_ALL="C"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._fh:
            self._fh.close()


def sample_after(path, t_after, timeout, fields):
    """Wait until the sampler's CSV holds a sample taken after ``t_after`` (or ``timeout`` seconds passed); it is
    often there at the first look. Reads only the file's tail; a tail without the header or cut mid-line parses to
    no rows, which just waits on."""
    def sampled():
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 4096))
                tail = fh.read().decode("utf-8", "replace")
        except (IOError, OSError):
            tail = ""
        rows = telemetry.parse_samples(tail, fields=fields) if tail else []
        return any(r.get("t") is not None and r["t"] > t_after for r in rows)

    found, _seen, _elapsed = poll_until(sampled, bool, timeout, 0.05)
    return found


def start_sampler(module, p, out_csv):
    """NVML through the client venv where it answers, else nvidia-smi; None when neither exists."""
    interval = p["telemetry_interval_ms"]
    rc, out, _err = module.run_command(telemetry.nvml_probe_argv(p["client_python"]))
    probe = telemetry.parse_probe(out) if rc == 0 else None
    if probe:
        argv = telemetry.nvml_sampler_argv(p["client_python"], out_csv, interval)
        return Sampler(argv, out_csv, "nvml", to_file=False), probe
    smi = p["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not smi:
        return None, None
    rc, out, _err = module.run_command([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                       environ_update={"LC_ALL": "C"})
    driver = out.strip().splitlines()[0] if rc == 0 and out.strip() else None
    argv = telemetry.smi_sampler_argv(smi, interval, fields=telemetry.query_fields(driver))
    return Sampler(argv, out_csv, "nvidia-smi", to_file=True), {"driver_version": driver}


def kernel_log(module, since):
    """The kernel log since ``since`` (for Xid lines), or None when this host does not show it."""
    journalctl = module.get_bin_path("journalctl")
    if journalctl:
        rc, out, _err = module.run_command([journalctl, "-k", "-o", "short-unix", "--no-pager",
                                            "--since=@%d" % int(since)], environ_update={"LC_ALL": "C"})
        if rc == 0:
            return out, None
    dmesg = module.get_bin_path("dmesg")
    if dmesg:
        rc, out, _err = module.run_command([dmesg], environ_update={"LC_ALL": "C"})
        if rc == 0:
            try:
                boot = telemetry.boot_time(_read("/proc/stat"))
            except (OSError, IOError):
                boot = None
            return out, boot
    return None, None


def server_state(module, p, base, unit, health=True):
    """(ok, message): nothing listening, or a server that is not ready, is an error naming its state. ``health``:
    also its health endpoint (sglang's /health generates one token and answers after a second at the
    earliest); a gated job whose gate the passed smoke check opened asks only for the listener and the unit."""
    systemctl = module.get_bin_path("systemctl")
    props = systemd.Systemctl(module.run_command, systemctl).show(unit, readiness.SHOW_PROPS)[0] if systemctl else {}
    state = "unit %s is %s" % (unit, props.get("ActiveState", "unknown")) if props else "unit state unknown"
    try:
        with socket.create_connection((p["host"], p["port"]), timeout=5):
            pass
    except (OSError, socket.timeout) as exc:
        return False, ("nothing listens on %s:%d (%s; %s): start the server and wait for readiness "
                       "(moesweep.sweep.sglang_ready) before benchmarking" % (p["host"], p["port"], exc, state))
    if not health:
        return True, state
    code = readiness.probe_health(base + "/health", p["api_key"], readiness.DEFAULT_HEALTH_TIMEOUT)
    if code != 200:
        return False, ("the server on %s:%d is not ready: /health answered %s (%s); sglang answers 503 while "
                       "starting or when unhealthy" % (p["host"], p["port"], code, state))
    return True, state


def served_model(base, api_key):
    from urllib.request import Request, urlopen

    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    with urlopen(Request(base + "/v1/models", headers=headers), timeout=30) as resp:
        data = json.loads(resp.read().decode())
    return data["data"][0]["id"]


def start_driver(p, env, gated):
    """The driver over the client venv. ``gated``: it imports the client, then waits for a line on stdin before
    it reads its plan (the module checks the server and starts the sampler meanwhile)."""
    plan_path = os.path.join(p["output_dir"], "driver-plan.json")
    argv = [p["client_python"], "-c", bs.DRIVER_SOURCE, plan_path] + (["--wait"] if gated else [])
    # stdin stays open: a level sized to a precision target asks after each round whether to run another
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, cwd=p["output_dir"])


def stop_driver(proc):
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


STOPPED_ERROR = "not run: the sweep was asked to stop after the level before"
GONE_ERROR = "stopped: the controller stopped following the benchmark (no sglang_bench_wait call for %s s)"
STOPPED_BEFORE_ERROR = "not run: the sweep was asked to stop before the benchmark began"


def stop_process_tree(pid):
    """Stop a benchmark left running (its client interpreter and sampler first, so none is orphaned)."""
    for victim in list(reversed(bench_progress.descendants(pid))) + [pid]:
        try:
            os.kill(victim, signal.SIGKILL)
        except OSError:
            pass


def level_files(output_dir, concurrency):
    stem = os.path.join(output_dir, "c%d" % concurrency)
    return {"jsonl": stem + ".bench.jsonl", "log": stem + ".log", "summary": stem + ".level.json",
            "result": stem + ".result.json", "telemetry_csv": stem + ".telemetry.csv"}


def level_at_end(concurrency, num_prompts, parsed, error=None):
    """A level's entry the moment it ends, from its result line alone (``bs.parse_result``): written as its summary
    at once, so a level that finished is kept even when this job never gets to its end (the controller was killed
    and the next run's job stops this one; ``passed_levels``). The job's end replaces it with the full entry
    (telemetry, diagnosis); until then ``provisional`` says it has only bench_serving's figures."""
    entry = {"concurrency": concurrency, "num_prompts": num_prompts, "reused": False, "ok": False, "figures": {},
             "errors": [], "completed": None, "failed": None, "provisional": True}
    kept = ("figures", "args", "completed", "failed", "errors", "ok")
    entry.update({k: v for k, v in (parsed or {}).items() if k in kept})
    if error:
        entry["ok"] = False
        entry["errors"] = [{"error": error, "count": 1}] + list(entry["errors"])
    return entry


def passed_levels(output_dir, levels):
    """The levels an earlier run in ``output_dir`` passed ({concurrency: its summary}): kept, not run again. A
    failed level runs again, and so does one whose files are incomplete."""
    out = {}
    for c, _n in levels:
        files = level_files(output_dir, c)
        if not (os.path.isfile(files["summary"]) and os.path.isfile(files["jsonl"])):
            continue
        try:
            with open(files["summary"]) as fh:
                summary = json.load(fh)
        except ValueError:
            continue
        if isinstance(summary, dict) and summary.get("ok"):
            out[c] = dict(summary, reused=True)
    return out


def answer_round(proc, more):
    """Tell the driver, waiting after a round of a sized level, to run ``more`` requests (0: the level ends)."""
    try:
        proc.stdin.write((json.dumps({"more": int(more)}) + "\n").encode())
        proc.stdin.flush()
    except (IOError, OSError):
        pass  # it died: its end (or its silence) says so below


def run_levels(module, p, plan_levels, env, driver=None, on_level=None, on_round=None, peers=None):
    """Run the driver over the levels (``driver``: one started gated, still waiting for its plan); a level that
    outlasts level_timeout stops the driver, is recorded as timed out, and a new driver runs the next levels.
    Returns ({concurrency: {t_start, t_end, rc, error}}, the driver that said it is done, for the
    caller to stop once it took the sampler's last sample, or None). ``on_level(concurrency, event)`` is told of each level's start
    and end as they happen. When asked to stop (the output directory's stop file) the driver is stopped after
    the level that ends, and the levels left are recorded as not run. ``peers`` (a peer_watch.PeerWatch) watches
    the other nodes of a multi-node server: one that is lost stops the driver at once, the level that ran failed
    with that said and the levels left not run (rank 0 would only wait in its next collective)."""
    on_level = on_level or (lambda concurrency, event: None)
    bench_dir = bench_progress.BenchDir(p["output_dir"])
    outcomes = {}
    pending = list(plan_levels)
    while pending:
        _write_json(os.path.join(p["output_dir"], "driver-plan.json"), {"levels": pending})
        if driver is not None:
            proc, driver = driver, None
            try:
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
            except (IOError, OSError):
                pass  # it died importing the client: its output says why (below)
        else:
            proc = start_driver(p, env, gated=False)
        buf = b""
        current = None
        level_started = time.monotonic()
        timed_out = done = False
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                lines = buf.split(b"\n")
                buf = lines.pop()
                for event in bs.parse_events(b"\n".join(lines).decode("utf-8", "replace")):
                    if event.get("event") == "start":
                        current = event["concurrency"]
                        level_started = time.monotonic()
                        outcomes[current] = {"t_start": event["t"]}
                        on_level(current, event)
                    elif event.get("event") == "round":
                        try:
                            more = on_round(event["concurrency"], event) if on_round else 0
                        except (ValueError, KeyError, TypeError, ZeroDivisionError, IOError, OSError):
                            more = 0  # a round's file that cannot be read ends the level; its summary says why
                        answer_round(proc, more)
                    elif event.get("event") == "main" and event.get("concurrency") in outcomes:
                        outcomes[event["concurrency"]]["t_main"] = event["t"]
                    elif event.get("event") == "end":
                        outcomes.setdefault(event["concurrency"], {}).update(
                            t_end=event["t"], rc=event.get("rc"), error=event.get("error"), rounds=event.get("rounds"))
                        pending = [lv for lv in pending if lv["concurrency"] != event["concurrency"]]
                        current = None
                        on_level(event["concurrency"], event)
                        if pending and bench_dir.stop_asked():
                            proc.kill()
                            proc.wait()
                            for lv in pending:
                                outcomes[lv["concurrency"]] = {"rc": None, "t_start": None, "t_end": None,
                                                               "stopped": True, "not_run": True,
                                                               "error": STOPPED_ERROR}
                            return outcomes, None
                    elif event.get("event") == "done":
                        done = True
            if done:
                break  # every level ran: the caller takes the sampler's last sample, then stops the driver
            if bench_dir.controller_gone(p.get("controller_timeout"), time.time()):
                # nobody follows the job any more (a double Ctrl-C, an API cancel, a killed controller): it stops
                # rather than load the server unseen; the levels that ended keep their summaries (level_at_end)
                proc.kill()
                proc.wait()
                for lv in pending:
                    outcomes.setdefault(lv["concurrency"], {"t_start": None})
                    outcomes[lv["concurrency"]].update(rc=None, t_end=time.time(), stopped=True,
                                                       not_run=lv["concurrency"] != current, error=GONE_ERROR
                                                       % p["controller_timeout"])
                return outcomes, None
            lost = peers.check(time.monotonic()) if peers is not None else None
            if lost:
                proc.kill()
                proc.wait()
                for lv in pending:
                    outcomes.setdefault(lv["concurrency"], {"t_start": None})
                    outcomes[lv["concurrency"]].update(rc=None, t_end=time.time(), not_run=lv["concurrency"] != current,
                                                       error=lost["decisive_line"])
                return outcomes, None
            if current is not None and time.monotonic() - level_started > p["level_timeout"]:
                proc.kill()
                timed_out = True
                outcomes[current].update(t_end=time.time(), rc=None,
                                         error="level timed out after %.0f s (level_timeout)" % p["level_timeout"])
                pending = [lv for lv in pending if lv["concurrency"] != current]
                break
            if proc.poll() is not None and not ready:
                break
        if done:
            return outcomes, proc
        proc.wait()
        if not timed_out and pending and current is None and proc.returncode not in (0, None):
            # the driver itself failed before a level started (e.g. the client's imports)
            tail = buf.decode("utf-8", "replace")[-2000:]
            for lv in pending:
                outcomes[lv["concurrency"]] = {"rc": proc.returncode, "error": "the benchmark client failed to "
                                               "start: %s" % (tail.strip().splitlines() or ["?"])[-1],
                                               "t_start": None, "t_end": None}
            pending = []
        elif not timed_out and pending and current is not None:
            outcomes[current].update(t_end=time.time(), rc=proc.returncode,
                                     error="the benchmark client died during the level (rc %s)" % proc.returncode)
            pending = [lv for lv in pending if lv["concurrency"] != current]
        elif not timed_out and pending:
            # the driver ended without running the rest: nothing more can be learnt by retrying
            for lv in pending:
                outcomes.setdefault(lv["concurrency"], {"rc": proc.returncode, "error": "not run", "t_start": None,
                                                        "t_end": None})
            pending = []
    return outcomes, None


def sizing_end(lv, stats):
    """Why a level ran the requests it ran: V(fixed) (given prompt counts, or no precision target), V(precision)
    (its interval reached the target), V(budget) (its time budget left no room for the next round), V(incomplete)."""
    if not lv.get("sized"):
        return "fixed"
    asked = lv.get("asked") or []
    if stats.get("precise"):
        return "precision"
    return "budget" if asked and asked[-1] == 0 else "incomplete"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            client_python=dict(type="path", default="/opt/moesweep/venvs/client/bin/python"),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int", default=30000),
            api_key=dict(type="str", no_log=True),
            backend=dict(type="str", default="sglang",
                         choices=["sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat"]),
            model=dict(type="str"),
            tokenizer=dict(type="path"),
            model_path=dict(type="str"),
            hf_home=dict(type="path"),
            dataset_name=dict(type="str", default="random-ids", choices=["random-ids", "random", "sharegpt"]),
            dataset_path=dict(type="path"),
            input_len=dict(type="int", default=1024),
            output_len=dict(type="int", default=1024),
            range_ratio=dict(type="float", default=1.0),
            concurrency=dict(type="list", elements="int", default=[1, 8, 32, 64]),
            num_prompts=dict(type="list", elements="int", default=[]),
            prompts_per_concurrency=dict(type="int", default=5),
            min_prompts=dict(type="int", default=16),
            warmup_requests=dict(type="int", default=1),
            seed=dict(type="int", default=42),
            level_timeout=dict(type="float", default=3600.0),
            output_dir=dict(type="path", required=True),
            rerun=dict(type="bool", default=False),
            gated=dict(type="bool", default=False),
            gate_timeout=dict(type="float", default=600.0),
            controller_timeout=dict(type="float", default=0.0),
            job_key=dict(type="str", no_log=False),
            telemetry=dict(type="bool", default=True),
            telemetry_interval_ms=dict(type="int", default=250),
            nvidia_smi_path=dict(type="path"),
            diagnosis_thresholds=dict(type="dict", default={}),
            unit=dict(type="str", default="sglang.service"),
            precision=dict(type="float", default=bst.DEFAULT_PRECISION),
            level_budget_s=dict(type="float", default=900.0),
            pilot_prompts=dict(type="int", default=5),
            repetitions=dict(type="int", default=1),
            peers=dict(type="list", elements="dict", default=[], options=dict(
                rank=dict(type="int", required=True),
                host=dict(type="str"),
                address=dict(type="str", required=True),
                port=dict(type="int", required=True),
            )),
        ),
        supports_check_mode=False,
    )
    p = module.params
    os.umask(0o077)  # every file of the benchmark (this module's, the client's, the sampler's) is 0600
    started = time.monotonic()
    empty = dict(state="error", levels=[], tokenizer={}, sampler={}, model=None, overhead_s_per_level=None,
                 crash={}, elapsed=0.0, gated_s=0.0)

    driver = None  # started before the server checks: stopped when the module fails before it runs

    def fail(msg, **extra):
        stop_driver(driver)
        module.fail_json(msg=msg, **dict(empty, elapsed=round(time.monotonic() - started, 3), **extra))

    # ---- bad input, before any request
    try:
        counts = bs.prompt_counts(p["num_prompts"])
        sized = p["precision"] > 0 and counts is None
        if sized:  # each level's first round is its pilot; the rounds after it are sized from what it gave
            bs.plan_levels(p["concurrency"], None)  # the same checks of the levels
            counts = [bst.pilot_requests(c, p["pilot_prompts"]) for c in p["concurrency"]]
        levels = bs.plan_levels(p["concurrency"], counts, p["prompts_per_concurrency"], p["min_prompts"])
        bs.check_lengths(p["input_len"], p["output_len"], p["range_ratio"])
        if not 0.0 <= p["precision"] < 1.0:
            raise bs.BenchInputError("precision must be a fraction between 0 and 1 (0.02 = +-2 %%; 0 runs the fixed "
                                     "prompt counts), got %r" % (p["precision"],))
        if p["level_budget_s"] <= 0 or p["pilot_prompts"] < 1 or p["repetitions"] < 1:
            raise bs.BenchInputError("level_budget_s must be > 0, pilot_prompts and repetitions >= 1")
    except bs.BenchInputError as exc:
        fail("sglang_bench: %s" % exc)
    if (p["level_timeout"] <= 0 or p["telemetry_interval_ms"] <= 0 or p["warmup_requests"] < 0
            or p["gate_timeout"] <= 0):
        fail("sglang_bench: level_timeout, gate_timeout and telemetry_interval_ms must be > 0 and warmup_requests "
             ">= 0")
    try:
        diagnosis.check_thresholds(p["diagnosis_thresholds"])
    except ValueError as exc:
        fail("sglang_bench: diagnosis_thresholds: %s" % exc)
    unit, err = systemd.validate_unit(p["unit"])
    if err:
        fail(err)
    problem, tok, how = bs.host_inputs(module.run_command, p, lambda path: os.access(path, os.X_OK), os.path.isfile,
                                       os.path.isdir, os.listdir, _read)
    if problem:
        fail("sglang_bench: %s" % problem)
    host = "[%s]" % p["host"] if ":" in p["host"] and not p["host"].startswith("[") else p["host"]
    base = "http://%s:%d" % (host, p["port"])
    try:
        private_dir(p["output_dir"])
    except OSError as exc:
        fail("sglang_bench: cannot create output_dir %s: %s" % (p["output_dir"], exc))
    # ---- one benchmark in this directory: one that an interrupted controller left running is stopped first
    bench_dir = bench_progress.BenchDir(p["output_dir"])
    try:
        _lock, stopped = bench_dir.hold(stop_process_tree)
    except (RuntimeError, IOError, OSError) as exc:
        fail("sglang_bench: %s: stop it, or choose another output_dir" % exc)
    reused = {} if p["rerun"] else passed_levels(p["output_dir"], levels)
    bench_dir.clear_requests()  # an earlier run's, removed before this run's first progress document below
    progress = [bench_progress.new(levels, reused, os.getpid(), time.time(), key=p["job_key"])]

    def publish():
        try:
            bench_dir.write_progress(progress[0])
        except (IOError, OSError):
            pass  # progress is for watchers; the result is the truth

    def tell(concurrency, state, write=True, **fields):
        progress[0] = bench_progress.update(progress[0], concurrency, state, **fields)
        if write:
            publish()

    try:
        bench_dir.write_progress(progress[0])
    except (IOError, OSError) as exc:
        fail("sglang_bench: cannot write %s: %s" % (bench_dir.progress_path, exc))
    env = dict(os.environ, **OFFLINE_ENV)
    if p["api_key"]:
        env["OPENAI_API_KEY"] = p["api_key"]
    # The client's imports (seconds) overlap the server checks, the sampler's probe and its first sample; a gated
    # job may start before the server does (a sweep starts it before the restart): it checks the server once its
    # gate opens, which the smoke check that passed opens.
    driver = start_driver(p, env, gated=True) if len(reused) < len(levels) else None

    def check_server(health):
        """The served model name, once the server is checked (the module fails naming what is wrong)."""
        ok, state = server_state(module, p, base, unit, health=health)
        if not ok:
            fail("sglang_bench: %s" % state)
        try:
            return p["model"] or served_model(base, p["api_key"])
        except Exception as exc:  # noqa: BLE001 - reported, with the fix
            fail("sglang_bench: GET /v1/models failed (%s): set model to the served model name" % exc)

    model = p["model"] or None
    if not p["gated"]:
        model = check_server(health=True)

    # ---- plan the levels to run (their command lines below, once the served model is known)
    results, todo = {}, []
    first = True
    for c, n in levels:
        files = level_files(p["output_dir"], c)
        if c in reused:
            results[c] = reused[c]
            first = False
            continue
        for path in (files["jsonl"], files["summary"]):
            if os.path.exists(path):
                os.unlink(path)  # bench_serving appends: start each level's file afresh
        todo.append({"concurrency": c, "num_prompts": n, "log": files["log"], "files": files,
                     "warmup_requests": p["warmup_requests"] if first else 0, "sized": sized})
        first = False

    sampler, sampler_info, fields = None, None, None
    all_csv = os.path.join(p["output_dir"], "telemetry.csv")
    settle = max(0.5, 2 * p["telemetry_interval_ms"] / 1000.0)  # two sampling intervals
    exiting = None
    gated_s = 0.0
    # the other nodes of a multi-node server (their dummy health servers answer without the API key)
    watch = peer_watch.PeerWatch(p["peers"], lambda url, timeout: readiness.probe_health(url, None, timeout))
    last_end = [None]  # when the last level that ran ended (the driver's time stamp)
    try:
        if todo and p["telemetry"]:
            sampler, sampler_info = start_sampler(module, p, all_csv)
            if sampler and sampler.kind == "nvidia-smi":
                fields = telemetry.query_fields((sampler_info or {}).get("driver_version"))
            time.sleep(settle)  # a sample before the first request
        t_begin = time.time()
        by_level = dict((lv["concurrency"], lv) for lv in todo)

        def on_level(concurrency, event):
            if event.get("event") == "start":
                if concurrency in by_level:
                    by_level[concurrency]["t_level"] = event.get("t")
                tell(concurrency, "running", t_start=event.get("t"))
                return
            lv = by_level.get(concurrency)
            record = None
            if lv and os.path.isfile(lv["files"]["jsonl"]):
                record = bs.last_json_line(_read(lv["files"]["jsonl"]))
            parsed = bs.parse_result(record, lv["num_prompts"]) if record is not None and lv else {}
            ok = bool(parsed.get("ok")) and not event.get("error")
            if lv and ok:
                try:
                    _write_json(lv["files"]["summary"], level_at_end(concurrency, lv["num_prompts"], parsed))
                except (IOError, OSError):
                    pass  # the job's end writes it (or the level runs again)
            last_end[0] = event.get("t") or last_end[0]
            tell(concurrency, "done" if ok else "failed", t_end=event.get("t"), ok=ok,
                 figures=bench_progress.brief(parsed.get("figures")), error=event.get("error"))

        def on_round(concurrency, event):
            """How many more requests a sized level runs: none once its interval reached the precision target
            (and it ran its repetitions), or when its time budget has no room for one more cohort."""
            lv = by_level.get(concurrency)
            if not lv or not os.path.isfile(lv["files"]["jsonl"]):
                return 0
            rounds = bs.json_lines(_read(lv["files"]["jsonl"]))
            if not rounds or not all(bs.round_ok(r) for r in rounds):
                return 0
            thr = bst.steady_throughput(rounds, concurrency)
            more = bst.requests_needed(thr, concurrency, p["precision"], lv["num_prompts"])
            if len(rounds) < p["repetitions"]:
                more = max(more, lv["num_prompts"])
            steady_s = [d for d in (bst.round_requests(r, concurrency)[0] for r in rounds) for d in d]
            per_request = sum(d for _o, d in steady_s) / len(steady_s) if steady_s else None
            spent = (event.get("t") or time.time()) - (lv.get("t_level") or event.get("t") or time.time())
            more = bst.budget_requests(more, concurrency, per_request, p["level_budget_s"] - spent)
            lv.setdefault("asked", []).append(more)
            return more

        gate = "go"
        if todo and p["gated"]:
            gate_started = time.monotonic()
            gate = bench_dir.wait_gate(p["gate_timeout"])
            gated_s = time.monotonic() - gate_started
            t_begin = time.time()
            if gate == "go":
                # the server that passed the smoke check: something listens, and its model name (its health
                # endpoint's one-token generation is what the smoke check has just proven on every endpoint)
                model = check_server(health=False)
        for lv in todo:  # each level's command line, with the served model (when one was asked for)
            lv["args"] = bs.level_argv("python", base, model, tok, lv["concurrency"], lv["num_prompts"],
                                       lv["files"]["jsonl"], backend=p["backend"], dataset_name=p["dataset_name"],
                                       dataset_path=p["dataset_path"], input_len=p["input_len"],
                                       output_len=p["output_len"], range_ratio=p["range_ratio"],
                                       warmup_requests=lv["warmup_requests"], seed=p["seed"])[3:]
        if gate == "go":
            outcomes, exiting = run_levels(module, p, todo, env, driver, on_level, on_round,
                                           peers=watch) if todo else ({}, None)
        else:
            error = (STOPPED_BEFORE_ERROR if gate == "stop" else
                     "not run: nothing opened the benchmark's gate within gate_timeout (%.0f s): the smoke check did not "
                     "pass, or the controller went away" % p["gate_timeout"])
            outcomes = dict((lv["concurrency"], {"rc": None, "t_start": None, "t_end": None, "not_run": True,
                                                 "stopped": gate == "stop", "error": error}) for lv in todo)
    finally:
        if sampler:
            # a sample after the last response (often there already: the driver says it is done after that)
            sample_after(all_csv, last_end[0] or time.time(), settle, fields)
            sampler.stop()
        # the driver said it is done: every level's files are closed, and its interpreter's exit is not waited for
        stop_driver(exiting)
        stop_driver(driver)
    rows = []
    if sampler and os.path.isfile(all_csv):
        rows = telemetry.parse_samples(_read(all_csv), fields=fields)
    klog, boot = kernel_log(module, t_begin) if todo else (None, None)

    for lv in todo:
        c, n, files = lv["concurrency"], lv["num_prompts"], lv["files"]
        outcome = outcomes.get(c, {})
        rounds = bs.json_lines(_read(files["jsonl"])) if os.path.isfile(files["jsonl"]) else []
        # bench_serving's whole-run figures are those of the level's longest round (its pilot when that sufficed)
        record = max(reversed(rounds), key=lambda r: len(r.get("ttfts") or [])) if rounds else None
        log = _read(files["log"]) if os.path.isfile(files["log"]) else ""
        level = {"concurrency": c, "num_prompts": n, "reused": False,
                 "command": ["python", "-m", "sglang.bench_serving"] + lv["args"],
                 "files": files, "wall_s": None, "ok": False, "figures": {}, "errors": [], "completed": None,
                 "failed": None}
        if outcome.get("t_start") and outcome.get("t_end"):
            level["wall_s"] = round(outcome["t_end"] - outcome["t_start"], 3)
        if record is not None:
            level.update(bs.parse_result(record, len(record.get("ttfts") or []) or n))
            level["num_prompts"] = sum(len(r.get("ttfts") or []) for r in rounds) or n
            level["rounds"] = [{"num_prompts": len(r.get("ttfts") or []), "completed": r.get("completed"),
                                "duration": r.get("duration"), "output_throughput": r.get("output_throughput"),
                                "ok": bs.round_ok(r)} for r in rounds]
            if not all(x["ok"] for x in level["rounds"]):
                level["ok"] = False
                for r in rounds:
                    for e in bs.summarise_errors(r.get("errors")):
                        if e not in level["errors"]:
                            level["errors"].append(e)
            level["stats"] = bst.level_stats(rounds, c, p["precision"])
            level["stats"]["sized"] = bool(lv.get("sized"))
            level["stats"]["ended_by"] = sizing_end(lv, level["stats"])
            known = [p["api_key"]] if p["api_key"] else []
            _write_json(files["result"], dict(bs.trim_record(record, known), rounds=level["rounds"]))
            # the raw output holds the server's API key (server_info): redacted on the host as well
            _write_text(files["jsonl"], bs.redact_lines(_read(files["jsonl"]), known))
        else:
            level["errors"] = [{"error": e, "count": 1} for e in (bs.stdout_errors(log) or
                                                                  [outcome.get("error") or "no result line"])]
            level["failed"] = n
        if outcome.get("error") and outcome["error"] not in [e["error"] for e in level["errors"]]:
            level["errors"].insert(0, {"error": outcome["error"], "count": 1})
            level["ok"] = False
        # telemetry of the level's own window: bench_serving's duration from the start of its main run
        duration = level["figures"].get("duration")
        if len(rounds) > 1:  # the rounds' requests run from the first main run to the level's end
            duration = sum(r.get("duration") or 0.0 for r in rounds)
        t_start, t_end = bs.level_window(outcome.get("t_main"), outcome.get("t_end"), duration, outcome.get("t_start"))
        if rows and t_start and t_end:
            window = [r for r in rows if r.get("t") is not None and t_start <= r["t"] <= t_end]
            with open(files["telemetry_csv"], "w") as fh:
                fh.write("".join(_csv_lines(_read(all_csv), t_start - 1.0, t_end + 1.0, rows)))
            # what limited the GPUs, from the samples of the level alone; the energy over the whole window
            summary = telemetry.summarise(rows, *telemetry.steady_window(t_start, t_end,
                                                                         p["telemetry_interval_ms"] / 1000.0))
            energy = telemetry.energy(rows, t_start, t_end)
            xid = telemetry.xid_events(klog, since=t_start, boot=boot) if klog is not None else None
            level["telemetry"] = summary
            level["energy"] = energy
            level["joules_per_token"] = telemetry.joules_per_token(
                energy.get("energy_j"), level["figures"].get("total_output_tokens"))
            level["xid"] = xid
            level["diagnosis"] = diagnosis.diagnose(summary, p["diagnosis_thresholds"], xid)
            level["samples"] = len(window)
            if level["diagnosis"].get("invalid"):
                # HW / thermal slowdown, ECC errors or an Xid during the level: its figures are not results
                level["ok"] = False
                level["invalid"] = True
        else:
            level["telemetry"], level["diagnosis"] = None, diagnosis.diagnose(None, p["diagnosis_thresholds"])
        _write_json(files["summary"], level)
        results[c] = level
        if outcome.get("not_run"):
            continue  # stopped or cancelled before it began: it stays pending in the progress document
        tell(c, "done" if level["ok"] else "failed", write=False, ok=level["ok"],
             figures=bench_progress.brief(level["figures"]), t_end=outcome.get("t_end"))

    if todo:
        publish()  # the levels' final verdicts (telemetry can void a level), one version for them all
    ordered = [results[c] for c, _n in levels]
    run_now = [lv for lv in ordered if not lv.get("reused")]
    wall = time.monotonic() - started
    overhead = bs.overhead_per_level(wall - gated_s, [
        sum(r.get("duration") or 0.0 for r in lv["rounds"]) if lv.get("rounds") else lv["figures"].get("duration")
        for lv in run_now]) if run_now else 0.0
    crash = {}
    state = "ok"
    if any((lv.get("diagnosis") or {}).get("invalid") for lv in ordered):
        state = "invalid_gpu_state"
    if any(not lv["ok"] for lv in ordered):
        state = "failed" if state == "ok" else state
        journalctl, systemctl = module.get_bin_path("journalctl"), module.get_bin_path("systemctl")
        if journalctl and systemctl:
            entries, props = readiness.read_run(module.run_command, journalctl, systemctl, unit)
            if systemd.unit_gone(props):
                crash = readiness.judge_entries(entries, props)
                state = "server_died"
    if watch.lost and state != "server_died":
        # rank 0 still runs, waiting for the lost node: the point ended with that node, not with rank 0
        state, crash = "server_died", dict(watch.lost)
    if state == "failed" and any(o.get("stopped") for o in outcomes.values()):
        # asked to stop: the levels that ended are kept (a resumed run does not run them again), the rest did not run
        state = "stopped"
    msg = "%s: %s" % (state, ", ".join(
        "c%d %s" % (lv["concurrency"], ("%.1f tok/s" % lv["figures"]["output_throughput"])
                    if lv["ok"] and lv["figures"].get("output_throughput") is not None else "FAILED")
        for lv in ordered))
    if crash:
        msg += "; the server died: %s" % crash.get("decisive_line")
    if state == "stopped":
        msg += "; the sweep was asked to stop after the level that ran"
    result = dict(changed=bool(run_now), state=state, levels=ordered, tokenizer={"path": tok, "found_in": how},
                  sampler={"kind": sampler.kind if sampler else None, "argv": sampler.argv if sampler else None,
                           "probe": sampler_info},
                  model=model, overhead_s_per_level=overhead, crash=crash, elapsed=round(wall, 3),
                  gated_s=round(gated_s, 3), msg=msg,
                  stopped_run=stopped, progress_file=bench_dir.progress_path)
    if state == "stopped":
        result["moesweep_stop"] = True  # the sweep records the point as interrupted
    if state != "ok":
        module.fail_json(**result)
    module.exit_json(**result)


def _csv_lines(text, t_start, t_end, rows):
    """The lines of the whole-run CSV whose sample falls in the window (rows are parsed in file order)."""
    lines = [ln + "\n" for ln in text.splitlines() if ln.strip()]
    if len(lines) != len(rows):
        return lines  # header or partial line: keep the whole file rather than mis-cut it
    pairs = zip(lines, rows)  # noqa: B905 - lengths checked above; targets run Python 3.9 (no strict=)
    return [ln for ln, r in pairs if r.get("t") is not None and t_start <= r["t"] <= t_end]


if __name__ == "__main__":
    main()
