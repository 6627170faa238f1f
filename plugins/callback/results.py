# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""The one writer of sweep results (docs/results.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: results
type: aggregate
short_description: Write every sweep point's record, its artifacts and the summary
description:
  - The one writer of moesweep's results. It reacts to the results of M(moesweep.sweep.sweep_plan) and
    M(moesweep.sweep.sweep_record) tasks (their RV(moesweep.sweep.sweep_record#module:moesweep_event)), the same
    under C(ansible-playbook), ansible-runner and C(moesweep sweep). Results of tasks run in check mode are
    ignored.
  - Appends each point's record to C(<results_dir>/<sweep_id>/points.jsonl) atomically (the file is rewritten
    through a temporary file, flushed, synced and renamed, so a crash never leaves a torn line), writes the
    point's artifacts beside it, keeps an in-flight marker while a point runs, and writes C(summary.md) and
    C(summary.csv) at the end of the run.
  - A point that was running when the controller stopped (Ctrl-C) is recorded C(interrupted) at exit; after a
    SIGKILL, the next run of the sweep records it from its in-flight marker. A host that becomes unreachable
    during a point gets an C(unreachable) record.
  - A record that cannot be written there (a results directory that turned read-only or could not be created, a full
    disk) is kept in the controller's C($XDG_STATE_HOME/moesweep/unwritten/<sweep_id>/) (default
    C(~/.local/state/moesweep/unwritten/<sweep_id>/), or E(MOESWEEP_UNWRITTEN_DIR)), and the error names that file;
    the sweep's decisions read kept records as well, the run fails at its end, and the next run of the sweep that can
    write puts them into C(points.jsonl).
  - Files are 0600 in 0700 directories.
version_added: 0.1.0
author:
  - moesweep contributors (!UNKNOWN)
requirements:
  - enabled in ansible.cfg (C(callbacks_enabled = moesweep.sweep.results)) or E(ANSIBLE_CALLBACKS_ENABLED)
options:
  show_progress:
    description: Print one line per point as it starts and ends.
    type: bool
    default: true
    env:
      - name: MOESWEEP_RESULTS_PROGRESS
    ini:
      - section: moesweep_results
        key: show_progress
"""

import atexit
import json
import os
import tempfile
import time

from ansible.plugins.callback import CallbackBase
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records

try:
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary as _summary
except ImportError:  # pragma: no cover - the summary renderer is optional for recording
    _summary = None

DIR_MODE = 0o700
FILE_MODE = 0o600


def _result_dict(result):
    """The task's result dict (ansible-core 2.19 CallbackTaskResult.result, older TaskResult._result)."""
    value = getattr(result, "result", None)
    if isinstance(value, dict):
        return value
    return getattr(result, "_result", {}) or {}


def _host_name(result):
    host = getattr(result, "host", None) or getattr(result, "_host", None)
    return host.get_name() if hasattr(host, "get_name") else str(getattr(host, "name", host))


def _task(result):
    return getattr(result, "task", None) or getattr(result, "_task", None)


def ensure_dir(path):
    """Create ``path`` and every missing parent 0700 (os.makedirs applies its mode to the leaf only)."""
    missing = []
    probe = os.path.abspath(path)
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(directory, DIR_MODE)


def atomic_write(path, data):
    """Write ``data`` (bytes) so that readers see the old or the new file, never a torn one."""
    directory = os.path.dirname(path)
    ensure_dir(directory)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def append_record(points_path, record):
    """Append one record line; the whole file is replaced atomically (it holds one line per point)."""
    try:
        with open(points_path, "rb") as fh:
            existing = fh.read()
    except (IOError, OSError):
        existing = b""
    # a torn last line (an older writer's crash) is dropped; a whole one without its newline is kept
    existing = b"".join(raw + b"\n" for raw in records.whole_lines(existing))
    line = json.dumps(record, sort_keys=True, default=str).encode("utf-8") + b"\n"
    atomic_write(points_path, existing + line)


def _safe(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in str(name))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "moesweep.sweep.results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super(CallbackModule, self).__init__(display=display)
        self.sweeps = {}        # sweep dir -> plan
        self.inflight = {}      # (host) -> {sweep, point, started, started_at, marker}
        self.written = []       # (dir, record) of this run
        self.write_errors = []
        atexit.register(self._at_exit)

    # ------------------------------------------------------------------ helpers
    def _progress(self, text):
        try:
            show = self.get_option("show_progress")
        except (KeyError, AttributeError):
            show = True
        if show:
            self._display.display("moesweep: %s" % text)

    def _marker(self, sweep_dir, host, point):
        return os.path.join(sweep_dir, records.INFLIGHT_DIR, "%s__%s.json" % (_safe(host), _safe(point)))

    def _write_record(self, sweep_dir, record, artifacts=None):
        try:
            ensure_dir(sweep_dir)
            append_record(os.path.join(sweep_dir, records.POINTS_FILE), record)
        except (IOError, OSError) as exc:
            # Never lose the record: keep it where the sweep's next steps and next run find it, and say where. The
            # run fails at its end (sweep_record state=verify); ansible would only warn about an exception here.
            self.write_errors.append("%s: %s" % (sweep_dir, exc))
            kept = self._keep_elsewhere(record)
            self._display.error("moesweep: could not write the record of %s %s to %s (%s); kept %s"
                                % (record.get("host"), record.get("point"), sweep_dir, exc,
                                   kept or "in this run's output only: " + json.dumps(record, default=str)))
            return False
        self.written.append((sweep_dir, record))
        try:
            self._write_artifacts(sweep_dir, record, artifacts)
        except (IOError, OSError) as exc:
            self.write_errors.append("%s: %s" % (sweep_dir, exc))
            self._display.error("moesweep: the record of %s %s is in %s, but its artifacts could not be written (%s)"
                                % (record.get("host"), record.get("point"), sweep_dir, exc))
        return True

    @staticmethod
    def _write_artifacts(sweep_dir, record, artifacts):
        artifacts = dict(artifacts or {})
        if (record.get("smoke") or {}).get("answers"):
            artifacts["smoke.json"] = json.dumps(record["smoke"], indent=1, sort_keys=True, default=str)
        if artifacts:
            sub = "restore" if record.get("kind") == "restore" else _safe(record.get("point"))
            adir = os.path.join(sweep_dir, _safe(record.get("host")), sub)
            for name, text in sorted(artifacts.items()):
                atomic_write(os.path.join(adir, _safe(name)), (text or "").encode("utf-8"))
        if record.get("facts") or record.get("provenance"):
            host_file = os.path.join(sweep_dir, "hosts", _safe(record.get("host")) + ".json")
            atomic_write(host_file, json.dumps({"host": record.get("host"), "facts": record.get("facts"),
                                                "provenance": record.get("provenance"),
                                                "simulated": record.get("simulated"),
                                                "seen": record.get("finished")}, indent=1, sort_keys=True,
                                               default=str).encode("utf-8"))

    @staticmethod
    def _keep_elsewhere(record):
        """Write a record that could not reach its sweep directory to the sweep's directory of kept records
        (records.unwritten_dir), or, failing that, to a new private temporary directory. Its path, or None."""
        name = "%d__%s__%s.json" % (time.time() * 1e6, _safe(record.get("host")), _safe(record.get("point")))
        data = json.dumps(record, indent=1, sort_keys=True, default=str).encode("utf-8")
        try:
            path = os.path.join(records.unwritten_dir(record.get("sweep_id") or "unknown"), name)
            atomic_write(path, data)
            return path
        except (IOError, OSError):
            pass
        try:
            path = os.path.join(tempfile.mkdtemp(prefix="moesweep-unwritten-"), name)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE), "wb") as fh:
                fh.write(data)
            return path
        except (IOError, OSError):
            return None

    def _interrupted_record(self, sweep, host, point, started, status="interrupted", msg=None, simulated=None):
        return {
            "schema": records.SCHEMA, "kind": "point", "sweep_id": sweep.get("sweep_id"), "host": host,
            "point": point, "backend": None, "status": status, "cause": None, "simulated": simulated,
            "config_hash": None, "started": started, "finished": records.now_iso(), "seconds": None,
            "failed_task": None, "failed_msg": msg or ("the run stopped during this point (%s)" % status),
            "artifacts": [],
        }

    # ------------------------------------------------------------------ events
    def v2_runner_on_ok(self, result):
        res = _result_dict(result)
        task = _task(result)
        if task is not None and getattr(task, "check_mode", False):
            return
        sweep = res.get("moesweep_sweep")
        if not isinstance(sweep, dict) or not sweep.get("dir"):
            return
        event = res.get("moesweep_event")
        host = res.get("moesweep_host") or _host_name(result)
        sweep_dir = sweep["dir"]
        if sweep_dir not in self.sweeps:
            self.sweeps[sweep_dir] = sweep
            self._recover(sweep_dir, sweep)
        if event == "point_started":
            marker = self._marker(sweep_dir, host, res.get("point"))
            state = {"sweep_id": sweep.get("sweep_id"), "host": host, "point": res.get("point"),
                     "started": res.get("started"), "simulated": res.get("simulated")}
            try:
                atomic_write(marker, json.dumps(state).encode())
            except (IOError, OSError) as exc:
                self._display.warning("moesweep: could not write the in-flight marker %s (%s)" % (marker, exc))
            self.inflight[host] = dict(state, sweep=sweep, marker=marker)
            self._progress("%s %s: started" % (host, res.get("point")))
        elif event == "record":
            record = res.get("moesweep_record") or {}
            self._write_record(sweep_dir, record, res.get("artifacts"))
            current = self.inflight.get(host)
            if current and record.get("kind") == "point" and current.get("point") == record.get("point"):
                self._drop_marker(current["marker"])
                self.inflight.pop(host, None)
            self._progress(res.get("msg") or "%s %s: %s" % (host, record.get("point"), record.get("status")))
        elif event == "interconnect":
            try:
                ensure_dir(sweep_dir)
                append_record(os.path.join(sweep_dir, records.INTERCONNECT_FILE), res.get("moesweep_record") or {})
            except (IOError, OSError) as exc:
                self.write_errors.append("%s: %s" % (sweep_dir, exc))
                self._display.error("moesweep: could not write the interconnect measurement of %s to %s (%s)"
                                    % (host, sweep_dir, exc))
            self._progress(res.get("msg"))
        elif event == "resume" and res.get("skip"):
            current = self.inflight.pop(host, None)
            if current:
                self._drop_marker(current["marker"])
            if res.get("moesweep_record"):
                self._write_record(sweep_dir, res["moesweep_record"])  # the passing record it stands on, again
            self._progress(res.get("msg"))

    def v2_runner_on_unreachable(self, result):
        host = _host_name(result)
        current = self.inflight.pop(host, None)
        if current:
            msg = (_result_dict(result).get("msg") or "host unreachable")
            self._write_record(current["sweep"]["dir"], self._interrupted_record(
                current["sweep"], host, current["point"], current["started"], status="unreachable", msg=msg,
                simulated=current.get("simulated")))
            self._drop_marker(current["marker"])

    def v2_playbook_on_stats(self, stats):
        self._close_inflight("the playbook ended during this point")
        self._write_summaries()

    # ------------------------------------------------------------------ recovery and exit
    def _drop_marker(self, path):
        try:
            os.unlink(path)
        except OSError:
            pass

    def _recover(self, sweep_dir, sweep):
        """Records an earlier run kept aside (they could not be written) go into points.jsonl, in the order they were
        kept; in-flight markers of an earlier run that never finished (SIGKILL): those points recorded interrupted."""
        kept = records.kept_records(sweep.get("sweep_id"))
        for path, record in kept:
            try:
                ensure_dir(sweep_dir)
                append_record(os.path.join(sweep_dir, records.POINTS_FILE), record)
            except (IOError, OSError):
                break  # still not writable: they stay kept, and the sweep's checks read them there
            self._drop_marker(path)
            self._progress("%s %s: the record kept by an earlier run (%s) is now in points.jsonl"
                           % (record.get("host"), record.get("point"), path))
        mdir = os.path.join(sweep_dir, records.INFLIGHT_DIR)
        if not os.path.isdir(mdir):
            return
        ended = {(r.get("host"), r.get("point"), r.get("started"))
                 for r in records.read_points(os.path.join(sweep_dir, records.POINTS_FILE)) if r.get("kind") == "point"}
        for name in sorted(os.listdir(mdir)):
            path = os.path.join(mdir, name)
            try:
                with open(path) as fh:
                    state = json.load(fh)
            except (IOError, OSError, ValueError):
                self._drop_marker(path)
                continue
            if (state.get("host"), state.get("point"), state.get("started")) in ended:
                self._drop_marker(path)  # its record exists (the marker outlived a directory gone read-only)
                continue
            self._write_record(sweep_dir, self._interrupted_record(
                sweep, state.get("host"), state.get("point"), state.get("started"),
                msg="an earlier run of this sweep stopped during this point (its controller was killed)",
                simulated=state.get("simulated")))
            self._drop_marker(path)
            self._progress("%s %s: recorded interrupted (an earlier run stopped during it)"
                           % (state.get("host"), state.get("point")))

    def _close_inflight(self, msg):
        for host, current in list(self.inflight.items()):
            try:
                self._write_record(current["sweep"]["dir"], self._interrupted_record(
                    current["sweep"], host, current["point"], current["started"], msg=msg,
                    simulated=current.get("simulated")))
                self._drop_marker(current["marker"])
            except (IOError, OSError):
                pass
            self.inflight.pop(host, None)

    def _at_exit(self):
        # Ctrl-C (KeyboardInterrupt) ends ansible-playbook without v2_playbook_on_stats.
        if self.inflight:
            self._close_inflight("the run was interrupted during this point (Ctrl-C or the controller stopped)")
            self._write_summaries()

    def _write_summaries(self):
        if _summary is None:
            return
        for sweep_dir, sweep in self.sweeps.items():
            try:
                recs = records.read_points(os.path.join(sweep_dir, records.POINTS_FILE))
                rows = _summary.summary_rows(recs, sweep.get("reference_concurrency"))
                atomic_write(os.path.join(sweep_dir, "summary.md"), _summary.render_markdown(rows).encode("utf-8"))
                atomic_write(os.path.join(sweep_dir, "summary.csv"), _summary.render_csv(rows).encode("utf-8"))
                evidence = _summary.evidence_lines(recs, sweep.get("reference_concurrency"))
                self._display.display("moesweep: results in %s\n%s%s" % (
                    sweep_dir, _summary.render_text(rows), "".join(line + "\n" for line in evidence)))
            except Exception as exc:  # noqa: BLE001 - a summary must never cost the records
                self._display.warning("moesweep: could not write the summary of %s: %s" % (sweep_dir, exc))
