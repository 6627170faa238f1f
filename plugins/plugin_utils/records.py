# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Sweeps and their records (docs/results.md), as pure functions on the controller.

The sweep's plan (which points, on which host, with which settings, into which results directory), a
point's status and record from what its stages returned, the configuration hash resume compares, and the
choice of the configuration a host is left on. The ``sweep_plan`` and ``sweep_record`` actions call these;
the ``results`` callback writes what they return; the Python API reads the records back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import difflib
import hashlib
import json
import os
import re

from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect, secrets

SCHEMA = "moesweep.point/2"
POINTS_FILE = "points.jsonl"
# The TP group's all-reduce measurements, one line per host and NCCL environment (build_interconnect_record)
INTERCONNECT_FILE = "interconnect.jsonl"
INTERCONNECT_SCHEMA = "moesweep.interconnect/1"
INFLIGHT_DIR = ".inflight"
STOP_FILE = ".stop"
RESTORE_POLICIES = ("best", "previous", "none")
SPREAD_MODES = ("false", "true", "by_facts")
PASSED = "passed"
# Status of a point that ran into the task that failed, by the module or action of that task.
_SWEEP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_POINT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class PlanError(ValueError):
    """Bad sweep input: the message names the problem and the fix."""


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def _suggest(name, valid):
    close = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=0.6)
    return " (did you mean %r?)" % close[0] if close else ""


def sweep_id_for(points, hosts, settings):
    """A stable id for the same sweep (same points, hosts and benchmark settings): re-running it resumes."""
    blob = json.dumps({"points": list(points), "hosts": sorted(hosts), "settings": settings}, sort_keys=True)
    return "sweep-" + hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse_points(backend, backends):
    """The user's -e backend=X / -e backends=[...] / -e backends=compatible as (list or 'compatible')."""
    given_one = backend not in (None, "")
    given_many = backends not in (None, "", [])
    if given_one and given_many:
        raise PlanError("give either -e backend=NAME (one point) or -e backends=[a,b,c] (a sweep), not both")
    if backends == []:
        raise PlanError("-e backends is an empty list: name at least one backend, "
                        "e.g. -e backends=[flashinfer_cutlass]")
    if not given_one and not given_many:
        raise PlanError("no sweep point: give -e backend=NAME, -e backends=[a,b,c] or -e backends=compatible")
    if given_one:
        if not isinstance(backend, str):
            raise PlanError("-e backend must be one name, got %r; use -e backends=[...] for several" % (backend,))
        return [backend]
    if backends == "compatible":
        return "compatible"
    if isinstance(backends, str):
        # -e backends=a,b,c arrives as one string
        items = [b.strip() for b in backends.strip("[]").split(",")]
    elif isinstance(backends, (list, tuple)):
        items = list(backends)
    else:
        raise PlanError("-e backends must be a list of names or 'compatible', got %r" % (backends,))
    items = [i for i in items if i not in ("", None)]
    if not items:
        raise PlanError("-e backends is an empty list: name at least one backend")
    for item in items:
        if not isinstance(item, str) or not _POINT_RE.match(item):
            raise PlanError("sweep point name %r is not a plain name (letters, digits, . _ -)" % (item,))
    seen = set()
    for item in items:
        if item in seen:
            raise PlanError("-e backends lists %r twice" % item)
        seen.add(item)
    return items


def check_points(points, overlays, choices):
    """Every point must be an overlay or a --moe-runner-backend choice of the host's sglang version."""
    valid = sorted(set(overlays) | set(choices))
    for point in points:
        if point not in overlays and point not in choices:
            raise PlanError("unknown backend %r%s: it is neither an overlay of sglang_server_backends nor a "
                            "--moe-runner-backend choice of this host's sglang (%s)" % (
                                point, _suggest(point, valid), ", ".join(valid)))


def check_results_dir(path, isdir, exists, access):
    """The results directory must be a writable directory (or creatable)."""
    if not path:
        raise PlanError("results_dir is empty: give a directory, e.g. -e results_dir=results")
    if exists(path) and not isdir(path):
        raise PlanError("results_dir %s is a file, not a directory: give a directory path" % path)
    probe = path
    while not exists(probe):
        parent = os.path.dirname(probe.rstrip("/")) or "/"
        if parent == probe:
            break
        probe = parent
    if not access(probe, os.W_OK | os.X_OK):
        raise PlanError("results_dir %s is not writable (%s): give a directory you can write, or fix its "
                        "permissions, before any point runs" % (path, probe))


def check_settings(restore, reference_concurrency, concurrency, spread):
    if restore not in RESTORE_POLICIES:
        raise PlanError("restore must be one of %s, got %r" % (", ".join(RESTORE_POLICIES), restore))
    if str(spread).lower() not in SPREAD_MODES:
        raise PlanError("spread must be true, false or by_facts, got %r" % (spread,))
    if not isinstance(concurrency, (list, tuple)) or not concurrency:
        raise PlanError("the benchmark's concurrency levels (sglang_bench_concurrency) must be a non-empty list")
    if reference_concurrency not in concurrency:
        raise PlanError("reference concurrency %r is not one of the benchmark's levels %s: pick one of them "
                        "(-e reference_concurrency=N) or add it to sglang_bench_concurrency"
                        % (reference_concurrency, list(concurrency)))


def check_numbers(numbers):
    """Every named setting is a positive number (seconds, tokens, levels): ``-e sglang_server_ready_timeout=abc``
    is refused here, naming the variable, before any role sees it."""
    for name, value in sorted((numbers or {}).items()):
        try:
            ok = not isinstance(value, bool) and float(value) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise PlanError("%s=%r is not a positive number: give a number (seconds or tokens), e.g. -e %s=%s"
                            % (name, value, name, _EXAMPLES.get(name, 60)))


_EXAMPLES = {"sglang_server_ready_timeout": 1800, "sglang_server_stall_timeout": 600,
             "sglang_server_release_timeout": 120, "sglang_server_health_timeout": 25,
             "sglang_bench_level_timeout": 3600, "sglang_bench_input_len": 1024, "sglang_bench_output_len": 1024}


def check_sweep_id(sweep_id):
    if not _SWEEP_ID_RE.match(str(sweep_id)):
        raise PlanError("sweep_id %r must be a plain name (letters, digits, . _ -; at most 128)" % (sweep_id,))


def config_hash(launch_hash, bench_settings, lock_sha256):
    """What identifies a point's configuration for resume: the launch, the benchmark settings, the stack."""
    blob = json.dumps({"launch": launch_hash, "bench": bench_settings, "stack": lock_sha256}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


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


def reference_figures(record, concurrency):
    for level in ((record.get("benchmark") or {}).get("levels") or []):
        if level.get("concurrency") == concurrency and level.get("ok"):
            return level.get("figures") or {}
    return None


def choose_restore(records, host, policy, reference_concurrency, previous, sweep_points):
    """Which configuration to leave ``host`` on: {action, point, reason}. ``action``: ``point`` (re-render that
    point's unit), ``previous`` (put back the unit the host had before the sweep), ``none``. The best point is
    ``summary.best_point`` (the table's *best*), so what the summary marks is what the host is left on."""
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

    if policy == "none":
        return {"action": "none", "point": None, "reason": "restore=none: the host is left as the last point left it"}
    if sweep_points is not None and not list(sweep_points):
        return {"action": "none", "point": None,
                "reason": "this host ran no point of the sweep (the spread gave it none): left as it was"}
    mine = [r for r in records if r.get("host") == host and (sweep_points is None or r.get("point") in sweep_points)]
    has_previous = bool((previous or {}).get("unit"))
    if policy == "previous":
        if has_previous:
            return {"action": "previous", "point": None,
                    "reason": "restore=previous: the configuration the host had before the sweep"}
        return {"action": "none", "point": None,
                "reason": "restore=previous, but the host had no server unit before the sweep"}
    best, tied = summary.ranking(mine, reference_concurrency, host=host) if mine else (None, [])
    if best is not None:
        figs = reference_figures(best, reference_concurrency) or {}
        reason = "the best point that passed: %.1f output tok/s at concurrency %s" % (
            figs.get("output_throughput") or 0.0, reference_concurrency)
        thr = summary.throughput_at(best, reference_concurrency) or {}
        if thr.get("half_width") is not None:
            reason += " (steady state %s)" % summary.interval_text(thr)
        choice = {"action": "point", "point": best["point"], "backend": best.get("backend"), "reason": reason,
                  "ties": [r["point"] for r in tied]}
        if tied:
            # the rule for ties, stated where the choice is recorded
            choice["reason"] += "; it ties with %s: %s" % (", ".join(r["point"] for r in tied), summary.TIE_RULE)
        return choice
    passed = [r for r in summary.point_records(mine) if r.get("status") == PASSED]
    if passed:
        # a sweep without a benchmark (sglang_bench_enabled: false): the last point that passed is known-good
        last = passed[-1]
        return {"action": "point", "point": last["point"], "backend": last.get("backend"),
                "reason": "the last point that passed (no benchmark figures to rank the points by)"}
    if has_previous:
        return {"action": "previous", "point": None,
                "reason": "no point passed: putting back the configuration the host had before the sweep"}
    return {"action": "none", "point": None,
            "reason": "no point passed and the host had no server before the sweep: nothing to restore"}


# ------------------------------------------------------------------------------------------------ status


def point_status(stage, failed_result, readiness, smoke, benchmark, preflight, accuracy=None):
    """(status, cause) of a point from the failed stage (or None) and what each stage returned. A crash anywhere
    outranks ``bad_accuracy`` (the accuracy stage's verdict below its threshold), which outranks the benchmark's own
    verdicts: a point that computes wrongly is never a result, however fast."""
    failed_result = failed_result or {}
    if failed_result.get("unreachable"):
        return "unreachable", None
    if stage == "interrupted":
        return "interrupted", None
    if stage == "preflight":
        return "refused", None
    ready_state = (readiness or {}).get("state")
    if stage == "readiness" or (ready_state and ready_state != "ready"):
        state = ready_state or failed_result.get("state")
        if state in ("crashed", "hang", "timeout"):
            return state, (readiness or failed_result).get("cause")
        if state == "stopped":
            return "crashed", "other"
    smoke_state = (smoke or {}).get("state")
    if smoke_state == "bad_output":
        return "bad_output", None
    if smoke_state == "server_died":
        return _after_ready(smoke.get("crash"))
    accuracy_state = (accuracy or {}).get("state")
    if accuracy_state == "server_died":
        return _after_ready(accuracy.get("crash"))
    bench_state = (benchmark or {}).get("state")
    if bench_state == "server_died":
        return _after_ready(benchmark.get("crash"))
    if accuracy_state == "bad_accuracy":
        return "bad_accuracy", None
    if bench_state == "invalid_gpu_state":
        return "invalid_gpu_state", None
    if bench_state == "failed":
        return "bench_failed", None
    if stage is not None:
        return "failed", None
    if ready_state == "ready" and (not smoke or smoke_state == "ok") and (not benchmark or bench_state == "ok") \
            and (not accuracy or accuracy_state == "ok"):
        return PASSED, None
    return "failed", None


def _after_ready(crash):
    """(status, cause) of a server that stopped answering after it was ready, from the judge of its unit's run
    (readiness.judge_entries): ``crashed`` when the run crashed or the unit is gone; ``hang`` when the unit still runs
    and its journal shows no crash (a server that stalls: requests time out, nothing exits)."""
    crash = crash or {}
    if crash.get("state") and crash["state"] != "crashed" and crash.get("unit_gone") is False:
        return "hang", None
    return "crashed", crash.get("cause") or "other"


def stage_of(task_action, failed_result=None):
    """The stage a failed task belongs to, by its module / action (a node group's barrier, ``sglang_nodes``,
    says which stage it judged)."""
    action = str(task_action or "").replace("moesweep.sweep.", "")
    if action == "sglang_nodes":
        return (failed_result or {}).get("stage") or "other"
    if action == "sglang_ready" and ((failed_result or {}).get("released") or {}).get("released") is False:
        return "restart"  # its release option: the old server's GPUs or port were never free, nothing started
    return {"sglang_preflight": "preflight", "sglang_ready": "readiness", "gpu_released": "restart",
            "sglang_smoke": "smoke", "sglang_accuracy": "accuracy", "sglang_bench": "benchmark",
            "sglang_bench_wait": "benchmark", "gpu_facts": "facts", "port_owner": "preflight",
            "interconnect_facts": "interconnect", "model_stage": "preflight",
            "model_stage_wait": "preflight"}.get(action, "other")


# A node group's readiness also names the rank that decided it and carries every rank's own verdict; a restart's
# readiness the stop and release wait before its start (sglang_ready's release: stopped, released, elapsed, holders).
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


# What a record keeps of the model it served (model_stage's result, or the local directory of a pre-staged model).
MODEL_KEYS = ("repo_id", "revision", "local_path", "bytes", "downloaded")


def model_of(staged):
    """The model part of a record: the hub repository, the commit staged and the local directory served."""
    return _pick(staged or {}, MODEL_KEYS)


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
        "model": model_of(ctx.get("model")),
        "launch": dict(_pick(launch, ("argv", "command_line", "flags", "port", "host", "environment",
                                      "secret_environment_keys", "sglang_version", "launch_hash")),
                       unit_sha256=ctx.get("unit_sha256")),
        "preflight": _pick(preflight, ("verdict", "msg", "reasons", "citations", "alternatives",
                                       "preflight_warnings", "advice", "forced", "effective_backend", "sm")),
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
    redacted = secrets.redact(record, known=ctx.get("known_secrets") or ())
    if redacted != record:
        redacted["secrets"] = "redacted"
    return redacted


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
              "avg_busbw_gbs", "model", "model_error", "elapsed", "measured", "output"):
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
                                       "node_rank", "node_host", "nodes")),
        "failed_task": ctx.get("failed_task"),
        "failed_msg": ctx.get("failed_msg"),
        "moesweep": ctx.get("moesweep") or {},
    }
    return secrets.redact(record, known=ctx.get("known_secrets") or ())


# ------------------------------------------------------------------------------------------------ spread

COMPARED_FACTS = ("gpu_models", "gpu_count", "driver_version", "interconnect", "virtualization", "stack_lock")


def comparable_facts(facts, provenance):
    """What must be equal for two hosts' points to be compared: GPU model list and count, driver, interconnect,
    virtualization kind, and the stack's lock hash."""
    facts = facts or {}
    return {
        "gpu_models": list(facts.get("gpu_models") or []),
        "gpu_count": facts.get("gpu_count"),
        "driver_version": facts.get("driver_version"),
        "interconnect": facts.get("interconnect"),
        "virtualization": (facts.get("virtualization") or {}).get("kind"),
        "stack_lock": (provenance or {}).get("lock_sha256"),
    }


def spread_points(points, hosts, host, mode):
    """The points ``host`` runs. ``hosts``: {name: comparable_facts}. ``mode``: false (every host runs every
    point), true (the points are spread over the hosts, which must be comparable), by_facts (hosts are grouped
    by identical facts and the points are spread within each group). Deterministic: every host computes the
    same assignment. Raises PlanError naming the fact that differs and the hosts."""
    mode = str(mode).lower()
    if mode in ("false", "no", "0", "none", ""):
        return list(points), [host]
    names = sorted(hosts)
    if mode == "true":
        base = hosts[names[0]]
        for name in names[1:]:
            for key in COMPARED_FACTS:
                if hosts[name].get(key) != base.get(key):
                    raise PlanError(
                        "spread=true needs comparable hosts, but %s differs: %s has %r, %s has %r; make the hosts "
                        "identical, limit the sweep to one kind of host, or group them with -e spread=by_facts"
                        % (key, names[0], base.get(key), name, hosts[name].get(key)))
        group = names
    elif mode == "by_facts":
        key = json.dumps(hosts[host], sort_keys=True)
        group = [n for n in names if json.dumps(hosts[n], sort_keys=True) == key]
    else:
        raise PlanError("spread must be true, false or by_facts, got %r" % (mode,))
    index = group.index(host)
    return [p for i, p in enumerate(points) if i % len(group) == index], group
