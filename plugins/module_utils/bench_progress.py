# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The progress of a benchmark while it runs: one small JSON document in the benchmark's output directory.

``sglang_bench`` (run as an Ansible async job) rewrites it at every level's start and end; ``sglang_bench_wait``
long-polls it and returns as soon as it changed, so that the controller sees each level start and finish while the
benchmark runs (its ``until`` retries are ansible-runner ``runner_retry`` events). The document only ever grows more
complete: each version carries every level's state, so a reader that missed a version loses nothing.

Pure functions (no I/O) except the atomic writer and the reader.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os

PROGRESS_FILE = "progress.json"
SEEN_SUFFIX = ".seen"  # the last version sglang_bench_wait returned
LOCK_FILE = "bench.lock"  # held by the running benchmark; holds its pid
STOP_FILE = "stop"  # asks the running benchmark to stop after the level that runs (sglang_bench_wait writes it)
GO_FILE = "go"  # releases a gated benchmark (release_job writes it once the job's own progress is there)
# touched by every sglang_bench_wait call: the controller still follows the job (controller_gone)
HEARTBEAT_FILE = "controller.alive"
GATE_POLL_S = 0.05

STATES = ("pending", "running", "done", "failed", "reused")
# The figures a progress line shows; the full figures are in the module's result and the record.
BRIEF_FIGURES = ("output_throughput", "total_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms",
                 "median_itl_ms", "duration", "completed")


def brief(figures):
    return dict((k, figures[k]) for k in BRIEF_FIGURES if k in (figures or {}))


def new(levels, reused, pid, started, key=None):
    """The first version: ``levels`` [(concurrency, num_prompts)], ``reused`` {concurrency: an earlier run's level
    summary} (those levels are not run again), ``key`` the job's key (sglang_bench's job_key: its caller's name
    for this one start, which its readers match; None when it was given none)."""
    out = []
    for c, n in levels:
        entry = {"concurrency": c, "num_prompts": n, "state": "pending"}
        if c in reused:
            entry.update(state="reused", ok=bool(reused[c].get("ok")), figures=brief(reused[c].get("figures")))
        out.append(entry)
    doc = {"version": 1, "pid": pid, "started": started, "levels": out}
    if key:
        doc["job_key"] = key
    return doc


def update(doc, concurrency, state, **fields):
    """A new version with one level's state changed (``fields``: t_start, t_end, ok, figures, error)."""
    if state not in STATES:
        raise ValueError("unknown level state %r" % (state,))
    levels = []
    for entry in doc.get("levels") or []:
        if entry.get("concurrency") == concurrency:
            entry = dict(entry, state=state, **fields)
        levels.append(entry)
    return dict(doc, version=int(doc.get("version") or 0) + 1, levels=levels)


def parse(text):
    """A progress document from its file's text; None when it is not one (absent, half-written by a foreign
    writer, or another file)."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("levels"), list):
        return None
    return doc


def seen_token(doc):
    """What a reader remembers of the version it returned: the run (its start) and the version."""
    return "%r %d" % (doc.get("started"), int(doc.get("version") or 0))


def newer(doc, seen):
    """Whether ``doc`` is a version the reader has not returned yet (``seen``: the last seen_token, or None); a
    document of another run than the one seen is new."""
    if doc is None:
        return False
    if not seen:
        return True
    started, _sep, version = str(seen).rpartition(" ")
    if started != repr(doc.get("started")):
        return True
    try:
        return int(doc.get("version") or 0) > int(version)
    except ValueError:
        return True


def of_job(doc, job_started, key=None):
    """Whether ``doc`` was written by the job that started at ``job_started`` (its results file's first write).
    With the job's ``key`` (sglang_bench's job_key) only a document that carries that key is: neither one an
    earlier run left in the directory nor one of a later job there (a reader whose controller went away can still
    run on the host for a while, and a new job then holds the directory). Without a key the document is the job's
    when it started after the job did, which a later job's document does too."""
    if doc is None:
        return False
    if key:
        return doc.get("job_key") == key
    try:
        return float(doc.get("started")) >= float(job_started) - 0.1
    except (TypeError, ValueError):
        return False


def beat(output_dir, now):
    """The controller follows the job: sglang_bench_wait touches the heartbeat at every call."""
    path = os.path.join(output_dir, HEARTBEAT_FILE)
    with open(path, "a"):
        pass
    os.utime(path, (now, now))


def controller_gone(output_dir, timeout, now, getmtime=os.path.getmtime):
    """Whether the controller stopped following a released job: neither a sglang_bench_wait call (the heartbeat) nor
    the gate's opening (its go file) for ``timeout`` seconds. A double Ctrl-C, a cancel through the API or a killed
    controller leave the job running on the host with no one to read it; it stops itself then. Never before the
    gate opened (the controller's restart and smoke check come first), never with a ``timeout`` of 0."""
    if not timeout:
        return False
    last = None
    for name in (HEARTBEAT_FILE, GO_FILE):
        try:
            mtime = getmtime(os.path.join(output_dir, name))
        except OSError:
            continue
        last = mtime if last is None else max(last, mtime)
    return last is not None and now - last > float(timeout)


def release(output_dir, now):
    """Open a gated job's gate: its go file, written once (it stays for the job's life)."""
    go = os.path.join(output_dir, GO_FILE)
    if not os.path.exists(go):
        with open(go, "w") as fh:
            fh.write("released at %.3f\n" % now)


def release_job(output_dir, results_file, now, key=None):
    """Open the gate of the gated job whose async results file is ``results_file`` (and whose key is ``key``, when
    it was given one), but only once the progress document in ``output_dir`` is that job's own: the job clears its
    directory's go and stop files when it plans its levels, so a go file written before would be lost, and a later
    job's gate is never this job's to open. Returns whether the gate is open. sglang_smoke calls it the moment its
    check passed on the host (sglang_bench_wait, which releases too, reads the document itself)."""
    try:
        job_started = os.stat(results_file).st_mtime
        with open(os.path.join(output_dir, PROGRESS_FILE)) as fh:
            doc = parse(fh.read())
    except (IOError, OSError):
        return False
    if not of_job(doc, job_started, key):
        return False
    release(output_dir, now)
    return True


def write(path, doc):
    """Write atomically (a reader never sees a partial document)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as fh:
        json.dump(doc, fh, sort_keys=True)
    os.replace(tmp, path)


# ---- one benchmark per output directory: a run left behind by a controller that went away is stopped


def stat_ppid(stat_text):
    """The parent pid from /proc/<pid>/stat (the command name, in parentheses, may itself hold spaces and ')')."""
    try:
        return int(stat_text.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def descendants(pid, proc_root="/proc"):
    """Every process below ``pid`` (the benchmark's client interpreter and telemetry sampler), deepest last."""
    children = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, name, "stat")) as fh:
                ppid = stat_ppid(fh.read())
        except (IOError, OSError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            out.append(child)
            todo.append(child)
    return out


def hold(path, kill, sleep, wait_s=10.0):
    """Take the benchmark lock ``path`` (flock), writing this process's pid into it. When another benchmark holds
    it - an earlier run whose controller was interrupted, still sending requests - ``kill(pid)`` stops that one
    first. Returns (the open lock file, the pid that was stopped or None); the lock lasts as long as the file."""
    fh = open(path, "a+")
    stopped, asked, waited = None, False, 0.0
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except (IOError, OSError):
            if not asked:  # once: the holder's pid is in the file it holds
                asked = True
                fh.seek(0)
                try:
                    stopped = int(fh.read().strip() or 0) or None
                except ValueError:
                    stopped = None
                if stopped:
                    kill(stopped)
            if waited >= wait_s:
                fh.close()
                msg = "another benchmark holds %s and did not stop within %.0f s" % (path, wait_s)
                raise RuntimeError(msg) from None
            sleep(0.1)
            waited += 0.1
    fh.seek(0)
    fh.truncate()
    fh.write("%d\n" % os.getpid())
    fh.flush()
    return fh, stopped


def wait_gate(output_dir, timeout, clock, sleep):
    """A gated benchmark's wait before its first request: ``"go"`` (the go file), ``"stop"`` (the stop file: asked
    to stop, or its smoke check failed) or ``"timeout"``."""
    go, stop = os.path.join(output_dir, GO_FILE), os.path.join(output_dir, STOP_FILE)
    deadline = clock() + timeout
    while True:
        if os.path.exists(stop):
            return "stop"
        if os.path.exists(go):
            return "go"
        if clock() >= deadline:
            return "timeout"
        sleep(GATE_POLL_S)
