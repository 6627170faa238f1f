# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""A benchmark's output directory as the place where the benchmark job and its controller talk, and the progress
document it holds.

``sglang_bench`` (run as an Ansible async job) rewrites ``progress.json`` at every level's start and end;
``sglang_bench_wait`` long-polls it and returns as soon as it changed, so that the controller sees each level start
and finish while the benchmark runs (its ``until`` retries are ansible-runner ``runner_retry`` events). The document
only ever grows more complete: each version carries every level's state, so a reader that missed a version loses
nothing.

``BenchDir`` is the one owner of the directory's files - the progress document and the reader's ``.seen`` token,
the lock one benchmark holds, the stop request, the gate's go file, the controller's heartbeat - and of the waits on
them (all ``poll_until``). Every module that touches those files goes through it. The document's own functions
(``new``, ``update``, ``parse``, ``newer``, ``of_job``, ``brief``, ``seen_token``) and the process-tree helpers are
pure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import time

from ansible_collections.moesweep.sweep.plugins.module_utils.async_job import read_text
from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until

PROGRESS_FILE = "progress.json"
SEEN_SUFFIX = ".seen"  # the last version sglang_bench_wait returned
LOCK_FILE = "bench.lock"  # held by the running benchmark; holds its pid
STOP_FILE = "stop"  # asks the running benchmark to stop after the level that runs (sglang_bench_wait writes it)
GO_FILE = "go"  # opens a gated benchmark's gate (BenchDir.open_gate writes it once the job's own progress is there)
# touched by every sglang_bench_wait call: the controller still follows the job (BenchDir.controller_gone)
HEARTBEAT_FILE = "controller.alive"
GATE_POLL_S = 0.05
LOCK_POLL_S = 0.1

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


# ---- the output directory's files, one owner


class BenchDir:
    """A benchmark's output directory ``path``: the one reader and writer of the files the benchmark job
    (``sglang_bench``) and its controller's modules (``sglang_bench_wait``; ``sglang_smoke`` and ``sglang_accuracy``,
    which open the gate) exchange. The job holds the lock, clears the controller's requests, publishes its progress,
    waits at its gate and reads the stop request and the heartbeat; the controller's side reads the progress, keeps
    its ``.seen`` token, asks for a stop, opens the gate and beats."""

    def __init__(self, path):
        self.path = path
        self.progress_path = os.path.join(path, PROGRESS_FILE)
        self.seen_path = self.progress_path + SEEN_SUFFIX
        self.lock_path = os.path.join(path, LOCK_FILE)
        self.stop_path = os.path.join(path, STOP_FILE)
        self.go_path = os.path.join(path, GO_FILE)
        self.heartbeat_path = os.path.join(path, HEARTBEAT_FILE)

    # ---- the progress document and what its reader returned last

    def write_progress(self, doc):
        """Write the progress document atomically (a reader never sees a partial document)."""
        tmp = "%s.tmp.%d" % (self.progress_path, os.getpid())
        with open(tmp, "w") as fh:
            json.dump(doc, fh, sort_keys=True)
        os.replace(tmp, self.progress_path)

    def read_progress(self):
        """The progress document, or None (none yet, unreadable, or not a progress document)."""
        return parse(read_text(self.progress_path))

    def read_seen(self):
        """The ``seen_token`` of the version sglang_bench_wait returned last, or None."""
        return (read_text(self.seen_path) or "").strip() or None

    def write_seen(self, doc):
        """Remember ``doc`` as returned: Ansible templates a task's arguments once, not at every ``until`` retry, so
        the reader cannot carry it from one call to the next itself."""
        with open(self.seen_path, "w") as fh:
            fh.write(seen_token(doc))

    # ---- one benchmark per directory

    def hold(self, kill, clock=time.monotonic, sleep=time.sleep, wait_s=10.0):
        """Take the benchmark lock (flock), writing this process's pid into it. When another benchmark holds it - an
        earlier run whose controller was interrupted, still sending requests - ``kill(pid)`` stops that one first.
        Returns (the open lock file, the pid that was stopped or None); the lock lasts as long as the file."""
        fh = open(self.lock_path, "a+")
        asked = []  # the holder is asked once: its pid is in the file it holds

        def take():
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except (IOError, OSError):
                if not asked:
                    fh.seek(0)
                    try:
                        asked.append(int(fh.read().strip() or 0) or None)
                    except ValueError:
                        asked.append(None)
                    if asked[0]:
                        kill(asked[0])
                return False

        taken, _seen, _elapsed = poll_until(take, bool, wait_s, LOCK_POLL_S, clock, sleep)
        if not taken:
            fh.close()
            raise RuntimeError("another benchmark holds %s and did not stop within %.0f s" % (self.lock_path, wait_s))
        fh.seek(0)
        fh.truncate()
        fh.write("%d\n" % os.getpid())
        fh.flush()
        return fh, (asked[0] if asked else None)

    # ---- the controller's requests: stop, go (the gate), the heartbeat

    def clear_requests(self):
        """Remove the stop request, the go file and the heartbeat: they were an earlier run's. The job does it when it
        plans its levels, before its first progress document, so that a request for it is never removed."""
        for path in (self.stop_path, self.go_path, self.heartbeat_path):
            try:
                os.unlink(path)
            except OSError:
                pass

    def ask_stop(self, now):
        """Ask the benchmark to stop after the level that runs (a gated one that waits at its gate ends there)."""
        with open(self.stop_path, "w") as fh:
            fh.write("asked at %.3f\n" % now)

    def stop_asked(self):
        return os.path.exists(self.stop_path)

    def gate_open(self):
        return os.path.exists(self.go_path)

    def open_gate(self, results_file, now, key=None):
        """Open the gate of the gated job whose async results file is ``results_file`` (and whose key is ``key``, when
        it was given one), but only once the progress document here is that job's own: the job clears the go and stop
        files when it plans its levels, so a go file written before would be lost, and a later job's gate is never
        this job's to open. The go file is written once (it stays for the job's life). Returns whether the gate is
        open. The one opener: sglang_smoke and sglang_accuracy open it the moment their stage ends on the host,
        sglang_bench_wait (its ``go``) at each look."""
        try:
            job_started = os.stat(results_file).st_mtime
        except (IOError, OSError):
            return False
        if not of_job(self.read_progress(), job_started, key):
            return False
        if not self.gate_open():
            with open(self.go_path, "w") as fh:
                fh.write("gate opened at %.3f\n" % now)
        return True

    def gate(self):
        """What a gated benchmark waiting at its gate is told now: ``"stop"`` (a stop wins), ``"go"``, or None."""
        if self.stop_asked():
            return "stop"
        if self.gate_open():
            return "go"
        return None

    def wait_gate(self, timeout, clock=time.monotonic, sleep=time.sleep):
        """A gated benchmark's wait before its first request: ``"go"`` (the go file), ``"stop"`` (the stop file: asked
        to stop, or its smoke check failed) or ``"timeout"``."""
        _told, said, _elapsed = poll_until(self.gate, lambda s: s is not None, timeout, GATE_POLL_S, clock, sleep)
        return said or "timeout"

    def beat(self, now):
        """The controller follows the job: sglang_bench_wait touches the heartbeat at every call."""
        with open(self.heartbeat_path, "a"):
            pass
        os.utime(self.heartbeat_path, (now, now))

    def controller_gone(self, timeout, now, getmtime=os.path.getmtime):
        """Whether the controller stopped following a job whose gate opened: neither a sglang_bench_wait call (the
        heartbeat) nor the gate's opening (its go file) for ``timeout`` seconds. A double Ctrl-C, a cancel through the
        API or a killed controller leave the job running on the host with no one to read it; it stops itself then.
        Never before the gate opened (the controller's restart and smoke check come first), never with a ``timeout``
        of 0."""
        if not timeout:
            return False
        last = None
        for path in (self.heartbeat_path, self.go_path):
            try:
                mtime = getmtime(path)
            except OSError:
                continue
            last = mtime if last is None else max(last, mtime)
        return last is not None and now - last > float(timeout)
