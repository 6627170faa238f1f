"""Sweep plans and point records: the user's inputs refused before any point, status from what the stages
returned, resume by configuration hash, and the restore choice."""

from __future__ import annotations

import json
import os

import pytest
from ansible_collections.moesweep.sweep.plugins.plugin_utils import records


@pytest.mark.parametrize("backend,backends,expected", [
    ("flashinfer_cutedsl", None, ["flashinfer_cutedsl"]),
    (None, ["a", "b"], ["a", "b"]),
    (None, "a,b", ["a", "b"]),
    (None, "[a, b]", ["a", "b"]),
    (None, "compatible", "compatible"),
])
def test_points(backend, backends, expected):
    assert records.parse_points(backend, backends) == expected


@pytest.mark.parametrize("backend,backends,needle", [
    ("a", ["b"], "not both"),
    (None, [], "empty list"),
    (None, "", "no sweep point"),
    (None, None, "no sweep point"),
    (None, ["a", "a"], "twice"),
    (None, ["a;reboot"], "not a plain name"),
    (["a"], None, "one name"),
])
def test_bad_points(backend, backends, needle):
    with pytest.raises(records.PlanError, match=None) as exc:
        records.parse_points(backend, backends)
    assert needle in str(exc.value)


def test_typo_suggests_the_closest_valid_name():
    with pytest.raises(records.PlanError) as exc:
        records.check_points(["flashinfer_cutlas"], {"custom": {}}, ["flashinfer_cutlass", "triton"])
    assert "did you mean 'flashinfer_cutlass'" in str(exc.value)
    records.check_points(["custom", "triton"], {"custom": {}}, ["triton"])


def test_results_dir_checks(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(records.PlanError, match="is a file"):
        records.check_results_dir(str(f), os.path.isdir, os.path.exists, os.access)
    ro = tmp_path / "ro"
    ro.mkdir()
    with pytest.raises(records.PlanError, match="not writable"):
        records.check_results_dir(str(ro / "results"), os.path.isdir, os.path.exists, lambda p, m: False)
    records.check_results_dir(str(tmp_path / "new" / "results"), os.path.isdir, os.path.exists, os.access)


def test_settings_checks():
    records.check_settings("best", 64, [1, 8, 64], "false")
    with pytest.raises(records.PlanError, match="reference concurrency 16 is not one of"):
        records.check_settings("best", 16, [1, 8, 64], "false")
    with pytest.raises(records.PlanError, match="restore must be one of"):
        records.check_settings("latest", 64, [64], "false")


def test_sweep_id_is_stable_and_plain():
    a = records.sweep_id_for(["x", "y"], ["h2", "h1"], {"input_len": 1})
    assert a == records.sweep_id_for(["x", "y"], ["h1", "h2"], {"input_len": 1}) and a.startswith("sweep-")
    assert a != records.sweep_id_for(["y", "x"], ["h1", "h2"], {"input_len": 1})
    with pytest.raises(records.PlanError):
        records.check_sweep_id("../etc")


READY = {"state": "ready"}
OK_BENCH = {"state": "ok", "levels": [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 200.0,
                                                                                  "p99_ttft_ms": 50.0}}]}


@pytest.mark.parametrize("stage,failed,readiness,smoke,bench,expected", [
    (None, {}, READY, {"state": "ok"}, OK_BENCH, ("passed", None)),
    ("preflight", {"verdict": "unsupported"}, {}, {}, {}, ("refused", None)),
    ("readiness", {"state": "crashed", "cause": "oom"}, {"state": "crashed", "cause": "oom"}, {}, {},
     ("crashed", "oom")),
    ("readiness", {}, {"state": "hang"}, {}, {}, ("hang", None)),
    ("smoke", {}, READY, {"state": "bad_output"}, {}, ("bad_output", None)),
    ("smoke", {}, READY, {"state": "server_died", "crash": {"cause": "other"}}, {}, ("crashed", "other")),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "failed"}, ("bench_failed", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "invalid_gpu_state"}, ("invalid_gpu_state", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "server_died", "crash": {"cause": "killed"}},
     ("crashed", "killed")),
    # #37: a server that stalls after ready (the unit runs, no crash in its journal) is a hang, not a crash
    ("smoke", {}, READY, {"state": "server_died", "crash": {"state": "ready", "unit_gone": False}}, {}, ("hang", None)),
    ("benchmark", {}, READY, {"state": "ok"}, {"state": "server_died", "crash": {"state": "ready", "unit_gone": False}},
     ("hang", None)),
    ("smoke", {}, READY, {"state": "server_died", "crash": {"state": "crashed", "cause": "oom", "unit_gone": True}},
     {}, ("crashed", "oom")),
    ("interrupted", {}, READY, {}, {}, ("interrupted", None)),
    ("other", {"msg": "boom"}, READY, {"state": "ok"}, OK_BENCH, ("failed", None)),
])
def test_point_status(stage, failed, readiness, smoke, bench, expected):
    assert records.point_status(stage, failed, readiness, smoke, bench, {}) == expected


def test_record_is_redacted_and_complete():
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": OK_BENCH,
           "launch": {"backend": "triton", "argv": ["x", "--config", "/etc/moesweep/sglang.secrets.yaml"]},
           "failed_result": {}, "reference_concurrency": 8, "known_secrets": ["hf_supersecretvalue1234"],
           "provenance": {"note": "token hf_supersecretvalue1234"}}
    rec = records.build_point_record(ctx)
    assert rec["schema"] == records.SCHEMA and rec["status"] == "passed" and rec["backend"] == "triton"
    assert "hf_supersecret" not in json.dumps(rec) and rec["secrets"] == "redacted"
    assert rec["launch"]["argv"][-1] == "/etc/moesweep/sglang.secrets.yaml"  # a path, not a secret: kept


def test_read_points_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "points.jsonl"
    path.write_bytes(b'{"kind": "point", "point": "a"}\n{"kind": "point", "po')
    assert [r["point"] for r in records.read_points(str(path))] == ["a"]
    assert records.read_points(str(tmp_path / "missing")) == []


def _rec(point, status, tok=None, ttft=10.0, host="h", config="c"):
    levels = [{"concurrency": 8, "ok": tok is not None, "figures": {"output_throughput": tok, "p99_ttft_ms": ttft}}]
    return {"kind": "point", "host": host, "point": point, "status": status, "config_hash": config,
            "benchmark": {"levels": levels}}


def test_resume_finds_only_a_passing_record_of_that_host_and_configuration():
    recs = [_rec("a", "crashed", config="c1"), _rec("a", "passed", 100, config="c1"), _rec("b", "passed", 5, host="x")]
    assert records.passing_record(recs, "h", "c1")["point"] == "a"
    assert records.passing_record(recs, "h", "c2") is None
    assert records.passing_record(recs, "h", records.config_hash("l", {"a": 1}, "s")) is None
    assert records.config_hash("l", {"a": 1}, "s") != records.config_hash("l", {"a": 2}, "s")


def test_restore_choice():
    recs = [_rec("a", "passed", 100.0), _rec("b", "passed", 150.0, ttft=99), _rec("c", "passed", 150.0, ttft=20),
            _rec("d", "crashed")]
    best = records.choose_restore(recs, "h", "best", 8, {"unit": True}, ["a", "b", "c", "d"])
    assert best["action"] == "point" and best["point"] == "c" and "150.0 output tok/s" in best["reason"]
    assert records.choose_restore(recs, "h", "previous", 8, {"unit": True}, None)["action"] == "previous"
    nothing = [_rec("d", "crashed")]
    fallback = records.choose_restore(nothing, "h", "best", 8, {"unit": True, "active": True}, None)
    assert fallback["action"] == "previous" and "no point passed" in fallback["reason"]
    assert records.choose_restore(nothing, "h", "best", 8, {"unit": False}, None)["action"] == "none"
    assert records.choose_restore(recs, "h", "none", 8, {}, None)["action"] == "none"


def test_restore_record_status():
    assert records.build_restore_record({"action": "point", "readiness": READY})["status"] == "passed"
    failed = records.build_restore_record({"action": "point", "readiness": {"state": "crashed", "cause": "oom"}})
    assert failed["status"] == "failed" and failed["cause"] == "oom"
    assert records.build_restore_record({"action": "previous", "previous_active": False})["status"] == "passed"


def test_settings_that_must_be_numbers():
    records.check_numbers({"sglang_server_ready_timeout": "1800", "sglang_bench_input_len": 32})
    for bad in ("abc", 0, -5, True, None):
        with pytest.raises(records.PlanError) as exc:
            records.check_numbers({"sglang_server_ready_timeout": bad})
        message = str(exc.value)
        assert "sglang_server_ready_timeout" in message and "-e sglang_server_ready_timeout=1800" in message


def _facts(**over):
    base = {"gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "gpu_count": 8,
            "driver_version": "570.172.08", "interconnect": "pcie-phb", "virtualization": {"kind": "vm"}}
    base.update(over)
    return records.comparable_facts(base, {"lock_sha256": "abc"})


def test_spread_over_comparable_hosts_runs_each_point_once():
    hosts = {f"h{i}": _facts() for i in range(1, 5)}
    points = ["a", "b", "c", "d", "e"]
    got = {h: records.spread_points(points, hosts, h, "true")[0] for h in hosts}
    assert sorted(p for ps in got.values() for p in ps) == points
    assert got == {"h1": ["a", "e"], "h2": ["b"], "h3": ["c"], "h4": ["d"]}
    assert records.spread_points(points, hosts, "h2", "false") == (points, ["h2"])


def test_spread_refuses_hosts_that_differ_naming_the_fact_and_the_hosts():
    hosts = {"h1": _facts(), "h2": _facts(driver_version="580.159.04")}
    with pytest.raises(records.PlanError) as exc:
        records.spread_points(["a", "b"], hosts, "h1", "true")
    message = str(exc.value)
    assert "driver_version differs" in message and "h1" in message and "h2" in message and "by_facts" in message


def test_spread_by_facts_groups_identical_hosts():
    hosts = {"a1": _facts(), "a2": _facts(), "b1": _facts(gpu_count=4)}
    assert records.spread_points(["x", "y"], hosts, "a1", "by_facts") == (["x"], ["a1", "a2"])
    assert records.spread_points(["x", "y"], hosts, "a2", "by_facts") == (["y"], ["a1", "a2"])
    assert records.spread_points(["x", "y"], hosts, "b1", "by_facts") == (["x", "y"], ["b1"])


def test_a_host_the_spread_gave_no_point_is_left_alone():
    choice = records.choose_restore([], "h5", "best", 8, {"unit": True, "active": True}, [])
    assert choice["action"] == "none" and "no point" in choice["reason"]


@pytest.mark.parametrize("action,result,stage", [
    ("moesweep.sweep.sglang_ready", {"state": "crashed"}, "readiness"),
    # the restart's stop and release wait, run by the readiness call (its release option): nothing started
    ("moesweep.sweep.sglang_ready", {"released": {"released": False, "stopped": True}}, "restart"),
    ("moesweep.sweep.sglang_ready", {"released": {"released": True}, "state": "hang"}, "readiness"),
    ("moesweep.sweep.gpu_released", {"released": False}, "restart"),
    ("moesweep.sweep.sglang_nodes", {"stage": "restart"}, "restart"),
    ("ansible.builtin.assert", {}, "other"),
])
def test_stage_of_a_failed_task(action, result, stage):
    assert records.stage_of(action, result) == stage


def test_a_restarts_release_wait_is_kept_in_the_record():
    released = {"stopped": True, "released": True, "elapsed": 0.41, "holders": [], "port_holders": [],
                "memory_used_mib": [3, 3]}
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": dict(READY, released=released),
           "smoke": {"state": "ok"}, "benchmark": OK_BENCH, "launch": {"backend": "triton"}, "failed_result": {},
           "reference_concurrency": 8}
    assert records.build_point_record(ctx)["readiness"]["released"] == released


# ------------------------------------------------------------------------------------------------ interconnect


def _measurement():
    from ansible_collections.moesweep.sweep.plugins.module_utils import interconnect
    from helpers.paths import FIXTURES

    table = interconnect.parse_all_reduce_perf(
        (FIXTURES / "interconnect" / "rtx4090-x8-sys-no-p2p.txt").read_text())
    return dict(table, key="k8", environment_text="NCCL_P2P_LEVEL=PHB", nccl_environment={"NCCL_P2P_LEVEL": "PHB"},
                model={"layers": 78, "hidden_size": 6144, "model_type": "glm_moe_dsa"}, elapsed=12.5,
                measured="2026-12-06T05:00:00Z", output="...")


def test_the_key_is_the_units_nccl_environment_and_tp_size():
    launch = {"flags": {"tp-size": 8}, "environment": {"NCCL_P2P_LEVEL": "PHB", "OMP_NUM_THREADS": "8"}}
    key, env, ranks = records.interconnect_key(launch)
    assert env == {"NCCL_P2P_LEVEL": "PHB"} and ranks == 8
    assert key == records.interconnect_key(dict(launch, environment={"NCCL_P2P_LEVEL": "PHB"}))[0]
    assert key != records.interconnect_key(dict(launch, flags={"tp-size": 4}))[0]
    assert records.interconnect_key({})[2] == 1


def test_a_resumed_sweep_finds_the_measurement_of_that_host_and_key(tmp_path):
    path = tmp_path / records.INTERCONNECT_FILE
    lines = [{"kind": "interconnect", "host": "h", "key": "k8", "finished": "1"},
             {"kind": "interconnect", "host": "x", "key": "k8", "finished": "2"},
             {"kind": "interconnect", "host": "h", "key": "k8", "finished": "3"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"kind": "inter')
    found = records.read_interconnect(str(path))
    assert records.find_interconnect(found, "h", "k8")["finished"] == "3"
    assert records.find_interconnect(found, "h", "k4") is None


def test_interconnect_record_keeps_the_table_and_not_secrets():
    rec = records.build_interconnect_record({"sweep_id": "s", "host": "h", "point": "p",
                                             "measurement": _measurement(), "known_secrets": []})
    assert rec["kind"] == "interconnect" and rec["schema"] == records.INTERCONNECT_SCHEMA
    assert rec["key"] == "k8" and rec["ranks"] == 8 and len(rec["rows"]) == 25 and rec["model"]["layers"] == 78


def test_point_record_names_interconnect_bound_at_the_reference_level():
    levels = [{"concurrency": c, "ok": True, "figures": {"output_throughput": 100.0, "median_itl_ms": itl},
               "diagnosis": {"verdict": "launch_bound", "evidence": ["util 99 %"]}}
              for c, itl in ((1, 400.0), (64, 105.0))]
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": {"state": "ok", "levels": levels}, "failed_result": {}, "reference_concurrency": 64,
           "launch": {"backend": "triton", "flags": {"tp-size": 8, "max-running-requests": 64},
                      "environment": {"NCCL_P2P_LEVEL": "PHB"}},
           "interconnect": _measurement()}
    first = records.build_point_record(ctx)
    rec = records.build_point_record(ctx)  # built twice from the same results, as the action does: the same record
    assert first["benchmark"] == rec["benchmark"] and ctx["benchmark"]["levels"][1]["diagnosis"]["verdict"] == (
        "launch_bound")
    assert rec["diagnosis"]["verdict"] == "interconnect_bound"
    assert rec["diagnosis"]["telemetry_verdict"] == "launch_bound"
    assert rec["diagnosis"]["interconnect"]["share"] > 0.15
    low = rec["benchmark"]["levels"][0]["diagnosis"]
    assert low["verdict"] == "launch_bound" and low["interconnect"]["share"] < 0.15
    assert rec["interconnect"] == {"key": "k8", "environment_text": "NCCL_P2P_LEVEL=PHB", "ranks": 8,
                                   "nccl_version": None, "model": _measurement()["model"],
                                   "measured": "2026-12-06T05:00:00Z"}


def test_a_point_without_a_measurement_keeps_its_telemetry_verdict():
    levels = [{"concurrency": 8, "ok": True, "figures": {"output_throughput": 1.0, "median_itl_ms": 10.0},
               "diagnosis": {"verdict": "launch_bound", "evidence": []}}]
    rec = records.build_point_record({"benchmark": {"state": "ok", "levels": levels}, "readiness": READY,
                                      "reference_concurrency": 8})
    assert rec["diagnosis"]["verdict"] == "launch_bound" and "interconnect" not in rec
def _rec_ci(point, tok, half_width_rel, ttft):
    rec = _rec(point, "passed", tok, ttft=ttft)
    rec["benchmark"]["levels"][0]["stats"] = {
        "steady_output_throughput": {"value": tok, "low": tok * (1 - half_width_rel),
                                     "high": tok * (1 + half_width_rel), "half_width": tok * half_width_rel,
                                     "half_width_rel": half_width_rel, "requests": 16},
        "precision_target": 0.02}
    return rec


def test_restore_takes_the_faster_point_unless_they_tie_and_says_the_rule():
    ordered = records.choose_restore([_rec_ci("a", 100.0, 0.01, 10.0), _rec_ci("b", 110.0, 0.01, 50.0)], "h", "best",
                                     8, {}, ["a", "b"])
    assert ordered["point"] == "b" and ordered["ties"] == [] and "steady state 110 [" in ordered["reason"]
    tie = records.choose_restore([_rec_ci("a", 100.0, 0.01, 10.0), _rec_ci("b", 101.0, 0.01, 50.0)], "h", "best",
                                 8, {}, ["a", "b"])
    assert tie["point"] == "a" and tie["ties"] == ["b"] and "lower p99 TTFT" in tie["reason"]
    record = records.build_restore_record({"action": "point", "point": "a", "ties": tie["ties"], "reason": "r"})
    assert record["ties"] == ["b"]


def test_read_points_keeps_a_whole_last_record_without_newline(tmp_path):
    """A file whose last record lacks its newline (written by hand, by another tool, or cut after the closing brace)
    still holds that record: `moesweep report` shows it and resume skips its point (re-probe #37 item 6)."""
    path = tmp_path / "points.jsonl"
    path.write_bytes(b'{"kind": "point", "point": "a"}\n{"kind": "point", "point": "b", "status": "passed"}')
    assert [r["point"] for r in records.read_points(str(path))] == ["a", "b"]
    path.write_bytes(b'{"kind": "point", "point": "b", "status": "passed"}')
    assert [r["point"] for r in records.read_points(str(path))] == ["b"]


def test_a_point_records_the_model_it_served():
    staged = {"repo_id": "lukealonso/GLM-5-NVFP4", "revision": "3f0c1e2a9b8d7c6e5f4a3b2c1d0e9f8a7b6c5d4e",
              "local_path": "/var/lib/sglang/models/lukealonso/GLM-5-NVFP4", "bytes": 453000000000,
              "downloaded": False, "files": 97, "refetched": [], "changed": False}
    ctx = {"sweep_id": "s", "host": "h", "point": "p", "readiness": READY, "smoke": {"state": "ok"},
           "benchmark": OK_BENCH, "launch": {"backend": "triton"}, "failed_result": {}, "reference_concurrency": 8,
           "model": staged}
    assert records.build_point_record(ctx)["model"] == {k: staged[k] for k in records.MODEL_KEYS}
    # a pre-staged directory: only where it is
    ctx["model"] = {"local_path": "/models/GLM-5-NVFP4"}
    assert records.build_point_record(ctx)["model"] == {"local_path": "/models/GLM-5-NVFP4"}


def test_a_model_that_could_not_be_staged_refuses_the_point():
    msg = ("lukealonso/GLM-5-NVFP4 (staging refused at 3f0c1e2a9b8d): 421.9 GiB to download (of 421.9 GiB in 97 "
           "files) and 10.0 GiB kept free for the JIT caches need 431.9 GiB, but /var/lib/sglang/models has 200.0 GiB "
           "free")
    stage = records.stage_of("moesweep.sweep.model_stage", {"msg": msg, "failed": True})
    assert stage == "preflight"
    # the same refusal, reported by the wait of the async staging job
    assert records.stage_of("moesweep.sweep.model_stage_wait", {"msg": msg, "failed": True}) == "preflight"
    assert records.point_status(stage, {"msg": msg}, {}, {}, {}, {}) == ("refused", None)
