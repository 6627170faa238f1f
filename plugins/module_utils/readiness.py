# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The readiness engine: follow one run of a systemd unit's journal, probe the HTTP health endpoint
and the unit's state, and decide ready / crashed / hang / timeout (after kubernetes.core's waiter:
pure predicates on a monotonic clock, sources injected so tests drive it with recorded logs).

One wait idiom for the collection: ``Waiter`` for readiness, ``poll_until`` (module_utils poll, exported here
too) for bounded polls of simpler conditions (GPU and port release; the benchmark's lock, gate and progress). Both
take the clock and the sleep as arguments. ``judge_run``
is a module's whole wait for one run of the unit (the prober, the journal, the waiter, the verdict's
message), with its options ``wait_spec``: the one wait of ``sglang_ready`` and ``sglang_restart``.

Which log lines belong to the server run being judged is decided once, here: the unit's
``InvocationID`` (systemd gives every start of a unit a new one and journald stamps each line the
unit's processes write with it as ``_SYSTEMD_INVOCATION_ID``; systemd.exec(5), systemd.journal-fields(7)).
A previous run's shutdown lines can never be read as the new run's, and a unit found running is
judged on everything its current run wrote, so its real phase is known.

Stdlib only; runs on the target (Python 3.9+).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import select
import socket
import subprocess
import threading
import time

try:  # Python 3
    from urllib.error import HTTPError, URLError
    from urllib.request import Request, urlopen
except ImportError:  # pragma: no cover - Python 2 is not supported on targets
    raise

from ansible_collections.moesweep.sweep.plugins.module_utils.poll import poll_until  # noqa: F401 - its callers' name
from ansible_collections.moesweep.sweep.plugins.module_utils.sglang_log import SglangLogClassifier
from ansible_collections.moesweep.sweep.plugins.module_utils.systemd import Systemctl, unit_gone, unit_running

# The unit's properties the judge reads (module_utils/systemd.py reads them).
SHOW_PROPS = ("ActiveState", "SubState", "ExecMainCode", "ExecMainStatus", "NRestarts", "MainPID",
              "InvocationID", "ExecMainStartTimestampMonotonic")
# Seconds to keep reading after a crash marker, so the traceback and its cause are complete.
CRASH_GRACE = 0.5
# sglang's /health: 503 at once while starting; once up it sleeps 1 s, then waits up to
# SGLANG_HEALTH_CHECK_TIMEOUT (default 20 s) for a 1-token generation before answering 200 or 503
# (python/sglang/srt/entrypoints/http_server.py, health_generate and HEALTH_CHECK_TIMEOUT, v0.5.9 and
# v0.5.23). A probe must outlast that, so probes run in a thread and never block the journal watch.
SGLANG_HEALTH_CHECK_TIMEOUT = 20.0
DEFAULT_HEALTH_TIMEOUT = SGLANG_HEALTH_CHECK_TIMEOUT + 5.0
STATES = ("ready", "crashed", "hang", "timeout", "stopped")
# What a multi-node server's rank >= 1 serves: sglang's dummy health server, a bare 200 on each (0.5.9
# srt/utils/common.py:2664-2677 launch_dummy_health_check_server; started by srt/entrypoints/engine.py:1052-1054
# once that node's schedulers are ready). No API, no tokenizer: its readiness is its journal and this endpoint.
FOLLOWER_HEALTH_PATHS = ("/ping", "/health", "/health_generate")


def compress(seq):
    """[a, a, b] -> [{code: a, count: 2}, {code: b, count: 1}]"""
    out = []
    for code in seq:
        if out and out[-1]["code"] == code:
            out[-1]["count"] += 1
        else:
            out.append({"code": code, "count": 1})
    return out


def journal_entry(raw):
    """One ``journalctl -o json`` line -> (message text, wall-clock seconds or None), or None."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    msg = entry.get("MESSAGE")
    if isinstance(msg, list):  # journald stores messages that are not UTF-8 as a byte array
        msg = bytes(b & 0xFF for b in msg).decode("utf-8", "replace")
    if msg is None:
        return None
    wall = None
    stamp = entry.get("__REALTIME_TIMESTAMP")
    if stamp is not None:
        try:
            wall = int(stamp) / 1e6
        except (TypeError, ValueError):
            wall = None
    return str(msg), wall


def journal_argv(journalctl, invocation_id, follow=True, after_cursor=None):
    """The command that reads the lines one run of a unit wrote (``_SYSTEMD_INVOCATION_ID`` match): all of
    them, or those after ``after_cursor``; ``follow`` keeps reading as new ones arrive."""
    argv = [journalctl, "_SYSTEMD_INVOCATION_ID=%s" % invocation_id, "-o", "json", "--no-pager",
            "--output-fields=MESSAGE,__REALTIME_TIMESTAMP"]
    if after_cursor:
        argv.append("--after-cursor=%s" % after_cursor)
    if follow:
        argv.append("--follow")
        if not after_cursor:
            # --follow alone starts with the last 10 lines only (journalctl(1) --lines); --no-tail shows all.
            argv.append("--no-tail")
    return argv


def journal_cursor(raw):
    """The ``__CURSOR`` of one ``journalctl -o json`` line (always present in that output), or None."""
    try:
        return json.loads(raw).get("__CURSOR")
    except ValueError:
        return None


def read_history(run_command, journalctl, invocation_id):
    """Every line the run wrote so far, read to the end before anything is judged (a follower delivers a long
    history in chunks, and a verdict on its first chunk would be one on a part of the story).
    Returns (entries, cursor of the last entry or None)."""
    rc, out, _err = run_command(journal_argv(journalctl, invocation_id, follow=False),
                                environ_update={"LC_ALL": "C", "SYSTEMD_PAGER": ""})
    entries, cursor = [], None
    for raw in out.splitlines() if rc == 0 else []:
        entry = journal_entry(raw)
        if entry is not None:
            entries.append(entry)
            cursor = journal_cursor(raw) or cursor
    return entries, cursor


class JournalFollower:
    """``journalctl _SYSTEMD_INVOCATION_ID=ID -o json --follow`` as a child, read without blocking."""

    def __init__(self, journalctl, invocation_id, popen=None, after_cursor=None, history=None):
        env = dict(os.environ, LC_ALL="C", SYSTEMD_PAGER="")
        self.proc = (popen or subprocess.Popen)(journal_argv(journalctl, invocation_id, after_cursor=after_cursor),
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._history = list(history or [])
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self._buf = b""

    def wait_readable(self, timeout):
        try:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        except (OSError, ValueError):
            return False
        return bool(ready)

    def read_entries(self):
        """Every complete entry available now, as (message, wall-clock seconds or None)."""
        if self._history:
            out, self._history = self._history, []
            return out + self.read_entries()
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
            if not chunk:
                break
            self._buf += chunk
        lines = self._buf.split(b"\n")
        self._buf = lines.pop()
        out = []
        for raw in lines:
            if raw.strip():
                entry = journal_entry(raw.decode("utf-8", "replace"))
                if entry is not None:
                    out.append(entry)
        return out

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def probe_health(url, api_key, timeout):
    """One GET: the HTTP status code, or 'refused' / 'timeout' / 'error'."""
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    try:
        resp = urlopen(Request(url, headers=headers), timeout=timeout)
        code = resp.getcode()
        resp.close()
        return code
    except HTTPError as exc:
        return exc.code
    except URLError as exc:
        reason = getattr(exc, "reason", None)
        if isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower():
            return "refused"
        if isinstance(reason, socket.timeout):
            return "timeout"
        return "error"
    except ConnectionRefusedError:
        return "refused"
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (OSError, ValueError):
        return "error"


class HealthProber:
    """Probe the health endpoint back to back in a daemon thread. ``__call__`` returns the next
    finished probe's result, or None when none finished since the last call: the waiter never blocks
    on a slow ``/health`` (a real sglang one takes >= 1 s, up to ~20 s)."""

    def __init__(self, url, api_key=None, timeout=DEFAULT_HEALTH_TIMEOUT, interval=0.1, probe=probe_health):
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.interval = interval
        self.probe = probe
        self._results = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-prober")
        self._thread.daemon = True

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            started = time.monotonic()
            code = self.probe(self.url, self.api_key, self.timeout)
            with self._lock:
                self._results.append(code)
            rest = self.interval - (time.monotonic() - started)
            if rest > 0:
                self._stop.wait(rest)

    def __call__(self):
        with self._lock:
            return self._results.pop(0) if self._results else None

    def stop(self):
        self._stop.set()


class Waiter:
    """Readiness as pure predicates over what was observed, on a monotonic clock.

    journal: ``read_entries()`` -> [(message, wall seconds or None)] (or ``read_messages()`` -> [message]),
    ``wait_readable(timeout)``; health: () -> code / 'refused' / 'timeout' / 'error' / None (no new
    result); unit_state: () -> systemctl show properties.

    ``confirm_with_health``: the unit was already running when the wait began (its whole run is
    read from the journal). A ready line in its history is then not enough: the server must still
    answer the health endpoint, else it is up but not serving.
    """

    def __init__(self, journal, health, unit_state, clock=time.monotonic, timeout=900.0, stall_timeout=300.0,
                 poll_interval=0.1, confirm_with_health=False, wall_clock=time.time, health_timeout=None):
        self.journal = journal
        self.health = health
        self.unit_state = unit_state
        self.clock = clock
        self.wall_clock = wall_clock
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.poll_interval = poll_interval
        self.confirm_with_health = confirm_with_health
        self.health_timeout = health_timeout or DEFAULT_HEALTH_TIMEOUT
        self.classifier = SglangLogClassifier()
        self.health_seen = []
        self.last_unit = {}
        self.lines = 0
        self.not_serving = None  # evidence when a ready server no longer answers

    def _entries(self):
        if hasattr(self.journal, "read_entries"):
            return self.journal.read_entries()
        return [(m, None) for m in self.journal.read_messages()]

    def _drain(self, offset):
        wall_now = self.wall_clock()
        for msg, wall in self._entries():
            self.lines += 1
            # A line from the past (a running unit's history) is placed at its own time, so that the
            # stall check sees how long ago the server last made progress.
            t = offset if wall is None else offset - max(0.0, wall_now - wall)
            self.classifier.feed(msg, t=t)

    def _stalled(self, offset):
        if self.classifier.last_progress is None:
            return offset >= self.stall_timeout
        return self.classifier.stalled(offset, self.stall_timeout)

    def run(self):
        start = self.clock()
        last_poll = None
        crash_seen_at = None
        ready_seen_at = None
        while True:
            now = self.clock()
            self._drain(now - start)
            c = self.classifier
            if c.state == "crashed":
                if crash_seen_at is None:
                    crash_seen_at = now
                if c.crash_settled or now - crash_seen_at >= CRASH_GRACE:
                    return "crashed", now - start
            elif c.state == "ready" and c.ready_seen:
                if not self.confirm_with_health:
                    return "ready", now - start
                if ready_seen_at is None:
                    ready_seen_at = now
            if last_poll is None or now - last_poll >= self.poll_interval * 0.999:
                last_poll = now
                code = self.health()
                if code is not None:
                    self.health_seen.append(code)
                if code == 200 and c.state != "crashed":
                    self._drain(self.clock() - start)
                    if self.classifier.state != "crashed":
                        return "ready", self.clock() - start
                if code not in (None, 200) and ready_seen_at is not None:
                    # It was ready, the unit is still there, and the health endpoint says no.
                    self.not_serving = code
                    return ("crashed" if code == "refused" else "hang"), self.clock() - start
                props = self.unit_state()
                if props:
                    self.last_unit = props
                if props and unit_gone(props):
                    # The process is gone: read what it wrote last, then decide from the log and systemd.
                    settle = self.clock()
                    while self.clock() - settle < CRASH_GRACE:
                        if self.journal.wait_readable(0.05):
                            self._drain(self.clock() - start)
                        elif c.crash_settled:
                            break
                    self.classifier.finish()
                    return "crashed", self.clock() - start
            if ready_seen_at is not None and now - ready_seen_at >= self.health_timeout:
                self.not_serving = "no answer"
                return "hang", now - start
            if c.state == "starting" and self._stalled(now - start):
                return "hang", now - start
            if now - start >= self.timeout:
                return "timeout", now - start
            wait = self.poll_interval - (self.clock() - last_poll)
            self.journal.wait_readable(min(max(wait, 0.001), self.poll_interval))

    def result(self, state, elapsed):
        r = self.classifier.result()
        out = {
            "state": state,
            "cause": r["cause"],
            "phase": r["phase"],
            "after_ready": r["after_ready"],
            "decisive_line": r["decisive_line"],
            "traceback": r["traceback"],
            "timeline": r["timeline"],
            "elapsed": round(elapsed, 3),
            "health_sequence": compress(self.health_seen),
            "unit_state": self.last_unit,
            "lines_read": self.lines,
        }
        if state == "ready":
            out.update(cause=None, after_ready=False, traceback=None)
            if not r["decisive_line"]:
                out["decisive_line"] = "health endpoint answered 200"
        elif self.not_serving is not None:
            # Up but not serving: the log says ready, the health endpoint does not.
            out.update(phase="serving", after_ready=True, traceback=None,
                       cause="other" if state == "crashed" else None)
            if self.not_serving == "refused":
                out["decisive_line"] = ("health endpoint refused the connection while the unit is %s: the "
                                        "HTTP server is gone" % self.last_unit.get("ActiveState", "running"))
            elif self.not_serving == "no answer":
                out["decisive_line"] = ("health endpoint gave no answer within %.0f s while the unit is %s"
                                        % (self.health_timeout, self.last_unit.get("ActiveState", "running")))
            else:
                out["decisive_line"] = "health endpoint answered %s after the server had been ready" % (
                    self.not_serving,)
        elif state == "crashed" and r["state"] != "crashed":
            # systemd says the process is gone but the log had no crash marker: killed or plain exit.
            code = str(self.last_unit.get("ExecMainCode", ""))
            status = str(self.last_unit.get("ExecMainStatus", ""))
            out["cause"] = "killed" if code in ("2", "3") else "other"
            out["after_ready"] = r["state"] == "ready"
            out["decisive_line"] = "unit %s: ExecMainCode=%s ExecMainStatus=%s" % (
                self.last_unit.get("ActiveState", "?"), code, status)
        elif state in ("hang", "timeout"):
            out.update(cause=None, after_ready=False)
        return out


def judge_entries(entries, props):
    """Classify a run's whole journal after the fact (the smoke and benchmark stages, when requests fail):
    ``entries`` [(message, wall)] of one InvocationID, ``props`` the unit's systemctl show properties.
    Returns the classifier's result plus ``unit_gone``; a gone unit's trailing traceback counts as its crash."""
    classifier = SglangLogClassifier()
    for msg, _wall in entries:
        classifier.feed(msg)
    gone = unit_gone(props or {})
    if gone:
        classifier.finish()
    out = classifier.result()
    out["unit_gone"] = gone
    out["unit_state"] = dict(props or {})
    if gone and out["state"] != "crashed":
        out.update(state="crashed", cause="killed" if str(props.get("ExecMainCode")) in ("2", "3") else "other",
                   decisive_line="unit %s: ExecMainCode=%s ExecMainStatus=%s" % (
                       props.get("ActiveState"), props.get("ExecMainCode"), props.get("ExecMainStatus")))
    return out


def read_run(run_command, journalctl, systemctl, unit):
    """(entries of the unit's current run, its systemctl show properties), with the caller's ``run_command``
    (AnsibleModule.run_command): used after the fact, when a stage finds the server gone."""
    props, _failed = Systemctl(run_command, systemctl).show(unit, SHOW_PROPS)
    entries = []
    invocation = props.get("InvocationID")
    if invocation:
        rc, out, _err = run_command(journal_argv(journalctl, invocation, follow=False),
                                    environ_update={"LC_ALL": "C", "SYSTEMD_PAGER": ""})
        if rc == 0:
            for raw in out.splitlines():
                entry = journal_entry(raw)
                if entry is not None:
                    entries.append(entry)
    return entries, props


# ------------------------------------------------------------------------------------------ a module's wait
# The options of a wait for one run of a unit, shared by the modules that wait (sglang_ready, sglang_restart):
# defined once here and documented once (the doc fragment moesweep.sweep.readiness).
def wait_spec():
    """A fresh copy of the wait's argument spec, to merge into a module's."""
    return dict(
        host=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        health_path=dict(type="str", default="/health"),
        health_timeout=dict(type="float", default=DEFAULT_HEALTH_TIMEOUT),
        timeout=dict(type="float", default=900.0),
        stall_timeout=dict(type="float", default=300.0),
        poll_interval=dict(type="float", default=0.1),
        api_key=dict(type="str", no_log=True),
        fail_on_error=dict(type="bool", default=True),
        node_rank=dict(type="int", default=0),
    )


# The unit's properties a wait reads and returns as ``unit_state``.
UNIT_PROPS = ("ActiveState", "SubState", "ExecMainCode", "ExecMainStatus", "NRestarts", "MainPID", "InvocationID")


def no_verdict(node_rank):
    """The result of a wait that did not happen (bad input, check mode, a failure before it): every key a wait
    returns, none of them a verdict."""
    return dict(state=None, cause=None, phase=None, after_ready=False, decisive_line=None, traceback=None,
                timeline={}, elapsed=0.0, health_sequence=[], unit_state={}, running=False, lines_read=0,
                invocation_id=None, node_rank=node_rank)


def bad_wait_input(p):
    """The message for wait options (``wait_spec``'s, as a module's params) it cannot run with, or None."""
    for name in ("timeout", "stall_timeout", "poll_interval", "health_timeout"):
        if p[name] is None or p[name] <= 0:
            return "%s must be greater than 0, got %s" % (name, p[name])
    if not 0 < p["port"] < 65536:
        return "port must be 1-65535, got %s" % p["port"]
    if p["node_rank"] < 0:
        return "node_rank must be >= 0, got %s" % p["node_rank"]
    return None


def health_url(host, port, path, node_rank=0):
    """The URL the wait probes: ``path`` on ``host``:``port`` (an IPv6 address bracketed); a rank >= 1 of a node group
    serves nothing but its dummy health server's paths, so any other path falls back to ``/health`` there."""
    path = path if path.startswith("/") else "/" + path
    if node_rank >= 1 and path not in FOLLOWER_HEALTH_PATHS:
        path = "/health"
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "http://%s:%d%s" % (host, port, path)


def summary(unit, state, result, stall_timeout, timeout, node_rank=0):
    """The one-line ``msg`` of a verdict on ``unit``."""
    if node_rank:
        unit = "%s (node rank %d, health endpoint only)" % (unit, node_rank)
    if state == "ready":
        return "%s is ready after %.1f s" % (unit, result["elapsed"])
    if state == "crashed":
        return "%s crashed (%s) %s after %.1f s: %s" % (
            unit, result["cause"], "after ready" if result["after_ready"] else "during " + str(result["phase"]),
            result["elapsed"], result["decisive_line"])
    if state == "hang":
        if result.get("after_ready"):
            return "%s is up but not serving: %s" % (unit, result["decisive_line"])
        return "%s hung in %s: no log line for %s s" % (unit, result["phase"], stall_timeout)
    if state == "stopped":
        return "%s is not running and has not run since boot" % unit
    return "%s not ready after %s s (phase %s)" % (unit, timeout, result["phase"])


def judge_run(run_command, journalctl, unit, props, unit_state, p, fresh, since):
    """Wait for the verdict on the run of ``unit`` its properties ``props`` name (their ``InvocationID``; none when the
    unit never ran: state ``stopped``), with the wait options ``p`` (``wait_spec``'s, as a module's params). ``fresh``:
    the caller started this run, so its log's ready line is the verdict; otherwise the run was found running and must
    still answer its health endpoint. ``since``: the monotonic time the caller's wait began (``elapsed`` counts from
    it). ``unit_state``: () -> the unit's properties now. Returns the result a waiting module reports, ``msg``
    included; nothing here fails a module."""
    invocation = props.get("InvocationID") or ""
    if not invocation:
        result = dict(no_verdict(p["node_rank"]), state="stopped", unit_state=props, waited=True)
    else:
        prober = HealthProber(health_url(p["host"], p["port"], p["health_path"], p["node_rank"]), p["api_key"],
                              timeout=p["health_timeout"], interval=p["poll_interval"], probe=probe_health).start()
        history, cursor = read_history(run_command, journalctl, invocation)
        journal = JournalFollower(journalctl, invocation, after_cursor=cursor, history=history)
        try:
            waiter = Waiter(journal, prober, unit_state, timeout=p["timeout"], stall_timeout=p["stall_timeout"],
                            poll_interval=p["poll_interval"], confirm_with_health=not fresh,
                            health_timeout=p["health_timeout"])
            state, _elapsed = waiter.run()
            verdict_at = time.time()
            result = waiter.result(state, time.monotonic() - since)
            result["verdict_at"] = round(verdict_at, 6)
        finally:
            prober.stop()
            journal.close()
        result.update(waited=True, invocation_id=invocation, node_rank=p["node_rank"])
    result["running"] = unit_running(result.get("unit_state") or {})
    result["msg"] = summary(unit, result["state"], result, p["stall_timeout"], p["timeout"], p["node_rank"])
    return result
