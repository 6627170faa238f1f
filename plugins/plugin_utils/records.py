# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""A sweep's records (docs/results.md): the files of its results directory, reading them, and building each record.

``points.jsonl`` holds one record per point run and per restore, ``interconnect.jsonl`` the all-reduce measurements;
records that could not be written there are kept aside (``unwritten_dir``) and read back with them
(``all_records``), so every decision of a sweep (resume by configuration hash, the restore) sees them. The records
are built here from what the stages returned (``build_point_record``, ``build_restore_record``,
``build_interconnect_record``) and redacted of secrets; the ``results`` callback is the one writer; the Python API
and the report read them back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import hashlib
import json
import os

from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect, nccl_log, secrets
from ansible_collections.moesweep.sweep.plugins.plugin_utils.status import PASSED, point_status

SCHEMA = "moesweep.point/2"
POINTS_FILE = "points.jsonl"
# The TP group's all-reduce measurements, one line per host and NCCL environment (build_interconnect_record)
INTERCONNECT_FILE = "interconnect.jsonl"
INTERCONNECT_SCHEMA = "moesweep.interconnect/1"
INFLIGHT_DIR = ".inflight"
STOP_FILE = ".stop"


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


# ------------------------------------------------------------------------------------------------ reading


def whole_lines(data):
    """The lines of a points.jsonl's bytes that hold a whole record: a last line without its newline counts when it
    parses (a file edited by hand, or cut right after its closing brace), and is dropped only when torn mid-record."""
    lines = data.split(b"\n")
    if lines and lines[-1] != b"":
        try:
            json.loads(lines[-1].decode("utf-8"))
        except ValueError:
            lines = lines[:-1]  # torn mid-record: a crash during an older writer's append
    return [line for line in lines if line.strip()]


def read_points(path):
    """The records of a points.jsonl (a torn last line, a crash mid-append, is skipped; a whole one is read)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except (IOError, OSError):
        return []
    out = []
    for raw in whole_lines(data):
        raw = raw.strip()
        if not raw:
            continue
        try:
            out.append(json.loads(raw.decode("utf-8", "replace")))
        except ValueError:
            continue
    return out


UNWRITTEN_ENV = "MOESWEEP_UNWRITTEN_DIR"


def unwritten_dir(sweep_id, environ=None):
    """Where this controller keeps the records of ``sweep_id`` that could not reach its points.jsonl (a results
    directory that turned read-only, a full disk, one that could not be created): ``$MOESWEEP_UNWRITTEN_DIR``, else
    ``$XDG_STATE_HOME/moesweep/unwritten`` (XDG Base Directory Specification: state that outlives a run), else
    ``~/.local/state/moesweep/unwritten``; one directory per sweep id. The next run of the sweep that can write its
    results puts them into points.jsonl; until then the sweep's checks (resume, restore, the run's end) read them."""
    environ = os.environ if environ is None else environ
    base = environ.get(UNWRITTEN_ENV)
    if not base:
        state = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        base = os.path.join(state, "moesweep", "unwritten")
    return os.path.join(base, str(sweep_id))


def kept_records(sweep_id, environ=None):
    """[(path, record)] of the records of ``sweep_id`` kept by ``unwritten_dir``, in the order they were kept."""
    directory = unwritten_dir(sweep_id, environ)
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except (IOError, OSError):
        return []
    out = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path) as fh:
                out.append((path, json.load(fh)))
        except (IOError, OSError, ValueError):
            continue
    return out


def all_records(points_path, sweep_id):
    """The sweep's records: points.jsonl's, then the ones kept aside because they could not be written there. Every
    decision of a sweep (resume, the restore) reads these, so a record that could not be written still counts."""
    return read_points(points_path) + [rec for _, rec in kept_records(sweep_id)]


# ------------------------------------------------------------------------------------------------ resume


def config_hash(launch_hash, bench_settings, lock_sha256):
    """What identifies a point's configuration for resume: the launch, the benchmark settings, the stack."""
    blob = json.dumps({"launch": launch_hash, "bench": bench_settings, "stack": lock_sha256}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def resumed_record(found):
    """The record a skipped point stands on, written again as its latest (``resumed``: when): the summary, the
    restore and the exit status then see the configuration this run asked for, not a later record of another one."""
    record = dict(found)
    record["resumed"] = now_iso()
    return record


def passing_record(records, host, config):
    """The last passing record of that host with that configuration hash, or None."""
    found = None
    for rec in records:
        if (rec.get("kind") == "point" and rec.get("host") == host and rec.get("config_hash") == config
                and rec.get("status") == PASSED):
            found = rec
    return found


# ------------------------------------------------------------------------------------------------ building


# A node group's readiness also names the rank that decided it and carries every rank's own verdict; a restart's
# readiness the stop and release wait before its start (sglang_restart's released: stopped, released, elapsed, holders).
READINESS_KEYS = ("state", "cause", "phase", "after_ready", "decisive_line", "traceback", "timeline", "elapsed",
                  "health_sequence", "unit_state", "invocation_id", "started", "node_rank", "node_host", "nodes",
                  "released")


# What a record keeps of the accuracy stage (sglang_accuracy's result; docs/results.md).
ACCURACY_KEYS = ("state", "accuracy", "invalid", "latency_s", "output_throughput", "num_questions", "correct",
                 "threshold", "reason", "wrong_examples", "command", "crash", "elapsed", "msg")


def nodes_of(plan):
    """The node group part of a record: which group, how many nodes, rank 0's dist-init address, the hosts in rank
    order and their addresses (empty on one host)."""
    plan = plan or {}
    if not plan.get("group"):
        return {}
    return {k: plan.get(k) for k in ("group", "nnodes", "dist_init_addr", "hosts", "addresses", "record_host",
                                     "recorder", "members") if plan.get(k) is not None}


def _pick(d, keys):
    return {k: d.get(k) for k in keys if k in (d or {})}


def diagnosis_of(benchmark, reference_concurrency):
    for level in (benchmark or {}).get("levels") or []:
        if level.get("concurrency") == reference_concurrency:
            return level.get("diagnosis")
    return None


# What a record keeps of a point's launch plan and of its preflight's result.
LAUNCH_KEYS = ("argv", "command_line", "flags", "port", "host", "environment", "secret_environment_keys",
               "sglang_version", "launch_hash")
PREFLIGHT_KEYS = ("verdict", "msg", "reasons", "citations", "alternatives", "preflight_warnings", "advice", "forced",
                  "effective_backend", "sm", "dry_run")

# What a record keeps of the model it served (model_stage's result, or the local directory of a pre-staged model).
MODEL_KEYS = ("repo_id", "revision", "local_path", "bytes", "downloaded")


def model_of(staged, launch=None):
    """The model part of a record: the hub repository, the commit staged and the local directory served - when the
    point's launch serves the staged model; the model path its launch names otherwise (an extra flag or an overlay
    that names another one), so that a record never says it served what it did not."""
    staged = staged or {}
    flags = (launch or {}).get("flags") or {}
    path = flags.get("model-path") or flags.get("model")
    if path and str(path) not in (str(staged.get("local_path")), str(staged.get("repo_id"))):
        return {("local_path" if str(path).startswith("/") else "repo_id"): str(path)}
    return _pick(staged, MODEL_KEYS)


def build_point_record(ctx):
    """The record of one point (docs/results.md) from the context the sweep_record action gathered."""
    readiness = ctx.get("readiness") or {}
    smoke = ctx.get("smoke") or {}
    benchmark = ctx.get("benchmark") or {}
    preflight = ctx.get("preflight") or {}
    launch = ctx.get("launch") or {}
    benchmark = annotate_interconnect(benchmark, ctx.get("interconnect"), launch)
    accuracy = ctx.get("accuracy") or {}
    status, cause = point_status(ctx.get("failed_stage"), ctx.get("failed_result"), readiness, smoke, benchmark,
                                 preflight, accuracy)
    started = ctx.get("started")
    record = {
        "schema": SCHEMA,
        "kind": "point",
        "sweep_id": ctx.get("sweep_id"),
        "host": ctx.get("host"),
        "point": ctx.get("point"),
        "nodes": nodes_of(ctx.get("nodes")),
        "backend": launch.get("backend") or preflight.get("backend") or ctx.get("point"),
        "status": status,
        "cause": cause,
        "simulated": bool(ctx.get("simulated")),
        "config_hash": ctx.get("config_hash"),
        "started": started,
        "finished": now_iso(),
        "seconds": ctx.get("seconds"),
        "facts": ctx.get("facts") or {},
        "provenance": ctx.get("provenance") or {},
        "model": model_of(ctx.get("model"), launch),
        "launch": dict(_pick(launch, LAUNCH_KEYS), unit_sha256=ctx.get("unit_sha256")),
        "preflight": _pick(preflight, PREFLIGHT_KEYS),
        "readiness": _pick(readiness, READINESS_KEYS),
        "smoke": _pick(smoke, ("state", "answers", "reasons", "agreement", "model", "crash", "elapsed")),
        "accuracy": dict(_pick(accuracy, ACCURACY_KEYS), settings=ctx.get("accuracy_settings") or {}),
        "benchmark": dict(_pick(benchmark, ("state", "levels", "model", "tokenizer", "sampler",
                                            "overhead_s_per_level", "crash", "elapsed", "msg", "stopped_run")),
                          settings=ctx.get("bench_settings") or {}),
        "diagnosis": diagnosis_of(benchmark, ctx.get("reference_concurrency")),
        "failed_task": ctx.get("failed_task"),
        "failed_msg": ctx.get("failed_msg"),
        "artifacts": sorted(ctx.get("artifacts") or []),
        "moesweep": ctx.get("moesweep") or {},
    }
    if not benchmark:
        record["benchmark"] = {"settings": ctx.get("bench_settings") or {}}
    if ctx.get("axes"):
        # a launch matrix's cell: its value of every axis (plugin_utils/matrix.py), what the report groups by
        record["axes"] = dict(ctx["axes"])
    measured = ctx.get("interconnect") or {}
    if measured:
        keys = ("key", "environment_text", "ranks", "nccl_version", "model", "measured")
        record["interconnect"] = {k: measured.get(k) for k in keys}
        if measured.get("transport"):
            # what NCCL printed of the transport it chose between every GPU pair (module_utils/nccl_log.py)
            record["interconnect"]["transport"] = dict(measured["transport"], source="measurement")
    server = server_transport(ctx.get("journal"))
    if server:
        # the server's own communicators, where its unit sets NCCL_DEBUG=INFO: what sglang itself connected wins
        record.setdefault("interconnect", {})["transport"] = server
    redacted = secrets.redact(record, known=ctx.get("known_secrets") or ())
    if redacted != record:
        redacted["secrets"] = "redacted"
    return redacted


def server_transport(journal):
    """The transport NCCL chose for the server's own communicators, from the NCCL INFO lines of its journal (a unit
    with NCCL_DEBUG=INFO), as a record keeps it (``source``: ``server journal``); None without channel lines."""
    if not journal or "NCCL INFO" not in journal:
        return None
    summary = nccl_log.read(journal)
    if not summary["found"]:
        return None
    return dict(nccl_log.record(summary), source="server journal")


def interconnect_key(launch):
    """(key, NCCL environment, ranks) a point's all-reduce measurement is recorded under: its unit's NCCL environment
    and its TP size."""
    flags = (launch or {}).get("flags") or {}
    ranks = int(flags.get("tp-size") or flags.get("tensor-parallel-size") or 1)
    env = interconnect.nccl_environment((launch or {}).get("environment"))
    return interconnect.environment_key(env, ranks), env, ranks


def annotate_interconnect(benchmark, measured, launch):
    """A copy of ``benchmark`` whose ok levels have their all-reduce share of the decode step, and the verdict
    interconnect_bound where it dominates (module_utils/interconnect.py), from the host's measurement under this
    point's NCCL environment; ``benchmark`` itself as it was without a measurement. A copy: the record is built more
    than once from the same stage results (the restore's stop decision builds it first)."""
    if not measured or not (benchmark or {}).get("levels"):
        return benchmark
    flags = (launch or {}).get("flags") or {}
    _key, _env, ranks = interconnect_key(launch)
    return interconnect.annotate_levels(copy.deepcopy(benchmark), measured, measured.get("model"), ranks,
                                        max_batch=flags.get("max-running-requests"), flags=flags)


def read_interconnect(path):
    """The measurements recorded in ``path`` (interconnect.jsonl), oldest first; unreadable lines skipped."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("kind") == "interconnect":
                    out.append(rec)
    except (IOError, OSError):
        pass
    return out


def find_interconnect(measurements, host, key):
    """The newest measurement of ``host`` under ``key``, or None."""
    found = [m for m in measurements if m.get("host") == host and m.get("key") == key]
    return found[-1] if found else None


def build_interconnect_record(ctx):
    """One all-reduce measurement (interconnect_facts' result) as the line interconnect.jsonl keeps."""
    m = ctx.get("measurement") or {}
    record = {"schema": INTERCONNECT_SCHEMA, "kind": "interconnect", "sweep_id": ctx.get("sweep_id"),
              "host": ctx.get("host"), "point": ctx.get("point"), "simulated": bool(ctx.get("simulated")),
              "finished": now_iso()}
    for k in ("key", "nccl_environment", "environment_text", "ranks", "rows", "p2p", "devices", "nccl_version",
              "avg_busbw_gbs", "model", "model_error", "elapsed", "measured", "output", "transport", "run_environment",
              "nccl_lines"):
        record[k] = m.get(k)
    return secrets.redact(record, known=ctx.get("known_secrets") or ())


def build_restore_record(ctx):
    readiness = ctx.get("readiness") or {}
    # previous: the files are back; a server that was not running before the sweep is not started either
    ok = (ctx.get("action") == "none" or readiness.get("state") == "ready"
          or (ctx.get("action") == "previous" and not ctx.get("previous_active") and not ctx.get("failed_task")))
    record = {
        "schema": SCHEMA,
        "kind": "restore",
        "sweep_id": ctx.get("sweep_id"),
        "host": ctx.get("host"),
        "point": ctx.get("point"),
        "backend": ctx.get("backend"),
        "status": PASSED if ok else "failed",
        "cause": None if ok else (readiness.get("cause") or readiness.get("state") or "failed"),
        "simulated": bool(ctx.get("simulated")),
        "nodes": nodes_of(ctx.get("nodes")),
        "policy": ctx.get("policy"),
        "action": ctx.get("action"),
        "reason": ctx.get("reason"),
        "ties": ctx.get("ties") or [],
        "started": ctx.get("started"),
        "finished": now_iso(),
        "readiness": _pick(readiness, ("state", "cause", "phase", "decisive_line", "elapsed", "invocation_id",
                                       "node_rank", "node_host", "nodes", "released")),
        "failed_task": ctx.get("failed_task"),
        "failed_msg": ctx.get("failed_msg"),
        "moesweep": ctx.get("moesweep") or {},
    }
    return secrets.redact(record, known=ctx.get("known_secrets") or ())
