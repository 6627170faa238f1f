"""sweep_record: a record that could not be written still counts (resume, restore) and fails the run at its end,
a skipped point's record becomes its latest again (re-probe #37 items 1 and 5); its interconnect step: whether
the host's all-reduce was measured under the point's NCCL environment (this run's measurements, then the sweep's
interconnect.jsonl, also when the sweep reruns its points), and the record of a new measurement the callback
appends; and the
early-stop schedule it returns at the steps previous, point and restore_plan, while its only host call (the point's
artifacts) stops nothing."""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest
from ansible_collections.moesweep.sweep.plugins.action import sweep_record as action
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records, restore

LAUNCH = {"flags": {"tp-size": 8}, "environment": {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8"}}


def run(tmp_path, rerun=False, **args):
    sweep = {"sweep_id": "s1", "dir": str(tmp_path / "s1"), "points": ["a"], "rerun": rerun}
    task = mock.MagicMock()
    task.args = dict(state="interconnect", sweep=sweep, point="a", **args)
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(action, "moesweep_version", return_value={}):
        return plugin.run(task_vars={"inventory_hostname": "h1"})


def test_not_measured_yet(tmp_path):
    res = run(tmp_path, launch=LAUNCH)
    assert res["found"] is False and res["ranks"] == 8 and res["nccl_environment"] == {"NCCL_P2P_LEVEL": "PHB"}
    assert res["msg"] == "the all-reduce over 8 GPU(s) under NCCL_P2P_LEVEL=PHB: to measure"
    assert "moesweep_event" not in res


def test_measured_earlier_in_this_run(tmp_path):
    key = run(tmp_path, launch=LAUNCH)["key"]
    res = run(tmp_path, launch=LAUNCH, measured={key: {"key": key, "ranks": 8}})
    assert res["found"] is True and res["measurement"]["key"] == key


def test_a_resumed_or_rerun_sweep_finds_the_recorded_measurement(tmp_path):
    key = run(tmp_path, launch=LAUNCH)["key"]
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / records.INTERCONNECT_FILE).write_text(json.dumps(
        {"kind": "interconnect", "host": "h1", "key": key, "finished": "2026-12-06T05:00:00+00:00"}) + "\n")
    res = run(tmp_path, launch=LAUNCH)
    assert res["found"] is True and "measured on h1 (2026-12-06T05:00:00+00:00): not measured again" in res["msg"]
    assert run(tmp_path, rerun=True, launch=LAUNCH)["found"] is True  # measuring would stop the running server
    # another NCCL environment is measured again
    other = dict(LAUNCH, environment={"NCCL_P2P_LEVEL": "SYS"})
    assert run(tmp_path, launch=other)["found"] is False


def test_a_new_measurement_becomes_a_record_for_the_callback(tmp_path):
    m = {"key": "k", "ranks": 8, "rows": [{"size": 4096, "time_us": 43.18}], "environment_text": "NCCL_P2P_LEVEL=PHB",
         "elapsed": 2.2}
    res = run(tmp_path, interconnect=m)
    assert res["moesweep_event"] == "interconnect" and res["moesweep_record"]["kind"] == "interconnect"
    assert res["moesweep_record"]["host"] == "h1" and res["measurement"]["rows"] == m["rows"]
    assert res["msg"] == "h1: all-reduce over 8 GPU(s) under NCCL_P2P_LEVEL=PHB measured in 2.2 s"


# ------------------------------------------------------------------------------------------------ #37


@pytest.fixture(autouse=True)
def kept_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(records.UNWRITTEN_ENV, str(tmp_path / "kept"))
    return tmp_path / "kept"


def sweep(tmp_path, **more):
    return dict({"sweep_id": "s1", "dir": str(tmp_path / "results" / "s1"), "points": ["a", "b"], "restore": "best",
                 "reference_concurrency": 8, "starts_server": ["a", "b"]}, **more)


def call(**args):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    with mock.patch.object(action.ActionBase, "run", return_value={}):
        return plugin.run(task_vars={"inventory_hostname": "h1"})


def passed(point, tok, finished="2026-12-06T05:00:00+00:00", config="c1"):
    return {"kind": "point", "sweep_id": "s1", "host": "h1", "point": point, "status": "passed", "config_hash": config,
            "finished": finished, "benchmark": {"levels": [{"concurrency": 8, "ok": True,
                                                            "figures": {"output_throughput": tok}}]}}


def keep(kept_dir, record, name):
    (kept_dir / "s1").mkdir(parents=True, exist_ok=True)
    (kept_dir / "s1" / name).write_text(json.dumps(record))


def write_points(tmp_path, *recs):
    path = tmp_path / "results" / "s1" / records.POINTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_the_restore_decides_on_every_record_kept_or_not(tmp_path, kept_dir):
    write_points(tmp_path, passed("a", 100.0))
    keep(kept_dir, passed("b", 200.0), "1__h1__b.json")  # the disk filled up: b's record never reached points.jsonl
    res = call(state="restore_plan", sweep=sweep(tmp_path))
    assert res["choice"]["point"] == "b", res["choice"]


def test_no_point_starts_once_a_record_could_not_be_written(tmp_path, kept_dir):
    write_points(tmp_path, passed("a", 100.0))
    keep(kept_dir, passed("a", 100.0, finished="2026-12-06T05:01:00+00:00"), "1__h1__a.json")
    res = call(state="start", sweep=sweep(tmp_path), point="b")
    assert res["stopped"] is True and str(kept_dir / "s1") in res["msg"]


def test_verify_fails_naming_the_kept_records_and_the_lost_ones(tmp_path, kept_dir):
    write_points(tmp_path, passed("a", 100.0))
    ok = call(state="verify", sweep=sweep(tmp_path),
             written=[{"kind": "point", "point": "a", "finished": "2026-12-06T05:00:00+00:00"}])
    assert not ok.get("failed"), ok
    keep(kept_dir, passed("b", 200.0, finished="2026-12-06T05:02:00+00:00"), "1__h1__b.json")
    res = call(state="verify", sweep=sweep(tmp_path),
              written=[{"kind": "point", "point": "a", "finished": "2026-12-06T05:00:00+00:00"},
                       {"kind": "point", "point": "b", "finished": "2026-12-06T05:02:00+00:00"},
                       {"kind": "restore", "point": "b", "finished": "2026-12-06T05:03:00+00:00"}])
    assert res["failed"] and res["moesweep_unrecorded"] == [str(kept_dir / "s1" / "1__h1__b.json")]
    assert "could be written nowhere" in res["msg"] and "restore b" in res["msg"]
    assert "run the same sweep again" in res["msg"]


def test_a_results_directory_never_created_fails_the_run(tmp_path):
    """ansible-playbook with a results directory that could not be created: no 'every point passed' (item 1)."""
    res = call(state="verify", sweep=sweep(tmp_path),
              written=[{"kind": "point", "point": "a", "finished": "2026-12-06T05:00:00+00:00"}])
    assert res["failed"] and "written nowhere" in res["msg"]


def test_a_skipped_point_stands_on_its_record_again(tmp_path):
    """Item 5: a crashed record of another configuration came after the passing one of this configuration; the
    skipped point's record is returned again for the callback to write as the latest."""
    config = records.config_hash("L", {}, "K")
    crashed = dict(passed("a", None, finished="2026-12-06T05:05:00+00:00", config="other"), status="crashed")
    write_points(tmp_path, passed("a", 100.0, config=config), crashed)
    res = call(state="resume", sweep=sweep(tmp_path), point="a", launch_hash="L", bench_settings={}, lock_sha256="K")
    assert res["skip"] and res["moesweep_record"]["status"] == "passed" and res["moesweep_record"]["resumed"]
    res = call(state="resume", sweep=sweep(tmp_path), point="a", launch_hash="L", bench_settings={}, lock_sha256="K",
              recorder=False)
    assert res["skip"] and "moesweep_record" not in res  # a node group's other ranks do not write it again
    # once written, the summary and the restore see this configuration's record
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import summary

    recs = [passed("a", 100.0, config=config), crashed, records.resumed_record(passed("a", 100.0, config=config))]
    assert [r["status"] for r in summary.point_records(recs)] == ["passed"]
    assert restore.choose_restore(recs, "h1", "best", 8, None, ["a"])["point"] == "a"


def test_a_kept_record_is_read_where_it_was_kept(tmp_path, kept_dir):
    keep(kept_dir, passed("b", 1.0), "2__h1__b.json")
    keep(kept_dir, passed("a", 1.0), "1__h1__a.json")
    (kept_dir / "s1" / "3__torn.json").write_text("{")
    assert [r["point"] for _, r in records.kept_records("s1")] == ["a", "b"]
    assert records.unwritten_dir("s1", {"HOME": "/home/u", "XDG_STATE_HOME": "/st"}) == "/st/moesweep/unwritten/s1"
    assert records.unwritten_dir("s1", {}) == os.path.join(os.path.expanduser("~"), ".local", "state", "moesweep",
                                                           "unwritten", "s1")


def test_artifacts_never_carry_a_known_secret(tmp_path):
    """An API key of no particular shape, in an artifact the host read (bench_serving's server_info in a level's
    result): redacted before the result reaches any output (-vvv) or file (#37 item 2)."""
    key = "plain-key-of-no-shape-77"
    task = mock.MagicMock()
    task.args = {"state": "point", "sweep": sweep(tmp_path, points=["a"], restore="none"), "point": "a",
                 "files": {"c8.result.json": "/var/lib/moesweep/runs/s1/a/x/c8.result.json"}}
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    content = json.dumps({"server_info": {"api_key": key}, "note": key})
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(plugin, "_execute_module", return_value={"artifacts": {"c8.result.json": {
                "content": content}}}):
        res = plugin.run(task_vars={"inventory_hostname": "h1", "sglang_server_api_key": key})
    assert key not in json.dumps(res) and "c8.result.json" in res["artifacts"]


# ---- the early-stop schedule (plugin_utils/schedule.py) as sweep_record returns it; it never stops anything itself

def step(tmp_path, state, check_mode=False, sweep=None, modules=None, **args):
    """sweep_record at ``state`` on host h1; ``modules`` collects the host modules it runs (name, args)."""
    sweep = dict({"sweep_id": "s1", "dir": str(tmp_path / "s1"), "points": ["a", "b"], "starts_server": ["a", "b"],
                  "restore": "best", "rerun": False, "reference_concurrency": 8}, **(sweep or {}))
    os.makedirs(sweep["dir"], exist_ok=True)
    task = mock.MagicMock()
    task.args = dict(state=state, sweep=sweep, **args)
    task.check_mode = check_mode
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    calls = modules if modules is not None else []

    def execute_module(module_name, module_args, task_vars):
        calls.append((module_name, dict(module_args)))
        return {"changed": False, "artifacts": {}}

    plugin._execute_module = execute_module
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(action, "moesweep_version", return_value={}), \
            mock.patch.object(action, "known_secrets", return_value=[]):
        return plugin.run(task_vars={"inventory_hostname": "h1"})


def test_the_point_record_says_stop_early_and_its_read_stops_nothing(tmp_path):
    modules = []
    res = step(tmp_path, "point", point="a", invocation_id="0" * 32, modules=modules)
    assert res["stop_early"] is True and res["stop_reason"].startswith("the next point b starts its own server")
    assert res["moesweep_record"]["point"] == "a" and not res.get("changed")
    assert modules == [("moesweep.sweep.point_artifacts", {"files": {}, "env_files": [], "invocation_id": "0" * 32})]
    assert "stop_server" not in res


def test_the_point_record_stops_nothing_early_in_check_mode_or_without_a_writable_results_directory(tmp_path):
    res = step(tmp_path, "point", check_mode=True, point="a")
    assert res["stop_early"] is False and res["stop_reason"] == "check mode: nothing is stopped"
    with mock.patch.object(action, "writable", return_value=False):
        res = step(tmp_path, "point", point="a")
    assert res["moesweep_unwritable"] and res["stop_early"] is False
    assert res["stop_reason"] == "the results directory is not writable: the sweep stops here"


def test_the_last_point_that_failed_is_stopped_early_when_the_restore_puts_back_another(tmp_path):
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / records.POINTS_FILE).write_text(json.dumps(
        {"kind": "point", "host": "h1", "point": "a", "status": "passed", "config_hash": "c",
         "benchmark": {"levels": [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 150.0,
                                                                             "p99_ttft_ms": 10.0}}]}}) + "\n")
    res = step(tmp_path, "point", point="b", readiness={"state": "crashed", "cause": "oom"},
               failed_task="wait", failed_action="moesweep.sweep.sglang_ready",
               failed_result={"state": "crashed", "cause": "oom"})
    assert res["moesweep_record"]["status"] != "passed"
    assert res["stop_early"] is True and "the restore puts back a" in res["stop_reason"]


def test_previous_and_restore_plan_answer_with_the_same_two_names(tmp_path):
    res = step(tmp_path, "previous")
    assert res["stop_early"] is True and "the next point a starts its own server" in res["stop_reason"]
    assert step(tmp_path, "previous", check_mode=True)["stop_early"] is False
    (tmp_path / "s1" / records.POINTS_FILE).write_text(json.dumps(
        {"kind": "point", "host": "h1", "point": "a", "status": "passed", "config_hash": "c",
         "benchmark": {"levels": [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 150.0,
                                                                             "p99_ttft_ms": 10.0}}]}}) + "\n")
    res = step(tmp_path, "restore_plan", running_point="b")
    assert res["choice"]["point"] == "a" and res["stop_early"] is True and res["keep_running"] is False
    assert res["msg"].endswith("; the server of b is stopped first (the restore starts another)")
    res = step(tmp_path, "restore_plan", running_point="a")
    assert res["stop_early"] is False and res["keep_running"] is True
    res = step(tmp_path, "restore_plan", running_point="b", running_stopped=True)
    assert res["stop_early"] is False and res["keep_running"] is False


def test_a_matrix_cell_refused_by_the_preflight_is_recorded_with_its_axes(tmp_path):
    axes = {"moe-runner-backend": "flashinfer_trtllm", "attention-backend": "flashinfer"}
    sweep = {"sweep_id": "s1", "dir": str(tmp_path / "s1"), "points": ["flashinfer_trtllm.flashinfer", "b"],
             "matrix": {"cells": {"flashinfer_trtllm.flashinfer": axes, "b": {}}}}
    task = mock.MagicMock()
    task.args = dict(state="point", sweep=sweep, point="flashinfer_trtllm.flashinfer",
                     failed_task="Plan and validate the launch", failed_action="moesweep.sweep.sglang_preflight",
                     failed_result={"failed": True, "msg": "refused", "verdict": "unsupported"},
                     preflight={"verdict": "unsupported", "reasons": [{"reason": "SM100 only"}],
                                "citations": ["https://example.invalid/x"]})
    task.check_mode = False
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    with mock.patch.object(action.ActionBase, "run", return_value={}), \
            mock.patch.object(action, "moesweep_version", return_value={}):
        res = plugin.run(task_vars={"inventory_hostname": "h1"})
    record = res["moesweep_record"]
    assert record["status"] == "refused" and record["axes"] == axes
    assert record["preflight"]["citations"] == ["https://example.invalid/x"]


def test_a_point_that_runs_the_kernels_of_a_measured_one_is_recorded_same_as_it(tmp_path, kept_dir):
    """#48: triton on 0.5.9 NVFP4 SM120 reaches the cutlass_moe_fp4 flashinfer_cutedsl already ran: not started,
    recorded on that point's figures with the evidence; the summary shows both, ranks one; measure_equivalent and a
    rerun's earlier records measure it."""
    from ansible_collections.moesweep.sweep.plugins.plugin_utils import preflight, summary

    def check(backend):
        return preflight.run_preflight({
            "backend": backend, "flags": {"model-path": "m", "tp-size": 8, "quantization": "modelopt_fp4"},
            "version_flags": {}, "backends": {}, "extra_flags": {}, "sglang_version": "0.5.9", "provenance": {},
            "environment": {}, "dry_run": "off",
            "gpu_facts": {"sm": "sm120", "gpu_count": 8, "cuda_toolkit": {"release": "12.8"}}})[0]

    cutedsl, triton = check("flashinfer_cutedsl"), check("triton")
    measured = dict(passed("flashinfer_cutedsl", 100.0, finished="2026-12-06T05:00:00+00:00"),
                    launch=cutedsl["launch"], preflight=cutedsl, provenance={"lock_sha256": "K"})
    measured["benchmark"]["settings"] = {"concurrency": [8]}
    write_points(tmp_path, measured)
    args = dict(state="resume", point="triton", launch_hash="L", bench_settings={"concurrency": [8]}, lock_sha256="K",
                launch=triton["launch"], preflight=triton)
    res = call(sweep=sweep(tmp_path), **args)
    assert res["skip"] is True and res["same_as"]["point"] == "flashinfer_cutedsl", res["msg"]
    assert "runs the kernels of flashinfer_cutedsl" in res["msg"] and "measure_equivalent=true" in res["msg"]
    rec = res["moesweep_record"]
    assert rec["point"] == "triton" and rec["status"] == "passed" and rec["same_as"]["moe_runner"] == "cutlass"
    assert rec["config_hash"] == records.config_hash("L", {"concurrency": [8]}, "K")
    rows = summary.summary_rows([measured, rec], 8)
    assert [(r["point"], r["best"], r["same_as"]) for r in rows] == [
        ("flashinfer_cutedsl", True, None), ("triton", False, "flashinfer_cutedsl")]
    assert "same kernels as flashinfer_cutedsl" in summary.render_text(rows)
    # one row group per measurement: the point standing on another follows it, whatever came between
    cutlass = dict(passed("flashinfer_cutlass", 90.0, finished="2026-12-06T05:01:00+00:00"))
    assert [r["point"] for r in summary.summary_rows([measured, cutlass, rec], 8)] == [
        "flashinfer_cutedsl", "triton", "flashinfer_cutlass"]
    assert restore.choose_restore([measured, rec], "h1", "best", 8, None, ["flashinfer_cutedsl", "triton"])[
        "point"] == "flashinfer_cutedsl"
    # measured anyway when asked; a rerun counts only what this run measured
    assert call(sweep=sweep(tmp_path, measure_equivalent=True), **args)["skip"] is False
    assert call(sweep=sweep(tmp_path, rerun=True, created="2026-12-06T06:00:00+00:00"), **args)["skip"] is False
    assert call(sweep=sweep(tmp_path, rerun=True, created="2026-12-06T04:00:00+00:00"), **args)["skip"] is True
