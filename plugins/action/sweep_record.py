# -*- coding: utf-8 -*-
# Copyright: moesweep contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: a sweep point's bookkeeping. Documentation: plugins/modules/sweep_record.py.

It never writes a results file itself: it returns what the ``moesweep.sweep.results`` callback (the one
writer) writes - the point's start (an in-flight marker), its record and artifacts, the restore step."""

import os
import subprocess
import time

from ansible.plugins.action import ActionBase
from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect, secrets
from ansible_collections.moesweep.sweep.plugins.plugin_utils import action_args, equivalence, records, restore, status
from ansible_collections.moesweep.sweep.plugins.plugin_utils.schedule import server_schedule

ARGUMENT_SPEC = dict(
    state=dict(type="str", required=True,
               choices=["start", "previous", "resume", "stop_check", "point", "restore_plan", "restore",
                        "interconnect", "verify"]),
    sweep=dict(type="dict", required=True),
    point=dict(type="str"),
    started=dict(type="str"),
    started_at=dict(type="float"),
    config_hash=dict(type="str"),
    launch_hash=dict(type="str"),
    bench_settings=dict(type="dict", default={}),
    lock_sha256=dict(type="str"),
    facts=dict(type="dict", default={}),
    provenance=dict(type="dict", default={}),
    preflight=dict(type="dict", default={}),
    launch=dict(type="dict", default={}),
    readiness=dict(type="dict", default={}),
    smoke=dict(type="dict", default={}),
    accuracy=dict(type="dict", default={}),
    benchmark=dict(type="dict", default={}),
    failed_task=dict(type="str"),
    failed_action=dict(type="str"),
    failed_result=dict(type="dict", default={}),
    interrupted=dict(type="bool", default=False),
    files=dict(type="dict", default={}),
    env_files=dict(type="list", elements="str", default=[]),
    invocation_id=dict(type="str", default=""),
    previous=dict(type="dict", default={}),
    choice=dict(type="dict", default={}),
    record_host=dict(type="str"),
    nodes=dict(type="dict", default={}),
    running_point=dict(type="str", default=""),
    running_stopped=dict(type="bool", default=False),
    interconnect=dict(type="dict", default={}),
    measured=dict(type="dict", default={}),
    recorder=dict(type="bool", default=True),
    written=dict(type="list", elements="dict", default=[]),
    model=dict(type="dict", default={}),
)

_COLLECTION_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def moesweep_version():
    """The controller checkout's version and git commit (None outside a git checkout)."""
    import yaml

    version = None
    try:
        with open(os.path.join(_COLLECTION_ROOT, "galaxy.yml")) as fh:
            version = (yaml.safe_load(fh) or {}).get("version")
    except (OSError, ValueError):
        pass
    try:
        commit = subprocess.run(["git", "-C", _COLLECTION_ROOT, "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", _COLLECTION_ROOT, "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"version": version, "git_commit": commit, "git_dirty": dirty}


def known_secrets(task_vars, templar):
    """Every string variable of the host whose name is secret (tokens, keys, passwords), rendered."""
    out = []
    for name, value in (task_vars or {}).items():
        if not secrets.is_secret_name(name) or not value:
            continue
        try:
            value = templar.template(value) if templar is not None else value
        except Exception:  # noqa: BLE001 - an unrenderable variable is not a secret we can know
            continue
        if isinstance(value, str) and len(value) >= 4:
            out.append(value)
    return out


def writable(directory):
    """Whether records can be written under ``directory`` (or the nearest parent that exists)."""
    probe = directory
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe.rstrip("/"))
        if parent == probe:
            break
        probe = parent
    return bool(probe) and os.access(probe, os.W_OK | os.X_OK)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    @staticmethod
    def _stop_if_unwritable(base, sweep):
        """A results directory that turned read-only: the record still travels in the result, the callback keeps it
        aside (records.unwritten_dir) and prints where; the next point does not start, the restore still runs on
        every record, kept or not, and the run's last check (state verify) fails."""
        if not writable(sweep["dir"]):
            base["moesweep_unwritable"] = sweep["dir"]

    @staticmethod
    def _verify(base, sweep, host, written):
        """Fail the run when a record of this host could not be written to the sweep's points.jsonl: kept aside
        (their paths named), or nowhere at all (the run's output holds it)."""
        points_path = os.path.join(sweep["dir"], records.POINTS_FILE)
        on_disk = records.read_points(points_path)
        kept = [(path, rec) for path, rec in records.kept_records(sweep.get("sweep_id")) if rec.get("host") == host]
        kept_keys = {(r.get("kind"), r.get("point"), r.get("finished")) for _, r in kept}
        disk_keys = {(r.get("kind"), r.get("point"), r.get("finished")) for r in on_disk if r.get("host") == host}
        lost = [w for w in written if w.get("finished")
                and (w.get("kind") or "point", w.get("point"), w.get("finished")) not in kept_keys | disk_keys]
        if not kept and not lost:
            base["msg"] = "every record of %s is in %s" % (host, points_path)
            return base
        parts = []
        if kept:
            parts.append("%d record(s) of %s could not be written to %s and are kept in %s (%s)" % (
                len(kept), host, points_path, os.path.dirname(kept[0][0]),
                ", ".join(os.path.basename(p) for p, _ in kept)))
        if lost:
            parts.append("the record(s) of %s could be written nowhere: the run's output holds them (moesweep: could "
                         "not write ...)" % ", ".join("%s %s" % (w.get("kind") or "point", w.get("point") or "")
                                                      for w in lost))
        base.update(failed=True, moesweep_unrecorded=[p for p, _ in kept], msg=(
            "; ".join(parts) + ". Make %s writable (or free space) and run the same sweep again: the kept records "
            "are put into points.jsonl, and the points not run then run" % sweep["dir"]))
        return base

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        a = action_args.validated("sweep_record", ARGUMENT_SPEC, self._task.args)
        task_vars = task_vars or {}
        # A node group's point is one record, under its rank 0 (record_host), whichever rank writes it.
        host = a["record_host"] or task_vars.get("inventory_hostname")
        sweep = a["sweep"]
        base = {"changed": False, "moesweep_sweep": sweep, "moesweep_host": host}
        stop_file = os.path.join(sweep["dir"], records.STOP_FILE)
        if a["state"] == "verify":
            return self._verify(base, sweep, host, a["written"])
        if a["state"] == "start":
            if os.path.exists(stop_file):
                base.update(stopped=True, msg="the sweep was asked to stop (%s): point %s not run" % (
                    stop_file, a["point"]))
                return base
            kept = records.kept_records(sweep.get("sweep_id"))
            if kept:
                # no point runs that could not be recorded (a full disk, a results directory gone read-only)
                base.update(stopped=True, msg="records of this sweep could not be written to %s (kept in %s): point "
                            "%s not run; the restore still runs, on every record" % (
                                sweep["dir"], os.path.dirname(kept[0][0]), a["point"]))
                return base
            # simulated: the records the callback writes itself for this point (interrupted, unreachable) say so too
            base.update(moesweep_event="point_started", point=a["point"], started=records.now_iso(),
                        started_at=time.time(), stopped=False, simulated=bool(task_vars.get("moesweep_simulated")),
                        msg="point %s started" % a["point"])
            return base
        if a["state"] == "stop_check":
            if os.path.exists(stop_file):
                base.update(failed=True, moesweep_stop=True,
                            msg="the sweep was asked to stop after this step (%s): point %s ends here, interrupted"
                                % (stop_file, a["point"]))
            return base
        points_path = os.path.join(sweep["dir"], records.POINTS_FILE)
        if a["state"] == "resume":
            config = records.config_hash(a["launch_hash"], a["bench_settings"], a["lock_sha256"])
            found = None if sweep.get("rerun") else records.passing_record(
                records.all_records(points_path, sweep.get("sweep_id")), host, config)
            base.update(moesweep_event="resume", config_hash=config, skip=found is not None, point=a["point"])
            base["msg"] = ("point %s already passed with this configuration (%s): skipped; -e rerun=true runs it again"
                           % (a["point"], found.get("finished")) if found else "point %s: to run" % a["point"])
            if found:
                base["previous_record"] = {k: found.get(k) for k in ("finished", "status", "backend", "config_hash")}
                if a["recorder"]:
                    # the record the point stands on becomes its latest: what the summary, the restore and the exit
                    # status read is this configuration's, not a later record of another configuration
                    base["moesweep_record"] = records.resumed_record(found)
                return base
            measured = records.all_records(points_path, sweep.get("sweep_id"))
            if sweep.get("rerun"):
                # rerun measures again: only what this run measured stands for another point
                measured = [r for r in measured if str(r.get("finished") or "") >= str(sweep.get("created") or "")]
            same = None if sweep.get("measure_equivalent") else equivalence.measured_equivalent(
                measured, host, sweep.get("sweep_id"), a["point"], a["launch"], a["preflight"], a["bench_settings"],
                a["lock_sha256"])
            if same:
                # the same kernels as a point measured in this sweep: not started, recorded on that one's figures
                record = equivalence.same_as_record(same, a["point"], a["launch"], a["preflight"], config,
                                                    records.now_iso(), records.now_iso())
                base.update(skip=True, same_as=record["same_as"], msg=(
                    "point %s runs the kernels of %s, measured in this sweep (MoE runner %s by %s): not started, "
                    "recorded on its figures; -e measure_equivalent=true measures it" % (
                        a["point"], same["point"], record["same_as"]["moe_runner"],
                        record["same_as"]["resolution"])))
                if a["recorder"]:
                    base["moesweep_record"] = record
            elif not sweep.get("measure_equivalent"):
                near = equivalence.near_miss(measured, host, sweep.get("sweep_id"), a["point"], a["launch"],
                                             a["preflight"])
                if near:
                    base["msg"] += " (%s runs its MoE runner too, but differs in %s: measured)" % (
                        near[0], ", ".join(near[1][:6]))
            return base
        if a["state"] == "previous":
            plan = server_schedule(sweep, host, records.all_records(points_path, sweep.get("sweep_id")), "sweep",
                                   stop_requested=os.path.exists(stop_file), check_mode=self._task.check_mode)
            base.update(stop_early=plan["stop_early"], stop_reason=plan["reason"], msg=plan["reason"])
            return base
        if a["state"] == "interconnect" and not a["interconnect"]:
            key, env, ranks = records.interconnect_key(a["launch"])
            found = a["measured"].get(key)
            # a rerun measures its points again, not the host's interconnect: measuring stops the server
            if not found:
                found = records.find_interconnect(records.read_interconnect(
                    os.path.join(sweep["dir"], records.INTERCONNECT_FILE)), host, key)
            what = "the all-reduce over %d GPU(s) under %s" % (ranks, interconnect.environment_text(env))
            base.update(key=key, nccl_environment=env, ranks=ranks, found=bool(found), measurement=found or {},
                        msg="%s was measured on %s (%s): not measured again" % (
                            what, host, found.get("finished") or "this run") if found else what + ": to measure")
            return base
        if a["state"] == "restore_plan":
            choice = restore.choose_restore(records.all_records(points_path, sweep.get("sweep_id")), host,
                                            sweep.get("restore", "best"),
                                            sweep.get("reference_concurrency"), a["previous"], sweep.get("points"))
            plan = server_schedule(sweep, host, [], "restore", choice=choice, running_point=a["running_point"],
                                   running_stopped=a["running_stopped"])
            base.update(choice=choice, stop_early=plan["stop_early"], keep_running=plan["keep_running"],
                        msg=choice["reason"] + ("; " + plan["reason"] if plan["reason"] else ""))
            return base
        ctx = {"sweep_id": sweep.get("sweep_id"), "host": host, "simulated": bool(task_vars.get("moesweep_simulated")),
               "known_secrets": known_secrets(task_vars, self._templar), "moesweep": moesweep_version()}
        if a["state"] == "interconnect":
            record = records.build_interconnect_record(dict(ctx, measurement=a["interconnect"], point=a["point"]))
            self._stop_if_unwritable(base, sweep)
            base.update(moesweep_event="interconnect", moesweep_record=record, key=record["key"],
                        measurement=record, msg="%s: all-reduce over %s GPU(s) under %s measured in %s s" % (
                            host, record["ranks"], record["environment_text"], record["elapsed"]))
            return base
        if a["state"] == "restore":
            choice = a["choice"] or {}
            ctx.update(point=choice.get("point"), backend=choice.get("backend"), policy=sweep.get("restore"),
                       previous_active=bool((a["previous"] or {}).get("active")),
                       action=choice.get("action"), reason=choice.get("reason"), ties=choice.get("ties") or [],
                       started=a["started"],
                       readiness=a["readiness"] or a["failed_result"], failed_task=a["failed_task"],
                       failed_msg=(a["failed_result"] or {}).get("msg"), nodes=a["nodes"])
            record = records.build_restore_record(ctx)
            self._stop_if_unwritable(base, sweep)
            base.update(moesweep_event="record", moesweep_record=record, artifacts={},
                        msg="restore (%s): %s - %s" % (record["action"], record["status"], record["reason"]))
            if base.get("moesweep_unwritable"):
                base["msg"] = ("the results directory %s is not writable (any more): the restore record is kept where "
                               "the run prints it (moesweep: kept ...), and the run fails at its end" % sweep["dir"])
            return base
        # state == point
        failed_stage = stage = None
        if a["failed_task"]:
            failed_stage = stage = status.stage_of(a["failed_action"], a["failed_result"])
        if a["interrupted"]:
            failed_stage = "interrupted"
        stage_results = {"readiness": a["readiness"], "smoke": a["smoke"], "benchmark": a["benchmark"],
                         "preflight": a["preflight"], "accuracy": a["accuracy"]}
        if stage in stage_results and not stage_results[stage]:
            # what the failed (or stopped) stage returned: a benchmark stopped between levels keeps the ended ones
            stage_results[stage] = a["failed_result"]
        preflight = stage_results["preflight"]
        launch = a["launch"] or preflight.get("launch") or {}
        started_at = a["started_at"]
        ctx.update(point=a["point"], started=a["started"], seconds=round(time.time() - started_at, 2)
                   if started_at else None, config_hash=a["config_hash"], facts=a["facts"],
                   provenance=a["provenance"], preflight=preflight, launch=launch,
                   readiness=stage_results["readiness"], smoke=stage_results["smoke"],
                   accuracy=stage_results["accuracy"], accuracy_settings=sweep.get("accuracy") or {},
                   benchmark=stage_results["benchmark"], failed_stage=failed_stage, failed_result=a["failed_result"],
                   failed_task=a["failed_task"], failed_msg=(a["failed_result"] or {}).get("msg"),
                   bench_settings=a["bench_settings"], reference_concurrency=sweep.get("reference_concurrency"),
                   unit_sha256=None, artifacts=[], nodes=a["nodes"], interconnect=a["interconnect"],
                   model=a["model"],
                   axes=((sweep.get("matrix") or {}).get("cells") or {}).get(a["point"]))
        artifacts = {}
        files = dict(a["files"] or {})
        if (files or a["invocation_id"]) and not self._task.check_mode:
            res = self._execute_module(module_name="moesweep.sweep.point_artifacts",
                                       module_args={"files": files, "env_files": a["env_files"],
                                                    "invocation_id": a["invocation_id"]},
                                       task_vars=task_vars)
            if not res.get("failed"):
                artifacts = {name: art for name, art in (res.get("artifacts") or {}).items()
                             if not art.get("missing")}
        unit = artifacts.get("unit.service") or {}
        ctx.update(seconds=round(time.time() - started_at, 2) if started_at else None,
                   unit_sha256=unit.get("sha256"), artifacts=list(artifacts),
                   # NCCL's INFO lines of the server's run, where its unit sets NCCL_DEBUG=INFO
                   # (records.server_transport)
                   journal=(artifacts.get("journal.txt") or {}).get("content"))
        record = records.build_point_record(ctx)
        self._stop_if_unwritable(base, sweep)
        # whether the playbook stops this point's server at once (the server role's stop entry point); this point's
        # record, not yet written, counts
        plan = server_schedule(sweep, host, records.all_records(points_path, sweep.get("sweep_id")) + [record], "point",
                               point=a["point"], stop_requested=os.path.exists(stop_file),
                               check_mode=self._task.check_mode, writable=not base.get("moesweep_unwritable"))
        base.update(moesweep_event="record", moesweep_record=record, stop_early=plan["stop_early"],
                    stop_reason=plan["reason"],
                    # the host redacted secret names and credential-looking strings; the known secret values of
                    # this host's variables (an API key of any shape) go here, before any output or file holds them
                    artifacts={name: secrets.redact_text(art.get("content") or "", ctx["known_secrets"])
                               for name, art in artifacts.items()},
                    msg="%s %s: %s%s" % (host, a["point"], record["status"],
                                         " (%s)" % record["cause"] if record.get("cause") else ""))
        if base.get("moesweep_unwritable"):
            base["msg"] = ("the results directory %s is not writable (any more): the sweep stops after this point. "
                           "The record of %s %s is kept where the run prints it (moesweep: kept ...); make the "
                           "directory writable and run the same sweep again to go on"
                           % (sweep["dir"], host, a["point"]))
        return base
